//! The server-level JetStream options (nats-server's `JetStream*`, `StoreDir`, `Sync*` and
//! `StreamMaxBuffered*` options): their defaults, the startup checks made on them, the
//! configuration they resolve to when JetStream starts (store directory, dynamic memory
//! and storage limits), the startup log lines, and what a reload may change.
//!
//! The config file's `jetstream` block is parsed by `config::jetstream`; `-js` and `-sd`
//! set [`JetStreamOptions::enabled`] and [`JetStreamOptions::store_dir`].

use crate::server::options::go_duration;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The filestore's default background sync interval (`defaultSyncInterval`).
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(120);
/// `JSDefaultRequestQueueLimit`.
pub const DEFAULT_REQUEST_QUEUE_LIMIT: i64 = 10_000;
/// The directory JetStream keeps under the store directory (`JetStreamStoreDir`).
pub const STORE_SUBDIR: &str = "jetstream";
/// Storage limit used when the free disk space cannot be read (1 TiB).
pub const MAX_STORE_FALLBACK: i64 = 1 << 40;
/// Memory limit used when the system memory cannot be read (256 MiB).
pub const MAX_MEMORY_FALLBACK: i64 = 256 << 20;
/// The TPM PCR used when none is configured.
pub const DEFAULT_TPM_PCR: i64 = 22;
/// `extension_hint` values.
pub const EXTENSION_WILL_EXTEND: &str = "will_extend";
pub const EXTENSION_NO_EXTEND: &str = "no_extend";

/// The cipher of encrypted stores (`cipher`; nats-server's `StoreCipher`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StoreCipher {
    #[default]
    ChaCha,
    Aes,
}

impl StoreCipher {
    /// The name nats-server prints (`ChaCha20-Poly1305`, `AES-GCM`).
    pub fn name(self) -> &'static str {
        match self {
            StoreCipher::ChaCha => "ChaCha20-Poly1305",
            StoreCipher::Aes => "AES-GCM",
        }
    }
}

impl std::fmt::Display for StoreCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `jetstream { limits { ... } }` (nats-server's `JSLimitOpts`); 0 means no server limit.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamLimitOptions {
    /// `max_request_batch`.
    pub max_request_batch: i64,
    /// `max_ack_pending`.
    pub max_ack_pending: i64,
    /// `max_ha_assets`.
    pub max_ha_assets: i64,
    /// `duplicate_window`: the largest duplicate window a stream may ask for.
    pub duplicate_window: Duration,
    /// `batch { max_inflight_per_stream }`.
    pub max_batch_inflight_per_stream: i64,
    /// `batch { max_inflight_total }`.
    pub max_batch_inflight_total: i64,
    /// `batch { max_msgs }`.
    pub max_batch_size: i64,
    /// `batch { timeout }`.
    pub max_batch_timeout: Duration,
}

impl JetStreamLimitOptions {
    /// Go's `%v` of the struct, as reload errors print it.
    fn go_value(&self) -> String {
        format!(
            "{{{} {} {} {} {} {} {} {}}}",
            self.max_request_batch,
            self.max_ack_pending,
            self.max_ha_assets,
            go_duration(self.duplicate_window),
            self.max_batch_inflight_per_stream,
            self.max_batch_inflight_total,
            self.max_batch_size,
            go_duration(self.max_batch_timeout)
        )
    }
}

/// `jetstream { tpm { ... } }` (nats-server's `JSTpmOpts`). The block's `cipher` sets
/// [`JetStreamOptions::cipher`], as in the reference.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamTpmOptions {
    /// `keys_file`: TPM use is on when set.
    pub keys_file: String,
    /// `encryption_password`.
    pub encryption_password: String,
    /// `srk_password`.
    pub srk_password: String,
    /// `pcr` (0: [`DEFAULT_TPM_PCR`] when the keys are loaded).
    pub pcr: i64,
}

