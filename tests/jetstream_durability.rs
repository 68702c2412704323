//! JetStream durability with the real binary on both reactors (4 shards, file storage):
//!
//! - `kill9_loop`: publishers (unique `Nats-Msg-Id`s, several acks in flight) and a durable
//!   pull consumer per stream (acks confirmed by the server, as with `AckSync`) run against
//!   three file streams until the server is killed with SIGKILL at a random moment; the
//!   server restarts on the same store and every acknowledged message must be at its
//!   acknowledged sequence with its payload, no Msg-Id stored twice (republishing the
//!   unacknowledged ids dedupes), no gap in the sequences, publishers' acks in publish
//!   order, and each consumer's ack floor at or above the last floor the server confirmed.
//!   The last stream is published to slowly so that its consumer works at the tail. At the
//!   end no consumer may have skipped a message: every acknowledged message at or below its
//!   ack floor was delivered to it. `RNATS_DURABILITY_CYCLES` sets the cycles (default 8;
//!   the full form is 100); `RNATS_DURABILITY_SEED` fixes the random choices (kill delays,
//!   samples; the timing of the kill is the machine's).
//! - `damaged_files`: a stream's block file is cut, zeroed from an offset, or has a bit
//!   flipped (after a kill -9 and after a clean stop); the server must start, keep the
//!   stream, serve only messages identical to what was published, and serve every message
//!   the damage did not touch. `RNATS_DURABILITY_DAMAGE_CASES` sets the cases per kind and
//!   stop (default 4).
//! - `lazy_writes_reach_the_disk_unprompted`: with `sync_interval` set the file store holds
//!   small appends back for a few milliseconds (as the reference's flush loop does); with
//!   no more traffic they are still written, so a kill -9 a moment later keeps them.
//! - `memory_stream_gone_file_stream_kept`: after a restart a memory stream is gone (as in
//!   nats-server) and a file stream is intact.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, stream};
use async_nats::HeaderMap;
use common::{rt, Reactor, Server};
use futures::StreamExt;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STREAMS: usize = 3;
const PUBLISHERS: usize = 2;
/// Publishes a publisher keeps awaiting their ack.
const WINDOW: usize = 16;
/// The standard header name (a `&str` lookup would not find the parsed standard name).
const MSG_ID: async_nats::header::HeaderName = async_nats::header::NATS_MESSAGE_ID;

fn start(r: Reactor, dir: &Path) -> Server {
    Server::start(r, &["--shards", "4", "-js", "-sd", dir.to_str().unwrap()])
}

/// SIGKILL (no SIGTERM first: the harness's drop only signals a child it still holds).
fn kill9(s: &mut Server) {
    let st = s.stop_with(libc::SIGKILL);
    assert!(!st.success(), "killed server exited cleanly: {st:?}");
}

fn store_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rnats-jsdur-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn stream_name(i: usize) -> String {
    format!("DUR{i}")
}

/// A payload derived from the Msg-Id, of a length between 1 and ~900 bytes.
fn payload_for(id: &str) -> Vec<u8> {
    let h = id.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    let len = (h % 900) as usize;
    let mut v = format!("{id}|").into_bytes();
    v.extend((0..len).map(|i| b'a' + ((h >> (i % 56)) as u8).wrapping_add(i as u8) % 26));
    v
}

fn msg_id(h: Option<&HeaderMap>) -> Option<String> {
    h.and_then(|h| h.get(MSG_ID)).map(|v| v.as_str().to_string())
}

/// What the test knows about one stream.
#[derive(Default)]
struct Model {
    /// Every Msg-Id ever published, with its payload.
    sent: HashMap<String, Vec<u8>>,
    /// Msg-Ids published in the current cycle (to find the unacknowledged ones).
    sent_cycle: Vec<String>,
    /// Acknowledged: sequence -> Msg-Id, and back.
    acked: BTreeMap<u64, String>,
    acked_ids: HashMap<String, u64>,
    /// Stored messages seen by a check: Msg-Id -> sequence.
    stored_ids: HashMap<String, u64>,
    /// Sequences checked so far (the next check starts after them).
    checked_upto: u64,
    /// Stream sequences whose ack the server confirmed, above `confirmed_floor`.
    confirmed: BTreeSet<u64>,
    /// Every sequence up to here was acknowledged, with the server's confirmation.
    confirmed_floor: u64,
    /// Msg-Ids delivered to the consumer.
    consumed: HashSet<String>,
}

