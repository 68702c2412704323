//! Logging in nats-server's format, through `tracing`:
//! `[pid] 2006/01/02 15:04:05.000000 [INF] message` (without the time when `logtime` is
//! off), to stderr, a log file (with size-based rotation) or syslog. Levels map to INF,
//! WRN, ERR, DBG and TRC; `-D` enables debug and `-V` trace independently, as in the
//! reference. The output can be changed at run time (reload, log reopen).
//!
//! - `mod.rs`: the `tracing` layer, line format, configuration and reopen.
//! - `rotate`: the log file with `log_size_limit` rotation and `logfile_max_num` purge.
//! - `syslog`: local and remote syslog in Go's `log/syslog` formats.
//! - `time`: calendar fields and Go's time formats.

mod rotate;
#[cfg(unix)]
mod syslog;
mod time;

pub use conf::go_os_error;
use time::write_timestamp;
pub use time::{civil_utc, timestamp};

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Where and how to log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogConfig {
    pub debug: bool,
    pub trace: bool,
    pub logtime: bool,
    pub utc: bool,
    /// Log file; stderr (or syslog) when empty.
    pub file: String,
    /// Rotate the file past this many bytes (0: never).
    pub size_limit: i64,
    /// Rotated files to keep, the current one included (0: all).
    pub max_num: i64,
    pub syslog: bool,
    /// `udp://host:port`, `tcp://host:port` or `unix:///path`.
    pub remote_syslog: String,
}

impl LogConfig {
    pub fn from_options(o: &crate::server::options::Options) -> LogConfig {
        LogConfig {
            debug: o.debug,
            trace: o.trace,
            logtime: o.logtime,
            utc: o.logtime_utc,
            file: o.log_file.clone(),
            size_limit: o.log_size_limit,
            max_num: o.log_max_num,
            syslog: o.syslog,
            remote_syslog: o.remote_syslog.clone(),
        }
    }

    /// Same destination (so a reload need not reopen it).
    fn same_output(&self, other: &LogConfig) -> bool {
        self.file == other.file && self.syslog == other.syslog && self.remote_syslog == other.remote_syslog
    }
}

/// A log output that could not be opened. The texts are Go's.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("error opening file: open {path}: {err}")]
    File { path: String, err: String },
    #[error("error connecting to syslog: {0:?}")]
    Syslog(String),
    #[error("error invalid network type: {0:?}")]
    Network(String),
}

/// How each line starts: `[pid] ` and the time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineFormat {
    pub pid: u32,
    pub logtime: bool,
    pub utc: bool,
}

impl LineFormat {
    fn of(cfg: &LogConfig) -> LineFormat {
        LineFormat {
            pid: std::process::id(),
            logtime: cfg.logtime,
            utc: cfg.utc,
        }
    }

    /// `[pid] date time [LVL] msg` and `eol` (the time only with `logtime`).
    pub fn line(&self, lvl: Lvl, colors: bool, msg: &str, eol: &str) -> String {
        let mut s = String::with_capacity(48 + msg.len());
        let _ = write!(s, "[{}] ", self.pid);
        if self.logtime {
            write_timestamp(&mut s, self.utc);
            s.push(' ');
        }
        s.push_str(lvl.label(colors));
        s.push_str(msg);
        s.push_str(eol);
        s
    }
}

enum Output {
    Stderr {
        colors: bool,
    },
    File(rotate::RotatingFile),
    #[cfg(unix)]
    Syslog(syslog::Syslog),
}

struct Inner {
    out: Output,
    fmt: LineFormat,
    cfg: LogConfig,
}