/// The server's JetStream options. Field names follow the config keys; the comments name
/// nats-server's `Options` fields where they differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JetStreamOptions {
    /// `-js`, `jetstream: enabled`, `jetstream { enabled }` (`JetStream`).
    pub enabled: bool,
    /// `strict` (`!NoJetStreamStrict`): strict JSON checks of API requests. Default true.
    pub strict: bool,
    /// `-sd`, `store_dir` at the top level or in the block (`StoreDir`; also where OCSP
    /// staples are kept). JetStream's files go under `<store_dir>/jetstream`.
    pub store_dir: String,
    /// `max_mem`/`max_mem_store`/`max_memory_store` in bytes; -1 (the default, or any
    /// negative value): 75% of the system memory when JetStream starts.
    pub max_memory: i64,
    /// `max_file`/`max_file_store` in bytes; -1 (the default, or any negative value): 75%
    /// of the disk space available at the store directory when JetStream starts.
    pub max_store: i64,
    /// `domain`.
    pub domain: String,
    /// `extension_hint` (`JetStreamExtHint`).
    pub extension_hint: String,
    /// `key`/`ek`/`encryption_key`: encryption at rest is on when set.
    pub key: String,
    /// `prev_key`/`prev_ek`/`prev_encryption_key` (`JetStreamOldKey`).
    pub prev_key: String,
    /// `cipher` (in the block or in `tpm`).
    pub cipher: StoreCipher,
    /// `unique_tag`, trimmed and lower-cased.
    pub unique_tag: String,
    /// `limits { }`.
    pub limits: JetStreamLimitOptions,
    /// `tpm { }`.
    pub tpm: JetStreamTpmOptions,
    /// `max_outstanding_catchup` in bytes (`JetStreamMaxCatchup`; 0: the server's default).
    pub max_outstanding_catchup: i64,
    /// `request_queue_limit` (default [`DEFAULT_REQUEST_QUEUE_LIMIT`]; 0 or less: the
    /// default).
    pub request_queue_limit: i64,
    /// `info_queue_limit` (0 or less: `request_queue_limit`).
    pub info_queue_limit: i64,
    /// `meta_compact` (`JetStreamMetaCompact`).
    pub meta_compact: u64,
    /// `meta_compact_size` in bytes.
    pub meta_compact_size: u64,
    /// `meta_compact_sync`.
    pub meta_compact_sync: bool,
    /// `max_buffered_msgs` (`StreamMaxBufferedMsgs`).
    pub max_buffered_msgs: i64,
    /// `max_buffered_size` in bytes (`StreamMaxBufferedSize`).
    pub max_buffered_size: i64,
    /// `sync`/`sync_interval`: `None` when not given ([`DEFAULT_SYNC_INTERVAL`] applies).
    /// `sync: always` gives the default interval with [`Self::sync_always`].
    pub sync_interval: Option<Duration>,
    /// `sync: always`: flush after every write.
    pub sync_always: bool,
}

impl Default for JetStreamOptions {
    fn default() -> Self {
        JetStreamOptions {
            enabled: false,
            strict: true,
            store_dir: String::new(),
            max_memory: -1,
            max_store: -1,
            domain: String::new(),
            extension_hint: String::new(),
            key: String::new(),
            prev_key: String::new(),
            cipher: StoreCipher::ChaCha,
            unique_tag: String::new(),
            limits: JetStreamLimitOptions::default(),
            tpm: JetStreamTpmOptions::default(),
            max_outstanding_catchup: 0,
            request_queue_limit: DEFAULT_REQUEST_QUEUE_LIMIT,
            info_queue_limit: 0,
            meta_compact: 0,
            meta_compact_size: 0,
            meta_compact_sync: false,
            max_buffered_msgs: 0,
            max_buffered_size: 0,
            sync_interval: None,
            sync_always: false,
        }
    }
}

/// A JetStream option nats-server refuses at startup (`validateJetStreamOptions`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamOptionsError {
    #[error("invalid domain name: derived {0:?} is not a valid subject")]
    DomainSubject(String),
    #[error("invalid domain name: may not contain ., * or >")]
    DomainName,
    #[error("jetstream cluster requires `server_name` to be set")]
    ClusterServerName,
    #[error("jetstream cluster requires `cluster.name` to be set")]
    ClusterName,
    #[error("expected 'no_extend' for string value, got '{0}'")]
    ExtensionHint(String),
    #[error("jetstream max catchup cannot be negative")]
    NegativeCatchup,
}

