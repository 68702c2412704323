//! Command-line interface (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::scenarios::{ParamArgs, Scenario};

/// Load generator for NATS servers, and side-by-side comparison of rnats with nats-server.
///
/// Loopback targets only. Every run is bounded by --duration (plus a few seconds of drain).
#[derive(Debug, Parser)]
#[command(name = "rnats-perf", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// P publishers, no subscribers (msgs/s, MB/s).
    Pub(RunArgs),
    /// P publishers → S subscribers on one subject; throughput at the subscribers.
    Pubsub(RunArgs),
    /// 1 publisher → N subscribers (N = --subs, default 8).
    Fanout(RunArgs),
    /// N publishers → 1 subscriber (N = --pubs, default 8).
    Fanin(RunArgs),
    /// 1 publisher → K queue subscribers (K = --subs, default 4): throughput and balance.
    Queue(RunArgs),
    /// N publisher → subscriber pairs (N = --pubs, default 2), each pair on its own subject;
    /// delivered msgs/s of all pairs. Shows how a server scales with cores.
    Pairs(RunArgs),
    /// Request/reply round-trip latency (HDR histogram: p50, p90, p99, p99.9, max).
    Reqrep(RunArgs),
    /// K idle connections (K = --conns, default 1000) with a subscription each: connect time,
    /// server RSS per connection, then wildcard fan-out to all of them.
    Conns(RunArgs),
    /// 100,000 distinct subscriptions (literal, `*`, `>`), then publishing to random subjects.
    Subjects(RunArgs),
    /// `pubsub` with K idle connections (--conns), unpolled, then with `/connz?subs=1` and
    /// `/metrics` requested every --poll-ms on --monitor, then unpolled again.
    Monpoll(RunArgs),
    /// Connections opened and closed per second (--pubs threads, --msgs connections);
    /// full TLS handshakes with --transport tls.
    Handshakes(RunArgs),
    /// `pubsub` on `foo.bench` as a user with publish and subscribe permissions (allow `foo.>`,
    /// deny `foo.secret`), between two runs as a plain user, on the lab's auth config.
    Perms(RunArgs),
    /// Request/reply through a service import (requesters in account B, responders in A),
    /// between two same-account runs, on the lab's auth config.
    Import(RunArgs),
    /// `pubsub` on `foo.bench` under 1,000 connects/s, nobody listening to the system account,
    /// then a `$SYS.>` listener, then nobody again, on the lab's auth config.
    Sysevents(RunArgs),
    /// JetStream: publishes with acks into --streams file streams (one publisher each by
    /// default), --inflight acks outstanding per publisher; acked msgs/s.
    JsPubAsync(RunArgs),
    /// JetStream: one publish at a time into a file stream; PubAck latency (p50, p99, ...).
    JsPubSync(RunArgs),
    /// JetStream: a pre-filled stream through a durable pull consumer (batches of --fetch,
    /// explicit acks); consumed msgs/s.
    JsPull(RunArgs),
    /// JetStream: a pre-filled stream through a durable push consumer (explicit acks).
    JsPush(RunArgs),
    /// JetStream KV: puts (publishes with acks to `$KV.b.<key>`, --keys keys) per second.
    KvPut(RunArgs),
    /// JetStream KV: direct gets (`$JS.API.DIRECT.GET.KV_b.$KV.b.<key>`) per second.
    KvGet(RunArgs),
    /// JetStream: a file stream filled with --msgs, then a mirror of it; catch-up msgs/s until
    /// the mirror holds them all.
    JsMirror(RunArgs),
    /// JetStream: counter increments (`Nats-Incr: 1`) over --keys subjects of an
    /// `allow_msg_counter` stream, --inflight acks outstanding; acked increments/s.
    JsCounter(RunArgs),
    /// Every scenario (or --scenarios) one after the other against one target.
    All(AllArgs),
    /// Start two servers (A = rnats, B = nats-server by default) and compare them scenario by
    /// scenario, alternating A B A B over several rounds; writes JSON and SVG to --out.
    Compare(CompareArgs),
    /// `compare` of the auth scenarios (`perms`, `import`) at every payload size of --sizes,
    /// then a check of their targets (issue 8).
    CompareAuth(CompareAuthArgs),
    /// Write the server config file of `perms` and `import` (to FILE, or stdout), for a server
    /// started by hand; servers the lab starts get it automatically.
    AuthConfig(AuthConfigArgs),
}

