//! `compare-auth`: the auth scenarios (`perms`, `import`) compared like `compare` (A B A B on
//! fresh servers, each with the lab's auth config), every scenario at every payload size of
//! `--sizes`, followed by the targets of issue 8 checked on the medians:
//!
//! | target | metric |
//! |---|---|
//! | permissions cost A at most 5 % | A's median `perms/plain` ≥ 0.95 |
//! | A keeps its lead with permissions | `msgs/s perms` A/B > 1 |
//! | a service import costs A at most 10 % of p99 | A's median `p99 import/same` ≤ 1.10 |

use crate::compare::{check_scale, scaled, CompareReport, PlanItem};
use crate::error::{PerfError, Result};
use crate::report::{fmt_num, table};
use crate::scenarios::{ParamArgs, Scenario};

/// The default scenarios.
pub const SCENARIOS: [Scenario; 2] = [Scenario::Perms, Scenario::Import];

/// `16B`, `1KiB`, `1500B`.
pub fn size_label(size: usize) -> String {
    if size >= 1024 && size % 1024 == 0 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// Every scenario at every size, labelled `<scenario> <size>`.
pub fn plan(scenarios: &[Scenario], sizes: &[usize], args: &ParamArgs, scale: f64) -> Result<Vec<PlanItem>> {
    check_scale(scale)?;
    if args.size.is_some() {
        return Err(PerfError::Param("compare-auth takes --sizes, not --size".into()));
    }
    if sizes.is_empty() {
        return Err(PerfError::Param("--sizes needs at least one size".into()));
    }
    let mut plan = Vec::new();
    for &scenario in scenarios {
        for &size in sizes {
            let args = ParamArgs {
                size: Some(size),
                ..args.clone()
            };
            plan.push(PlanItem {
                label: format!("{} {}", scenario.name(), size_label(size)),
                scenario,
                params: scaled(scenario, &args, scale)?,
            });
        }
    }
    Ok(plan)
}

/// One target checked on one scenario entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetCheck {
    pub target: String,
    pub label: String,
    /// The value the goal applies to.
    pub value: Option<f64>,
    /// The same metric on B, for context (`None` for A/B ratios).
    pub b_value: Option<f64>,
    pub goal: &'static str,
    /// `None` when the value is missing (the runs failed).
    pub met: Option<bool>,
}

/// The targets for every `perms` and `import` entry of the report.
pub fn targets(report: &CompareReport) -> Vec<TargetCheck> {
    let (a, b) = (&report.a.name, &report.b.name);
    let mut out = Vec::new();
    for s in &report.scenarios {
        let metric = |name: &str| s.metrics.iter().find(|m| m.name == name);
        let mut check = |target: String, name: &str, a_over_b: bool, goal: &'static str, ok: fn(f64) -> bool| {
            let m = metric(name);
            let value = m.and_then(|m| if a_over_b { m.ratio } else { m.a });
            out.push(TargetCheck {
                target,
                label: s.display_name().to_string(),
                value,
                b_value: if a_over_b { None } else { m.and_then(|m| m.b) },
                goal,
                met: value.map(ok),
            });
        };
        match s.scenario {
            Scenario::Perms => {
                check(
                    format!("{a}: perms/plain msgs/s"),
                    "perms/plain",
                    false,
                    ">= 0.95",
                    |v| v >= 0.95,
                );
                check(
                    format!("{a}/{b}: msgs/s with permissions"),
                    "msgs/s perms",
                    true,
                    "> 1",
                    |v| v > 1.0,
                );
            }
            Scenario::Import => {
                check(
                    format!("{a}: p99 import/same account"),
                    "p99 import/same",
                    false,
                    "<= 1.10",
                    |v| v <= 1.10,
                );
            }
            _ => {}
        }
    }
    out
}

