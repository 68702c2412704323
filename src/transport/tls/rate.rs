//! `connection_rate_limit`: how many TLS handshakes the client listener starts per
//! second. One counter for the server, shared by every shard's accept path; a refused
//! connection gets its INFO (unless the handshake comes first), the reference's
//! `-ERR` ([`crate::proto::reply::ERR_THROTTLED`]) and a close ("Maximum Connections
//! Exceeded"), and once a second the count of refusals is logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fixed one-second window counter, as the reference counts.
#[derive(Debug)]
pub struct ConnRate {
    limit: i64,
    window: Mutex<(i64, Option<Instant>)>,
    blocked: AtomicU64,
}

impl ConnRate {
    pub fn new(limit: i64) -> ConnRate {
        ConnRate {
            limit,
            window: Mutex::new((0, None)),
            blocked: AtomicU64::new(0),
        }
    }

    /// May one more handshake start now? The window opens with the first connection
    /// after the previous one ended; that one counts as zero, each later one as one
    /// more, and a connection is let through while the count is below the limit.
    pub fn allow(&self, now: Instant) -> bool {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        match w.1 {
            Some(end) if now <= end => w.0 += 1,
            _ => *w = (0, Some(now + Duration::from_secs(1))),
        }
        let ok = w.0 < self.limit;
        if !ok {
            self.blocked.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Refusals since the previous call.
    pub fn take_blocked(&self) -> u64 {
        self.blocked.swap(0, Ordering::Relaxed)
    }

    /// Log the refusals once a second, as long as the counter is in use.
    pub fn spawn_reporter(rate: &Arc<ConnRate>) {
        let weak = Arc::downgrade(rate);
        let _ = std::thread::Builder::new().name("tls-rate".into()).spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let Some(r) = weak.upgrade() else { return };
            let n = r.take_blocked();
            if n > 0 {
                tracing::warn!("Rejected {n} connections due to TLS rate limiting");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_window_as_the_reference() {
        let r = ConnRate::new(2);
        let t = Instant::now();
        let got: Vec<bool> = (0..5).map(|i| r.allow(t + Duration::from_millis(i))).collect();
        assert_eq!(got, [true, true, false, false, false]);
        assert_eq!(r.take_blocked(), 3);
        assert_eq!(r.take_blocked(), 0);
        // A new window after the first one ended.
        assert!(r.allow(t + Duration::from_millis(1001)));
        assert!(r.allow(t + Duration::from_millis(1500)));
        assert!(!r.allow(t + Duration::from_millis(1900)));
        assert!(r.allow(t + Duration::from_millis(2002)));
    }

    #[test]
    fn limit_one_lets_one_through_per_second() {
        let r = ConnRate::new(1);
        let t = Instant::now();
        assert!(r.allow(t));
        assert!(!r.allow(t));
        assert!(r.allow(t + Duration::from_millis(1001)));
    }
}
