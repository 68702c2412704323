//! The load scenarios and their parameters.
//!
//! | scenario | module | what it measures |
//! |---|---|---|
//! | `pub` | [`pubsub`] | P publishers, no subscribers |
//! | `pubsub` | [`pubsub`] | P publishers → S subscribers, throughput at the subscribers |
//! | `fanout` | [`pubsub`] | 1 publisher → N subscribers |
//! | `fanin` | [`pubsub`] | N publishers → 1 subscriber |
//! | `pairs` | [`pubsub`] | N independent publisher → subscriber pairs, each on its own subject |
//! | `queue` | [`pubsub`] | 1 publisher → K queue subscribers (throughput, balance) |
//! | `reqrep` | [`reqrep`] | request/reply round-trip latency (HDR histogram) |
//! | `conns` | [`conns`] | K idle connections with a subscription each, then a wildcard fan-out |
//! | `subjects` | [`subjects`] | 100k mixed literal/`*`/`>` subscriptions, random publishes |
//! | `monpoll` | [`monpoll`] | `pubsub` with K idle connections, with and without `/connz?subs=1` and `/metrics` polled |
//! | `perms` | [`perms`] | `pubsub` as a user with publish/subscribe permissions, against a plain user |
//! | `import` | [`import`] | request/reply through a service import, against the same account |
//! | `handshakes` | [`handshakes`] | connections opened and closed per second (full TLS handshakes with `--transport tls`) |
//! | `sysevents` | [`sysevents`] | `pubsub` under 1,000 connects/s, with and without a `$SYS.>` listener |
//! | `js-pub-async`, `js-pub-sync`, `js-pull`, `js-push`, `kv-put`, `kv-get`, `js-mirror`, `js-counter` | [`js`] | JetStream: acked publishes, publish latency, consumers, KV puts and direct gets, mirror catch-up, counter increments |
//!
//! Every scenario runs over the transport chosen with `--transport` (TCP, TLS, WebSocket,
//! WebSocket over TLS; see `crate::transport`).
//!
//! The publish/subscribe mechanics live in [`flow`]. `perms` and `import` run on the lab's
//! auth configuration ([`crate::authlab`]).

pub mod conns;
pub mod flow;
pub mod handshakes;
pub mod import;
pub mod js;
pub mod monpoll;
pub mod perms;
pub mod pubsub;
pub mod reqrep;
pub mod subjects;
pub mod sysevents;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::authlab::User;
use crate::client::Credentials;
use crate::error::{PerfError, Result};
use crate::proc::ProcSample;
use crate::report::{LoadStats, RunResult, ServerStats};

