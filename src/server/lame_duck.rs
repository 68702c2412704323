//! Lame duck mode (SIGUSR2, `--signal ldm`), as nats-server's `lameDuckMode`: stop
//! accepting, tell clients (INFO `ldm: true`), wait `lame_duck_grace_period`, then close
//! the clients one by one, spread over what is left of `lame_duck_duration` (at most a
//! second apart, each pause a random time between half and all of the interval), then
//! shut down. The steps are driven by the signal loop, which keeps handling signals
//! meanwhile (SIGINT still stops the server at once).

use super::Server;
use rand::Rng;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Shortest pause between closes; more clients than fit are closed in batches.
const MIN_PAUSE: Duration = Duration::from_millis(1);

enum Phase {
    Grace { until: Instant },
    Closing { queue: VecDeque<usize>, next: Instant },
    Done,
}

pub struct LameDuck {
    phase: Phase,
    /// Pause between closes.
    interval: Duration,
    /// Clients closed per step.
    batch: usize,
}

impl LameDuck {
    /// Enter lame duck mode. `None` when there is nothing to wait for (no clients, or
    /// already in lame duck mode): then shut down at once if `srv.in_lame_duck()`.
    pub fn start(srv: &mut Server, now: Instant) -> Option<LameDuck> {
        if !srv.enter_lame_duck() {
            return None;
        }
        let clients = srv.open_connections().max(0) as u64;
        if clients == 0 {
            return None;
        }
        let o = srv.options();
        let grace = o.lame_duck_grace_period;
        let mut dur = o.lame_duck_duration.saturating_sub(grace);
        if dur.is_zero() {
            dur = Duration::from_secs(1);
        }
        let mut interval = dur / u32::try_from(clients).unwrap_or(u32::MAX);
        let mut batch = 1;
        if interval < MIN_PAUSE {
            batch = (MIN_PAUSE.as_nanos() / interval.as_nanos().max(1)) as usize + 1;
            interval = MIN_PAUSE;
        } else if interval > Duration::from_secs(1) {
            interval = Duration::from_secs(1);
        }
        Some(LameDuck {
            phase: Phase::Grace { until: now + grace },
            interval,
            batch,
        })
    }

    /// When [`LameDuck::step`] wants to run next.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Grace { until } => Some(*until),
            Phase::Closing { next, .. } => Some(*next),
            Phase::Done => None,
        }
    }

    /// Advance; true when every client has been closed and the server should shut down.
    pub fn step(&mut self, srv: &Server, now: Instant) -> bool {
        match &mut self.phase {
            Phase::Grace { until } => {
                if now < *until {
                    return false;
                }
                tracing::info!("Closing existing clients");
                self.phase = Phase::Closing {
                    queue: close_order(&srv.shard_connections()),
                    next: now,
                };
                self.step(srv, now)
            }
            Phase::Closing { queue, next } => {
                if now < *next {
                    return false;
                }
                for _ in 0..self.batch {
                    let Some(shard) = queue.pop_front() else { break };
                    srv.close_clients(shard, 1);
                }
                if queue.is_empty() {
                    self.phase = Phase::Done;
                    return true;
                }
                let half = self.interval / 2;
                let pause = rand::thread_rng().gen_range(half..=self.interval);
                *next = now + pause;
                false
            }
            Phase::Done => true,
        }
    }
}

/// One entry per client, shards interleaved so that closes are spread over all of them.
fn close_order(per_shard: &[u64]) -> VecDeque<usize> {
    let mut left: Vec<u64> = per_shard.to_vec();
    let mut out = VecDeque::new();
    loop {
        let mut any = false;
        for (shard, n) in left.iter_mut().enumerate() {
            if *n > 0 {
                *n -= 1;
                out.push_back(shard);
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_shards() {
        assert_eq!(close_order(&[2, 0, 3]), [0, 2, 0, 2, 2]);
        assert!(close_order(&[]).is_empty());
    }
}
