//! `js-pull` and `js-push`: consuming a pre-filled file stream through a durable consumer
//! with explicit acks, every message acknowledged (`+ACK`, an empty publish to its reply
//! subject) as it arrives.
//!
//! - `js-pull`: the consumer `C` on stream `S0`; the client keeps two pull requests
//!   (`$JS.API.CONSUMER.MSG.NEXT.S0.C`, `{"batch":--fetch,"expires":..}`) outstanding.
//! - `js-push`: the consumer `P` delivers to a subscribed inbox; created after the fill, so
//!   delivery starts with it.
//!
//! Both consumers get `max_ack_pending` 10,000 (so neither server's default throttles a client
//! that acks as fast as it reads). Counted: messages consumed per second, from the first pull
//! request (the consumer's creation) to the last message. Afterwards the consumer's info must
//! show every message delivered once and acknowledged.

use std::time::{Duration, Instant};

use serde_json::json;

use super::api::{status_line, Api};
use super::publish::{create_streams, fill, stream_name};
use super::window::STALL;
use crate::client::Conn;
use crate::error::Result;
use crate::proc;
use crate::proto::{encode_pub, encode_sub, Frame};
use crate::report::RunResult;
use crate::scenarios::{base_result, server_stats, set_rate, Ctx, Params, Scenario};

/// `max_ack_pending` of both consumers.
const MAX_ACK_PENDING: u64 = 10_000;
/// Pull requests in flight.
const PULLS: u64 = 2;
/// `expires` of a pull request (ns): longer than any run.
const PULL_EXPIRES_NS: u64 = 60_000_000_000;
const PULL_INBOX: &str = "_INBOX.perfpull.r";
const PUSH_INBOX: &str = "_INBOX.perfpush.d";
/// How long the consumer's info may take to show every ack after the last message.
const SETTLE: Duration = Duration::from_secs(3);

/// How a consuming connection went.
struct Consumed {
    received: u64,
    /// Status messages (`408`, `409`, ...) and other deliveries without an ack subject.
    odd: Vec<String>,
    stalled: bool,
    elapsed: Duration,
}

/// Runs `js-pull` (`pull == true`) or `js-push`.
pub fn run(p: &Params, ctx: &Ctx<'_>, pull: bool) -> Result<RunResult> {
    let scenario = if pull { Scenario::JsPull } else { Scenario::JsPush };
    let stream = stream_name(0);
    let mut api = Api::connect(ctx)?;
    create_streams(&mut api, 1)?;
    ctx.bar.set_message("filling");
    fill(ctx, &format!("js.{stream}.x"), p.msgs, &p.payload(), p.inflight)?;
    let (durable, inbox) = if pull { ("C", PULL_INBOX) } else { ("P", PUSH_INBOX) };
    let mut cfg = json!({
        "durable_name": durable,
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "max_ack_pending": MAX_ACK_PENDING,
    });
    if !pull {
        cfg["deliver_subject"] = json!(inbox);
    }
    let mut setup = Vec::new();
    encode_sub(&mut setup, inbox, None, 1);
    let mut conn = Conn::connect(ctx.addr, ctx.handshake_timeout, &setup)?;
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("consumed");
    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    api.create_consumer(&stream, &cfg)?;
    let next = pull.then(|| format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"));
    let out = consume(&mut conn, ctx, p, next.as_deref(), t0)?;
    let after = ctx.pid.and_then(proc::sample);
    let mut r = base_result(scenario, p);
    if out.stalled {
        r.complete = false;
        r.notes.push(format!(
            "{} of {} consumed, then none for {STALL:?}",
            out.received, p.msgs
        ));
    }
    if let Some(first) = out.odd.first() {
        r.complete = false;
        r.notes.push(format!(
            "{} deliveries without an ack subject, the first: {first}",
            out.odd.len()
        ));
    }
    if let Some(problem) = settled(&mut api, &stream, durable, p.msgs)? {
        r.complete = false;
        r.notes.push(problem);
    }
    api.delete_stream(&stream)?;
    r.published = p.msgs;
    r.delivered = out.received;
    r.expected = p.msgs;
    set_rate(&mut r, out.received, p.size, out.elapsed);
    r.server = server_stats(before, after, out.received);
    Ok(r)
}

/// Reads deliveries on `conn` until `p.msgs` arrived (or they stall), acking each; with `next`
/// (a pull consumer's request subject) keeps [`PULLS`] requests of `p.fetch` outstanding.
fn consume(conn: &mut Conn, ctx: &Ctx<'_>, p: &Params, next: Option<&str>, t0: Instant) -> Result<Consumed> {
    let mut out = Consumed {
        received: 0,
        odd: Vec::new(),
        stalled: false,
        elapsed: Duration::ZERO,
    };
    let mut requested = 0u64;
    let mut writes = Vec::with_capacity(256 * 1024);
    let mut last = Instant::now();
    let fetch = p.fetch as u64;
    while out.received < p.msgs {
        if let Some(next) = next {
            while requested < p.msgs && requested < out.received + PULLS * fetch {
                let n = fetch.min(p.msgs - requested);
                let body = format!("{{\"batch\":{n},\"expires\":{PULL_EXPIRES_NS}}}");
                encode_pub(
                    &mut writes,
                    next.as_bytes(),
                    Some(PULL_INBOX.as_bytes()),
                    body.as_bytes(),
                );
                requested += n;
            }
        }
        if !writes.is_empty() {
            conn.write_all(&writes)?;
            writes.clear();
        }
        let before = out.received;
        conn.read_frames(|f| {
            if let Frame::Msg(m) = f {
                match m.reply {
                    Some(ack) if ack.starts_with(b"$JS.ACK.") => {
                        encode_pub(&mut writes, ack, None, b"");
                        out.received += 1;
                    }
                    _ => {
                        let what = status_line(m.header_len, m.data)
                            .unwrap_or_else(|| String::from_utf8_lossy(m.subject).into_owned());
                        out.odd.push(what);
                    }
                }
            }
            Ok(())
        })?;
        let now = Instant::now();
        if out.received > before {
            last = now;
            ctx.bar.set_position(out.received);
        } else if now.duration_since(last) > STALL {
            out.stalled = true;
            break;
        }
    }
    out.elapsed = last.duration_since(t0);
    if !writes.is_empty() {
        conn.write_all(&writes)?;
    }
    conn.flush(Duration::from_secs(5), &mut |_| Ok(()))?;
    Ok(out)
}

/// Waits until the consumer's info shows `want` messages delivered and acknowledged, none
/// pending or redelivered; `Some(problem)` if it does not within [`SETTLE`].
fn settled(api: &mut Api, stream: &str, durable: &str, want: u64) -> Result<Option<String>> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let info = api.consumer_info(stream, durable)?;
        let num = |path: &str| {
            info.pointer(path)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(u64::MAX)
        };
        let (floor, delivered) = (num("/ack_floor/stream_seq"), num("/delivered/stream_seq"));
        let (pending, redelivered) = (num("/num_ack_pending"), num("/num_redelivered"));
        if floor == want && delivered == want && pending == 0 && redelivered == 0 {
            return Ok(None);
        }
        if Instant::now() >= deadline {
            return Ok(Some(format!(
                "consumer {durable}: ack floor {floor}, delivered {delivered}, ack pending {pending}, \
                 redelivered {redelivered} (want {want} acked)"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
