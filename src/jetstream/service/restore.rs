//! `$JS.API.STREAM.RESTORE.<stream>`: a stream brought back from a snapshot in the
//! reference's format (an s2-framed tar).
//!
//! The request is checked as the reference checks it, then answered with a
//! `deliver_subject` (`$JS.SNAPSHOT.RESTORE.<stream>.<id>`) subscribed on the shard the
//! request arrived on. Each chunk published there (with a reply subject) is appended to a
//! spool file under the account's `__snapshots__` directory and acknowledged with an
//! empty message; the upload may not grow past what the account's and the server's
//! storage limits leave. An empty chunk ends the upload: a thread unpacks the archive into
//! a directory next to the spool (the tar's entries are counted against the limits too),
//! checks its `meta.inf`, and the stream is opened from it on the shard it is given to as
//! a recovered stream is (the reference's blocks are imported, the consumers under `obs/`
//! recovered). The last chunk's reply gets the stream's info (`stream_create_response`)
//! or the error. An upload without a chunk for 5 seconds is abandoned and its files
//! removed, as the reference abandons a stalled restore.

use super::{envelope, error_envelope, fail, on_stream_shard, respond, Request};
use crate::core::accounts::AccountId;
use crate::core::client::SubId;
use crate::core::post::{Job, Post};
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::{StorageType, StreamConfig};
use crate::jetstream::api::decode::{self, Field, Kind, Schema, INT, UINT64};
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::{ApiError, GoTime};
use crate::jetstream::registry::Entry;
use crate::jetstream::shard::ShardJs;
use crate::jetstream::JetStream;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SUFFIX: &str = "stream_restore_response";
const DONE_SUFFIX: &str = "stream_create_response";
/// An upload with no chunk for this long is abandoned.
const STALL: Duration = Duration::from_secs(5);

const fn f(json: &'static str, kind: Kind) -> Field {
    Field { json, kind }
}

static LOST: Schema = Schema {
    name: "LostStreamData",
    go_type: "server.LostStreamData",
    fields: &[
        f("msgs", Kind::Slice("[]uint64", &Kind::Int(&UINT64))),
        f("bytes", Kind::Int(&UINT64)),
    ],
    embedded: &[],
};

static STREAM_STATE: Schema = Schema {
    name: "StreamState",
    go_type: "server.StreamState",
    fields: &[
        f("messages", Kind::Int(&UINT64)),
        f("bytes", Kind::Int(&UINT64)),
        f("first_seq", Kind::Int(&UINT64)),
        f("first_ts", Kind::Time),
        f("last_seq", Kind::Int(&UINT64)),
        f("last_ts", Kind::Time),
        f("num_subjects", Kind::Int(&INT)),
        f("subjects", Kind::Map("map[string]uint64", &Kind::Int(&UINT64))),
        f("num_deleted", Kind::Int(&INT)),
        f("deleted", Kind::Slice("[]uint64", &Kind::Int(&UINT64))),
        f("lost", Kind::Struct(&LOST)),
        f("consumer_count", Kind::Int(&INT)),
    ],
    embedded: &[],
};

/// `JSApiStreamRestoreRequest`.
pub static RESTORE_REQUEST: Schema = Schema {
    name: "JSApiStreamRestoreRequest",
    go_type: "server.JSApiStreamRestoreRequest",
    fields: &[
        f(
            "config",
            Kind::Struct(&crate::jetstream::api::stream_schema::STREAM_CONFIG),
        ),
        f("state", Kind::Struct(&STREAM_STATE)),
    ],
    embedded: &[],
};

/// The stream config of a restore request (the state is informational).
pub fn decode_request(body: &[u8]) -> Result<StreamConfig, ApiError> {
    let mut m = decode::decode_value(body, &RESTORE_REQUEST)?;
    let cfg = m.remove("config").unwrap_or_else(|| json!({}));
    serde_json::from_value(cfg).map_err(|err| e::JS_INVALID_JSON_ERR.err_with(format!("json: {err}")))
}

