//! Subject delete markers (`subject_delete_marker_ttl`, KV `limit_markers`).
//!
//! When max age or a message TTL removes the last message of a subject, the reference
//! stores in its place a marker on that subject: no payload, the headers
//! `Nats-Marker-Reason: MaxAge`, `Nats-TTL: <marker TTL as a Go duration>` and
//! `Nats-Rollup: sub` (the rollup removes the expired message). A message that is itself
//! a marker (a `Nats-Marker-Reason`, or a KV purge, `KV-Operation: PURGE`) is removed
//! without a new marker; so is any message that is not the last of its subject. The
//! marker goes through the normal ingest (so it is republished and counted like any
//! publish). On streams with markers, a message TTL below the marker TTL is raised to
//! it (its `Nats-TTL` header rewritten as seconds) unless `max_msgs_per_subject` is 1.

use super::Stream;
use crate::jetstream::api::config::{Retention, StreamConfig};
use crate::jetstream::api::duration::format_go_duration;
use crate::proto::headers;

const SECOND: i64 = 1_000_000_000;

/// Is `hdr` the header block of a marker (a limit marker or a KV purge)?
pub fn is_marker(hdr: &[u8]) -> bool {
    headers::get(hdr, "Nats-Marker-Reason").is_some_and(|v| !v.is_empty())
        || headers::get(hdr, "KV-Operation") == Some(b"PURGE")
}

/// The headers of the marker left when max age removes a subject's last message.
pub fn max_age_marker(marker_ttl_ns: i64) -> Vec<u8> {
    let ttl = format_go_duration((marker_ttl_ns / SECOND).saturating_mul(SECOND));
    format!("NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: {ttl}\r\nNats-Rollup: sub\r\n\r\n").into_bytes()
}

/// On a stream with markers, a positive message TTL (seconds) below the marker TTL is
/// raised to it: the new TTL and header block, or `None` when nothing changes.
pub fn raise_ttl(cfg: &StreamConfig, ttl: i64, hdr: Option<&[u8]>) -> Option<(i64, Vec<u8>)> {
    let min = cfg.subject_delete_marker_ttl / SECOND;
    if ttl <= 0 || min <= 0 || cfg.max_msgs_per_subject == 1 || ttl >= min {
        return None;
    }
    Some((min, headers::with(hdr, "Nats-TTL", &min.to_string())))
}

/// What an expiry pass with markers did.
#[derive(Debug, Default)]
pub struct Expired {
    /// Messages went (removed, or rolled up by a marker).
    pub removed: bool,
    /// The markers stored: sequence and subject.
    pub markers: Vec<(u64, String)>,
}

