//! One request/reply round trip through a single-shard `ShardCore` (`NoMesh`), in the
//! same account and through a service import (issue 8's "delivery through a service
//! import" against "same-account request/reply"):
//!
//! - `reqrep/same_account`: the requester publishes `svc.echo` with reply `_INBOX.r`, the
//!   responder (same account) gets the request and publishes the answer to `_INBOX.r`.
//! - `reqrep/service_import`: the requester is in account B, which imports `svc.>` from
//!   A; the responder in A gets the request with a `_R_.` reply (a response mapping is
//!   made), answers it, and the answer is mapped back to `_INBOX.r` in B (the mapping is
//!   removed: singleton response).
//!
//! Each iteration is the whole round trip: both `input()`s, both deliveries written out.
//! Per element: one round trip.

use criterion::{black_box, Criterion, Throughput};
use rnats::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use rnats::core::accounts::links::{ResponseType, Rewrite, ServiceImport, DEFAULT_RESPONSE_THRESHOLD};
use rnats::core::client::ConnKey;
use rnats::core::config::CoreConfig;
use rnats::core::shard::{NoMesh, ShardCore};
use rnats::core::stats::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Pair {
    core: ShardCore,
    requester: ConnKey,
    responder: ConnKey,
}

fn drain(core: &mut ShardCore, k: ConnKey, now: Instant) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = core.output(k);
        if b.is_empty() {
            return out;
        }
        out.extend_from_slice(b);
        let n = b.len();
        core.written(k, n, now);
    }
}

impl Pair {
    /// Accounts A (exports `svc.>`) and B (imports it); users `a` in A and `b` in B. The
    /// requester logs in as `requester`.
    fn new(requester: &str) -> Pair {
        let shared = Arc::new(Shared::new(1));
        let t = shared.accounts.install(|b| {
            let a = b.plain("A");
            let mut bb = b.plain("B");
            bb.service_imports.push(ServiceImport {
                local: b"svc.>".to_vec().into(),
                exporter: a.id,
                rewrite: Rewrite::Same,
                export_subject: b"svc.>".to_vec().into(),
                response: ResponseType::Singleton,
                threshold: DEFAULT_RESPONSE_THRESHOLD,
                share: false,
                latency: None,
                allow_trace: false,
            });
            b.add(a);
            b.add(bb);
        });
        let mut dir = UserDirectory::default();
        for (name, acc) in [("a", "A"), ("b", "B")] {
            dir.users.insert(
                name.into(),
                PasswordUser {
                    name: name.into(),
                    password: "p".into(),
                    account: t.by_name(acc).expect("account").id,
                    permissions: None,
                    conn_types: Vec::new(),
                    proxy_required: false,
                },
            );
        }
        let cfg = Arc::new(CoreConfig {
            authenticator: Arc::new(ConfigAuthenticator::new(dir)),
            ..CoreConfig::default()
        });
        let mut core = ShardCore::new(0, 1, cfg, shared, Box::new(NoMesh));
        let now = Instant::now();
        let peer = SocketAddr::from(([127, 0, 0, 1], 40000));
        let mut conn = |user: &str, extra: &str| {
            let k = core.accept(peer, now);
            let line = format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false,\"user\":\"{user}\",\"pass\":\"p\"}}\r\n{extra}PING\r\n"
            );
            core.input(k, line.as_bytes(), now);
            drain(&mut core, k, now);
            k
        };
        let responder = conn("a", "SUB svc.echo 1\r\n");
        let requester = conn(requester, "SUB _INBOX.r 9\r\n");
        core.drain_wakeups(|_| {});
        Pair {
            core,
            requester,
            responder,
        }
    }

    /// One round trip; returns the bytes the requester received.
    fn round_trip(&mut self, now: Instant) -> usize {
        self.core
            .input(self.requester, b"PUB svc.echo _INBOX.r 4\r\nping\r\n", now);
        self.core.drain_wakeups(|k| {
            black_box(k);
        });
        let req = drain(&mut self.core, self.responder, now);
        // "MSG svc.echo 1 <reply> 4\r\nping\r\n": answer to <reply>.
        let reply = req.split(|&b| b == b' ').nth(3).expect("request has a reply subject");
        let mut answer = Vec::with_capacity(reply.len() + 16);
        answer.extend_from_slice(b"PUB ");
        answer.extend_from_slice(reply);
        answer.extend_from_slice(b" 4\r\npong\r\n");
        self.core.input(self.responder, &answer, now);
        self.core.drain_wakeups(|k| {
            black_box(k);
        });
        drain(&mut self.core, self.requester, now).len()
    }
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("reqrep");
    g.measurement_time(Duration::from_secs(5)).sample_size(60);
    for (name, requester) in [("same_account", "a"), ("service_import", "b")] {
        let mut p = Pair::new(requester);
        let now = Instant::now();
        let want = "MSG _INBOX.r 9 4\r\npong\r\n".len();
        assert_eq!(p.round_trip(now), want, "{name}: the answer arrives once");
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| b.iter(|| p.round_trip(now)));
    }
    g.finish();
}
