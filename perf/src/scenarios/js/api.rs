//! The JetStream side of the lab's setup: a fresh store folder for every server the lab starts
//! (`-js -sd <dir>`), and a small blocking client of the `$JS.API` request subjects (create a
//! stream or a consumer, read their info) spoken over the raw protocol.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::client::Conn;
use crate::error::{PerfError, Result};
use crate::proto::{encode_pub, encode_sub, Frame};
use crate::scenarios::Ctx;

/// How long an API request may take before the run fails.
const API_TIMEOUT: Duration = Duration::from_secs(10);

/// A temporary JetStream store folder; removed (with everything the server wrote) when dropped.
pub struct StoreDir {
    dir: PathBuf,
}

impl StoreDir {
    /// Creates a fresh, empty folder under the system's temporary directory.
    pub fn create() -> Result<StoreDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut last = None;
        for _ in 0..8 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("rnats-perf-js-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(StoreDir { dir }),
                Err(e) => last = Some((dir, e)),
            }
        }
        let (path, e) = last.unwrap_or_else(|| (std::env::temp_dir(), std::io::Error::other("no attempt")));
        Err(PerfError::Output {
            path,
            reason: e.to_string(),
        })
    }

    /// `-js -sd <dir>` for the server's command line (both rnats and nats-server take them).
    pub fn server_args(&self) -> Result<Vec<String>> {
        let dir = self.dir.to_str().ok_or_else(|| PerfError::Output {
            path: self.dir.clone(),
            reason: "temporary path is not UTF-8".into(),
        })?;
        Ok(vec!["-js".into(), "-sd".into(), dir.to_string()])
    }
}

impl Drop for StoreDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `n` idle connections, opened before the scenario's own and held until it ends (rnats
/// hands connections to its shards round-robin, so this moves the scenario's connections
/// to other shards; see `--pad-conns`).
pub fn pad_conns(ctx: &Ctx<'_>, n: usize) -> Result<Vec<Conn>> {
    (0..n)
        .map(|_| Conn::connect(ctx.addr, ctx.handshake_timeout, b""))
        .collect()
}

/// A connection that sends `$JS.API` requests one at a time and waits for their answers.
pub struct Api {
    conn: Conn,
    next: u64,
}

/// The inbox prefix of API answers.
const API_INBOX: &str = "_INBOX.perfjsapi";

impl Api {
    /// Connects and subscribes to the answer inbox.
    pub fn connect(ctx: &Ctx<'_>) -> Result<Api> {
        let mut setup = Vec::new();
        encode_sub(&mut setup, &format!("{API_INBOX}.*"), None, 1);
        Ok(Api {
            conn: Conn::connect(ctx.addr, ctx.handshake_timeout, &setup)?,
            next: 0,
        })
    }

    /// Sends `body` to `subject` and returns the decoded JSON answer; a JetStream error answer
    /// (`{"error":{...}}`) or a status message (no responders: JetStream is off) fails.
    pub fn request(&mut self, subject: &str, body: &[u8]) -> Result<Value> {
        self.next += 1;
        let reply = format!("{API_INBOX}.{}", self.next);
        let mut frame = Vec::with_capacity(body.len() + 96);
        encode_pub(&mut frame, subject.as_bytes(), Some(reply.as_bytes()), body);
        self.conn.write_all(&frame)?;
        let deadline = Instant::now() + API_TIMEOUT;
        let mut answer: Option<std::result::Result<Value, String>> = None;
        while answer.is_none() {
            if Instant::now() >= deadline {
                return Err(PerfError::Timeout {
                    what: format!("the answer to {subject}"),
                    after: API_TIMEOUT,
                });
            }
            self.conn.read_frames(|f| {
                if let Frame::Msg(m) = f {
                    if m.subject == reply.as_bytes() {
                        answer = Some(decode_answer(m.header_len, m.data));
                    }
                }
                Ok(())
            })?;
        }
        match answer {
            Some(Ok(v)) => match v.get("error") {
                Some(e) => Err(PerfError::Config(format!("{subject}: {e}"))),
                None => Ok(v),
            },
            Some(Err(why)) => Err(PerfError::Config(format!("{subject}: {why}"))),
            None => Err(PerfError::Protocol(format!("no answer to {subject}"))),
        }
    }

