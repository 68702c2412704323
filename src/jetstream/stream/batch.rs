//! Atomic batch publish (`allow_atomic`, ADR-50). Messages carrying `Nats-Batch-Id` and
//! `Nats-Batch-Sequence` (1, 2, ...) are staged, each answered with an empty message;
//! the one with `Nats-Batch-Commit: 1` (stored) or `eob` (not stored) commits: the whole
//! batch is checked as one (expectations, duplicates, counters, rollups, discard-new
//! limits) and then stored in one go, or nothing is. The commit's PubAck carries
//! `"batch"` and `"count"` and is sent once the last message is durable.
//!
//! Limits (the reference's defaults, or `jetstream { limits { batch { ... } } }`): 50
//! batches in flight per stream, 1000 on the server, 1000 messages a batch, 10 s without
//! a message abandons a batch.

use super::ingest::{pub_ack_error, Ingested, Mode};
use super::Stream;
use crate::jetstream::api::config::DiscardPolicy;
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use crate::proto::headers;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub const BATCH_ID: &str = "Nats-Batch-Id";
pub const BATCH_SEQ: &str = "Nats-Batch-Sequence";
pub const BATCH_COMMIT: &str = "Nats-Batch-Commit";

/// Atomic batches in flight on the whole server (the reference counts them process-wide).
static ATOMIC_INFLIGHT: AtomicI64 = AtomicI64::new(0);
/// Fast batches in flight on the whole server.
pub(super) static FAST_INFLIGHT: AtomicI64 = AtomicI64::new(0);

/// `jetstream { limits { batch { ... } } }`; 0 (or zero time) means the default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchLimits {
    pub inflight_per_stream: i64,
    pub inflight_total: i64,
    pub max_size: i64,
    pub timeout: Duration,
}

fn or(v: i64, default: i64) -> i64 {
    if v > 0 {
        v
    } else {
        default
    }
}

impl BatchLimits {
    pub fn atomic_per_stream(&self) -> i64 {
        or(self.inflight_per_stream, 50)
    }
    pub fn atomic_total(&self) -> i64 {
        or(self.inflight_total, 1000)
    }
    pub fn fast_per_stream(&self) -> i64 {
        or(self.inflight_per_stream, 1000)
    }
    pub fn fast_total(&self) -> i64 {
        or(self.inflight_total, 50_000)
    }
    pub fn max_size(&self) -> i64 {
        or(self.max_size, 1000)
    }
    /// Inactivity timeout, nanoseconds.
    pub fn timeout_ns(&self) -> i64 {
        match i64::try_from(self.timeout.as_nanos()) {
            Ok(t) if t > 0 => t,
            _ => 10_000_000_000,
        }
    }
}

/// A staged message.
#[derive(Debug, Clone)]
struct Staged {
    subject: String,
    hdr: Vec<u8>,
    payload: Vec<u8>,
}

/// An atomic batch being staged.
#[derive(Debug)]
struct Atomic {
    msgs: Vec<Staged>,
    /// When it is abandoned (Unix ns) unless a message comes.
    expires: i64,
}