/// Which server to load.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Address of a running server (host:port or nats://host:port; loopback only).
    #[arg(long, short = 's', default_value = "127.0.0.1:4222")]
    pub url: String,
    /// PID of that server, to report its CPU and RSS from /proc.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Start this server binary on a free loopback port instead of using --url.
    #[arg(long, value_name = "PATH")]
    pub server: Option<PathBuf>,
    /// Extra arguments for --server, as one space-separated string (e.g. "--shards 1").
    #[arg(long, allow_hyphen_values = true, value_name = "ARGS")]
    pub server_args: Option<String>,
    /// Seconds to wait for a server's greeting before declaring it is not NATS.
    #[arg(long, default_value_t = 2.0)]
    pub handshake_timeout: f64,
    /// Also write the result(s) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Arguments of a single-scenario command.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub params: ParamArgs,
}

/// Arguments of `all`.
#[derive(Debug, Clone, Args)]
pub struct AllArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Scenarios to run (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,
    /// Multiply every scenario's default message count (e.g. 0.1 for a quick run).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

/// Arguments of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sides: SidesArgs,
    /// Scenarios to compare (comma-separated; default: all but monpoll, perms and import).
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,
}

/// Arguments of `compare-auth`.
#[derive(Debug, Clone, Args)]
pub struct CompareAuthArgs {
    #[command(flatten)]
    pub sides: SidesArgs,
    /// Scenarios to compare (comma-separated; default: perms,import).
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,
    /// Payload sizes: every scenario runs at each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "16,1024")]
    pub sizes: Vec<usize>,
}

/// Arguments of `auth-config`.
#[derive(Debug, Clone, Args)]
pub struct AuthConfigArgs {
    /// Where to write the file (default: stdout).
    pub file: Option<PathBuf>,
}

/// The two servers and the rounds, shared by `compare` and `compare-auth`.
#[derive(Debug, Clone, Args)]
pub struct SidesArgs {
    /// Server A (default: the rnats release binary in $CARGO_TARGET_DIR or target/).
    #[arg(long, value_name = "PATH")]
    pub a: Option<PathBuf>,
    /// Server B (default: the reference nats-server from tools/reference-server, or
    /// $NATS_REFERENCE_SERVER).
    #[arg(long, value_name = "PATH")]
    pub b: Option<PathBuf>,
    /// Extra arguments for A (one space-separated string).
    #[arg(long, allow_hyphen_values = true, value_name = "ARGS")]
    pub a_args: Option<String>,
    /// Extra arguments for B (one space-separated string).
    #[arg(long, allow_hyphen_values = true, value_name = "ARGS")]
    pub b_args: Option<String>,
    /// Display name of A.
    #[arg(long, default_value = "rnats")]
    pub a_name: String,
    /// Display name of B.
    #[arg(long, default_value = "nats-server")]
    pub b_name: String,
    /// Rounds (each runs A then B on fresh servers).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Multiply every scenario's default message count (e.g. 0.1 for a quick run).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Folder for compare.json and compare.svg (default: perf/out/, compare-auth: perf/out/auth/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seconds to wait for a server's greeting.
    #[arg(long, default_value_t = 2.0)]
    pub handshake_timeout: f64,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Splits an `--*-args` string on whitespace.
pub fn split_args(s: Option<&str>) -> Vec<String> {
    s.map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_compare() {
        let cli = Cli::try_parse_from([
            "rnats-perf",
            "compare",
            "--a",
            "/x/rnats",
            "--a-args",
            "--shards 1 --reactor mio",
            "--scenarios",
            "pub,reqrep",
            "--rounds",
            "2",
            "--scale",
            "0.1",
        ])
        .unwrap();
        let Cmd::Compare(c) = cli.command else {
            panic!("not compare")
        };
        assert_eq!(c.scenarios, vec![Scenario::Pub, Scenario::Reqrep]);
        assert_eq!(
            split_args(c.sides.a_args.as_deref()),
            ["--shards", "1", "--reactor", "mio"]
        );
    }

    #[test]
    fn parses_compare_auth() {
        let cli = Cli::try_parse_from(["rnats-perf", "compare-auth", "--rounds", "1", "--scale", "0.01"]).unwrap();
        let Cmd::CompareAuth(c) = cli.command else {
            panic!("not compare-auth")
        };
        assert_eq!(c.sizes, [16, 1024]);
        assert!(c.scenarios.is_empty());
        assert_eq!(c.sides.rounds, 1);
        let cli =
            Cli::try_parse_from(["rnats-perf", "compare-auth", "--sizes", "64", "--scenarios", "import"]).unwrap();
        let Cmd::CompareAuth(c) = cli.command else {
            panic!("not compare-auth")
        };
        assert_eq!((c.sizes, c.scenarios), (vec![64], vec![Scenario::Import]));
    }
}