impl Model {
    fn record_ack(&mut self, id: &str, seq: u64, duplicate: bool) -> Result<(), String> {
        if let Some(&s) = self.acked_ids.get(id) {
            if s != seq {
                return Err(format!(
                    "{id} acknowledged at {s} and again at {seq} (duplicate: {duplicate})"
                ));
            }
            return Ok(());
        }
        if let Some(other) = self.acked.get(&seq) {
            if other != id {
                return Err(format!(
                    "sequence {seq} acknowledged for {other} and later for {id}: an acknowledged message was lost"
                ));
            }
        }
        self.acked.insert(seq, id.to_string());
        self.acked_ids.insert(id.to_string(), seq);
        Ok(())
    }

    fn confirm(&mut self, seq: u64) {
        if seq > self.confirmed_floor {
            self.confirmed.insert(seq);
        }
        while self.confirmed.remove(&(self.confirmed_floor + 1)) {
            self.confirmed_floor += 1;
        }
    }
}

#[derive(Default)]
struct Shared {
    models: Vec<Model>,
    problems: Vec<String>,
    /// Fetches whose end (the last message or the 404) never came.
    stalled_fetches: u64,
}

type SharedState = Arc<Mutex<Shared>>;

#[derive(Default, Debug)]
struct Counts {
    cycles: u64,
    acked: u64,
    verified: u64,
    republished: u64,
    deduped: u64,
    consumer_delivered: u64,
    ahead_of_stream: u64,
    stalled_fetches: u64,
}

/// One publisher: WINDOW publishes in flight, each ack recorded as it arrives.
/// The last stream is published to slowly, so that its consumer keeps up with the tail
/// (and acks messages whose writes may still be in flight when the kill comes).
fn paced(si: usize) -> bool {
    si == STREAMS - 1
}

async fn publisher(js: jetstream::Context, state: SharedState, si: usize, tag: String) {
    let mut inflight = futures::stream::FuturesOrdered::new();
    let mut n = 0u64;
    let mut last_seq = 0u64;
    let window = if paced(si) { 2 } else { WINDOW };
    loop {
        while inflight.len() < window {
            if paced(si) {
                tokio::time::sleep(Duration::from_millis(4)).await;
            }
            let id = format!("{tag}-{n}");
            let payload = payload_for(&id);
            {
                let mut s = state.lock().unwrap();
                let m = &mut s.models[si];
                m.sent.insert(id.clone(), payload.clone());
                m.sent_cycle.push(id.clone());
            }
            let mut h = HeaderMap::new();
            h.insert(MSG_ID, id.as_str());
            let subject = format!("dur{si}.{}", n % 7);
            n += 1;
            match js.publish_with_headers(subject, h, payload.into()).await {
                Ok(f) => inflight.push_back(async move { (id, f.await) }),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    break;
                }
            }
        }
        let Some((id, res)) = inflight.next().await else {
            continue;
        };
        let Ok(ack) = res else { continue };
        let mut s = state.lock().unwrap();
        let r = s.models[si].record_ack(&id, ack.sequence, ack.duplicate);
        if let Err(e) = r {
            s.problems.push(format!("{}: {e}", stream_name(si)));
        }
        if ack.duplicate {
            s.problems.push(format!(
                "{}: fresh id {id} acknowledged as a duplicate",
                stream_name(si)
            ));
        }
        if ack.sequence <= last_seq {
            s.problems.push(format!(
                "{}: {id} acknowledged at {} after an earlier publish at {last_seq}",
                stream_name(si),
                ack.sequence
            ));
        }
        last_seq = ack.sequence;
    }
}

