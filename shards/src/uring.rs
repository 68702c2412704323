//! glommio shards (Linux, feature `uring`): probing io_uring and starting pinned executors.
//!
//! glommio panics inside its executor thread when io_uring is blocked (seccomp profiles of
//! Docker and containerd, `kernel.io_uring_disabled`), so [`probe`] sets up a small ring
//! and round-trips a NOP first; callers fall back to mio when it fails.

use std::future::Future;
use std::io;
use std::time::Duration;

pub use glommio::ExecutorJoinHandle;

/// Can io_uring really be used here? Sets up an 8-entry ring and round-trips a NOP.
pub fn probe() -> io::Result<()> {
    let mut ring = io_uring::IoUring::new(8)?;
    let nop = io_uring::opcode::Nop::new().build().user_data(7);
    // SAFETY: a NOP entry references no buffers, so nothing must outlive the submission.
    unsafe {
        ring.submission()
            .push(&nop)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    ring.submit_and_wait(1)?;
    let done = ring.completion().next().map(|c| c.user_data());
    match done {
        Some(7) => Ok(()),
        _ => Err(io::Error::other("io_uring NOP did not complete")),
    }
}

/// glommio refuses to start below this RLIMIT_MEMLOCK, whatever the capabilities.
pub const MIN_MEMLOCK: u64 = 512 * 1024;

/// The soft RLIMIT_MEMLOCK in bytes (`u64::MAX` when unlimited).
pub fn memlock_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass; no other memory is touched.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    }
}

/// Registered I/O memory per executor: glommio registers it in three rings, each charged
/// against RLIMIT_MEMLOCK for unprivileged users, so keep all shards under the limit.
pub fn io_memory_per_shard(shards: usize) -> usize {
    let limit = memlock_limit();
    let per = limit / (4 * shards.max(1) as u64);
    per.clamp(64 * 1024, 1024 * 1024) as usize
}

/// Settings for one executor.
#[derive(Clone, Debug)]
pub struct ExecutorConfig {
    /// CPU to pin to, or None to leave the thread unpinned.
    pub cpu: Option<usize>,
    pub name: String,
    pub io_memory: usize,
    /// Busy-poll this long before sleeping in the kernel (zero: sleep at once).
    pub spin_before_park: Duration,
}

/// Start one glommio executor running the future made by `make`, on its own thread.
pub fn spawn_executor<G, F, T>(cfg: ExecutorConfig, make: G) -> io::Result<ExecutorJoinHandle<T>>
where
    G: FnOnce() -> F + Send + 'static,
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let placement = match cfg.cpu {
        Some(cpu) => glommio::Placement::Fixed(cpu),
        None => glommio::Placement::Unbound,
    };
    let mut b = glommio::LocalExecutorBuilder::new(placement)
        .name(&cfg.name)
        .io_memory(cfg.io_memory)
        .preempt_timer(Duration::from_millis(10));
    if !cfg.spin_before_park.is_zero() {
        b = b.spin_before_park(cfg.spin_before_park);
    }
    b.spawn(make).map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_memory_is_bounded() {
        let m = io_memory_per_shard(4);
        assert!((64 * 1024..=1024 * 1024).contains(&m));
    }

    #[test]
    fn executor_runs_a_future() {
        if probe().is_err() {
            eprintln!("io_uring unavailable here; skipping");
            return;
        }
        let h = spawn_executor(
            ExecutorConfig {
                cpu: None,
                name: "t".into(),
                io_memory: io_memory_per_shard(1),
                spin_before_park: Duration::ZERO,
            },
            || async { 41 + 1 },
        )
        .unwrap();
        assert_eq!(h.join().unwrap(), 42);
    }
}
