//! Message schedules (`allow_msg_schedules`, ADR-51). A schedule is a stored message
//! with `Nats-Schedule: <pattern>` and `Nats-Schedule-Target: <subject>` (optionally
//! `-TTL`, `-Rollup`, `-Source`, `-Time-Zone`); the latest message of a subject is its
//! schedule. When it is due, the stream publishes into the target a copy of its body
//! (or of the last message on `Nats-Schedule-Source`) with `Nats-Scheduler: <schedule
//! subject>` and `Nats-Schedule-Next: purge` (one-shot: the schedule is purged) or the
//! next time (repeating: the schedule moves on). The schedule being a stored message,
//! the state is rebuilt from the store when the stream opens.

use super::schedule_pattern::{self, Next};
use super::Stream;
use crate::jetstream::api::config::StreamConfig;
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use crate::proto::headers;
use std::collections::{BTreeSet, HashMap, HashSet};

pub const SCHEDULE: &str = "Nats-Schedule";
pub const TIME_ZONE: &str = "Nats-Schedule-Time-Zone";
pub const TTL: &str = "Nats-Schedule-TTL";
pub const ROLLUP: &str = "Nats-Schedule-Rollup";
pub const TARGET: &str = "Nats-Schedule-Target";
pub const SOURCE: &str = "Nats-Schedule-Source";
pub const SCHEDULER: &str = "Nats-Scheduler";
pub const NEXT: &str = "Nats-Schedule-Next";
pub const NEXT_PURGE: &str = "purge";

fn value<'a>(hdr: &'a [u8], key: &str) -> &'a str {
    headers::get(hdr, key)
        .and_then(|v| std::str::from_utf8(v).ok())
        .unwrap_or_default()
}

/// The time zone header's zone: `Ok(None)` without the header, an error when it is
/// empty or unknown.
fn zone(hdr: &[u8]) -> Result<Option<jiff::tz::TimeZone>, ApiError> {
    let Some(tz) = headers::get(hdr, TIME_ZONE) else {
        return Ok(None);
    };
    let name = std::str::from_utf8(tz).unwrap_or_default();
    if name.is_empty() {
        return Err(e::JS_MESSAGE_SCHEDULES_TIME_ZONE_INVALID_ERR.err());
    }
    let tz = match name {
        "UTC" => Some(jiff::tz::TimeZone::UTC),
        "Local" => Some(jiff::tz::TimeZone::system()),
        n => jiff::tz::db().get(n).ok(),
    };
    tz.map(Some)
        .ok_or_else(|| e::JS_MESSAGE_SCHEDULES_TIME_ZONE_INVALID_ERR.err())
}

/// When the schedule in `hdr` fires next, counting from `ts`; `Ok(None)` without one.
pub fn next_of(hdr: &[u8], ts: i64, now: i64) -> Result<Option<Next>, ApiError> {
    let tz = zone(hdr)?;
    match schedule_pattern::next(value(hdr, SCHEDULE), tz.as_ref(), ts, now) {
        None => Err(e::JS_MESSAGE_SCHEDULES_PATTERN_INVALID_ERR.err()),
        Some(n) if n.at == 0 => Ok(None),
        Some(n) => Ok(Some(n)),
    }
}

fn valid_subject(s: &str) -> bool {
    crate::core::trace::is_valid_publish_subject(s.as_bytes())
}

fn stream_has(cfg: &StreamConfig, subject: &str) -> bool {
    cfg.subjects
        .iter()
        .any(|s| crate::core::subject::subjects_collide(s, subject))
}

