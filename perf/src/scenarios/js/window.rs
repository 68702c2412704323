//! The windowed requester under most JetStream scenarios: one connection publishes requests
//! (each with the same reply inbox) keeping at most `inflight` unanswered, and counts the
//! answers, each judged by the scenario's check (a `PubAck`, a direct-get reply). Answers to one
//! connection's requests come back in order, so counting them is enough.

use memchr::memmem::Finder;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::client::Conn;
use crate::error::Result;
use crate::proto::{encode_hpub, encode_pub, Frame, Msg};

/// Answers that stop coming for this long end the run (as incomplete).
pub const STALL: Duration = Duration::from_secs(5);

/// What one connection sends.
pub struct WindowSpec<'a> {
    /// Request `i` goes to `subjects[i % len]`.
    pub subjects: &'a [Vec<u8>],
    /// The reply subject of every request (the connection is subscribed to it).
    pub reply: &'a [u8],
    pub payload: &'a [u8],
    /// A header block for every request (`HPUB`); empty: plain `PUB`.
    pub header: &'a [u8],
    pub count: u64,
    /// Unanswered requests allowed.
    pub inflight: u64,
    /// Bytes per write, at most.
    pub batch_bytes: usize,
    /// No new requests after this.
    pub deadline: Instant,
    /// Whether an answer is a good one (`Err`: what is wrong with it).
    pub check: &'a (dyn Fn(&Msg<'_>) -> std::result::Result<(), String> + Sync),
}

/// How it went.
#[derive(Debug, Default)]
pub struct WindowOutcome {
    pub sent: u64,
    /// Answers that passed the check.
    pub good: u64,
    pub bad: u64,
    pub first_bad: Option<String>,
    /// The answers stopped coming before every request had one.
    pub stalled: bool,
    /// From the first write to the last answer.
    pub elapsed: Duration,
}

impl WindowOutcome {
    /// Answers of either kind.
    pub fn answered(&self) -> u64 {
        self.good + self.bad
    }

    /// Why the run is incomplete, if it is.
    pub fn problem(&self, who: &str, want: u64) -> Option<String> {
        if let Some(b) = &self.first_bad {
            return Some(format!("{who}: {} bad answers, the first: {b}", self.bad));
        }
        if self.stalled {
            return Some(format!(
                "{who}: {} of {} answered, then none for {STALL:?}",
                self.answered(),
                self.sent
            ));
        }
        (self.good < want).then(|| format!("{who}: {} of {want} requests answered", self.good))
    }
}

/// Runs the window on `conn`; `progress` counts answers as they come.
pub fn run(conn: &mut Conn, spec: &WindowSpec<'_>, progress: &AtomicU64) -> Result<WindowOutcome> {
    let mut out = WindowOutcome::default();
    let mut frames = Vec::with_capacity(spec.batch_bytes + 4096);
    let subjects = spec.subjects.len().max(1) as u64;
    let t0 = Instant::now();
    let mut last_answer = t0;
    let inflight = spec.inflight.max(1);
    loop {
        let answered = out.answered();
        let stop_sending = Instant::now() >= spec.deadline;
        if answered >= spec.count || (stop_sending && answered >= out.sent) {
            break;
        }
        if !stop_sending {
            while out.sent < spec.count && out.sent - out.answered() < inflight && frames.len() < spec.batch_bytes {
                let i = usize::try_from(out.sent % subjects).unwrap_or(0);
                let subject = spec.subjects.get(i).map_or(&b"x"[..], Vec::as_slice);
                if spec.header.is_empty() {
                    encode_pub(&mut frames, subject, Some(spec.reply), spec.payload);
                } else {
                    encode_hpub(&mut frames, subject, Some(spec.reply), spec.header, spec.payload);
                }
                out.sent += 1;
            }
            if !frames.is_empty() {
                conn.write_all(&frames)?;
                frames.clear();
                if out.sent - out.answered() < inflight && out.sent < spec.count {
                    continue;
                }
            }
        }
        let before = out.answered();
        conn.read_frames(|f| {
            if let Frame::Msg(m) = f {
                match (spec.check)(m) {
                    Ok(()) => out.good += 1,
                    Err(why) => {
                        out.bad += 1;
                        out.first_bad.get_or_insert(why);
                    }
                }
            }
            Ok(())
        })?;
        let now = Instant::now();
        if out.answered() > before {
            progress.fetch_add(out.answered() - before, Relaxed);
            last_answer = now;
        } else if now.duration_since(last_answer) > STALL {
            out.stalled = true;
            break;
        }
    }
    out.elapsed = last_answer.duration_since(t0);
    Ok(out)
}

/// A `PubAck` (`{"stream":..,"seq":..}`) is good; an error answer or a status message is not.
pub fn check_puback(m: &Msg<'_>) -> std::result::Result<(), String> {
    if let Some(status) = super::api::status_line(m.header_len, m.data) {
        return Err(format!("status {status}"));
    }
    // Searchers built once: `memmem::find` builds one per call, a tenth of a publishing
    // client's time.
    static ERROR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"error\""));
    static SEQ: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"seq\""));
    let body = m.data.get(m.header_len..).unwrap_or_default();
    if ERROR.find(body).is_some() || SEQ.find(body).is_none() {
        return Err(String::from_utf8_lossy(body).into_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(header_len: usize, data: &'a [u8]) -> Msg<'a> {
        Msg {
            subject: b"_INBOX.x",
            sid: b"1",
            reply: None,
            header_len,
            data,
        }
    }

    #[test]
    fn pubacks() {
        assert!(check_puback(&msg(0, br#"{"stream":"S0","seq":7}"#)).is_ok());
        let err = br#"{"error":{"code":503,"err_code":10077,"description":"resource limits exceeded"},"stream":"S0"}"#;
        assert!(check_puback(&msg(0, err)).is_err());
        let status = b"NATS/1.0 503\r\n\r\n";
        assert!(check_puback(&msg(status.len(), status)).is_err());
        assert!(check_puback(&msg(0, b"")).is_err());
    }
}