/// Handle `STREAM.RESTORE.<name>`.
pub fn handle(core: &mut ShardCore, js: &Arc<JetStream>, req: Request, name: &str, now: Instant) {
    if super::snapshot::is_empty_request(&req.body) {
        return fail(core, &req, SUFFIX, &e::JS_BAD_REQUEST_ERR.err(), now);
    }
    let mut cfg = match decode_request(&req.body) {
        Ok(c) => c,
        Err(err) => return fail(core, &req, SUFFIX, &err, now),
    };
    if cfg.name.is_empty() {
        cfg.name = name.to_string();
    }
    if cfg.name != name {
        return fail(core, &req, SUFFIX, &e::JS_STREAM_MISMATCH_ERR.err(), now);
    }
    if name.contains(['/', '\\']) {
        return fail(
            core,
            &req,
            SUFFIX,
            &e::JS_STREAM_NAME_CONTAINS_PATH_SEPARATORS_ERR.err(),
            now,
        );
    }
    let acc = req.account;
    let account = core.account_table().name(acc).to_string();
    let limits = js.account_limits(&account);
    let others: std::collections::HashMap<String, StreamConfig> = js
        .registry()
        .streams(acc)
        .map(|(n, en)| (n.clone(), en.cfg.clone()))
        .collect();
    let lookup = |n: &str| others.get(n).cloned();
    // Checked as a new stream's config, but its metadata is kept as given (the reference
    // sets no static metadata on a restore).
    let metadata = cfg.metadata.clone();
    if let Err(err) = crate::jetstream::api::prepare::stream_create(&mut cfg, js, false, &limits, &lookup) {
        return fail(core, &req, SUFFIX, &err, now);
    }
    cfg.metadata = metadata;
    {
        let reg = js.registry();
        if limits.max_streams >= 0 && reg.count(acc) as i64 >= limits.max_streams {
            drop(reg);
            return fail(core, &req, SUFFIX, &e::JS_MAXIMUM_STREAMS_LIMIT_ERR.err(), now);
        }
        if let Err(err) = super::streams::check_reservation(js, &reg, acc, &cfg, &limits) {
            drop(reg);
            return fail(core, &req, SUFFIX, &err, now);
        }
        if reg.get(acc, name).is_some() {
            drop(reg);
            return fail(
                core,
                &req,
                SUFFIX,
                &e::JS_STREAM_NAME_EXIST_RESTORE_FAILED_ERR.err(),
                now,
            );
        }
    }
    let memory = cfg.storage == StorageType::Memory;
    let room = |limit: i64, used: i64| (limit >= 0).then(|| u64::try_from(limit.saturating_sub(used)).unwrap_or(0));
    let (acc_limit, srv_limit) = if memory {
        (limits.max_memory, js.settings.max_memory)
    } else {
        (limits.max_store, js.settings.max_store)
    };
    let used_acc = js.usage(acc).of(memory).load(std::sync::atomic::Ordering::Relaxed);
    let used_all = js.total.of(memory).load(std::sync::atomic::Ordering::Relaxed);
    let limit = [room(acc_limit, used_acc), room(srv_limit, used_all)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX);
    let id = crate::system::nuid::Nuid::new().next_id();
    let work = js.settings.root.join(&account).join("__snapshots__");
    let spool = work.join(format!("restore-{id}.s2"));
    let file = std::fs::create_dir_all(&work).and_then(|_| std::fs::File::create(&spool));
    let subject = format!("$JS.SNAPSHOT.RESTORE.{name}.{id}");
    let file = match file {
        Ok(f) => f,
        Err(err) => {
            let err = e::JS_RESTORE_SUBSCRIBE_FAILED_ERR_F.with(&[("err", &err.to_string()), ("subject", &subject)]);
            return fail(core, &req, SUFFIX, &err, now);
        }
    };
    tracing::info!("Starting restore for stream '{account} > {name}'");
    super::snapshot::advisory(
        core,
        js,
        acc,
        "RESTORE_CREATE",
        name,
        json!({}),
        req.client.as_deref(),
        now,
    );
    let Some(post) = core.post().cloned() else { return };
    let upload = Arc::new(Mutex::new(Upload {
        file: Some(std::io::BufWriter::new(file)),
        total: 0,
        last: Instant::now(),
        done: false,
        sub: None,
    }));
    let ctx = Arc::new(Ctx {
        js: js.clone(),
        post,
        shard: core.index(),
        acc,
        account,
        cfg,
        spool,
        unpacked: work.join(format!("snap-{id}")),
        limit,
        client: req.client.clone(),
        started: GoTime::now(),
        bytes: std::sync::atomic::AtomicU64::new(0),
    });
    let h = chunk_handler(ctx.clone(), upload.clone());
    let Some(sub) = core.subscribe_internal(acc, &subject, None, false, h, now) else {
        ctx.cleanup();
        let err = e::JS_RESTORE_SUBSCRIBE_FAILED_ERR_F.with(&[("err", "subscribe failed"), ("subject", &subject)]);
        return fail(core, &req, SUFFIX, &err, now);
    };
    lock(&upload).sub = Some(sub);
    core.flush_mesh(now);
    respond(
        core,
        &req,
        &envelope(SUFFIX, json!({ "deliver_subject": subject })),
        now,
    );
    let watch = std::thread::Builder::new()
        .name("js-restore-watch".into())
        .spawn(move || watchdog(&ctx, &upload));
    if watch.is_err() {
        tracing::warn!("JetStream: no watchdog for a restore");
    }
}

