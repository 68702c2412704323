//! Sans-IO tests of the shard core: several shards wired by a real mesh, driven by hand,
//! with virtual time. Each test names the rule it checks.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::users::{ConfigAuthenticator, UserDirectory};
use crate::core::config::CoreConfig;
use crate::driver::MeshAdapter;
use shards::mesh::Notify;
use std::time::Duration;

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

pub(super) struct World {
    pub(super) shards: Vec<ShardCore>,
    pub(super) now: Instant,
    pub(super) shared: Arc<Shared>,
}

pub(super) fn peer() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

impl World {
    pub(super) fn new(n: usize, cfg: CoreConfig) -> World {
        Self::with_ring(n, cfg, 64)
    }

    pub(super) fn with_ring(n: usize, cfg: CoreConfig, ring: usize) -> World {
        let cfg = Arc::new(cfg);
        let shared = Arc::new(Shared::new(n));
        let eps = shards::mesh::build::<crate::driver::Batch>(
            (0..n).map(|_| Box::new(Nop) as Box<dyn Notify>).collect(),
            ring,
        );
        let shards = eps
            .into_iter()
            .enumerate()
            .map(|(i, ep)| ShardCore::new(i, n, cfg.clone(), shared.clone(), Box::new(MeshAdapter(ep))))
            .collect();
        World {
            shards,
            now: Instant::now(),
            shared,
        }
    }

    /// Run mesh traffic until every shard is quiet.
    pub(super) fn pump(&mut self) {
        for _ in 0..1000 {
            let mut moved = 0;
            for s in &mut self.shards {
                s.flush_mesh(self.now);
                moved += s.poll_mesh(self.now);
            }
            if moved == 0 {
                return;
            }
        }
        panic!("mesh did not settle");
    }

    pub(super) fn connect(&mut self, shard: usize, connect: &str) -> (usize, ConnKey) {
        let k = self.shards[shard].accept(peer(), self.now);
        self.take(shard, k); // INFO
        self.send(shard, k, &format!("CONNECT {connect}\r\n"));
        (shard, k)
    }

    pub(super) fn send(&mut self, shard: usize, k: ConnKey, data: &str) {
        self.send_bytes(shard, k, data.as_bytes());
    }

    pub(super) fn send_bytes(&mut self, shard: usize, k: ConnKey, data: &[u8]) {
        self.shards[shard].input(k, data, self.now);
        self.pump();
    }

    /// Everything queued for a connection, as text, marked written.
    pub(super) fn take(&mut self, shard: usize, k: ConnKey) -> String {
        String::from_utf8_lossy(&self.take_bytes(shard, k)).into_owned()
    }

    /// Everything queued for a connection, marked written, a chunk at a time as the
    /// plain write path sees it.
    pub(super) fn take_bytes(&mut self, shard: usize, k: ConnKey) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let chunk = self.shards[shard].output(k);
            if chunk.is_empty() {
                return out;
            }
            let n = chunk.len();
            out.extend_from_slice(chunk);
            self.shards[shard].written(k, n, self.now);
        }
    }

    /// What each connection was sent (marked written), with its status after.
    pub(super) fn outputs(&mut self, conns: &[(usize, ConnKey)]) -> Vec<(String, ConnStatus)> {
        conns
            .iter()
            .map(|&(s, k)| {
                let out = self.take(s, k);
                (out, self.shards[s].status(k))
            })
            .collect()
    }

    /// A connection on `shard` per entry of `subscribers` (shard, protocol lines), each
    /// sent its lines and a PING, the PONG taken.
    pub(super) fn subscribers<L: AsRef<str>>(&mut self, subscribers: &[(usize, L)]) -> Vec<(usize, ConnKey)> {
        subscribers
            .iter()
            .map(|(shard, lines)| {
                let (s, k) = self.connect(*shard, QUIET);
                self.send(s, k, &format!("{}PING\r\n", lines.as_ref()));
                assert_eq!(self.take(s, k), "PONG\r\n");
                (s, k)
            })
            .collect()
    }

    pub(super) fn advance(&mut self, d: Duration) {
        self.now += d;
        for s in &mut self.shards {
            s.tick(self.now);
        }
        self.pump();
    }
}

pub(super) const QUIET: &str = r#"{"verbose":false,"pedantic":false}"#;

#[test]
fn local_pub_sub() {
    let mut w = World::new(1, CoreConfig::default());
    let (s, a) = w.connect(0, QUIET);
    w.send(s, a, "SUB foo 1\r\nPUB foo 5\r\nhello\r\nPING\r\n");
    assert_eq!(w.take(s, a), "MSG foo 1 5\r\nhello\r\nPONG\r\n");
}

