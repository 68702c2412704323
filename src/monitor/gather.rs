//! Asking every shard for its part: a [`Plan`] is a function each shard runs on its own
//! thread (in a job, so no lock is taken on the message path) and a merge of the parts.
//! The same plan runs three ways: from the HTTP threads (awaiting the parts), from any
//! other thread (blocking), or from a shard itself (`ShardCore::gather`, for the system
//! account's services, which must never block a shard).

use super::{Context, MonitorError};
use crate::core::post::{Job, Post};
use crate::core::shard::ShardCore;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long monitoring waits for the shards before answering 503.
pub const SHARD_TIMEOUT: Duration = Duration::from_secs(5);

/// What a shard computes.
pub type PartFn<P> = Arc<dyn Fn(&mut ShardCore, Instant) -> P + Send + Sync>;
/// What combines the parts (in shard order).
pub type MergeFn<P, O> = Box<dyn FnOnce(Vec<P>) -> Result<O, MonitorError> + Send>;
/// What a shard-side caller gets (on the shard that asked).
pub type Done<O> = Box<dyn FnOnce(&mut ShardCore, Result<O, MonitorError>, Instant) + Send>;

/// A question for every shard and how to combine the answers.
pub struct Plan<P, O> {
    pub part: PartFn<P>,
    pub merge: MergeFn<P, O>,
}

impl<P: Send + 'static, O: Send + 'static> Plan<P, O> {
    pub fn new(
        part: impl Fn(&mut ShardCore, Instant) -> P + Send + Sync + 'static,
        merge: impl FnOnce(Vec<P>) -> Result<O, MonitorError> + Send + 'static,
    ) -> Self {
        Plan {
            part: Arc::new(part),
            merge: Box::new(merge),
        }
    }

    /// Run from a thread that may block (never a shard thread).
    pub fn run_blocking(self, ctx: &Context) -> Result<O, MonitorError> {
        let post = ctx.post()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        scatter(
            &post,
            self.part,
            Box::new(move |parts| {
                let _ = tx.send(parts);
            }),
        );
        match rx.recv_timeout(SHARD_TIMEOUT) {
            Ok(Some(parts)) => (self.merge)(parts),
            _ => Err(MonitorError::Unavailable),
        }
    }

    /// Run from async code (the HTTP server).
    pub async fn run_async(self, ctx: &Context) -> Result<O, MonitorError> {
        let post = ctx.post()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        scatter(
            &post,
            self.part,
            Box::new(move |parts| {
                let _ = tx.send(parts);
            }),
        );
        match tokio::time::timeout(SHARD_TIMEOUT, rx).await {
            Ok(Ok(Some(parts))) => (self.merge)(parts),
            _ => Err(MonitorError::Unavailable),
        }
    }

    /// Run from a shard: the parts are gathered with jobs, and `done` runs on this shard
    /// with the result.
    pub fn run_on_shard(self, core: &mut ShardCore, done: Done<O>, now: Instant) {
        let merge = self.merge;
        core.gather(
            self.part,
            Box::new(move |core: &mut ShardCore, parts: Vec<P>, now: Instant| done(core, merge(parts), now)),
            now,
        );
    }
}

/// Parts collected so far, how many are missing, and who gets them.
type Slots<P> = Arc<Mutex<(Vec<Option<P>>, usize, Option<Box<dyn FnOnce(Option<Vec<P>>) + Send>>)>>;

/// Post `part` to every shard; `done` gets the parts in shard order once all answered,
/// or `None` at once if a shard is gone.
fn scatter<P: Send + 'static>(post: &Arc<dyn Post>, part: PartFn<P>, done: Box<dyn FnOnce(Option<Vec<P>>) + Send>) {
    let n = post.shards();
    if n == 0 {
        done(Some(Vec::new()));
        return;
    }
    let slots: Slots<P> = Arc::new(Mutex::new(((0..n).map(|_| None).collect(), n, Some(done))));
    for shard in 0..n {
        let part = part.clone();
        let slots2 = slots.clone();
        let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
            let v = part(core, now);
            let mut g = slots2.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = g.0.get_mut(shard) {
                *slot = Some(v);
            }
            g.1 = g.1.saturating_sub(1);
            if g.1 == 0 {
                let parts: Vec<P> = g.0.drain(..).flatten().collect();
                if let Some(done) = g.2.take() {
                    drop(g);
                    done(Some(parts));
                }
            }
        });
        if !post.post(shard, job) {
            let mut g = slots.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(done) = g.2.take() {
                drop(g);
                done(None);
            }
            return;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::config::CoreConfig;
    use crate::core::shard::NoMesh;
    use crate::core::stats::Shared;
    use std::sync::mpsc::{channel, Sender};

    /// Shards on threads of their own, each building its core there (cores are not
    /// `Send`); `claimed` may exceed the threads to play a shard that is gone.
    pub(crate) struct Threads {
        txs: Vec<Mutex<Sender<Job>>>,
        claimed: usize,
    }

    impl Threads {
        pub(crate) fn start(n: usize, claimed: usize) -> Arc<Threads> {
            let shared = Arc::new(Shared::new(claimed));
            let cfg = Arc::new(CoreConfig::default());
            let mut txs = Vec::new();
            for i in 0..n {
                let (tx, rx) = channel::<Job>();
                let (shared, cfg) = (shared.clone(), cfg.clone());
                std::thread::spawn(move || {
                    let mut core = ShardCore::new(i, claimed, cfg, shared, Box::new(NoMesh));
                    while let Ok(job) = rx.recv() {
                        job(&mut core, Instant::now());
                    }
                });
                txs.push(Mutex::new(tx));
            }
            Arc::new(Threads { txs, claimed })
        }
    }

    impl Post for Threads {
        fn post(&self, shard: usize, job: Job) -> bool {
            match self.txs.get(shard) {
                Some(tx) => tx.lock().unwrap_or_else(|p| p.into_inner()).send(job).is_ok(),
                None => false,
            }
        }
        fn shards(&self) -> usize {
            self.claimed
        }
    }

    fn collect(post: Arc<dyn Post>, part: PartFn<usize>) -> Option<Vec<usize>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        scatter(
            &post,
            part,
            Box::new(move |p| {
                let _ = tx.send(p);
            }),
        );
        rx.recv_timeout(Duration::from_secs(5)).ok().flatten()
    }

    #[test]
    fn parts_arrive_in_shard_order_and_a_missing_shard_fails_fast() {
        let post: Arc<dyn Post> = Threads::start(3, 3);
        assert_eq!(
            collect(post, Arc::new(|c: &mut ShardCore, _| c.index() * 10)),
            Some(vec![0, 10, 20])
        );
        let post: Arc<dyn Post> = Threads::start(2, 3);
        assert_eq!(collect(post, Arc::new(|c: &mut ShardCore, _| c.index())), None);
    }
}
