//! A shard's answers to monitoring: its connections (open, and the ring of recently closed
//! ones), subscriptions, accounts and its own state, as the plain data of
//! `core::report`. These run on the shard (in jobs the monitor posts) and only read,
//! except that a closing connection leaves a copy of itself in the ring.

use super::ShardCore;
use crate::core::accounts::AccountId;
use crate::core::client::{Client, ClosedState, ConnKey};
use crate::core::mesh_codec::Batch;
use crate::core::report::{
    AccountPart, ClosedRing, ConnPart, ConnQuery, ConnReport, ConnState, MsgTotals, ShardReport, SubPart, SubQuery,
    SubReport,
};
use crate::core::subject::{matches, subjects_collide};
use crate::core::FastMap;
use std::time::SystemTime;

/// What a shard keeps for monitoring: recently closed connections and the message
/// counters of closed connections by account.
#[derive(Default)]
pub(crate) struct ReportState {
    closed: ClosedRing,
    closed_totals: FastMap<AccountId, MsgTotals>,
}

/// nats-server's "raw auth user" of a connection.
fn raw_user(c: &Client) -> String {
    let o = &c.opts;
    if !o.nkey.is_empty() {
        o.nkey.clone()
    } else if !o.user.is_empty() {
        o.user.clone()
    } else if !o.jwt.is_empty() {
        c.identity.as_ref().map(|i| i.user.clone()).unwrap_or_default()
    } else if !o.auth_token.is_empty() {
        "[REDACTED]".to_string()
    } else {
        String::new()
    }
}

/// The wall-clock time of an `Instant` of this client (its start is known both ways).
fn wall(c: &Client, at: std::time::Instant) -> SystemTime {
    c.started + at.saturating_duration_since(c.start)
}

impl ShardCore {
    /// A closing connection's last report, kept in the ring (called before its
    /// subscriptions go).
    pub(super) fn record_closed(&mut self, key: ConnKey, reason: ClosedState) {
        let Some(c) = self.client(key) else { return };
        if c.internal || c.closing.is_some() {
            return;
        }
        let now = SystemTime::now();
        let mut r = self.conn_numbers(c);
        self.conn_details(c, &mut r);
        r.subs = self.sub_reports(c, true);
        r.stop = Some(now);
        r.reason = Some(reason);
        let slow = matches!(
            reason,
            ClosedState::SlowConsumerPendingBytes | ClosedState::SlowConsumerWriteDeadline
        );
        let (acc, totals) = (
            c.account,
            MsgTotals {
                in_msgs: c.in_msgs,
                in_bytes: c.in_bytes,
                out_msgs: c.out_msgs,
                out_bytes: c.out_bytes,
                slow_consumers: u64::from(slow),
            },
        );
        *self.reports.closed_totals.entry(acc).or_default() += totals;
        let cap = self.cfg.max_closed_clients;
        self.reports.closed.push(r, cap);
    }

    /// The numbers of a connection (what sorting needs), without names or subscriptions.
    fn conn_numbers(&self, c: &Client) -> ConnReport {
        ConnReport {
            cid: c.cid,
            ip: String::new(),
            port: c.peer.port(),
            start: c.started,
            last_activity: wall(c, c.last_in),
            rtt: c.rtt.unwrap_or_default(),
            pending: c.out.len(),
            in_msgs: c.in_msgs,
            out_msgs: c.out_msgs,
            in_bytes: c.in_bytes,
            out_bytes: c.out_bytes,
            num_subs: c.subs.len().min(u32::MAX as usize) as u32,
            stalls: c.stalls,
            ..Default::default()
        }
    }

    /// Names, client details and credentials.
    fn conn_details(&self, c: &Client, r: &mut ConnReport) {
        r.ip = c.peer.ip().to_string();
        r.name = c.opts.name.clone();
        r.lang = c.opts.lang.clone();
        r.version = c.opts.version.clone();
        r.account = self.table.name(c.account).to_string();
        r.account_tag = self.table.name_tag(c.account).to_string();
        r.user = raw_user(c);
        r.jwt = c.opts.jwt.clone();
        r.proxy_key = c.proxy_key.clone().unwrap_or_default();
        if let Some(id) = &c.identity {
            r.tags = id.tags.clone();
            r.issuer_key = id.issuer_key.clone();
        }
        if r.issuer_key.is_empty() && (!c.opts.nkey.is_empty() || !c.opts.jwt.is_empty()) {
            r.issuer_key = r.account.clone();
        }
        if let Some(peer) = c.transport.as_ref().and_then(|t| t.tls.as_ref()) {
            r.tls = Some(crate::core::report::TlsReport {
                version: peer.version.to_string(),
                cipher_suite: peer.cipher.clone(),
                first: peer.first,
                peer_certs: peer.cert_reports(),
            });
        }
    }

