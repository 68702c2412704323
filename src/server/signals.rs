//! Signals, as nats-server handles them (`server/signal.go`):
//! SIGINT stops at once; SIGTERM stops unless lame duck mode is under way; SIGHUP reloads
//! the config file; SIGUSR1 reopens the log file; SIGUSR2 enters lame duck mode. Each is
//! logged as `Trapped "<Go's signal name>" signal`.
//!
//! And the other side: `--signal <command>[=<pid|pidfile>]` sends one of them to a
//! running server (`ldm`, `stop`, `quit`, `term`, `reopen`, `reload`); without a pid the
//! single running server is found with `pgrep <executable name>`.

use super::lame_duck::LameDuck;
use super::Server;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the loop reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sig {
    Interrupt,
    Terminate,
    Hangup,
    User1,
    User2,
    /// Not a signal: a `$SYS.REQ.SERVER.<id>.RELOAD` request waits (see [`run`]).
    Reload,
    /// Not a signal: the server asked itself to stop ([`request_shutdown`]).
    Shutdown,
}

impl Sig {
    /// Go's `os.Signal` string.
    pub fn go_name(self) -> &'static str {
        match self {
            Sig::Interrupt => "interrupt",
            Sig::Terminate => "terminated",
            Sig::Hangup => "hangup",
            Sig::User1 => "user defined signal 1",
            Sig::User2 => "user defined signal 2",
            Sig::Reload => "reload request",
            Sig::Shutdown => "shutdown",
        }
    }
}

/// Signals delivered to the process, as a channel.
pub struct Signals {
    rx: std::sync::mpsc::Receiver<Sig>,
    /// For the loop's own wake-ups (reload requests).
    tx: std::sync::mpsc::Sender<Sig>,
}

/// The channel's sender, for [`request_shutdown`].
static INTERNAL: std::sync::Mutex<Option<std::sync::mpsc::Sender<Sig>>> = std::sync::Mutex::new(None);

/// Shut the server down from inside (OCSP stapling found its certificate revoked in a
/// mode that requires it), as if terminated but without a "Trapped" line. Nothing
/// happens where no signal loop runs (embedded servers).
pub fn request_shutdown() {
    if let Ok(g) = INTERNAL.lock() {
        if let Some(tx) = g.as_ref() {
            let _ = tx.send(Sig::Shutdown);
        }
    }
}

fn keep_sender(tx: &std::sync::mpsc::Sender<Sig>) {
    if let Ok(mut g) = INTERNAL.lock() {
        *g = Some(tx.clone());
    }
}

impl Signals {
    /// Start catching signals (before the server starts, so none is missed).
    #[cfg(unix)]
    pub fn install() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
        let mut it = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2])?;
        let (tx, rx) = std::sync::mpsc::channel();
        let own = tx.clone();
        keep_sender(&tx);
        std::thread::Builder::new().name("signals".into()).spawn(move || {
            for s in it.forever() {
                let sig = match s {
                    SIGINT => Sig::Interrupt,
                    SIGTERM => Sig::Terminate,
                    SIGHUP => Sig::Hangup,
                    SIGUSR1 => Sig::User1,
                    SIGUSR2 => Sig::User2,
                    _ => continue,
                };
                if tx.send(sig).is_err() {
                    return;
                }
            }
        })?;
        Ok(Signals { rx, tx: own })
    }

    /// Without Unix signals nothing arrives; the server runs until killed.
    #[cfg(not(unix))]
    pub fn install() -> std::io::Result<Signals> {
        let (tx, rx) = std::sync::mpsc::channel();
        keep_sender(&tx);
        Ok(Signals { rx, tx })
    }
}

/// Serve until a signal (or the end of lame duck mode) stops the server. `flags` are the
/// command-line arguments, applied over the config file on reload.
pub fn run(mut srv: Server, signals: Signals, flags: &[String]) {
    let mut ldm: Option<LameDuck> = None;
    // `$SYS.REQ.SERVER.<id>.RELOAD` requests are served here, between signals.
    let reloads: Arc<Mutex<Vec<crate::system::ReloadDone>>> = Arc::default();
    {
        let (queue, tx) = (reloads.clone(), Mutex::new(signals.tx.clone()));
        srv.set_reloader(Arc::new(move |done: crate::system::ReloadDone| {
            queue.lock().unwrap_or_else(|p| p.into_inner()).push(done);
            let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send(Sig::Reload);
        }));
    }
    loop {
        let sig = match ldm.as_ref().and_then(LameDuck::deadline) {
            Some(at) => match signals.rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(s) => Some(s),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return srv.shutdown(),
            },
            None => match signals.rx.recv() {
                Ok(s) => Some(s),
                Err(_) => return srv.shutdown(),
            },
        };
        let Some(sig) = sig else {
            if ldm.as_mut().is_some_and(|l| l.step(&srv, Instant::now())) {
                return srv.shutdown();
            }
            continue;
        };
        if sig == Sig::Reload {
            let waiting = std::mem::take(&mut *reloads.lock().unwrap_or_else(|p| p.into_inner()));
            for done in waiting {
                done(srv.reload(flags).map_err(|e| e.to_string()));
            }
            continue;
        }
        if sig == Sig::Shutdown {
            return srv.shutdown();
        }
        tracing::info!("Trapped {:?} signal", sig.go_name());
        match sig {
            Sig::Reload => {}
            Sig::Shutdown => return srv.shutdown(),
            Sig::Interrupt => return srv.shutdown(),
            Sig::Terminate if !srv.in_lame_duck() => return srv.shutdown(),
            Sig::Terminate => {}
            Sig::Hangup => {
                if let Err(e) = srv.reload(flags) {
                    tracing::error!("Failed to reload server configuration: {e}");
                }
            }
            Sig::User1 => super::logging::reopen(),
            Sig::User2 => {
                if srv.in_lame_duck() {
                    continue;
                }
                match LameDuck::start(&mut srv, Instant::now()) {
                    Some(l) => ldm = Some(l),
                    None => return srv.shutdown(),
                }
            }
        }
    }
}

