//! Logging in nats-server's format, through `tracing`:
//! `[pid] 2006/01/02 15:04:05.000000 [INF] message` (without the time when `logtime` is
//! off), to stderr or a log file. Levels map to INF, WRN, ERR, DBG and TRC; `-D` enables
//! debug and `-V` trace, as in the reference.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Where and how to log.
#[derive(Clone, Debug, Default)]
pub struct LogConfig {
    pub debug: bool,
    pub trace: bool,
    pub logtime: bool,
    pub utc: bool,
    /// Log file; stderr when empty.
    pub file: String,
}

type Sink = Arc<Mutex<Box<dyn Write + Send>>>;

struct NatsLayer {
    sink: Sink,
    pid: u32,
    logtime: bool,
    utc: bool,
    colors: bool,
    max: Level,
}

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

fn label(level: &Level, colors: bool) -> &'static str {
    match (*level, colors) {
        (Level::ERROR, false) => "[ERR]",
        (Level::WARN, false) => "[WRN]",
        (Level::INFO, false) => "[INF]",
        (Level::DEBUG, false) => "[DBG]",
        (Level::TRACE, false) => "[TRC]",
        (Level::ERROR, true) => "[\x1b[31mERR\x1b[0m]",
        (Level::WARN, true) => "[\x1b[33mWRN\x1b[0m]",
        (Level::INFO, true) => "[\x1b[32mINF\x1b[0m]",
        (Level::DEBUG, true) => "[\x1b[36mDBG\x1b[0m]",
        (Level::TRACE, true) => "[\x1b[33mTRC\x1b[0m]",
    }
}

impl<S: Subscriber> Layer<S> for NatsLayer {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        *meta.level() <= self.max
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > self.max {
            return;
        }
        let mut line = String::with_capacity(128);
        let _ = write!(line, "[{}] ", self.pid);
        if self.logtime {
            line.push_str(&timestamp(self.utc));
            line.push(' ');
        }
        line.push_str(label(meta.level(), self.colors));
        line.push(' ');
        event.record(&mut MsgVisitor(&mut line));
        line.push('\n');
        if let Ok(mut w) = self.sink.lock() {
            let _ = w.write_all(line.as_bytes());
            let _ = w.flush();
        }
    }
}

/// `yyyy/mm/dd hh:mm:ss.uuuuuu` in local time (or UTC).
pub fn timestamp(utc: bool) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let micros = now.subsec_micros();
    let (y, mo, d, h, mi, s) = broken_down(secs, utc);
    format!("{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}.{micros:06}")
}

#[cfg(unix)]
fn broken_down(secs: i64, utc: bool) -> (i32, u32, u32, u32, u32, u32) {
    // SAFETY: localtime_r/gmtime_r write into the tm we own and read only `t`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    let ok = unsafe {
        if utc {
            !libc::gmtime_r(&t, &mut tm).is_null()
        } else {
            !libc::localtime_r(&t, &mut tm).is_null()
        }
    };
    if !ok {
        return civil_utc(secs);
    }
    (
        tm.tm_year + 1900,
        (tm.tm_mon + 1) as u32,
        tm.tm_mday as u32,
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
    )
}

#[cfg(not(unix))]
fn broken_down(secs: i64, _utc: bool) -> (i32, u32, u32, u32, u32, u32) {
    civil_utc(secs)
}

/// UTC calendar fields from Unix seconds (days-from-civil inverse).
pub fn civil_utc(secs: i64) -> (i32, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
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

/// Install the global subscriber. Errors opening the log file are returned.
pub fn init(cfg: &LogConfig) -> std::io::Result<()> {
    let (sink, colors): (Box<dyn Write + Send>, bool) = if cfg.file.is_empty() {
        (Box::new(std::io::stderr()), stderr_is_tty())
    } else {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(&cfg.file)?;
        (Box::new(f), false)
    };
    let max = if cfg.trace {
        Level::TRACE
    } else if cfg.debug {
        Level::DEBUG
    } else {
        Level::INFO
    };
    let layer = NatsLayer {
        sink: Arc::new(Mutex::new(sink)),
        pid: std::process::id(),
        logtime: cfg.logtime,
        utc: cfg.utc,
        colors,
        max,
    };
    let _ = tracing_subscriber::registry().with(layer).try_init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_utc(1_795_984_190), (2026, 11, 29, 20, 29, 50));
        assert_eq!(civil_utc(951_782_400), (2000, 2, 29, 0, 0, 0));
    }

    #[test]
    fn timestamp_shape() {
        let t = timestamp(true);
        assert_eq!(t.len(), "2026/11/29 20:29:55.123456".len());
        assert_eq!(&t[4..5], "/");
        assert_eq!(&t[19..20], ".");
    }
}