impl JetStreamOptions {
    /// nats-server's `setBaselineOptions` for JetStream: the queue limits' defaults and the
    /// default sync interval. (Unset memory and storage limits are already -1.)
    pub fn apply_baseline(&mut self) {
        if self.sync_interval.is_none() {
            self.sync_interval = Some(DEFAULT_SYNC_INTERVAL);
        }
        if self.request_queue_limit <= 0 {
            self.request_queue_limit = DEFAULT_REQUEST_QUEUE_LIMIT;
        }
        if self.info_queue_limit <= 0 {
            self.info_queue_limit = self.request_queue_limit;
        }
    }

    /// The sync interval in force.
    pub fn sync_interval(&self) -> Duration {
        self.sync_interval.unwrap_or(DEFAULT_SYNC_INTERVAL)
    }

    /// The checks nats-server makes at startup whether or not JetStream is on (the
    /// domain's), then, for a clustered JetStream server, the cluster's. Clustering
    /// does not exist in rnats yet, so the cluster checks run only when asked with
    /// [`Self::validate_clustered`].
    pub fn validate(&self) -> Result<(), JetStreamOptionsError> {
        if !self.domain.is_empty() {
            let subject = format!("$JS.{}.API.>", self.domain);
            if !crate::core::subject::is_valid_subject(subject.as_bytes()) {
                return Err(JetStreamOptionsError::DomainSubject(subject));
            }
            if !is_valid_name(&self.domain) {
                return Err(JetStreamOptionsError::DomainName);
            }
        }
        Ok(())
    }

    /// The rest of `validateJetStreamOptions`, for a server with JetStream on and a
    /// cluster port: names required, `extension_hint` normalized (lower case).
    pub fn validate_clustered(&mut self, server_name: &str, cluster_name: &str) -> Result<(), JetStreamOptionsError> {
        self.validate()?;
        if !self.enabled {
            return Ok(());
        }
        if server_name.is_empty() {
            return Err(JetStreamOptionsError::ClusterServerName);
        }
        if cluster_name.is_empty() {
            return Err(JetStreamOptionsError::ClusterName);
        }
        let hint = self.extension_hint.to_lowercase();
        match hint.as_str() {
            "" | EXTENSION_WILL_EXTEND | EXTENSION_NO_EXTEND => self.extension_hint = hint,
            _ => return Err(JetStreamOptionsError::ExtensionHint(hint)),
        }
        if self.max_outstanding_catchup < 0 {
            return Err(JetStreamOptionsError::NegativeCatchup);
        }
        Ok(())
    }
}

/// nats-server's `isValidName`: non-empty, without whitespace, `.`, `*` or `>`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains([' ', '\t', '\r', '\n', '\x0c', '.', '*', '>'])
}

/// What JetStream starts with (nats-server's `JetStreamConfig` after `EnableJetStream`
/// filled it in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedJetStream {
    /// Where JetStream's files go: `<store_dir>/jetstream` (accounts below it:
    /// `<account>/streams/<stream>`). Without a store directory: the temporary
    /// directory's `nats/jetstream`, or its `jetstream` when both limits were given.
    pub store_root: PathBuf,
    /// Memory limit in bytes.
    pub max_memory: i64,
    /// Storage limit in bytes.
    pub max_store: i64,
    pub sync_interval: Duration,
    pub sync_always: bool,
    pub domain: String,
    pub unique_tag: String,
    pub strict: bool,
    /// Whether the configuration was not computed dynamically (the reference reports
    /// `compress_ok` only then).
    pub compress_ok: bool,
    /// A limit was computed (the `JetStream creating dynamic configuration` debug line).
    pub dynamic: bool,
    /// No store directory was given: the data lives in the temporary directory.
    pub temporary_dir: bool,
    /// The cipher, when encryption at rest is on (a key is set).
    pub encryption: Option<StoreCipher>,
    /// The TPM keys file and PCR, when TPM use is on.
    pub tpm: Option<(String, i64)>,
}