/// The batches of a stream.
#[derive(Debug, Default)]
pub struct Batches {
    atomic: HashMap<String, Atomic>,
    pub(super) fast: HashMap<String, super::batch_fast::Fast>,
    /// Atomic batches given up since the last look, with the reason the advisory gives
    /// (`timeout`, `large`, `incomplete`, `unsupported`).
    abandoned: Vec<(String, &'static str)>,
}

impl Batches {
    fn drop_atomic(&mut self, id: &str) {
        if self.atomic.remove(id).is_some() {
            ATOMIC_INFLIGHT.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn abandon(&mut self, id: &str, reason: &'static str) {
        if self.atomic.contains_key(id) {
            self.abandoned.push((id.to_string(), reason));
        }
        self.drop_atomic(id);
    }

    /// The batches abandoned since the last call (for their advisories).
    pub fn take_abandoned(&mut self) -> Vec<(String, &'static str)> {
        std::mem::take(&mut self.abandoned)
    }

    /// Abandon the batches whose time ran out.
    pub fn expire(&mut self, now: i64) {
        let expired: Vec<String> = self
            .atomic
            .iter()
            .filter(|(_, b)| b.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.abandon(&id, "timeout");
        }
        self.expire_fast(now);
    }

    /// No batch in progress.
    pub fn is_empty(&self) -> bool {
        self.atomic.is_empty() && self.fast.is_empty()
    }

    /// When the next batch times out (Unix ns).
    pub fn next_expiry(&self) -> Option<i64> {
        self.atomic
            .values()
            .map(|b| b.expires)
            .chain(self.fast.values().map(|b| b.expires))
            .min()
    }

    /// The stream goes away: its batches leave the server's counts.
    pub fn clear(&mut self) {
        let n = self.atomic.len() as i64;
        self.atomic.clear();
        ATOMIC_INFLIGHT.fetch_sub(n, Ordering::Relaxed);
        let n = self.fast.len() as i64;
        self.fast.clear();
        FAST_INFLIGHT.fetch_sub(n, Ordering::Relaxed);
    }
}

/// The PubAck fields of a batch's last message: `,"batch":"<id>","count":<seq>`.
pub fn ack_tail(hdr: Option<&[u8]>) -> Option<String> {
    let h = hdr?;
    let id = std::str::from_utf8(headers::get(h, BATCH_ID)?).ok()?;
    if id.is_empty() {
        return None;
    }
    let seq = batch_seq(h).unwrap_or(0);
    Some(format!(",\"batch\":{},\"count\":{seq}", go_quote(id)))
}

fn go_quote(s: &str) -> String {
    String::from_utf8(crate::proto::gojson::to_vec(&s)).unwrap_or_else(|_| "\"\"".into())
}

/// `Nats-Batch-Sequence` as the reference reads it: absent or empty is `None`; not a
/// number reads as -1 (a huge unsigned value).
fn batch_seq(hdr: &[u8]) -> Option<u64> {
    let v = headers::get(hdr, BATCH_SEQ).filter(|v| !v.is_empty())?;
    Some(
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|n| *n <= i64::MAX as u64)
            .unwrap_or(u64::MAX),
    )
}

const REQUIRED_API_LEVEL: &str = "Nats-Required-Api-Level";

/// A `Nats-Required-Api-Level` this server cannot serve (not a number, or above its
/// level).
pub(super) fn level_too_new(level: &[u8]) -> bool {
    std::str::from_utf8(level)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_none_or(|v| v > crate::jetstream::api::consumer_check::API_LEVEL)
}

/// `hdr` without `Nats-Required-Api-Level`, or the error when the level is too new.
pub(super) fn strip_api_level(hdr: Option<&[u8]>) -> Result<Option<Vec<u8>>, ApiError> {
    match hdr.and_then(|h| headers::get(h, REQUIRED_API_LEVEL).map(|l| (h, l))) {
        None => Ok(None),
        Some((_, l)) if level_too_new(l) => Err(e::JS_REQUIRED_API_LEVEL_ERR.err()),
        Some((h, _)) => Ok(Some(headers::without_key(h, REQUIRED_API_LEVEL))),
    }
}

/// Whether an atomic batch message: a non-empty `Nats-Batch-Id`.
pub fn atomic_id(hdr: Option<&[u8]>) -> Option<&str> {
    hdr.and_then(|h| headers::get(h, BATCH_ID))
        .filter(|v| !v.is_empty())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// What a batch message did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Answers to send now (to the publish's reply subject).
    pub replies: Vec<Vec<u8>>,
    /// Stored messages (sequence, subject), for the consumers.
    pub stored: Vec<(u64, String)>,
    /// Messages were removed (rollups).
    pub purged: bool,
}

/// The running state of a batch's checks.
#[derive(Default)]
struct Diff {
    msg_ids: HashSet<String>,
    /// Counter totals by subject, as the batch would leave them (header, body).
    counters: HashMap<String, (Vec<u8>, Vec<u8>)>,
    /// Messages and bytes per subject.
    inflight: HashMap<String, (u64, u64)>,
    expected_per_subject: HashMap<String, u64>,
}

impl Stream {
    /// A publish that is part of a batch: a fast batch reply subject or an atomic
    /// batch's `Nats-Batch-Id`. `None` when it is neither.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_publish(
        &mut self,
        subject: &str,
        reply: &[u8],
        hdr: Option<&[u8]>,
        payload: &[u8],
        now: i64,
        domain: &str,
        max_payload: i64,
        limits: &BatchLimits,
    ) -> Option<BatchOutcome> {
        if let Some(fast) = super::batch_fast::parse_reply(reply) {
            return Some(self.fast_publish(fast, subject, reply, hdr, payload, now, domain, max_payload, limits));
        }
        let id = atomic_id(hdr)?.to_string();
        let hdr = hdr.unwrap_or_default();
        Some(self.atomic_publish(&id, subject, reply, hdr, payload, now, domain, max_payload, limits))
    }

