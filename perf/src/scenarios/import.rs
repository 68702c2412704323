//! `import`: what a service import costs. Request/reply on `svc.rr` runs on one server with the
//! responders (user `svc`) in account A, which exports `svc.>`, and the requesters either in A
//! too (user `local`: the same-account baseline) or in account B (user `importer`), which
//! imports the service, so every request crosses the import and every reply the response
//! mapping back. The order is same account, import, same account; the result is the import
//! run, with the baseline's latency (one histogram over both baseline runs), its requests/s,
//! and the ratios import/same for p99 and requests/s. A short unrecorded run of each warms the
//! server up first.
//!
//! Before measuring, the scenario checks that the accounts are isolated (a message published
//! in B does not reach A's subscriber, one published in A does) and that a request from B gets
//! the responder's own answer through the import (not a no-responders status).

use std::time::{Duration, Instant};

use crate::authlab::User;
use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};
use crate::proto::{encode_pub, encode_sub, Frame};
use crate::report::RunResult;
use crate::scenarios::perms::combine;
use crate::scenarios::reqrep::{self, RrSpec};
use crate::scenarios::{Ctx, Params, Scenario};
use crate::stats::ratio;

/// The request subject, inside the exported `svc.>`.
const SUBJECT: &str = "svc.rr";
/// How long the isolation check waits for a message that must not arrive.
const GRACE: Duration = Duration::from_millis(150);

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let checks = verify(ctx)?;
    let (svc, local, importer) = (
        User::Responder.credentials(),
        User::Local.credentials(),
        User::Importer.credentials(),
    );
    let warm = Params {
        msgs: (p.msgs / 10).max(1),
        ..p.clone()
    };
    reqrep::measure(&warm, ctx, &spec(&svc, &local))?;
    reqrep::measure(&warm, ctx, &spec(&svc, &importer))?;
    let (base1, mut hist) = reqrep::measure(p, ctx, &spec(&svc, &local))?;
    let (measured, _) = reqrep::measure(p, ctx, &spec(&svc, &importer))?;
    let (base2, hist2) = reqrep::measure(p, ctx, &spec(&svc, &local))?;
    hist.add(&hist2)
        .map_err(|e| PerfError::Protocol(format!("histogram merge: {e}")))?;
    let mut r = combine(Scenario::Import, measured, [base1, base2], "same account", checks);
    let baseline = reqrep::latency(&hist);
    let p99 = ratio(r.latency_us.as_ref().map(|l| l.p99), baseline.as_ref().map(|l| l.p99));
    if let Some(pair) = r.pair.as_mut() {
        pair.baseline_latency_us = baseline;
        pair.p99_ratio = p99;
    }
    Ok(r)
}

/// Requests on [`SUBJECT`] answered by `responder`.
fn spec<'a>(responder: &'a Credentials, requester: &'a Credentials) -> RrSpec<'a> {
    RrSpec {
        subject: SUBJECT,
        responder: Some(responder),
        requester: Some(requester),
    }
}

/// A message as received, owned.
struct Got {
    subject: Vec<u8>,
    reply: Option<Vec<u8>>,
    data: Vec<u8>,
    header_len: usize,
}

/// Reads messages for up to `within`, or until `done` says enough arrived.
fn read_for(conn: &mut Conn, within: Duration, done: impl Fn(&[Got]) -> bool) -> Result<Vec<Got>> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while !done(&got) && Instant::now() < deadline {
        conn.read_frames(|f| {
            if let Frame::Msg(m) = f {
                got.push(Got {
                    subject: m.subject.to_vec(),
                    reply: m.reply.map(<[u8]>::to_vec),
                    data: m.data.to_vec(),
                    header_len: m.header_len,
                });
            }
            Ok(())
        })?;
    }
    Ok(got)
}

/// Checks account isolation and the service import; returns what was checked.
fn verify(ctx: &Ctx<'_>) -> Result<Vec<String>> {
    let t = ctx.handshake_timeout;
    let connect = |user: User, setup: &[u8]| Conn::connect_as(ctx.addr, t, Some(&user.credentials()), setup);
    let mut setup = Vec::new();
    encode_sub(&mut setup, "svc.check", None, 1);
    encode_sub(&mut setup, "iso.check", None, 2);
    let mut svc = connect(User::Responder, &setup)?;
    let mut setup = Vec::new();
    encode_sub(&mut setup, "_INBOX.check.*", None, 1);
    let mut importer = connect(User::Importer, &setup)?;
    let mut local = connect(User::Local, b"")?;
    let publish = |conn: &mut Conn, subject: &str, reply: Option<&str>, data: &[u8]| -> Result<()> {
        let mut frame = Vec::new();
        encode_pub(&mut frame, subject.as_bytes(), reply.map(str::as_bytes), data);
        conn.write_all(&frame)?;
        conn.flush(t, &mut |_| Ok(()))
    };

    // Isolation: B's message must not reach A; A's must (so the check can fail).
    publish(&mut importer, "iso.check", None, b"from-b")?;
    publish(&mut local, "iso.check", None, b"from-a")?;
    let has = |got: &[Got], data: &[u8]| got.iter().any(|g| g.subject == b"iso.check" && g.data == data);
    let mut got = read_for(&mut svc, t, |g| has(g, b"from-a"))?;
    if !has(&got, b"from-a") {
        return Err(PerfError::Config(format!(
            "user svc did not receive a message published by user local in the same account within {t:?}"
        )));
    }
    got.extend(read_for(&mut svc, GRACE, |_| false)?);
    if has(&got, b"from-b") {
        return Err(PerfError::Config(
            "a message published in account B reached account A: the server does not run the lab's accounts".into(),
        ));
    }

    // The import: B's request reaches A's responder, whose answer comes back.
    publish(&mut importer, "svc.check", Some("_INBOX.check.1"), b"ping")?;
    let got = read_for(&mut svc, t, |g| g.iter().any(|g| g.subject == b"svc.check"))?;
    let Some(reply) = got
        .iter()
        .find(|g| g.subject == b"svc.check")
        .and_then(|g| g.reply.clone())
    else {
        return Err(PerfError::Config(format!(
            "a request from account B on svc.check did not reach account A's responder within {t:?}"
        )));
    };
    let reply = String::from_utf8_lossy(&reply).into_owned();
    publish(&mut svc, &reply, None, b"pong")?;
    let got = read_for(&mut importer, t, |g| !g.is_empty())?;
    match got.first() {
        Some(g) if g.data == b"pong" && g.header_len == 0 => {}
        Some(g) => {
            return Err(PerfError::Config(format!(
                "the reply through the import was {:?}, not the responder's answer",
                String::from_utf8_lossy(&g.data)
            )))
        }
        None => return Err(PerfError::Config(format!("no reply through the import within {t:?}"))),
    }
    Ok(vec![
        "accounts isolated: B's message did not reach A, A's did".into(),
        "a request from B reached A's responder through the import and its reply came back".into(),
    ])
}
