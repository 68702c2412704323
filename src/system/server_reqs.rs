//! `$SYS.REQ.SERVER.*`: the server's monitoring answers over NATS (nats-server's
//! `initEventTracking`): `$SYS.REQ.SERVER.PING` (STATSZ of every server),
//! `$SYS.REQ.SERVER.PING.<X>` and `$SYS.REQ.SERVER.<id>.<X>` for every endpoint, and the
//! actions `$SYS.REQ.SERVER.<id>.RELOAD`, `.KICK` and `.LDM`. The answers are the HTTP
//! endpoints' JSON (the same builders), in the `{"server":..., "data":...}` envelope.
//!
//! Everything is subscribed on shard 0 in the system account, plus the reference's
//! subscriptions that only matter with other servers (remote STATSZ, shutdowns, account
//! counts, inboxes, leaf node and latency subjects): those are kept local and do nothing,
//! so that subscription counts are the reference's.

use super::respond::{Answer, Request};
use super::{statsz, System};
use crate::core::accounts::AccountId;
use crate::core::shard::internal::{Handler, InternalMsg, PartFn};
use crate::core::shard::{LdmRefused, ShardCore};
use crate::monitor::disabled::{self, event_options, Values};
use crate::monitor::optjson::{self, f, EventFilter, Kind, Val};
use crate::monitor::{self, AccountzOptions, ConnzOptions, HealthzOptions, SubszOptions};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// What a handler of this module is.
type Serve = fn(&mut ShardCore, &Arc<System>, InternalMsg, Instant);

/// The endpoints, in nats-server's order.
const ENDPOINTS: [(&str, Serve); 15] = [
    ("IDZ", idz),
    ("STATSZ", statsz_req),
    ("VARZ", varz),
    ("SUBSZ", subsz),
    ("CONNZ", connz),
    ("ROUTEZ", routez),
    ("GATEWAYZ", gatewayz),
    ("LEAFZ", leafz),
    ("ACCOUNTZ", accountz),
    ("JSZ", jsz),
    ("HEALTHZ", healthz),
    ("PROFILEZ", profilez),
    ("EXPVARZ", expvarz),
    ("IPQUEUESZ", ipqueuesz),
    ("RAFTZ", raftz),
];

/// nats-server's `getHash`: 8 base-62 characters of the SHA-256 of `name`.
pub fn server_hash(name: &str) -> String {
    use sha2::Digest;
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let sum = sha2::Sha256::digest(name.as_bytes());
    sum.iter()
        .take(8)
        .map(|b| char::from(DIGITS[(*b % 62) as usize]))
        .collect()
}

fn handler(sys: &Arc<System>, serve: Serve) -> Handler {
    let sys = sys.clone();
    Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| serve(core, &sys, m.take(), now))
}

/// Subscribe the server services in the system account `acc` (shard 0).
pub fn subscribe(core: &mut ShardCore, acc: AccountId, sys: &Arc<System>, now: Instant) {
    let id = sys.server().id.clone();
    let hash = server_hash(&sys.server().name);
    let mut inert = vec![
        format!("$SYS._INBOX.{hash}.*"),
        "$SYS.SERVER.ACCOUNT.*.CONNS".to_string(),
        format!("$SYS._INBOX_.{id}"),
        "$SYS.SERVER.*.STATSZ".to_string(),
        "$SYS.SERVER.*.SHUTDOWN".to_string(),
        "$SYS.SERVER.*.LAMEDUCK".to_string(),
        "$SYS.ACCOUNT.*.LEAFNODE.CONNECT".to_string(),
        format!("$SYS.LATENCY.M2.{hash}"),
    ];
    if !sys.operator_mode {
        // Claim updates in config mode: there is no account JWT to update.
        inert.push("$SYS.ACCOUNT.*.CLAIMS.UPDATE".to_string());
        inert.push("$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE".to_string());
    }
    for s in &inert {
        let h: Handler = Box::new(|_: &mut ShardCore, _: &mut InternalMsg, _: Instant| {});
        core.subscribe_internal(acc, s, None, true, h, now);
    }
    core.subscribe_internal(acc, "$SYS.REQ.SERVER.PING", None, false, handler(sys, statsz_req), now);
    for (name, serve) in ENDPOINTS {
        for subject in [
            format!("$SYS.REQ.SERVER.{id}.{name}"),
            format!("$SYS.REQ.SERVER.PING.{name}"),
        ] {
            core.subscribe_internal(acc, &subject, None, false, handler(sys, serve), now);
        }
    }
    for (name, serve) in [("RELOAD", reload as Serve), ("KICK", kick), ("LDM", ldm)] {
        let subject = format!("$SYS.REQ.SERVER.{id}.{name}");
        core.subscribe_internal(acc, &subject, None, false, handler(sys, serve), now);
    }
}

