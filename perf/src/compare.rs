//! `compare`: two servers (A = rnats, B = the reference nats-server by default), each scenario
//! run alternately A B A B … over several rounds, each run on a freshly started server on a
//! free loopback port. Reports the median of every metric per side and the ratio A/B, and
//! writes `compare.json` and `compare.svg` to the output folder. Scenarios on the lab's auth
//! configuration (`perms`, `import`) get a freshly written config file per server (`-c`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{MultiProgress, ProgressBar};
use serde::{Deserialize, Serialize};

use crate::authlab::ConfigDir;
use crate::chart;
use crate::error::{PerfError, Result};
use crate::progress;
use crate::report::{fmt_num, table, Better, RunResult};
use crate::scenarios::js::api::StoreDir;
use crate::scenarios::{self, Ctx, ParamArgs, Params, Scenario};
use crate::server::Target;
use crate::stats::{median, ratio, spread};

/// One side of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    pub name: String,
    pub bin: PathBuf,
    pub args: Vec<String>,
}

/// Medians of one metric on both sides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricSummary {
    pub name: String,
    pub better: Better,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// a / b
    pub ratio: Option<f64>,
    /// (max - min) / median over the rounds.
    pub a_spread: Option<f64>,
    pub b_spread: Option<f64>,
    pub a_values: Vec<f64>,
    pub b_values: Vec<f64>,
}

impl MetricSummary {
    /// How much better A is than B, as a factor (>1: A better), whatever the metric's direction.
    pub fn advantage(&self) -> Option<f64> {
        let r = self.ratio?;
        match self.better {
            Better::Higher => Some(r),
            Better::Lower => (r > 0.0).then(|| 1.0 / r),
            Better::Neither => None,
        }
    }
}

/// Everything about one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioSummary {
    /// How the table and chart name it (the scenario's name, plus the size in `compare-auth`).
    #[serde(default)]
    pub label: String,
    pub scenario: Scenario,
    pub params: Params,
    pub metrics: Vec<MetricSummary>,
    pub a_runs: Vec<RunResult>,
    pub b_runs: Vec<RunResult>,
    pub a_errors: Vec<String>,
    pub b_errors: Vec<String>,
}

impl ScenarioSummary {
    /// The label, or the scenario's name for reports written before labels existed.
    pub fn display_name(&self) -> &str {
        if self.label.is_empty() {
            self.scenario.name()
        } else {
            &self.label
        }
    }
}

/// The whole comparison, as written to JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareReport {
    pub a: Side,
    pub b: Side,
    pub rounds: usize,
    pub unix_time: u64,
    pub scenarios: Vec<ScenarioSummary>,
}

/// One entry of the comparison: a scenario with its resolved parameters.
#[derive(Debug, Clone)]
pub struct PlanItem {
    pub label: String,
    pub scenario: Scenario,
    pub params: Params,
}

/// Every scenario with `args` over its defaults and its message count scaled (labels = names).
pub fn plan(scenarios: &[Scenario], args: &ParamArgs, scale: f64) -> Result<Vec<PlanItem>> {
    check_scale(scale)?;
    scenarios
        .iter()
        .map(|&s| {
            Ok(PlanItem {
                label: s.name().to_string(),
                scenario: s,
                params: scaled(s, args, scale)?,
            })
        })
        .collect()
}

/// Fails unless `scale` is in (0, 100].
pub fn check_scale(scale: f64) -> Result<()> {
    if scale > 0.0 && scale <= 100.0 {
        Ok(())
    } else {
        Err(PerfError::Param("--scale must be in (0, 100]".into()))
    }
}

/// Options of `compare` (see the CLI).
pub struct CompareOpts {
    pub a: Side,
    pub b: Side,
    pub rounds: usize,
    pub plan: Vec<PlanItem>,
    pub out: PathBuf,
    pub quiet: bool,
    pub handshake_timeout: Duration,
}