/// The durable consumer: fetch, ack each message and wait for the server's confirmation.
async fn acker(client: async_nats::Client, c: consumer::PullConsumer, state: SharedState, si: usize) {
    loop {
        let Ok(mut batch) = c.fetch().max_messages(64).messages().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut got = 0;
        loop {
            // A fetch has no expiry: one whose end never comes is given up (and counted).
            let m = match tokio::time::timeout(Duration::from_secs(5), batch.next()).await {
                Ok(Some(Ok(m))) => m,
                Ok(_) => break,
                Err(_) => {
                    state.lock().unwrap().stalled_fetches += 1;
                    break;
                }
            };
            got += 1;
            let Ok(seq) = m.info().map(|i| i.stream_sequence) else {
                continue;
            };
            let Some(reply) = m.reply.clone() else { continue };
            // Delivered: whether or not its ack is confirmed, the consumer has had it.
            if let Some(id) = msg_id(m.headers.as_ref()) {
                state.lock().unwrap().models[si].consumed.insert(id);
            }
            // A request fails on "no responders": only a real answer counts.
            let ok = tokio::time::timeout(Duration::from_secs(3), client.request(reply, "+ACK".into()))
                .await
                .is_ok_and(|r| r.is_ok());
            if ok {
                state.lock().unwrap().models[si].confirm(seq);
            }
        }
        if got == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn connect(s: &Server) -> (async_nats::Client, jetstream::Context) {
    let c = async_nats::connect(s.url()).await.unwrap();
    // One request first, so the client's inbox subscription exists before the loop's
    // first timed call (API answers leave from the shard the request arrived on, which has
    // the inbox whatever shard the stream is on).
    c.request("$JS.API.INFO", "".into()).await.unwrap();
    let mut js = jetstream::new(c.clone());
    js.set_timeout(Duration::from_secs(10));
    (c, js)
}

async fn setup_streams(js: &jetstream::Context) {
    for i in 0..STREAMS {
        let st = js
            .get_or_create_stream(stream::Config {
                name: stream_name(i),
                subjects: vec![format!("dur{i}.>")],
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
            .unwrap();
        st.get_or_create_consumer(
            "C",
            consumer::pull::Config {
                durable_name: Some("C".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
}

/// Every message of a stream from `from` on, by sequence (an ephemeral reader consumer).
async fn read_from(js: &jetstream::Context, name: &str, from: u64, last: u64) -> BTreeMap<u64, (String, Vec<u8>)> {
    let mut out = BTreeMap::new();
    if from > last {
        return out;
    }
    let st = js.get_stream(name).await.unwrap();
    let reader = st
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: from },
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut idle_since = Instant::now();
    let mut top = from - 1;
    while top < last && idle_since.elapsed() < Duration::from_secs(5) {
        let mut batch = reader.fetch().max_messages(1000).messages().await.unwrap();
        while let Some(m) = batch.next().await {
            let m = m.unwrap();
            let seq = m.info().unwrap().stream_sequence;
            let id = msg_id(m.headers.as_ref()).unwrap_or_default();
            out.insert(seq, (id, m.payload.to_vec()));
            top = top.max(seq);
            idle_since = Instant::now();
        }
    }
    let name = reader.cached_info().name.clone();
    let _ = st.delete_consumer(&name).await;
    out
}

/// Check the messages read back from `from` on against the model; the confirmed ack floor.
fn check_stored(
    m: &mut Model,
    name: &str,
    info: &stream::State,
    stored: &BTreeMap<u64, (String, Vec<u8>)>,
    from: u64,
    full: bool,
    counts: &mut Counts,
) -> u64 {
    if full {
        m.stored_ids.clear();
    }
    for seq in from..=info.last_sequence {
        let Some((id, payload)) = stored.get(&seq) else {
            panic!("{name}: sequence {seq} missing (stream {info:?})");
        };
        let Some(sent) = m.sent.get(id) else {
            panic!("{name}: sequence {seq} holds {id:?}, never published");
        };
        assert!(sent == payload, "{name}: sequence {seq} ({id}): payload differs");
        if let Some(prev) = m.stored_ids.insert(id.clone(), seq) {
            panic!("{name}: {id} stored twice, at {prev} and {seq}");
        }
        counts.verified += 1;
    }
    for (&seq, id) in m.acked.range(from..) {
        let got = stored.get(&seq).map(|(i, _)| i.as_str());
        assert_eq!(got, Some(id.as_str()), "{name}: acknowledged sequence {seq} lost");
    }
    m.checked_upto = info.last_sequence;
    m.confirmed_floor
}

/// After a restart: check every stream against the model. `full`: from sequence 1.
async fn check(js: &jetstream::Context, state: &SharedState, full: bool, counts: &mut Counts) {
    for si in 0..STREAMS {
        let name = stream_name(si);
        let t0 = Instant::now();
        let mut st = js
            .get_stream(&name)
            .await
            .unwrap_or_else(|e| panic!("{name}: stream info after restart: {e} ({:?})", t0.elapsed()));
        let info = st.info().await.unwrap().state.clone();
        let (from, acked_top) = {
            let s = state.lock().unwrap();
            let m = &s.models[si];
            let from = if full { 1 } else { m.checked_upto + 1 };
            (from, m.acked.keys().next_back().copied().unwrap_or(0))
        };
        assert!(
            info.last_sequence >= acked_top,
            "{name}: last sequence {} below the acknowledged {acked_top}",
            info.last_sequence
        );
        assert_eq!(
            info.messages, info.last_sequence,
            "{name}: gaps in the stream: {info:?}"
        );
        let stored = read_from(js, &name, from, info.last_sequence).await;
        let confirmed = check_stored(
            &mut state.lock().unwrap().models[si],
            &name,
            &info,
            &stored,
            from,
            full,
            counts,
        );
        let mut c: consumer::PullConsumer = st.get_consumer("C").await.unwrap();
        let ci = c.info().await.unwrap();
        assert!(
            ci.ack_floor.stream_sequence >= confirmed,
            "{name}: consumer ack floor {} went below the confirmed {confirmed}",
            ci.ack_floor.stream_sequence
        );
        if ci.ack_floor.stream_sequence > info.last_sequence {
            counts.ahead_of_stream += 1;
        }
    }
}

/// Republish last cycle's unacknowledged ids and a few acknowledged ones: the stored ones
/// must dedupe to their sequence, the others are stored now.
async fn republish(js: &jetstream::Context, state: &SharedState, rng: &mut impl Rng, counts: &mut Counts) {
    for si in 0..STREAMS {
        let todo: Vec<(String, Vec<u8>, Option<u64>)> = {
            let mut s = state.lock().unwrap();
            let m = &mut s.models[si];
            let cycle = std::mem::take(&mut m.sent_cycle);
            let mut pick: Vec<String> = cycle
                .iter()
                .filter(|id| !m.acked_ids.contains_key(*id))
                .cloned()
                .collect();
            let acked: Vec<&String> = cycle.iter().filter(|id| m.acked_ids.contains_key(*id)).collect();
            for _ in 0..acked.len().min(10) {
                pick.push(acked[rng.gen_range(0..acked.len())].clone());
            }
            pick.into_iter()
                .map(|id| {
                    let stored = m.stored_ids.get(&id).copied();
                    let p = m.sent[&id].clone();
                    (id, p, stored)
                })
                .collect()
        };
        for (id, payload, stored) in todo {
            let mut h = HeaderMap::new();
            h.insert(MSG_ID, id.as_str());
            let ack = js
                .publish_with_headers(format!("dur{si}.re"), h, payload.into())
                .await
                .unwrap()
                .await
                .unwrap_or_else(|e| panic!("republish {id}: {e}"));
            counts.republished += 1;
            let name = stream_name(si);
            match stored {
                Some(seq) => {
                    assert!(ack.duplicate, "{name}: stored {id} (at {seq}) not deduped: {ack:?}");
                    assert_eq!(ack.sequence, seq, "{name}: {id} deduped to another sequence");
                    counts.deduped += 1;
                }
                None => assert!(!ack.duplicate, "{name}: {id} was not stored, yet deduped: {ack:?}"),
            }
            let mut s = state.lock().unwrap();
            let m = &mut s.models[si];
            m.record_ack(&id, ack.sequence, ack.duplicate).unwrap();
            m.stored_ids.insert(id.clone(), ack.sequence);
            m.checked_upto = m.checked_upto.max(ack.sequence);
        }
    }
}

/// Prints the server's log if the test panics while it is alive.
struct DumpOnPanic(Arc<Mutex<Vec<String>>>);

impl Drop for DumpOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = self.0.lock().map(|l| l.clone()).unwrap_or_default();
            eprintln!("server log:\n{}", lines.join("\n"));
        }
    }
}

fn kill9_loop(r: Reactor) {
    let cycles: u64 = std::env::var("RNATS_DURABILITY_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("RNATS_DURABILITY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("kill9_loop {r:?}: {cycles} cycles, seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = store_dir("kill9");
    let state: SharedState = Arc::new(Mutex::new(Shared {
        models: (0..STREAMS).map(|_| Model::default()).collect(),
        problems: Vec::new(),
        stalled_fetches: 0,
    }));
    let mut counts = Counts::default();
    let runtime = rt();
    for cycle in 0..cycles {
        let mut s = start(r, &dir);
        let log = s.log.clone();
        let delay = Duration::from_millis(rng.gen_range(100..1200));
        let _dump = DumpOnPanic(log);
        runtime.block_on(async {
            let (client, js) = connect(&s).await;
            if cycle == 0 {
                setup_streams(&js).await;
            } else {
                check(&js, &state, false, &mut counts).await;
                republish(&js, &state, &mut rng, &mut counts).await;
            }
            let mut tasks = Vec::new();
            for si in 0..STREAMS {
                for p in 0..if paced(si) { 1 } else { PUBLISHERS } {
                    let tag = format!("c{cycle}s{si}p{p}");
                    tasks.push(tokio::spawn(publisher(js.clone(), state.clone(), si, tag)));
                }
                let c: consumer::PullConsumer = js
                    .get_stream(stream_name(si))
                    .await
                    .unwrap()
                    .get_consumer("C")
                    .await
                    .unwrap();
                tasks.push(tokio::spawn(acker(client.clone(), c, state.clone(), si)));
            }
            tokio::time::sleep(delay).await;
            kill9(&mut s);
            for t in &tasks {
                t.abort();
            }
            for t in tasks {
                let _ = t.await;
            }
        });
        counts.cycles += 1;
        let problems = std::mem::take(&mut state.lock().unwrap().problems);
        assert!(problems.is_empty(), "cycle {cycle}: {problems:#?}");
    }
    // The last restart: a full check, and no consumer skipped a message: every
    // acknowledged message at or below its consumer's ack floor was delivered to it.
    let s = start(r, &dir);
    runtime.block_on(async {
        let (_client, js) = connect(&s).await;
        check(&js, &state, true, &mut counts).await;
        let mut skipped = Vec::new();
        for si in 0..STREAMS {
            let name = stream_name(si);
            let st = js.get_stream(&name).await.unwrap();
            let mut c: consumer::PullConsumer = st.get_consumer("C").await.unwrap();
            let floor = c.info().await.unwrap().ack_floor.stream_sequence;
            let s = state.lock().unwrap();
            let m = &s.models[si];
            counts.acked += m.acked.len() as u64;
            counts.consumer_delivered += m.consumed.len() as u64;
            let missed: Vec<(u64, &String)> = m
                .acked
                .range(..=floor)
                .filter(|(_, id)| !m.consumed.contains(*id))
                .map(|(seq, id)| (*seq, id))
                .collect();
            if !missed.is_empty() {
                skipped.push(format!(
                    "{name}: {} below the ack floor {floor} never delivered, e.g. {:?}",
                    missed.len(),
                    &missed[..missed.len().min(5)]
                ));
            }
        }
        counts.stalled_fetches = state.lock().unwrap().stalled_fetches;
        assert!(skipped.is_empty(), "consumers skipped messages: {skipped:#?}");
    });
    eprintln!("kill9_loop {r:?}: {counts:?}");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(kill9_loop, |r| super::kill9_loop(r));

// ---- damaged block files ----

#[derive(Clone, Copy, Debug)]
enum Damage {
    Cut,
    ZeroTail,
    Flip,
}

/// The message records of a block file: sequence -> (offset, padded length).
fn records(bytes: &[u8]) -> BTreeMap<u64, (u64, u64)> {
    let hdr = storage::filestore::block_header(bytes).expect("block header");
    let mut out = BTreeMap::new();
    storage::filestore::scan_block(bytes, &hdr, None, |off, len, rec| {
        if rec.kind == storage::filestore::format::Kind::Msg {
            out.insert(rec.seq, (off, u64::from(len)));
        }
    });
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The block file holding the stream's messages (the largest).
fn data_block(msgs: &Path) -> PathBuf {
    std::fs::read_dir(msgs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a block file")
}

fn damaged_files(r: Reactor) {
    let cases: usize = std::env::var("RNATS_DURABILITY_DAMAGE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed: u64 = rand::thread_rng().gen();
    eprintln!("damaged_files {r:?}: seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let runtime = rt();
    let mut served = 0u64;
    let mut withheld = 0u64;
    let mut runs = 0u64;
    for clean_stop in [false, true] {
        let pristine = store_dir(&format!("dmg-orig-{clean_stop}"));
        let mut published = BTreeMap::new();
        {
            let mut s = start(r, &pristine);
            runtime.block_on(async {
                let (_c, js) = connect(&s).await;
                js.create_stream(stream::Config {
                    name: "DMG".into(),
                    subjects: vec!["dmg.>".into()],
                    storage: stream::StorageType::File,
                    ..Default::default()
                })
                .await
                .unwrap();
                for i in 0..300u64 {
                    let id = format!("dmg-{i}");
                    let mut h = HeaderMap::new();
                    h.insert(MSG_ID, id.as_str());
                    let p = payload_for(&id);
                    let ack = js
                        .publish_with_headers(format!("dmg.{}", i % 5), h, p.clone().into())
                        .await
                        .unwrap()
                        .await
                        .unwrap();
                    published.insert(ack.sequence, (format!("dmg.{}", i % 5), id, p));
                }
            });
            if clean_stop {
                drop(s);
            } else {
                kill9(&mut s);
            }
        }
        let rel = Path::new("jetstream")
            .join("$G")
            .join("streams")
            .join("DMG")
            .join("msgs");
        let blk_name = data_block(&pristine.join(&rel)).file_name().unwrap().to_owned();
        let orig = std::fs::read(pristine.join(&rel).join(&blk_name)).unwrap();
        let recs = records(&orig);
        assert_eq!(recs.len(), 300, "records of the pristine block");
        for kind in [Damage::Cut, Damage::ZeroTail, Damage::Flip] {
            for case in 0..cases {
                let copy = store_dir(&format!("dmg-copy-{clean_stop}"));
                copy_tree(&pristine, &copy);
                let target = copy.join(&rel).join(&blk_name);
                let (first_off, _) = recs[&1];
                let at = rng.gen_range(first_off..orig.len() as u64);
                let bit = rng.gen_range(0..8u8);
                let mut bytes = orig.clone();
                match kind {
                    Damage::Cut => bytes.truncate(at as usize),
                    Damage::ZeroTail => bytes[at as usize..].iter_mut().for_each(|b| *b = 0),
                    Damage::Flip => bytes[at as usize] ^= 1 << bit,
                }
                std::fs::write(&target, &bytes).unwrap();
                let touched: BTreeSet<u64> = recs
                    .iter()
                    .filter(|(_, &(off, len))| match kind {
                        Damage::Cut | Damage::ZeroTail => off + len > at,
                        Damage::Flip => off <= at && at < off + len,
                    })
                    .map(|(&seq, _)| seq)
                    .collect();
                let ctx = format!("{kind:?} clean_stop={clean_stop} case {case} at {at} bit {bit}");
                let s = start(r, &copy);
                runtime.block_on(async {
                    let (_c, js) = connect(&s).await;
                    let st = js
                        .get_stream("DMG")
                        .await
                        .unwrap_or_else(|e| panic!("{ctx}: stream gone: {e}"));
                    for (&seq, (subject, id, payload)) in &published {
                        match st.get_raw_message(seq).await {
                            Ok(m) => {
                                assert_eq!(m.subject.as_str(), subject, "{ctx}: seq {seq}");
                                assert_eq!(
                                    msg_id(Some(&m.headers)).as_deref(),
                                    Some(id.as_str()),
                                    "{ctx}: seq {seq}"
                                );
                                assert!(m.payload[..] == payload[..], "{ctx}: seq {seq}: corrupt payload served");
                                served += 1;
                            }
                            Err(e) => {
                                assert!(touched.contains(&seq), "{ctx}: untouched seq {seq} not served: {e}");
                                withheld += 1;
                            }
                        }
                    }
                    // A consumer reading everything gets only intact messages.
                    let all = read_from(&js, "DMG", 1, 300).await;
                    for (seq, (id, payload)) in &all {
                        let Some((_, pid, pp)) = published.get(seq) else {
                            panic!("{ctx}: consumer got unknown sequence {seq}");
                        };
                        assert_eq!(id, pid, "{ctx}: consumer seq {seq}");
                        assert!(payload == pp, "{ctx}: consumer got a corrupt payload at {seq}");
                    }
                    for seq in published.keys().filter(|s| !touched.contains(s)) {
                        assert!(all.contains_key(seq), "{ctx}: consumer missed untouched seq {seq}");
                    }
                    // The damaged stream still takes writes.
                    let ack = js
                        .publish("dmg.after", "after damage".into())
                        .await
                        .unwrap()
                        .await
                        .unwrap_or_else(|e| panic!("{ctx}: publish after damage: {e}"));
                    assert!(ack.sequence > 0, "{ctx}");
                });
                drop(s);
                runs += 1;
                let _ = std::fs::remove_dir_all(&copy);
            }
        }
        let _ = std::fs::remove_dir_all(&pristine);
    }
    eprintln!("damaged_files {r:?}: {runs} damaged restarts, {served} messages served intact, {withheld} withheld");
}

both_reactors!(damaged_files, |r| super::damaged_files(r));

// ---- interval (lazy) mode ----

fn lazy_writes_reach_the_disk_unprompted(r: Reactor) {
    let dir = store_dir("lazy");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("lazy.conf");
    std::fs::write(&conf, "jetstream { sync_interval: \"2m\" }\n").unwrap();
    let store = dir.join("store");
    let a = [
        "--shards",
        "2",
        "-js",
        "-sd",
        store.to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ];
    let runtime = rt();
    for round in 1..=3u64 {
        let mut s = Server::start(r, &a);
        runtime.block_on(async {
            let (_c, js) = connect(&s).await;
            let st = js
                .get_or_create_stream(stream::Config {
                    name: "LAZY".into(),
                    subjects: vec!["lazy.>".into()],
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(st.cached_info().state.messages, (round - 1) * 5, "round {round}");
            for i in 0..5 {
                js.publish(format!("lazy.{round}"), format!("{round}-{i}").into())
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
        });
        // Longer than the longest hold (8 ms), with nothing else happening.
        std::thread::sleep(Duration::from_millis(150));
        kill9(&mut s);
    }
    let s = Server::start(r, &a);
    runtime.block_on(async {
        let (_c, js) = connect(&s).await;
        let mut st = js.get_stream("LAZY").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, 15);
        for seq in 1..=15u64 {
            let m = st.get_raw_message(seq).await.unwrap();
            let want = format!("{}-{}", (seq - 1) / 5 + 1, (seq - 1) % 5);
            assert_eq!(&m.payload[..], want.as_bytes(), "seq {seq}");
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(lazy_writes_reach_the_disk_unprompted, |r| {
    super::lazy_writes_reach_the_disk_unprompted(r)
});

// ---- memory streams ----

fn memory_stream_gone_file_stream_kept(r: Reactor) {
    let runtime = rt();
    for kill in [true, false] {
        let dir = store_dir(&format!("mem-{kill}"));
        let mut s = start(r, &dir);
        runtime.block_on(async {
            let (_c, js) = connect(&s).await;
            for (name, storage) in [
                ("MEM", stream::StorageType::Memory),
                ("FILE", stream::StorageType::File),
            ] {
                js.create_stream(stream::Config {
                    name: name.into(),
                    subjects: vec![format!("{}.>", name.to_lowercase())],
                    storage,
                    ..Default::default()
                })
                .await
                .unwrap();
                for i in 0..10 {
                    js.publish(format!("{}.{i}", name.to_lowercase()), format!("{name}{i}").into())
                        .await
                        .unwrap()
                        .await
                        .unwrap();
                }
            }
        });
        if kill {
            kill9(&mut s);
        } else {
            drop(s);
        }
        let s = start(r, &dir);
        runtime.block_on(async {
            let (_c, js) = connect(&s).await;
            let err = js.get_stream("MEM").await.unwrap_err();
            assert!(err.to_string().contains("stream not found"), "kill={kill}: {err}");
            let mut st = js.get_stream("FILE").await.unwrap();
            let info = st.info().await.unwrap().state.clone();
            assert_eq!((info.messages, info.first_sequence, info.last_sequence), (10, 1, 10));
            for i in 0..10u64 {
                let m = st.get_raw_message(i + 1).await.unwrap();
                assert_eq!(m.subject.as_str(), format!("file.{i}"));
                assert_eq!(&m.payload[..], format!("FILE{i}").as_bytes());
            }
            let names: Vec<String> = js.stream_names().map(|n| n.unwrap()).collect().await;
            assert_eq!(names, ["FILE"], "kill={kill}");
        });
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

both_reactors!(memory_stream_gone_file_stream_kept, |r| {
    super::memory_stream_gone_file_stream_kept(r)
});

/// What a consumer was given survives a kill -9, even when its publisher never waited for
/// the ack: a push consumer is handed a message only once the store holds it durably.
/// Each round publishes without waiting, kills the server the moment the message arrives,
/// restarts it and finds the message at its sequence.
fn delivered_survives_kill(r: Reactor) {
    let dir = store_dir("delivered");
    let rounds: u64 = 12;
    for round in 1..=rounds {
        let mut s = start(r, &dir);
        rt().block_on(async {
            let c = async_nats::connect(s.url()).await.unwrap();
            let js = jetstream::new(c.clone());
            let st = js
                .get_or_create_stream(stream::Config {
                    name: "SEEN".into(),
                    subjects: vec!["seen.>".into()],
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(
                st.cached_info().state.messages,
                round - 1,
                "round {round}: messages kept"
            );
            let mut sub = c.subscribe("deliver.seen").await.unwrap();
            st.create_consumer(consumer::push::Config {
                deliver_subject: "deliver.seen".into(),
                deliver_policy: consumer::DeliverPolicy::New,
                ..Default::default()
            })
            .await
            .unwrap();
            c.publish(format!("seen.{round}"), format!("{round}").into())
                .await
                .unwrap();
            c.flush().await.unwrap();
            let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&m.payload[..], format!("{round}").as_bytes());
        });
        kill9(&mut s);
    }
    let s = start(r, &dir);
    rt().block_on(async {
        let js = jetstream::new(async_nats::connect(s.url()).await.unwrap());
        let mut st = js.get_stream("SEEN").await.unwrap();
        assert_eq!(st.info().await.unwrap().state.messages, rounds);
        for seq in 1..=rounds {
            let m = st.get_raw_message(seq).await.unwrap();
            assert_eq!(&m.payload[..], format!("{seq}").as_bytes(), "seq {seq}");
        }
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(what_a_consumer_saw_survives_kill9, |r| super::delivered_survives_kill(
    r
));
