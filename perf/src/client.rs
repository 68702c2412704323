//! A minimal, fast NATS client over blocking std TCP: handshake (`INFO` → `CONNECT` + `PING` →
//! `PONG`), big-batch writes, and a large read buffer parsed in place by [`crate::proto`].
//!
//! Every blocking call is bounded: reads wake up every [`POLL`] so callers can check their
//! deadlines, and writes give up after [`WRITE_TIMEOUT`].

use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{PerfError, Result};
use crate::line_memo::LineMemo;
use crate::proto::{parse_frame, Frame, ParseError};
use crate::transport::{self, Stream};

/// How long a blocking read waits before returning control to the caller.
pub const POLL: Duration = Duration::from_millis(50);
/// A write that makes no progress for this long fails the run.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Initial read buffer size; it grows for frames larger than this.
const READ_BUF: usize = 1 << 20;
/// Largest frame we are willing to buffer.
const MAX_READ_BUF: usize = 64 << 20;

/// The options of the `CONNECT` every connection sends (protocol.md §5), without the braces.
const CONNECT_OPTIONS: &str =
    r#""verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1,"name":"rnats-perf""#;

/// A user and password sent in `CONNECT` (`"user"`, `"pass"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub user: String,
    pub pass: String,
}

impl Credentials {
    /// Credentials from string slices.
    pub fn new(user: &str, pass: &str) -> Credentials {
        Credentials {
            user: user.to_string(),
            pass: pass.to_string(),
        }
    }
}

/// The `CONNECT` line, with `login` when given (JSON-escaped).
pub fn connect_line(login: Option<&Credentials>) -> Vec<u8> {
    let mut line = format!("CONNECT {{{CONNECT_OPTIONS}");
    if let Some(c) = login {
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        line.push_str(&format!(",\"user\":{},\"pass\":{}", quote(&c.user), quote(&c.pass)));
    }
    line.push_str("}\r\n");
    line.into_bytes()
}

/// One client connection.
pub struct Conn {
    stream: Stream,
    addr: SocketAddr,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The server's first `INFO` JSON (empty until the handshake read it).
    info: String,
    pongs: u64,
    /// The last `MSG` line, to take repeats of it without parsing.
    memo: LineMemo,
}

impl Conn {
    /// Opens the TCP connection and sends `CONNECT` (with `login`'s user and password when
    /// given), then `setup` (e.g. `SUB` lines), then `PING`, without waiting for anything.
    /// Finish with [`Conn::finish_handshake`].
    pub fn start_as(addr: SocketAddr, timeout: Duration, login: Option<&Credentials>, setup: &[u8]) -> Result<Conn> {
        Conn::open(addr, timeout, login, setup, READ_BUF)
    }

    /// [`Conn::start_as`] without a login, with an initial read buffer of `buf_size` bytes (small for the many
    /// idle connections of `conns`).
    pub fn start_with_buffer(addr: SocketAddr, timeout: Duration, setup: &[u8], buf_size: usize) -> Result<Conn> {
        Conn::open(addr, timeout, None, setup, buf_size)
    }

    fn open(
        addr: SocketAddr,
        timeout: Duration,
        login: Option<&Credentials>,
        setup: &[u8],
        buf_size: usize,
    ) -> Result<Conn> {
        let (stream, prefix) =
            transport::connect(addr, timeout).map_err(|source| PerfError::Connect { addr, source })?;
        stream.tcp().set_read_timeout(Some(POLL))?;
        stream.tcp().set_write_timeout(Some(WRITE_TIMEOUT))?;
        let mut conn = Conn {
            stream,
            addr,
            buf: vec![0; buf_size.max(4096).max(prefix.len())],
            start: 0,
            end: prefix.len(),
            info: String::new(),
            pongs: 0,
            memo: LineMemo::default(),
        };
        conn.buf[..prefix.len()].copy_from_slice(&prefix);
        let mut hello = connect_line(login);
        hello.extend_from_slice(setup);
        hello.extend_from_slice(b"PING\r\n");
        conn.write_all(&hello)?;
        Ok(conn)
    }