/// `--signal <command>[=<pid|pidfile>]`: send the signal; the error text is nats-server's.
#[cfg(unix)]
pub fn send_command(spec: &str) -> Result<(), String> {
    let parts: Vec<&str> = spec.split('=').collect();
    let mut pid = String::new();
    match parts.len() {
        1 => {}
        2 => pid = maybe_read_pid_file(parts.get(1).copied().unwrap_or_default()),
        _ => {
            let rest = parts.get(2..).unwrap_or_default().join(" ");
            return Err(format!("invalid signal parameters: [{rest}]"));
        }
    }
    process_signal(parts.first().copied().unwrap_or_default(), &pid)
}

/// A pid file's content if `s` names a readable file, else `s` itself.
#[cfg(unix)]
fn maybe_read_pid_file(s: &str) -> String {
    std::fs::read_to_string(s).unwrap_or_else(|_| s.to_string())
}

/// The executable's name: what `pgrep` looks for, and the syslog tag.
#[cfg(unix)]
pub(crate) fn process_name() -> String {
    std::env::args()
        .next()
        .and_then(|a| a.rsplit('/').find(|p| !p.is_empty()).map(str::to_string))
        .unwrap_or_else(|| "nats-server".into())
}

/// Go's `strconv.Atoi`.
#[cfg(unix)]
fn atoi(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(unix)]
fn process_signal(command: &str, pid_expr: &str) -> Result<(), String> {
    let name = process_name();
    let is_glob = pid_expr.ends_with('*');
    let pid_str = pid_expr.strip_suffix('*').unwrap_or(pid_expr);
    let mut pids = Vec::new();
    if !pid_str.is_empty() {
        pids.push(atoi(pid_str).ok_or_else(|| format!("invalid pid: {pid_str}"))?);
    }
    if pid_str.is_empty() || is_glob {
        pids = resolve_pids(&name)?;
    }
    if pids.len() > 1 && !is_glob {
        let mut msg = format!("multiple {name} processes running:");
        for p in &pids {
            msg.push_str(&format!("\n{p}"));
        }
        return Err(msg);
    }
    if pids.is_empty() {
        return Err(format!("no {name} processes running"));
    }
    let signum = match command {
        "stop" => libc::SIGKILL,
        "quit" => libc::SIGINT,
        "reopen" => libc::SIGUSR1,
        "reload" => libc::SIGHUP,
        "ldm" => libc::SIGUSR2,
        "term" => libc::SIGTERM,
        other => return Err(format!("unknown signal {other:?}")),
    };
    let mut errs = String::new();
    for pid in pids {
        let s = pid.to_string();
        if !pid_str.is_empty() && s != pid_str && (!is_glob || !s.starts_with(pid_str)) {
            continue;
        }
        // SAFETY: kill(2) with a pid and signal number; no memory is involved.
        if unsafe { libc::kill(pid, signum) } != 0 {
            let e = std::io::Error::last_os_error();
            errs.push_str(&format!(
                "\nsignal {command:?} {pid}: {}",
                super::logging::go_os_error(&e)
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// Every running process with our name except this one (`pgrep <name>`).
#[cfg(unix)]
fn resolve_pids(name: &str) -> Result<Vec<i32>, String> {
    let unresolved = || "unable to resolve pid, try providing one".to_string();
    let out = std::process::Command::new("pgrep")
        .arg(name)
        .output()
        .map_err(|_| unresolved())?;
    // pgrep exits 1 when nothing matches; anything else without output is a failure.
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(unresolved());
    }
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).split('\n') {
        if line.is_empty() {
            continue;
        }
        let pid = atoi(line).ok_or_else(unresolved)?;
        if pid != me {
            pids.push(pid);
        }
    }
    Ok(pids)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn command_errors_like_the_reference() {
        assert_eq!(
            send_command("reload=1=2").unwrap_err(),
            "invalid signal parameters: [2]"
        );
        assert_eq!(send_command("reload=abc").unwrap_err(), "invalid pid: abc");
        assert_eq!(send_command("foo=999999").unwrap_err(), "unknown signal \"foo\"");
        assert_eq!(
            send_command("reload=999999").unwrap_err(),
            "\nsignal \"reload\" 999999: no such process"
        );
    }
}
