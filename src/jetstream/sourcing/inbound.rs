//! Deliveries of a link's consumer, on the sourcing stream's shard.
//!
//! - Status messages (`NATS/1.0 100 ...`, no payload): a flow control request is answered
//!   with the link's last sequences; an idle heartbeat whose `Nats-Last-Consumer` is not
//!   the last delivery taken means something was lost: the consumer is recreated; a
//!   `Nats-Consumer-Stalled` subject is answered.
//! - Messages: the ack reply carries the origin sequence, the delivery sequence and the
//!   pending count. A mirror stores at the origin's sequence (a skipped delivery sequence
//!   means a lost message and a new consumer; a skipped origin sequence with consecutive
//!   deliveries is a gap the origin has, kept as one); a source stores as a publish
//!   would, with `Nats-Stream-Source: <origin[:hash]> <seq> <filter> <dest> <subject>`.

use super::{restart_link, Link, LinkId, Outgoing};
use crate::core::shard::internal::InternalMsg;
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::Retention;
use crate::jetstream::consumer::wire::parse_ack_subject;
use crate::jetstream::shard::{wall_ns, ShardJs, StreamKey};
use crate::jetstream::stream::ingest::Ingested;
use crate::jetstream::stream::Stream;
use crate::proto::headers;
use std::time::Instant;

/// The header of every sourced message.
pub const STREAM_SOURCE: &str = "Nats-Stream-Source";

/// The consumer name in an ack reply (v1 or v2 form).
fn consumer_of(reply: &str) -> Option<&str> {
    let toks: Vec<&str> = reply.split('.').collect();
    if (toks.len() != 9 && toks.len() < 11) || toks.first() != Some(&"$JS") || toks.get(1) != Some(&"ACK") {
        return None;
    }
    let off = if toks.len() >= 11 { 5 } else { 3 };
    toks.get(off).copied()
}

/// The origin sequence as text from an ack reply ("1" when it is not one).
fn seq_text(reply: &str) -> &str {
    let toks: Vec<&str> = reply.split('.').collect();
    if toks.first() == Some(&"$JS") && toks.get(1) == Some(&"ACK") {
        if toks.len() == 9 {
            return toks.get(5).copied().unwrap_or("1");
        }
        if toks.len() >= 11 {
            return toks.get(7).copied().unwrap_or("1");
        }
    }
    "1"
}

