//! `$SYS.REQ.ACCOUNT.*`: one account's monitoring answers (nats-server's `monAccSrvc`):
//! `$SYS.REQ.ACCOUNT.<acc>.SUBSZ`, `.CONNZ`, `.LEAFZ`, `.JSZ`, `.INFO`, `.STATZ`, `.CONNS`,
//! all accounts' `$SYS.REQ.ACCOUNT.PING.STATZ`, the subscriber counts of
//! `$SYS.REQ.ACCOUNT.NSUBS` and `$SYS.DEBUG.SUBSCRIBERS`.
//!
//! Other accounts reach `CONNZ` and `STATZ` through the service imports every account has
//! (`system::accounts`): `$SYS.REQ.ACCOUNT.PING.CONNZ` and `$SYS.REQ.SERVER.PING.CONNZ` of
//! account A arrive here as `$SYS.REQ.ACCOUNT.A.CONNZ`, so the answer is always about the
//! requester's own account. Subscribed on shard 0; counts are gathered from every shard.

use super::respond::{Answer, Request};
use super::server_reqs::{serve_connz, serve_subsz};
use super::{conns, System};
use crate::core::accounts::AccountId;
use crate::core::report::SubQuery;
use crate::core::shard::internal::{Handler, InternalMsg, PartFn};
use crate::core::shard::ShardCore;
use crate::monitor::accountz::AccountStatzOptions;
use crate::monitor::disabled::{self, event_options};
use crate::monitor::optjson::{self, f, Kind, Val};
use crate::monitor::{self, AccountzOptions, ConnzOptions, SubszOptions};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

type Serve = fn(&mut ShardCore, &Arc<System>, InternalMsg, Instant);
/// Where a subscriber count goes (on the shard that asked).
type CountDone = Box<dyn FnOnce(&mut ShardCore, i64, Instant) + Send>;

fn handler(sys: &Arc<System>, serve: Serve) -> Handler {
    let sys = sys.clone();
    Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| serve(core, &sys, m.take(), now))
}

/// Subscribe the account services in the system account `acc` (shard 0).
pub fn subscribe(core: &mut ShardCore, acc: AccountId, sys: &Arc<System>, now: Instant) {
    let services: [(&str, Serve); 7] = [
        ("SUBSZ", subsz),
        ("CONNZ", connz),
        ("LEAFZ", leafz),
        ("JSZ", jsz),
        ("INFO", info),
        ("STATZ", statz),
        ("CONNS", conns_req),
    ];
    for (name, serve) in services {
        let subject = format!("$SYS.REQ.ACCOUNT.*.{name}");
        core.subscribe_internal(acc, &subject, None, false, handler(sys, serve), now);
    }
    core.subscribe_internal(
        acc,
        "$SYS.REQ.ACCOUNT.PING.STATZ",
        None,
        false,
        handler(sys, ping_statz),
        now,
    );
    core.subscribe_internal(acc, "$SYS.REQ.ACCOUNT.NSUBS", None, false, handler(sys, nsubs), now);
    core.subscribe_internal(
        acc,
        "$SYS.DEBUG.SUBSCRIBERS",
        None,
        false,
        handler(sys, debug_subscribers),
        now,
    );
}

/// The account token of `$SYS.REQ.ACCOUNT.<acc>.<X>`.
fn account_of(subject: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(subject).ok()?;
    let toks: Vec<&str> = s.split('.').collect();
    (toks.len() == 5).then(|| toks.get(3).map(|t| t.to_string())).flatten()
}

fn subsz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(acc) = account_of(&m.subject) else { return };
    if let Some((mut o, req)) = Request::start(sys, core, &m, SubszOptions::from_json, now) {
        o.subscriptions = true;
        o.account = acc;
        serve_subsz(core, req, o, now);
    }
}

fn connz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(acc) = account_of(&m.subject) else { return };
    if let Some((mut o, req)) = Request::start(sys, core, &m, ConnzOptions::from_json, now) {
        let o2: &mut ConnzOptions = &mut o;
        o2.account = acc;
        serve_connz(core, req, o, now);
    }
}

fn leafz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = |b: &[u8]| event_options(b, "LeafzEventOptions", &disabled::LEAFZ_FIELDS);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        req.answer(core, Answer::json(&disabled::leafz(&sys.monitor)), now);
    }
}

/// `JSZ`: the account's JetStream detail (nats-server's `JszAccount`).
fn jsz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(acc) = account_of(&m.subject) else { return };
    let decode = |b: &[u8]| event_options(b, "JszEventOptions", &disabled::JSZ_FIELDS);
    if let Some((v, req)) = Request::start(sys, core, &m, decode, now) {
        let ctx = sys.monitor.clone();
        let mut o = monitor::jsz::JszOptions::from_values(&v);
        o.account = acc;
        monitor::jsz::account_on_shard(
            core,
            &ctx,
            o,
            Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
            now,
        );
    }
}