    /// Waits for the server's `INFO` and the `PONG` answering the handshake `PING`.
    ///
    /// Anything other than `INFO` as the first line, or silence, means the peer is not a NATS
    /// server: this fails within `timeout` with [`PerfError::NotNats`].
    pub fn finish_handshake(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let addr = self.addr;
        while self.info.is_empty() {
            match self.fill() {
                Ok(0) => {
                    return Err(PerfError::NotNats {
                        addr,
                        reason: "closed the connection without an INFO greeting".into(),
                    })
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    return Err(PerfError::NotNats {
                        addr,
                        reason: format!("read failed before INFO: {e}"),
                    })
                }
            }
            let got = &self.buf[self.start..self.end];
            let prefix = &got[..got.len().min(5)];
            if !b"INFO ".starts_with(&prefix.to_ascii_uppercase()) && !prefix.eq_ignore_ascii_case(b"INFO\t") {
                let line = got.split(|&b| b == b'\n').next().unwrap_or_default();
                let shown = String::from_utf8_lossy(&line[..line.len().min(60)]).trim().to_string();
                return Err(PerfError::NotNats {
                    addr,
                    reason: format!("expected an INFO greeting, got {shown:?}"),
                });
            }
            match parse_frame(got) {
                Ok(Some((Frame::Info(json), n))) => {
                    self.info = String::from_utf8_lossy(json).into_owned();
                    self.start += n;
                }
                Ok(Some(_)) | Err(_) => {
                    return Err(PerfError::NotNats {
                        addr,
                        reason: "malformed INFO greeting".into(),
                    });
                }
                Ok(None) => {}
            }
            if self.info.is_empty() && Instant::now() >= deadline {
                return Err(PerfError::NotNats {
                    addr,
                    reason: format!("no INFO greeting within {timeout:?} (is this an HTTP or other non-NATS port?)"),
                });
            }
        }
        // Whatever came with the INFO (PING, PONG, ...) is already buffered.
        self.process(&mut |_| Ok(()))?;
        self.wait_pongs(
            1,
            deadline.saturating_duration_since(Instant::now()).max(POLL),
            &mut |_| Ok(()),
        )
    }

    /// [`Conn::start_as`] without a login, followed by [`Conn::finish_handshake`].
    pub fn connect(addr: SocketAddr, timeout: Duration, setup: &[u8]) -> Result<Conn> {
        Conn::connect_as(addr, timeout, None, setup)
    }

    /// [`Conn::start_as`] followed by [`Conn::finish_handshake`].
    pub fn connect_as(addr: SocketAddr, timeout: Duration, login: Option<&Credentials>, setup: &[u8]) -> Result<Conn> {
        let mut conn = Conn::start_as(addr, timeout, login, setup)?;
        conn.finish_handshake(timeout)?;
        Ok(conn)
    }

    /// `max_payload` from `INFO`, if present.
    pub fn max_payload(&self) -> Option<u64> {
        let v: serde_json::Value = serde_json::from_str(&self.info).ok()?;
        v.get("max_payload")?.as_u64()
    }