/// What a host reports for the dynamic limits (read from the system by [`resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostResources {
    /// Total system memory in bytes (0: unknown).
    pub system_memory: i64,
    /// A Go memory limit (`GOMEMLIMIT`) in bytes, if one is set.
    pub memory_limit: Option<i64>,
}

/// Resolve the options as nats-server's `EnableJetStream` does, reading the system memory
/// and the free disk space (and creating the store directory, as the reference's disk
/// check does).
pub fn resolve(o: &JetStreamOptions) -> ResolvedJetStream {
    let host = HostResources {
        system_memory: system_memory(),
        memory_limit: go_memory_limit(std::env::var("GOMEMLIMIT").ok().as_deref()),
    };
    resolve_with(o, &std::env::temp_dir(), host, disk_available)
}

/// [`resolve`] with the temporary directory, the host's memory and the disk check given.
pub fn resolve_with(
    o: &JetStreamOptions,
    temp_dir: &Path,
    host: HostResources,
    disk: impl FnOnce(&Path) -> i64,
) -> ResolvedJetStream {
    let temporary_dir = o.store_dir.is_empty();
    let fixed = o.max_memory > 0 && o.max_store > 0;
    let store_root = match (temporary_dir, fixed) {
        (false, _) => go_join(Path::new(&o.store_dir), STORE_SUBDIR),
        (true, true) => go_join(temp_dir, STORE_SUBDIR),
        (true, false) => go_join(&go_join(temp_dir, "nats"), STORE_SUBDIR),
    };
    let max_store = if o.max_store >= 0 {
        o.max_store
    } else {
        disk(&store_root)
    };
    let max_memory = if o.max_memory >= 0 {
        o.max_memory
    } else {
        let mut mem = host.system_memory;
        if mem > 0 {
            if let Some(limit) = host.memory_limit.filter(|&l| l < mem) {
                mem = limit;
            }
            mem / 4 * 3
        } else {
            MAX_MEMORY_FALLBACK
        }
    };
    ResolvedJetStream {
        store_root,
        max_memory,
        max_store,
        sync_interval: o.sync_interval(),
        sync_always: o.sync_always,
        domain: o.domain.clone(),
        unique_tag: o.unique_tag.clone(),
        strict: o.strict,
        compress_ok: fixed,
        dynamic: !fixed,
        temporary_dir,
        encryption: (!o.key.is_empty()).then_some(o.cipher),
        tpm: (!o.tpm.keys_file.is_empty()).then(|| {
            let pcr = if o.tpm.pcr == 0 { DEFAULT_TPM_PCR } else { o.tpm.pcr };
            (o.tpm.keys_file.clone(), pcr)
        }),
    }
}

/// How a startup log line is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    Warn,
    Debug,
}

/// The log lines nats-server writes when JetStream starts, before its accounts are
/// enabled, in order with their levels: `Starting JetStream`, the temporary directory
/// warning, the dynamic configuration's debug line, then [`startup_log_lines`].
pub fn startup_log(r: &ResolvedJetStream) -> Vec<(LogLevel, String)> {
    let mut out = vec![(LogLevel::Info, "Starting JetStream".to_string())];
    if r.temporary_dir {
        out.push((
            LogLevel::Warn,
            "Temporary storage directory used, data could be lost on system reboot".into(),
        ));
    }
    if r.dynamic {
        out.push((
            LogLevel::Debug,
            format!(
                "JetStream creating dynamic configuration - {} memory, {} disk",
                friendly_bytes(r.max_memory),
                friendly_bytes(r.max_store)
            ),
        ));
    }
    out.extend(startup_log_lines(r).into_iter().map(|l| (LogLevel::Info, l)));
    out
}