/// Options that are only a filter (`StatszEventOptions`, `VarzEventOptions`, ...).
fn filter_only(outer: &'static str) -> impl FnOnce(&[u8]) -> Result<((), EventFilter), String> {
    move |body| event_options(body, outer, &[]).map(|(_, f)| ((), f))
}

fn with_values(
    outer: &'static str,
    fields: &'static [optjson::Field],
) -> impl FnOnce(&[u8]) -> Result<(Values, EventFilter), String> {
    move |body| event_options(body, outer, fields)
}

fn bool_of(v: &Values, name: &str) -> bool {
    v.iter().any(|(n, x)| *n == name && *x == Val::Bool(true))
}

fn str_of(v: &Values, name: &str) -> String {
    v.iter()
        .find_map(|(n, x)| match x {
            Val::Str(s) if *n == name => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// `$SYS.REQ.SERVER.PING`, `.PING.STATSZ`, `.<id>.STATSZ`: the statistics message; without
/// a reply it is broadcast on `$SYS.SERVER.<id>.STATSZ`.
fn statsz_req(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() {
        return;
    }
    let broadcast = format!("$SYS.SERVER.{}.STATSZ", sys.server().id);
    let reply = if m.reply.is_empty() {
        sys.statsz.lock().unwrap_or_else(|p| p.into_inner()).reset();
        broadcast.clone().into_bytes()
    } else {
        m.reply.clone()
    };
    let req = Request {
        sys: sys.clone(),
        account: m.account,
        reply,
        encoding: Default::default(),
    };
    if !m.payload.is_empty() {
        match event_options(&m.payload, "StatszEventOptions", &[]) {
            Err(e) => return req.error(core, 400, &e, now),
            Ok((_, filter)) if super::respond::excluded(sys, &filter) => return,
            Ok(_) => {}
        }
    }
    if req.reply == broadcast.as_bytes() {
        let allowed = sys
            .statsz
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(Instant::now());
        if !allowed || !core.has_interest(m.account, broadcast.as_bytes()) {
            return;
        }
    }
    statsz::with_message(core, sys, move |core, body, now| req.raw(core, &body, now), now);
}

/// The periodic broadcast (posted by the timer thread to shard 0 when it is due).
pub fn broadcast_statsz(core: &mut ShardCore, sys: &Arc<System>, now: Instant) {
    let Some(acc) = core.account_table().system() else {
        return;
    };
    let subject = format!("$SYS.SERVER.{}.STATSZ", sys.server().id);
    if sys.stopped() || !core.has_interest(acc, subject.as_bytes()) {
        return;
    }
    statsz::with_message(
        core,
        sys,
        move |core, body, now| {
            core.publish_internal(acc, subject.as_bytes(), b"", None, &body, now);
        },
        now,
    );
}

/// `IDZ`: `{"name","host","id"}`, no envelope.
fn idz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if m.reply.is_empty() || sys.stopped() {
        return;
    }
    #[derive(Serialize)]
    struct Id<'a> {
        name: &'a str,
        host: &'a str,
        id: &'a str,
    }
    let s = sys.server();
    let body = crate::proto::gojson::to_vec(&Id {
        name: &s.name,
        host: &s.host,
        id: &s.id,
    });
    core.publish_internal(m.account, &m.reply, b"", None, &body, now);
}

fn varz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some(((), req)) = Request::start(sys, core, &m, filter_only("VarzEventOptions"), now) {
        let cores = sys.cores;
        let ctx = sys.monitor.clone();
        monitor::varz::varz_on_shard(
            core,
            &ctx,
            Box::new(move |core: &mut ShardCore, r, now| {
                let r = r.map(|mut v| {
                    // Built on shard 0, whose thread is pinned to one CPU.
                    v.cores = cores;
                    v
                });
                req.answer(core, Answer::from_result(r), now)
            }),
            now,
        );
    }
}

fn subsz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some((o, req)) = Request::start(sys, core, &m, SubszOptions::from_json, now) {
        serve_subsz(core, req, o, now);
    }
}

pub(super) fn serve_subsz(core: &mut ShardCore, req: Request, o: SubszOptions, now: Instant) {
    let ctx = req.sys.monitor.clone();
    monitor::subsz::subsz_on_shard(
        core,
        &ctx,
        &o,
        Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
        now,
    );
}

