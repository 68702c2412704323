//! `$JS.API.STREAM.SNAPSHOT.<stream>`: a stream (and its consumers) as the reference's
//! snapshot (an s2-framed tar, see `storage::reference::snapshot`), streamed in chunks to
//! the requester's `deliver_subject` under the reference's flow control.
//!
//! Memory streams have no snapshot (`snapshot failed: no impl`, as the reference's memory
//! store answers). The snapshot is written once on the stream's shard into a spool file (unlinked as soon
//! as it is open again for reading); a sender thread then publishes it chunk by chunk
//! through jobs on that shard. Each chunk's reply subject is
//! `$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>`; a window of `window_size / chunk_size`
//! chunks may be unacknowledged. The stream ends with an empty message: without a header
//! when the whole snapshot fit in its first chunk, `NATS/1.0 204` otherwise, and
//! `408 No Interest`, `408 No Flow Response` or `500 <error>` when it ends early.

use super::{envelope, fail, on_stream, respond, Request};
use crate::core::accounts::AccountId;
use crate::core::post::{Job, Post};
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use crate::jetstream::api::decode::{self, Field, Kind, Schema, INT};
use crate::jetstream::api::errors_table as e;
use crate::jetstream::shard::{ShardJs, StreamKey};
use crate::jetstream::JetStream;
use serde_json::{json, Value};
use std::io::Read;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SUFFIX: &str = "stream_snapshot_response";
const DEFAULT_CHUNK: i64 = 128 * 1024;
const DEFAULT_WINDOW: i64 = 8 * 1024 * 1024;
/// How long the sender waits for an acknowledgement when the window is full.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the sender waits for interest in the deliver subject at the start.
const INTEREST_WAIT: Duration = Duration::from_secs(2);

const fn f(json: &'static str, kind: Kind) -> Field {
    Field { json, kind }
}

/// `JSApiStreamSnapshotRequest`.
pub static SNAPSHOT_REQUEST: Schema = Schema {
    name: "JSApiStreamSnapshotRequest",
    go_type: "server.JSApiStreamSnapshotRequest",
    fields: &[
        f("deliver_subject", Kind::Str),
        f("no_consumers", Kind::Bool),
        f("chunk_size", Kind::Int(&INT)),
        f("window_size", Kind::Int(&INT)),
        f("jsck", Kind::Bool),
    ],
    embedded: &[],
};

/// A decoded snapshot request.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(default)]
pub struct SnapshotRequest {
    pub deliver_subject: String,
    pub no_consumers: bool,
    pub chunk_size: i64,
    pub window_size: i64,
    pub jsck: bool,
}

/// The reference's `isEmptyRequest`: nothing, `{}`, or a JSON object without fields.
pub fn is_empty_request(body: &[u8]) -> bool {
    if body.is_empty() || body == b"{}" {
        return true;
    }
    matches!(serde_json::from_slice::<Value>(body), Ok(Value::Object(m)) if m.is_empty())
}

/// Chunk size and the number of chunks in flight, clamped as the reference clamps them.
pub fn flow(req: &SnapshotRequest) -> (usize, usize) {
    let chunk = if req.chunk_size == 0 {
        DEFAULT_CHUNK
    } else {
        req.chunk_size
    };
    let window = if req.window_size == 0 {
        DEFAULT_WINDOW
    } else {
        req.window_size
    };
    let chunk = chunk.clamp(1024, 1024 * 1024);
    let window = window.clamp(1024, 32 * 1024 * 1024).max(chunk);
    let chunk = usize::try_from(chunk).unwrap_or(1024);
    let window = usize::try_from(window).unwrap_or(chunk);
    (chunk, (window / chunk).max(1))
}

