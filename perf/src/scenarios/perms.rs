//! `perms`: what publish and subscribe permissions cost. The `pubsub` flow on `foo.bench` runs
//! on one server as the `plain` user (no permissions), as the `perms` user (publish and
//! subscribe allowed on `foo.>`, denied on `foo.secret`), and as `plain` again; the result is
//! the `perms` run, with the mean of the two plain runs and the ratio perms/plain. Both users
//! are in the same account of the same config file ([`crate::authlab`]), so the runs differ
//! only in the permissions. A short unrecorded run as each user warms the server up first.
//!
//! Before measuring, the scenario checks that the server enforces the permissions (`perms` is
//! refused publishing and subscribing to `foo.secret`, `plain` may publish there), so a server
//! without the lab's configuration fails loudly instead of producing a meaningless ratio.

use crate::authlab::{User, PERMS_DENY};
use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};
use crate::proto::{encode_pub, encode_sub};
use crate::report::{PairStats, RunResult};
use crate::scenarios::{pubsub, Ctx, Params, Scenario};

/// The subject of the flow: inside `foo.>`, not the denied subject.
const SUBJECT: &str = "foo.bench";

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let checks = verify(ctx)?;
    let (plain, perms) = (User::Plain.credentials(), User::Perms.credentials());
    let flow =
        |params: &Params, login: &Credentials| pubsub::run_on(Scenario::Pubsub, params, ctx, SUBJECT, Some(login));
    let warm = Params {
        msgs: (p.msgs / 10).max(1),
        ..p.clone()
    };
    flow(&warm, &plain)?;
    flow(&warm, &perms)?;
    let base1 = flow(p, &plain)?;
    let measured = flow(p, &perms)?;
    let base2 = flow(p, &plain)?;
    Ok(combine(Scenario::Perms, measured, [base1, base2], "plain user", checks))
}

/// The measured run with its two baselines folded in, reported as `scenario`.
pub(crate) fn combine(
    scenario: Scenario,
    measured: RunResult,
    baselines: [RunResult; 2],
    label: &str,
    checks: Vec<String>,
) -> RunResult {
    let mut r = measured;
    r.scenario = scenario;
    let runs: Vec<f64> = baselines.iter().map(|b| b.msgs_per_s).collect();
    let rate = runs.iter().sum::<f64>() / runs.len() as f64;
    for (i, b) in baselines.iter().enumerate() {
        r.complete &= b.complete;
        r.notes
            .extend(b.notes.iter().map(|n| format!("baseline run {}: {n}", i + 1)));
    }
    r.pair = Some(PairStats {
        baseline: label.to_string(),
        baseline_runs: runs,
        baseline_rate: rate,
        rate_ratio: if rate > 0.0 { r.msgs_per_s / rate } else { 0.0 },
        baseline_latency_us: None,
        p99_ratio: None,
        checks,
    });
    r
}

/// Checks the server enforces the lab's permissions; returns what was checked.
fn verify(ctx: &Ctx<'_>) -> Result<Vec<String>> {
    let (plain, perms) = (User::Plain.credentials(), User::Perms.credentials());
    let mut publish = Vec::new();
    encode_pub(&mut publish, PERMS_DENY.as_bytes(), None, b"x");
    let mut subscribe = Vec::new();
    encode_sub(&mut subscribe, PERMS_DENY, None, 1);
    expect_refused(
        ctx,
        &perms,
        &publish,
        &format!("Permissions Violation for Publish to \"{PERMS_DENY}\""),
    )?;
    expect_refused(
        ctx,
        &perms,
        &subscribe,
        &format!("Permissions Violation for Subscription to \"{PERMS_DENY}\""),
    )?;
    let mut conn = Conn::connect_as(ctx.addr, ctx.handshake_timeout, Some(&plain), b"")?;
    conn.write_all(&publish)?;
    conn.flush(ctx.handshake_timeout, &mut |_| Ok(()))
        .map_err(|e| PerfError::Config(format!("user plain may not publish to {PERMS_DENY}: {e}")))?;
    Ok(vec![
        format!("perms: publish to {PERMS_DENY} refused"),
        format!("perms: subscribe to {PERMS_DENY} refused"),
        format!("plain: publish to {PERMS_DENY} allowed"),
    ])
}

/// Sends `cmd` as `login` and expects an `-ERR` containing `want`.
fn expect_refused(ctx: &Ctx<'_>, login: &Credentials, cmd: &[u8], want: &str) -> Result<()> {
    let mut conn = Conn::connect_as(ctx.addr, ctx.handshake_timeout, Some(login), b"")?;
    conn.write_all(cmd)?;
    let line = cmd.split(|&b| b == b'\r').next().unwrap_or_default();
    let shown = String::from_utf8_lossy(line).into_owned();
    match conn.flush(ctx.handshake_timeout, &mut |_| Ok(())) {
        Err(PerfError::Server(text)) if text.contains(want) => Ok(()),
        Err(e) => Err(PerfError::Config(format!(
            "user {}: {shown:?} was answered with {e}, expected -ERR '{want}'",
            login.user
        ))),
        Ok(()) => Err(PerfError::Config(format!(
            "user {} may {shown:?}: the server does not enforce the lab's permissions (is it running `rnats-perf auth-config`'s file?)",
            login.user
        ))),
    }
}
