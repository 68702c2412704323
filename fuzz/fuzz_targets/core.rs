//! Fuzz target `core`: the sans-IO shard state machine (`rnats::core::shard::ShardCore`),
//! driven like a reactor would drive it, with virtual time.
//!
//! One shard with `NoMesh`, or (flag) two shards joined by a real `shards::mesh`, both
//! driven. Up to `MAX_CONNS` connections; the input is a sequence of driver steps: accept,
//! feed bytes (raw from the input, or a canned protocol line so the fuzzer gets past
//! CONNECT quickly), partial socket writes, timer ticks that advance the clock, mesh
//! pumping, peer disconnects and socket removal. The driver contract is respected: input
//! only while `status` says `read`, and a connection is removed once it says `Close`.
//!
//! Checked after every step, beyond "never panics":
//! - what is queued for a connection (`pending_len`) stays within `max_pending` plus one
//!   message (a frame of at most a control line and a payload, or one INFO line);
//! - after `tick(now)`, `next_deadline()` is later than `now` (no timer stays due);
//! - `connections()` matches the connections the driver still holds.
//!
//! At the end, after `shutdown`: no connection stays open, and once all are removed
//! the shared connection count and the published connection and subscription counters
//! are back to zero.
//!
//! Regression inputs in `fuzz/regressions/core/` keep fixed finds: protocol replies
//! (PONG, -ERR, no-responders) are held to `max_pending` like deliveries, and a
//! connection cut off while `input` applies mesh records does not act on its input.
//!
//! Input layout: [0] flags, [1] limits (see `config`), then steps (see `fuzz_target!`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::core::client::{ClosedState, ConnKey};
use rnats::auth::users::{ConfigAuthenticator, UserDirectory};
use rnats::core::config::CoreConfig;
use rnats::core::shard::{ConnStatus, MeshPort, NoMesh, ShardCore};
use rnats::core::stats::Shared;
use rnats::driver::MeshAdapter;
use shards::mesh::Notify;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const MAX_CONNS: usize = 6;
/// One message beyond `max_pending`: control-line fields and payload are bounded by the
/// limits; this covers the fixed part of a frame and an INFO line.
const FRAME_SLACK: usize = 1024;

const CANNED: [&[u8]; 16] = [
    br#"CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1}"#,
    br#"CONNECT {"verbose":true,"pedantic":true,"echo":false}"#,
    br#"CONNECT {"auth_token":"secret","verbose":false}"#,
    br#"CONNECT {"user":"u","pass":"p","headers":true}"#,
    b"SUB foo 1",
    b"SUB foo.* q 2",
    b"SUB > 3",
    b"SUB _INBOX.* 4",
    b"PUB foo 5\r\nhello",
    b"PUB foo.bar _INBOX.x 2\r\nhi",
    b"HPUB foo.bar 12 14\r\nNATS/1.0\r\n\r\nhi",
    b"PING",
    b"PONG",
    b"UNSUB 1 2",
    b"UNSUB 2",
    b"PUB nobody _INBOX.r 0\r\n",
];

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

fn config(flags: u8, limits: u8) -> CoreConfig {
    let mut c = CoreConfig {
        max_pending: [1024, 2048, 8192, 192 * 1024][usize::from(limits & 3)],
        max_payload: [0, 16, 256, 128 * 1024][usize::from((limits >> 2) & 3)],
        max_control_line: [16, 64, 256, 4096][usize::from((limits >> 4) & 3)],
        ping_max: u32::from(limits >> 6),
        ping_interval: Duration::from_secs(1),
        write_deadline: Duration::from_secs(2),
        auth_timeout: Duration::from_secs(1),
        ..CoreConfig::default()
    };
    let dir = match (flags >> 1) & 3 {
        1 => UserDirectory {
            token: Some("secret".into()),
            ..Default::default()
        },
        2 => UserDirectory {
            single: Some(("u".into(), "p".into())),
            ..Default::default()
        },
        _ => UserDirectory::default(),
    };
    c.authenticator = std::sync::Arc::new(ConfigAuthenticator::new(dir));
    c.trace = tracing_on();
    c.headers = flags & 8 == 0;
    c.sublist_cache = flags & 16 == 0;
    if flags & 32 != 0 {
        c.max_subscriptions = 2;
    }
    if flags & 64 != 0 {
        c.max_sub_tokens = 3;
    }
    if flags & 128 != 0 {
        c.max_connections = 2;
    }
    // Shares its bit with an odd `ping_max`: every other run drops instead of stalling.
    c.no_fast_producer_stall = limits & 0x40 != 0;
    c
}

