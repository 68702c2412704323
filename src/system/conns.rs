//! Account connection counts (nats-server's `AccountNumConns`,
//! `io.nats.server.advisory.v1.account_connections`): sent on
//! `$SYS.SERVER.ACCOUNT.<acc>.CONNS` and `$SYS.ACCOUNT.<acc>.SERVER.CONNS` when a client of
//! the account connects or disconnects, every 30 s while the account has clients, and in
//! answer to `$SYS.REQ.ACCOUNT.<acc>.CONNS`. Not for `$G`.
//!
//! Shard 0 merges the count: the client's shard hands it the change (one job, only when
//! someone listens to the count), shard 0 asks every shard for its share of the account
//! and publishes. While one count is being gathered, further changes of the same account
//! are folded into one more count after it (so a burst of connects costs a few gathers,
//! not one per connect). A client's connect or disconnect event waits for the count that
//! includes it, so listeners see the count first, as nats-server sends them.

use super::events::Event;
use super::nuid::Nuid;
use super::System;
use crate::core::accounts::{AccountId, GLOBAL};
use crate::core::report::{AccountPart, MsgTotals};
use crate::core::shard::ShardCore;
use crate::core::FastMap;
use crate::monitor::accountz::{AccountStat, DataStats};
use crate::monitor::gather::Plan;
use serde::Serialize;
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub const CONNS_TYPE: &str = "io.nats.server.advisory.v1.account_connections";
/// Heartbeat of an account with clients (nats-server's `eventsHBInterval`).
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// One account's count on shard 0.
#[derive(Default)]
struct Tracked {
    /// A count is being gathered.
    inflight: bool,
    /// Changes arrived since it started: gather once more afterwards.
    dirty: bool,
    /// Events that wait for the next count.
    waiting: Vec<Event>,
    /// Events that go out after the count being gathered.
    round: Vec<Event>,
    /// When a count last went out (or the account was first seen with clients).
    last: Option<Instant>,
}

/// Shard 0's counts (locked by shard 0 and the timer thread only).
#[derive(Default)]
pub struct Hub {
    accounts: FastMap<AccountId, Tracked>,
    nuid: Option<Nuid>,
}

impl Hub {
    fn next_id(&mut self) -> String {
        self.nuid.get_or_insert_with(Nuid::new).next_id()
    }
}

/// Does anyone listen to the count of account `name`? (`buf` is scratch space.)
pub fn watched(core: &mut ShardCore, sys: AccountId, name: &str, buf: &mut String) -> bool {
    buf.clear();
    let _ = write!(buf, "$SYS.ACCOUNT.{name}.SERVER.CONNS");
    if core.has_interest(sys, buf.as_bytes()) {
        return true;
    }
    buf.clear();
    let _ = write!(buf, "$SYS.SERVER.ACCOUNT.{name}.CONNS");
    core.has_interest(sys, buf.as_bytes())
}

/// The clients of `acc` changed on this shard; `event` (its connect or disconnect event)
/// goes out after the new count. Hands the change to shard 0.
pub fn changed(core: &mut ShardCore, sys: &Arc<System>, acc: AccountId, event: Option<Event>) {
    match core.post().cloned() {
        Some(post) => {
            let s2 = sys.clone();
            post.post(
                0,
                Box::new(move |core: &mut ShardCore, now: Instant| on_change(core, &s2, acc, event, now)),
            );
        }
        None => on_change(core, sys, acc, event, Instant::now()),
    }
}

/// On shard 0: count now, or once more after the count in flight.
fn on_change(core: &mut ShardCore, sys: &Arc<System>, acc: AccountId, event: Option<Event>, now: Instant) {
    {
        let mut hub = sys.conns.lock().unwrap_or_else(|p| p.into_inner());
        let t = hub.accounts.entry(acc).or_default();
        t.waiting.extend(event);
        if t.inflight {
            t.dirty = true;
            return;
        }
        t.inflight = true;
        t.round = std::mem::take(&mut t.waiting);
    }
    start_round(core, sys, acc, now);
}

fn start_round(core: &mut ShardCore, sys: &Arc<System>, acc: AccountId, now: Instant) {
    let s2 = sys.clone();
    count(
        core,
        acc,
        Box::new(move |core: &mut ShardCore, stat: Option<AccountStat>, now: Instant| {
            round_done(core, &s2, acc, stat, now)
        }),
        now,
    );
}

fn round_done(core: &mut ShardCore, sys: &Arc<System>, acc: AccountId, stat: Option<AccountStat>, now: Instant) {
    let Some(sysacc) = core.account_table().system() else {
        return;
    };
    let (round, again) = {
        let mut hub = sys.conns.lock().unwrap_or_else(|p| p.into_inner());
        let id = hub.next_id();
        if let Some(stat) = &stat {
            if !sys.stopped() {
                let ts = SystemTime::now();
                for subject in [
                    format!("$SYS.SERVER.ACCOUNT.{}.CONNS", stat.acc),
                    format!("$SYS.ACCOUNT.{}.SERVER.CONNS", stat.acc),
                ] {
                    core.publish_later(sysacc, &subject, message(sys, &id, ts, stat));
                }
            }
        }
        let t = hub.accounts.entry(acc).or_default();
        t.last = Some(now);
        let round = std::mem::take(&mut t.round);
        let again = std::mem::take(&mut t.dirty);
        if again {
            t.round = std::mem::take(&mut t.waiting);
        } else {
            t.inflight = false;
        }
        (round, again)
    };
    for e in round {
        e.publish_later(core, sys);
    }
    if again {
        start_round(core, sys, acc, now);
    }
}