struct Logger {
    debug: AtomicBool,
    trace: AtomicBool,
    inner: Mutex<Inner>,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// The five levels and FTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lvl {
    Fatal,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Lvl {
    fn of(level: &Level) -> Lvl {
        match *level {
            Level::ERROR => Lvl::Error,
            Level::WARN => Lvl::Warn,
            Level::INFO => Lvl::Info,
            Level::DEBUG => Lvl::Debug,
            Level::TRACE => Lvl::Trace,
        }
    }

    pub fn label(self, colors: bool) -> &'static str {
        match (self, colors) {
            (Lvl::Fatal, false) => "[FTL] ",
            (Lvl::Error, false) => "[ERR] ",
            (Lvl::Warn, false) => "[WRN] ",
            (Lvl::Info, false) => "[INF] ",
            (Lvl::Debug, false) => "[DBG] ",
            (Lvl::Trace, false) => "[TRC] ",
            (Lvl::Fatal, true) => "[\x1b[31mFTL\x1b[0m] ",
            (Lvl::Error, true) => "[\x1b[31mERR\x1b[0m] ",
            (Lvl::Warn, true) => "[\x1b[0;93mWRN\x1b[0m] ",
            (Lvl::Info, true) => "[\x1b[32mINF\x1b[0m] ",
            (Lvl::Debug, true) => "[\x1b[36mDBG\x1b[0m] ",
            (Lvl::Trace, true) => "[\x1b[33mTRC\x1b[0m] ",
        }
    }
}

fn open(cfg: &LogConfig) -> Result<Output, LogError> {
    if !cfg.file.is_empty() {
        let f = rotate::RotatingFile::open(&cfg.file, cfg.max_num).map_err(|e| LogError::File {
            path: cfg.file.clone(),
            err: go_os_error(&e),
        })?;
        return Ok(Output::File(f));
    }
    #[cfg(unix)]
    {
        if !cfg.remote_syslog.is_empty() {
            return Ok(Output::Syslog(syslog::Syslog::remote(&cfg.remote_syslog)?));
        }
        if cfg.syslog {
            return Ok(Output::Syslog(syslog::Syslog::local()?));
        }
    }
    Ok(Output::Stderr {
        colors: stderr_is_tty(),
    })
}