struct Driver {
    shards: Vec<ShardCore>,
    /// (shard, key) of every connection not yet removed.
    conns: Vec<(usize, ConnKey)>,
    shared: Arc<Shared>,
    now: Instant,
    bound: usize,
}

impl Driver {
    fn new(flags: u8, limits: u8) -> Driver {
        let cfg = config(flags, limits);
        let bound = cfg.max_pending + cfg.max_control_line + cfg.max_payload.max(0) as usize + FRAME_SLACK;
        let cfg = Arc::new(cfg);
        let n = if flags & 1 != 0 { 2 } else { 1 };
        let shared = Arc::new(Shared::new(n));
        let ports: Vec<Box<dyn MeshPort>> = if n == 1 {
            vec![Box::new(NoMesh)]
        } else {
            let notifiers = (0..n).map(|_| Box::new(Nop) as Box<dyn Notify>).collect();
            shards::mesh::build::<rnats::driver::Batch>(notifiers, 4)
                .into_iter()
                .map(|ep| Box::new(MeshAdapter(ep)) as Box<dyn MeshPort>)
                .collect()
        };
        let shards = ports
            .into_iter()
            .enumerate()
            .map(|(i, port)| ShardCore::new(i, n, cfg.clone(), shared.clone(), port))
            .collect();
        Driver {
            shards,
            conns: Vec::new(),
            shared,
            now: Instant::now(),
            bound,
        }
    }

    fn conn(&self, sel: u8) -> Option<(usize, ConnKey)> {
        if self.conns.is_empty() {
            return None;
        }
        Some(self.conns[usize::from(sel) % self.conns.len()])
    }

    fn input(&mut self, sel: u8, data: &[u8]) {
        let Some((s, k)) = self.conn(sel) else { return };
        // A reactor only reads from connections that want input.
        if self.shards[s].status(k) == (ConnStatus::Open { read: true }) {
            self.shards[s].input(k, data, self.now);
        }
    }

    /// With `RNATS_FUZZ_TRACE` set (when replaying a crash), print what each connection got.
    fn trace(&self, step: &[u8]) {
        if !tracing_on() {
            return;
        }
        eprintln!("step {step:?}");
        for &(s, k) in &self.conns {
            let out = self.shards[s].output(k);
            let tail = String::from_utf8_lossy(&out[out.len().saturating_sub(160)..]).into_owned();
            eprintln!(
                "  shard {s} {k:?} {:?}, {} bytes, ends {tail:?}",
                self.shards[s].status(k),
                out.len()
            );
        }
    }

    fn pump(&mut self) -> usize {
        let now = self.now;
        let mut moved = 0;
        for s in &mut self.shards {
            s.flush_mesh(now);
            moved += s.poll_mesh(now);
        }
        moved
    }

    /// What a reactor does after every step: look at the woken connections, close the
    /// ones that are done. Then check the invariants.
    fn settle(&mut self) {
        for s in &mut self.shards {
            s.drain_wakeups(|_| {});
        }
        let mut i = 0;
        while i < self.conns.len() {
            let (s, k) = self.conns[i];
            let out = self.shards[s].pending_len(k);
            let bound = self.bound;
            assert!(
                out <= bound,
                "connection {k:?} has {out} bytes queued, bound {bound} (status {:?})",
                self.shards[s].status(k)
            );
            match self.shards[s].status(k) {
                ConnStatus::Close => {
                    self.shards[s].remove(k, self.now);
                    self.conns.swap_remove(i);
                }
                ConnStatus::Gone => panic!("connection {k:?} vanished without being removed"),
                _ => i += 1,
            }
        }
        for (idx, s) in self.shards.iter().enumerate() {
            let held = self.conns.iter().filter(|(si, _)| *si == idx).count();
            assert_eq!(s.connections(), held, "shard {idx} connection count");
        }
    }
}

/// `RNATS_FUZZ_TRACE`: print every step and the core's own log (to replay a crash).
fn tracing_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let on = std::env::var_os("RNATS_FUZZ_TRACE").is_some();
        if on {
            let _ = tracing_subscriber::fmt()
                .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
                .with_writer(std::io::stderr)
                .try_init();
        }
        on
    })
}