/// Handle `STREAM.SNAPSHOT.<name>`.
pub fn handle(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    if is_empty_request(&req.body) {
        return fail(core, &req, SUFFIX, &e::JS_BAD_REQUEST_ERR.err(), now);
    }
    if js.registry_to_read().get(req.account, name).is_none() {
        return fail(core, &req, SUFFIX, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
    }
    let sreq: SnapshotRequest = match decode::decode_as(&req.body, &SNAPSHOT_REQUEST) {
        Ok(r) => r,
        Err(err) => return fail(core, &req, SUFFIX, &err, now),
    };
    if !crate::core::subject::is_valid_subject(sreq.deliver_subject.as_bytes()) {
        return fail(
            core,
            &req,
            SUFFIX,
            &e::JS_SNAPSHOT_DELIVER_SUBJECT_INVALID_ERR.err(),
            now,
        );
    }
    let js2 = js.clone();
    on_stream(
        core,
        js,
        req,
        name,
        SUFFIX,
        move |sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, req: Request, now: Instant| {
            start(sjs, core, &js2, key, req, sreq, now)
        },
        now,
    );
}

/// The stream's `meta.inf` as the reference writes it (`Created` first, then the config).
fn meta_inf(st: &crate::jetstream::stream::Stream) -> Vec<u8> {
    if let Some(b) = st.dir.as_ref().and_then(|d| std::fs::read(d.join("meta.inf")).ok()) {
        return b;
    }
    let mut m = serde_json::Map::new();
    m.insert("Created".into(), Value::String(st.created.format()));
    if let Ok(Value::Object(o)) = serde_json::to_value(&st.cfg) {
        m.extend(o);
    }
    crate::proto::gojson::to_vec(&Value::Object(m))
}

/// The consumer files under the stream's `obs/` (`obs/<name>/<file>`).
fn consumer_files(st: &crate::jetstream::stream::Stream) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Some(dir) = &st.dir else { return out };
    let Ok(rd) = std::fs::read_dir(dir.join("obs")) else {
        return out;
    };
    for c in rd.flatten() {
        let cname = c.file_name().to_string_lossy().into_owned();
        for file in ["meta.inf", "meta.sum", "o.dat"] {
            if let Ok(b) = std::fs::read(c.path().join(file)) {
                out.push((format!("obs/{cname}/{file}"), b));
            }
        }
    }
    out
}

/// Messages read from the stream's shard in batches of about this many bytes: the shard
/// is held for one batch at a time while the snapshot is written.
const BATCH_BYTES: usize = 1024 * 1024;
/// How long the writer waits for a batch.
const BATCH_WAIT: Duration = Duration::from_secs(30);

/// The stream's messages up to `last`, pulled from its shard batch by batch.
struct Pull {
    post: Arc<dyn Post>,
    shard: usize,
    key: StreamKey,
    next: u64,
    last: u64,
    buf: std::collections::VecDeque<storage::StoredMsg>,
    failed: Option<String>,
}

