//! Per-message cost of publishing, in two cuts:
//!
//! - `pipeline/parse_match_*`: parse a buffer of PUB frames and look each subject up in a
//!   `Sublist` of 1 000 subscriptions (cache hit, as for a steady stream on one subject).
//!   This is the protocol work before any delivery.
//! - `pipeline/publish_*`: the whole sans-IO path through a single-shard `ShardCore`
//!   (`NoMesh`): a publisher connection's `input()` of a buffer of PUB frames (about one
//!   socket read), which parses, matches, counts, and writes one MSG frame per message to
//!   the one subscriber's `OutBuf`; then, as a reactor does, `drain_wakeups()` and
//!   `written()` of the subscriber's whole `output()`. Not included: system calls, the
//!   reactor, copying into or out of socket buffers. `publish_nobody_16B` is the same with
//!   no subscriber (parse, match an empty interest, count), separating out delivery;
//!   `publish_perms_16B` is `publish_16B` with publish and subscribe permissions on both
//!   connections (the permission check and the delivery filter on the path);
//!   `publish_accounts_16B` is `publish_16B` with the accounts the server installs by
//!   default (the system account and the service imports every account gets from it, so
//!   the import gates are on the path, as in the running server); `publish_fanout4_16B`
//!   has four subscriber connections (the publishes held in the shard's local run and
//!   given to each subscriber whole).
//!
//! Per element: one published message.

use super::parse::{frames, pub_frame, LIMITS};
use criterion::{black_box, Criterion, Throughput};
use rnats::auth::config::SecurityConfig;
use rnats::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use rnats::core::client::ConnKey;
use rnats::core::config::CoreConfig;
use rnats::core::perms::{PermSpec, SubjectPerm};
use rnats::core::shard::{NoMesh, ShardCore};
use rnats::core::stats::Shared;
use rnats::core::sublist::Sublist;
use rnats::proto::parser::{Event, Parser};
use rnats::server::security::{self, SimpleAuth};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A single-shard core with a publisher and `subscribers` subscriber connections to
/// `subject` (for 0, one connection that subscribes to nothing).
struct OneShard {
    core: ShardCore,
    publisher: ConnKey,
    subscribers: Vec<ConnKey>,
}

impl OneShard {
    /// With `perms`, both connections log in as a user with publish and subscribe
    /// permissions (`allow: foo.>`, `deny: foo.secret`), as the perf lab's `perms`.
    fn new(subject: &str, subscribers: usize, perms: bool, accounts: bool) -> OneShard {
        let mut cfg = CoreConfig::default();
        let shared = Arc::new(Shared::new(1));
        if accounts {
            let none = SimpleAuth {
                username: "",
                password: "",
                token: "",
                tls_map: false,
            };
            let applied = security::apply(&shared.accounts, &SecurityConfig::default(), &none)
                .expect("the default accounts build");
            cfg.authenticator = applied.authenticator;
        }
        if perms {
            let side = || SubjectPerm {
                allow: Some(vec!["foo.>".into()]),
                deny: vec!["foo.secret".into()],
            };
            let mut dir = UserDirectory::default();
            dir.users.insert(
                "u".into(),
                PasswordUser {
                    name: "u".into(),
                    password: "p".into(),
                    account: rnats::core::accounts::GLOBAL,
                    permissions: Some(PermSpec {
                        publish: Some(side()),
                        subscribe: Some(side()),
                        response: None,
                    }),
                    conn_types: Vec::new(),
                    proxy_required: false,
                },
            );
            cfg.authenticator = Arc::new(ConfigAuthenticator::new(dir));
        }
        let cfg = Arc::new(cfg);
        let mut core = ShardCore::new(0, 1, cfg, shared, Box::new(NoMesh));
        let now = Instant::now();
        let peer: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 40000));
        let connect: &[u8] = if perms {
            br#"CONNECT {"verbose":false,"pedantic":false,"user":"u","pass":"p"}"#
        } else {
            br#"CONNECT {"verbose":false,"pedantic":false,"headers":true}"#
        };
        let mut conn = |extra: &[u8]| {
            let k = core.accept(peer, now);
            let mut line = connect.to_vec();
            line.extend_from_slice(b"\r\n");
            line.extend_from_slice(extra);
            line.extend_from_slice(b"PING\r\n");
            core.input(k, &line, now);
            drain(&mut core, k, now);
            k
        };
        let sub = format!("SUB {subject} 1\r\n");
        let subscribers: Vec<ConnKey> = (0..subscribers.max(1))
            .map(|_| conn(if subscribers > 0 { sub.as_bytes() } else { b"" }))
            .collect();
        let publisher = conn(b"");
        core.drain_wakeups(|_| {});
        OneShard {
            core,
            publisher,
            subscribers,
        }
    }

    /// One read's worth of frames in, the subscriber's output out. Returns bytes written.
    fn step(&mut self, buf: &[u8], now: Instant) -> usize {
        self.core.input(self.publisher, buf, now);
        self.core.drain_wakeups(|k| {
            black_box(k);
        });
        self.subscribers.iter().map(|&k| drain(&mut self.core, k, now)).sum()
    }
}