/// `INFO`: the account's `/accountz` detail.
fn info(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(acc) = account_of(&m.subject) else { return };
    let decode = |b: &[u8]| event_options(b, "AccInfoEventOptions", &[]);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        let ctx = sys.monitor.clone();
        let o = AccountzOptions { account: acc };
        monitor::accountz::accountz_on_shard(
            core,
            &ctx,
            &o,
            Box::new(
                move |core: &mut ShardCore, r: Result<monitor::accountz::Accountz, _>, now| {
                    let r = r.map(|a| a.account_detail);
                    req.answer(core, Answer::from_result(r), now)
                },
            ),
            now,
        );
    }
}

/// The STATZ answer for `o`; nothing when no account matched (unless unused ones count).
fn serve_statz(core: &mut ShardCore, req: Request, o: AccountStatzOptions, now: Instant) {
    let ctx = req.sys.monitor.clone();
    let unused = o.include_unused;
    monitor::accountz::accstatz_on_shard(
        core,
        &ctx,
        &o,
        Box::new(
            move |core: &mut ShardCore, r: Result<monitor::accountz::AccountStatz, _>, now| {
                let answer = match r {
                    Ok(s) if s.account_statz.is_empty() && !unused => Answer::Skip,
                    r => Answer::from_result(r),
                };
                req.answer(core, answer, now)
            },
        ),
        now,
    );
}

fn statz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(acc) = account_of(&m.subject) else { return };
    if let Some((mut o, req)) = Request::start(sys, core, &m, AccountStatzOptions::from_json, now) {
        // `$SYS.REQ.ACCOUNT.PING.STATZ` has its own service.
        if acc == "PING" {
            return;
        }
        o.accounts = vec![acc];
        serve_statz(core, req, o, now);
    }
}

fn ping_statz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some((o, req)) = Request::start(sys, core, &m, AccountStatzOptions::from_json, now) {
        serve_statz(core, req, o, now);
    }
}

/// `CONNS`: the account's connection count, if it has clients here (no envelope).
fn conns_req(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() {
        return;
    }
    let Some(name) = account_of(&m.subject) else { return };
    if !m.payload.is_empty() {
        let fields = [f("acc", "accNumConnsReq", Kind::Str)];
        match optjson::decode(&m.payload, "accNumConnsReq", &fields) {
            Ok(v) => {
                let asked = v.iter().find_map(|(_, x)| match x {
                    Val::Str(s) => Some(s.as_str()),
                    _ => None,
                });
                if asked != Some(name.as_str()) {
                    tracing::error!("SYSTEM - Error unmarshalled account does not match subject");
                    return;
                }
            }
            Err(e) => {
                tracing::error!("SYSTEM - Error unmarshalling account connections request message: {e}");
                return;
            }
        }
    }
    let table = core.account_table().clone();
    let Some(def) = table.by_name(&name) else { return };
    if def.conns.load(std::sync::atomic::Ordering::Relaxed) <= 0 || m.reply.is_empty() {
        return;
    }
    let (acc, reply, sysacc, s2) = (def.id, m.reply.clone(), m.account, sys.clone());
    conns::count(
        core,
        acc,
        Box::new(move |core: &mut ShardCore, stat, now| {
            let Some(stat) = stat else { return };
            if s2.stopped() {
                return;
            }
            let id = conns::next_id(&s2);
            let body = conns::message(&s2, &id, SystemTime::now(), &stat);
            conns::sent(&s2, acc, now);
            core.publish_internal(sysacc, &reply, b"", None, &body, now);
        }),
        now,
    );
}

/// nats-server's `subjectIsSubsetMatch`: every subject `subject` matches is matched by
/// `test` too.
pub fn subset_match(subject: &str, test: &str) -> bool {
    let tokens: Vec<&str> = subject.split('.').collect();
    let tests: Vec<&str> = test.split('.').collect();
    for (i, t2) in tests.iter().enumerate() {
        let Some(t1) = tokens.get(i) else { return false };
        if t2.is_empty() {
            return false;
        }
        if *t2 == ">" {
            return true;
        }
        if t1.is_empty() || *t1 == ">" {
            return false;
        }
        if *t1 == "*" {
            if *t2 != "*" {
                return false;
            }
            continue;
        }
        if *t2 != "*" && t1 != t2 {
            return false;
        }
    }
    tokens.len() == tests.len()
}

fn is_literal(s: &str) -> bool {
    !s.split('.').any(|t| t == "*" || t == ">")
}