fn connz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some((o, req)) = Request::start(sys, core, &m, ConnzOptions::from_json, now) {
        serve_connz(core, req, o, now);
    }
}

pub(super) fn serve_connz(core: &mut ShardCore, req: Request, o: ConnzOptions, now: Instant) {
    let ctx = req.sys.monitor.clone();
    monitor::connz::connz_on_shard(
        core,
        &ctx,
        &o,
        Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
        now,
    );
}

fn routez(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("RoutezEventOptions", &disabled::ROUTEZ_FIELDS);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        req.answer(core, Answer::json(&disabled::routez(&sys.monitor)), now);
    }
}

fn gatewayz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("GatewayzEventOptions", &disabled::GATEWAYZ_FIELDS);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        req.answer(core, Answer::json(&disabled::gatewayz(&sys.monitor)), now);
    }
}

fn leafz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("LeafzEventOptions", &disabled::LEAFZ_FIELDS);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        req.answer(core, Answer::json(&disabled::leafz(&sys.monitor)), now);
    }
}

fn accountz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some((o, req)) = Request::start(sys, core, &m, AccountzOptions::from_json, now) {
        let ctx = sys.monitor.clone();
        monitor::accountz::accountz_on_shard(
            core,
            &ctx,
            &o,
            Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
            now,
        );
    }
}

fn jsz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("JszEventOptions", &disabled::JSZ_FIELDS);
    if let Some((v, req)) = Request::start(sys, core, &m, decode, now) {
        let ctx = sys.monitor.clone();
        let o = monitor::jsz::JszOptions::from_values(&v);
        monitor::jsz::jsz_on_shard(
            core,
            &ctx,
            o,
            Box::new(move |core: &mut ShardCore, r, now| {
                // `leader_only` on a server that is not the leader: no answer at all.
                let answer = match r {
                    Ok(j) => Answer::json(&j),
                    Err(monitor::MonitorError::BadRequest(_)) => Answer::Skip,
                    Err(e) => Answer::from_result::<()>(Err(e)),
                };
                req.answer(core, answer, now)
            }),
            now,
        );
    }
}

fn healthz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some((o, req)) = Request::start(sys, core, &m, HealthzOptions::from_json, now) {
        let h: HealthzOptions = o;
        let ctx = sys.monitor.clone();
        monitor::healthz::healthz_on_shard(
            core,
            &ctx,
            &h,
            Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
            now,
        );
    }
}

const PROFILEZ_FIELDS: [optjson::Field; 3] = [
    f("name", "ProfilezOptions", Kind::Str),
    f("debug", "ProfilezOptions", Kind::Int),
    f("duration", "ProfilezOptions", Kind::Duration),
];

/// `PROFILEZ`: rnats has none of Go's profiles; the answers are the reference's for a
/// missing name, a CPU profile's bad duration, and an unknown profile.
fn profilez(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("ProfilezEventOptions", &PROFILEZ_FIELDS);
    if let Some((v, req)) = Request::start(sys, core, &m, decode, now) {
        #[derive(Serialize)]
        struct Status {
            profile: Option<Vec<u8>>,
            error: String,
        }
        let name = str_of(&v, "name");
        let duration = v
            .iter()
            .find_map(|(n, x)| match x {
                Val::Int(d) if *n == "duration" => Some(*d),
                _ => None,
            })
            .unwrap_or(0);
        let error = if name.is_empty() {
            "Profile name not specified".to_string()
        } else if name == "cpu" && (duration <= 0 || duration > 15_000_000_000) {
            let d = std::time::Duration::from_nanos(duration.unsigned_abs());
            let text = crate::monitor::gofmt::go_duration(d);
            let sign = if duration < 0 { "-" } else { "" };
            format!("Duration {sign}{text} should be between 0s and 15s")
        } else {
            format!("Profile {} not found", crate::proto::reply::go_quote(name.as_bytes()))
        };
        req.answer(core, Answer::json(&Status { profile: None, error }), now);
    }
}

/// `EXPVARZ`: what rnats has of Go's expvars (as `/debug/vars`).
fn expvarz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if let Some(((), req)) = Request::start(sys, core, &m, filter_only("ExpvarzEventOptions"), now) {
        let v = serde_json::json!({
            "memstats": { "Sys": monitor::varz::rss_bytes() },
            "cmdline": std::env::args().collect::<Vec<String>>(),
        });
        req.answer(core, Answer::json(&v), now);
    }
}