/// The targets as a table.
pub fn render_targets(report: &CompareReport, checks: &[TargetCheck]) -> String {
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            vec![
                c.target.clone(),
                c.label.clone(),
                c.value.map_or("-".into(), |v| format!("{v:.3}")),
                c.b_value.map_or(String::new(), |v| format!("{v:.3}")),
                c.goal.to_string(),
                match c.met {
                    Some(true) => "met".into(),
                    Some(false) => "MISSED".into(),
                    None => "no data".into(),
                },
            ]
        })
        .collect();
    let b_col = format!("{} (context)", report.b.name);
    let mut out = String::from("targets (issue 8), on the medians above:\n");
    out.push_str(&table(
        &["target", "scenario", "value", b_col.as_str(), "goal", ""],
        2,
        &rows,
    ));
    for s in report.scenarios.iter().filter(|s| s.scenario == Scenario::Import) {
        let p99 = |name: &str| {
            s.metrics
                .iter()
                .find(|m| m.name == name)
                .map_or(("-".to_string(), "-".to_string()), |m| {
                    (m.a.map_or("-".into(), fmt_num), m.b.map_or("-".into(), fmt_num))
                })
        };
        let (ai, bi) = p99("p99 us import");
        let (asame, bsame) = p99("p99 us same-acct");
        out.push_str(&format!(
            "  {}: p99 import / same account: {} {ai} / {asame} us, {} {bi} / {bsame} us\n",
            s.display_name(),
            report.a.name,
            report.b.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{MetricSummary, ScenarioSummary, Side};
    use crate::report::Better;

    fn metric(name: &str, a: f64, b: f64) -> MetricSummary {
        MetricSummary {
            name: name.into(),
            better: Better::Higher,
            a: Some(a),
            b: Some(b),
            ratio: Some(a / b),
            a_spread: None,
            b_spread: None,
            a_values: vec![a],
            b_values: vec![b],
        }
    }

    fn args() -> ParamArgs {
        ParamArgs {
            subjects: 1,
            conns: 1,
            duration: 1.0,
            batch: 65536,
            window: 1 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn plan_runs_every_scenario_at_every_size() {
        let plan = plan(&SCENARIOS, &[16, 1024], &args(), 0.5).unwrap();
        let got: Vec<(String, usize, u64)> = plan
            .iter()
            .map(|p| (p.label.clone(), p.params.size, p.params.msgs))
            .collect();
        assert_eq!(
            got,
            [
                ("perms 16B".to_string(), 16, 1_500_000),
                ("perms 1KiB".to_string(), 1024, 1_500_000),
                ("import 16B".to_string(), 16, 10_000),
                ("import 1KiB".to_string(), 1024, 10_000),
            ]
        );
        let with_size = ParamArgs {
            size: Some(10),
            ..args()
        };
        assert!(super::plan(&SCENARIOS, &[16], &with_size, 1.0).is_err());
        assert!(super::plan(&SCENARIOS, &[], &args(), 1.0).is_err());
        assert!(super::plan(&SCENARIOS, &[16], &args(), 0.0).is_err());
    }

    #[test]
    fn targets_are_checked_on_the_medians() {
        let params = crate::scenarios::Params::resolve(Scenario::Perms, &args()).unwrap();
        let summary = |scenario, label: &str, metrics| ScenarioSummary {
            label: label.into(),
            scenario,
            params: params.clone(),
            metrics,
            a_runs: vec![],
            b_runs: vec![],
            a_errors: vec![],
            b_errors: vec![],
        };
        let side = |name: &str| Side {
            name: name.into(),
            bin: name.into(),
            args: vec![],
        };
        let report = CompareReport {
            a: side("rnats"),
            b: side("ref"),
            rounds: 3,
            unix_time: 0,
            scenarios: vec![
                summary(
                    Scenario::Perms,
                    "perms 16B",
                    vec![metric("msgs/s perms", 9e6, 4e6), metric("perms/plain", 0.97, 0.9)],
                ),
                summary(
                    Scenario::Perms,
                    "perms 1KiB",
                    vec![metric("msgs/s perms", 1e6, 2e6), metric("perms/plain", 0.93, 1.0)],
                ),
                summary(
                    Scenario::Import,
                    "import 16B",
                    vec![metric("p99 import/same", 1.2, 1.0)],
                ),
                summary(Scenario::Pub, "pub", vec![metric("msgs/s", 1.0, 1.0)]),
            ],
        };
        let checks = targets(&report);
        let met: Vec<(&str, Option<bool>)> = checks.iter().map(|c| (c.label.as_str(), c.met)).collect();
        assert_eq!(
            met,
            [
                ("perms 16B", Some(true)),
                ("perms 16B", Some(true)),
                ("perms 1KiB", Some(false)),
                ("perms 1KiB", Some(false)),
                ("import 16B", Some(false)),
            ]
        );
        assert_eq!(checks[1].value, Some(2.25), "A/B ratio");
        assert_eq!(checks[0].b_value, Some(0.9));
        let text = render_targets(&report, &checks);
        assert!(
            text.contains("MISSED") && text.contains("rnats/ref: msgs/s with permissions"),
            "{text}"
        );
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(16), "16B");
        assert_eq!(size_label(1024), "1KiB");
        assert_eq!(size_label(1500), "1500B");
    }
}
