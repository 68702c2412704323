//! `js-counter`: counter increments. The file stream `CNT` on `cnt.>` allows message
//! counters (`allow_msg_counter`); increments are publishes with acks to `cnt.<k>` over
//! `--keys` keys round robin, each an empty body with the header `Nats-Incr: 1`, with
//! `--inflight` unacknowledged. Counted: acked increments per second. Afterwards the last
//! message of `cnt.0` (`$JS.API.STREAM.MSG.GET`, `last_by_subj`) must hold the number of
//! increments sent to it (`{"val":"N"}`), and the stream as many messages as were acked.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use base64::Engine as _;
use serde_json::{json, Value};

use super::api::Api;
use super::publish::ack_conn;
use super::window::{self, WindowSpec};
use crate::error::Result;
use crate::proc;
use crate::report::RunResult;
use crate::scenarios::{base_result, server_stats, set_rate, share, Ctx, Params, Scenario};

const STREAM: &str = "CNT";
/// The header block of every increment.
const INCR: &[u8] = b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n";

/// The counter stream.
fn stream_config() -> Value {
    json!({
        "name": STREAM,
        "subjects": ["cnt.>"],
        "storage": "file",
        "retention": "limits",
        "num_replicas": 1,
        "allow_msg_counter": true,
    })
}

/// The counter value in a `STREAM.MSG.GET` answer: `message.data` is base64 of `{"val":"N"}`.
fn counter_value(answer: &Value) -> std::result::Result<u64, String> {
    let data = answer
        .pointer("/message/data")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no message.data in {answer}"))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("message.data is not base64: {e}"))?;
    let body: Value = serde_json::from_slice(&raw).map_err(|e| format!("counter body is not JSON: {e}"))?;
    body.get("val")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("counter body without a numeric val: {body}"))
}

/// Runs `js-counter`.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let mut api = Api::connect(ctx)?;
    api.create_stream(&stream_config())?;
    let keys: Vec<Vec<u8>> = (0..p.keys).map(|i| format!("cnt.{i}").into_bytes()).collect();
    let (mut conn, reply) = ack_conn(ctx, "perfcnt")?;
    let spec = WindowSpec {
        subjects: &keys,
        reply: &reply,
        payload: b"",
        header: INCR,
        count: p.msgs,
        inflight: p.inflight,
        batch_bytes: p.batch,
        deadline: Instant::now() + p.duration(),
        check: &window::check_puback,
    };
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("increments");
    let done = AtomicU64::new(0);
    let before = ctx.pid.and_then(proc::sample);
    let out = window::run(&mut conn, &spec, &done)?;
    let after = ctx.pid.and_then(proc::sample);
    let mut r = base_result(Scenario::JsCounter, p);
    match out.problem("increments", p.msgs) {
        Some(problem) => {
            r.complete = false;
            r.notes.push(problem);
        }
        None => {
            let want = share(p.msgs, p.keys as u64, 0);
            let answer = api.request(
                &format!("$JS.API.STREAM.MSG.GET.{STREAM}"),
                br#"{"last_by_subj":"cnt.0"}"#,
            )?;
            match counter_value(&answer) {
                Ok(v) if v == want => {}
                Ok(v) => {
                    r.complete = false;
                    r.notes
                        .push(format!("counter cnt.0 is {v}, {want} increments were sent to it"));
                }
                Err(why) => {
                    r.complete = false;
                    r.notes.push(format!("counter cnt.0: {why}"));
                }
            }
        }
    }
    let stored = api.stream_msgs(STREAM)?;
    if stored != out.good {
        r.complete = false;
        r.notes.push(format!(
            "the stream holds {stored} messages, {} increments were acked",
            out.good
        ));
    }
    api.delete_stream(STREAM)?;
    r.published = out.sent;
    r.delivered = out.good;
    r.expected = p.msgs;
    set_rate(&mut r, out.good, 0, out.elapsed);
    r.server = server_stats(before, after, out.good);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_values() {
        // base64 of {"val":"2000"}
        let good = json!({"message": {"subject": "cnt.0", "seq": 9, "data": "eyJ2YWwiOiIyMDAwIn0="}});
        assert_eq!(counter_value(&good), Ok(2000));
        assert!(counter_value(&json!({"message": {"data": "!!"}})).is_err());
        // base64 of {"val":"x"}
        assert!(counter_value(&json!({"message": {"data": "eyJ2YWwiOiJ4In0="}})).is_err());
        assert!(counter_value(&json!({})).is_err());
        assert_eq!(stream_config()["allow_msg_counter"], true);
    }
}