/// A load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    Pub,
    Pubsub,
    Fanout,
    Fanin,
    Queue,
    /// Not in [`Scenario::ALL`]: it measures how a server scales with cores (`--pubs` pairs).
    Pairs,
    Reqrep,
    Conns,
    Subjects,
    /// Not in [`Scenario::ALL`]: it needs the server's monitoring port.
    Monpoll,
    /// Not in [`Scenario::ALL`]: meant for `--transport tls`.
    Handshakes,
    /// Not in [`Scenario::ALL`] (nor the next one): it needs the lab's auth configuration.
    Perms,
    Import,
    /// Not in [`Scenario::ALL`]: it runs on the lab's auth configuration (its system account).
    Sysevents,
    /// The JetStream scenarios (not in [`Scenario::ALL`]: the servers need `-js`; see [`js`]).
    #[serde(rename = "js-pub-async")]
    JsPubAsync,
    #[serde(rename = "js-pub-sync")]
    JsPubSync,
    #[serde(rename = "js-pull")]
    JsPull,
    #[serde(rename = "js-push")]
    JsPush,
    #[serde(rename = "kv-put")]
    KvPut,
    #[serde(rename = "kv-get")]
    KvGet,
    #[serde(rename = "js-mirror")]
    JsMirror,
    #[serde(rename = "js-counter")]
    JsCounter,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 8] = [
        Scenario::Pub,
        Scenario::Pubsub,
        Scenario::Fanout,
        Scenario::Fanin,
        Scenario::Queue,
        Scenario::Reqrep,
        Scenario::Conns,
        Scenario::Subjects,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Pub => "pub",
            Scenario::Pubsub => "pubsub",
            Scenario::Fanout => "fanout",
            Scenario::Fanin => "fanin",
            Scenario::Queue => "queue",
            Scenario::Pairs => "pairs",
            Scenario::Reqrep => "reqrep",
            Scenario::Conns => "conns",
            Scenario::Subjects => "subjects",
            Scenario::Monpoll => "monpoll",
            Scenario::Handshakes => "handshakes",
            Scenario::Perms => "perms",
            Scenario::Import => "import",
            Scenario::Sysevents => "sysevents",
            Scenario::JsPubAsync => "js-pub-async",
            Scenario::JsPubSync => "js-pub-sync",
            Scenario::JsPull => "js-pull",
            Scenario::JsPush => "js-push",
            Scenario::KvPut => "kv-put",
            Scenario::KvGet => "kv-get",
            Scenario::JsMirror => "js-mirror",
            Scenario::JsCounter => "js-counter",
        }
    }

    /// Whether the scenario runs on the lab's auth configuration ([`crate::authlab`]): a server
    /// the lab starts gets `-c <that file>`.
    pub fn auth_config(self) -> bool {
        matches!(self, Scenario::Perms | Scenario::Import | Scenario::Sysevents)
    }

    /// Whether the scenario needs JetStream: a server the lab starts gets `-js -sd <fresh folder>`.
    pub fn jetstream(self) -> bool {
        matches!(
            self,
            Scenario::JsPubAsync
                | Scenario::JsPubSync
                | Scenario::JsPull
                | Scenario::JsPush
                | Scenario::KvPut
                | Scenario::KvGet
                | Scenario::JsMirror
                | Scenario::JsCounter
        )
    }

    /// Who to log in as to check that a server is up and read its limits (`None`: no
    /// authentication).
    pub fn login(self) -> Option<Credentials> {
        match self {
            Scenario::Perms | Scenario::Sysevents => Some(User::Plain.credentials()),
            Scenario::Import => Some(User::Local.credentials()),
            _ => None,
        }
    }

    /// Defaults: (size, msgs, pubs, subs).
    fn defaults(self) -> (usize, u64, usize, usize) {
        match self {
            Scenario::Pub => (128, 5_000_000, 1, 0),
            Scenario::Pubsub => (128, 3_000_000, 1, 1),
            Scenario::Fanout => (128, 500_000, 1, 8),
            Scenario::Fanin => (128, 3_000_000, 8, 1),
            Scenario::Queue => (128, 3_000_000, 1, 4),
            // One subscriber per publisher, whatever --subs says. Ten million: three
            // million took a third of a second at stop 42, too short to compare two runs.
            Scenario::Pairs => (128, 10_000_000, 2, 2),
            Scenario::Reqrep => (128, 20_000, 1, 1),
            Scenario::Conns => (16, 10, 1, 0),
            Scenario::Subjects => (64, 1_000_000, 1, 2),
            Scenario::Monpoll => (128, 2_000_000, 1, 1),
            Scenario::Handshakes => (16, 5_000, 2, 0),
            Scenario::Perms => (128, 3_000_000, 1, 1),
            Scenario::Import => (128, 20_000, 1, 1),
            Scenario::Sysevents => (128, 2_000_000, 1, 1),
            // js-pub-async: one publisher per stream unless --pubs says otherwise.
            Scenario::JsPubAsync => (16, 1_000_000, 0, 0),
            Scenario::JsPubSync => (16, 20_000, 1, 0),
            Scenario::JsPull | Scenario::JsPush => (16, 500_000, 1, 0),
            Scenario::KvPut | Scenario::KvGet => (16, 500_000, 1, 0),
            Scenario::JsMirror => (16, 200_000, 1, 0),
            // Increments carry no body.
            Scenario::JsCounter => (0, 200_000, 1, 0),
        }
    }

    /// The default of `--keys`.
    fn default_keys(self) -> usize {
        match self {
            Scenario::JsCounter => 100,
            _ => 10_000,
        }
    }
}

