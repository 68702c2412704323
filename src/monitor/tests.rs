//! The builders end to end on real shard cores (on threads of their own, jobs posted as the
//! runtime posts them): connections accepted and fed protocol bytes, then `/connz`, `/subsz`
//! and `/accstatz` built from a blocking caller and from a shard.

use super::*;
use crate::core::client::{ClosedState, ConnKey};
use crate::core::config::CoreConfig;
use crate::core::post::Job;
use crate::core::report::ConnState;
use crate::core::shard::{NoMesh, ShardCore};
use crate::core::stats::Shared;
use crate::server::options::Options;
use crate::server::state::{Live, ServerState};
use std::sync::mpsc::{channel, Sender};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};

/// Shards on their own threads, with the poster attached (so `gather` reaches them all).
struct Shards {
    txs: Vec<Mutex<Sender<Job>>>,
}

impl Post for Shards {
    fn post(&self, shard: usize, job: Job) -> bool {
        self.txs
            .get(shard)
            .is_some_and(|tx| tx.lock().unwrap_or_else(|p| p.into_inner()).send(job).is_ok())
    }
    fn shards(&self) -> usize {
        self.txs.len()
    }
}

fn start(n: usize) -> (Arc<Context>, Arc<Shards>) {
    let shared = Arc::new(Shared::new(n));
    let cfg = Arc::new(CoreConfig::default());
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for _ in 0..n {
        let (tx, rx) = channel::<Job>();
        txs.push(Mutex::new(tx));
        rxs.push(rx);
    }
    let post = Arc::new(Shards { txs });
    for (i, rx) in rxs.into_iter().enumerate() {
        let (shared, cfg, p) = (shared.clone(), cfg.clone(), post.clone());
        std::thread::spawn(move || {
            let mut core = ShardCore::new(i, n, cfg, shared, Box::new(NoMesh));
            core.set_post(p);
            while let Ok(job) = rx.recv() {
                job(&mut core, Instant::now());
            }
        });
    }
    let state = Arc::new(ServerState {
        live: RwLock::new(Live {
            opts: Options::default(),
            info: Default::default(),
            config_load_time: SystemTime::now(),
        }),
        shared,
        start: SystemTime::now(),
        nshards: n,
        reactor: "test".into(),
        http_host: String::new(),
        http_port: 0,
        ocsp_cache: RwLock::new(None),
    });
    let ctx = Context::new(state);
    ctx.set_post(post.clone());
    (ctx, post)
}

/// Run `f` on `shard` and wait for its answer.
fn on<T: Send + 'static>(
    post: &Shards,
    shard: usize,
    f: impl FnOnce(&mut ShardCore, Instant) -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    post.post(
        shard,
        Box::new(move |core: &mut ShardCore, now: Instant| {
            let _ = tx.send(f(core, now));
        }),
    );
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("shard {shard} did not answer"))
}

/// A client on `shard` that sent `bytes`.
fn client(post: &Shards, shard: usize, port: u16, bytes: &'static [u8]) -> ConnKey {
    on(post, shard, move |core, now| {
        let k = core.accept(std::net::SocketAddr::from(([127, 0, 0, 1], port)), now);
        core.input(k, bytes, now);
        k
    })
}