/// Write everything queued for `k`, as a socket that takes it all would. Returns bytes.
pub fn drain(core: &mut ShardCore, k: ConnKey, now: Instant) -> usize {
    let mut total = 0;
    loop {
        let n = black_box(core.output(k)).len();
        if n == 0 {
            return total;
        }
        core.written(k, n, now);
        total += n;
    }
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    g.measurement_time(Duration::from_secs(5)).sample_size(60);

    // Parse + match.
    let mut sl: Sublist<u32> = Sublist::new(true);
    for i in 0..1000u32 {
        sl.insert(format!("foo.s{i}").as_bytes(), None, i).expect("valid");
    }
    sl.insert(b"foo.bar", None, 1000).expect("valid");
    for (name, payload, n) in [("parse_match_16B", 16, 1000), ("parse_match_1KiB", 1024, 60)] {
        let buf = frames(&pub_frame("foo.bar", payload), n);
        let mut p = Parser::default();
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut pos = 0;
                let mut found = 0;
                while let Some(ev) = p.next(&buf, &mut pos, &LIMITS).expect("valid frames") {
                    if let Event::Msg { subject, data, .. } = ev {
                        found += sl.matches(subject).psubs.len();
                        black_box(data);
                    }
                    p.release();
                }
                assert_eq!(found, n);
            })
        });
    }

    // The whole sans-IO publish path. Buffers stay under 64 KiB, a typical read, and so
    // does the subscriber's output (the size `OutBuf` keeps between flushes).
    for (name, payload, n, subscribers, perms) in [
        ("publish_16B", 16, 1000, 1, false),
        ("publish_perms_16B", 16, 1000, 1, true),
        ("publish_accounts_16B", 16, 1000, 1, false),
        ("publish_1KiB", 1024, 56, 1, false),
        ("publish_nobody_16B", 16, 1000, 0, false),
        ("publish_hdr_16B", 16, 1000, 1, false),
        ("publish_fanout4_16B", 16, 1000, 4, false),
    ] {
        // The accounts variant publishes on the perf lab's subject, whose first token is
        // as long as `$SYS` (the import gates compare such tokens).
        let accounts = name.contains("accounts");
        let subject = if accounts { "perf.bench" } else { "foo.bar" };
        let hdr = "NATS/1.0\r\nNats-Msg-Id: 12345678\r\n\r\n";
        let one = if name.contains("hdr") {
            let mut f = format!("HPUB {subject} {} {}\r\n{hdr}", hdr.len(), hdr.len() + payload).into_bytes();
            f.extend(std::iter::repeat_n(b'x', payload));
            f.extend_from_slice(b"\r\n");
            f
        } else {
            pub_frame(subject, payload)
        };
        let buf = frames(&one, n);
        let mut shard = OneShard::new(subject, subscribers, perms, accounts);
        let now = Instant::now();
        let out = shard.step(&buf, now);
        let frame = if name.contains("hdr") {
            format!("HMSG {subject} 1 {} {}\r\n", hdr.len(), hdr.len() + payload).len() + hdr.len() + payload + 2
        } else {
            format!("MSG {subject} 1 {payload}\r\n").len() + payload + 2
        };
        assert_eq!(out, n * frame * subscribers, "every message delivered once to each");
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(name, |b| b.iter(|| shard.step(black_box(&buf), now)));
    }
    g.finish();
}
