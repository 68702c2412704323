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
