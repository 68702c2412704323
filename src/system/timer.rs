//! The system account's clock: one thread (not a shard) that wakes when the STATSZ
//! broadcast is due and once a second for the account connection heartbeats, and posts
//! the work to shard 0. It sleeps on a condition variable so that a stop is immediate.

use super::{conns, server_reqs, System};
use crate::core::post::{Job, Post};
use crate::core::shard::ShardCore;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often account heartbeats are checked.
const HEARTBEAT_CHECK: Duration = Duration::from_secs(1);

/// The timer's stop signal.
#[derive(Default)]
pub struct Wake {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    /// Stop the thread (at once).
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Sleep until `until`; false when stopped.
    fn sleep_until(&self, until: Instant) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *stopped {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            stopped = match self.cv.wait_timeout(stopped, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// Start the thread.
pub fn start(sys: Arc<System>, post: Arc<dyn Post>) {
    let spawned = std::thread::Builder::new()
        .name("rnats-system".into())
        .spawn(move || run(&sys, post.as_ref()));
    if let Err(e) = spawned {
        tracing::error!("Error starting the system account's timer: {e}");
    }
}

fn run(sys: &Arc<System>, post: &dyn Post) {
    let mut next_check = Instant::now() + HEARTBEAT_CHECK;
    loop {
        let statsz_at = sys.statsz.lock().unwrap_or_else(|p| p.into_inner()).next;
        if !sys.timer.sleep_until(statsz_at.min(next_check)) {
            return;
        }
        let now = Instant::now();
        let fire = {
            let mut clock = sys.statsz.lock().unwrap_or_else(|p| p.into_inner());
            (clock.next <= now).then(|| clock.fire(now))
        };
        if fire == Some(true) {
            let s2 = sys.clone();
            let job: Job =
                Box::new(move |core: &mut ShardCore, now: Instant| server_reqs::broadcast_statsz(core, &s2, now));
            if !post.post(0, job) {
                return;
            }
        }
        if now >= next_check {
            next_check = now + HEARTBEAT_CHECK;
            let due = conns::heartbeats_due(sys, now);
            if !due.is_empty() {
                let s2 = sys.clone();
                let job: Job =
                    Box::new(move |core: &mut ShardCore, now: Instant| conns::heartbeat(core, &s2, &due, now));
                if !post.post(0, job) {
                    return;
                }
            }
        }
    }
}