fuzz_target!(|input: &[u8]| {
    let (Some(&flags), Some(&limits)) = (input.first(), input.get(1)) else {
        return;
    };
    tracing_on();
    let mut d = Driver::new(flags, limits);
    let mut ops = input.get(2..).unwrap_or_default();
    let mut take = |n: usize| -> &[u8] {
        let (a, b) = ops.split_at(n.min(ops.len()));
        ops = b;
        a
    };
    let peer: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 40000));

    // Steps of three bytes [op, a, b]; `a` picks a connection, op & 7 picks:
    // 0 accept (on shard a % n), 1 feed the next b input bytes, 2 socket writes b * 16 bytes
    // (b = 0: all), 3 advance the clock (a & 7) and tick, 4 pump the mesh once,
    // 5 peer disconnect, 6 remove, 7 canned line CANNED[b & 15], repeated (op >> 3) + 1 times
    // (b & 16: instead, one large publish on `foo.bar` of 64 KiB + (b >> 5) * 4099 bytes,
    // the size of messages that cross shards as blobs).
    loop {
        let step = take(3);
        let [op, a, b] = *step else { break };
        match op & 7 {
            0 => {
                if d.conns.len() < MAX_CONNS {
                    let s = usize::from(a) % d.shards.len();
                    let k = d.shards[s].accept(peer, d.now);
                    d.conns.push((s, k));
                }
            }
            1 => {
                let data = take(usize::from(b));
                d.input(a, data);
            }
            2 => {
                if let Some((s, k)) = d.conn(a) {
                    let pending = d.shards[s].output(k).len();
                    let n = if b == 0 {
                        pending
                    } else {
                        pending.min(usize::from(b) * 16)
                    };
                    d.shards[s].written(k, n, d.now);
                }
            }
            3 => {
                let dt = [
                    Duration::ZERO,
                    Duration::from_millis(1),
                    Duration::from_millis(300),
                    Duration::from_millis(1100),
                    Duration::from_secs(3),
                    Duration::from_secs(10),
                    Duration::from_secs(130),
                    Duration::from_secs(3700),
                ][usize::from(a & 7)];
                d.now += dt;
                let now = d.now;
                for s in &mut d.shards {
                    s.tick(now);
                    if let Some(t) = s.next_deadline() {
                        assert!(t > now, "a timer is still due after tick");
                    }
                }
            }
            4 => {
                d.pump();
            }
            5 => {
                if let Some((s, k)) = d.conn(a) {
                    let reason = if b & 1 == 0 {
                        ClosedState::ClientClosed
                    } else {
                        ClosedState::ReadError
                    };
                    d.shards[s].disconnected(k, reason, d.now);
                }
            }
            6 => {
                if let Some((s, k)) = d.conn(a) {
                    d.shards[s].remove(k, d.now);
                    d.conns.retain(|c| *c != (s, k));
                }
            }
            _ if b & 16 != 0 => {
                let n = 64 * 1024 + usize::from(b >> 5) * 4099;
                let mut data = format!("PUB foo.bar {n}\r\n").into_bytes();
                data.extend((0..n).map(|i| b'a' + (i % 26) as u8));
                data.extend_from_slice(b"\r\n");
                d.input(a, &data);
            }
            _ => {
                // The op byte's high bits repeat the line (1 to 32 times) in one read.
                let mut data = Vec::new();
                for _ in 0..=(op >> 3) {
                    data.extend_from_slice(CANNED[usize::from(b & 15)]);
                    data.extend_from_slice(b"\r\n");
                }
                d.input(a, &data);
            }
        }
        d.trace(step);
        d.settle();
    }

    // Let the mesh settle (bounded: a full ring may legitimately stay full), then shut down.
    for _ in 0..64 {
        if d.pump() == 0 {
            break;
        }
        d.settle();
    }
    let now = d.now;
    for s in &mut d.shards {
        s.shutdown(now);
    }
    d.settle();
    for &(s, k) in &d.conns {
        let st = d.shards[s].status(k);
        assert!(matches!(st, ConnStatus::Flush), "after shutdown {k:?} is {st:?}");
    }
    for (s, k) in std::mem::take(&mut d.conns) {
        d.shards[s].remove(k, d.now);
    }
    d.settle();
    assert_eq!(
        d.shared.open_conns.load(Ordering::Relaxed),
        0,
        "open connection count leaked"
    );
    let totals = d.shared.totals();
    assert_eq!(totals.connections, 0, "published connections");
    assert_eq!(totals.subscriptions, 0, "published subscriptions");
});
