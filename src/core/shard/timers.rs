//! Per-connection timers: server PINGs and stale connections, the authentication
//! timeout, and the write deadline. Time is an input (ARCHITECTURE.md, invariant 10):
//! the driver calls [`ShardCore::tick`] at [`ShardCore::next_deadline`].

use super::ShardCore;
use crate::core::client::{ClosedState, ConnKey};
use crate::proto::reply;
use std::cmp::Reverse;
use std::time::{Duration, Instant};

/// nats-server measures RTT again after this long.
const RTT_INTERVAL: Duration = Duration::from_secs(3600);

impl ShardCore {
    /// Make sure the heap holds this client's earliest deadline.
    pub(super) fn schedule(&mut self, key: ConnKey) {
        let wd = self.cfg.write_deadline;
        let Some(c) = self.client_mut(key) else { return };
        if c.closing.is_some() {
            return;
        }
        let at = c.next_deadline(wd);
        if c.timer_at.is_some_and(|t| t <= at) {
            return;
        }
        c.timer_at = Some(at);
        self.timers.push(Reverse((at, key)));
    }

    /// The earliest moment [`ShardCore::tick`] has work.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        // Write deadlines start when output queues up, which does not touch the heap;
        // check the connections with pending output cheaply via their next deadline.
        let conn = self.timers.peek().map(|Reverse((t, _))| *t);
        [
            conn,
            self.resp_sweep_at,
            self.internals.next_deadline(),
            self.traces.next_deadline(),
            self.ext_deadline(),
            self.next_stall_end(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Run every timer due at `now`.
    pub fn tick(&mut self, now: Instant) {
        self.sync_accounts();
        while let Some(Reverse((at, key))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(c) = self.client_mut(key) else { continue };
            if c.timer_at != Some(at) {
                continue; // superseded by an earlier entry, or already handled
            }
            c.timer_at = None;
            self.client_timers(key, now);
            self.schedule(key);
        }
        self.expire_stalls(now);
        self.sweep_responses(now);
        self.expire_requests(now);
        self.expire_traces(now);
        self.ext_tick(now);
        self.finish(now);
    }

    fn client_timers(&mut self, key: ConnKey, now: Instant) {
        let cfg = self.cfg.clone();
        let ping_interval = match self.client(key) {
            Some(c) => self.ping_interval_of(c),
            None => return,
        };
        let Some(c) = self.client_mut(key) else { return };
        if c.closing.is_some() {
            return;
        }
        if c.auth_deadline.is_some_and(|d| d <= now) {
            c.auth_deadline = None;
            let label = c.label.clone();
            tracing::debug!("{label} - {}", reply::ERR_AUTH_TIMEOUT);
            self.send_err(key, reply::ERR_AUTH_TIMEOUT, now);
            self.close(key, ClosedState::AuthenticationTimeout);
            return;
        }
        if c.expires_at.is_some_and(|e| e <= now) {
            c.expires_at = None;
            self.auth_expired(key, now);
            return;
        }
        if let Some(since) = c.out.stalled_since() {
            if now.saturating_duration_since(since) >= cfg.write_deadline {
                tracing::info!(
                    "{} - Slow Consumer Detected: WriteDeadline of {:?} exceeded with {} chunks of {} total bytes.",
                    c.label,
                    cfg.write_deadline,
                    1,
                    c.out.len()
                );
                self.counters.slow_consumers += 1;
                self.close(key, ClosedState::SlowConsumerWriteDeadline);
                return;
            }
        }
        if c.ping_at <= now {
            let need_rtt = c.rtt.is_none()
                || c.rtt_start
                    .is_none_or(|s| now.saturating_duration_since(s) > RTT_INTERVAL);
            let idle = now.saturating_duration_since(c.last_in);
            c.ping_at = now + ping_interval;
            if idle < ping_interval && !need_rtt {
                return;
            }
            if c.pings_out + 1 > cfg.ping_max {
                let label = c.label.clone();
                tracing::debug!("{label} - Stale Client Connection - Closing");
                self.counters.stale_connections += 1;
                self.send_err(key, reply::ERR_STALE, now);
                self.close(key, ClosedState::StaleConnection);
                return;
            }
            c.pings_out += 1;
            c.rtt_start = Some(now);
            c.out.writer(now).extend_from_slice(reply::PING);
            if cfg.trace {
                tracing::trace!("{} - ->> [PING]", c.label);
            }
            self.queued(key);
        }
    }
}