#[test]
fn verbose_defaults_ack_every_op() {
    // protocol.md §2: CONNECT {} leaves verbose and pedantic on.
    let mut w = World::new(1, CoreConfig::default());
    let (s, a) = w.connect(0, "{}");
    w.send(s, a, "SUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nPING\r\n");
    assert_eq!(
        w.take(s, a),
        "+OK\r\n+OK\r\n+OK\r\nMSG foo 1 2\r\nhi\r\n+OK\r\nPONG\r\n"
    );
}

#[test]
fn sub_then_pong_is_visible_to_the_next_publish_anywhere() {
    // ARCHITECTURE.md invariant 4: once the PONG is out, a publish on any shard sees the SUB,
    // even before that shard's mesh task ran (its input applies pending records first).
    let mut w = World::new(3, CoreConfig::default());
    let (sa, a) = w.connect(0, QUIET);
    let (sb, b) = w.connect(2, QUIET);
    w.shards[sa].input(a, b"SUB foo.* 1\r\nPING\r\n", w.now);
    assert_eq!(w.take(sa, a), "PONG\r\n");
    // No pump: shard 2 has not polled its mesh.
    w.shards[sb].input(b, b"PUB foo.bar 3\r\nabc\r\n", w.now);
    w.pump();
    assert_eq!(w.take(sa, a), "MSG foo.bar 1 3\r\nabc\r\n");
    // Unsubscribe, flush, and the other shard no longer routes to us.
    w.shards[sa].input(a, b"UNSUB 1\r\nPING\r\n", w.now);
    assert_eq!(w.take(sa, a), "PONG\r\n");
    w.send(sb, b, "PUB foo.bar 3\r\nabc\r\n");
    assert_eq!(w.take(sa, a), "");
    assert_eq!(w.shards[sb].remote_entries(), 0);
}

#[test]
fn ping_waits_for_every_shard_when_interest_is_stuck_behind_a_full_ring() {
    // With the ring to shard 1 full, the SUB's interest record cannot be handed over yet:
    // the PONG must wait until shard 1 has it (a barrier round trip).
    let mut w = World::with_ring(2, CoreConfig::default(), 1);
    let (s0, a) = w.connect(0, QUIET);
    let (s1, b) = w.connect(1, QUIET);
    w.send(s1, b, "SUB fill 1\r\nPING\r\n");
    w.take(s1, b);
    let (_, p) = w.connect(0, QUIET);
    // Fill the ring 0 -> 1 with a message batch that shard 1 does not take yet.
    w.shards[s0].input(p, b"PUB fill 1\r\nx\r\n", w.now);
    w.shards[s0].input(a, b"SUB late 1\r\nPING\r\n", w.now);
    assert_eq!(w.take(s0, a), "", "PONG waits for the barrier");
    assert_eq!(w.shards[s0].status(a), ConnStatus::Open { read: false });
    w.pump();
    assert_eq!(w.take(s0, a), "PONG\r\n");
    assert_eq!(w.shards[s0].status(a), ConnStatus::Open { read: true });
    assert_eq!(w.take(s1, b), "MSG fill 1 1\r\nx\r\n");
    w.send(s1, b, "PUB late 2\r\nok\r\n");
    assert_eq!(w.take(s0, a), "MSG late 1 2\r\nok\r\n");
}

#[test]
fn input_after_a_paused_ping_is_processed_in_order() {
    let mut w = World::with_ring(2, CoreConfig::default(), 1);
    let (s1, b) = w.connect(1, QUIET);
    w.send(s1, b, "SUB fill 1\r\nPING\r\n");
    w.take(s1, b);
    let (s, a) = w.connect(0, QUIET);
    let (_, p) = w.connect(0, QUIET);
    w.shards[s].input(p, b"PUB fill 1\r\nx\r\n", w.now);
    w.shards[s].input(a, b"SUB x 1\r\nPING\r\nPUB x 1\r\nz\r\nPING\r\n", w.now);
    assert_eq!(w.take(s, a), "");
    w.pump();
    assert_eq!(w.take(s, a), "PONG\r\nMSG x 1 1\r\nz\r\nPONG\r\n");
}