impl Inner {
    fn write(&mut self, lvl: Lvl, msg: &str) {
        match &mut self.out {
            Output::Stderr { colors } => {
                let line = self.fmt.line(lvl, *colors, msg, "\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            Output::File(f) => {
                let line = self.fmt.line(lvl, false, msg, "\n");
                f.write_line(line.as_bytes(), &self.fmt);
            }
            #[cfg(unix)]
            Output::Syslog(s) => s.write(lvl, msg),
        }
    }
}

/// Install the global subscriber and open the output. Call once, before logging.
pub fn init(cfg: &LogConfig) -> Result<(), LogError> {
    let fmt = LineFormat::of(cfg);
    let out = open(cfg)?;
    let logger = Logger {
        debug: AtomicBool::new(cfg.debug),
        trace: AtomicBool::new(cfg.trace),
        inner: Mutex::new(Inner {
            out,
            fmt,
            cfg: cfg.clone(),
        }),
    };
    if LOGGER.set(logger).is_err() {
        // Already installed (tests in one process): reconfigure instead.
        return configure(cfg);
    }
    let _ = tracing_subscriber::registry().with(NatsLayer).try_init();
    apply_size_limit(cfg.size_limit);
    Ok(())
}

/// Switch to a new configuration (reload). The new output is opened first; on failure
/// nothing changes.
pub fn configure(cfg: &LogConfig) -> Result<(), LogError> {
    let Some(l) = LOGGER.get() else { return init(cfg) };
    {
        let mut inner = l.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !inner.cfg.same_output(cfg) {
            inner.out = open(cfg)?;
        } else if let Output::File(f) = &mut inner.out {
            f.set_max_num(cfg.max_num);
        }
        inner.fmt = LineFormat::of(cfg);
        inner.cfg = cfg.clone();
    }
    l.debug.store(cfg.debug, Ordering::Relaxed);
    l.trace.store(cfg.trace, Ordering::Relaxed);
    apply_size_limit(cfg.size_limit);
    Ok(())
}

/// Check that `cfg`'s output can be opened (before a reload commits to it).
pub fn check(cfg: &LogConfig) -> Result<(), LogError> {
    let same = LOGGER.get().is_some_and(|l| {
        let inner = l.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.cfg.same_output(cfg)
    });
    if same {
        return Ok(());
    }
    open(cfg).map(|_| ())
}

/// nats-server's `SetSizeLimit`: set the limit, and rotate now when the file is already
/// past it (logging "Rotating logfile...", which triggers the rotation).
fn apply_size_limit(size_limit: i64) {
    let Some(l) = LOGGER.get() else { return };
    let rotate_now = {
        let mut inner = l.inner.lock().unwrap_or_else(|p| p.into_inner());
        match &mut inner.out {
            Output::File(f) if size_limit > 0 => f.set_limit(size_limit),
            Output::File(f) => {
                f.set_limit(0);
                false
            }
            _ => false,
        }
    };
    if rotate_now {
        tracing::info!("Rotating logfile...");
    }
}

/// SIGUSR1: reopen the log file (after an external rotation moved it away).
pub fn reopen() {
    let Some(l) = LOGGER.get() else { return };
    let reopened = {
        let mut inner = l.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.cfg.file.is_empty() {
            None
        } else {
            Some(open(&inner.cfg).map(|out| {
                inner.out = out;
                inner.cfg.size_limit
            }))
        }
    };
    match reopened {
        None => tracing::info!("File log re-open ignored, not a file logger"),
        Some(Ok(size_limit)) => {
            apply_size_limit(size_limit);
            tracing::info!("File log re-opened");
        }
        Some(Err(e)) => tracing::error!("{e}"),
    }
}

/// An `[FTL]` line through the current output (nats-server's `Fatalf`), or on stderr
/// before logging is set up.
pub fn fatal(msg: &str) {
    match LOGGER.get() {
        Some(l) => l.inner.lock().unwrap_or_else(|p| p.into_inner()).write(Lvl::Fatal, msg),
        None => {
            let fmt = LineFormat {
                pid: std::process::id(),
                logtime: true,
                utc: false,
            };
            eprint!("{}", fmt.line(Lvl::Fatal, false, msg, "\n"));
        }
    }
}

/// Go's `log.Fatalf` line (what the reference prints when its log output cannot be
/// opened): `2006/01/02 15:04:05 message` on stderr.
pub fn std_log_line(msg: &str) -> String {
    let t = timestamp(false);
    format!("{} {msg}", t.get(..19).unwrap_or(&t))
}

struct NatsLayer;

struct MsgVisitor<'a>(&'a mut String);

impl tracing::field::Visit for MsgVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

fn level_on(level: &Level) -> bool {
    let Some(l) = LOGGER.get() else { return false };
    match *level {
        Level::DEBUG => l.debug.load(Ordering::Relaxed),
        Level::TRACE => l.trace.load(Ordering::Relaxed),
        _ => true,
    }
}

impl<S: Subscriber> Layer<S> for NatsLayer {
    fn register_callsite(&self, _meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        // Levels change at run time (reload): ask `enabled` every time.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, meta: &tracing::Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        level_on(meta.level())
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        // `enabled` has admitted the event already.
        let meta = event.metadata();
        let Some(l) = LOGGER.get() else { return };
        let mut msg = String::with_capacity(128);
        event.record(&mut MsgVisitor(&mut msg));
        l.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(Lvl::of(meta.level()), &msg);
    }
}

fn stderr_is_tty() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: isatty only inspects the descriptor.
        unsafe { libc::isatty(2) == 1 }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_error_texts() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(go_os_error(&e), "no such file or directory");
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(go_os_error(&e), "permission denied");
    }

    #[test]
    fn labels() {
        assert_eq!(Lvl::Info.label(false), "[INF] ");
        assert_eq!(Lvl::Warn.label(true), "[\x1b[0;93mWRN\x1b[0m] ");
    }
}