/// Overrides from the command line; `None` takes the scenario's default.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ParamArgs {
    /// Payload size in bytes.
    #[arg(long)]
    pub size: Option<usize>,
    /// Messages to publish in total (reqrep: requests; conns: wildcard publishes).
    #[arg(long)]
    pub msgs: Option<u64>,
    /// Publisher connections (reqrep: concurrent requesters).
    #[arg(long)]
    pub pubs: Option<usize>,
    /// Subscriber connections (reqrep: responders in a queue group; subjects: connections
    /// the subscriptions are spread over).
    #[arg(long)]
    pub subs: Option<usize>,
    /// Idle connections for `conns`.
    #[arg(long, default_value_t = 1000)]
    pub conns: usize,
    /// Distinct subscriptions for `subjects`.
    #[arg(long, default_value_t = 100_000)]
    pub subjects: usize,
    /// `subjects`: distinct subjects the publishers cycle through [default: 8192]. One
    /// far above a server's match cache (e.g. 200000) measures the tree walk alone.
    #[arg(long)]
    pub pool: Option<usize>,
    /// Time limit of the measured phase in seconds (publishing stops there).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Bytes per publisher write (one syscall).
    #[arg(long, default_value_t = 64 * 1024)]
    pub batch: usize,
    /// Flow-control window: how many bytes publishers may run ahead of the subscribers.
    #[arg(long, default_value_t = 16 << 20)]
    pub window: usize,
    /// `monpoll`: the server's monitoring address (host:port, loopback).
    #[arg(long)]
    pub monitor: Option<String>,
    /// `monpoll`: milliseconds between two requests of each polled endpoint.
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
    /// How clients reach the server: tcp, tls, ws (WebSocket) or wss. With a started
    /// server, the perf lab writes the configuration that turns it on.
    #[arg(long, value_enum, default_value_t = crate::transport::Transport::Tcp)]
    pub transport: crate::transport::Transport,
    /// JetStream: streams `js-pub-async` publishes into (one publisher each unless --pubs).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// JetStream: unanswered publishes (acks) or direct gets per connection.
    #[arg(long, default_value_t = 1000)]
    pub inflight: u64,
    /// `js-pull`: messages per pull request (two requests are kept outstanding).
    #[arg(long, default_value_t = 500)]
    pub fetch: usize,
    /// `kv-put`, `kv-get` (default 10,000), `js-counter` (default 100): distinct keys.
    #[arg(long)]
    pub keys: Option<usize>,
    /// JetStream: idle connections opened before any other, to shift where a server that
    /// places connections round-robin over shards (rnats) puts the scenario's connections
    /// relative to its streams (see the README).
    #[arg(long, default_value_t = 0)]
    pub pad_conns: usize,
}

/// Resolved parameters of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub size: usize,
    pub msgs: u64,
    pub pubs: usize,
    pub subs: usize,
    pub conns: usize,
    pub subjects: usize,
    /// Distinct publish subjects of `subjects`.
    pub pool: usize,
    pub duration_s: f64,
    pub batch: usize,
    pub window: usize,
    #[serde(default)]
    pub monitor: Option<String>,
    #[serde(default)]
    pub poll_ms: u64,
    #[serde(default)]
    pub transport: crate::transport::Transport,
    #[serde(default)]
    pub streams: usize,
    #[serde(default)]
    pub inflight: u64,
    #[serde(default)]
    pub fetch: usize,
    #[serde(default)]
    pub keys: usize,
    #[serde(default)]
    pub pad_conns: usize,
}

