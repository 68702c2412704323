//! `rnats-perf`: the perf lab's load generator. Drives any NATS server over the wire with a
//! small blocking-TCP client, and compares rnats with the reference nats-server.
//!
//! Module map:
//!
//! | module | concern |
//! |---|---|
//! | [`cli`] | command line (clap derive) |
//! | [`proto`] | server→client frame parser, `PUB`/`SUB` encoders |
//! | [`line_memo`] | a connection's last `MSG` line, so repeats of it are not parsed again |
//! | [`client`] | one connection: handshake, batched writes, buffered frame reads |
//! | [`transport`] | TCP, TLS, WebSocket or both under a connection; server configs for them |
//! | [`server`] | loopback-only targets; starting/stopping a server child process |
//! | [`proc`] | server CPU and RSS from `/proc`, fd limit |
//! | [`scenarios`] | the load scenarios ([`scenarios::flow`] is the pub/sub engine) |
//! | [`stats`] | median, ratio, spread, balance |
//! | [`report`] | results, per-scenario metrics, text tables |
//! | [`compare`] | A/B comparison over rounds, JSON output |
//! | [`compare_auth`] | `compare-auth`: the auth scenarios at several sizes, and their targets |
//! | [`authlab`] | the auth scenarios' server config (users, permissions, accounts, import) |
//! | [`chart`] | the comparison's SVG chart |
//! | [`progress`] | progress bars |
//! | [`error`] | the error type |

mod authlab;
mod chart;
mod cli;
mod client;
mod compare;
mod compare_auth;
mod error;
mod line_memo;
mod proc;
mod progress;
mod proto;
mod report;
mod scenarios;
mod server;
mod stats;
mod transport;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::cli::{split_args, Cli, Cmd, SidesArgs, TargetArgs};
use crate::error::{PerfError, Result};
use crate::report::{render_run, RunResult};
use crate::scenarios::{Ctx, ParamArgs, Scenario};
use crate::server::Target;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("warning: some runs were incomplete (see the notes above)");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command; `Ok(false)` when a run finished but was incomplete.
fn run(cmd: Cmd) -> Result<bool> {
    let t = match &cmd {
        Cmd::Pub(a)
        | Cmd::Pubsub(a)
        | Cmd::Pairs(a)
        | Cmd::Fanout(a)
        | Cmd::Fanin(a)
        | Cmd::Queue(a)
        | Cmd::Reqrep(a)
        | Cmd::Conns(a)
        | Cmd::Subjects(a)
        | Cmd::Monpoll(a)
        | Cmd::Handshakes(a)
        | Cmd::Perms(a)
        | Cmd::Import(a)
        | Cmd::Sysevents(a)
        | Cmd::JsPubAsync(a)
        | Cmd::JsPubSync(a)
        | Cmd::JsPull(a)
        | Cmd::JsPush(a)
        | Cmd::KvPut(a)
        | Cmd::KvGet(a)
        | Cmd::JsMirror(a)
        | Cmd::JsCounter(a) => a.params.transport,
        Cmd::All(a) => a.params.transport,
        Cmd::Compare(c) => c.sides.params.transport,
        Cmd::CompareAuth(c) => c.sides.params.transport,
        Cmd::AuthConfig(_) => transport::Transport::Tcp,
    };
    transport::set(t);
    let single = |s: Scenario, a: cli::RunArgs| run_scenarios(&[s], &a.target, &a.params, 1.0);
    match cmd {
        Cmd::Pub(a) => single(Scenario::Pub, a),
        Cmd::Pubsub(a) => single(Scenario::Pubsub, a),
        Cmd::Fanout(a) => single(Scenario::Fanout, a),
        Cmd::Fanin(a) => single(Scenario::Fanin, a),
        Cmd::Queue(a) => single(Scenario::Queue, a),
        Cmd::Pairs(a) => single(Scenario::Pairs, a),
        Cmd::Reqrep(a) => single(Scenario::Reqrep, a),
        Cmd::Conns(a) => single(Scenario::Conns, a),
        Cmd::Subjects(a) => single(Scenario::Subjects, a),
        Cmd::Monpoll(a) => single(Scenario::Monpoll, a),
        Cmd::Handshakes(a) => single(Scenario::Handshakes, a),
        Cmd::Perms(a) => single(Scenario::Perms, a),
        Cmd::Import(a) => single(Scenario::Import, a),
        Cmd::Sysevents(a) => single(Scenario::Sysevents, a),
        Cmd::JsPubAsync(a) => single(Scenario::JsPubAsync, a),
        Cmd::JsPubSync(a) => single(Scenario::JsPubSync, a),
        Cmd::JsPull(a) => single(Scenario::JsPull, a),
        Cmd::JsPush(a) => single(Scenario::JsPush, a),
        Cmd::KvPut(a) => single(Scenario::KvPut, a),
        Cmd::KvGet(a) => single(Scenario::KvGet, a),
        Cmd::JsMirror(a) => single(Scenario::JsMirror, a),
        Cmd::JsCounter(a) => single(Scenario::JsCounter, a),
        Cmd::AuthConfig(a) => {
            match &a.file {
                Some(path) => authlab::write_to(path)?,
                None => print!("{}", authlab::config_text()),
            }
            Ok(true)
        }
        Cmd::All(a) => {
            let list = if a.scenarios.is_empty() {
                Scenario::ALL.to_vec()
            } else {
                a.scenarios.clone()
            };
            run_scenarios(&list, &a.target, &a.params, a.scale)
        }
        Cmd::Compare(c) => {
            let list = if c.scenarios.is_empty() {
                Scenario::ALL.to_vec()
            } else {
                c.scenarios
            };
            let plan = compare::plan(&list, &c.sides.params, c.sides.scale)?;
            let report = compare::run(&compare_opts(c.sides, plan, "out")?)?;
            Ok(report_ok(&report))
        }
        Cmd::CompareAuth(c) => {
            let list = if c.scenarios.is_empty() {
                compare_auth::SCENARIOS.to_vec()
            } else {
                c.scenarios
            };
            let plan = compare_auth::plan(&list, &c.sizes, &c.sides.params, c.sides.scale)?;
            let report = compare::run(&compare_opts(c.sides, plan, "out/auth")?)?;
            let checks = compare_auth::targets(&report);
            println!("{}", compare_auth::render_targets(&report, &checks));
            Ok(report_ok(&report))
        }
    }
}