/// What a restore needs to finish, shared by its handler and threads.
struct Ctx {
    js: Arc<JetStream>,
    post: Arc<dyn Post>,
    /// The shard of the chunk subscription.
    shard: usize,
    acc: AccountId,
    account: String,
    cfg: StreamConfig,
    spool: PathBuf,
    unpacked: PathBuf,
    limit: u64,
    /// The requester (JSON) and the start, for the advisories.
    client: Option<String>,
    started: GoTime,
    /// Bytes received.
    bytes: std::sync::atomic::AtomicU64,
}

impl Ctx {
    fn label(&self) -> String {
        format!("{} > {}", self.account, self.cfg.name)
    }

    fn cleanup(&self) {
        let _ = std::fs::remove_file(&self.spool);
        let _ = std::fs::remove_dir_all(&self.unpacked);
    }

    fn job(&self, shard: usize, f: impl FnOnce(&mut ShardCore, Instant) + Send + 'static) {
        let job: Job = Box::new(f);
        self.post.post(shard, job);
    }

    fn unsubscribe(&self, sub: Option<SubId>) {
        if let Some(sub) = sub {
            self.job(self.shard, move |core, _| core.unsubscribe_internal(sub));
        }
    }

    /// Answer the end of the upload (from the chunk subscription's shard), after the
    /// completion advisory.
    fn answer(&self, reply: Vec<u8>, body: Vec<u8>) {
        let acc = self.acc;
        let (js, stream, client) = (self.js.clone(), self.cfg.name.clone(), self.client.clone());
        let fields = json!({
            "start": self.started,
            "end": GoTime::now(),
            "bytes": self.bytes.load(std::sync::atomic::Ordering::Relaxed),
        });
        self.job(self.shard, move |core, now| {
            super::snapshot::advisory(
                core,
                &js,
                acc,
                "RESTORE_COMPLETE",
                &stream,
                fields,
                client.as_deref(),
                now,
            );
            if !reply.is_empty() {
                core.publish_jetstream(acc, &reply, b"", None, &body, now);
            }
        });
    }

    fn answer_error(&self, reply: Vec<u8>, err: &ApiError) {
        tracing::warn!("Restore failed for stream '{}': {}", self.label(), err.description);
        self.answer(reply, error_envelope(DONE_SUFFIX, err, json!({})));
    }
}

