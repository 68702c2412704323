//! The OCSP peer response cache (`ocsp_cache`), as nats-server keeps it: responses to
//! peer checks by certificate fingerprint, with hit/miss/status counts; type `local`
//! (the default) keeps them in memory and saves them to `<local_store>/cache.json`
//! every `save_interval` when changed and at shutdown, loading them at startup; type
//! `none` keeps nothing. `preserve_revoked` keeps revoked responses when they expire.
//!
//! The file has the reference's shape (`{"<key>": {"subject", "cached_at",
//! "resp_status", "resp_expires", "resp"}}`); `resp` is the response in a Snappy framed
//! stream of uncompressed chunks, which the reference's S2 reader reads; the S2-compressed
//! chunks the reference writes are read too, so its cache file loads here.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::response::{CertStatus, Response};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// `ocsp_cache { type }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheType {
    None,
    Local,
}

/// `ocsp_cache { }` (nats-server's `OCSPResponseCacheConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    pub kind: CacheType,
    pub local_store: String,
    pub preserve_revoked: bool,
    pub save_interval: Duration,
}

pub const DEFAULT_DIR: &str = "_rc_";
pub const FILE_NAME: &str = "cache.json";
pub const DEFAULT_SAVE_INTERVAL: Duration = Duration::from_secs(300);
pub const MIN_SAVE_INTERVAL: Duration = Duration::from_secs(1);

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            kind: CacheType::Local,
            local_store: DEFAULT_DIR.into(),
            preserve_revoked: false,
            save_interval: DEFAULT_SAVE_INTERVAL,
        }
    }
}

/// The cache's counts (`/varz` `ocsp_peer_cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub responses: i64,
    pub hits: i64,
    pub misses: i64,
    pub revokes: i64,
    pub goods: i64,
    pub unknowns: i64,
}

impl CacheStats {
    fn adjust(&mut self, delta: i64, s: CertStatus) {
        self.responses += delta;
        match s {
            CertStatus::Good => self.goods += delta,
            CertStatus::Revoked => self.revokes += delta,
            CertStatus::Unknown => self.unknowns += delta,
        }
    }
}

/// One cached response, as the file holds it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Item {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    subject: String,
    cached_at: String,
    resp_status: CertStatus,
    resp_expires: String,
    /// The response as stored (framed), base64 in the file.
    #[serde(with = "b64")]
    resp: Vec<u8>,
}

mod b64 {
    use base64::Engine;
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Default)]
struct State {
    online: bool,
    items: BTreeMap<String, Item>,
    stats: CacheStats,
    dirty: bool,
}

/// The peer response cache of one server.
pub struct ResponseCache {
    cfg: CacheConfig,
    state: Mutex<State>,
}

// --- Snappy framing with uncompressed chunks (what S2 readers accept) ---