/// One batch from `next` on (the stream's shard): messages, and whether the stream ended.
fn batch(sjs: &mut ShardJs, key: &StreamKey, next: u64, last: u64) -> Result<(Vec<storage::StoredMsg>, bool), String> {
    let st = sjs.streams.get_mut(key).ok_or("stream closed")?;
    let all = storage::Filter::all();
    let (mut out, mut size, mut seq) = (Vec::new(), 0usize, next);
    while size < BATCH_BYTES && seq <= last {
        match st.store.load_next_msg(&all, seq) {
            Ok(m) if m.seq <= last => {
                seq = m.seq + 1;
                size += m.payload.len() + m.headers.len() + m.subject.len();
                out.push(m);
            }
            Ok(_) | Err(storage::StoreError::Eof | storage::StoreError::MsgNotFound) => return Ok((out, true)),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok((out, seq > last))
}

impl Iterator for Pull {
    type Item = storage::StoredMsg;

    fn next(&mut self) -> Option<storage::StoredMsg> {
        if self.buf.is_empty() && self.failed.is_none() && self.next <= self.last {
            let (tx, rx) = mpsc::channel();
            let (key, next, last) = (self.key.clone(), self.next, self.last);
            let job: Job = Box::new(move |core: &mut ShardCore, _now: Instant| {
                let r = crate::jetstream::shard::with_js(core, |sjs, _| batch(sjs, &key, next, last))
                    .unwrap_or_else(|| Err("stream closed".into()));
                let _ = tx.send(r);
            });
            self.post.post(self.shard, job);
            match rx.recv_timeout(BATCH_WAIT) {
                Ok(Ok((msgs, end))) => {
                    self.next = msgs.last().map_or(self.next, |m| m.seq + 1);
                    if end || msgs.is_empty() {
                        self.next = self.last + 1;
                    }
                    self.buf.extend(msgs);
                }
                Ok(Err(e)) => self.failed = Some(e),
                Err(_) => self.failed = Some("stream not responding".into()),
            }
        }
        self.buf.pop_front()
    }
}

/// Write the snapshot into an (already unlinked) spool file under the account's
/// `__snapshots__` directory, pulling the messages from the stream's shard.
fn spool(
    root: &std::path::Path,
    account: &str,
    meta: &storage::SnapshotMeta,
    state: &storage::StreamState,
    mut msgs: Pull,
) -> std::io::Result<std::fs::File> {
    let dir = root.join(account).join("__snapshots__");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("snap-{}.s2", crate::system::nuid::Nuid::new().next_id()));
    let name = msgs.key.1.clone();
    let written = (|| -> std::io::Result<std::fs::File> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        storage::reference::snapshot::write(&name, meta, state, &mut msgs, &mut out).map_err(std::io::Error::other)?;
        if let Some(e) = msgs.failed.take() {
            return Err(std::io::Error::other(e));
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        std::fs::File::open(&path)
    })();
    let _ = std::fs::remove_file(&path);
    written
}

fn start(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    js: &Arc<JetStream>,
    key: &StreamKey,
    req: Request,
    sreq: SnapshotRequest,
    now: Instant,
) {
    let consumers = sjs.consumer_count(key.0, &key.1);
    let account = core.account_table().name(key.0).to_string();
    let Some(st) = sjs.streams.get_mut(key) else {
        return fail(core, &req, SUFFIX, &e::JS_STREAM_NOT_FOUND_ERR.err(), now);
    };
    if st.cfg.storage == crate::jetstream::api::config::StorageType::Memory {
        // The reference's memory store has no snapshots.
        tracing::warn!("Snapshot of stream '{account} > {}' failed: no impl", key.1);
        return fail(
            core,
            &req,
            SUFFIX,
            &e::JS_STREAM_SNAPSHOT_ERR_F.err_with("no impl"),
            now,
        );
    }
    tracing::info!("Starting snapshot for stream '{account} > {}'", key.1);
    let meta = storage::SnapshotMeta {
        meta_inf: meta_inf(st),
        extra: if sreq.no_consumers {
            Vec::new()
        } else {
            consumer_files(st)
        },
    };
    let store_state = st.store.fast_state();
    let state = super::streams::state_json(st, false, "", consumers);
    let config = serde_json::to_value(&st.cfg).unwrap_or_default();
    respond(
        core,
        &req,
        &envelope(SUFFIX, json!({"config": config, "state": state.clone()})),
        now,
    );
    let client = req.client.clone();
    advisory(
        core,
        js,
        key.0,
        "SNAPSHOT_CREATE",
        &key.1,
        json!({ "state": state }),
        client.as_deref(),
        now,
    );
    let started = crate::jetstream::api::GoTime::now();
    let Some(post) = core.post().cloned() else { return };
    let (tx, rx) = mpsc::channel::<Event>();
    let ack_subject = format!(
        "$JS.SNAPSHOT.ACK.{}.{}",
        key.1,
        crate::system::nuid::Nuid::new().next_id()
    );
    let acks = tx.clone();
    let h: Handler = Box::new(move |_core: &mut ShardCore, _m: &mut InternalMsg, _now: Instant| {
        let _ = acks.send(Event::Ack);
    });
    let Some(sub) = core.subscribe_internal(key.0, &format!("{ack_subject}.>"), None, false, h, now) else {
        return;
    };
    let sender = Sender {
        post,
        shard: core.index(),
        account: key.0,
        deliver: sreq.deliver_subject.clone().into_bytes(),
        events: tx,
    };
    let (chunk, inflight) = flow(&sreq);
    let label = format!("{account} > {}", key.1);
    let (key2, root) = (key.clone(), js.settings.root.clone());
    let (js2, key3) = (js.clone(), key.1.clone());
    let spawned = std::thread::Builder::new().name("js-snapshot".into()).spawn(move || {
        let t0 = Instant::now();
        let pull = Pull {
            post: sender.post.clone(),
            shard: sender.shard,
            key: key2,
            next: store_state.first_seq.max(1),
            last: store_state.last_seq,
            buf: Default::default(),
            failed: None,
        };
        match spool(&root, &account, &meta, &store_state, pull) {
            Ok(file) => sender.run(file, chunk, inflight, &ack_subject, &rx),
            Err(err) => {
                tracing::warn!("Snapshot of stream '{label}' failed: {err}");
                sender.end(Some(format!("NATS/1.0 500 {err}\r\n\r\n")));
            }
        }
        let (js, acc, stream) = (js2, sender.account, key3);
        sender.job(move |core, now| {
            core.unsubscribe_internal(sub);
            let times = json!({"start": started, "end": crate::jetstream::api::GoTime::now()});
            advisory(
                core,
                &js,
                acc,
                "SNAPSHOT_COMPLETE",
                &stream,
                times,
                client.as_deref(),
                now,
            );
        });
        tracing::info!("Completed snapshot for stream '{label}' in {:?}", t0.elapsed());
    });
    if spawned.is_err() {
        core.unsubscribe_internal(sub);
    }
}

enum Event {
    Ack,
    /// Interest in the deliver subject, as seen on the stream's shard.
    Interest(bool),
}

/// Publishes for the sender thread through jobs on the stream's shard.
struct Sender {
    post: Arc<dyn Post>,
    shard: usize,
    account: AccountId,
    deliver: Vec<u8>,
    events: mpsc::Sender<Event>,
}

impl Sender {
    fn job(&self, f: impl FnOnce(&mut ShardCore, Instant) + Send + 'static) {
        let job: Job = Box::new(f);
        self.post.post(self.shard, job);
    }

    /// Publish to the deliver subject when it has interest (reported back either way).
    fn publish(&self, reply: String, hdr: Option<&'static [u8]>, body: Vec<u8>) {
        let (acc, to, tx) = (self.account, self.deliver.clone(), self.events.clone());
        self.job(move |core, now| {
            let interest = core.has_interest(acc, &to);
            if interest {
                core.publish_jetstream(acc, &to, reply.as_bytes(), hdr, &body, now);
            }
            let _ = tx.send(Event::Interest(interest));
        });
    }

    fn ask_interest(&self) {
        let (acc, to, tx) = (self.account, self.deliver.clone(), self.events.clone());
        self.job(move |core, _| {
            let _ = tx.send(Event::Interest(core.has_interest(acc, &to)));
        });
    }

    fn run(
        &self,
        mut file: std::fs::File,
        chunk: usize,
        inflight: usize,
        ack_subject: &str,
        rx: &mpsc::Receiver<Event>,
    ) {
        // Interest may follow the response by a moment.
        let until = Instant::now() + INTEREST_WAIT;
        loop {
            self.ask_interest();
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Event::Interest(true)) => break,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => break,
            }
        }
        let mut slots = inflight;
        let mut end: Option<String> = None;
        let mut buf = vec![0u8; chunk];
        let mut index = 1u64;
        let mut gone = false;
        let apply = |ev: Event, slots: &mut usize, gone: &mut bool| match ev {
            Event::Ack => *slots = (*slots + 1).min(inflight),
            Event::Interest(false) => *gone = true,
            Event::Interest(true) => {}
        };
        loop {
            while let Ok(ev) = rx.try_recv() {
                apply(ev, &mut slots, &mut gone);
            }
            if gone {
                end = Some("NATS/1.0 408 No Interest\r\n\r\n".into());
                break;
            }
            if slots == 0 {
                match rx.recv_timeout(ACK_TIMEOUT) {
                    Ok(ev) => apply(ev, &mut slots, &mut gone),
                    Err(_) => {
                        end = Some("NATS/1.0 408 No Flow Response\r\n\r\n".into());
                        break;
                    }
                }
                continue;
            }
            let n = match read_full(&mut file, &mut buf) {
                Ok(n) => n,
                Err(err) => {
                    end = Some(format!("NATS/1.0 500 {err}\r\n\r\n"));
                    break;
                }
            };
            let Some(data) = buf.get(..n) else { break };
            if n < chunk {
                if n > 0 {
                    self.publish(String::new(), None, data.to_vec());
                }
                break;
            }
            self.publish(format!("{ack_subject}.{n}.{index}"), None, data.to_vec());
            end.get_or_insert_with(|| "NATS/1.0 204\r\n\r\n".into());
            slots -= 1;
            index += 1;
        }
        self.end(end);
    }

    /// The last message: empty, with `end` as its header.
    fn end(&self, end: Option<String>) {
        let (acc, to) = (self.account, self.deliver.clone());
        self.job(move |core, now| {
            let hdr = end.as_deref().map(str::as_bytes);
            core.publish_jetstream(acc, &to, b"", hdr, b"", now);
        });
    }
}