fn ipqueuesz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("IpqueueszEventOptions", &disabled::IPQUEUESZ_FIELDS);
    if let Some((v, req)) = Request::start(sys, core, &m, decode, now) {
        let plan = disabled::ipqueuesz_plan(bool_of(&v, "all"), str_of(&v, "filter"));
        plan.run_on_shard(
            core,
            Box::new(move |core: &mut ShardCore, r, now| req.answer(core, Answer::from_result(r), now)),
            now,
        );
    }
}

/// `RAFTZ`: no raft groups (`{}`).
fn raftz(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let decode = with_values("RaftzEventOptions", &disabled::RAFTZ_FIELDS);
    if let Some((_, req)) = Request::start(sys, core, &m, decode, now) {
        req.answer(core, Answer::Data(b"{}".to_vec()), now);
    }
}

/// `RELOAD`: the main loop reloads the configuration; the answer has no data, or the
/// reload's error.
fn reload(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    let Some(((), req)) = Request::start(sys, core, &m, filter_only("EventFilterOptions"), now) else {
        return;
    };
    let Some(reloader) = sys.reloader() else {
        let description = "configuration reload is not available".to_string();
        return req.answer(
            core,
            Answer::Failed {
                description,
                null_data: false,
            },
            now,
        );
    };
    let post = core.post().cloned();
    let shard = core.index();
    reloader(Box::new(move |r: Result<(), String>| {
        let answer = match r {
            Ok(()) => Answer::Done,
            Err(description) => Answer::Failed {
                description,
                null_data: false,
            },
        };
        if let Some(post) = post {
            post.post(
                shard,
                Box::new(move |core: &mut ShardCore, now: Instant| req.answer(core, answer, now)),
            );
        }
    }));
}

/// The `{"cid": N}` of a KICK or LDM request; `None` (and a logged error, as nats-server)
/// when the body is not that.
fn client_id(m: &InternalMsg, outer: &'static str, what: &str) -> Option<u64> {
    let fields = [f("cid", outer, Kind::Uint)];
    match optjson::decode(&m.payload, outer, &fields) {
        Ok(v) => Some(
            v.iter()
                .find_map(|(_, x)| match x {
                    Val::Uint(n) => Some(*n),
                    _ => None,
                })
                .unwrap_or(0),
        ),
        Err(e) => {
            tracing::error!("SYSTEM - Error unmarshalling {what} client request: {e}");
            None
        }
    }
}

/// `KICK`: close the client with that id (on whichever shard it is) as `Kicked`.
fn kick(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() {
        return;
    }
    let Some(cid) = client_id(&m, "KickClientReq", "kick") else {
        return;
    };
    let Some(((), req)) = Request::start(sys, core, &m, filter_only("EventFilterOptions"), now) else {
        return;
    };
    let part: PartFn<bool> = Arc::new(move |core: &mut ShardCore, now: Instant| core.kick(cid, now));
    core.gather(
        part,
        Box::new(move |core: &mut ShardCore, found: Vec<bool>, now: Instant| {
            let answer = if found.iter().any(|b| *b) {
                Answer::Done
            } else {
                Answer::Failed {
                    description: "no such client or leafnode id".into(),
                    null_data: false,
                }
            };
            req.answer(core, answer, now);
        }),
        now,
    );
}

/// `LDM`: send the client with that id the lame duck INFO.
fn ldm(core: &mut ShardCore, sys: &Arc<System>, m: InternalMsg, now: Instant) {
    if sys.stopped() {
        return;
    }
    // nats-server's message names the kick request here too.
    let Some(cid) = client_id(&m, "LDMClientReq", "kick") else {
        return;
    };
    let Some(((), req)) = Request::start(sys, core, &m, filter_only("EventFilterOptions"), now) else {
        return;
    };
    let part: PartFn<Result<(), LdmRefused>> =
        Arc::new(move |core: &mut ShardCore, now: Instant| core.lame_duck_client(cid, now));
    core.gather(
        part,
        Box::new(
            move |core: &mut ShardCore, parts: Vec<Result<(), LdmRefused>>, now: Instant| {
                let answer = if parts.iter().any(Result::is_ok) {
                    Answer::Done
                } else if parts.contains(&Err(LdmRefused::NotReady)) {
                    Answer::Failed {
                        description:
                            "client does not support Lame Duck Mode or is not ready to receive the notification".into(),
                        null_data: false,
                    }
                } else {
                    Answer::Failed {
                        description: "no such client id".into(),
                        null_data: false,
                    }
                };
                req.answer(core, answer, now);
            },
        ),
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_hash_is_the_references() {
        // nats-server 2.14.0 named "srv1" subscribes `$SYS._INBOX.8UIcYUaa.*`.
        assert_eq!(server_hash("srv1"), "8UIcYUaa");
    }
}