struct Upload {
    file: Option<std::io::BufWriter<std::fs::File>>,
    total: u64,
    last: Instant,
    done: bool,
    sub: Option<SubId>,
}

fn lock(u: &Mutex<Upload>) -> std::sync::MutexGuard<'_, Upload> {
    u.lock().unwrap_or_else(|p| p.into_inner())
}

fn resources_exceeded(cfg: &StreamConfig) -> ApiError {
    match cfg.storage {
        StorageType::Memory => e::JS_MEMORY_RESOURCES_EXCEEDED_ERR.err(),
        StorageType::File => e::JS_STORAGE_RESOURCES_EXCEEDED_ERR.err(),
    }
}

fn chunk_handler(ctx: Arc<Ctx>, upload: Arc<Mutex<Upload>>) -> Handler {
    Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
        let m = m.take();
        let mut u = lock(&upload);
        if u.done {
            return;
        }
        if m.reply.is_empty() {
            u.done = true;
            u.file = None;
            ctx.unsubscribe(u.sub.take());
            ctx.cleanup();
            tracing::warn!(
                "restore for stream '{}' requires reply subject for each chunk",
                ctx.label()
            );
            return;
        }
        if m.payload.is_empty() {
            u.done = true;
            ctx.unsubscribe(u.sub.take());
            let flushed = u.file.take().map(|mut f| f.flush());
            drop(u);
            let ctx2 = ctx.clone();
            let reply = m.reply;
            let spawned = std::thread::Builder::new()
                .name("js-restore".into())
                .spawn(move || finish(ctx2, flushed, reply));
            if spawned.is_err() {
                ctx.cleanup();
            }
            return;
        }
        u.last = Instant::now();
        let first = u.total == 0;
        u.total = u.total.saturating_add(m.payload.len() as u64);
        ctx.bytes.store(u.total, std::sync::atomic::Ordering::Relaxed);
        let failed = if first && !s2_start(&m.payload) {
            Some(e::JS_STREAM_RESTORE_ERR_F.err_with("s2: corrupt input"))
        } else if u.total > ctx.limit {
            Some(resources_exceeded(&ctx.cfg))
        } else {
            match u.file.as_mut().map(|f| f.write_all(&m.payload)) {
                Some(Ok(())) => None,
                Some(Err(err)) => Some(e::JS_STREAM_RESTORE_ERR_F.err_with(err)),
                None => Some(e::JS_STREAM_RESTORE_ERR_F.err_with("restore closed")),
            }
        };
        if let Some(err) = failed {
            u.done = true;
            u.file = None;
            ctx.unsubscribe(u.sub.take());
            ctx.cleanup();
            tracing::warn!("Restore failed for stream '{}': {}", ctx.label(), err.description);
            drop(u);
            ctx.answer(m.reply, error_envelope(DONE_SUFFIX, &err, json!({})));
            return;
        }
        core.publish_jetstream(ctx.acc, &m.reply, b"", None, b"", now);
    })
}

fn watchdog(ctx: &Ctx, upload: &Mutex<Upload>) {
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let mut u = lock(upload);
        if u.done {
            return;
        }
        if u.last.elapsed() >= STALL {
            u.done = true;
            u.file = None;
            ctx.unsubscribe(u.sub.take());
            ctx.cleanup();
            tracing::warn!("restore for stream '{}' is stalled", ctx.label());
            return;
        }
    }
}

/// The text the reference's s2 reader gives for a damaged stream.
fn go_text(ours: &str) -> String {
    if ours.contains("s2: truncated") {
        "unexpected EOF".into()
    } else if ours.contains("s2: CRC mismatch") {
        "s2: corrupt input, crc mismatch".into()
    } else if ours.contains("s2: unknown reserved chunk") {
        "s2: unsupported input".into()
    } else if ours.contains("s2: ") {
        "s2: corrupt input".into()
    } else {
        ours.to_string()
    }
}