    /// A connection's subscriptions; `with_account` names their account (as `/subsz` and
    /// closed connections show them).
    fn sub_reports(&self, c: &Client, with_account: bool) -> Vec<SubReport> {
        let mut out: Vec<(u32, SubReport)> = Vec::with_capacity(c.subs.len());
        for &id in c.subs.values() {
            let Some(s) = self.subs.get(id as usize) else { continue };
            out.push((id, self.sub_report(s, c.cid, with_account)));
        }
        // Oldest subscription first (slab order is not creation order once slots are reused,
        // but it is stable between calls).
        out.sort_by_key(|(id, _)| *id);
        out.into_iter().map(|(_, r)| r).collect()
    }

    fn sub_report(&self, s: &crate::core::client::Subscription, cid: u64, with_account: bool) -> SubReport {
        SubReport {
            account: if with_account {
                self.table.name(s.account).to_string()
            } else {
                String::new()
            },
            account_tag: if with_account {
                self.table.name_tag(s.account).to_string()
            } else {
                String::new()
            },
            subject: String::from_utf8_lossy(&s.subject).into_owned(),
            queue: s.queue.as_ref().map(|q| String::from_utf8_lossy(q).into_owned()),
            sid: String::from_utf8_lossy(&s.sid).into_owned(),
            msgs: s.delivered,
            max: s.max,
            cid,
        }
    }

    /// This shard's part of a `/connz` answer.
    pub fn report_conns(&self, q: &ConnQuery) -> ConnPart {
        let mut part = ConnPart::default();
        // An unknown account matches nothing (`Some(None)`).
        let acc: Option<Option<AccountId>> = q.account.as_deref().map(|n| self.table.by_name(n).map(|d| d.id));
        if matches!(q.state, ConnState::Open | ConnState::All) {
            let mut found: Vec<(ConnKey, ConnReport)> = Vec::new();
            for (i, c) in self.clients.iter() {
                if c.internal || c.closing.is_some() {
                    continue;
                }
                let key = ConnKey {
                    idx: i as u32,
                    gen: c.gen,
                };
                let in_acc = acc.is_none_or(|a| a == Some(c.account));
                if in_acc {
                    part.open_total += 1;
                }
                // A connection asked for by id is found whatever the other filters say.
                let wanted = if q.cid != 0 {
                    c.cid == q.cid
                } else {
                    in_acc && self.conn_passes(c, q)
                };
                if wanted && self.has_subject(c, q) {
                    found.push((key, self.conn_numbers(c)));
                }
            }
            let now = q.now;
            keep_first(&mut found, q.keep, |a, b| q.sort.order(&a.1, &b.1, now));
            for (key, mut r) in found {
                let Some(c) = self.client(key) else { continue };
                self.conn_details(c, &mut r);
                if q.subs {
                    r.subs = self.sub_reports(c, false);
                }
                part.open.push(r);
            }
        }
        if matches!(q.state, ConnState::Closed | ConnState::All) {
            // The ring is server-wide in nats-server: the monitor keeps the newest
            // `max_closed_clients` over all shards, then filters.
            part.closed = self.reports.closed.iter().cloned().collect();
        }
        part
    }

    /// The user and MQTT client filters.
    fn conn_passes(&self, c: &Client, q: &ConnQuery) -> bool {
        if let Some(u) = q.user.as_deref() {
            if raw_user(c) != u {
                return false;
            }
        }
        if let Some(m) = q.mqtt_client.as_deref() {
            if !m.is_empty() {
                return false;
            }
        }
        true
    }