impl Params {
    /// Applies `args` over the scenario's defaults and checks the ranges.
    pub fn resolve(scenario: Scenario, args: &ParamArgs) -> Result<Params> {
        let (size, msgs, pubs, subs) = scenario.defaults();
        let p = Params {
            size: args.size.unwrap_or(size),
            msgs: args.msgs.unwrap_or(msgs),
            pubs: args.pubs.unwrap_or(if pubs == 0 { args.streams } else { pubs }),
            subs: if matches!(scenario, Scenario::Conns | Scenario::Handshakes) || scenario.jetstream() {
                0
            } else if scenario == Scenario::Pairs {
                args.pubs.unwrap_or(pubs)
            } else {
                args.subs.unwrap_or(subs)
            },
            conns: args.conns,
            subjects: args.subjects,
            pool: args.pool.unwrap_or(subjects::POOL),
            duration_s: args.duration,
            batch: args.batch,
            window: args.window,
            monitor: args.monitor.clone(),
            poll_ms: args.poll_ms,
            transport: args.transport,
            streams: args.streams,
            inflight: args.inflight,
            fetch: args.fetch,
            keys: args.keys.unwrap_or(scenario.default_keys()),
            pad_conns: args.pad_conns,
        };
        let bad = |s: &str| Err(PerfError::Param(format!("{}: {s}", scenario.name())));
        if p.msgs == 0 {
            return bad("--msgs must be at least 1");
        }
        if p.pubs == 0 || p.pubs > 1024 {
            return bad("--pubs must be in 1..=1024");
        }
        if !matches!(scenario, Scenario::Pub | Scenario::Conns | Scenario::Handshakes)
            && !scenario.jetstream()
            && (p.subs == 0 || p.subs > 1024)
        {
            return bad("--subs must be in 1..=1024");
        }
        if p.conns == 0 || p.conns > 200_000 {
            return bad("--conns must be in 1..=200000");
        }
        if p.size > 64 << 20 {
            return bad("--size is larger than any server's max_payload");
        }
        if !(p.duration_s > 0.0 && p.duration_s <= 3600.0) {
            return bad("--duration must be in (0, 3600] seconds");
        }
        if p.subjects == 0 || p.subjects > 10_000_000 {
            return bad("--subjects must be in 1..=10000000");
        }
        if p.pool == 0 || p.pool > 10_000_000 {
            return bad("--pool must be in 1..=10000000");
        }
        if p.batch == 0 || p.batch > 64 << 20 || p.window == 0 {
            return bad("--batch and --window must be positive (batch ≤ 64 MiB)");
        }
        if scenario.jetstream() {
            if p.streams == 0 || p.streams > 1000 {
                return bad("--streams must be in 1..=1000");
            }
            if p.inflight == 0 || p.inflight > 1_000_000 {
                return bad("--inflight must be in 1..=1000000");
            }
            if p.fetch == 0 || p.fetch > 100_000 {
                return bad("--fetch must be in 1..=100000");
            }
            if p.keys == 0 || p.keys > 10_000_000 {
                return bad("--keys must be in 1..=10000000");
            }
            if p.pad_conns > 1000 {
                return bad("--pad-conns must be at most 1000");
            }
        }
        Ok(p)
    }

    /// The time limit.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }

    /// A payload of `size` bytes.
    pub fn payload(&self) -> Vec<u8> {
        (0..self.size).map(|i| b'a' + (i % 26) as u8).collect()
    }

    /// The flow-control window in deliveries.
    pub fn window_msgs(&self, subject_len: usize) -> u64 {
        (self.window / frame_len(subject_len, self.size)).max(1) as u64
    }
}

/// Protocol bytes around a message's subject and payload (`PUB`/`MSG`, sid, size, CRLFs),
/// as an estimate for sizing batches and windows.
const FRAME_OVERHEAD: usize = 24;

/// Estimated wire size of one message frame.
pub fn frame_len(subject_len: usize, payload_len: usize) -> usize {
    subject_len + payload_len + FRAME_OVERHEAD
}

/// Join scoped workers that return their result with the instant they ended, moving
/// `bar` to `done` every 50 ms meanwhile. Returns the results in order and the time from
/// `t0` to the last worker's end. The end is taken in the workers: timing the joins
/// would round every run up to the polling steps (a 0.55 s run measured 0.55 or 0.60 s).
pub fn join_timed<T>(
    handles: Vec<ScopedJoinHandle<'_, (T, Instant)>>,
    bar: &ProgressBar,
    done: &AtomicU64,
    t0: Instant,
    what: &str,
) -> Result<(Vec<T>, Duration)> {
    let mut out = Vec::with_capacity(handles.len());
    let mut end = t0;
    for h in handles {
        while !h.is_finished() {
            bar.set_position(done.load(Relaxed));
            thread::sleep(Duration::from_millis(50));
        }
        let (r, at) = h.join().map_err(|_| PerfError::Worker(what.into()))?;
        end = end.max(at);
        out.push(r);
    }
    Ok((out, end.duration_since(t0)))
}

/// Publisher `i`'s share when `total` messages are split over `n` publishers.
pub fn share(total: u64, n: u64, i: usize) -> u64 {
    total / n + u64::from((i as u64) < total % n)
}

