//! Time as an input: stores read the wall clock (Unix nanoseconds, the reference's message
//! timestamps) through a [`Clock`], so tests and simulators can drive expiry on virtual time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in Unix nanoseconds.
pub trait Clock: Send + Sync {
    fn now_nanos(&self) -> i64;
}

/// The system's real-time clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_nanos(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to (tests, simulation). Clones share the same time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn new(start_nanos: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(start_nanos)))
    }
    pub fn set(&self, nanos: i64) {
        self.0.store(nanos, Ordering::Relaxed);
    }
    pub fn advance(&self, nanos: i64) {
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_nanos(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The clock a store uses.
pub type SharedClock = Arc<dyn Clock>;

/// The default clock: [`SystemClock`].
pub fn system_clock() -> SharedClock {
    Arc::new(SystemClock)
}
