//! Run results, the metrics compared across servers, and plain-text tables.

use serde::{Deserialize, Serialize};

use crate::scenarios::{Params, Scenario};

/// Round-trip latency percentiles in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// The server process over the measured phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// utime + stime spent during the phase.
    pub cpu_s: f64,
    /// CPU seconds per million counted messages.
    pub cpu_s_per_million: Option<f64>,
    pub rss_kb_before: u64,
    pub rss_kb_after: u64,
}

/// The load generator (this process: every publisher, subscriber and monitor thread) over
/// the same phase as [`ServerStats`]. On a machine where the clients share the server's
/// CPUs this bounds what any run can show: `ceiling_msgs_per_s` is the rate at which this
/// run's work (server and clients together, per message) would keep every CPU busy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadStats {
    /// utime + stime of this process during the phase.
    pub cpu_s: f64,
    /// CPU seconds per million counted messages.
    pub cpu_s_per_million: Option<f64>,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// Wall-clock seconds between the two samples.
    pub wall_s: f64,
    /// (server + load generator CPU) / wall time, when the server's CPU is known.
    pub busy_cpus: Option<f64>,
    /// `cpus` x counted messages / (server + load generator CPU), when both are known.
    pub ceiling_msgs_per_s: Option<f64>,
}

/// `conns` specifics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnsStats {
    pub conns: usize,
    pub connect_s: f64,
    pub conns_per_s: f64,
    pub rss_kb_before: Option<u64>,
    pub rss_kb_after: Option<u64>,
    pub rss_per_conn_bytes: Option<f64>,
    /// From the first publish until every connection had every message.
    pub fanout_s: f64,
}

/// `subjects` specifics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubjectsStats {
    pub subscriptions: usize,
    pub literal: usize,
    pub star: usize,
    pub full_wildcard: usize,
    pub subscribe_s: f64,
    pub subs_per_s: f64,
    pub rss_kb_subscribed: Option<u64>,
    pub avg_deliveries_per_msg: f64,
}

/// `monpoll` specifics: throughput with and without monitoring traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorStats {
    /// Mean of the runs without polling (before and after the polled one).
    pub baseline_msgs_per_s: f64,
    pub baseline_runs: Vec<f64>,
    pub polled_msgs_per_s: f64,
    /// polled / baseline.
    pub ratio: f64,
    /// Successful monitoring requests during the polled run.
    pub polls: u64,
    pub poll_errors: u64,
    pub poll_p50_ms: f64,
    pub poll_max_ms: f64,
    /// Size of the last `/connz?subs=1` answer.
    pub connz_bytes: usize,
    pub idle_conns: usize,
}

/// `perms` and `import` specifics: the measured configuration against its baseline, both on
/// the same server in the same run (baseline, measured, baseline; the result's top-level
/// numbers are the measured run's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairStats {
    /// The baseline configuration.
    pub baseline: String,
    /// msgs/s (`perms`) or requests/s (`import`) of each baseline run.
    pub baseline_runs: Vec<f64>,
    /// Their mean.
    pub baseline_rate: f64,
    /// Measured rate / baseline rate.
    pub rate_ratio: f64,
    /// `import`: round-trip latency over both baseline runs (one histogram).
    pub baseline_latency_us: Option<Latency>,
    /// `import`: measured p99 / baseline p99.
    pub p99_ratio: Option<f64>,
    /// What was verified on the server before measuring.
    pub checks: Vec<String>,
}

/// One scenario run against one server.
///
/// `msgs` is the count the rates are based on: published messages for `pub` and `subjects`,
/// deliveries at the subscribers for `pubsub`/`fanout`/`fanin`/`queue`/`conns`, completed
/// round trips for `reqrep`. MB/s counts payload bytes only (1 MB = 10^6 bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: Scenario,
    pub params: Params,
    /// Everything published arrived and nothing was cut short by the time limit.
    pub complete: bool,
    pub notes: Vec<String>,
    pub elapsed_s: f64,
    pub msgs: u64,
    pub msgs_per_s: f64,
    pub mb_per_s: f64,
    pub published: u64,
    pub delivered: u64,
    pub expected: u64,
    pub latency_us: Option<Latency>,
    pub per_sub: Option<Vec<u64>>,
    /// Queue groups: min/max of per-member counts.
    pub balance: Option<f64>,
    pub conns: Option<ConnsStats>,
    pub subjects: Option<SubjectsStats>,
    pub server: Option<ServerStats>,
    #[serde(default)]
    pub monitor: Option<MonitorStats>,
    #[serde(default)]
    pub pair: Option<PairStats>,
    #[serde(default)]
    pub load: Option<LoadStats>,
}