/// Client subscriptions of account `acc` on every shard that a message on `subject`
/// reaches (a literal) or that `subject` covers (a wildcard), in queue group `queue` if
/// given; `done` gets the count on this shard.
fn count_subscribers(
    core: &mut ShardCore,
    acc: String,
    subject: String,
    queue: Option<String>,
    done: CountDone,
    now: Instant,
) {
    let literal = is_literal(&subject);
    let part: PartFn<i64> = Arc::new(move |core: &mut ShardCore, _| {
        let q = SubQuery {
            account: Some(acc.clone()),
            test: literal.then(|| subject.clone()),
            list: true,
            keep: usize::MAX,
        };
        let found = core.report_subs(&q);
        found
            .subs
            .iter()
            // Clients only (the server's internal subscriptions have no client id).
            .filter(|s| s.cid != 0)
            .filter(|s| literal || subset_match(&s.subject, &subject))
            .filter(|s| match &queue {
                Some(q) => s.queue.as_deref() == Some(q.as_str()),
                // nats-server counts plain subscribers and every queue member for a literal.
                None => true,
            })
            .count() as i64
    });
    core.gather(
        part,
        Box::new(move |core: &mut ShardCore, parts: Vec<i64>, now: Instant| done(core, parts.iter().sum(), now)),
        now,
    );
}

/// `$SYS.REQ.ACCOUNT.NSUBS`: `{"acc","subject","queue"}` (the queue in base64) answered
/// with the number of matching client subscriptions, when the account has clients here.
fn nsubs(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() {
        return;
    }
    if m.payload.is_empty() {
        tracing::error!("SYSTEM - request requires a body");
        return;
    }
    let fields = [
        f("acc", "accNumSubsReq", Kind::Str),
        f("subject", "accNumSubsReq", Kind::Str),
        f("queue", "accNumSubsReq", Kind::Str),
    ];
    let v = match optjson::decode(&m.payload, "accNumSubsReq", &fields) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("SYSTEM - Error unmarshalling account nsubs request message: {e}");
            return;
        }
    };
    let get = |name: &str| {
        v.iter().find_map(|(n, x)| match x {
            Val::Str(s) if *n == name => Some(s.clone()),
            _ => None,
        })
    };
    let queue = match get("queue") {
        None => None,
        Some(b64) => {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(b64.as_bytes()) {
                Ok(q) => Some(String::from_utf8_lossy(&q).into_owned()),
                Err(e) => {
                    tracing::error!("SYSTEM - Error unmarshalling account nsubs request message: {e}");
                    return;
                }
            }
        }
    };
    let acc = get("acc").unwrap_or_default();
    let table = core.account_table().clone();
    let active = table
        .by_name(&acc)
        .is_some_and(|d| d.conns.load(std::sync::atomic::Ordering::Relaxed) > 0);
    if !active {
        return;
    }
    let (reply, sysacc, s2) = (m.reply.clone(), m.account, sys.clone());
    count_subscribers(
        core,
        acc,
        get("subject").unwrap_or_default(),
        queue,
        Box::new(move |core: &mut ShardCore, n, now| {
            if !s2.stopped() && !reply.is_empty() {
                core.publish_internal(sysacc, &reply, b"", None, n.to_string().as_bytes(), now);
            }
        }),
        now,
    );
}

/// `$SYS.DEBUG.SUBSCRIBERS`: the payload is `<subject> [<queue>]`; the answer is the
/// number of client subscriptions in the requester's account (the system account).
fn debug_subscribers(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() || m.reply.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(&m.payload).trim().to_string();
    let mut args = text.split(' ');
    let subject = args.next().unwrap_or_default().to_string();
    let queue = args.next().map(str::to_string);
    let table = core.account_table().clone();
    let acc = table.name(m.account).to_string();
    let (reply, sysacc, s2) = (m.reply.clone(), m.account, sys.clone());
    count_subscribers(
        core,
        acc,
        subject,
        queue,
        Box::new(move |core: &mut ShardCore, n, now| {
            if !s2.stopped() {
                core.publish_internal(sysacc, &reply, b"", None, n.to_string().as_bytes(), now);
            }
        }),
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_matching_is_nats_servers() {
        let cases = [
            ("foo.bar", "foo.>", true),
            ("foo.*", "foo.>", true),
            ("foo.*", "foo.*", true),
            ("foo.bar", "foo.*", true),
            ("foo.*", "foo.bar", false),
            ("foo.>", "foo.*", false),
            ("foo", "foo.>", false),
            ("foo.bar.baz", "foo.*", false),
            ("a.b", "a.b", true),
            ("_R.>", "_R.>", true),
        ];
        for (sub, test, want) in cases {
            assert_eq!(subset_match(sub, test), want, "{sub} within {test}");
        }
    }

    #[test]
    fn the_account_token() {
        assert_eq!(account_of(b"$SYS.REQ.ACCOUNT.A.CONNZ").as_deref(), Some("A"));
        assert_eq!(account_of(b"$SYS.REQ.ACCOUNT.A.B.CONNZ"), None);
    }
}