/// What a count's caller gets, on the shard that asked.
pub type CountDone = Box<dyn FnOnce(&mut ShardCore, Option<AccountStat>, Instant) + Send>;

/// The account's statistics summed over every shard (`None` if it is gone).
pub fn count(core: &mut ShardCore, acc: AccountId, done: CountDone, now: Instant) {
    let table = core.account_table().clone();
    let Some(def) = table.get(acc).cloned() else {
        done(core, None, now);
        return;
    };
    let name = def.name.clone();
    let plan = Plan::new(
        move |core: &mut ShardCore, _| core.report_accounts(Some(&name)),
        move |parts: Vec<Vec<AccountPart>>| Ok(sum(&def, parts)),
    );
    plan.run_on_shard(
        core,
        Box::new(move |core: &mut ShardCore, r, now| done(core, r.ok(), now)),
        now,
    );
}

fn sum(def: &crate::core::accounts::AccountDef, parts: Vec<Vec<AccountPart>>) -> AccountStat {
    let (mut conns, mut leafs, mut subs) = (0, 0, 0);
    let mut totals = MsgTotals::default();
    for p in parts.into_iter().flatten().filter(|p| p.id == def.id) {
        conns += p.conns;
        leafs += p.leafnodes;
        subs += p.subs;
        totals += p.totals;
    }
    let data = |msgs, bytes| DataStats {
        msgs,
        bytes,
        ..Default::default()
    };
    AccountStat {
        acc: def.name.clone(),
        name: def.name_tag().to_string(),
        conns,
        leafnodes: leafs,
        total_conns: conns + leafs,
        num_subscriptions: subs + crate::monitor::import_subs(def),
        sent: data(totals.out_msgs, totals.out_bytes),
        received: data(totals.in_msgs, totals.in_bytes),
        slow_consumers: totals.slow_consumers,
    }
}

/// The `account_connections` message.
pub fn message(sys: &System, id: &str, ts: SystemTime, stat: &AccountStat) -> Vec<u8> {
    #[derive(Serialize)]
    struct Msg<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        id: &'a str,
        timestamp: String,
        server: super::envelope::ServerInfo<'a>,
        #[serde(flatten)]
        stat: &'a AccountStat,
    }
    crate::proto::gojson::to_vec(&Msg {
        kind: CONNS_TYPE,
        id,
        timestamp: crate::proto::gotime::rfc3339_nano(ts),
        server: sys.server().info(),
        stat,
    })
}

/// A fresh event id from shard 0's generator.
pub fn next_id(sys: &System) -> String {
    sys.conns.lock().unwrap_or_else(|p| p.into_inner()).next_id()
}

/// A count went out at `now` other than through a change (a `CONNS` request): the
/// heartbeat starts over.
pub fn sent(sys: &System, acc: AccountId, now: Instant) {
    let mut hub = sys.conns.lock().unwrap_or_else(|p| p.into_inner());
    hub.accounts.entry(acc).or_default().last = Some(now);
}

/// The timer thread's check: accounts (not `$G`) with clients whose last count is
/// [`HEARTBEAT`] old. An account first seen with clients starts its clock now; one
/// without clients is forgotten.
pub fn heartbeats_due(sys: &System, now: Instant) -> Vec<AccountId> {
    let table = sys.monitor.state().shared.accounts.snapshot();
    let mut hub = sys.conns.lock().unwrap_or_else(|p| p.into_inner());
    let mut due = Vec::new();
    for def in table.iter() {
        if def.id == GLOBAL {
            continue;
        }
        let active = def.conns.load(std::sync::atomic::Ordering::Relaxed) > 0;
        if !active {
            if hub.accounts.get(&def.id).is_some_and(|t| !t.inflight) {
                hub.accounts.remove(&def.id);
            }
            continue;
        }
        let t = hub.accounts.entry(def.id).or_default();
        match t.last {
            None => t.last = Some(now),
            Some(last) if now.saturating_duration_since(last) >= HEARTBEAT && !t.inflight => {
                t.last = Some(now);
                due.push(def.id);
            }
            Some(_) => {}
        }
    }
    due
}

/// On shard 0: send the heartbeats of `due` that someone listens to.
pub fn heartbeat(core: &mut ShardCore, sys: &Arc<System>, due: &[AccountId], now: Instant) {
    let Some(sysacc) = core.account_table().system() else {
        return;
    };
    let table = core.account_table().clone();
    let mut buf = String::new();
    for &acc in due {
        if watched(core, sysacc, table.name(acc), &mut buf) {
            on_change(core, sys, acc, None, now);
        }
    }
}
