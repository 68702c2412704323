//! CPUs this process may use.
//!
//! The machine's CPU count is the wrong number for a pinned, thread-per-core server:
//! `taskset`, cgroup cpusets and CPU quotas all shrink what we may actually use. The
//! shard count is `min(available_parallelism, |allowed CPUs|)` and shards are pinned
//! only inside the allowed set.

/// CPUs in this thread's affinity mask, in ascending order. On platforms without
/// affinity masks, `0..available_parallelism`.
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        if let Some(cpus) = linux_affinity() {
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..parallelism()).collect()
}

fn parallelism() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[cfg(target_os = "linux")]
fn linux_affinity() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set, and
    // sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads the set, and every index is below CPU_SETSIZE.
    Some((0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// The default number of shards: one per CPU this process may actually use.
pub fn default_shard_count() -> usize {
    parallelism().min(allowed_cpus().len()).max(1)
}

/// Run `f` on a new thread named `name`, pinned to `cpu` when given and permitted.
pub fn spawn_pinned<F, T>(name: String, cpu: Option<usize>, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new().name(name).spawn(move || {
        if let Some(cpu) = cpu {
            pin_current_thread(cpu);
        }
        f()
    })
}

/// Pin the calling thread to one CPU. Returns false where pinning is unsupported
/// or refused; the caller keeps running unpinned.
pub fn pin_current_thread(cpu: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as above, a zeroed cpu_set_t is an empty set; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return false;
        }
        unsafe { libc::CPU_SET(cpu, &mut set) };
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_count_is_within_allowed_cpus() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let n = default_shard_count();
        assert!(n >= 1 && n <= cpus.len());
    }
}
