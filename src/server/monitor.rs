//! The HTTP monitoring listener: `/varz`, `/healthz` and the index page, with
//! nats-server's JSON shapes (monitoring.md §1, §2, §11). Runs on its own thread; reads
//! only the statistics the shards publish.

use super::state::ServerState;
use crate::proto::gojson;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A running monitoring listener.
pub struct Monitor {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    pub addr: SocketAddr,
}

impl Monitor {
    /// Bind `addr` and serve until dropped.
    pub fn start(addr: SocketAddr, state: Arc<ServerState>) -> io::Result<Monitor> {
        let listener = shards::listener::bind_exclusive(addr, 128)?;
        listener.set_nonblocking(false)?;
        let bound = listener.local_addr()?;
        let server = tiny_http::Server::from_listener(listener, None).map_err(|e| io::Error::other(e.to_string()))?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let (srv, st) = (server.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("monitor".into()).spawn(move || {
            let stats = Mutex::new(HttpStats::default());
            while !st.load(Ordering::Relaxed) {
                match srv.recv_timeout(Duration::from_millis(200)) {
                    Ok(Some(req)) => handle(req, &state, &stats),
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
        })?;
        Ok(Monitor {
            server,
            thread: Some(thread),
            stop,
            addr: bound,
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Default)]
struct HttpStats {
    hits: BTreeMap<String, u64>,
    cpu: CpuSampler,
}

fn header(k: &str, v: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).ok()
}

fn respond(req: tiny_http::Request, status: u16, ctype: &str, body: Vec<u8>) {
    let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
    for h in [
        header("Content-Type", ctype),
        header("Access-Control-Allow-Origin", "*"),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    let _ = req.respond(resp);
}

fn handle(req: tiny_http::Request, state: &ServerState, stats: &Mutex<HttpStats>) {
    let url = req.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let callback = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("callback="))
        .map(str::to_string);
    let path = path.to_string();
    let known = matches!(path.as_str(), "/" | "/varz" | "/healthz");
    if !known {
        respond(req, 404, "text/plain; charset=utf-8", b"404 page not found\n".to_vec());
        return;
    }
    let (hits, cpu) = {
        let mut s = match stats.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        *s.hits.entry(path.clone()).or_insert(0) += 1;
        let cpu = if path == "/varz" { s.cpu.sample() } else { 0.0 };
        (s.hits.clone(), cpu)
    };
    let body = match path.as_str() {
        "/" => {
            respond(req, 200, "text/html; charset=utf-8", index_page(state).into_bytes());
            return;
        }
        "/healthz" => gojson::to_vec(&serde_json::json!({"status": "ok"})),
        _ => gojson::to_vec_pretty(&varz(state, hits, cpu)),
    };
    match callback {
        Some(cb) => {
            let mut b = format!("{cb}(").into_bytes();
            b.extend_from_slice(&body);
            b.push(b')');
            respond(req, 200, "application/javascript", b);
        }
        None => respond(req, 200, "application/json", body),
    }
}

fn index_page(state: &ServerState) -> String {
    let links = [
        "varz", "connz", "routez", "gatewayz", "leafz", "subsz", "accountz", "accstatz", "jsz", "healthz",
    ];
    let mut s = String::from("<html lang=\"en\">\n<head><title>NATS Server</title></head>\n<body>\n");
    {
        // One read guard: a second one in the same statement can wait behind a queued
        // reload writer while holding the first.
        let live = state.live();
        s.push_str(&format!(
            "<h1>rnats</h1>\n<p>Compatible with nats-server v{} (rnats v{})</p>\n",
            live.info.version, live.info.rnats_version
        ));
    }
    for l in links {
        s.push_str(&format!("<a href=./{l}>{l}</a><br/>\n"));
    }
    s.push_str("</body>\n</html>\n");
    s
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct ScStats {
    clients: u64,
    routes: u64,
    gateways: u64,
    leafs: u64,
}

#[derive(Serialize)]
struct FeatureFlags {
    js_ack_fc_v2: bool,
    js_raft_delete_range: bool,
}

#[derive(Serialize)]
struct Varz {
    server_id: String,
    server_name: String,
    version: String,
    proto: i32,
    go: String,
    host: String,
    port: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    auth_required: bool,
    max_connections: i64,
    #[serde(skip_serializing_if = "is_zero")]
    max_subscriptions: i64,
    ping_interval: u128,
    ping_max: i64,
    http_host: String,
    http_port: i64,
    http_base_path: String,
    https_port: i64,
    auth_timeout: f64,
    max_control_line: i64,
    max_payload: i64,
    max_pending: i64,
    cluster: Empty,
    gateway: Empty,
    leaf: Empty,
    mqtt: Empty,
    websocket: Empty,
    jetstream: Empty,
    tls_timeout: f64,
    write_deadline: u128,
    start: String,
    now: String,
    uptime: String,
    mem: u64,
    cores: usize,
    gomaxprocs: usize,
    cpu: f64,
    connections: u64,
    total_connections: u64,
    routes: u64,
    remotes: u64,
    leafnodes: u64,
    in_msgs: u64,
    out_msgs: u64,
    in_bytes: u64,
    out_bytes: u64,
    slow_consumers: u64,
    stale_connections: u64,
    stalled_clients: u64,
    subscriptions: u64,
    http_req_stats: BTreeMap<String, u64>,
    config_load_time: String,
    config_digest: String,
    feature_flags: FeatureFlags,
    slow_consumer_stats: ScStats,
    stale_connection_stats: ScStats,
    /// rnats additions.
    rnats_shards: usize,
    rnats_reactor: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn varz(state: &ServerState, hits: BTreeMap<String, u64>, cpu: f64) -> Varz {
    let live = state.live();
    let o = &live.opts;
    let info = &live.info;
    let t = state.shared.totals();
    let now = SystemTime::now();
    Varz {
        server_id: info.server_id.clone(),
        server_name: info.server_name.clone(),
        version: info.version.clone(),
        proto: info.proto,
        go: info.go.clone(),
        host: info.host.clone(),
        port: info.port,
        auth_required: info.auth_required,
        max_connections: o.max_connections,
        max_subscriptions: o.max_subscriptions,
        ping_interval: o.ping_interval.as_nanos(),
        ping_max: o.ping_max,
        http_host: state.http_host.clone(),
        http_port: state.http_port,
        http_base_path: String::new(),
        https_port: 0,
        auth_timeout: o.auth_timeout_secs(),
        max_control_line: o.max_control_line,
        max_payload: o.max_payload,
        max_pending: o.max_pending,
        cluster: Empty {},
        gateway: Empty {},
        leaf: Empty {},
        mqtt: Empty {},
        websocket: Empty {},
        jetstream: Empty {},
        tls_timeout: 2.0,
        write_deadline: o.write_deadline.as_nanos(),
        start: rfc3339_nano(state.start),
        now: rfc3339_nano(now),
        uptime: uptime(now.duration_since(state.start).unwrap_or_default()),
        mem: rss_bytes(),
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        gomaxprocs: state.nshards,
        cpu,
        connections: t.connections,
        total_connections: t.total_connections,
        routes: 0,
        remotes: 0,
        leafnodes: 0,
        in_msgs: t.in_msgs,
        out_msgs: t.out_msgs,
        in_bytes: t.in_bytes,
        out_bytes: t.out_bytes,
        slow_consumers: t.slow_consumers,
        stale_connections: t.stale_connections,
        stalled_clients: 0,
        subscriptions: t.subscriptions,
        http_req_stats: hits,
        config_load_time: rfc3339_nano(live.config_load_time),
        config_digest: o.config_digest.clone(),
        feature_flags: FeatureFlags {
            js_ack_fc_v2: false,
            js_raft_delete_range: false,
        },
        slow_consumer_stats: ScStats {
            clients: t.slow_consumers,
            routes: 0,
            gateways: 0,
            leafs: 0,
        },
        stale_connection_stats: ScStats {
            clients: t.stale_connections,
            routes: 0,
            gateways: 0,
            leafs: 0,
        },
        rnats_shards: state.nshards,
        rnats_reactor: state.reactor.clone(),
    }
}

pub use crate::proto::gotime::rfc3339_nano;

/// nats-server's uptime string: `6s`, `2m5s`, `1h2m3s`, `2d3h4m5s`, `1y2d3h4m5s`.
pub fn uptime(d: Duration) -> String {
    let mut s = d.as_secs();
    let years = s / (365 * 86_400);
    s %= 365 * 86_400;
    let days = s / 86_400;
    s %= 86_400;
    let hours = s / 3600;
    s %= 3600;
    let mins = s / 60;
    let secs = s % 60;
    if years > 0 {
        format!("{years}y{days}d{hours}h{mins}m{secs}s")
    } else if days > 0 {
        format!("{days}d{hours}h{mins}m{secs}s")
    } else if hours > 0 {
        format!("{hours}h{mins}m{secs}s")
    } else if mins > 0 {
        format!("{mins}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// Resident set size of this process.
pub fn rss_bytes() -> u64 {
    #[cfg(target_os = "linux")]
    {
        if let Ok(s) = std::fs::read_to_string("/proc/self/statm") {
            let pages: u64 = s.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            // SAFETY: sysconf only reads a system constant.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
            return pages * page;
        }
    }
    0
}

/// Process CPU time in seconds (user + system).
pub fn cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage fills the struct we own.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    0.0
}

/// CPU percentage between samples (first sample: since process start is unknown, 0).
#[derive(Default)]
struct CpuSampler {
    last: Option<(std::time::Instant, f64)>,
}

impl CpuSampler {
    fn sample(&mut self) -> f64 {
        let now = std::time::Instant::now();
        let cpu = cpu_seconds();
        let pct = match self.last {
            Some((t, c)) => {
                let dt = now.duration_since(t).as_secs_f64();
                if dt > 0.0 {
                    ((cpu - c) / dt * 100.0 * 10.0).round() / 10.0
                } else {
                    0.0
                }
            }
            None => 0.0,
        };
        self.last = Some((now, cpu));
        pct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_strings() {
        assert_eq!(uptime(Duration::from_secs(6)), "6s");
        assert_eq!(uptime(Duration::from_secs(125)), "2m5s");
        assert_eq!(uptime(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(
            uptime(Duration::from_secs(2 * 86400 + 3 * 3600 + 4 * 60 + 5)),
            "2d3h4m5s"
        );
    }

    #[test]
    fn rfc3339() {
        let t = SystemTime::UNIX_EPOCH + Duration::new(1_795_984_190, 986_395_000);
        assert_eq!(rfc3339_nano(t), "2026-11-29T20:29:50.986395Z");
        let t = SystemTime::UNIX_EPOCH + Duration::new(1_795_984_190, 0);
        assert_eq!(rfc3339_nano(t), "2026-11-29T20:29:50Z");
    }
}