#[test]
fn queue_group_delivers_once_across_shards() {
    // protocol.md §3.6: exactly one member of a queue group receives each message.
    let mut w = World::new(3, CoreConfig::default());
    let mut members = Vec::new();
    for shard in 0..3 {
        for _ in 0..2 {
            let (s, k) = w.connect(shard, QUIET);
            w.send(s, k, "SUB work q 1\r\nPING\r\n");
            assert_eq!(w.take(s, k), "PONG\r\n");
            members.push((s, k));
        }
    }
    let (ps, p) = w.connect(1, QUIET);
    let n = 600;
    for i in 0..n {
        w.send(ps, p, &format!("PUB work 3\r\n{:03}\r\n", i % 1000));
    }
    let mut total = 0;
    let mut per = Vec::new();
    for (s, k) in &members {
        let got = w.take(*s, *k).matches("MSG work").count();
        per.push(got);
        total += got;
    }
    assert_eq!(total, n, "every message delivered exactly once: {per:?}");
    assert!(per.iter().all(|&c| c > 40), "every member gets a share: {per:?}");
}

#[test]
fn queue_group_skips_members_that_vanished() {
    // ARCHITECTURE.md invariant 6: a shard whose members are gone picks again elsewhere.
    let mut w = World::new(2, CoreConfig::default());
    let (s0, a) = w.connect(0, QUIET);
    w.send(s0, a, "SUB q.x grp 1\r\nPING\r\n");
    w.take(s0, a);
    let (s1, b) = w.connect(1, QUIET);
    w.send(s1, b, "SUB q.x grp 1\r\nPING\r\n");
    w.take(s1, b);
    // Shard 1's member leaves, but shard 0 has not heard of it yet when it publishes.
    w.shards[s1].input(b, b"UNSUB 1\r\n", w.now);
    let (p0, p) = w.connect(0, QUIET);
    for _ in 0..50 {
        w.shards[p0].input(p, b"PUB q.x 1\r\n!\r\n", w.now);
    }
    w.pump();
    assert_eq!(w.take(s0, a).matches("MSG q.x").count(), 50);
}

#[test]
fn queue_messages_in_runs_arrive_once_and_in_order() {
    // Many messages in one read: those assigned to another shard's members travel in runs
    // that carry the queue name (`core::mesh_run`), beside a plain subscriber's.
    let mut w = World::new(3, CoreConfig::default());
    let mut members = Vec::new();
    for shard in [1, 2, 2] {
        let (s, k) = w.connect(shard, QUIET);
        w.send(s, k, "SUB job q 1\r\nPING\r\n");
        assert_eq!(w.take(s, k), "PONG\r\n");
        members.push((s, k));
    }
    let (ws, watcher) = w.connect(2, QUIET);
    w.send(ws, watcher, "SUB job 9\r\nPING\r\n");
    assert_eq!(w.take(ws, watcher), "PONG\r\n");
    let (ps, p) = w.connect(0, QUIET);
    let n = 300;
    let input: String = (0..n)
        .map(|i| format!("PUB job {}\r\n{i}\r\n", i.to_string().len()))
        .collect();
    w.shards[ps].input(p, input.as_bytes(), w.now);
    w.pump();
    let seq = |out: &str| -> Vec<usize> {
        out.split("\r\n")
            .collect::<Vec<_>>()
            .chunks(2)
            .filter(|c| c[0].starts_with("MSG job"))
            .filter_map(|c| c.get(1).and_then(|d| d.parse().ok()))
            .collect()
    };
    let mut all = Vec::new();
    for (s, k) in &members {
        let got = seq(&w.take(*s, *k));
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in publish order: {got:?}");
        assert!(!got.is_empty(), "every member gets a share");
        all.extend(got);
    }
    all.sort();
    assert_eq!(all, (0..n).collect::<Vec<_>>(), "each message to exactly one member");
    assert_eq!(seq(&w.take(ws, watcher)), (0..n).collect::<Vec<_>>());
}

#[test]
fn fanout_order_per_publisher() {
    // ARCHITECTURE.md invariant 7: per-publisher order holds for every subscriber.
    let mut w = World::new(4, CoreConfig::default());
    let mut subs = Vec::new();
    for shard in 0..4 {
        let (s, k) = w.connect(shard, QUIET);
        w.send(s, k, "SUB ord.> 1\r\nPING\r\n");
        w.take(s, k);
        subs.push((s, k));
    }
    let pubs: Vec<_> = (0..4).map(|sh| w.connect(sh, QUIET)).collect();
    for i in 0..200 {
        for (j, (ps, p)) in pubs.iter().enumerate() {
            let body = format!("{j}:{i}");
            w.shards[*ps].input(
                *p,
                format!("PUB ord.{j} {}\r\n{body}\r\n", body.len()).as_bytes(),
                w.now,
            );
        }
        if i % 17 == 0 {
            w.pump();
        }
    }
    w.pump();
    for (s, k) in subs {
        let out = w.take(s, k);
        let mut last = [-1i64; 4];
        let mut count = 0;
        for line in out.lines().filter(|l| l.contains(':')) {
            let (j, i) = line.split_once(':').unwrap();
            let (j, i): (usize, i64) = (j.parse().unwrap(), i.parse().unwrap());
            assert!(i > last[j], "publisher {j} out of order: {i} after {}", last[j]);
            last[j] = i;
            count += 1;
        }
        assert_eq!(count, 800);
    }
}