    /// An atomic batch message on `subject` (its `Nats-Batch-Id` is `id`). `now` is the
    /// wall clock (Unix ns); `interest` tells whether a consumer wants a sequence's
    /// subject (interest retention).
    #[allow(clippy::too_many_arguments)]
    pub fn atomic_publish(
        &mut self,
        id: &str,
        subject: &str,
        reply: &[u8],
        hdr: &[u8],
        payload: &[u8],
        now: i64,
        domain: &str,
        max_payload: i64,
        limits: &BatchLimits,
    ) -> BatchOutcome {
        let respond = !self.cfg.no_ack && !reply.is_empty();
        let mut out = BatchOutcome::default();
        let mut fail = |s: &Stream, err: ApiError| {
            if respond {
                out.replies.push(pub_ack_error(&s.name, &err));
            }
        };
        let r = self.atomic_stage(id, subject, hdr, payload, now, limits);
        let batch = match r {
            Err(err) => {
                fail(self, err);
                return out;
            }
            Ok(None) => {
                // Staged: an empty answer says so.
                if respond {
                    out.replies.push(Vec::new());
                }
                return out;
            }
            Ok(Some(b)) => b,
        };
        if let Err(err) = self.check_batch(&batch, max_payload) {
            fail(self, err);
            return out;
        }
        self.store_batch(batch, reply, now, domain, max_payload, &mut out);
        out
    }

