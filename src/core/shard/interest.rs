//! Subscriptions and their replication: local SUB/UNSUB, auto-unsubscribe, and the
//! interest records other shards learn from (ARCHITECTURE.md, invariant 3).

use super::ShardCore;
use crate::core::accounts::AccountId;
use crate::core::client::{ConnKey, SubId, Subscription};
use crate::core::mesh_codec;
use crate::core::subject::num_tokens;
use crate::proto::reply;
use std::time::Instant;

/// The queue name nats-server reserves for itself.
const SYS_QUEUE: &[u8] = b"_sys_";

impl ShardCore {
    pub(super) fn on_sub(&mut self, key: ConnKey, subject: &[u8], queue: Option<&[u8]>, sid: &[u8], now: Instant) {
        let server_subs = if self.cfg.max_subscriptions == 0 {
            -1
        } else {
            self.cfg.max_subscriptions as i64
        };
        let max_tokens = self.cfg.max_sub_tokens;
        let Some(c) = self.client_mut(key) else { return };
        c.interest_changed = true;
        let verbose = c.opts.verbose;
        let account = c.account;
        let max_subs = super::connect::min_limit(c.max_subs, server_subs);
        let denied = c.perms.as_mut().is_some_and(|p| !p.can_subscribe(subject, queue));
        if denied || queue == Some(SYS_QUEUE) {
            let label = c.label.clone();
            match queue {
                Some(q) => tracing::error!(
                    "{label} - Subscription Violation - Subject {}, Queue: {}, SID {}",
                    reply::go_quote(subject),
                    reply::go_quote(q),
                    String::from_utf8_lossy(sid)
                ),
                None => tracing::error!(
                    "{label} - Subscription Violation - Subject {}, SID {}",
                    reply::go_quote(subject),
                    String::from_utf8_lossy(sid)
                ),
            }
            self.send_err(key, &reply::sub_violation(subject, queue), now);
            return;
        }
        if max_tokens > 0 && num_tokens(subject) > max_tokens {
            let label = c.label.clone();
            tracing::error!(
                "{label} - Subscription Violation Too Many Tokens - Subject {}, SID {}",
                reply::go_quote(subject),
                String::from_utf8_lossy(sid)
            );
            let text = format!(
                "Permissions Violation for Subscription to {}, too many tokens",
                reply::go_quote(subject)
            );
            self.send_err(key, &text, now);
            return;
        }
        if max_subs >= 0 && c.subs.len() as i64 >= max_subs {
            let label = c.label.clone();
            tracing::error!("{label} - {}", reply::ERR_MAX_SUBS);
            self.send_err(key, reply::ERR_MAX_SUBS, now);
            return;
        }
        if c.subs.contains_key(sid) {
            // A reused sid keeps the original subscription.
            if verbose {
                self.send_bytes(key, reply::OK, now);
            }
            return;
        }
        let sub = Subscription {
            conn: key,
            account,
            subject: subject.into(),
            queue: queue.map(Into::into),
            sid: sid.into(),
            max: 0,
            delivered: 0,
        };
        let id = self.subs.insert(sub) as SubId;
        if self.acct(account).sublist.insert(subject, queue, id).is_err() {
            self.subs.remove(id as usize);
            self.send_err(key, reply::ERR_INVALID_SUBJECT, now);
            return;
        }
        if let Some(c) = self.client_mut(key) {
            c.subs.insert(sid.into(), id);
        }
        self.interest_delta(account, subject, queue, 1);
        if verbose {
            self.send_bytes(key, reply::OK, now);
        }
    }

    pub(super) fn on_unsub(&mut self, key: ConnKey, sid: &[u8], max: i64, now: Instant) {
        let Some(c) = self.client_mut(key) else { return };
        c.interest_changed = true;
        let verbose = c.opts.verbose;
        let found = c.subs.get(sid).copied();
        if verbose {
            self.send_bytes(key, reply::OK, now);
        }
        let Some(id) = found else { return };
        let remove_now = match self.subs.get_mut(id as usize) {
            Some(s) if max > 0 && (max as u64) > s.delivered => {
                s.max = max as u64;
                false
            }
            Some(_) => true,
            None => false,
        };
        if remove_now {
            if let Some(c) = self.client_mut(key) {
                c.subs.remove(sid);
            }
            self.remove_sub(id);
        }
    }

    /// Drop a subscription from the sublist and tell the other shards. The caller has
    /// already removed it from its client's sid map (or is discarding that map).
    pub(super) fn remove_sub(&mut self, id: SubId) {
        let Some(sub) = self.subs.try_remove(id as usize) else {
            return;
        };
        self.acct(sub.account)
            .sublist
            .remove(&sub.subject, sub.queue.as_deref(), id);
        self.interest_delta(sub.account, &sub.subject, sub.queue.as_deref(), -1);
    }

    /// A delivery reached a subscription's auto-unsubscribe limit.
    pub(super) fn auto_unsubscribe(&mut self, id: SubId) {
        let Some(sub) = self.subs.get(id as usize) else { return };
        let (conn, sid) = (sub.conn, sub.sid.clone());
        if let Some(c) = self.client_mut(conn) {
            c.subs.remove(&sid);
        }
        self.remove_sub(id);
    }

    /// Replicate a local interest change: plain interest on its 0<->1 transitions, queue
    /// interest on every change (other shards weigh queue groups by member count). The
    /// local count is read from the sublist, which already holds it.
    pub(super) fn interest_delta(&mut self, account: AccountId, subject: &[u8], queue: Option<&[u8]>, delta: i32) {
        if self.nshards < 2 {
            return;
        }
        let after = self.acct(account).sublist.exact(subject, queue).len() as i64;
        let before = after - i64::from(delta);
        let send = queue.is_some() || (before == 0) != (after == 0);
        if !send || before == after {
            return;
        }
        for dst in 0..self.nshards {
            if dst != self.idx {
                mesh_codec::put_interest(self.stage(dst), account, subject, queue, delta);
            }
        }
    }
}