    /// Writes all of `bytes` in as few syscalls as the kernel allows.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).map_err(|e| {
            if is_timeout(&e) {
                PerfError::Timeout {
                    what: "the server to read our writes".into(),
                    after: WRITE_TIMEOUT,
                }
            } else {
                PerfError::Io(e)
            }
        })
    }

    /// Sends `PING` and waits up to `timeout` for its `PONG`; frames arriving meanwhile go to
    /// `on_frame`. Because the server answers in order, every earlier command was processed.
    pub fn flush(&mut self, timeout: Duration, on_frame: &mut dyn FnMut(&Frame<'_>) -> Result<()>) -> Result<()> {
        self.write_all(b"PING\r\n")?;
        let want = self.pongs + 1;
        self.wait_pongs(want, timeout, on_frame)
    }

    fn wait_pongs(
        &mut self,
        want: u64,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&Frame<'_>) -> Result<()>,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.pongs < want {
            if Instant::now() >= deadline {
                return Err(PerfError::Timeout {
                    what: format!("PONG from {}", self.addr),
                    after: timeout,
                });
            }
            self.read_frames(&mut *on_frame)?;
        }
        Ok(())
    }

    /// Reads once (waiting at most [`POLL`]) and hands every complete frame to `on_frame`.
    /// Answers server `PING`s, counts `PONG`s and turns `-ERR` into an error.
    pub fn read_frames(&mut self, mut on_frame: impl FnMut(&Frame<'_>) -> Result<()>) -> Result<()> {
        match self.fill() {
            Ok(0) => return Err(PerfError::Closed(format!(" ({})", self.addr))),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        self.process(&mut on_frame)
    }

    /// [`Conn::read_frames`], counting the messages that arrived.
    pub fn read_msgs(&mut self) -> Result<u64> {
        let mut n = 0;
        self.read_frames(|f| {
            if let Frame::Msg(_) = f {
                n += 1;
            }
            Ok(())
        })?;
        Ok(n)
    }

    /// Reads whatever is already buffered in the kernel without blocking, and processes it like
    /// [`Conn::read_frames`]. Publishers call this now and then to answer server `PING`s.
    pub fn poll_nonblocking(&mut self) -> Result<()> {
        self.stream.tcp().set_nonblocking(true)?;
        let res = self.fill();
        self.stream.tcp().set_nonblocking(false)?;
        match res {
            Ok(0) => Err(PerfError::Closed(format!(" ({})", self.addr))),
            Ok(_) => self.process(&mut |_| Ok(())),
            Err(e) if e.kind() == ErrorKind::WouldBlock || is_timeout(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Generic in `on_frame`, so a subscriber's per-message count is inlined into the loop.
    fn process<F: FnMut(&Frame<'_>) -> Result<()> + ?Sized>(&mut self, on_frame: &mut F) -> Result<()> {
        let mut pings = 0usize;
        let mut pos = self.start;
        let res = loop {
            let parsed = match self.memo.parse(&self.buf[pos..self.end]) {
                Ok(p) => p,
                Err(e) => break Err(protocol(e)),
            };
            let Some((frame, n)) = parsed else { break Ok(()) };
            pos += n;
            match &frame {
                Frame::Ping => pings += 1,
                Frame::Pong => self.pongs += 1,
                Frame::Err(text) => break Err(PerfError::Server(String::from_utf8_lossy(text).into_owned())),
                Frame::Info(_) | Frame::Ok | Frame::Msg(_) => {}
            }
            if let Err(e) = on_frame(&frame) {
                break Err(e);
            }
        };
        self.start = pos;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if pings > 0 {
            self.write_all(&b"PONG\r\n".repeat(pings))?;
        }
        res
    }

    /// One `read` into the spare part of the buffer (compacting or growing it first).
    fn fill(&mut self) -> io::Result<usize> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_READ_BUF {
                let len = self.buf.len() * 2;
                self.buf.resize(len, 0);
            } else {
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    "frame larger than the read buffer limit",
                ));
            }
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

fn protocol(e: ParseError) -> PerfError {
    PerfError::Protocol(e.to_string())
}

/// Whether an I/O error is a read/write timeout (reported as either kind depending on the OS).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    fn fake_server(greeting: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(greeting).unwrap();
            let mut sink = [0u8; 1024];
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        });
        addr
    }

    #[test]
    fn http_port_fails_fast_with_clear_error() {
        let addr = fake_server(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        let err = Conn::connect(addr, Duration::from_secs(2), b"").err().unwrap();
        assert!(matches!(err, PerfError::NotNats { .. }), "{err}");
        assert!(err.to_string().contains("HTTP/1.1 400"), "{err}");
    }

    #[test]
    fn silent_port_times_out() {
        let addr = fake_server(b"");
        let t = Instant::now();
        let err = Conn::connect(addr, Duration::from_millis(300), b"").err().unwrap();
        assert!(matches!(err, PerfError::NotNats { .. }), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn connect_line_carries_escaped_credentials() {
        let plain = String::from_utf8(connect_line(None)).unwrap();
        assert!(plain.starts_with("CONNECT {") && plain.ends_with("}\r\n"), "{plain}");
        assert!(!plain.contains("\"user\""), "{plain}");
        let line = connect_line(Some(&Credentials::new("al\"ice", "p\\w")));
        let line = String::from_utf8(line).unwrap();
        let json: serde_json::Value = serde_json::from_str(line.strip_prefix("CONNECT ").unwrap().trim_end()).unwrap();
        assert_eq!(json["user"], "al\"ice");
        assert_eq!(json["pass"], "p\\w");
        assert_eq!(json["headers"], true);
        assert_eq!(json["name"], "rnats-perf");
    }

    #[test]
    fn handshake_with_pong_and_ping() {
        let addr = fake_server(b"INFO {\"max_payload\":1024} \r\nPING\r\nPONG\r\nINFO {\"connect_info\":true} \r\n");
        let conn = Conn::connect(addr, Duration::from_secs(2), b"").unwrap();
        assert_eq!(conn.max_payload(), Some(1024));
    }
}