/// The banner and the `JETSTREAM` block nats-server logs (at info level) once the store
/// directory is ready: the logo, the limits, the directory, the domain, encryption, the
/// API level.
pub fn startup_log_lines(r: &ResolvedJetStream) -> Vec<String> {
    let mut out: Vec<String> = [
        r"    _ ___ _____ ___ _____ ___ ___   _   __  __",
        r" _ | | __|_   _/ __|_   _| _ \ __| /_\ |  \/  |",
        r"| || | _|  | | \__ \ | | |   / _| / _ \| |\/| |",
        r" \__/|___| |_| |___/ |_| |_|_\___/_/ \_\_|  |_|",
        "",
        "         https://docs.nats.io/jetstream",
        "",
        "---------------- JETSTREAM ----------------",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if r.strict {
        out.push("  Strict:          true".into());
    }
    out.push(format!("  Max Memory:      {}", friendly_bytes(r.max_memory)));
    out.push(format!("  Max Storage:     {}", friendly_bytes(r.max_store)));
    out.push(format!("  Store Directory: \"{}\"", r.store_root.display()));
    if !r.domain.is_empty() {
        out.push(format!("  Domain:          {}", r.domain));
    }
    if let Some(c) = r.encryption {
        out.push(format!("  Encryption:      {c}"));
    }
    if let Some((file, pcr)) = &r.tpm {
        out.push(format!(
            "  TPM File:        {}, Pcr: {pcr}",
            crate::proto::reply::go_quote(file.as_bytes())
        ));
    }
    out.push(format!("  API Level:       {}", crate::server::API_LEVEL));
    out.push("-------------------------------------------".into());
    out
}

/// nats-server's `friendlyBytes`: `512 B`, `953.67 MB`, `1.00 GB` (powers of 1024).
pub fn friendly_bytes(bytes: i64) -> String {
    let f = bytes as f64;
    if f < 1024.0 {
        return format!("{bytes} B");
    }
    let exp = (f.ln() / 1024f64.ln()) as i32;
    let unit = ["K", "M", "G", "T", "P", "E"]
        .get(usize::try_from(exp - 1).unwrap_or(0))
        .copied()
        .unwrap_or("E");
    format!("{:.2} {unit}B", f / 1024f64.powi(exp))
}

/// A JetStream start that cannot go ahead (`Can't start JetStream: <this>`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamStartError {
    #[error("JetStream encryption key may not be used with TPM options")]
    KeyWithTpm,
    #[error("could not create storage directory - {0}")]
    CreateDir(String),
    #[error("storage directory is not a directory")]
    NotADirectory,
    #[error("storage directory is not writable")]
    NotWritable,
}

/// The store directory checks JetStream makes when it starts: the directory is made if
/// missing, otherwise it must be a writable directory; a key and TPM options exclude
/// each other.
pub fn prepare_store(o: &JetStreamOptions, r: &ResolvedJetStream) -> Result<(), JetStreamStartError> {
    match std::fs::metadata(&r.store_root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&r.store_root).map_err(|e| JetStreamStartError::CreateDir(mkdir_error(r, &e)))?;
        }
        Ok(m) if m.is_dir() => {
            let probe = r.store_root.join(format!("_test_{}", std::process::id()));
            std::fs::File::create(&probe).map_err(|_| JetStreamStartError::NotWritable)?;
            let _ = std::fs::remove_file(&probe);
        }
        _ => return Err(JetStreamStartError::NotADirectory),
    }
    if !o.key.is_empty() && !o.tpm.keys_file.is_empty() {
        return Err(JetStreamStartError::KeyWithTpm);
    }
    Ok(())
}

fn mkdir_error(r: &ResolvedJetStream, e: &std::io::Error) -> String {
    format!("mkdir {}: {}", r.store_root.display(), conf::go_os_error(e))
}