/// Which direction of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    /// Informational (e.g. queue balance).
    Neither,
}

/// One named number extracted from a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: &'static str,
    pub value: f64,
    pub better: Better,
}

impl RunResult {
    /// The metrics reported and compared for this scenario, headline first.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        let mut push = |name, value: Option<f64>, better| {
            if let Some(value) = value.filter(|v| v.is_finite()) {
                m.push(Metric { name, value, better });
            }
        };
        match self.scenario {
            Scenario::Reqrep | Scenario::JsPubSync => {
                let l = self.latency_us.as_ref();
                push("p50 us", l.map(|l| l.p50), Better::Lower);
                push("p90 us", l.map(|l| l.p90), Better::Lower);
                push("p99 us", l.map(|l| l.p99), Better::Lower);
                push("p99.9 us", l.map(|l| l.p999), Better::Lower);
                push("max us", l.map(|l| l.max), Better::Lower);
                push("req/s", Some(self.msgs_per_s), Better::Higher);
            }
            Scenario::Conns => {
                let c = self.conns.as_ref();
                push("conns/s", c.map(|c| c.conns_per_s), Better::Higher);
                push("RSS/conn B", c.and_then(|c| c.rss_per_conn_bytes), Better::Lower);
                push("fanout ms", c.map(|c| c.fanout_s * 1e3), Better::Lower);
            }
            Scenario::Subjects => {
                let s = self.subjects.as_ref();
                push("msgs/s", Some(self.msgs_per_s), Better::Higher);
                push("subs/s", s.map(|s| s.subs_per_s), Better::Higher);
                push(
                    "RSS subscribed MiB",
                    s.and_then(|s| s.rss_kb_subscribed).map(|kb| kb as f64 / 1024.0),
                    Better::Lower,
                );
            }
            Scenario::Perms => {
                let s = self.pair.as_ref();
                push("msgs/s perms", Some(self.msgs_per_s), Better::Higher);
                push("msgs/s plain", s.map(|s| s.baseline_rate), Better::Higher);
                push("perms/plain", s.map(|s| s.rate_ratio), Better::Higher);
            }
            Scenario::Import => {
                let l = self.latency_us.as_ref();
                let s = self.pair.as_ref();
                let b = s.and_then(|s| s.baseline_latency_us.as_ref());
                push("p99 us import", l.map(|l| l.p99), Better::Lower);
                push("p99 us same-acct", b.map(|b| b.p99), Better::Lower);
                push("p99 import/same", s.and_then(|s| s.p99_ratio), Better::Lower);
                push("p50 us import", l.map(|l| l.p50), Better::Lower);
                push("p50 us same-acct", b.map(|b| b.p50), Better::Lower);
                push("p90 us import", l.map(|l| l.p90), Better::Lower);
                push("p90 us same-acct", b.map(|b| b.p90), Better::Lower);
                push("req/s import", Some(self.msgs_per_s), Better::Higher);
                push("req/s same-acct", s.map(|s| s.baseline_rate), Better::Higher);
                push("req/s import/same", s.map(|s| s.rate_ratio), Better::Higher);
            }
            Scenario::Sysevents => {
                let s = self.pair.as_ref();
                push("msgs/s watched", Some(self.msgs_per_s), Better::Higher);
                push("msgs/s quiet", s.map(|s| s.baseline_rate), Better::Higher);
                push("watched/quiet", s.map(|s| s.rate_ratio), Better::Higher);
            }
            Scenario::Monpoll => {
                let s = self.monitor.as_ref();
                push("msgs/s polled", Some(self.msgs_per_s), Better::Higher);
                push("msgs/s unpolled", s.map(|s| s.baseline_msgs_per_s), Better::Higher);
                push("polled/unpolled", s.map(|s| s.ratio), Better::Higher);
                push("poll p50 ms", s.map(|s| s.poll_p50_ms), Better::Lower);
                push("poll max ms", s.map(|s| s.poll_max_ms), Better::Lower);
            }
            _ => {
                push("msgs/s", Some(self.msgs_per_s), Better::Higher);
                push("MB/s", Some(self.mb_per_s), Better::Higher);
            }
        }
        if self.scenario == Scenario::Queue {
            push("balance", self.balance, Better::Neither);
        }
        let s = self.server.as_ref();
        push("CPU s/M msgs", s.and_then(|s| s.cpu_s_per_million), Better::Lower);
        push("RSS MiB", s.map(|s| s.rss_kb_after as f64 / 1024.0), Better::Lower);
        m
    }
}