    /// Stage a message; `Ok(Some(batch))` when it commits (the messages to store).
    fn atomic_stage(
        &mut self,
        id: &str,
        subject: &str,
        hdr: &[u8],
        payload: &[u8],
        now: i64,
        limits: &BatchLimits,
    ) -> Result<Option<Vec<Staged>>, ApiError> {
        if self.cfg.sealed {
            return Err(e::JS_STREAM_SEALED_ERR.err());
        }
        let max_size = i64::from(self.cfg.max_msg_size);
        let (hl, pl) = (hdr.len() as i64, payload.len() as i64);
        if max_size >= 0 && (hl > max_size || pl > max_size - hl) {
            return Err(e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
        }
        if !self.cfg.allow_atomic {
            return Err(e::JS_ATOMIC_PUBLISH_DISABLED_ERR.err());
        }
        if id.len() > 64 {
            return Err(e::JS_ATOMIC_PUBLISH_INVALID_BATCH_ID_ERR.err());
        }
        let Some(seq) = batch_seq(hdr) else {
            return Err(e::JS_ATOMIC_PUBLISH_MISSING_SEQ_ERR.err());
        };
        self.batches.expire(now);
        let max = u64::try_from(limits.max_size()).unwrap_or(1000);
        let too_large = || e::JS_ATOMIC_PUBLISH_TOO_LARGE_BATCH_ERR_F.with(&[("size", &max.to_string())]);
        let incomplete = || e::JS_ATOMIC_PUBLISH_INCOMPLETE_BATCH_ERR.err();
        if !self.batches.atomic.contains_key(id) {
            if seq != 1 {
                return Err(if seq > max { too_large() } else { incomplete() });
            }
            if self.batches.atomic.len() as i64 + 1 > limits.atomic_per_stream() {
                return Err(e::JS_ATOMIC_PUBLISH_TOO_MANY_INFLIGHT.err());
            }
            if ATOMIC_INFLIGHT.fetch_add(1, Ordering::Relaxed) + 1 > limits.atomic_total() {
                ATOMIC_INFLIGHT.fetch_sub(1, Ordering::Relaxed);
                return Err(e::JS_ATOMIC_PUBLISH_TOO_MANY_INFLIGHT.err());
            }
            self.batches.atomic.insert(
                id.to_string(),
                Atomic {
                    msgs: Vec::new(),
                    expires: 0,
                },
            );
        }
        let (commit, eob) = match headers::get(hdr, BATCH_COMMIT) {
            None => (false, false),
            Some(b"1") => (true, false),
            Some(b"eob") => (true, true),
            Some(_) => {
                self.batches.drop_atomic(id);
                return Err(e::JS_ATOMIC_PUBLISH_INVALID_BATCH_COMMIT_ERR.err());
            }
        };
        // A level this server does not have refuses the batch; the header is not kept.
        let stripped;
        let mut hdr = hdr;
        if let Some(level) = headers::get(hdr, REQUIRED_API_LEVEL) {
            if level_too_new(level) {
                self.batches.abandon(id, "unsupported");
                return Err(e::JS_REQUIRED_API_LEVEL_ERR.err());
            }
            stripped = headers::without_key(hdr, REQUIRED_API_LEVEL);
            hdr = &stripped;
        }
        let Some(b) = self.batches.atomic.get_mut(id) else {
            return Err(incomplete());
        };
        b.expires = now.saturating_add(limits.timeout_ns());
        if b.msgs.len() as u64 + 1 != seq || (seq == 1 && eob) {
            self.batches.abandon(id, "incomplete");
            return Err(incomplete());
        }
        if seq > max {
            self.batches.abandon(id, "large");
            return Err(too_large());
        }
        if !eob {
            b.msgs.push(Staged {
                subject: subject.to_string(),
                hdr: hdr.to_vec(),
                payload: payload.to_vec(),
            });
        }
        if !commit {
            return Ok(None);
        }
        let mut msgs = self.batches.atomic.remove(id).map(|b| b.msgs).unwrap_or_default();
        ATOMIC_INFLIGHT.fetch_sub(1, Ordering::Relaxed);
        if eob {
            // The last stored message gets the commit header the reference gives it.
            if let Some(last) = msgs.last_mut() {
                last.hdr = headers::with(Some(&last.hdr), BATCH_COMMIT, "1");
            }
        }
        Ok(Some(msgs))
    }

    /// The reference's checks of a whole batch before anything is stored.
    fn check_batch(&mut self, msgs: &[Staged], max_payload: i64) -> Result<(), ApiError> {
        let mut diff = Diff::default();
        let last_seq = self.store.fast_state().last_seq;
        for (i, m) in msgs.iter().enumerate() {
            if headers::get(&m.hdr, "Nats-Expected-Last-Msg-Id").is_some_and(|v| !v.is_empty()) {
                return Err(
                    e::JS_ATOMIC_PUBLISH_UNSUPPORTED_HEADER_BATCH_ERR.with(&[("header", "Nats-Expected-Last-Msg-Id")])
                );
            }
            self.check_batch_msg(&mut diff, m, last_seq + i as u64, max_payload)?;
        }
        Ok(())
    }

    /// The checks of one message on its own (a fast batch's).
    pub(super) fn check_batch_one(
        &mut self,
        subject: &str,
        hdr: &[u8],
        payload: &[u8],
        max_payload: i64,
    ) -> Result<(), ApiError> {
        let m = Staged {
            subject: subject.to_string(),
            hdr: hdr.to_vec(),
            payload: payload.to_vec(),
        };
        let last = self.store.fast_state().last_seq;
        self.check_batch_msg(&mut Diff::default(), &m, last, max_payload)
    }

    fn check_batch_msg(&mut self, diff: &mut Diff, m: &Staged, clseq: u64, max_payload: i64) -> Result<(), ApiError> {
        let hdr = &m.hdr[..];
        let subject = m.subject.as_str();
        let get = |k: &str| {
            headers::get(hdr, k)
                .and_then(|v| std::str::from_utf8(v).ok())
                .unwrap_or_default()
        };
        let number = |k: &str| {
            headers::get(hdr, k)
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if hdr.len() > usize::from(u16::MAX) {
            return Err(e::JS_STREAM_HEADER_EXCEEDS_MAXIMUM_ERR.err());
        }
        let incr = super::counter::increment(Some(hdr))?;
        if incr.is_some() {
            super::counter::check_increment(hdr, &m.payload, self.cfg.allow_msg_counter)?;
        }
        let stream = get("Nats-Expected-Stream");
        if !stream.is_empty() && stream != self.name {
            return Err(e::JS_STREAM_NOT_MATCH_ERR.err());
        }
        if let Some(v) = headers::get(hdr, "Nats-TTL").and_then(|v| std::str::from_utf8(v).ok()) {
            let parsed = super::ingest::parse_ttl(v);
            if parsed.as_ref().map_or(true, |t| *t != 0) {
                if !self.cfg.allow_msg_ttl {
                    return Err(e::JS_MESSAGE_TTL_DISABLED_ERR.err());
                }
                parsed?;
            }
        }
        let msg_id = get("Nats-Msg-Id");
        if !msg_id.is_empty() {
            if diff.msg_ids.contains(msg_id) {
                return Err(e::JS_ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE_ERR.err());
            }
            let now = crate::jetstream::shard::wall_ns();
            if self.dedupe.check(msg_id, now, self.cfg.duplicate_window).is_some() {
                return Err(e::JS_ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE_ERR.err());
            }
            diff.msg_ids.insert(msg_id.to_string());
        }
        if incr.is_none() && self.cfg.allow_msg_counter {
            return Err(e::JS_MESSAGE_INCR_MISSING_ERR.err());
        }
        let mut sized = (hdr.len(), m.payload.len());
        if let (Some(i), true) = (&incr, self.cfg.allow_msg_counter) {
            let last = match diff.counters.get(subject) {
                Some(c) => Some(c.clone()),
                None => self
                    .store
                    .load_last_msg(subject)
                    .ok()
                    .map(|l| (l.headers.to_vec(), l.payload.to_vec())),
            };
            let a = super::counter::apply(
                last.as_ref().map(|(h, b)| (&h[..], &b[..])),
                subject,
                hdr,
                &m.payload,
                i,
            )?;
            let new_hdr = a.hdr.unwrap_or_else(|| hdr.to_vec());
            let mut max = max_payload;
            if self.cfg.max_msg_size >= 0 && i64::from(self.cfg.max_msg_size) < max {
                max = i64::from(self.cfg.max_msg_size);
            }
            let (hl, bl) = (new_hdr.len() as i64, a.body.len() as i64);
            if hl > max || bl > max - hl {
                return Err(e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
            }
            sized = (new_hdr.len(), a.body.len());
            diff.counters.insert(subject.to_string(), (new_hdr, a.body));
        }
        let wrong_constant = || e::JS_STREAM_WRONG_LAST_SEQUENCE_CONSTANT_ERR.err();
        if let Some(want) = number("Nats-Expected-Last-Sequence") {
            if want != clseq {
                return Err(e::JS_STREAM_WRONG_LAST_SEQUENCE_ERR_F.with(&[("seq", &clseq.to_string())]));
            }
            if !diff.inflight.is_empty() {
                return Err(wrong_constant());
            }
        }
        let opt_subj = get("Nats-Expected-Last-Subject-Sequence-Subject");
        if let Some(want) = number("Nats-Expected-Last-Subject-Sequence") {
            let on = if opt_subj.is_empty() { subject } else { opt_subj };
            if diff.inflight.contains_key(on) {
                return Err(wrong_constant());
            }
            let have = match diff.expected_per_subject.get(on) {
                Some(s) => *s,
                None => self.store.load_last_msg(on).map(|l| l.seq).unwrap_or(0),
            };
            if have != want {
                return Err(e::JS_STREAM_WRONG_LAST_SEQUENCE_ERR_F.with(&[("seq", &have.to_string())]));
            }
            diff.expected_per_subject.insert(on.to_string(), have);
        } else if !opt_subj.is_empty() {
            return Err(e::JS_STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID.err());
        }
        // Schedules: checked, but (as the reference does) stored as published.
        super::schedule::check_headers(hdr, subject, &self.cfg, false)?;
        let rollup = get("Nats-Rollup");
        if !rollup.is_empty() {
            if !self.cfg.allow_rollup_hdrs || self.cfg.deny_purge {
                return Err(e::JS_STREAM_ROLLUP_FAILED_F.err_with("rollup not permitted"));
            }
            match rollup {
                "sub" if diff.inflight.contains_key(subject) => {
                    return Err(e::JS_STREAM_ROLLUP_FAILED_F.err_with("batch rollup sub invalid"))
                }
                "all" if !diff.inflight.is_empty() => {
                    return Err(e::JS_STREAM_ROLLUP_FAILED_F.err_with("batch rollup all invalid"))
                }
                "sub" | "all" => {}
                other => return Err(e::JS_STREAM_ROLLUP_FAILED_F.err_with(format!("rollup value invalid: {other:?}"))),
            }
        }
        let size = self.store.msg_size(subject, &vec![0; sized.0], &vec![0; sized.1]);
        let entry = diff.inflight.entry(subject.to_string()).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += size;
        let subject_ops = entry.0;
        if self.cfg.discard == DiscardPolicy::New {
            if self.cfg.max_msgs > 0 || self.cfg.max_bytes > 0 {
                let st = self.store.fast_state();
                let (msgs, bytes) = diff
                    .inflight
                    .values()
                    .fold((st.msgs, st.bytes), |(m, b), (om, ob)| (m + om, b + ob));
                if self.cfg.max_msgs > 0 && msgs > self.cfg.max_msgs as u64 {
                    return Err(e::JS_STREAM_STORE_FAILED_F.err_with(storage::StoreError::MaxMsgs));
                }
                if self.cfg.max_bytes > 0 && bytes > self.cfg.max_bytes as u64 {
                    return Err(e::JS_STREAM_STORE_FAILED_F.err_with(storage::StoreError::MaxBytes));
                }
            }
            if self.cfg.discard_new_per_subject && self.cfg.max_msgs_per_subject > 0 && rollup.is_empty() {
                let have = self.store.subjects_totals(subject).get(subject).copied().unwrap_or(0);
                if have + subject_ops > self.cfg.max_msgs_per_subject as u64 {
                    return Err(e::JS_STREAM_STORE_FAILED_F.err_with(storage::StoreError::MaxMsgsPerSubject));
                }
            }
        }
        Ok(())
    }

    /// Store a checked batch; the PubAck goes with its last message.
    fn store_batch(
        &mut self,
        msgs: Vec<Staged>,
        reply: &[u8],
        now: i64,
        domain: &str,
        max_payload: i64,
        out: &mut BatchOutcome,
    ) {
        let n = msgs.len();
        let mode = self.ingest_mode;
        self.ingest_mode = Mode {
            checked: true,
            sourced: false,
        };
        for (i, m) in msgs.into_iter().enumerate() {
            let last = i + 1 == n;
            let next = self.store.fast_state().last_seq + 1;
            let interest = self.cfg.retention != crate::jetstream::api::config::Retention::Interest
                || self.consumers.values().any(|s| s.c.needs(next, &m.subject));
            let r = if last { reply } else { b"" };
            match self.ingest(
                &m.subject,
                r,
                Some(&m.hdr),
                &m.payload,
                now,
                interest,
                domain,
                max_payload,
            ) {
                Ingested::Stored { seq, purged } => {
                    out.stored.push((seq, m.subject));
                    out.purged |= purged;
                }
                Ingested::Reply(body) => out.replies.push(body),
                Ingested::Quiet => {}
            }
        }
        self.ingest_mode = mode;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_default_like_the_reference() {
        let d = BatchLimits::default();
        assert_eq!(
            (d.atomic_per_stream(), d.atomic_total(), d.max_size(), d.timeout_ns()),
            (50, 1000, 1000, 10_000_000_000)
        );
        assert_eq!((d.fast_per_stream(), d.fast_total()), (1000, 50_000));
        let l = BatchLimits {
            inflight_per_stream: 2,
            inflight_total: 3,
            max_size: 4,
            timeout: Duration::from_secs(1),
        };
        assert_eq!(
            (l.atomic_per_stream(), l.atomic_total(), l.max_size(), l.timeout_ns()),
            (2, 3, 4, 1_000_000_000)
        );
    }

    #[test]
    fn header_reading() {
        let h = b"NATS/1.0\r\nNats-Batch-Id: b\"1\r\nNats-Batch-Sequence: 7\r\n\r\n";
        assert_eq!(ack_tail(Some(h)).unwrap(), r#","batch":"b\"1","count":7"#);
        assert_eq!(atomic_id(Some(h)), Some("b\"1"));
        assert_eq!(batch_seq(h), Some(7));
        assert_eq!(batch_seq(b"NATS/1.0\r\nNats-Batch-Sequence: x\r\n\r\n"), Some(u64::MAX));
        assert_eq!(batch_seq(b"NATS/1.0\r\nNats-Batch-Sequence: \r\n\r\n"), None);
        assert_eq!(atomic_id(Some(b"NATS/1.0\r\nNats-Batch-Id: \r\n\r\n")), None);
        assert_eq!(ack_tail(None), None);
    }
}
