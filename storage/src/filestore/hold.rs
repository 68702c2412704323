//! Write coalescing in interval (lazy) mode.
//!
//! With `sync_interval` set, a write counts as durable as soon as it is stored, so nothing
//! waits for the disk and there is no reason to write each turn's few records at once. A
//! lone publisher waiting for each PubAck would otherwise cost one small direct write per
//! message, run by an io-wq worker on another core (the one its client needs). The
//! reference's flush loop gathers writes in the same way: it waits 1 ms, then twice that,
//! and so on while more keeps arriving, until 16 KiB wait or 8 ms have passed; it writes at
//! once when the writes stop growing. [`Hold`] is that rule, fed with the bytes waiting and
//! the time; the store asks it before starting a batch and tells its owner when to ask
//! again ([`crate::Store::write_due`]).
//!
//! Only appends to the tail are held; anything else (erasures, a block to retire, a
//! compaction step, a stop or an explicit sync) writes at once. What is held is lost if the
//! process is killed, as it is with the reference's lazy mode.

use std::time::{Duration, Instant};

/// Bytes waiting that are written at once.
pub(crate) const COALESCE_MIN: u64 = 16 * 1024;
/// The first wait.
const FIRST_WAIT: Duration = Duration::from_millis(1);
/// The longest anything is held.
const MAX_WAIT: Duration = Duration::from_millis(8);
/// When writes kept back by a batch in flight are looked at again.
pub(crate) const RETRY: Duration = Duration::from_micros(200);

/// The state of one hold: when it began, when to look again, and how much was waiting
/// when last looked at.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    since: Option<Instant>,
    check_at: Option<Instant>,
    step: Duration,
    seen: u64,
}

impl Hold {
    /// Keep the `pending` bytes back for now (`true`), or write them (`false`, and the
    /// hold ends).
    pub(crate) fn keep(&mut self, now: Instant, pending: u64) -> bool {
        if pending == 0 || pending >= COALESCE_MIN {
            self.clear();
            return false;
        }
        let Some(check_at) = self.check_at else {
            self.since = Some(now);
            self.check_at = Some(now + FIRST_WAIT);
            self.step = FIRST_WAIT;
            self.seen = pending;
            return true;
        };
        if now < check_at {
            return true;
        }
        let Some(since) = self.since else {
            // A retry (writes kept back by a batch in flight): not held any longer.
            self.clear();
            return false;
        };
        let waited = now.saturating_duration_since(since);
        if pending <= self.seen || waited >= MAX_WAIT {
            self.clear();
            return false;
        }
        self.seen = pending;
        self.step = self.step.saturating_mul(2);
        self.check_at = Some((now + self.step).min(since + MAX_WAIT));
        true
    }

    /// When the held bytes should be looked at again, if any are held.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.check_at
    }

    /// Look again at `at`: writes are waiting, kept back by something other than the
    /// hold; the next look writes them.
    pub(crate) fn retry(&mut self, at: Instant) {
        self.since = None;
        self.check_at = Some(at);
    }

    /// Whether the next look is a retry (see [`Hold::retry`]).
    pub(crate) fn is_retry(&self) -> bool {
        self.since.is_none() && self.check_at.is_some()
    }

    /// Forget the hold (what it held is being written).
    pub(crate) fn clear(&mut self) {
        self.since = None;
        self.check_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_idle_writer_is_written_after_the_first_wait() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        assert!(h.keep(t0, 100));
        assert_eq!(h.due(), Some(t0 + ms(1)));
        assert!(
            h.keep(t0 + Duration::from_micros(500), 100),
            "held until the first look"
        );
        // Nothing more arrived by the first look: written.
        assert!(!h.keep(t0 + ms(1), 100));
        assert_eq!(h.due(), None);
    }

    #[test]
    fn growing_writes_wait_doubling_steps_up_to_the_limit() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        assert!(h.keep(t0, 100));
        assert!(h.keep(t0 + ms(1), 200));
        assert_eq!(h.due(), Some(t0 + ms(3)), "1 ms, then 2 ms");
        assert!(h.keep(t0 + ms(3), 300));
        assert_eq!(h.due(), Some(t0 + ms(7)));
        assert!(h.keep(t0 + ms(7), 400));
        assert_eq!(h.due(), Some(t0 + ms(8)), "never past the longest wait");
        assert!(!h.keep(t0 + ms(8), 500));
        assert_eq!(h.due(), None);
        // A new hold starts from the first wait again.
        assert!(h.keep(t0 + ms(9), 10));
        assert_eq!(h.due(), Some(t0 + ms(10)));
    }

    #[test]
    fn a_retry_is_due_then_writes_at_the_next_look() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        h.retry(t0 + RETRY);
        assert!(h.is_retry());
        assert_eq!(h.due(), Some(t0 + RETRY));
        assert!(h.keep(t0, 100), "kept until the retry is due");
        assert!(!h.keep(t0 + RETRY, 100), "the look after a retry writes");
        assert_eq!(h.due(), None);
    }

    #[test]
    fn enough_bytes_or_none_are_not_held() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        assert!(!h.keep(t0, COALESCE_MIN));
        assert!(!h.keep(t0, 0));
        assert!(h.keep(t0, 10));
        assert!(
            !h.keep(t0 + Duration::from_micros(10), COALESCE_MIN + 1),
            "filled up while held"
        );
        assert_eq!(h.due(), None);
    }
}