/// Read until `buf` is full or the file ends; the number of bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let Some(rest) = buf.get_mut(n..) else { break };
        match r.read(rest) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `$JS.EVENT.ADVISORY.STREAM.<kind>.<stream>` (`SNAPSHOT_CREATE`, `SNAPSHOT_COMPLETE`,
/// `RESTORE_CREATE`, `RESTORE_COMPLETE`) with `fields` after the stream's name, then the
/// requester (`client`, JSON) and the domain.
#[allow(clippy::too_many_arguments)]
pub fn advisory(
    core: &mut ShardCore,
    js: &JetStream,
    acc: AccountId,
    kind: &str,
    stream: &str,
    fields: Value,
    client: Option<&str>,
    now: Instant,
) {
    let subject = format!("$JS.EVENT.ADVISORY.STREAM.{kind}.{stream}");
    if !core.has_interest(acc, subject.as_bytes()) {
        return;
    }
    let mut m = serde_json::Map::new();
    m.insert(
        "type".into(),
        json!(format!("io.nats.jetstream.advisory.v1.{}", kind.to_ascii_lowercase())),
    );
    m.insert("id".into(), json!(crate::system::nuid::Nuid::new().next_id()));
    m.insert("timestamp".into(), json!(crate::jetstream::api::GoTime::now()));
    m.insert("stream".into(), json!(stream));
    if let Value::Object(o) = fields {
        m.extend(o);
    }
    let client = client.and_then(|c| serde_json::from_str::<Value>(c).ok());
    m.insert("client".into(), client.unwrap_or(Value::Null));
    if !js.settings.domain.is_empty() {
        m.insert("domain".into(), json!(js.settings.domain));
    }
    let body = crate::proto::gojson::to_vec(&Value::Object(m));
    core.publish_jetstream(acc, subject.as_bytes(), b"", None, &body, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_is_clamped_as_the_reference_clamps_it() {
        let cases: &[(i64, i64, (usize, usize))] = &[
            (0, 0, (128 * 1024, 64)),
            (10, 0, (1024, 8192)),
            (4 * 1024 * 1024, 0, (1024 * 1024, 8)),
            (4096, 1, (4096, 1)),
            (1024, 64 * 1024 * 1024, (1024, 32 * 1024)),
        ];
        for &(c, w, want) in cases {
            let r = SnapshotRequest {
                chunk_size: c,
                window_size: w,
                ..Default::default()
            };
            assert_eq!(flow(&r), want, "chunk {c} window {w}");
        }
    }

    #[test]
    fn empty_requests() {
        for (b, want) in [
            ("", true),
            ("{}", true),
            (" { } ", true),
            ("[]", false),
            ("{\"a\":1}", false),
            ("x", false),
        ] {
            assert_eq!(is_empty_request(b.as_bytes()), want, "{b:?}");
        }
    }

    #[test]
    fn request_decoding() {
        let r: SnapshotRequest = decode::decode_as(
            br#"{"deliver_subject":"x.y","chunk_size":2048,"jsck":true}"#,
            &SNAPSHOT_REQUEST,
        )
        .unwrap();
        assert_eq!((r.deliver_subject.as_str(), r.chunk_size, r.jsck), ("x.y", 2048, true));
        let err = decode::decode_as::<SnapshotRequest>(br#"{"deliver_subject":1}"#, &SNAPSHOT_REQUEST).unwrap_err();
        assert_eq!(err.err_code, 10025);
    }
}