/// Where and how a scenario runs.
pub struct Ctx<'a> {
    pub addr: SocketAddr,
    pub pid: Option<u32>,
    pub bar: &'a ProgressBar,
    pub handshake_timeout: Duration,
}

/// Runs one scenario against the target.
pub fn run(scenario: Scenario, params: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    check_payload(scenario, params, ctx)?;
    match scenario {
        Scenario::Pub | Scenario::Pubsub | Scenario::Fanout | Scenario::Fanin | Scenario::Queue => {
            pubsub::run(scenario, params, ctx)
        }
        Scenario::Pairs => pubsub::run_pairs(params, ctx),
        Scenario::Reqrep => reqrep::run(params, ctx),
        Scenario::Conns => conns::run(params, ctx),
        Scenario::Subjects => subjects::run(params, ctx),
        Scenario::Monpoll => monpoll::run(params, ctx),
        Scenario::Handshakes => handshakes::run(params, ctx),
        Scenario::Perms => perms::run(params, ctx),
        Scenario::Import => import::run(params, ctx),
        Scenario::Sysevents => sysevents::run(params, ctx),
        Scenario::JsPubAsync
        | Scenario::JsPubSync
        | Scenario::JsPull
        | Scenario::JsPush
        | Scenario::KvPut
        | Scenario::KvGet
        | Scenario::JsMirror
        | Scenario::JsCounter => js::run(scenario, params, ctx),
    }
}

/// Fails early, with a clear message, when the payload exceeds the server's `max_payload`.
fn check_payload(scenario: Scenario, params: &Params, ctx: &Ctx<'_>) -> Result<()> {
    let login = scenario.login();
    let conn = crate::client::Conn::connect_as(ctx.addr, ctx.handshake_timeout, login.as_ref(), b"")?;
    match conn.max_payload() {
        Some(max) if params.size as u64 > max => Err(PerfError::Param(format!(
            "--size {} exceeds the server's max_payload {max}",
            params.size
        ))),
        _ => Ok(()),
    }
}

/// A result with the common fields filled in.
pub fn base_result(scenario: Scenario, params: &Params) -> RunResult {
    RunResult {
        scenario,
        params: params.clone(),
        complete: true,
        notes: Vec::new(),
        elapsed_s: 0.0,
        msgs: 0,
        msgs_per_s: 0.0,
        mb_per_s: 0.0,
        published: 0,
        delivered: 0,
        expected: 0,
        latency_us: None,
        per_sub: None,
        balance: None,
        conns: None,
        subjects: None,
        server: None,
        monitor: None,
        pair: None,
        load: None,
    }
}

/// Server CPU and memory over a measured phase that handled `msgs` messages.
pub fn server_stats(before: Option<ProcSample>, after: Option<ProcSample>, msgs: u64) -> Option<ServerStats> {
    let (b, a) = (before?, after?);
    let cpu_s = (a.cpu_s - b.cpu_s).max(0.0);
    Some(ServerStats {
        cpu_s,
        cpu_s_per_million: if msgs > 0 {
            Some(cpu_s * 1e6 / msgs as f64)
        } else {
            None
        },
        rss_kb_before: b.rss_kb,
        rss_kb_after: a.rss_kb,
    })
}

/// This process's CPU over a measured phase of `wall` that handled `msgs` messages, set
/// against the server's (`server`, from the same phase) and the CPUs there are.
pub fn load_stats(
    before: Option<ProcSample>,
    after: Option<ProcSample>,
    wall: Duration,
    msgs: u64,
    server: Option<&ServerStats>,
) -> Option<LoadStats> {
    let (b, a) = (before?, after?);
    let cpu_s = (a.cpu_s - b.cpu_s).max(0.0);
    let cpus = thread::available_parallelism().map_or(1, usize::from);
    let wall_s = wall.as_secs_f64();
    let both = server.map(|s| s.cpu_s + cpu_s);
    Some(LoadStats {
        cpu_s,
        cpu_s_per_million: (msgs > 0).then(|| cpu_s * 1e6 / msgs as f64),
        cpus,
        wall_s,
        busy_cpus: both.filter(|_| wall_s > 0.0).map(|c| c / wall_s),
        ceiling_msgs_per_s: both
            .filter(|&c| c > 0.0 && msgs > 0)
            .map(|c| cpus as f64 * msgs as f64 / c),
    })
}