/// Does the start of an upload look like an s2 (or snappy) stream? The reference's reader
/// refuses anything else at the first chunk.
fn s2_start(chunk: &[u8]) -> bool {
    const IDS: [&[u8]; 2] = [b"\xff\x06\x00\x00S2sTwO", b"\xff\x06\x00\x00sNaPpY"];
    IDS.iter().any(|id| {
        let n = chunk.len().min(id.len());
        chunk.get(..n) == id.get(..n)
    })
}

/// Unpack the spooled archive into `to`, counting its entries against `limit`.
fn unpack(spool: &Path, to: &Path, limit: u64, cfg: &StreamConfig, account: &str) -> Result<(), ApiError> {
    let restore_err = |err: &dyn std::fmt::Display| e::JS_STREAM_RESTORE_ERR_F.err_with(go_text(&err.to_string()));
    let unexpected = || {
        let err = format!("unexpected content (account={account})");
        tracing::error!("Stream restore failed due to {err}");
        e::JS_STREAM_RESTORE_ERR_F.err_with(err)
    };
    let input = std::fs::File::open(spool).map_err(|err| restore_err(&err))?;
    let mut ar = tar::Archive::new(storage::reference::s2::S2Reader::new(std::io::BufReader::new(input)));
    std::fs::create_dir_all(to).map_err(|err| restore_err(&err))?;
    let mut total = 0u64;
    for ent in ar.entries().map_err(|err| restore_err(&err))? {
        let mut ent = ent.map_err(|err| restore_err(&err))?;
        if !ent.header().entry_type().is_file() {
            return Err(unexpected());
        }
        total = total.saturating_add(ent.header().size().unwrap_or(u64::MAX));
        if total > limit {
            return Err(resources_exceeded(cfg));
        }
        let path = ent.path().map_err(|err| restore_err(&err))?.into_owned();
        let safe = path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
        if !safe || path.as_os_str().is_empty() {
            return Err(unexpected());
        }
        let dest = to.join(&path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|err| restore_err(&err))?;
        }
        let mut out = std::fs::File::create(&dest).map_err(|err| restore_err(&err))?;
        // Never more than the header claimed, whatever the stream holds.
        let claimed = ent.header().size().unwrap_or(0);
        std::io::copy(&mut std::io::Read::take(&mut ent, claimed), &mut out).map_err(|err| restore_err(&err))?;
    }
    Ok(())
}

/// The end of an upload: unpack, check, and open the stream.
fn finish(ctx: Arc<Ctx>, flushed: Option<std::io::Result<()>>, reply: Vec<u8>) {
    let fail_with = |err: ApiError| {
        ctx.cleanup();
        ctx.answer_error(reply.clone(), &err);
    };
    match flushed {
        Some(Ok(())) => {}
        Some(Err(err)) => return fail_with(e::JS_STREAM_RESTORE_ERR_F.err_with(err)),
        None => return fail_with(e::JS_STREAM_RESTORE_ERR_F.err_with("restore closed")),
    }
    if let Err(err) = unpack(&ctx.spool, &ctx.unpacked, ctx.limit, &ctx.cfg, &ctx.account) {
        return fail_with(err);
    }
    if ctx.cfg.storage == StorageType::File {
        let _ = std::fs::remove_file(&ctx.spool);
    }
    let created = match std::fs::read(ctx.unpacked.join("meta.inf")) {
        Err(err) => return fail_with(e::JS_STREAM_RESTORE_ERR_F.err_with(err)),
        Ok(b) => match serde_json::from_slice::<Value>(&b) {
            Err(err) => return fail_with(e::JS_STREAM_RESTORE_ERR_F.err_with(err)),
            Ok(v) => {
                if v.get("name").and_then(Value::as_str) != Some(ctx.cfg.name.as_str()) {
                    return fail_with(e::JS_STREAM_RESTORE_ERR_F.err_with("stream names do not match"));
                }
                v.get("Created")
                    .or_else(|| v.get("created"))
                    .and_then(Value::as_str)
                    .and_then(GoTime::parse)
            }
        },
    };
    let c2 = ctx.clone();
    ctx.job(ctx.shard, move |core, now| install(core, c2, created, reply, now));
}