/// The reference's checks of the schedule headers of a publish on `subject`. A valid
/// schedule is stored as a subject rollup: `Ok(Some(hdr))` is the header block with
/// `Nats-Rollup: sub` added.
pub fn check_headers(
    hdr: &[u8],
    subject: &str,
    cfg: &StreamConfig,
    sourced: bool,
) -> Result<Option<Vec<u8>>, ApiError> {
    // Every schedule header starts so (`Nats-Schedule*`, `Nats-Scheduler`).
    if sourced || !crate::proto::headers::has_key_starting(hdr, "Nats-Sched") {
        return Ok(None);
    }
    let allowed = cfg.allow_msg_schedules;
    let disabled = || e::JS_MESSAGE_SCHEDULES_DISABLED_ERR.err();
    let now = crate::jetstream::shard::wall_ns();
    let mut out = None;
    match next_of(hdr, now, now) {
        Err(err) => return Err(if allowed { err } else { disabled() }),
        Ok(None) => {}
        Ok(Some(_)) => {
            if !allowed {
                return Err(disabled());
            }
            let ttl = value(hdr, TTL);
            if !ttl.is_empty() && super::ingest::parse_ttl(ttl).is_err() {
                return Err(e::JS_MESSAGE_SCHEDULES_TTL_INVALID_ERR.err());
            }
            let rollup = value(hdr, ROLLUP);
            if !rollup.is_empty() && rollup != "sub" {
                return Err(e::JS_MESSAGE_SCHEDULES_ROLLUP_INVALID_ERR.err());
            }
            if !ttl.is_empty() && !cfg.allow_msg_ttl {
                return Err(e::JS_MESSAGE_TTL_DISABLED_ERR.err());
            }
            let target = value(hdr, TARGET);
            if target.is_empty() || !valid_subject(target) || target == subject {
                return Err(e::JS_MESSAGE_SCHEDULES_TARGET_INVALID_ERR.err());
            }
            let source = value(hdr, SOURCE);
            if !source.is_empty() && (source == target || source == subject || !valid_subject(source)) {
                return Err(e::JS_MESSAGE_SCHEDULES_SOURCE_INVALID_ERR.err());
            }
            if !stream_has(cfg, target) {
                return Err(e::JS_MESSAGE_SCHEDULES_TARGET_INVALID_ERR.err());
            }
            if !source.is_empty() && !stream_has(cfg, source) {
                return Err(e::JS_MESSAGE_SCHEDULES_SOURCE_INVALID_ERR.err());
            }
            match value(hdr, "Nats-Rollup") {
                "" => out = Some(headers::with(Some(hdr), "Nats-Rollup", "sub")),
                "sub" => {}
                _ => return Err(e::JS_MESSAGE_SCHEDULES_ROLLUP_INVALID_ERR.err()),
            }
        }
    }
    let invalid = || e::JS_MESSAGE_SCHEDULES_SCHEDULER_INVALID_ERR.err();
    let next = value(hdr, NEXT);
    if !next.is_empty() {
        // Clients may only use it to purge a schedule.
        if next != NEXT_PURGE {
            return Err(invalid());
        }
        let scheduler = value(hdr, SCHEDULER);
        if scheduler.is_empty() || scheduler == subject || !valid_subject(scheduler) {
            return Err(invalid());
        }
        if !allowed {
            return Err(disabled());
        }
    } else if !value(hdr, SCHEDULER).is_empty() {
        return Err(invalid());
    }
    Ok(out)
}

/// The schedules of a stream: by schedule subject, its message's sequence and when it
/// fires.
#[derive(Default, Debug)]
pub struct Schedules {
    by_subject: HashMap<String, (u64, i64)>,
    by_seq: HashMap<u64, String>,
    /// (when, sequence), earliest first.
    order: BTreeSet<(i64, u64)>,
    /// Fired, and the message they produced not stored yet.
    inflight: HashSet<String>,
}