/// Go's `filepath.Join(dir, name)`: joined and cleaned (`.`, `..`, repeated slashes).
pub fn go_join(dir: &Path, name: &str) -> PathBuf {
    let joined = if dir.as_os_str().is_empty() {
        PathBuf::from(name)
    } else {
        dir.join(name)
    };
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) | Some(Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// 75% of the space available to the server at `dir` (made first if missing), or
/// [`MAX_STORE_FALLBACK`] when that cannot be read (nats-server's `diskAvailable`).
pub fn disk_available(dir: &Path) -> i64 {
    if std::fs::metadata(dir).is_err() {
        let _ = std::fs::create_dir_all(dir);
    }
    #[cfg(unix)]
    {
        if let Ok(st) = rustix::fs::statvfs(dir) {
            let avail = u128::from(st.f_bavail) * u128::from(st.f_bsize) / 4 * 3;
            return i64::try_from(avail).unwrap_or(i64::MAX);
        }
    }
    MAX_STORE_FALLBACK
}

/// The system's total memory in bytes (0: unknown).
pub fn system_memory() -> i64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let info = rustix::system::sysinfo();
        let total = u128::from(info.totalram) * u128::from(info.mem_unit.max(1));
        i64::try_from(total).unwrap_or(i64::MAX)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        0
    }
}

/// Go's `GOMEMLIMIT`: bytes with an optional `B`, `KiB`, `MiB`, `GiB` or `TiB` suffix, or
/// `off`. `None` when unset, off or not understood (Go refuses to start on a bad value;
/// here it is ignored).
pub fn go_memory_limit(v: Option<&str>) -> Option<i64> {
    let v = v?.trim();
    if v == "off" || v.is_empty() {
        return None;
    }
    let (num, mult) = [
        ("TiB", 1i64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ]
    .into_iter()
    .find_map(|(suffix, m)| v.strip_suffix(suffix).map(|n| (n, m)))
    .unwrap_or((v, 1));
    let n: i64 = num.parse().ok().filter(|n: &i64| *n >= 0)?;
    n.checked_mul(mult)
}

/// What a reload does to JetStream.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamReload {
    /// `Reloaded: ...` lines, in the reference's order.
    pub messages: Vec<String>,
    /// Turn JetStream on (`Some(true)`: start, or restart when it stopped) or off.
    pub enable: Option<bool>,
    /// New memory limit (raised), if any.
    pub max_memory: Option<i64>,
    /// New storage limit (raised), if any.
    pub max_store: Option<i64>,
}

/// A reload that changes a JetStream option the reference cannot change at runtime.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamReloadError {
    #[error("config reload not supported for {field}: old={old}, new={new}")]
    NotSupported {
        field: &'static str,
        old: String,
        new: String,
    },
    #[error("config reload not supported for jetstream storage directory")]
    StoreDirectory,
    #[error("config reload not supported for jetstream dynamic max memory and store")]
    DynamicLimits,
    #[error("config reload not supported for decreasing jetstream max memory and store")]
    DecreasingLimits,
    #[error("config reload not supported for jetstream max memory and max store")]
    LimitsWithoutDisable,
    #[error("config reload not supported for jetstream storage dir")]
    StoreDirWithoutDisable,
}

/// JetStream options that refuse any change, in nats-server's field order, with Go's
/// `%v` of their values.
type Shown = fn(&JetStreamOptions) -> String;
const FIXED_BEFORE_LIMITS: &[(&str, Shown)] = &[("NoJetStreamStrict", |o| (!o.strict).to_string())];
const FIXED_AFTER_LIMITS: &[(&str, Shown)] = &[
    ("JetStreamDomain", |o| o.domain.clone()),
    ("JetStreamExtHint", |o| o.extension_hint.clone()),
    ("JetStreamKey", |o| o.key.clone()),
    ("JetStreamOldKey", |o| o.prev_key.clone()),
    ("JetStreamCipher", |o| o.cipher.to_string()),
    ("JetStreamUniqueTag", |o| o.unique_tag.clone()),
    ("JetStreamLimits", |o| o.limits.go_value()),
    ("JetStreamTpm", |o| {
        let t = &o.tpm;
        format!(
            "{{{} {} {} {}}}",
            t.keys_file, t.encryption_password, t.srk_password, t.pcr
        )
    }),
    ("JetStreamMaxCatchup", |o| o.max_outstanding_catchup.to_string()),
    ("JetStreamRequestQueueLimit", |o| o.request_queue_limit.to_string()),
    ("JetStreamInfoQueueLimit", |o| o.info_queue_limit.to_string()),
];
const FIXED_BUFFERED: &[(&str, Shown)] = &[
    ("StreamMaxBufferedMsgs", |o| o.max_buffered_msgs.to_string()),
    ("StreamMaxBufferedSize", |o| o.max_buffered_size.to_string()),
];
const FIXED_SYNC: &[(&str, Shown)] = &[
    ("SyncInterval", |o| go_duration(o.sync_interval())),
    ("SyncAlways", |o| o.sync_always.to_string()),
];