const STREAM_ID: &[u8] = &[0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
const MAX_CHUNK: usize = 65_536;

fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// `data` as a framed stream of uncompressed chunks.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let mut out = STREAM_ID.to_vec();
    for chunk in data.chunks(MAX_CHUNK) {
        let len = chunk.len() + 4;
        out.push(0x01);
        out.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        out.extend_from_slice(&masked_crc(chunk).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// The largest chunk an S2 stream holds (4 MiB blocks; Snappy's are 64 KiB).
const MAX_DECODED_CHUNK: usize = 4 << 20;

/// The data of a framed stream (uncompressed chunks, and Snappy or S2 compressed ones as
/// the reference's S2 writer makes them), when every chunk checks out.
pub fn unframe(mut framed: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while !framed.is_empty() {
        let (head, rest) = framed.split_at_checked(4).ok_or("truncated chunk header")?;
        let [kind, a, b, c] = <[u8; 4]>::try_from(head).map_err(|_| "truncated chunk header")?;
        let len = usize::from(a) | usize::from(b) << 8 | usize::from(c) << 16;
        let (body, rest) = rest.split_at_checked(len).ok_or("truncated chunk")?;
        match kind {
            // Stream identifier (sNaPpY or S2sTwO) and padding/skippable chunks.
            0x80..=0xff => {}
            0x01 => {
                let (crc, data) = body.split_at_checked(4).ok_or("short chunk")?;
                let want = u32::from_le_bytes(<[u8; 4]>::try_from(crc).map_err(|_| "short chunk")?);
                if masked_crc(data) != want {
                    return Err("crc mismatch".into());
                }
                out.extend_from_slice(data);
            }
            0x00 => {
                let (crc, block) = body.split_at_checked(4).ok_or("short chunk")?;
                let want = u32::from_le_bytes(<[u8; 4]>::try_from(crc).map_err(|_| "short chunk")?);
                // The claimed length is checked before anything is allocated for it.
                let (n, _) = minlz::decode_len(block).map_err(|e| format!("bad compressed chunk: {e}"))?;
                if n > MAX_DECODED_CHUNK {
                    return Err("compressed chunk too large".into());
                }
                let data = minlz::decode(block).map_err(|e| format!("bad compressed chunk: {e}"))?;
                if masked_crc(&data) != want {
                    return Err("crc mismatch".into());
                }
                out.extend_from_slice(&data);
            }
            _ => return Err("unsupported chunk type".into()),
        }
        framed = rest;
    }
    Ok(out)
}

impl ResponseCache {
    pub fn new(cfg: CacheConfig) -> ResponseCache {
        ResponseCache {
            cfg,
            state: Mutex::new(State::default()),
        }
    }

    /// `local` or `none`.
    pub fn type_name(&self) -> &'static str {
        match self.cfg.kind {
            CacheType::Local => "local",
            CacheType::None => "none",
        }
    }

    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    pub fn online(&self) -> bool {
        self.lock().online
    }

    fn store_path(&self) -> PathBuf {
        let dir = if self.cfg.local_store.is_empty() {
            DEFAULT_DIR
        } else {
            self.cfg.local_store.as_str()
        };
        let p = PathBuf::from(dir).join(FILE_NAME);
        std::path::absolute(&p).unwrap_or(p)
    }

    /// Bring the cache online (loading the saved file for `local`), with nats-server's
    /// log lines.
    pub fn start(&self) {
        if self.cfg.kind == CacheType::Local {
            tracing::debug!("Starting OCSP peer cache");
            self.load();
        }
        let mut st = self.lock();
        if self.cfg.kind == CacheType::Local {
            let mut stats = CacheStats::default();
            for item in st.items.values() {
                stats.adjust(1, item.resp_status);
            }
            st.stats = stats;
        } else {
            st.stats = CacheStats::default();
        }
        st.online = true;
        drop(st);
        tracing::info!("OCSP peer cache online, type [{}]", self.type_name());
    }

    fn load(&self) {
        let path = self.store_path();
        tracing::debug!("Loading OCSP peer cache [{}]", path.display());
        let mut st = self.lock();
        st.items.clear();
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!("No OCSP peer cache found, starting with empty cache");
            }
            Err(e) => tracing::warn!("Unable to load OCSP peer cache: {}", conf::go_os_error(&e)),
            Ok(data) => match serde_json::from_slice::<BTreeMap<String, Item>>(&data) {
                Ok(items) => {
                    st.items = items;
                    st.dirty = false;
                }
                Err(e) => {
                    st.dirty = true;
                    tracing::warn!("Unable to load OCSP peer cache: {e}");
                }
            },
        }
    }

    /// Take the cache offline, saving it (`local`) if it changed.
    pub fn stop(&self) {
        if self.cfg.kind == CacheType::Local {
            tracing::debug!("Stopping OCSP peer cache");
        }
        self.lock().online = false;
        self.save();
    }

    /// Write the file if anything changed since it was last written.
    pub fn save(&self) {
        if self.cfg.kind != CacheType::Local {
            return;
        }
        let mut st = self.lock();
        if !st.dirty {
            return;
        }
        tracing::debug!("OCSP peer cache is dirty, saving");
        let path = self.store_path();
        tracing::debug!("Saving OCSP peer cache [{}]", path.display());
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        let write = || -> std::io::Result<usize> {
            if !dir.exists() {
                std::fs::create_dir(&dir)?;
            }
            // The reference's layout: one space per level.
            let mut data = Vec::new();
            let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
            let mut ser = serde_json::Serializer::with_formatter(&mut data, fmt);
            serde::Serialize::serialize(&st.items, &mut ser).map_err(std::io::Error::other)?;
            let tmp = dir.join(format!("ocsprc-{}", std::process::id()));
            std::fs::write(&tmp, &data)?;
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })?;
            Ok(data.len())
        };
        match write() {
            Ok(n) => {
                st.dirty = false;
                tracing::debug!("Saved OCSP peer cache successfully ({n} bytes)");
            }
            Err(e) => tracing::error!("Unable to save OCSP peer cache: {}", conf::go_os_error(&e)),
        }
    }

    /// The cached response for `key` (a certificate fingerprint), counting a hit or a miss.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        if self.cfg.kind == CacheType::None {
            return None;
        }
        let mut st = self.lock();
        if !st.online || key.is_empty() {
            return None;
        }
        let Some(item) = st.items.get(key).cloned() else {
            st.stats.misses += 1;
            tracing::debug!("OCSP peer cache miss for key [{key}]");
            return None;
        };
        st.stats.hits += 1;
        tracing::debug!("OCSP peer cache hit for key [{key}]");
        match unframe(&item.resp) {
            Ok(raw) => Some(raw),
            Err(e) => {
                tracing::error!("Unable to decompress OCSP response for key [{key}]: {e}");
                None
            }
        }
    }

    /// Cache a response fetched for `key`.
    pub fn put(&self, key: &str, resp: &Response, subject: &str) {
        if self.cfg.kind == CacheType::None || key.is_empty() || !self.online() {
            return;
        }
        tracing::debug!("Caching OCSP response for [{subject}], key [{key}]");
        let framed = frame(&resp.raw);
        if !resp.raw.is_empty() {
            tracing::debug!(
                "OCSP response compression ratio: [{:.6}]",
                framed.len() as f64 / resp.raw.len() as f64
            );
        }
        let now = std::time::SystemTime::now();
        let secs = now
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
            .round();
        let item = Item {
            subject: subject.to_string(),
            cached_at: crate::proto::gotime::rfc3339_nano(std::time::UNIX_EPOCH + Duration::from_secs(secs as u64)),
            resp_status: resp.status,
            resp_expires: resp
                .next_update
                .map(crate::proto::gotime::rfc3339_nano)
                .unwrap_or_else(|| "0001-01-01T00:00:00Z".into()),
            resp: framed,
        };
        let mut st = self.lock();
        if let Some(old) = st.items.insert(key.to_string(), item) {
            st.stats.adjust(-1, old.resp_status);
        }
        st.stats.adjust(1, resp.status);
        st.dirty = true;
    }

    /// Drop the response for `key` (kept when revoked and `preserve_revoked`); `was_miss`
    /// turns the hit that found it into a miss.
    pub fn delete(&self, key: &str, was_miss: bool) {
        if self.cfg.kind == CacheType::None {
            return;
        }
        let mut st = self.lock();
        if !st.online || key.is_empty() {
            return;
        }
        let Some(status) = st.items.get(key).map(|i| i.resp_status) else {
            return;
        };
        if was_miss {
            st.stats.misses += 1;
            st.stats.hits -= 1;
        }
        if status == CertStatus::Revoked && self.cfg.preserve_revoked {
            tracing::debug!("Revoked OCSP response for key [{key}] preserved by cache policy");
            return;
        }
        tracing::debug!("Deleting OCSP peer cached response for key [{key}]");
        st.items.remove(key);
        st.stats.adjust(-1, status);
        st.dirty = true;
    }

    /// Save every `save_interval` until the returned guard is dropped (`local` only).
    pub fn spawn_saver(self: &std::sync::Arc<Self>) -> Option<tokio::sync::oneshot::Sender<()>> {
        if self.cfg.kind != CacheType::Local {
            return None;
        }
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let me = self.clone();
        let every = self.cfg.save_interval.max(MIN_SAVE_INTERVAL);
        super::runtime::handle()?.spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {
                        tracing::debug!("OCSP peer cache save timer expired");
                        let c = me.clone();
                        let _ = tokio::task::spawn_blocking(move || c.save()).await;
                    }
                    _ = &mut rx => return,
                }
            }
        });
        Some(tx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_rejects_damage() {
        for data in [&b""[..], b"x", &vec![7u8; 70_000]] {
            assert_eq!(unframe(&frame(data)).unwrap(), data);
        }
        let mut f = frame(b"hello");
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(unframe(&f).unwrap_err(), "crc mismatch");
        assert!(unframe(&frame(b"hello")[..12]).is_err());
        // A damaged compressed chunk is refused, not misread.
        assert!(unframe(&[0x00, 0x05, 0x00, 0x00, 1, 2, 3, 4, 5]).is_err());
        // Compressed chunks as the reference's S2 writer makes them.
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 7) as u8).collect();
        let block = minlz::encode(&data);
        assert!(block.len() < data.len());
        let mut s = STREAM_ID.to_vec();
        s.push(0x00);
        s.extend_from_slice(&((block.len() + 4) as u32).to_le_bytes()[..3]);
        s.extend_from_slice(&masked_crc(&data).to_le_bytes());
        s.extend_from_slice(&block);
        s.extend_from_slice(&frame(b"tail")[STREAM_ID.len()..]);
        let mut want = data.clone();
        want.extend_from_slice(b"tail");
        assert_eq!(unframe(&s).unwrap(), want);
        // Wrong checksum of the decoded data.
        let crc_at = STREAM_ID.len() + 4;
        s[crc_at] ^= 1;
        assert_eq!(unframe(&s).unwrap_err(), "crc mismatch");
        // A block claiming more than a chunk can hold allocates nothing.
        let mut huge = vec![0x00, 0x09, 0x00, 0x00, 0, 0, 0, 0];
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(unframe(&huge).unwrap_err(), "compressed chunk too large");
        // CRC-32C check value.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    fn resp(status: CertStatus) -> Response {
        let now = std::time::SystemTime::now();
        Response {
            raw: vec![0x30, 0x00],
            status,
            serial: vec![1],
            produced_at: now,
            this_update: now,
            next_update: None,
            signer: None,
        }
    }

    #[test]
    fn counts_and_preserves_as_the_reference() {
        let dir = std::env::temp_dir().join(format!("rnats-ocsp-cache-{}", std::process::id()));
        // A cache left by a dead process with the same pid must not be loaded.
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = CacheConfig {
            local_store: dir.display().to_string(),
            preserve_revoked: true,
            ..Default::default()
        };
        let c = ResponseCache::new(cfg.clone());
        c.start();
        assert_eq!(c.get("a"), None);
        c.put("a", &resp(CertStatus::Good), "CN=a");
        c.put("r", &resp(CertStatus::Revoked), "CN=r");
        assert_eq!(c.get("a"), Some(vec![0x30, 0x00]));
        c.delete("a", true);
        c.delete("r", true);
        let s = c.stats();
        assert_eq!((s.responses, s.goods, s.revokes, s.hits, s.misses), (1, 0, 1, -1, 3));
        c.stop();
        // Saved, and loaded again by the next server.
        let again = ResponseCache::new(cfg);
        again.start();
        assert_eq!(again.stats().revokes, 1);
        assert_eq!(again.get("r"), Some(vec![0x30, 0x00]));
        let _ = std::fs::remove_dir_all(dir);
        // Type none keeps nothing.
        let none = ResponseCache::new(CacheConfig {
            kind: CacheType::None,
            ..Default::default()
        });
        none.start();
        none.put("a", &resp(CertStatus::Good), "CN=a");
        assert_eq!(none.get("a"), None);
        assert_eq!(none.stats(), CacheStats::default());
    }
}