/// Register the stream and open it on the shard it is given to.
fn install(core: &mut ShardCore, ctx: Arc<Ctx>, created: Option<GoTime>, reply: Vec<u8>, now: Instant) {
    let js = ctx.js.clone();
    let acc = ctx.acc;
    let shard = {
        let mut reg = js.registry();
        if reg.get(acc, &ctx.cfg.name).is_some() {
            drop(reg);
            ctx.cleanup();
            return ctx.answer_error(reply, &e::JS_STREAM_NAME_EXIST_RESTORE_FAILED_ERR.err());
        }
        if reg.overlapping(acc, &ctx.cfg.name, &ctx.cfg.subjects).is_some() {
            drop(reg);
            ctx.cleanup();
            return ctx.answer_error(reply, &e::JS_STREAM_SUBJECT_OVERLAP_ERR.err());
        }
        let shard = reg.pick_shard() % core.shards().max(1);
        reg.insert(
            acc,
            Entry {
                shard,
                cfg: ctx.cfg.clone(),
                created: created.unwrap_or_else(GoTime::now),
                consumers: Default::default(),
            },
        );
        shard
    };
    on_stream_shard(
        core,
        shard,
        move |sjs: &mut ShardJs, core: &mut ShardCore, now: Instant| open(sjs, core, &ctx, created, reply, now),
        now,
    );
}

/// The consumers of the archive (under `obs/` of the unpacked directory) added to a
/// memory stream, with their state.
fn memory_consumers(sjs: &mut ShardJs, core: &mut ShardCore, ctx: &Ctx, now: Instant) {
    let Ok(entries) = std::fs::read_dir(ctx.unpacked.join("obs")) else {
        return;
    };
    for ent in entries.flatten() {
        let cdir = ent.path();
        let (cname, cfg, created) = match crate::jetstream::stream::persist::read_consumer_meta(&cdir) {
            Ok(m) => m,
            Err(err) => {
                tracing::warn!("JetStream restore: skipping consumer {}: {err}", cdir.display());
                continue;
            }
        };
        let state = std::fs::read(cdir.join("o.dat"))
            .ok()
            .and_then(|b| storage::consumer_state::decode(&b).ok());
        let stream = ctx.cfg.name.as_str();
        match sjs.add_consumer(core, ctx.acc, stream, &cname, cfg, created, state, now) {
            Ok(()) => {
                if let Some(en) = ctx.js.registry().get_mut(ctx.acc, stream) {
                    en.consumers.insert(cname);
                }
            }
            Err(err) => tracing::warn!("JetStream restore: consumer '{stream} > {cname}': {err}"),
        }
    }
}

