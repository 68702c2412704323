//! The system account's services and events (FEATURES.md §19): internal subscriptions in
//! the system account that answer `$SYS.REQ.*` requests, and the events the server
//! publishes there.
//!
//! - [`accounts`]: the system account's exports and every account's imports from it.
//! - [`envelope`]: the `{"server": ..., "data": ..., "error": ...}` response envelope and
//!   the server description every response and event carries.
//! - [`user_info`]: `$SYS.REQ.USER.INFO`, answered on the requester's own shard.
//! - [`claims`]: operator mode's account JWT services (`$SYS.REQ.CLAIMS.*`, account claim
//!   updates and lookups), server-wide on shard 0.
//! - [`respond`]: how a `$SYS.REQ` request is decoded, filtered and answered (nats-server's
//!   `zReq`), with [`compress`] for `Accept-Encoding`.
//! - [`server_reqs`]: `$SYS.REQ.SERVER.PING[.<X>]`, `$SYS.REQ.SERVER.<id>.<X>` and the
//!   `RELOAD`, `KICK`, `LDM` actions.
//! - [`account_reqs`]: `$SYS.REQ.ACCOUNT.<acc>.<X>`, `.PING.STATZ`, `NSUBS`,
//!   `$SYS.DEBUG.SUBSCRIBERS`.
//! - [`statsz`]: the server's `STATSZ` and the cadence of its broadcast.
//! - [`events`]: client connect, disconnect and authentication-failure events, observed
//!   on each shard; [`conns`]: the account connection counts (`SERVER.CONNS`);
//!   [`nuid`]: event ids.
//! - [`timer`]: the thread that keeps the periodic events' clocks.
//!
//! Ownership: services are internal subscriptions of the shards (`core::shard::internal`);
//! per-connection services subscribe locally on every shard, server-wide ones on shard 0
//! (the one that also hosts the meta group later), which asks the other shards for their
//! parts with jobs. Events are built on the shard where the connection lives, only when
//! someone listens; account connection counts are merged on shard 0. [`System`] is what
//! they share: it is only locked off the message path (events, requests, timers).

pub mod account_reqs;
pub mod accounts;
pub mod claims;
pub mod compress;
pub mod conns;
pub mod envelope;
pub mod events;
pub mod nuid;
pub mod respond;
pub mod server_reqs;
pub mod statsz;
pub mod timer;
pub mod user_info;

use crate::core::post::{Job, Post};
use crate::core::shard::ShardCore;
use envelope::ServerIdentity;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the services need to know about the server.
pub struct SystemContext {
    pub server: ServerIdentity,
}

/// Where a reload's outcome goes (any thread).
pub type ReloadDone = Box<dyn FnOnce(Result<(), String>) + Send>;
/// Asks the server's main loop to reload its configuration (`$SYS.REQ.SERVER.<id>.RELOAD`).
pub type Reloader = Arc<dyn Fn(ReloadDone) + Send + Sync>;

/// The system services' shared state.
pub struct System {
    /// The server's description and the message sequence.
    pub identity: Arc<SystemContext>,
    /// Monitoring's answers (the `$SYS` requests reuse its builders).
    pub monitor: Arc<crate::monitor::Context>,
    /// Lame duck mode or shutdown announced: nats-server's system sender has stopped, so
    /// no event or response goes out any more.
    stopped: AtomicBool,
    /// Claims services are installed (operator mode): they own the claim update subjects.
    pub operator_mode: bool,
    pub(crate) conns: Mutex<conns::Hub>,
    pub(crate) statsz: Mutex<statsz::Clock>,
    cpu: Mutex<crate::monitor::varz::CpuSampler>,
    reloader: Mutex<Option<Reloader>>,
    pub(crate) timer: timer::Wake,
    /// The CPUs the process may use (taken on the main thread: shard threads are pinned
    /// to one each).
    pub cores: usize,
}