/// The comparison's options; `out` is the default output folder inside this crate.
fn compare_opts(c: SidesArgs, plan: Vec<compare::PlanItem>, out: &str) -> Result<compare::CompareOpts> {
    Ok(compare::CompareOpts {
        a: compare::Side {
            name: c.a_name,
            bin: match c.a {
                Some(p) => p,
                None => compare::default_rnats()?,
            },
            args: split_args(c.a_args.as_deref()),
        },
        b: compare::Side {
            name: c.b_name,
            bin: match c.b {
                Some(p) => p,
                None => compare::default_reference()?,
            },
            args: split_args(c.b_args.as_deref()),
        },
        rounds: c.rounds,
        plan,
        out: c.out.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(out)),
        quiet: c.quiet,
        handshake_timeout: timeout(c.handshake_timeout)?,
    })
}

/// Whether every run of the comparison succeeded and was complete.
fn report_ok(report: &compare::CompareReport) -> bool {
    report.scenarios.iter().all(|s| {
        s.a_errors.is_empty()
            && s.b_errors.is_empty()
            && s.a_runs.iter().chain(&s.b_runs).all(|r: &RunResult| r.complete)
    })
}

fn timeout(secs: f64) -> Result<Duration> {
    if secs > 0.0 && secs <= 60.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(PerfError::Param(
            "--handshake-timeout must be in (0, 60] seconds".into(),
        ))
    }
}

/// Runs scenarios one after the other against one target (started by us or external).
fn run_scenarios(list: &[Scenario], t: &TargetArgs, params: &ParamArgs, scale: f64) -> Result<bool> {
    let mut resolved = Vec::new();
    if params.msgs.is_none() && scale != 1.0 && !(scale > 0.0 && scale <= 100.0) {
        return Err(PerfError::Param("--scale must be in (0, 100]".into()));
    }
    for &s in list {
        resolved.push((s, compare::scaled(s, params, scale)?));
    }
    // The auth scenarios need the lab's config on the server; the others need a server
    // without authentication, so one target cannot serve both.
    let auth = list.iter().any(|s| s.auth_config());
    if auth && list.iter().any(|s| !s.auth_config()) {
        return Err(PerfError::Param(
            "perms and import run on the lab's auth config: run them apart from the other scenarios".into(),
        ));
    }
    proc::raise_fd_limit();
    let handshake_timeout = timeout(t.handshake_timeout)?;
    // With --server, the config folder lives as long as the server (declared first, dropped last).
    let config = (auth && t.server.is_some())
        .then(authlab::ConfigDir::write)
        .transpose()?;
    // The same for the JetStream store folder of a started server (-js -sd <dir>).
    let store = (list.iter().any(|s| s.jetstream()) && t.server.is_some())
        .then(scenarios::js::api::StoreDir::create)
        .transpose()?;
    let mut target = match &t.server {
        Some(bin) => {
            let mut args = split_args(t.server_args.as_deref());
            if let Some(c) = &config {
                args.extend(c.server_args()?);
            }
            if let Some(d) = &store {
                args.extend(d.server_args()?);
            }
            let login = list.first().and_then(|s| s.login());
            Target::start(bin, &args, login.as_ref())?
        }
        None => Target::external(&t.url, t.pid)?,
    };
    let mut results = Vec::new();
    for (s, p) in &resolved {
        let bar = progress::run_bar(t.quiet);
        bar.set_prefix(s.name());
        let ctx = Ctx {
            addr: target.addr,
            pid: target.pid,
            bar: &bar,
            handshake_timeout,
        };
        let r = scenarios::run(*s, p, &ctx);
        bar.finish_and_clear();
        if let Some(proc) = target.process.as_mut() {
            proc.check_alive()?;
        }
        let r = r?;
        print!("{}", render_run(&r));
        results.push(r);
    }
    if let Some(path) = &t.json {
        write_json(path, &results)?;
    }
    Ok(results.iter().all(|r| r.complete))
}

fn write_json(path: &PathBuf, results: &[RunResult]) -> Result<()> {
    let fail = |e: &dyn std::fmt::Display| PerfError::Output {
        path: path.clone(),
        reason: e.to_string(),
    };
    let text = serde_json::to_string_pretty(results).map_err(|e| fail(&e))?;
    std::fs::write(path, text).map_err(|e| fail(&e))
}
