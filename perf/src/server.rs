//! The system under test: either a server we start as a child process on a free loopback
//! port, or an already running one named by address (loopback only).

use std::fs::{self, File};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::client::{Conn, Credentials};
use crate::error::{PerfError, Result};

/// How long a started server gets to accept its first client.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// Parses `host[:port]` or `nats://host[:port]` and refuses anything that is not loopback.
pub fn resolve_loopback(target: &str) -> Result<SocketAddr> {
    let bad = |reason: &str| PerfError::BadAddress {
        addr: target.to_string(),
        reason: reason.to_string(),
    };
    let hostport = target.strip_prefix("nats://").unwrap_or(target);
    let hostport = hostport.trim_end_matches('/');
    if hostport.is_empty() {
        return Err(bad("empty"));
    }
    let with_port = if hostport.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !(hostport.starts_with('[') && hostport.ends_with(']'))
    {
        hostport.to_string()
    } else {
        format!("{hostport}:4222")
    };
    let addrs: Vec<SocketAddr> = with_port.to_socket_addrs().map_err(|e| bad(&e.to_string()))?.collect();
    let first = *addrs.first().ok_or_else(|| bad("resolves to no address"))?;
    if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(PerfError::NotLoopback(format!("{target} ({})", a.ip())));
    }
    Ok(first)
}

/// A free TCP port on 127.0.0.1 (bound and released; a small race is accepted).
///
/// Never the same port twice in one process: the kernel may hand a just-released port to
/// the next `bind(0)`, and two servers started side by side (tests run in parallel) must
/// not be given the same one before either has bound it.
pub fn free_port() -> Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..64 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
    Err(PerfError::Io(std::io::Error::other("no unused loopback port found")))
}

/// A server process we started; it is stopped when dropped.
pub struct ServerProcess {
    child: Option<Child>,
    addr: SocketAddr,
    bin: PathBuf,
    log: PathBuf,
    /// Who the readiness check logs in as (servers whose config requires authentication).
    login: Option<Credentials>,
}

impl ServerProcess {
    /// Starts `bin -a 127.0.0.1 -p <free port> <extra...>` and waits until it completes a NATS
    /// handshake, logged in as `login` when given.
    pub fn start(bin: &Path, extra: &[String], login: Option<&Credentials>) -> Result<ServerProcess> {
        let fail = |reason: String| PerfError::ServerProcess {
            bin: bin.to_path_buf(),
            reason,
        };
        if !bin.is_file() {
            return Err(fail("no such file (build it, or pass the path)".into()));
        }
        let port = free_port()?;
        let mut addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut extra = extra.to_vec();
        // A configuration given already (`-c <file>`) is included by the transport's.
        let given = extra
            .iter()
            .position(|a| a == "-c")
            .and_then(|i| extra.get(i + 1).cloned());
        let include = given.as_deref().map(|f| {
            std::path::Path::new(f)
                .canonicalize()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| f.to_string())
        });
        if let Some((args, ws)) = crate::transport::server_args(free_port()?, include.as_deref())? {
            if let Some(i) = extra.iter().position(|a| a == "-c") {
                extra.drain(i..(i + 2).min(extra.len()));
            }
            extra.extend(args);
            if let Some(ws) = ws {
                addr = SocketAddr::from(([127, 0, 0, 1], ws));
            }
        }
        let log = std::env::temp_dir().join(format!("rnats-perf-{}-{port}.log", std::process::id()));
        let out = File::create(&log).map_err(|e| fail(format!("cannot create log {}: {e}", log.display())))?;
        let err = out.try_clone().map_err(|e| fail(e.to_string()))?;
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(&extra)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        let mut server = ServerProcess {
            child: Some(child),
            addr,
            bin: bin.to_path_buf(),
            log,
            login: login.cloned(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_alive()?;
            match Conn::connect_as(self.addr, Duration::from_secs(2), self.login.as_ref(), b"") {
                Ok(_) => return Ok(()),
                Err(PerfError::Connect { .. }) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    return Err(PerfError::ServerProcess {
                        bin: self.bin.clone(),
                        reason: format!("not ready on {}: {e}{}", self.addr, self.log_tail()),
                    })
                }
            }
        }
    }

    /// Fails if the process has exited (crash detection between runs).
    pub fn check_alive(&mut self) -> Result<()> {
        let status = match self.child.as_mut() {
            Some(c) => c.try_wait()?,
            None => None,
        };
        match status {
            None => Ok(()),
            Some(st) => Err(PerfError::ServerProcess {
                bin: self.bin.clone(),
                reason: format!("exited: {st}{}", self.log_tail()),
            }),
        }
    }

    /// The server's client address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join("\n  ");
        if tail.is_empty() {
            String::new()
        } else {
            format!("\n  server log tail:\n  {tail}")
        }
    }

    /// Stops the server: SIGTERM, then SIGKILL if it does not exit in time. Returns an error
    /// text if it had already died.
    pub fn stop(&mut self) -> Option<String> {
        let mut child = self.child.take()?;
        let early = match child.try_wait() {
            Ok(Some(st)) => Some(format!("server had exited before stop: {st}{}", self.log_tail())),
            _ => None,
        };
        if early.is_none() {
            #[cfg(unix)]
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(&self.log);
        early
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where a scenario sends its load, and how to watch the server.
pub struct Target {
    pub addr: SocketAddr,
    /// Server pid for CPU/RSS accounting (ours, or given with `--pid`).
    pub pid: Option<u32>,
    /// Set when we started the server.
    pub process: Option<ServerProcess>,
}

impl Target {
    /// A server started by us (see [`ServerProcess::start`]).
    pub fn start(bin: &Path, extra: &[String], login: Option<&Credentials>) -> Result<Target> {
        let p = ServerProcess::start(bin, extra, login)?;
        Ok(Target {
            addr: p.addr(),
            pid: p.pid(),
            process: Some(p),
        })
    }

    /// An already running server.
    pub fn external(addr: &str, pid: Option<u32>) -> Result<Target> {
        Ok(Target {
            addr: resolve_loopback(addr)?,
            pid,
            process: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        assert_eq!(resolve_loopback("127.0.0.1:4333").unwrap().port(), 4333);
        assert_eq!(resolve_loopback("nats://127.0.0.1").unwrap().port(), 4222);
        assert!(resolve_loopback("localhost:4222").unwrap().ip().is_loopback());
        assert!(resolve_loopback("[::1]:4222").unwrap().ip().is_loopback());
        assert!(matches!(
            resolve_loopback("10.0.0.1:4222"),
            Err(PerfError::NotLoopback(_))
        ));
        assert!(matches!(resolve_loopback("8.8.8.8"), Err(PerfError::NotLoopback(_))));
        assert!(resolve_loopback("").is_err());
    }

    #[test]
    fn missing_binary_is_a_clear_error() {
        let err = ServerProcess::start(Path::new("/nonexistent/server"), &[], None)
            .err()
            .unwrap();
        assert!(err.to_string().contains("no such file"), "{err}");
    }
}