/// `hdr` without the lines whose key starts with `prefix` (case-insensitive).
pub fn without_prefix(hdr: &[u8], prefix: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(hdr.len());
    let mut first = true;
    for line in hdr.split_inclusive(|&b| b == b'\n') {
        let drop = !first
            && line
                .get(..prefix.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(prefix.as_bytes()));
        first = false;
        if !drop {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Strip what must not be checked again on the sourcing stream.
fn clean_header(hdr: &[u8]) -> Vec<u8> {
    without_prefix(&without_prefix(hdr, "Nats-Expected-"), "Nats-Batch-")
}

/// The `Nats-Stream-Source` value: the index name's parts around the origin sequence.
pub fn source_header(iname: &str, reply: &str, subject: &str) -> String {
    let mut parts = iname.split(' ');
    let name = parts.next().unwrap_or_default();
    let filter = parts.next().unwrap_or(">");
    let dest = parts.next().unwrap_or(">");
    format!("{name} {} {filter} {dest} {subject}", seq_text(reply))
}

fn is_control(m: &InternalMsg) -> bool {
    m.payload.is_empty() && m.header.as_deref().is_some_and(|h| h.starts_with(b"NATS/1.0 100 "))
}

fn hdr_i64(hdr: &[u8], key: &str) -> i64 {
    headers::get(hdr, key)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Handle what waits in the inbox of attempt `attempt` of link `id`; returns the
/// publishes to make (flow control answers) once the state is no longer borrowed.
pub fn drain(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    id: &LinkId,
    attempt: u64,
    now: Instant,
) -> Vec<Outgoing> {
    let mut out = Vec::new();
    while let Some(m) = next_delivery(sjs, key, id, attempt) {
        on_msg(sjs, core, key, id, attempt, m, &mut out, now);
    }
    out
}

/// The next waiting delivery of the link's current attempt.
fn next_delivery(sjs: &mut ShardJs, key: &StreamKey, id: &LinkId, attempt: u64) -> Option<InternalMsg> {
    let l = sjs.streams.get_mut(key)?.sourcing.as_mut()?.link_mut(id)?;
    if l.attempt != attempt {
        return None;
    }
    l.inbox.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
}

/// A delivery on the deliver subject of attempt `attempt` of link `id`.
#[allow(clippy::too_many_arguments)]
fn on_msg(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    id: &LinkId,
    attempt: u64,
    m: InternalMsg,
    out: &mut Vec<Outgoing>,
    now: Instant,
) {
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let last_seq = st.store.fast_state().last_seq;
    let Some(l) = st.sourcing.as_mut().and_then(|sc| sc.link_mut(id)) else {
        return;
    };
    if l.attempt != attempt || l.sub.is_none() {
        return;
    }
    l.last = wall_ns();
    if is_control(&m) {
        let hdr = m.header.as_deref().unwrap_or_default();
        if !m.reply.is_empty() {
            let fc = format!(
                "NATS/1.0\r\nNats-Last-Consumer: {}\r\nNats-Last-Stream: {}\r\n\r\n",
                l.dseq, l.sseq
            );
            out.push((m.reply.clone(), Some(fc.into_bytes())));
            return;
        }
        let ldseq = hdr_i64(hdr, "Nats-Last-Consumer");
        if ldseq > 0 && ldseq as u64 != l.dseq {
            restart_link(core, l, id, last_seq, now);
            super::reschedule(sjs, now);
        } else if let Some(stalled) = headers::get(hdr, "Nats-Consumer-Stalled").filter(|s| !s.is_empty()) {
            out.push((stalled.to_vec(), None));
        }
        return;
    }
    let reply = String::from_utf8_lossy(&m.reply).to_string();
    let Some(info) = parse_ack_subject(&reply) else { return };
    let cname = consumer_of(&reply).unwrap_or_default().to_string();
    if !l.cname.is_empty() && l.cname != cname {
        return;
    }
    if info.deliveries > 1 {
        return;
    }
    if l.cname.is_empty() {
        l.cname = cname;
    }
    let (sseq, dseq) = (info.stream_seq, info.consumer_seq);
    if *id == LinkId::Mirror {
        on_mirror_msg(sjs, core, key, m, sseq, dseq, info.ts, info.pending, now);
    } else {
        on_source_msg(sjs, core, key, id, m, &reply, sseq, dseq, info.pending, now);
    }
}

fn link<'a>(st: &'a mut Stream, id: &LinkId) -> Option<&'a mut Link> {
    st.sourcing.as_mut().and_then(|sc| sc.link_mut(id))
}

#[allow(clippy::too_many_arguments)]
fn on_mirror_msg(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    m: InternalMsg,
    sseq: u64,
    dseq: u64,
    ts: i64,
    pending: u64,
    now: Instant,
) {
    let id = LinkId::Mirror;
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let last_seq = st.store.fast_state().last_seq;
    let Some(l) = link(st, &id) else { return };
    let (osseq, odseq) = (l.sseq, l.dseq);
    let mut gap = None;
    if sseq <= l.sseq {
        if dseq == l.dseq + 1 {
            l.dseq += 1;
        }
        return;
    } else if sseq == l.sseq + 1 {
        l.dseq = dseq;
        l.sseq = sseq;
    } else if dseq == l.dseq + 1 {
        // The origin has no messages in between.
        gap = Some((l.sseq + 1, sseq - 1));
        l.dseq = dseq;
        l.sseq = sseq;
    } else {
        restart_link(core, l, &id, last_seq, now);
        super::reschedule(sjs, now);
        return;
    }
    l.lag = pending.saturating_sub(1);
    let subject = String::from_utf8_lossy(&m.subject).to_string();
    let subject = l.transform(&subject).unwrap_or(subject);
    let hdr = m.header.as_deref().map(clean_header);
    if let Some((from, to)) = gap {
        if let Err(e) = st.store.skip_msgs(from, to - from + 1) {
            tracing::warn!("JetStream mirror '{}' could not skip {from}..{to}: {e}", st.name);
        }
    }
    let caught_up = pending < 10;
    let size = st
        .store
        .msg_size(&subject, hdr.as_deref().unwrap_or_default(), &m.payload);
    let stored = if st.over_limits(size).is_some() {
        Err("insufficient resources".to_string())
    } else {
        st.store
            .store_raw_msg(
                &subject,
                hdr.as_deref().unwrap_or_default(),
                &m.payload,
                sseq,
                ts,
                0,
                true,
            )
            .map_err(|e| e.to_string())
    };
    match stored {
        Ok(()) => {
            st.dirty = true;
            sjs.notify_stored(key, &[(sseq, subject.as_str())], false, None, now);
            if caught_up {
                super::report::mirror_direct(sjs, core, key, now);
            }
        }
        Err(e) => {
            tracing::warn!("Error processing inbound mirror message for '{}': {e}", key.1);
            let last_seq = st.store.fast_state().last_seq;
            if let Some(l) = link(st, &id) {
                l.sseq = osseq;
                l.dseq = odseq;
                restart_link(core, l, &id, last_seq, now);
            }
            super::reschedule(sjs, now);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn on_source_msg(
    sjs: &mut ShardJs,
    core: &mut ShardCore,
    key: &StreamKey,
    id: &LinkId,
    m: InternalMsg,
    reply: &str,
    sseq: u64,
    dseq: u64,
    pending: u64,
    now: Instant,
) {
    let domain = sjs.js.settings.domain.clone();
    let max_payload = core.config().max_payload;
    let Some(st) = sjs.streams.get_mut(key) else { return };
    let last_seq = st.store.fast_state().last_seq;
    let Some(l) = link(st, id) else { return };
    let (osseq, odseq) = (l.sseq, l.dseq);
    if sseq <= l.sseq {
        if dseq == l.dseq + 1 {
            l.dseq += 1;
        }
        return;
    } else if dseq == l.dseq + 1 {
        l.dseq += 1;
        l.sseq = sseq;
    } else {
        // A delivery went missing: start again after the last one taken.
        restart_link(core, l, id, last_seq, now);
        super::reschedule(sjs, now);
        return;
    }
    l.lag = pending.saturating_sub(1);
    let origin_subject = String::from_utf8_lossy(&m.subject).to_string();
    let hdr = m
        .header
        .as_deref()
        .map(|h| clean_header(&headers::without_key(h, STREAM_SOURCE)));
    let hdr = headers::with(
        hdr.as_deref(),
        STREAM_SOURCE,
        &source_header(&l.iname, reply, &origin_subject),
    );
    let subject = l.transform(&origin_subject).unwrap_or(origin_subject);
    // Then the stream's own input transform, as for a client's publish.
    let subject = st.flows.input(&subject).unwrap_or(subject);
    let now_ns = wall_ns();
    // A duplicate `Nats-Msg-Id` is skipped, not retried.
    let msg_id = headers::get(&hdr, "Nats-Msg-Id")
        .and_then(|v| std::str::from_utf8(v).ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    if let Some(id) = &msg_id {
        let window = st.cfg.duplicate_window;
        if st.dedupe.check(id, now_ns, window).is_some() {
            return;
        }
    }
    let size = st.store.msg_size(&subject, &hdr, &m.payload);
    let interest = st.cfg.retention != Retention::Interest || {
        let next = st.store.fast_state().last_seq + 1;
        st.consumers.values().any(|s| s.c.needs(next, &subject))
    };
    let outcome = if st.over_limits(size).is_some() {
        Ingested::Quiet
    } else {
        // A sourced message: counters aggregate by source, not by increment.
        let mode = st.ingest_mode;
        st.ingest_mode = crate::jetstream::stream::ingest::Mode {
            checked: false,
            sourced: true,
        };
        let out = st.ingest(
            &subject,
            b"",
            Some(&hdr),
            &m.payload,
            now_ns,
            interest,
            &domain,
            max_payload,
        );
        st.ingest_mode = mode;
        out
    };
    match outcome {
        Ingested::Stored { seq, purged } => {
            // A sourced message is republished like a published one (after this step: the
            // target may be a stream of this shard).
            let acc = st.account;
            let out = std::mem::take(&mut st.outbox);
            sjs.notify_stored(key, &[(seq, subject.as_str())], purged, None, now);
            crate::jetstream::stream::republish::send_later(core, acc, out);
        }
        Ingested::Reply(_) | Ingested::Quiet => {
            tracing::debug!("JetStream source message for '{}' not stored", key.1);
            let last_seq = st.store.fast_state().last_seq;
            if let Some(l) = link(st, id) {
                l.dseq = odseq;
                l.sseq = osseq;
                // Retry from the message that could not be stored.
                cancel_at(core, l, sseq, now);
            }
            let _ = last_seq;
            super::reschedule(sjs, now);
        }
    }
}

/// Recreate a source's consumer starting at `seq`.
fn cancel_at(core: &mut ShardCore, l: &mut Link, seq: u64, now: Instant) {
    super::cancel(core, l);
    l.start_seq = seq;
    super::schedule_retry(l, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_reply_parts() {
        let r = "$JS.ACK.O.JS_SRC_x.1.7.3.1700000000.2";
        assert_eq!(consumer_of(r), Some("JS_SRC_x"));
        assert_eq!(seq_text(r), "7");
        let v2 = "$JS.ACK.hub.ACCHASH.O.C.1.9.4.1700000000.0.tok";
        assert_eq!(consumer_of(v2), Some("C"));
        assert_eq!(seq_text(v2), "9");
        assert_eq!(consumer_of("_INBOX.x"), None);
        assert_eq!(seq_text("_INBOX.x"), "1");
    }

    #[test]
    fn source_header_shape() {
        assert_eq!(
            source_header("O > >", "$JS.ACK.O.C.1.12.3.1.0", "foo.bar"),
            "O 12 > > foo.bar"
        );
        assert_eq!(
            source_header("O:abcdefgh foo.* bar.>", "$JS.ACK.O.C.1.3.3.1.0", "foo.x"),
            "O:abcdefgh 3 foo.* bar.> foo.x"
        );
    }

    #[test]
    fn header_prefix_removal() {
        let h = b"NATS/1.0\r\nNats-Expected-Stream: X\r\nA: 1\r\nnats-batch-id: b\r\n\r\n";
        assert_eq!(clean_header(h), b"NATS/1.0\r\nA: 1\r\n\r\n".to_vec());
    }
}
