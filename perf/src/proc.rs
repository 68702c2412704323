//! Server process accounting from `/proc/<pid>/stat` (CPU) and `/proc/<pid>/status` (RSS),
//! and raising our own file-descriptor limit for the `conns` scenario.

use std::fs;

/// CPU time and resident memory of a process at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// utime + stime, in seconds.
    pub cpu_s: f64,
    /// VmRSS in KiB.
    pub rss_kb: u64,
}

/// Reads a sample for `pid`, or `None` if the process is gone or /proc is unavailable.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ticks = parse_stat_ticks(&stat)?;
    Some(ProcSample {
        cpu_s: ticks as f64 / clock_ticks_per_sec(),
        rss_kb: parse_vm_rss_kb(&status)?,
    })
}

/// utime + stime (fields 14 and 15) from a `/proc/<pid>/stat` line. The command name (field 2)
/// is in parentheses and may contain spaces, so fields are counted after the last `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_ascii_whitespace();
    // After ")" come field 3 (state) onwards: utime is field 14 → index 11 here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` in KiB from `/proc/<pid>/status`.
pub fn parse_vm_rss_kb(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// `sysconf(_SC_CLK_TCK)`, the unit of the stat CPU fields (100 on every common Linux).
#[cfg(unix)]
pub fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions and only reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Without /proc (non-Unix), CPU figures are not read anyway.
#[cfg(not(unix))]
pub fn clock_ticks_per_sec() -> f64 {
    100.0
}

/// `rlim_t` is unsigned on Linux and macOS, signed on the BSDs.
#[cfg(unix)]
#[allow(clippy::useless_conversion)]
fn rlim_u64(v: libc::rlim_t) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// No descriptor limit to raise outside Unix; report a typical default.
#[cfg(not(unix))]
pub fn raise_fd_limit() -> u64 {
    8192
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (children such as a started server
/// inherit it). Returns the resulting soft limit.
#[cfg(unix)]
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit struct for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `want` is a valid rlimit struct; failure leaves the limit unchanged.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return rlim_u64(want.rlim_cur);
        }
    }
    rlim_u64(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_comm_with_spaces() {
        let stat = "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 555 0 0";
        assert_eq!(parse_stat_ticks(stat), Some(325));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn vm_rss() {
        let status = "Name:\tx\nVmPeak:\t  1000 kB\nVmRSS:\t    4242 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kb(status), Some(4242));
        assert_eq!(parse_vm_rss_kb("Name: x\n"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn own_process_sample() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_kb > 0);
        assert!(s.cpu_s >= 0.0);
    }
}