    /// The subject filter: some subscription of `c` collides with it.
    fn has_subject(&self, c: &Client, q: &ConnQuery) -> bool {
        let Some(f) = q.filter_subject.as_deref() else {
            return true;
        };
        c.subs.values().any(|&id| {
            self.subs
                .get(id as usize)
                .is_some_and(|s| subjects_collide(f, &String::from_utf8_lossy(&s.subject)))
        })
    }

    /// This shard's part of a `/subsz` answer.
    pub fn report_subs(&self, q: &SubQuery) -> SubPart {
        let mut part = SubPart::default();
        let acc: Option<Option<AccountId>> = q.account.as_deref().map(|n| self.table.by_name(n).map(|d| d.id));
        for def in self.table.iter() {
            if acc.is_some_and(|a| a != Some(def.id)) {
                continue;
            }
            if let Some(st) = self.accts.get(def.id as usize) {
                part.stats.add(&st.sublist.stats());
            }
        }
        if !q.list {
            return part;
        }
        for (_, s) in self.subs.iter() {
            if acc.is_some_and(|a| a != Some(s.account)) || self.table.get(s.account).is_none() {
                continue;
            }
            if let Some(t) = q.test.as_deref() {
                if !matches(&s.subject, t.as_bytes()) {
                    continue;
                }
            }
            part.total += 1;
            if part.subs.len() < q.keep {
                let cid = self.client(s.conn).map_or(0, |c| c.cid);
                part.subs.push(self.sub_report(s, cid, true));
            }
        }
        part
    }

    /// This shard's share of every account of the table (or only `only`).
    pub fn report_accounts(&self, only: Option<&str>) -> Vec<AccountPart> {
        let mut live: FastMap<AccountId, MsgTotals> = FastMap::default();
        for (_, c) in self.clients.iter() {
            // A closing connection's counters are already in `closed_totals`.
            if c.internal || c.closing.is_some() {
                continue;
            }
            *live.entry(c.account).or_default() += MsgTotals {
                in_msgs: c.in_msgs,
                in_bytes: c.in_bytes,
                out_msgs: c.out_msgs,
                out_bytes: c.out_bytes,
                slow_consumers: 0,
            };
        }
        let mut out = Vec::new();
        for def in self.table.iter() {
            if only.is_some_and(|n| n != def.name) {
                continue;
            }
            let mut part = AccountPart {
                id: def.id,
                name: def.name.clone(),
                ..Default::default()
            };
            if let Some(st) = self.accts.get(def.id as usize) {
                part.conns = u64::from(st.conns);
                part.subs = st.sublist.count() as u64;
                part.sublist = st.sublist.stats();
            }
            if let Some(t) = live.get(&def.id) {
                part.totals += *t;
            }
            if let Some(t) = self.reports.closed_totals.get(&def.id) {
                part.totals += *t;
            }
            out.push(part);
        }
        out
    }

    /// This shard's own state.
    pub fn report_shard(&self) -> ShardReport {
        let internal = self.internals.client_count();
        ShardReport {
            index: self.idx,
            connections: self.clients.len().saturating_sub(internal),
            closing: self.clients.iter().filter(|(_, c)| c.closing.is_some()).count(),
            internal_clients: internal,
            subscriptions: self.subs.len(),
            remote_interest: self.remote_entries(),
            accounts: self.accts.iter().filter(|a| a.def.is_some()).count(),
            mesh_staged: self.staging.iter().map(Batch::len).collect(),
            mesh_inbound: (0..self.nshards).map(|s| self.mesh.inbound_len(s)).collect(),
            mesh_waiters: self.mesh_waiters.len(),
            barriers: self.barriers.len(),
            timers: self.timers.len(),
            internal_queue: self.internals.queued(),
            pending_bytes: self.clients.iter().map(|(_, c)| c.out.len()).sum(),
            closed_kept: self.reports.closed.len(),
        }
    }
}

/// Keep the first `n` items in `order`, sorted.
fn keep_first<T>(v: &mut Vec<T>, n: usize, mut order: impl FnMut(&T, &T) -> std::cmp::Ordering) {
    if n == 0 {
        v.clear();
        return;
    }
    if v.len() > n {
        v.select_nth_unstable_by(n - 1, &mut order);
        v.truncate(n);
    }
    v.sort_by(order);
}