fn open(sjs: &mut ShardJs, core: &mut ShardCore, ctx: &Ctx, created: Option<GoTime>, reply: Vec<u8>, now: Instant) {
    let (acc, name) = (ctx.acc, ctx.cfg.name.clone());
    let created = created.unwrap_or_else(GoTime::now);
    let file = ctx.cfg.storage == StorageType::File;
    let failed = |err: ApiError| {
        ctx.js.registry().remove(acc, &name);
        ctx.cleanup();
        ctx.answer_error(reply.clone(), &err);
    };
    if file {
        // The unpacked directory becomes the stream's: its reference blocks are imported
        // and its consumers recovered as for a directory the reference wrote.
        let dest = ctx.js.streams_dir(&ctx.account).join(&name);
        let moved = (|| -> std::io::Result<()> {
            if dest.exists() {
                std::fs::remove_dir_all(&dest)?;
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::rename(&ctx.unpacked, &dest)
        })();
        if let Err(err) = moved {
            return failed(e::JS_STREAM_RESTORE_ERR_F.err_with(err));
        }
        if let Err(err) = sjs.open_stream(core, acc, ctx.cfg.clone(), created, now) {
            let _ = std::fs::remove_dir_all(&dest);
            return failed(err);
        }
        // The imported blocks need no copy kept aside: the snapshot was the original.
        let _ = std::fs::remove_dir_all(dest.join(".nats-server"));
    } else {
        if let Err(err) = sjs.open_stream(core, acc, ctx.cfg.clone(), created, now) {
            return failed(err);
        }
        // A memory stream replays the archive into its store.
        if let Some(st) = sjs.streams.get_mut(&(acc, name.clone())) {
            let mut report = |line: String| tracing::warn!("JetStream restore: {line}");
            let replayed = std::fs::File::open(&ctx.spool)
                .map_err(storage::StoreError::from)
                .and_then(|f| {
                    storage::reference::snapshot::restore(
                        &mut std::io::BufReader::new(f),
                        st.store.as_mut(),
                        &mut report,
                    )
                });
            st.sync_usage();
            if let Err(err) = replayed {
                sjs.close_stream(core, acc, &name, true);
                return failed(e::JS_STREAM_RESTORE_ERR_F.err_with(err));
            }
        }
        memory_consumers(sjs, core, ctx, now);
        ctx.cleanup();
    }
    if let Some(st) = sjs.streams.get_mut(&(acc, name.clone())) {
        st.rebuild_dedupe(crate::jetstream::shard::wall_ns());
    }
    sjs.recover_consumers(core, acc, &name, now);
    let consumers = sjs.consumer_count(acc, &name);
    let Some(st) = sjs.streams.get_mut(&(acc, name.clone())) else {
        return;
    };
    // What the reference answers: config (with the dynamic metadata), created, state, ts.
    let info = json!({
        "config": crate::jetstream::api::stream_check::with_dynamic_metadata(&st.cfg),
        "created": st.created,
        "state": super::streams::state_json(st, false, "", consumers),
        "ts": GoTime::now(),
    });
    tracing::info!("Completed restore for stream '{}'", ctx.label());
    crate::jetstream::advisory::stream_action(core, &ctx.js, acc, &name, "create", now);
    ctx.answer(reply, envelope(DONE_SUFFIX, info));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_decoding() {
        let cfg = decode_request(
            br#"{"config":{"name":"S","subjects":["a"]},"state":{"messages":3,"first_ts":"2024-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!((cfg.name.as_str(), cfg.subjects.len()), ("S", 1));
        assert_eq!(decode_request(br#"{"state":{}}"#).unwrap().name, "");
        for bad in [
            r#"{"config":{"name":5}}"#,
            r#"{"config":{},"bogus":1}"#,
            r#"{"state":{"messages":-1}}"#,
            "[",
            "x",
        ] {
            let err = decode_request(bad.as_bytes()).unwrap_err();
            assert_eq!(err.err_code, 10025, "{bad}: {err:?}");
        }
    }

    #[test]
    fn s2_errors_read_as_the_reference() {
        let cases = [
            ("s2: truncated chunk", "unexpected EOF"),
            ("s2: CRC mismatch", "s2: corrupt input, crc mismatch"),
            ("s2: unknown reserved chunk", "s2: unsupported input"),
            ("s2: missing stream identifier", "s2: corrupt input"),
            ("numeric field was not a number", "numeric field was not a number"),
        ];
        for (ours, want) in cases {
            assert_eq!(go_text(ours), want);
        }
    }

    #[test]
    fn stream_starts() {
        for (b, want) in [
            (&b"\xff\x06\x00\x00S2sTwO\x01"[..], true),
            (b"\xff\x06\x00\x00sNaPpY", true),
            (b"\xff\x06", true),
            (b"\xff\x06\x00\x00XXXXXX", false),
            (b"hello", false),
        ] {
            assert_eq!(s2_start(b), want, "{b:?}");
        }
    }
}