    /// Creates a stream from its configuration (which must name it).
    pub fn create_stream(&mut self, cfg: &Value) -> Result<()> {
        let name = cfg.get("name").and_then(Value::as_str).unwrap_or_default();
        self.request(&format!("$JS.API.STREAM.CREATE.{name}"), cfg.to_string().as_bytes())
            .map(drop)
    }

    /// Deletes a stream (scenarios clean up, so several can run on one server).
    pub fn delete_stream(&mut self, name: &str) -> Result<()> {
        self.request(&format!("$JS.API.STREAM.DELETE.{name}"), b"").map(drop)
    }

    /// The stream's message count (`state.messages`).
    pub fn stream_msgs(&mut self, name: &str) -> Result<u64> {
        let info = self.request(&format!("$JS.API.STREAM.INFO.{name}"), b"")?;
        info.pointer("/state/messages")
            .and_then(Value::as_u64)
            .ok_or_else(|| PerfError::Protocol(format!("STREAM.INFO.{name} without state.messages")))
    }

    /// Creates a durable consumer on `stream` from its configuration (which names it).
    pub fn create_consumer(&mut self, stream: &str, cfg: &Value) -> Result<()> {
        let name = cfg.get("durable_name").and_then(Value::as_str).unwrap_or_default();
        let body = serde_json::json!({ "stream_name": stream, "config": cfg });
        self.request(
            &format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
            body.to_string().as_bytes(),
        )
        .map(drop)
    }

    /// The consumer's info.
    pub fn consumer_info(&mut self, stream: &str, name: &str) -> Result<Value> {
        self.request(&format!("$JS.API.CONSUMER.INFO.{stream}.{name}"), b"")
    }
}

/// The JSON of an answer, or why it is not one (a status message such as `503`).
fn decode_answer(header_len: usize, data: &[u8]) -> std::result::Result<Value, String> {
    if let Some(status) = status_line(header_len, data) {
        return Err(format!("status {status:?} (is JetStream enabled?)"));
    }
    let body = data.get(header_len..).unwrap_or_default();
    serde_json::from_slice(body).map_err(|e| format!("answer is not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// The status part of a message's header line (`404 Message Not Found`), if it has one.
pub fn status_line(header_len: usize, data: &[u8]) -> Option<String> {
    if header_len == 0 {
        return None;
    }
    let head = data.get(..header_len)?;
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let rest = first.strip_prefix(b"NATS/1.0")?;
    let status = String::from_utf8_lossy(rest).trim().to_string();
    (!status.is_empty()).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let msg = b"NATS/1.0 404 Message Not Found\r\n\r\n";
        assert_eq!(status_line(msg.len(), msg).as_deref(), Some("404 Message Not Found"));
        let plain = b"NATS/1.0\r\nNats-Stream: KV_b\r\n\r\nvalue";
        assert_eq!(status_line(plain.len() - 5, plain), None);
        assert_eq!(status_line(0, b"{}"), None);
        assert!(decode_answer(msg.len(), msg).is_err());
        assert_eq!(decode_answer(0, br#"{"a":1}"#).unwrap()["a"], 1);
        assert!(decode_answer(0, b"nope").is_err());
    }

    #[test]
    fn store_dir_is_removed() {
        let d = StoreDir::create().unwrap();
        let path = d.dir.clone();
        std::fs::write(path.join("x"), b"1").unwrap();
        assert_eq!(d.server_args().unwrap()[..2], ["-js", "-sd"]);
        drop(d);
        assert!(!path.exists());
    }
}