impl Stream {
    /// Expire what max age and message TTLs remove now, leaving markers (the stream has
    /// `subject_delete_marker_ttl`). `now` is the wall clock in Unix ns.
    pub fn expire_with_markers(&mut self, now: i64, domain: &str, max_payload: i64) -> Expired {
        let mut out = Expired::default();
        let due = match self.store.take_due() {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("JetStream stream '{}' expiry failed: {e}", self.name);
                return out;
            }
        };
        let marker = max_age_marker(self.cfg.subject_delete_marker_ttl);
        for seq in due {
            let Ok(m) = self.store.load_msg(seq) else {
                continue; // gone meanwhile (an earlier marker's rollup)
            };
            let last = self.store.subjects_totals(&m.subject).get(&m.subject).copied() == Some(1);
            if last && !is_marker(&m.headers) {
                let interest = self.cfg.retention != Retention::Interest || {
                    let next = self.store.fast_state().last_seq + 1;
                    self.consumers.values().any(|s| s.c.needs(next, &m.subject))
                };
                let r = self.ingest(&m.subject, b"", Some(&marker), b"", now, interest, domain, max_payload);
                if let super::ingest::Ingested::Stored { seq: at, .. } = r {
                    out.markers.push((at, m.subject.clone()));
                }
            }
            // Not the last, a marker itself, or the marker was refused: plain removal.
            if self.store.load_msg(seq).is_ok() {
                if let Err(e) = self.store.remove_msg(seq) {
                    tracing::warn!("JetStream stream '{}' expiry of {seq} failed: {e}", self.name);
                    continue;
                }
            }
            out.removed = true;
        }
        if out.removed {
            self.dirty = true;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::accounts::AccountId;
    use crate::jetstream::api::GoTime;
    use storage::{ManualClock, MemStore};

    const T0: i64 = 1_700_000_000 * SECOND;

    /// A stream with max age 10 s and markers of 5 s on a memory store with a manual clock.
    fn stream(clock: &ManualClock, republish: bool) -> Stream {
        let cfg = StreamConfig {
            name: "S".into(),
            subjects: vec!["s.>".into()],
            max_age: 10 * SECOND,
            subject_delete_marker_ttl: 5 * SECOND,
            allow_msg_ttl: true,
            allow_rollup_hdrs: true,
            max_msgs: -1,
            max_bytes: -1,
            max_msgs_per_subject: -1,
            max_msg_size: -1,
            republish: republish.then(|| crate::jetstream::api::config::RePublish {
                src: ">".into(),
                dest: "rp.>".into(),
                headers_only: false,
            }),
            ..Default::default()
        };
        let store = MemStore::with_clock(super::super::store_config(&cfg), std::sync::Arc::new(clock.clone()));
        Stream::new(AccountId::default(), cfg, GoTime(T0), Box::new(store), None)
    }

    /// Publish at the clock's time (as the shard passes its wall clock).
    fn put(st: &mut Stream, clock: &ManualClock, subject: &str, hdr: &[u8]) -> u64 {
        let hdr = (!hdr.is_empty()).then_some(hdr);
        let now = storage::Clock::now_nanos(clock);
        match st.ingest(subject, b"", hdr, b"v", now, true, "", 1 << 20) {
            super::super::ingest::Ingested::Stored { seq, .. } => seq,
            _ => panic!("not stored"),
        }
    }

    #[test]
    fn max_age_leaves_markers_on_last_messages_only() {
        let clock = ManualClock::new(T0);
        let mut st = stream(&clock, true);
        put(&mut st, &clock, "s.a", b""); // 1: not the last of s.a
        put(&mut st, &clock, "s.a", b""); // 2: last of s.a -> marker
        put(&mut st, &clock, "s.p", b"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n"); // 3: a marker itself
        put(&mut st, &clock, "s.n", b"NATS/1.0\r\nNats-TTL: never\r\n\r\n"); // 4: never expires
        clock.advance(SECOND);
        put(&mut st, &clock, "s.b", b""); // 5: younger
        st.outbox.clear();
        clock.set(T0 + 10 * SECOND);
        let out = st.expire_with_markers(T0 + 10 * SECOND, "", 1 << 20);
        assert!(out.removed);
        assert_eq!(out.markers, vec![(6, "s.a".to_string())]);
        let m = st.store.load_msg(6).unwrap();
        assert_eq!(m.headers, max_age_marker(5 * SECOND));
        assert!(m.payload.is_empty());
        for gone in [1, 2, 3] {
            assert!(st.store.load_msg(gone).is_err(), "{gone}");
        }
        assert!(st.store.load_msg(4).is_ok() && st.store.load_msg(5).is_ok());
        // The marker was republished like any stored message.
        let rp: Vec<&str> = st.outbox.iter().map(|o| o.subject.as_str()).collect();
        assert_eq!(rp, ["rp.s.a"]);
        // s.b ages out in turn; later the markers themselves go without new markers.
        clock.set(T0 + 11 * SECOND);
        let out = st.expire_with_markers(T0 + 11 * SECOND, "", 1 << 20);
        assert_eq!(out.markers, vec![(7, "s.b".to_string())]);
        clock.set(T0 + 17 * SECOND);
        let out = st.expire_with_markers(T0 + 17 * SECOND, "", 1 << 20);
        assert!(out.removed && out.markers.is_empty());
        let state = st.store.fast_state();
        assert_eq!((state.msgs, state.first_seq, state.last_seq), (1, 4, 7));
    }

    #[test]
    fn ttl_expiry_leaves_markers() {
        let clock = ManualClock::new(T0);
        let mut st = stream(&clock, false);
        // A 1 s TTL is raised to the marker TTL (5 s), its header rewritten.
        let seq = put(&mut st, &clock, "s.t", b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n");
        assert_eq!(
            st.store.load_msg(seq).unwrap().headers,
            b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n".to_vec()
        );
        clock.set(T0 + 2 * SECOND);
        assert!(st.expire_with_markers(T0 + 2 * SECOND, "", 1 << 20).markers.is_empty());
        clock.set(T0 + 6 * SECOND);
        let out = st.expire_with_markers(T0 + 6 * SECOND, "", 1 << 20);
        assert_eq!(out.markers, vec![(2, "s.t".to_string())]);
        assert!(st.store.load_msg(1).is_err());
    }

    #[test]
    fn marker_headers() {
        let cases = [
            (SECOND, "1s"),
            (2 * SECOND, "2s"),
            (60 * SECOND, "1m0s"),
            (3600 * SECOND + SECOND / 2, "1h0m0s"),
        ];
        for (ttl, shown) in cases {
            let want =
                format!("NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: {shown}\r\nNats-Rollup: sub\r\n\r\n");
            assert_eq!(String::from_utf8(max_age_marker(ttl)).unwrap(), want);
        }
    }

    #[test]
    fn markers_recognized() {
        let cases: [(&[u8], bool); 5] = [
            (b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n\r\n", true),
            (b"NATS/1.0\r\nNats-Marker-Reason: Remove\r\n\r\n", true),
            (b"NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n", true),
            (b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", false),
            (b"", false),
        ];
        for (h, want) in cases {
            assert_eq!(is_marker(h), want, "{}", String::from_utf8_lossy(h));
        }
    }

    #[test]
    fn ttl_raised_to_marker_ttl() {
        let cfg = |per: i64| StreamConfig {
            subject_delete_marker_ttl: 5 * SECOND,
            max_msgs_per_subject: per,
            ..Default::default()
        };
        let h: &[u8] = b"NATS/1.0\r\nNats-TTL: 2s\r\nK: v\r\n\r\n";
        let (ttl, hdr) = raise_ttl(&cfg(-1), 2, Some(h)).unwrap();
        assert_eq!(ttl, 5);
        assert_eq!(hdr, b"NATS/1.0\r\nK: v\r\nNats-TTL: 5\r\n\r\n".to_vec());
        // At or above the marker TTL, never, none, or one message per subject: unchanged.
        for (per, ttl) in [(-1, 5), (-1, 9), (-1, -1), (-1, 0), (1, 2)] {
            assert!(raise_ttl(&cfg(per), ttl, Some(h)).is_none(), "{per} {ttl}");
        }
        let none = StreamConfig::default();
        assert!(raise_ttl(&none, 2, Some(h)).is_none());
    }
}