/// Formats a number with 3–4 significant digits and k/M suffixes for big values.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 1e7 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e5 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A plain-text table: the first `left` columns left-aligned, the others right-aligned.
pub fn table(header: &[&str], left: usize, rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, c) in cells.enumerate() {
            let pad = width[i].saturating_sub(c.chars().count());
            if i < left {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    out.push_str(&line(
        &mut width
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    ));
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// A human summary of one run.
pub fn render_run(r: &RunResult) -> String {
    let p = &r.params;
    let mut out = format!(
        "{}: size={}B msgs={} pubs={} subs={}{}\n",
        r.scenario.name(),
        p.size,
        p.msgs,
        p.pubs,
        p.subs,
        match r.scenario {
            Scenario::Subjects => format!(" subjects={} pool={}", p.subjects, p.pool),
            Scenario::Conns | Scenario::Monpoll => format!(" conns={}", p.conns),
            s if s.jetstream() => crate::scenarios::js::describe(p),
            _ => String::new(),
        }
    );
    out.push_str(&format!(
        "  published {} delivered {} (expected {}) in {:.3}s{}\n",
        r.published,
        r.delivered,
        r.expected,
        r.elapsed_s,
        if r.complete { "" } else { "  [INCOMPLETE]" }
    ));
    let rows: Vec<Vec<String>> = r
        .metrics()
        .iter()
        .map(|m| vec![m.name.to_string(), fmt_num(m.value)])
        .collect();
    for l in table(&["metric", "value"], 1, &rows).lines() {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    if let Some(per) = &r.per_sub {
        out.push_str(&format!("  per subscriber: {per:?}\n"));
    }
    if let Some(c) = &r.conns {
        out.push_str(&format!(
            "  {} connections in {:.3}s; server RSS {} -> {} KiB\n",
            c.conns,
            c.connect_s,
            c.rss_kb_before.map_or("-".into(), |v| v.to_string()),
            c.rss_kb_after.map_or("-".into(), |v| v.to_string())
        ));
    }
    if let Some(s) = &r.subjects {
        out.push_str(&format!(
            "  {} subscriptions ({} literal, {} with *, {} with >) in {:.3}s; {:.2} deliveries/msg\n",
            s.subscriptions, s.literal, s.star, s.full_wildcard, s.subscribe_s, s.avg_deliveries_per_msg
        ));
    }
    if let Some(m) = &r.monitor {
        out.push_str(&format!(
            "  {} idle connections; {} monitoring requests ({} failed), /connz?subs=1 {} bytes; unpolled runs {:?}\n",
            m.idle_conns, m.polls, m.poll_errors, m.connz_bytes, m.baseline_runs
        ));
    }
    if let Some(pair) = &r.pair {
        let rates: Vec<String> = pair.baseline_runs.iter().map(|v| fmt_num(*v)).collect();
        out.push_str(&format!(
            "  baseline ({}) runs: [{}]/s; measured/baseline {:.3}{}\n",
            pair.baseline,
            rates.join(", "),
            pair.rate_ratio,
            pair.p99_ratio.map_or(String::new(), |p| format!(", p99 {p:.3}"))
        ));
        for c in &pair.checks {
            out.push_str(&format!("  checked: {c}\n"));
        }
    }
    if let Some(s) = &r.server {
        out.push_str(&format!(
            "  server CPU {:.3}s, RSS {} -> {} KiB\n",
            s.cpu_s, s.rss_kb_before, s.rss_kb_after
        ));
    }
    if let Some(l) = &r.load {
        out.push_str(&format!("  load generator CPU {:.3}s", l.cpu_s));
        if let (Some(busy), Some(ceiling)) = (l.busy_cpus, l.ceiling_msgs_per_s) {
            out.push_str(&format!(
                "; CPUs busy {busy:.2} of {}; every CPU busy at {} msgs/s",
                l.cpus,
                fmt_num(ceiling)
            ));
        }
        out.push('\n');
    }
    for n in &r.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(fmt_num(12_345_678.0), "12.35M");
        assert_eq!(fmt_num(123_456.0), "123k");
        assert_eq!(fmt_num(1234.4), "1234");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(1.234), "1.23");
        assert_eq!(fmt_num(0.1234), "0.123");
    }

    #[test]
    fn table_alignment() {
        let t = table(&["a", "bb"], 1, &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a    bb\n---  --\nxyz   1\n");
    }
}