impl System {
    pub fn new(
        identity: Arc<SystemContext>,
        monitor: Arc<crate::monitor::Context>,
        operator_mode: bool,
    ) -> Arc<System> {
        Arc::new(System {
            identity,
            monitor,
            stopped: AtomicBool::new(false),
            operator_mode,
            conns: Mutex::new(conns::Hub::default()),
            statsz: Mutex::new(statsz::Clock::new(Instant::now())),
            cpu: Mutex::new(crate::monitor::varz::CpuSampler::default()),
            reloader: Mutex::new(None),
            timer: timer::Wake::default(),
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        })
    }

    /// The server's description.
    pub fn server(&self) -> &ServerIdentity {
        &self.identity.server
    }

    /// Nothing is published any more (after the lame duck or shutdown event).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Let the main loop serve `RELOAD` requests.
    pub fn set_reloader(&self, r: Reloader) {
        *self.reloader.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }

    pub(crate) fn reloader(&self) -> Option<Reloader> {
        self.reloader.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// CPU use since the previous STATSZ, in percent.
    pub(crate) fn cpu_percent(&self) -> f64 {
        self.cpu.lock().unwrap_or_else(|p| p.into_inner()).sample()
    }
}

/// Run `job` on every shard and wait until each has run it (or 10 s passed).
pub(crate) fn on_every_shard(post: &dyn Post, job: impl Fn(&mut ShardCore, Instant) + Send + Sync + 'static) -> bool {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let job = Arc::new(job);
    let n = post.shards();
    for shard in 0..n {
        let job = job.clone();
        let tx = tx.clone();
        let j: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
            job(core, now);
            // The answer comes before the step ends: what the job changed is counted first.
            core.publish_counters();
            let _ = tx.send(());
        });
        if !post.post(shard, j) {
            return false;
        }
    }
    drop(tx);
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        if rx.recv_timeout(left).is_err() {
            return false;
        }
    }
    true
}

/// Subscribe the system services on every shard, install the event observers, start the
/// timer thread, and wait until every shard has them (so that the first client can use
/// them). Without a system account only the observers are installed (they stay quiet).
pub fn install(post: Arc<dyn Post>, sys: Arc<System>) {
    let s2 = sys.clone();
    let ok = on_every_shard(post.as_ref(), move |core: &mut ShardCore, now: Instant| {
        core.set_conn_events(Some(Box::new(events::EventHooks::new(s2.clone()))));
        let Some(acc) = core.account_table().system() else {
            return;
        };
        user_info::subscribe(core, acc, s2.clone(), now);
        if core.index() == 0 {
            server_reqs::subscribe(core, acc, &s2, now);
            account_reqs::subscribe(core, acc, &s2, now);
        }
    });
    if !ok {
        tracing::warn!("system services not installed on every shard");
    }
    if sys.monitor.system_account().is_some() {
        timer::start(sys, post);
    }
}

/// Publish `$SYS.SERVER.<id>.<what>` (`LAMEDUCK`, `SHUTDOWN`: the server's description)
/// and stop the system sender, as nats-server does: nothing is published afterwards. Waits
/// until the announcement is queued on every client that listens.
pub fn announce_stop(post: &dyn Post, sys: &Arc<System>, what: &str) {
    if sys.stopped.swap(true, Ordering::SeqCst) {
        return;
    }
    sys.timer.stop();
    let subject = format!("$SYS.SERVER.{}.{what}", sys.server().id);
    let s2 = sys.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
        if let Some(acc) = core.account_table().system() {
            let body = crate::proto::gojson::to_vec(&s2.server().info());
            core.publish_internal(acc, subject.as_bytes(), b"", None, &body, now);
        }
        let _ = tx.send(());
    });
    if !post.post(0, job) || rx.recv_timeout(std::time::Duration::from_secs(2)).is_err() {
        return;
    }
    // What shard 0 staged for the others is in their rings now: have them deliver it.
    on_every_shard(post, |core: &mut ShardCore, now: Instant| {
        core.poll_mesh(now);
    });
}

#[cfg(test)]
mod tests;