/// Fills throughput fields from a count, a payload size and an elapsed time.
pub fn set_rate(r: &mut RunResult, msgs: u64, size: usize, elapsed: Duration) {
    let secs = elapsed.as_secs_f64().max(1e-9);
    r.msgs = msgs;
    r.elapsed_s = secs;
    r.msgs_per_s = msgs as f64 / secs;
    r.mb_per_s = (msgs as f64 * size as f64) / secs / 1e6;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let p = Params::resolve(
            Scenario::Fanout,
            &ParamArgs {
                duration: 5.0,
                ..args()
            },
        )
        .unwrap();
        assert_eq!((p.size, p.pubs, p.subs), (128, 1, 8));
        let p = Params::resolve(
            Scenario::Fanin,
            &ParamArgs {
                pubs: Some(3),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.pubs, 3);
        assert!(Params::resolve(
            Scenario::Pubsub,
            &ParamArgs {
                msgs: Some(0),
                ..args()
            }
        )
        .is_err());
        assert!(Params::resolve(
            Scenario::Queue,
            &ParamArgs {
                subs: Some(0),
                ..args()
            }
        )
        .is_err());
        assert!(Params::resolve(
            Scenario::Pub,
            &ParamArgs {
                duration: -1.0,
                ..args()
            }
        )
        .is_err());
    }

    #[test]
    fn load_stats_against_the_server() {
        let at = |cpu_s| Some(ProcSample { cpu_s, rss_kb: 1 });
        let server = server_stats(at(10.0), at(10.8), 10_000_000);
        let l = load_stats(
            at(2.0),
            at(2.4),
            Duration::from_millis(800),
            10_000_000,
            server.as_ref(),
        )
        .unwrap();
        assert!((l.cpu_s - 0.4).abs() < 1e-9);
        assert!((l.cpu_s_per_million.unwrap() - 0.04).abs() < 1e-9);
        // 1.2 CPU seconds in 0.8 s: 1.5 CPUs busy; 10 M messages per 1.2 CPU seconds.
        assert!((l.busy_cpus.unwrap() - 1.5).abs() < 1e-9);
        let per_cpu = 10_000_000.0 / 1.2;
        assert!((l.ceiling_msgs_per_s.unwrap() - l.cpus as f64 * per_cpu).abs() < 1e-3);
        // Without the server's CPU (a server not started here) only our own figures.
        let l = load_stats(at(2.0), at(2.4), Duration::from_millis(800), 0, None).unwrap();
        assert_eq!(
            (l.cpu_s_per_million, l.busy_cpus, l.ceiling_msgs_per_s),
            (None, None, None)
        );
        assert!(load_stats(None, at(1.0), Duration::ZERO, 1, None).is_none());
    }

    #[test]
    fn jetstream_defaults() {
        let p = Params::resolve(Scenario::JsPubAsync, &ParamArgs { streams: 4, ..args() }).unwrap();
        assert_eq!((p.pubs, p.subs, p.streams, p.size), (4, 0, 4, 16));
        let p = Params::resolve(
            Scenario::JsPubAsync,
            &ParamArgs {
                streams: 2,
                pubs: Some(6),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.pubs, 6);
        assert!(Scenario::KvGet.jetstream() && !Scenario::Pub.jetstream());
        assert!(Params::resolve(Scenario::JsPull, &ParamArgs { fetch: 0, ..args() }).is_err());
        let no_keys = ParamArgs { keys: None, ..args() };
        let p = Params::resolve(Scenario::JsCounter, &no_keys).unwrap();
        assert_eq!((p.keys, p.msgs, p.size), (100, 200_000, 0));
        assert_eq!(Params::resolve(Scenario::KvPut, &no_keys).unwrap().keys, 10_000);
        assert_eq!(Params::resolve(Scenario::JsMirror, &no_keys).unwrap().size, 16);
        assert!(Scenario::JsMirror.jetstream() && Scenario::JsCounter.jetstream());
    }

    fn args() -> ParamArgs {
        ParamArgs {
            streams: 1,
            inflight: 100,
            fetch: 10,
            keys: Some(10),
            subjects: 100,
            conns: 10,
            duration: 1.0,
            batch: 65536,
            window: 1 << 20,
            ..Default::default()
        }
    }
}