/// Runs the comparison, prints the table and writes JSON and SVG.
pub fn run(opts: &CompareOpts) -> Result<CompareReport> {
    if opts.rounds == 0 || opts.rounds > 100 {
        return Err(PerfError::Param("--rounds must be in 1..=100".into()));
    }
    let plan = &opts.plan;
    crate::proc::raise_fd_limit();
    let multi = MultiProgress::new();
    if opts.quiet {
        multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let overall = multi.add(progress::overall((plan.len() * opts.rounds * 2) as u64));
    let mut scenarios = Vec::new();
    for item in plan {
        let (scenario, params) = (item.scenario, &item.params);
        let mut runs: [Vec<RunResult>; 2] = [Vec::new(), Vec::new()];
        let mut errors: [Vec<String>; 2] = [Vec::new(), Vec::new()];
        for round in 0..opts.rounds {
            for (i, side) in [&opts.a, &opts.b].into_iter().enumerate() {
                overall.set_message(format!(
                    "{} round {}/{} on {}",
                    item.label,
                    round + 1,
                    opts.rounds,
                    side.name
                ));
                let bar = multi.add(progress::run_bar(opts.quiet));
                bar.set_prefix(format!("{} on {}", item.label, side.name));
                match run_once(scenario, params, side, &bar, opts.handshake_timeout) {
                    Ok(r) => runs[i].push(r),
                    Err(e) => {
                        let _ = multi.println(format!("{} on {}: {e}", item.label, side.name));
                        errors[i].push(e.to_string());
                    }
                }
                bar.finish_and_clear();
                multi.remove(&bar);
                overall.inc(1);
            }
        }
        let [a_runs, b_runs] = runs;
        let [a_errors, b_errors] = errors;
        let metrics = summarize(&a_runs, &b_runs);
        scenarios.push(ScenarioSummary {
            label: item.label.clone(),
            scenario,
            params: params.clone(),
            metrics,
            a_runs,
            b_runs,
            a_errors,
            b_errors,
        });
    }
    overall.finish_and_clear();
    let unix_time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let report = CompareReport {
        a: opts.a.clone(),
        b: opts.b.clone(),
        rounds: opts.rounds,
        unix_time,
        scenarios,
    };
    println!("{}", render(&report));
    write_outputs(&report, &opts.out)?;
    Ok(report)
}

/// Per-scenario parameters with the message count scaled.
/// The scenario's parameters with its default message count multiplied by `scale`
/// (unless `--msgs` was given).
pub(crate) fn scaled(s: Scenario, args: &ParamArgs, scale: f64) -> Result<Params> {
    let mut p = Params::resolve(s, args)?;
    if args.msgs.is_none() {
        p.msgs = ((p.msgs as f64 * scale).round() as u64).max(1);
    }
    Ok(p)
}

fn run_once(
    scenario: Scenario,
    params: &Params,
    side: &Side,
    bar: &ProgressBar,
    timeout: Duration,
) -> Result<RunResult> {
    // The config folder lives until the server is stopped.
    let config = scenario.auth_config().then(ConfigDir::write).transpose()?;
    let store = scenario.jetstream().then(StoreDir::create).transpose()?;
    let mut args = side.args.clone();
    if let Some(c) = &config {
        args.extend(c.server_args()?);
    }
    if let Some(d) = &store {
        args.extend(d.server_args()?);
    }
    let mut target = Target::start(&side.bin, &args, scenario.login().as_ref())?;
    let ctx = Ctx {
        addr: target.addr,
        pid: target.pid,
        bar,
        handshake_timeout: timeout,
    };
    let result = scenarios::run(scenario, params, &ctx);
    if let Some(p) = target.process.as_mut() {
        // A crash during the run matters more than whatever error the client saw.
        if let Some(died) = p.stop() {
            return Err(PerfError::ServerProcess {
                bin: side.bin.clone(),
                reason: died,
            });
        }
    }
    result
}

/// Medians and ratios for every metric either side reported.
pub fn summarize(a: &[RunResult], b: &[RunResult]) -> Vec<MetricSummary> {
    let mut names: Vec<(&'static str, Better)> = Vec::new();
    for r in a.iter().chain(b) {
        for m in r.metrics() {
            if !names.iter().any(|(n, _)| *n == m.name) {
                names.push((m.name, m.better));
            }
        }
    }
    let values = |runs: &[RunResult], name: &str| -> Vec<f64> {
        runs.iter()
            .filter_map(|r| r.metrics().into_iter().find(|m| m.name == name).map(|m| m.value))
            .collect()
    };
    names
        .into_iter()
        .map(|(name, better)| {
            let (av, bv) = (values(a, name), values(b, name));
            let (am, bm) = (median(&av), median(&bv));
            MetricSummary {
                name: name.to_string(),
                better,
                a: am,
                b: bm,
                ratio: ratio(am, bm),
                a_spread: spread(&av),
                b_spread: spread(&bv),
                a_values: av,
                b_values: bv,
            }
        })
        .collect()
}

/// The comparison table.
pub fn render(report: &CompareReport) -> String {
    let (a, b) = (&report.a.name, &report.b.name);
    let mut rows = Vec::new();
    for s in &report.scenarios {
        for (i, m) in s.metrics.iter().enumerate() {
            let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0}%", v * 100.0));
            let verdict = match m.advantage() {
                Some(adv) if adv > 1.03 => a.clone(),
                Some(adv) if adv < 1.0 / 1.03 => b.clone(),
                Some(_) => "~".into(),
                None => String::new(),
            };
            rows.push(vec![
                if i == 0 {
                    s.display_name().to_string()
                } else {
                    String::new()
                },
                m.name.clone(),
                m.a.map_or("-".into(), fmt_num),
                pct(m.a_spread),
                m.b.map_or("-".into(), fmt_num),
                pct(m.b_spread),
                m.ratio.map_or("-".into(), |r| format!("{r:.2}")),
                verdict,
            ]);
        }
        let incomplete = |runs: &[RunResult]| runs.iter().filter(|r| !r.complete).count();
        for (side, errs, inc) in [
            (a, &s.a_errors, incomplete(&s.a_runs)),
            (b, &s.b_errors, incomplete(&s.b_runs)),
        ] {
            if !errs.is_empty() || inc > 0 {
                let mut note = format!("{side}: {} failed, {inc} incomplete", errs.len());
                if let Some(e) = errs.first() {
                    note.push_str(&format!(" (first error: {e})"));
                }
                rows.push(vec![String::new(), "!".into(), note]);
            }
        }
    }
    let header_a = format!("{a} (A)");
    let header_b = format!("{b} (B)");
    let header = [
        "scenario",
        "metric",
        header_a.as_str(),
        "±",
        header_b.as_str(),
        "±",
        "A/B",
        "better",
    ];
    let mut out = format!(
        "medians of {} rounds, alternating A B; ± = (max-min)/median\n{}",
        report.rounds,
        table(&header, 2, &rows)
    );
    out.push_str("parameters:\n");
    let width = report
        .scenarios
        .iter()
        .map(|s| s.display_name().chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    for s in &report.scenarios {
        let p = &s.params;
        out.push_str(&format!(
            "  {:<width$} size={} msgs={} pubs={} subs={}{}\n",
            s.display_name(),
            p.size,
            p.msgs,
            p.pubs,
            p.subs,
            match s.scenario {
                Scenario::Subjects => format!(" subjects={} pool={}", p.subjects, p.pool),
                Scenario::Conns => format!(" conns={}", p.conns),
                s if s.jetstream() => scenarios::js::describe(p),
                _ => String::new(),
            }
        ));
    }
    out.push_str(&format!(
        "A = {} {}\nB = {} {}\n",
        report.a.bin.display(),
        report.a.args.join(" "),
        report.b.bin.display(),
        report.b.args.join(" ")
    ));
    out
}

fn write_outputs(report: &CompareReport, out: &Path) -> Result<()> {
    let fail = |path: &Path, e: &dyn std::fmt::Display| PerfError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(out).map_err(|e| fail(out, &e))?;
    let json_path = out.join("compare.json");
    let json = serde_json::to_string_pretty(report).map_err(|e| fail(&json_path, &e))?;
    std::fs::write(&json_path, json).map_err(|e| fail(&json_path, &e))?;
    let svg_path = out.join("compare.svg");
    chart::draw(report, &svg_path).map_err(|e| fail(&svg_path, &e))?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}

/// The rnats release binary: `$CARGO_TARGET_DIR/release/rnats` (at run time, then at build
/// time), else `<workspace>/target/release/rnats`.
pub fn default_rnats() -> Result<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("release/rnats"));
    }
    if let Some(dir) = option_env!("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("release/rnats"));
    }
    candidates.push(workspace_dir().join("target/release/rnats"));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| PerfError::ServerProcess {
            bin: candidates[0].clone(),
            reason: format!(
                "rnats release binary not found (looked at {}); run `cargo build --release -p rnats` or pass --a",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// The reference nats-server: `$NATS_REFERENCE_SERVER`, else what the repository's
/// `tools/reference-server` script prints (it downloads the binary on first use).
pub fn default_reference() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_REFERENCE_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let scripts = [workspace_dir().join("tools/reference-server")];
    let script = scripts
        .iter()
        .find(|p| p.is_file())
        .ok_or_else(|| PerfError::ServerProcess {
            bin: scripts[0].clone(),
            reason: "reference-server script not found; set NATS_REFERENCE_SERVER or pass --b".into(),
        })?;
    let out = Command::new(script).output().map_err(|e| PerfError::ServerProcess {
        bin: script.clone(),
        reason: format!("cannot run: {e}"),
    })?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err(PerfError::ServerProcess {
            bin: script.clone(),
            reason: format!(
                "failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(PathBuf::from(path))
}

/// The workspace root (this crate's parent folder).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ServerStats;

    fn result(msgs_per_s: f64, cpu: f64) -> RunResult {
        let p = Params::resolve(
            Scenario::Pub,
            &ParamArgs {
                duration: 1.0,
                batch: 1,
                window: 1,
                subjects: 1,
                conns: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let mut r = scenarios::base_result(Scenario::Pub, &p);
        r.msgs_per_s = msgs_per_s;
        r.mb_per_s = msgs_per_s / 1e6;
        r.server = Some(ServerStats {
            cpu_s: 1.0,
            cpu_s_per_million: Some(cpu),
            rss_kb_before: 1,
            rss_kb_after: 2048,
        });
        r
    }

    #[test]
    fn medians_and_ratios() {
        let a = [result(100.0, 2.0), result(300.0, 1.0), result(200.0, 3.0)];
        let b = [result(100.0, 4.0), result(50.0, 4.0)];
        let m = summarize(&a, &b);
        let tput = m.iter().find(|m| m.name == "msgs/s").unwrap();
        assert_eq!(tput.a, Some(200.0));
        assert_eq!(tput.b, Some(75.0));
        assert_eq!(tput.ratio, Some(200.0 / 75.0));
        assert_eq!(tput.advantage(), tput.ratio);
        let cpu = m.iter().find(|m| m.name == "CPU s/M msgs").unwrap();
        assert_eq!(cpu.ratio, Some(0.5));
        assert_eq!(cpu.advantage(), Some(2.0), "lower CPU is better");
        let text = render(&CompareReport {
            a: Side {
                name: "A".into(),
                bin: "a".into(),
                args: vec![],
            },
            b: Side {
                name: "B".into(),
                bin: "b".into(),
                args: vec![],
            },
            rounds: 3,
            unix_time: 0,
            scenarios: vec![ScenarioSummary {
                label: "pub".into(),
                scenario: Scenario::Pub,
                params: a[0].params.clone(),
                metrics: m,
                a_runs: a.to_vec(),
                b_runs: b.to_vec(),
                a_errors: vec![],
                b_errors: vec!["boom".into()],
            }],
        });
        assert!(text.contains("2.67"), "{text}");
        assert!(text.contains("B: 1 failed"), "{text}");
    }
}