#[test]
fn many_subscribers_get_exact_frames() {
    // Module `fan`: a message for several local subscriptions is framed once; every
    // subscriber still gets its own sid, the reply, the size text as published, headers
    // kept or stripped, and payloads above the framed size.
    let mut w = World::new(2, CoreConfig::default());
    let hdrs = r#"{"verbose":false,"pedantic":false,"headers":true}"#;
    let (s0, a) = w.connect(0, hdrs);
    w.send(s0, a, "SUB fan 1\r\nSUB fan 22\r\nSUB * 333\r\nPING\r\n");
    let (_, b) = w.connect(0, QUIET);
    w.send(s0, b, "SUB fan 4\r\nPING\r\n");
    let (s1, d) = w.connect(1, hdrs);
    w.send(s1, d, "SUB fan 5\r\nSUB fan 66\r\nPING\r\n");
    for (s, k) in [(s0, a), (s0, b), (s1, d)] {
        w.take(s, k);
    }
    let (_, p) = w.connect(0, hdrs);
    let big = "y".repeat(super::fan::FAN_MAX_DATA + 10);
    w.send(
        s0,
        p,
        &format!(
            "PUB fan re.x 5\r\nhello\r\nPUB fan 03\r\nabc\r\nHPUB fan 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB fan {}\r\n{big}\r\n",
            big.len()
        ),
    );
    let expect = |sids: &[&str], headers: bool| {
        let mut out = String::new();
        for sid in sids {
            out += &format!("MSG fan {sid} re.x 5\r\nhello\r\n");
        }
        for sid in sids {
            out += &format!("MSG fan {sid} 03\r\nabc\r\n");
        }
        for sid in sids {
            if headers {
                out += &format!("HMSG fan {sid} 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
            } else {
                out += &format!("MSG fan {sid} 2\r\nhi\r\n");
            }
        }
        for sid in sids {
            out += &format!("MSG fan {sid} {}\r\n{big}\r\n", big.len());
        }
        out
    };
    // One connection's subscriptions get each message in turn, in subscription order.
    let got = w.take(s0, a);
    let mut lines: Vec<&str> = got.split_inclusive("\r\n").collect();
    lines.sort_unstable();
    let want = expect(&["1", "22", "333"], true);
    let mut want_lines: Vec<&str> = want.split_inclusive("\r\n").collect();
    want_lines.sort_unstable();
    assert_eq!(lines, want_lines);
    assert_eq!(w.take(s0, b), expect(&["4"], false));
    let got = w.take(s1, d);
    let mut lines: Vec<&str> = got.split_inclusive("\r\n").collect();
    lines.sort_unstable();
    let want = expect(&["5", "66"], true);
    let mut want_lines: Vec<&str> = want.split_inclusive("\r\n").collect();
    want_lines.sort_unstable();
    assert_eq!(lines, want_lines);
}

#[test]
fn echo_off_and_no_responders() {
    let mut w = World::new(2, CoreConfig::default());
    let (s, a) = w.connect(
        0,
        r#"{"verbose":false,"pedantic":false,"echo":false,"headers":true,"no_responders":true}"#,
    );
    w.send(
        s,
        a,
        "SUB self 1\r\nSUB inbox 2\r\nPUB self 1\r\nx\r\nPUB nobody inbox 0\r\n\r\nPING\r\n",
    );
    // protocol.md §6.3: the exact 503 bytes, with L = 32 + len(subject).
    assert_eq!(
        w.take(s, a),
        "HMSG inbox 2 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n\r\nPONG\r\n"
    );
}

#[test]
fn request_reply_across_shards() {
    let mut w = World::new(2, CoreConfig::default());
    let (s0, svc) = w.connect(0, QUIET);
    w.send(s0, svc, "SUB help 1\r\nPING\r\n");
    w.take(s0, svc);
    let (s1, cli) = w.connect(
        1,
        r#"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true}"#,
    );
    w.send(s1, cli, "SUB _INBOX.x 9\r\nUNSUB 9 1\r\nPING\r\n");
    assert_eq!(w.take(s1, cli), "PONG\r\n");
    w.send(s1, cli, "PUB help _INBOX.x 2\r\nhi\r\n");
    assert_eq!(w.take(s0, svc), "MSG help 1 _INBOX.x 2\r\nhi\r\n");
    w.send(s0, svc, "PUB _INBOX.x 3\r\nyes\r\n");
    assert_eq!(w.take(s1, cli), "MSG _INBOX.x 9 3\r\nyes\r\n");
    // Auto-unsubscribed after one message.
    w.send(s0, svc, "PUB _INBOX.x 3\r\nyes\r\n");
    assert_eq!(w.take(s1, cli), "");
}

#[test]
fn headers_are_stripped_for_clients_without_them() {
    let mut w = World::new(2, CoreConfig::default());
    let (s0, plain) = w.connect(0, QUIET);
    w.send(s0, plain, "SUB h 1\r\nPING\r\n");
    w.take(s0, plain);
    let (s1, hdr) = w.connect(1, r#"{"verbose":false,"pedantic":false,"headers":true}"#);
    w.send(s1, hdr, "SUB h 1\r\nPING\r\n");
    w.take(s1, hdr);
    w.send(s1, hdr, "HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
    assert_eq!(w.take(s0, plain), "MSG h 1 2\r\nhi\r\n");
    assert_eq!(w.take(s1, hdr), "HMSG h 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
}

#[test]
fn slow_consumer_is_closed_silently() {
    // protocol.md §7: slow consumers are closed without -ERR.
    let cfg = CoreConfig {
        max_pending: 1024,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, slow) = w.connect(0, QUIET);
    w.send(s, slow, "SUB big 1\r\n");
    let (_, p) = w.connect(0, QUIET);
    let body = "x".repeat(300);
    for _ in 0..5 {
        w.send(s, p, &format!("PUB big 300\r\n{body}\r\n"));
        // Past three quarters of max_pending the publisher is held back for 2 ms
        // (module `stall`); the consumer reads nothing meanwhile.
        w.advance(Duration::from_millis(3));
    }
    assert!(w.shards[s].counters.stalls > 0, "the publisher was held back first");
    assert_eq!(w.shards[s].status(slow), ConnStatus::Close);
    assert_eq!(w.shards[s].counters.slow_consumers, 1);
    assert_eq!(w.shards[s].output(slow), b"", "queued output is dropped");
    assert_eq!(
        w.shards[s].status(p),
        ConnStatus::Open { read: true },
        "the publisher is fine"
    );
}

#[test]
fn protocol_errors_close_with_the_reference_replies() {
    let mut w = World::new(1, CoreConfig::default());
    for (input, reply, status) in [
        ("FOO\r\n", "-ERR 'Unknown Protocol Operation'\r\n", ConnStatus::Flush),
        (
            "PUB foo 2\r\nhiX\r\n",
            "-ERR 'Unknown Protocol Operation'\r\n",
            ConnStatus::Flush,
        ),
        (
            "PUB foo 2000000\r\n",
            "-ERR 'Maximum Payload Violation'\r\n",
            ConnStatus::Flush,
        ),
        ("PUB foo\r\n", "", ConnStatus::Close),
        (
            "CONNECT {\"protocol\":2}\r\n",
            "-ERR 'invalid client protocol'\r\n",
            ConnStatus::Flush,
        ),
        (
            "CONNECT {\"no_responders\":true}\r\n",
            "-ERR 'no responders requires headers support'\r\n",
            ConnStatus::Flush,
        ),
        ("CONNECT {bad\r\n", "", ConnStatus::Close),
        (
            "CONNECT {\"account\":\"A\"}\r\n",
            "-ERR 'Authorization Violation'\r\n",
            ConnStatus::Flush,
        ),
    ] {
        let k = w.shards[0].accept(peer(), w.now);
        w.take(0, k);
        w.send(0, k, input);
        assert_eq!(w.take(0, k), reply, "{input:?}");
        let st = w.shards[0].status(k);
        assert!(st == status || st == ConnStatus::Close, "{input:?}: {st:?}");
    }
}

#[test]
fn subscription_errors_keep_the_connection() {
    let cfg = CoreConfig {
        max_subscriptions: 2,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, a) = w.connect(0, QUIET);
    w.send(
        s,
        a,
        "SUB foo..bar 1\r\nSUB a 1\r\nSUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB x _sys_ 4\r\nPING\r\n",
    );
    assert_eq!(
        w.take(s, a),
        "-ERR 'Invalid Subject'\r\n-ERR 'maximum subscriptions exceeded'\r\n-ERR 'Permissions Violation for Subscription to \"x\" using queue \"_sys_\"'\r\nPONG\r\n"
    );
    assert_eq!(w.shards[s].status(a), ConnStatus::Open { read: true });
}

#[test]
fn pedantic_and_reserved_subjects() {
    let mut w = World::new(1, CoreConfig::default());
    let (s, a) = w.connect(0, r#"{"verbose":false,"pedantic":true}"#);
    w.send(
        s,
        a,
        "SUB > 1\r\nPUB foo.* 1\r\nx\r\nPUB _GR_.a.b 0\r\n\r\nPUB ok _R_.x 0\r\n\r\nPING\r\n",
    );
    assert_eq!(
        w.take(s, a),
        "-ERR 'Invalid Publish Subject'\r\nMSG foo.* 1 1\r\nx\r\n-ERR 'Permissions Violation for Publish to \"_GR_.a.b\"'\r\n-ERR 'Permissions Violation for Publish with Reply of \"_R_.x\"'\r\nPONG\r\n"
    );
}

#[test]
fn server_pings_then_stale_connection() {
    // protocol.md §3.7: first PING ~2s after CONNECT, stale after ping_max unanswered.
    let cfg = CoreConfig {
        ping_interval: Duration::from_secs(1),
        ping_max: 1,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, a) = w.connect(0, QUIET);
    w.advance(Duration::from_millis(1300));
    assert_eq!(w.take(s, a), "PING\r\n");
    w.advance(Duration::from_millis(1100));
    assert_eq!(w.take(s, a), "-ERR 'Stale Connection'\r\n");
    assert_eq!(w.shards[s].status(a), ConnStatus::Close);
}

#[test]
fn pong_resets_the_stale_count() {
    let cfg = CoreConfig {
        ping_interval: Duration::from_secs(1),
        ping_max: 1,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, a) = w.connect(0, QUIET);
    for _ in 0..5 {
        w.advance(Duration::from_millis(1300));
        assert_eq!(w.take(s, a), "PING\r\n");
        w.send(s, a, "PONG\r\n");
    }
    assert_eq!(w.shards[s].status(a), ConnStatus::Open { read: true });
}

#[test]
fn auth_timeout_and_token() {
    let cfg = CoreConfig {
        authenticator: Arc::new(ConfigAuthenticator::new(UserDirectory {
            token: Some("s3cret".into()),
            ..Default::default()
        })),
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let k = w.shards[0].accept(peer(), w.now);
    assert!(w.take(0, k).contains("\"auth_required\":true"));
    w.advance(Duration::from_millis(2100));
    assert_eq!(w.take(0, k), "-ERR 'Authentication Timeout'\r\n");
    // Wrong token, then op before CONNECT, then the right one.
    let k = w.shards[0].accept(peer(), w.now);
    w.take(0, k);
    w.send(0, k, "CONNECT {\"auth_token\":\"nope\"}\r\n");
    assert_eq!(w.take(0, k), "-ERR 'Authorization Violation'\r\n");
    let k = w.shards[0].accept(peer(), w.now);
    w.take(0, k);
    w.send(0, k, "PING\r\n");
    assert_eq!(w.take(0, k), "-ERR 'Authorization Violation'\r\n");
    let k = w.shards[0].accept(peer(), w.now);
    w.take(0, k);
    w.send(
        0,
        k,
        "CONNECT {\"auth_token\":\"s3cret\",\"verbose\":false}\r\nPING\r\n",
    );
    assert_eq!(w.take(0, k), "PONG\r\n");
}

#[test]
fn max_connections() {
    let cfg = CoreConfig {
        max_connections: 1,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let a = w.shards[0].accept(peer(), w.now);
    assert!(w.take(0, a).starts_with("INFO "));
    let b = w.shards[0].accept(peer(), w.now);
    let out = w.take(0, b);
    assert!(
        out.starts_with("INFO ") && out.ends_with("-ERR 'maximum connections exceeded'\r\n"),
        "{out}"
    );
    assert_eq!(w.shards[0].status(b), ConnStatus::Close);
}

#[test]
fn connect_info_after_first_pong_for_protocol_1() {
    let mut w = World::new(1, CoreConfig::default());
    let (s, a) = w.connect(0, r#"{"verbose":false,"protocol":1}"#);
    w.send(s, a, "PING\r\nPING\r\n");
    let out = w.take(s, a);
    assert!(out.starts_with("PONG\r\nINFO {"), "{out}");
    assert!(out.contains("\"connect_info\":true") && out.contains("\"remote_account\":\"$G\""));
    assert!(out.ends_with("} \r\nPONG\r\n"), "only after the first PONG: {out}");
}

#[test]
fn full_mesh_ring_pauses_the_publisher_and_loses_nothing() {
    // ARCHITECTURE.md invariant 8: a full ring pauses the producer; nothing is dropped.
    let mut w = World::with_ring(2, CoreConfig::default(), 2);
    let (s0, sub) = w.connect(0, QUIET);
    w.send(s0, sub, "SUB flood 1\r\nPING\r\n");
    w.take(s0, sub);
    let (s1, p) = w.connect(1, QUIET);
    let body = "y".repeat(60_000);
    let one = format!("PUB flood 60000\r\n{body}\r\n");
    let mut batch = String::new();
    for _ in 0..100 {
        batch.push_str(&one);
    }
    // 6 MB in one read, with a ring of two batches: the publisher must pause.
    w.shards[s1].input(p, batch.as_bytes(), w.now);
    assert_eq!(w.shards[s1].status(p), ConnStatus::Open { read: false });
    let mut got = 0;
    for _ in 0..200 {
        w.pump();
        got += w.take(s0, sub).matches("MSG flood").count();
        if w.shards[s1].status(p) == (ConnStatus::Open { read: true }) && got == 100 {
            break;
        }
    }
    assert_eq!(got, 100);
    assert_eq!(w.shards[s1].status(p), ConnStatus::Open { read: true });
}

#[test]
fn removing_a_connection_drops_its_interest_everywhere() {
    let mut w = World::new(2, CoreConfig::default());
    let (s0, a) = w.connect(0, QUIET);
    w.send(s0, a, "SUB gone 1\r\nSUB gone q 2\r\nPING\r\n");
    w.take(s0, a);
    assert_eq!(w.shards[1].remote_entries(), 2);
    w.shards[s0].disconnected(a, ClosedState::ClientClosed, w.now);
    w.shards[s0].remove(a, w.now);
    w.pump();
    assert!(w.shards[1].remote_entries() == 0);
    assert_eq!(w.shards[s0].connections(), 0);
    assert_eq!(w.shards[s0].subs.len(), 0);
}

#[test]
fn write_deadline_closes_a_stuck_consumer() {
    // protocol.md §7: a socket that accepts nothing for write_deadline is a slow consumer.
    let cfg = CoreConfig {
        write_deadline: Duration::from_secs(2),
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, stuck) = w.connect(0, QUIET);
    w.send(s, stuck, "SUB x 1\r\n");
    let (_, p) = w.connect(0, QUIET);
    w.send(s, p, "PUB x 2\r\nhi\r\n");
    // The driver tried to write and the socket took nothing.
    w.shards[s].written(stuck, 0, w.now);
    w.advance(Duration::from_millis(1500));
    assert_eq!(w.shards[s].status(stuck), ConnStatus::Open { read: true });
    w.advance(Duration::from_millis(600));
    assert_eq!(w.shards[s].status(stuck), ConnStatus::Close);
    assert_eq!(w.shards[s].counters.slow_consumers, 1);
    // Progress resets the clock: a consumer that keeps draining is fine.
    let (_, ok) = w.connect(0, QUIET);
    w.send(s, ok, "SUB y 1\r\n");
    for _ in 0..5 {
        w.send(s, p, "PUB y 2\r\nhi\r\n");
        w.shards[s].written(ok, 3, w.now);
        w.advance(Duration::from_millis(1500));
    }
    assert_eq!(w.shards[s].status(ok), ConnStatus::Open { read: true });
}

#[test]
fn lame_duck_info_and_gradual_close() {
    // nats-server sends INFO with ldm:true only to protocol-1 clients past their first PONG.
    let mut w = World::new(1, CoreConfig::default());
    let (s, new_style) = w.connect(0, r#"{"verbose":false,"protocol":1}"#);
    w.send(s, new_style, "PING\r\n");
    w.take(s, new_style);
    let (_, old_style) = w.connect(0, r#"{"verbose":false}"#);
    w.send(s, old_style, "PING\r\n");
    w.take(s, old_style);
    w.shards[s].lame_duck(w.now);
    let info = w.take(s, new_style);
    assert!(info.starts_with("INFO {") && info.contains("\"ldm\":true"), "{info}");
    assert_eq!(w.take(s, old_style), "");
    assert_eq!(w.shards[s].close_clients(1, w.now), 1);
    assert_eq!(w.shards[s].status(new_style), ConnStatus::Close, "oldest first");
    assert_eq!(w.shards[s].status(old_style), ConnStatus::Open { read: true });
    assert_eq!(w.shards[s].close_clients(5, w.now), 1);
}

#[test]
fn pipelined_pings_are_held_to_max_pending() {
    // nats-server applies max_pending to every write: a client that floods PINGs and
    // never reads is a slow consumer too (found by the core fuzz target).
    let cfg = CoreConfig {
        max_pending: 600,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (s, a) = w.connect(0, QUIET);
    w.send(s, a, &"PING\r\n".repeat(200));
    assert_eq!(w.shards[s].status(a), ConnStatus::Close);
    assert_eq!(w.shards[s].counters.slow_consumers, 1);
    assert_eq!(w.shards[s].output(a), b"");
}

#[test]
fn input_of_a_connection_cut_off_by_pending_deliveries_is_ignored() {
    // input() first applies mesh records; if those make this connection a slow consumer,
    // a SUB in its input must not create a subscription nothing would remove (fuzz find).
    let cfg = CoreConfig {
        max_pending: 1024,
        ..CoreConfig::default()
    };
    let mut w = World::new(2, cfg);
    let (s0, victim) = w.connect(0, QUIET);
    w.send(s0, victim, "SUB big 1\r\nPING\r\n");
    w.take(s0, victim);
    let (s1, p) = w.connect(1, QUIET);
    let body = "z".repeat(400);
    for _ in 0..4 {
        // Staged on shard 1 for shard 0, not yet applied by shard 0.
        w.shards[s1].input(p, format!("PUB big 400\r\n{body}\r\n").as_bytes(), w.now);
    }
    w.shards[s0].input(victim, b"SUB leak 2\r\n", w.now);
    assert_eq!(w.shards[s0].status(victim), ConnStatus::Close);
    w.shards[s0].remove(victim, w.now);
    assert_eq!(w.shards[s0].subs.len(), 0, "no subscription left behind");
}

#[path = "tests_accounts.rs"]
mod accounts;

#[path = "tests_internal.rs"]
mod internal;

#[path = "tests_blob.rs"]
mod blob;

#[path = "tests_stall.rs"]
mod stall;

#[test]
fn a_publisher_pauses_while_the_mesh_is_backed_up_and_resumes_in_order() {
    // More than the backlog limit (4 MiB) staged behind a full ring: the publisher stops
    // being read until the ring drains, then goes on where it stopped.
    let mut w = World::with_ring(2, CoreConfig::default(), 1);
    let (s1, b) = w.connect(1, QUIET);
    w.send(s1, b, "SUB big 1\r\nPING\r\n");
    w.take(s1, b);
    let (s0, p) = w.connect(0, QUIET);
    let body = "y".repeat(1000);
    let mut input = String::new();
    for k in 0..6000 {
        input.push_str(&format!("PUB big {}\r\n{k:04}{body}\r\n", body.len() + 4));
    }
    w.shards[s0].input(p, input.as_bytes(), w.now);
    assert_eq!(w.shards[s0].status(p), ConnStatus::Open { read: false }, "paused");
    let mut got = String::new();
    let take_all = |w: &mut World, got: &mut String| loop {
        let part = w.take(s1, b);
        if part.is_empty() {
            break;
        }
        got.push_str(&part);
    };
    for _ in 0..100 {
        w.pump();
        take_all(&mut w, &mut got);
        if w.shards[s0].status(p) == (ConnStatus::Open { read: true }) && !w.shards[s0].mesh_pending() {
            break;
        }
    }
    assert_eq!(w.shards[s0].status(p), ConnStatus::Open { read: true }, "resumed");
    take_all(&mut w, &mut got);
    let seqs: Vec<&str> = got
        .split("\r\n")
        .filter(|l| l.len() > 4 && !l.starts_with("MSG"))
        .map(|l| &l[..4])
        .collect();
    assert_eq!(seqs.len(), 6000);
    for (k, s) in seqs.iter().enumerate() {
        assert_eq!(*s, format!("{k:04}"));
    }
}

#[path = "tests_memo.rs"]
mod memo;

#[path = "tests_conversing.rs"]
mod conversing;

#[path = "tests_run_deliver.rs"]
mod run_deliver;

#[path = "tests_local_run.rs"]
mod local_run;