fn fixed(
    list: &[(&'static str, Shown)],
    old: &JetStreamOptions,
    new: &JetStreamOptions,
) -> Result<(), JetStreamReloadError> {
    for (field, shown) in list {
        let (a, b) = (shown(old), shown(new));
        if a != b {
            return Err(JetStreamReloadError::NotSupported { field, old: a, new: b });
        }
    }
    Ok(())
}

/// Compare the JetStream options in force with reloaded ones (both after
/// [`JetStreamOptions::apply_baseline`]), as nats-server's reload does: JetStream can be
/// turned on or off, and explicit limits raised while it runs; the store directory and
/// the limits can change only while it is off or being turned off; every other option
/// is fixed. `running` tells whether JetStream runs now (it may have stopped itself).
pub fn reload_diff(
    old: &JetStreamOptions,
    new: &JetStreamOptions,
    running: bool,
) -> Result<JetStreamReload, JetStreamReloadError> {
    let mut plan = JetStreamReload::default();
    let mut disabling = false;
    if old.enabled != new.enabled {
        plan.enable = Some(new.enabled);
        plan.messages.push("Reloaded: JetStream".into());
        disabling = !new.enabled;
    } else if new.enabled && !running {
        plan.enable = Some(true);
        plan.messages.push("Reloaded: JetStream".into());
    }
    fixed(FIXED_BEFORE_LIMITS, old, new)?;
    let mut limits_dropped = false;
    let mut raised = false;
    for memory in [true, false] {
        let (a, b) = if memory {
            (old.max_memory, new.max_memory)
        } else {
            (old.max_store, new.max_store)
        };
        if !running || a == b {
            continue;
        }
        match (a == -1, b == -1) {
            (false, false) if b > a => {
                raised = true;
                if memory {
                    plan.max_memory = Some(b);
                } else {
                    plan.max_store = Some(b);
                }
            }
            (false, true) => limits_dropped = true,
            (true, false) => return Err(JetStreamReloadError::DynamicLimits),
            _ => return Err(JetStreamReloadError::DecreasingLimits),
        }
    }
    if raised {
        if let Some(m) = plan.max_memory.filter(|&m| m > 0) {
            plan.messages
                .push(format!("Reloaded: JetStream max_mem_store = {}", friendly_bytes(m)));
        }
        if let Some(s) = plan.max_store.filter(|&s| s > 0) {
            plan.messages
                .push(format!("Reloaded: JetStream max_file_store = {}", friendly_bytes(s)));
        }
    }
    fixed(FIXED_AFTER_LIMITS, old, new)?;
    // meta_compact, meta_compact_size and meta_compact_sync may change freely.
    fixed(FIXED_BUFFERED, old, new)?;
    let mut store_dir_dropped = false;
    if running && old.store_dir != new.store_dir {
        if !new.store_dir.is_empty() {
            return Err(JetStreamReloadError::StoreDirectory);
        }
        store_dir_dropped = true;
    }
    fixed(FIXED_SYNC, old, new)?;
    if !disabling {
        if limits_dropped {
            return Err(JetStreamReloadError::LimitsWithoutDisable);
        }
        if store_dir_dropped {
            return Err(JetStreamReloadError::StoreDirWithoutDisable);
        }
    }
    Ok(plan)
}

#[cfg(test)]
#[path = "jetstream_opts_tests.rs"]
mod tests;
