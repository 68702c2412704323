//! The system services and events through the sans-IO core: two shards wired by a mesh,
//! with a job poster that the test runs by hand (so gathers and shard-0 work really cross
//! shards), clients on both shards, the services and observers installed as at startup.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use crate::core::client::ConnKey;
use crate::core::config::CoreConfig;
use crate::core::stats::Shared;
use crate::driver::MeshAdapter;
use crate::server::state::{Live, ServerState};
use serde_json::Value;
use shards::mesh::Notify;
use std::sync::RwLock;
use std::time::SystemTime;

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

/// Jobs posted by the shards, run by [`World::settle`].
#[derive(Default)]
struct Jobs(Mutex<Vec<(usize, Job)>>);

impl Post for Jobs {
    fn post(&self, shard: usize, job: Job) -> bool {
        self.0.lock().unwrap().push((shard, job));
        true
    }
    fn shards(&self) -> usize {
        2
    }
}

struct World {
    shards: Vec<ShardCore>,
    jobs: Arc<Jobs>,
    sys: Arc<System>,
    now: Instant,
    /// How many jobs ran (work the events caused).
    ran: usize,
}

fn world() -> World {
    let shared = Arc::new(Shared::new(2));
    let (mut sys_id, mut a_id) = (0, 0);
    shared.accounts.install(|b| {
        let d = b.plain("SYS");
        sys_id = d.id;
        b.add(d);
        let d = b.plain("A");
        a_id = d.id;
        b.add(d);
        b.set_system(Some(sys_id));
    });
    let mut dir = UserDirectory::default();
    for (user, account) in [("sys", sys_id), ("a", a_id)] {
        dir.users.insert(
            user.into(),
            PasswordUser {
                name: user.into(),
                password: "p".into(),
                account,
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
    let jobs = Arc::new(Jobs::default());
    let eps =
        shards::mesh::build::<crate::driver::Batch>((0..2).map(|_| Box::new(Nop) as Box<dyn Notify>).collect(), 64);
    let shards: Vec<ShardCore> = eps
        .into_iter()
        .enumerate()
        .map(|(i, ep)| {
            let mut c = ShardCore::new(i, 2, cfg.clone(), shared.clone(), Box::new(MeshAdapter(ep)));
            c.set_post(jobs.clone());
            c
        })
        .collect();
    let state = Arc::new(ServerState {
        live: RwLock::new(Live {
            opts: Default::default(),
            info: Default::default(),
            config_load_time: SystemTime::now(),
        }),
        shared,
        start: SystemTime::now(),
        nshards: 2,
        reactor: "test".into(),
        http_host: String::new(),
        http_port: 0,
        ocsp_cache: RwLock::new(None),
    });
    let monitor = crate::monitor::Context::new(state);
    monitor.set_post(jobs.clone());
    let identity = Arc::new(SystemContext {
        server: ServerIdentity {
            name: "rnats-test".into(),
            host: "127.0.0.1".into(),
            id: "NTEST".into(),
            version: "2.14.0".into(),
            ..ServerIdentity::default()
        },
    });
    let sys = System::new(identity, monitor, false);
    let mut w = World {
        shards,
        jobs: jobs.clone(),
        sys: sys.clone(),
        now: Instant::now(),
        ran: 0,
    };
    // As `install` does, without its waiting.
    let s2 = sys.clone();
    for shard in 0..2 {
        let s2 = s2.clone();
        jobs.post(
            shard,
            Box::new(move |core: &mut ShardCore, now: Instant| {
                core.set_conn_events(Some(Box::new(events::EventHooks::new(s2.clone()))));
                let acc = core.account_table().system().unwrap();
                user_info::subscribe(core, acc, s2.clone(), now);
                if core.index() == 0 {
                    server_reqs::subscribe(core, acc, &s2, now);
                    account_reqs::subscribe(core, acc, &s2, now);
                }
            }),
        );
    }
    w.settle();
    w.ran = 0;
    w
}

impl World {
    /// Run posted jobs and move mesh traffic until nothing is left.
    fn settle(&mut self) {
        for _ in 0..100 {
            let jobs = std::mem::take(&mut *self.jobs.0.lock().unwrap());
            let mut moved = jobs.len();
            self.ran += jobs.len();
            for (shard, job) in jobs {
                self.shards[shard].run_job(job, self.now);
            }
            for s in &mut self.shards {
                s.tick(self.now);
                s.flush_mesh(self.now);
            }
            for s in &mut self.shards {
                moved += s.poll_mesh(self.now);
            }
            if moved == 0 && self.jobs.0.lock().unwrap().is_empty() {
                return;
            }
        }
        panic!("the world did not settle");
    }

    fn connect(&mut self, shard: usize, user: &str, name: &str) -> ConnKey {
        let k = self.shards[shard].accept("127.0.0.1:40000".parse().unwrap(), self.now);
        self.take(shard, k);
        let c = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\"user\":\"{user}\",\"pass\":\"p\",\"name\":\"{name}\"}}\r\nPING\r\n"
        );
        self.input(shard, k, &c);
        assert!(self.take(shard, k).ends_with("PONG\r\n"));
        k
    }

    fn input(&mut self, shard: usize, k: ConnKey, data: &str) {
        self.shards[shard].input(k, data.as_bytes(), self.now);
        self.settle();
    }

    fn take(&mut self, shard: usize, k: ConnKey) -> String {
        let out = String::from_utf8_lossy(self.shards[shard].output(k)).into_owned();
        let n = self.shards[shard].output(k).len();
        self.shards[shard].written(k, n, self.now);
        out
    }

    fn close(&mut self, shard: usize, k: ConnKey) {
        self.shards[shard].disconnected(k, ClosedState::ClientClosed, self.now);
        self.shards[shard].remove(k, self.now);
        self.settle();
    }

    /// The messages `k` got: (subject, JSON).
    fn messages(&mut self, shard: usize, k: ConnKey) -> Vec<(String, Value)> {
        let out = self.take(shard, k);
        let mut v = Vec::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find("MSG ") {
            rest = &rest[i + 4..];
            let (line, after) = rest.split_once("\r\n").unwrap();
            let args: Vec<&str> = line.split(' ').collect();
            let len: usize = args.last().unwrap().parse().unwrap();
            let body = &after[..len];
            v.push((
                args[0].to_string(),
                serde_json::from_str(body).unwrap_or(Value::String(body.into())),
            ));
            rest = &after[len + 2..];
        }
        v
    }
}

use crate::core::client::ClosedState;

fn subjects(v: &[(String, Value)]) -> Vec<&str> {
    v.iter().map(|(s, _)| s.as_str()).collect()
}

#[test]
fn connect_and_disconnect_events_come_after_the_account_count() {
    let mut w = world();
    let watcher = w.connect(1, "sys", "watcher");
    w.input(1, watcher, "SUB $SYS.> 1\r\nPING\r\n");
    w.take(1, watcher);
    let a = w.connect(0, "a", "client-a");
    let got = w.messages(1, watcher);
    assert_eq!(
        subjects(&got),
        [
            "$SYS.SERVER.ACCOUNT.A.CONNS",
            "$SYS.ACCOUNT.A.SERVER.CONNS",
            "$SYS.ACCOUNT.A.CONNECT"
        ]
    );
    let count = &got[0].1;
    assert_eq!(count["type"], "io.nats.server.advisory.v1.account_connections");
    assert_eq!((count["acc"].as_str(), count["conns"].as_u64()), (Some("A"), Some(1)));
    // Both count messages are one event (one id), each with its own sequence number.
    assert_eq!(got[0].1["id"], got[1].1["id"]);
    assert_ne!(got[0].1["server"]["seq"], got[1].1["server"]["seq"]);
    let connect = &got[2].1;
    assert_eq!(connect["type"], "io.nats.server.advisory.v1.client_connect");
    assert_eq!(connect["client"]["name"], "client-a");
    assert_eq!(connect["client"]["user"], "a");
    assert_eq!(connect["server"]["id"], "NTEST");
    assert!(connect["client"].get("rtt").is_none(), "{connect}");

    w.input(0, a, "PUB foo 2\r\nhi\r\nPING\r\n");
    w.close(0, a);
    let got = w.messages(1, watcher);
    assert_eq!(
        subjects(&got),
        [
            "$SYS.SERVER.ACCOUNT.A.CONNS",
            "$SYS.ACCOUNT.A.SERVER.CONNS",
            "$SYS.ACCOUNT.A.DISCONNECT"
        ]
    );
    assert_eq!(got[0].1["conns"], 0);
    let d = &got[2].1;
    assert_eq!(d["reason"], "Client Closed");
    assert_eq!(d["sent"], serde_json::json!({"msgs": 1, "bytes": 2}));
    assert!(d["client"]["stop"].is_string());
}

#[test]
fn nobody_listening_costs_no_job_and_no_message() {
    let mut w = world();
    let a = w.connect(0, "a", "quiet");
    w.close(0, a);
    assert_eq!(w.ran, 0, "events posted work nobody listens to");
    // Listening to the connects only: no count is gathered.
    let watcher = w.connect(1, "sys", "watcher");
    w.input(1, watcher, "SUB $SYS.ACCOUNT.*.CONNECT 1\r\nPING\r\n");
    w.take(1, watcher);
    w.ran = 0;
    let a = w.connect(0, "a", "heard");
    assert_eq!(w.ran, 0);
    assert_eq!(subjects(&w.messages(1, watcher)), ["$SYS.ACCOUNT.A.CONNECT"]);
    w.close(0, a);
}

#[test]
fn a_burst_of_connects_is_counted_in_few_rounds_with_every_event() {
    let mut w = world();
    let watcher = w.connect(1, "sys", "watcher");
    w.input(1, watcher, "SUB $SYS.ACCOUNT.> 1\r\nPING\r\n");
    w.take(1, watcher);
    // Ten connects in one step of shard 1, none settled in between.
    let mut keys = Vec::new();
    for i in 0..10 {
        let k = w.shards[1].accept("127.0.0.1:40001".parse().unwrap(), w.now);
        let c = format!("CONNECT {{\"verbose\":false,\"user\":\"a\",\"pass\":\"p\",\"name\":\"burst-{i}\"}}\r\n");
        w.shards[1].input(k, c.as_bytes(), w.now);
        keys.push(k);
    }
    w.settle();
    let got = w.messages(1, watcher);
    let connects = got.iter().filter(|(s, _)| s == "$SYS.ACCOUNT.A.CONNECT").count();
    let counts: Vec<u64> = got
        .iter()
        .filter(|(s, _)| s == "$SYS.ACCOUNT.A.SERVER.CONNS")
        .map(|(_, v)| v["conns"].as_u64().unwrap())
        .collect();
    assert_eq!(connects, 10);
    assert!(counts.len() < 10, "{counts:?}");
    assert_eq!(counts.last(), Some(&10));
    // Every connect event follows a count that includes it.
    let mut last = 0;
    let mut seen = 0;
    for (s, v) in &got {
        if s == "$SYS.ACCOUNT.A.SERVER.CONNS" {
            last = v["conns"].as_u64().unwrap();
        } else if s == "$SYS.ACCOUNT.A.CONNECT" {
            seen += 1;
            assert!(last >= seen, "connect {seen} before a count of {last}");
        }
    }
}

#[test]
fn kick_closes_a_client_on_another_shard() {
    let mut w = world();
    let admin = w.connect(0, "sys", "admin");
    w.input(0, admin, "SUB _R.> 1\r\nPING\r\n");
    w.take(0, admin);
    let victim = w.connect(1, "a", "victim");
    let cid = w.shards[1].client_ref(victim).unwrap().cid;
    let body = format!("{{\"cid\":{cid}}}");
    w.input(
        0,
        admin,
        &format!("PUB $SYS.REQ.SERVER.NTEST.KICK _R.1 {}\r\n{body}\r\n", body.len()),
    );
    let got = w.messages(0, admin);
    assert_eq!(subjects(&got), ["_R.1"]);
    assert!(
        got[0].1.get("error").is_none() && got[0].1.get("data").is_none(),
        "{}",
        got[0].1
    );
    assert_eq!(w.shards[1].closing_reason(victim), Some(ClosedState::Kicked));
    w.input(
        0,
        admin,
        &format!("PUB $SYS.REQ.SERVER.NTEST.KICK _R.2 {}\r\n{body}\r\n", body.len()),
    );
    let got = w.messages(0, admin);
    assert_eq!(got[0].1["error"]["description"], "no such client or leafnode id");
}

#[test]
fn the_servers_own_subscriptions_are_not_interest() {
    let mut w = world();
    let sys = w.shards[0].account_table().system().unwrap();
    for s in ["$SYS.SERVER.NTEST.STATSZ", "$SYS.SERVER.ACCOUNT.A.CONNS"] {
        assert!(!w.shards[0].has_interest(sys, s.as_bytes()), "{s}");
        assert!(!w.shards[1].has_interest(sys, s.as_bytes()), "{s}");
    }
    let watcher = w.connect(1, "sys", "watcher");
    w.input(1, watcher, "SUB $SYS.SERVER.*.STATSZ 1\r\nPING\r\n");
    assert!(w.shards[0].has_interest(sys, b"$SYS.SERVER.NTEST.STATSZ"));
    assert!(w.shards[1].has_interest(sys, b"$SYS.SERVER.NTEST.STATSZ"));
    // The broadcast reaches the watcher from shard 0.
    w.take(1, watcher);
    let s2 = w.sys.clone();
    w.jobs.post(
        0,
        Box::new(move |core: &mut ShardCore, now: Instant| server_reqs::broadcast_statsz(core, &s2, now)),
    );
    w.settle();
    let got = w.messages(1, watcher);
    assert_eq!(subjects(&got), ["$SYS.SERVER.NTEST.STATSZ"]);
    assert_eq!(got[0].1["statsz"]["connections"], 1);
    assert_eq!(got[0].1["statsz"]["active_accounts"], 1);
}

#[test]
fn requests_across_shards_are_answered_once_from_shard_0() {
    let mut w = world();
    let admin = w.connect(1, "sys", "admin");
    w.input(1, admin, "SUB _R.> 1\r\nPING\r\n");
    w.take(1, admin);
    let _a = w.connect(0, "a", "a0");
    w.input(1, admin, "PUB $SYS.REQ.ACCOUNT.A.CONNZ _R.1 0\r\n\r\n");
    let got = w.messages(1, admin);
    assert_eq!(subjects(&got), ["_R.1"]);
    let data = &got[0].1["data"];
    assert_eq!(data["num_connections"], 1, "{data}");
    assert_eq!(data["connections"][0]["name"], "a0");
    // A filter naming another server: no answer at all.
    let body = r#"{"server_name":"other"}"#;
    w.input(
        1,
        admin,
        &format!("PUB $SYS.REQ.SERVER.PING.VARZ _R.2 {}\r\n{body}\r\n", body.len()),
    );
    assert!(w.messages(1, admin).is_empty());
    // After the shutdown announcement nothing is answered.
    w.sys.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
    w.input(1, admin, "PUB $SYS.REQ.SERVER.PING.IDZ _R.3 0\r\n\r\n");
    assert!(w.messages(1, admin).is_empty());
}

#[test]
fn a_user_info_request_is_answered_before_the_pong_that_follows_it() {
    let mut w = world();
    for shard in [0, 1] {
        // This world has no imports: the system account's user asks its direct subject.
        let a = w.connect(shard, "sys", "asker");
        // One read holds the request and the PING: the answer must come first, as it does
        // from nats-server (a PONG acknowledges everything sent before the PING).
        w.input(
            shard,
            a,
            "SUB _INBOX.u 1\r\nPUB $SYS.REQ.USER.SYS.INFO _INBOX.u 0\r\n\r\nPING\r\n",
        );
        let out = w.take(shard, a);
        let (msg, pong) = (out.find("MSG _INBOX.u 1 "), out.find("PONG\r\n"));
        assert!(msg.is_some() && pong.is_some() && msg < pong, "{out}");
    }
}