#[test]
fn answers_from_a_blocking_caller_and_from_a_shard_agree() {
    let (ctx, post) = start(2);
    let a = client(
        &post,
        0,
        1000,
        b"CONNECT {\"verbose\":false,\"name\":\"a\"}\r\nSUB x 1\r\nSUB y q 2\r\nPUB x 2\r\nhi\r\n",
    );
    client(
        &post,
        1,
        1001,
        b"CONNECT {\"verbose\":false,\"name\":\"b\"}\r\nSUB x.> 9\r\n",
    );
    let opts = ConnzOptions {
        subscriptions: true,
        ..Default::default()
    };
    let c = connz(&ctx, &opts).unwrap_or_default();
    assert_eq!((c.total, c.num_connections), (2, 2));
    let conns = c.connections.clone().unwrap_or_default();
    let names: Vec<&str> = conns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(conns[0].subscriptions_list, ["x", "y"]);
    assert_eq!((conns[0].in_msgs, conns[0].out_msgs, conns[0].port), (1, 1, 1000));

    // The same from shard 1, through `gather` (as the system services ask).
    let (ctx2, opts2) = (ctx.clone(), opts.clone());
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    on(&post, 1, move |core, now| {
        connz::connz_on_shard(
            core,
            &ctx2,
            &opts2,
            Box::new(move |_core: &mut ShardCore, r, _now| {
                let _ = tx.send(r);
            }),
            now,
        )
    });
    let from_shard = rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or(Err(MonitorError::Unavailable));
    let mut from_shard = from_shard.unwrap_or_default();
    from_shard.now.clone_from(&c.now);
    assert_eq!(from_shard, c);

    // A closed connection moves to the ring with its subscriptions and reason.
    on(&post, 0, move |core, now| {
        core.disconnected(a, ClosedState::ReadError, now)
    });
    let closed = connz(
        &ctx,
        &ConnzOptions {
            state: ConnState::Closed,
            subscriptions_detail: true,
            ..Default::default()
        },
    )
    .unwrap_or_default();
    let cl = closed.connections.unwrap_or_default();
    assert_eq!(cl.len(), 1);
    assert_eq!((cl[0].name.as_str(), cl[0].reason.as_str()), ("a", "Read Error"));
    let subjects: Vec<&str> = cl[0]
        .subscriptions_list_detail
        .iter()
        .map(|s| s.subject.as_str())
        .collect();
    assert_eq!(subjects, ["x", "y"]);
    assert_eq!(cl[0].subscriptions_list_detail[1].qgroup, "q");

    // Subscriptions and accounts are summed over the shards.
    let s = subsz(
        &ctx,
        &SubszOptions {
            subscriptions: true,
            test: "x.1".into(),
            ..Default::default()
        },
    )
    .unwrap_or_default();
    assert_eq!(s.total, 1);
    assert_eq!(s.subscriptions_list[0].subject, "x.>");
    let st = accstatz(
        &ctx,
        &AccountStatzOptions {
            include_unused: true,
            ..Default::default()
        },
    )
    .unwrap_or_default();
    let g = &st.account_statz[0];
    assert_eq!((g.acc.as_str(), g.conns, g.received.msgs, g.sent.msgs), ("$G", 1, 1, 1));
}

#[test]
fn a_missing_shard_is_an_error_not_a_hang() {
    let (ctx, _post) = start(1);
    // A poster that claims a shard nobody runs.
    struct Gone;
    impl Post for Gone {
        fn post(&self, _: usize, _: Job) -> bool {
            false
        }
        fn shards(&self) -> usize {
            1
        }
    }
    let state = Arc::new(ServerState {
        live: RwLock::new(Live {
            opts: Options::default(),
            info: Default::default(),
            config_load_time: SystemTime::now(),
        }),
        shared: Arc::new(Shared::new(1)),
        start: SystemTime::now(),
        nshards: 1,
        reactor: "test".into(),
        http_host: String::new(),
        http_port: 0,
        ocsp_cache: RwLock::new(None),
    });
    let gone = Context::new(state);
    assert_eq!(connz(&gone, &ConnzOptions::default()), Err(MonitorError::Unavailable));
    gone.set_post(Arc::new(Gone));
    assert_eq!(connz(&gone, &ConnzOptions::default()), Err(MonitorError::Unavailable));
    assert!(connz(&ctx, &ConnzOptions::default()).is_ok());
    // Bad options fail before any shard is asked.
    let bad = ConnzOptions {
        sort: "stop".into(),
        ..Default::default()
    };
    assert_eq!(
        connz(&gone, &bad),
        Err(MonitorError::BadRequest(
            "sort by stop only valid on closed connections".into()
        ))
    );
}