/// A message a schedule publishes.
#[derive(Debug, PartialEq, Eq)]
pub struct Fired {
    pub subject: String,
    pub hdr: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Schedules {
    fn set(&mut self, seq: u64, subject: &str, at: i64) {
        if let Some((old, old_at)) = self.by_subject.insert(subject.to_string(), (seq, at)) {
            self.by_seq.remove(&old);
            self.order.remove(&(old_at, old));
        }
        self.by_seq.insert(seq, subject.to_string());
        self.order.insert((at, seq));
        self.inflight.remove(subject);
    }

    fn remove_subject(&mut self, subject: &str) {
        if let Some((seq, at)) = self.by_subject.remove(subject) {
            self.by_seq.remove(&seq);
            self.order.remove(&(at, seq));
        }
        self.inflight.remove(subject);
    }

    fn remove_seq(&mut self, seq: u64) {
        if let Some(s) = self.by_seq.get(&seq).cloned() {
            self.remove_subject(&s);
        }
    }

    fn is_inflight(&self, seq: u64) -> bool {
        self.by_seq.get(&seq).is_some_and(|s| self.inflight.contains(s))
    }

    /// A message was stored at `seq` on `subject` at `ts`: a schedule starts (or is
    /// replaced), a plain message ends the subject's schedule, and a repeating
    /// schedule's output moves its schedule on.
    pub fn on_stored(&mut self, seq: u64, subject: &str, hdr: &[u8], ts: i64, now: i64) {
        match next_of(hdr, ts, now) {
            Ok(Some(n)) => self.set(seq, subject, n.at),
            _ if value(hdr, SCHEDULER).is_empty() => self.remove_subject(subject),
            _ => {}
        }
        let next = value(hdr, NEXT);
        if !next.is_empty() && next != NEXT_PURGE {
            let scheduler = value(hdr, SCHEDULER);
            if let (Some(at), false) = (schedule_pattern::parse_next(next), scheduler.is_empty()) {
                if let Some(&(seq, _)) = self.by_subject.get(scheduler) {
                    self.set(seq, scheduler, at);
                }
            }
        }
    }

    /// When the earliest schedule fires (Unix ns).
    pub fn next_at(&self) -> Option<i64> {
        self.order
            .iter()
            .find(|(_, seq)| !self.is_inflight(*seq))
            .map(|(at, _)| *at)
    }

    pub fn is_empty(&self) -> bool {
        self.by_subject.is_empty()
    }
}

/// The message a schedule stored as `(subject, hdr, body)` publishes when it fires,
/// `source` being the last message on its source subject if any. `None` when the
/// schedule is not valid (any more).
fn fired(subject: &str, hdr: &[u8], body: &[u8], ts: i64, now: i64, source: Option<(&[u8], &[u8])>) -> Option<Fired> {
    let next = next_of(hdr, ts, now).ok()??;
    let tz = zone(hdr).ok()?;
    let ttl = value(hdr, TTL);
    if !ttl.is_empty() && super::ingest::parse_ttl(ttl).is_err() {
        return None;
    }
    let target = value(hdr, TARGET);
    if target.is_empty() {
        return None;
    }
    let rollup = value(hdr, ROLLUP);
    let (src_hdr, src_body) = source.unwrap_or((hdr, body));
    let mut out = strip(src_hdr);
    let mut add = |k: &str, v: &str| out = headers::with(Some(&out), k, v);
    add(SCHEDULER, subject);
    if next.repeat {
        add(NEXT, &schedule_pattern::rfc3339_in(next.at, tz.as_ref()));
    } else {
        add(NEXT, NEXT_PURGE);
    }
    if !ttl.is_empty() {
        add("Nats-TTL", ttl);
    }
    if !rollup.is_empty() {
        add("Nats-Rollup", rollup);
    }
    Some(Fired {
        subject: target.to_string(),
        hdr: out,
        payload: src_body.to_vec(),
    })
}

/// The headers of a schedule (or its source) without the ones that would stop the copy
/// being stored: the schedule's own, expectations, the message id, TTL and rollup.
fn strip(hdr: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hdr.len());
    for (i, line) in hdr.split(|&b| b == b'\n').enumerate() {
        let key = line.split(|&b| b == b':').next().unwrap_or_default();
        let drop = i > 0
            && (key.starts_with(b"Nats-Schedule")
                || key.starts_with(b"Nats-Expected-")
                || key == b"Nats-Msg-Id"
                || key == b"Nats-TTL"
                || key == b"Nats-Rollup");
        if !drop {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out.pop();
    if out.len() < headers::HDR_LINE.len() + 2 {
        return [headers::HDR_LINE, b"\r\n"].concat();
    }
    out
}

impl Stream {
    /// Rebuild the schedules from the stored messages (on open).
    pub fn recover_schedules(&mut self) {
        if !self.cfg.allow_msg_schedules {
            return;
        }
        let now = crate::jetstream::shard::wall_ns();
        let mut seq = self.store.fast_state().first_seq;
        while let Ok(m) = self.store.load_next_msg(&storage::Filter::all(), seq) {
            if let Ok(Some(n)) = next_of(&m.headers, m.ts, now) {
                self.schedules.set(m.seq, &m.subject, n.at);
            }
            seq = m.seq + 1;
        }
    }

    /// After a store: track schedules, and purge the schedule whose one-shot message
    /// this is. Returns whether messages were purged.
    pub fn after_store_schedules(&mut self, seq: u64, subject: &str, hdr: &[u8], ts: i64) -> bool {
        if !self.cfg.allow_msg_schedules && self.schedules.is_empty() {
            return false;
        }
        let now = crate::jetstream::shard::wall_ns();
        self.schedules.on_stored(seq, subject, hdr, ts, now);
        if value(hdr, NEXT) == NEXT_PURGE {
            let scheduler = value(hdr, SCHEDULER);
            if !scheduler.is_empty() {
                self.schedules.remove_subject(scheduler);
                return self.store.purge_ex(scheduler, 0, 0).unwrap_or(0) > 0;
            }
        }
        false
    }

    /// The messages of the schedules due at `now` (Unix ns), in schedule order; each is
    /// in flight until its message is stored.
    pub fn due_schedules(&mut self, now: i64) -> Vec<Fired> {
        let mut due: Vec<(u64, String, i64)> = Vec::new();
        for &(at, seq) in &self.schedules.order {
            if at > now {
                break;
            }
            if let Some(s) = self
                .schedules
                .by_seq
                .get(&seq)
                .filter(|s| !self.schedules.inflight.contains(*s))
            {
                due.push((seq, s.clone(), at));
            }
        }
        due.sort_unstable();
        let mut out = Vec::new();
        for (seq, subject, at) in due {
            let Ok(m) = self.store.load_msg(seq) else {
                self.schedules.remove_seq(seq);
                continue;
            };
            let source_subject = value(&m.headers, SOURCE).to_string();
            let source = if source_subject.is_empty() {
                None
            } else {
                self.store.load_last_msg(&source_subject).ok()
            };
            match fired(
                &m.subject,
                &m.headers,
                &m.payload,
                at,
                now,
                source.as_ref().map(|s| (&s.headers[..], &s.payload[..])),
            ) {
                Some(f) => {
                    self.schedules.inflight.insert(subject);
                    out.push(f);
                }
                None => self.schedules.remove_seq(seq),
            }
        }
        out
    }
}

impl Stream {
    /// Store the messages of the schedules due at `now` (Unix ns), as the stream's own.
    pub fn run_schedules(&mut self, now: i64, domain: &str, max_payload: i64) -> super::batch::BatchOutcome {
        let mut out = super::batch::BatchOutcome::default();
        let fired = self.due_schedules(now);
        let mode = self.ingest_mode;
        self.ingest_mode = super::ingest::Mode {
            checked: false,
            sourced: true,
        };
        for f in fired {
            let next = self.store.fast_state().last_seq + 1;
            let interest = self.cfg.retention != crate::jetstream::api::config::Retention::Interest
                || self.consumers.values().any(|s| s.c.needs(next, &f.subject));
            match self.ingest(
                &f.subject,
                b"",
                Some(&f.hdr),
                &f.payload,
                now,
                interest,
                domain,
                max_payload,
            ) {
                super::ingest::Ingested::Stored { seq, purged } => {
                    out.stored.push((seq, f.subject));
                    out.purged |= purged;
                }
                _ => tracing::debug!("JetStream stream '{}': a scheduled message was not stored", self.name),
            }
        }
        self.ingest_mode = mode;
        // A schedule whose message could not be stored stays in flight (as in the
        // reference): it does not fire again until the stream is opened again.
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> StreamConfig {
        let mut c: StreamConfig = serde_json::from_str(r#"{"name":"S","subjects":["s.>","t"]}"#).unwrap();
        c.allow_msg_schedules = true;
        c.allow_rollup_hdrs = true;
        c
    }

    fn hdr(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut h = "NATS/1.0\r\n".to_string();
        for (k, v) in pairs {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        h.into_bytes()
    }

    #[test]
    fn header_checks() {
        let at = ("Nats-Schedule", "@at 2030-01-01T00:00:00Z");
        let tgt = ("Nats-Schedule-Target", "s.out");
        let c = cfg();
        let ok = check_headers(&hdr(&[at, tgt]), "s.sched", &c, false).unwrap().unwrap();
        assert_eq!(headers::get(&ok, "Nats-Rollup"), Some(&b"sub"[..]));
        assert_eq!(
            check_headers(&hdr(&[at, tgt, ("Nats-Rollup", "sub")]), "s.sched", &c, false).unwrap(),
            None
        );
        assert_eq!(check_headers(&hdr(&[("A", "b")]), "s.x", &c, false).unwrap(), None);
        for (h, code) in [
            (hdr(&[("Nats-Schedule", "@at nope"), tgt]), 10189),
            (hdr(&[at]), 10190),
            (hdr(&[at, ("Nats-Schedule-Target", "s.x")]), 10190),
            (hdr(&[at, ("Nats-Schedule-Target", "other")]), 10190),
            (hdr(&[at, ("Nats-Schedule-Target", "s.*")]), 10190),
            (hdr(&[at, tgt, ("Nats-Schedule-TTL", "x")]), 10191),
            (hdr(&[at, tgt, ("Nats-Schedule-TTL", "5s")]), 10166),
            (hdr(&[at, tgt, ("Nats-Schedule-Rollup", "all")]), 10192),
            (hdr(&[at, tgt, ("Nats-Rollup", "all")]), 10192),
            (hdr(&[at, tgt, ("Nats-Schedule-Source", "s.out")]), 10203),
            (hdr(&[at, tgt, ("Nats-Schedule-Source", "other")]), 10203),
            (hdr(&[at, tgt, ("Nats-Schedule-Time-Zone", "")]), 10223),
            (hdr(&[at, tgt, ("Nats-Schedule-Time-Zone", "Mars/Olympus")]), 10223),
            (hdr(&[at, tgt, ("Nats-Schedule-Time-Zone", "Europe/Amsterdam")]), 10189),
            (hdr(&[("Nats-Scheduler", "s.a")]), 10212),
            (hdr(&[("Nats-Schedule-Next", "soon"), ("Nats-Scheduler", "s.a")]), 10212),
            (hdr(&[("Nats-Schedule-Next", "purge")]), 10212),
            (
                hdr(&[("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.x")]),
                10212,
            ),
        ] {
            let err = check_headers(&h, "s.x", &c, false).unwrap_err();
            assert_eq!(err.err_code, code, "{}", String::from_utf8_lossy(&h));
        }
        let mut off = cfg();
        off.allow_msg_schedules = false;
        assert_eq!(
            check_headers(&hdr(&[at, tgt]), "s.x", &off, false)
                .unwrap_err()
                .err_code,
            10188
        );
        let bad = hdr(&[("Nats-Schedule", "@at nope")]);
        assert_eq!(check_headers(&bad, "s.x", &off, false).unwrap_err().err_code, 10188);
        assert!(check_headers(
            &hdr(&[("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.a")]),
            "s.x",
            &c,
            false
        )
        .is_ok());
        assert_eq!(check_headers(&bad, "s.x", &c, true).unwrap(), None);
    }

    #[test]
    fn state_follows_stores() {
        let now = 1_000 * 1_000_000_000;
        let mut s = Schedules::default();
        let sched = hdr(&[("Nats-Schedule", "@every 5s"), ("Nats-Schedule-Target", "s.out")]);
        s.on_stored(1, "s.a", &sched, now, now);
        assert_eq!(s.next_at(), Some(now + 5_000_000_000));
        // Replaced by a newer schedule on the same subject.
        s.on_stored(2, "s.a", &sched, now + 1_000_000_000, now);
        assert_eq!((s.by_seq.len(), s.order.len()), (1, 1));
        assert_eq!(s.next_at(), Some(now + 6_000_000_000));
        // The output of a repeating schedule moves it on.
        let out = hdr(&[
            ("Nats-Scheduler", "s.a"),
            ("Nats-Schedule-Next", "1970-01-01T00:20:00Z"),
        ]);
        s.on_stored(3, "s.out", &out, now, now);
        assert_eq!(s.next_at(), Some(1_200_000_000_000));
        assert_eq!(s.order.len(), 1);
        // In flight: not due again until its message is stored.
        s.inflight.insert("s.a".into());
        assert_eq!(s.next_at(), None);
        s.inflight.clear();
        // A plain message ends the subject's schedule.
        s.on_stored(4, "s.a", &hdr(&[("A", "b")]), now, now);
        assert!(s.is_empty());
        assert!(s.order.is_empty() && s.by_seq.is_empty());
    }

    #[test]
    fn fired_message() {
        let now = 2_000_000_000_000_000_000;
        let h = hdr(&[
            ("Nats-Schedule", "@at 2030-01-01T00:00:00Z"),
            ("Nats-Schedule-Target", "s.out"),
            ("Nats-Schedule-TTL", "5m"),
            ("Nats-Rollup", "sub"),
            ("Nats-Msg-Id", "x"),
            ("Keep", "me"),
        ]);
        let f = fired("s.sched", &h, b"body", now, now, None).unwrap();
        assert_eq!(f.subject, "s.out");
        assert_eq!(f.payload, b"body");
        assert_eq!(
            String::from_utf8(f.hdr).unwrap(),
            "NATS/1.0\r\nKeep: me\r\nNats-Scheduler: s.sched\r\nNats-Schedule-Next: purge\r\nNats-TTL: 5m\r\n\r\n"
        );
        let src = hdr(&[("From", "source")]);
        let f = fired("s.sched", &h, b"body", now, now, Some((&src, b"latest"))).unwrap();
        assert_eq!(f.payload, b"latest");
        assert_eq!(headers::get(&f.hdr, "From"), Some(&b"source"[..]));
        assert!(fired("s.sched", &hdr(&[("A", "b")]), b"", now, now, None).is_none());
    }
}
