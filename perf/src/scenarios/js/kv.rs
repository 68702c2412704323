//! `kv-put` and `kv-get`: a key-value bucket as the KV clients lay it out — the stream `KV_b`
//! on `$KV.b.>`, one message per subject (`max_msgs_per_subject` 1), direct gets allowed —
//! with `--keys` keys `$KV.b.k<n>`.
//!
//! - `kv-put`: puts are publishes with acks to `$KV.b.<key>`, cycling over the keys, with
//!   `--inflight` unacknowledged. Counted: acked puts per second.
//! - `kv-get`: after one put per key, direct gets `$JS.API.DIRECT.GET.KV_b.$KV.b.<key>` (empty
//!   body, the answer is the message with `Nats-*` headers), cycling over the keys, with
//!   `--inflight` unanswered. Counted: good answers (no status, the value's size) per second.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use serde_json::json;

use super::api::{status_line, Api};
use super::publish::ack_conn;
use super::window::{self, WindowSpec};
use crate::error::{PerfError, Result};
use crate::proc;
use crate::proto::Msg;
use crate::report::RunResult;
use crate::scenarios::{base_result, server_stats, set_rate, Ctx, Params, Scenario};

const BUCKET_STREAM: &str = "KV_b";

/// The bucket's stream, as `nats kv add b` (history 1, file storage) creates it.
fn bucket_config() -> serde_json::Value {
    json!({
        "name": BUCKET_STREAM,
        "subjects": ["$KV.b.>"],
        "storage": "file",
        "retention": "limits",
        "num_replicas": 1,
        "max_msgs_per_subject": 1,
        "discard": "new",
        "allow_direct": true,
        "allow_rollup_hdrs": true,
        "deny_delete": true,
        "duplicate_window": 120_000_000_000u64,
    })
}

/// The subject of key `i`.
fn key_subject(i: usize) -> String {
    format!("$KV.b.k{i:07}")
}

/// Runs `kv-put` (`put == true`) or `kv-get`.
pub fn run(p: &Params, ctx: &Ctx<'_>, put: bool) -> Result<RunResult> {
    let scenario = if put { Scenario::KvPut } else { Scenario::KvGet };
    let mut api = Api::connect(ctx)?;
    api.create_stream(&bucket_config())?;
    let keys: Vec<Vec<u8>> = (0..p.keys).map(|i| key_subject(i).into_bytes()).collect();
    let payload = p.payload();
    let (mut conn, reply) = ack_conn(ctx, "perfkv")?;
    let deadline = |t0: Instant| t0 + p.duration();
    let mut r = base_result(scenario, p);
    let gets: Vec<Vec<u8>>;
    let want_size = p.size;
    let check_value = move |m: &Msg<'_>| check_get(m, want_size);
    let spec = if put {
        WindowSpec {
            subjects: &keys,
            reply: &reply,
            payload: &payload,
            header: b"",
            count: p.msgs,
            inflight: p.inflight,
            batch_bytes: p.batch,
            deadline: deadline(Instant::now()),
            check: &window::check_puback,
        }
    } else {
        ctx.bar.set_message("filling");
        let fill = WindowSpec {
            subjects: &keys,
            reply: &reply,
            payload: &payload,
            header: b"",
            count: p.keys as u64,
            inflight: p.inflight,
            batch_bytes: p.batch,
            deadline: deadline(Instant::now()),
            check: &window::check_puback,
        };
        let out = window::run(&mut conn, &fill, &AtomicU64::new(0))?;
        if let Some(problem) = out.problem("putting the keys", p.keys as u64) {
            return Err(PerfError::Protocol(problem));
        }
        gets = keys
            .iter()
            .map(|k| {
                let mut s = format!("$JS.API.DIRECT.GET.{BUCKET_STREAM}.").into_bytes();
                s.extend_from_slice(k);
                s
            })
            .collect();
        WindowSpec {
            subjects: &gets,
            reply: &reply,
            payload: b"",
            header: b"",
            count: p.msgs,
            inflight: p.inflight,
            batch_bytes: p.batch,
            deadline: deadline(Instant::now()),
            check: &check_value,
        }
    };
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message(if put { "puts" } else { "gets" });
    let done = AtomicU64::new(0);
    let before = ctx.pid.and_then(proc::sample);
    let out = window::run(&mut conn, &spec, &done)?;
    let after = ctx.pid.and_then(proc::sample);
    if let Some(problem) = out.problem(if put { "puts" } else { "gets" }, p.msgs) {
        r.complete = false;
        r.notes.push(problem);
    }
    let stored = api.stream_msgs(BUCKET_STREAM)?;
    let want_keys = if put {
        p.keys.min(usize::try_from(out.good).unwrap_or(usize::MAX))
    } else {
        p.keys
    } as u64;
    if stored != want_keys {
        r.complete = false;
        r.notes.push(format!(
            "the bucket holds {stored} messages, want one per key ({want_keys})"
        ));
    }
    api.delete_stream(BUCKET_STREAM)?;
    r.published = out.sent;
    r.delivered = out.good;
    r.expected = p.msgs;
    set_rate(&mut r, out.good, p.size, out.elapsed);
    r.server = server_stats(before, after, out.good);
    Ok(r)
}

/// A direct-get answer: the stored message, with headers and no status line, whose value has
/// `size` bytes.
fn check_get(m: &Msg<'_>, size: usize) -> std::result::Result<(), String> {
    if m.header_len == 0 {
        return Err("direct get answer without headers".into());
    }
    if let Some(status) = status_line(m.header_len, m.data) {
        return Err(format!("status {status}"));
    }
    match m.data.len().saturating_sub(m.header_len) {
        n if n == size => Ok(()),
        n => Err(format!("value of {n} bytes, want {size}")),
    }
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
    fn direct_get_answers() {
        let head = b"NATS/1.0\r\nNats-Stream: KV_b\r\nNats-Subject: $KV.b.k0000001\r\nNats-Sequence: 2\r\n\r\n";
        let mut good = head.to_vec();
        good.extend_from_slice(b"abcd");
        assert!(check_get(&msg(head.len(), &good), 4).is_ok());
        assert!(check_get(&msg(head.len(), &good), 5).is_err());
        assert!(check_get(&msg(head.len(), head), 4).is_err());
        let missing = b"NATS/1.0 404 Message Not Found\r\n\r\n";
        assert!(check_get(&msg(missing.len(), missing), 0).is_err());
        assert!(check_get(&msg(0, b"abcd"), 4).is_err());
    }

    #[test]
    fn bucket_layout() {
        let cfg = bucket_config();
        assert_eq!(cfg["subjects"][0], "$KV.b.>");
        assert_eq!(cfg["max_msgs_per_subject"], 1);
        assert_eq!(cfg["allow_direct"], true);
        assert_eq!(key_subject(12), "$KV.b.k0000012");
    }
}
