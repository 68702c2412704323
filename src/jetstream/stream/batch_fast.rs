//! Fast batch publish (`allow_batched`, nats-server 2.14). Unlike an atomic batch, the
//! messages are stored as they come (no staging, no all-or-nothing); the batch lives in
//! the reply subject, `<prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI` (`gap`: `ok` or
//! `fail`; `op`: 0 start, 1 append, 2 commit, 3 commit with an end-of-batch message that
//! is not stored, 4 ping). The stream answers with flow-control messages
//! (`{"type":"ack","seq":N,"msgs":M}`: stored up to N, ack again every M messages),
//! gap reports (`{"type":"gap","last_seq":L,"seq":S}`), per-message errors
//! (`{"type":"err","seq":S,"error":{...}}`), and the commit's PubAck with `"batch"` and
//! `"count"` once the batch is durable.

use super::batch::{BatchLimits, BatchOutcome, FAST_INFLIGHT};
use super::ingest::{pub_ack, pub_ack_error, Ingested, Mode};
use super::Stream;
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use std::sync::atomic::Ordering;

/// The batch a reply subject describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastRef {
    pub id: String,
    pub seq: u64,
    pub flow: u16,
    pub ping: bool,
    pub gap_ok: bool,
    pub commit: bool,
    pub eob: bool,
}

/// Read a fast batch reply subject: `None` when it is not one (no `.$FI` suffix),
/// `Some(None)` when it is one but malformed.
pub fn parse_reply(reply: &[u8]) -> Option<Option<FastRef>> {
    let reply = std::str::from_utf8(reply).ok()?;
    let rest = reply.strip_suffix(".$FI").filter(|r| !r.is_empty())?;
    Some(parse_tokens(rest))
}

fn go_int(s: &str) -> i64 {
    // The reference's parseInt64: digits only, else -1.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return -1;
    }
    s.parse().unwrap_or(-1)
}

fn parse_tokens(rest: &str) -> Option<FastRef> {
    let mut t = rest.rsplitn(6, '.');
    let op = go_int(t.next()?);
    if !(0..=4).contains(&op) {
        return None;
    }
    let seq = go_int(t.next()?);
    if seq < 1 {
        return None;
    }
    let seq = seq as u64;
    let eob = op == 3;
    if (seq == 1 && eob) || (op == 0 && seq != 1) || (op == 1 && seq <= 1) {
        return None;
    }
    let gap_ok = match t.next()? {
        "ok" => true,
        "fail" => false,
        _ => return None,
    };
    let flow = match go_int(t.next()?) {
        f if f <= 0 => 10,
        f => f.min(i64::from(u16::MAX)) as u16,
    };
    let id = t.next()?.to_string();
    // There must be a prefix before the id.
    t.next()?;
    Some(FastRef {
        id,
        seq,
        flow,
        ping: op == 4,
        gap_ok,
        commit: eob || op == 2,
        eob,
    })
}

/// A fast batch in progress.
#[derive(Debug)]
pub struct Fast {
    /// Highest batch sequence seen.
    lseq: u64,
    /// Highest batch sequence stored.
    pseq: u64,
    /// Batch sequence of the last flow-control ack.
    fseq: u64,
    /// Stream sequence of the last stored message.
    sseq: u64,
    ack_messages: u16,
    max_ack_messages: u16,
    gap_ok: bool,
    commit: bool,
    /// When it is abandoned (Unix ns).
    pub(super) expires: i64,
}

fn flow_ack(seq: u64, msgs: u16) -> Vec<u8> {
    format!("{{\"type\":\"ack\",\"seq\":{seq},\"msgs\":{msgs}}}").into_bytes()
}

fn gap(last: u64, seq: u64) -> Vec<u8> {
    format!("{{\"type\":\"gap\",\"last_seq\":{last},\"seq\":{seq}}}").into_bytes()
}

fn flow_err(seq: u64, err: &ApiError) -> Vec<u8> {
    let mut out = format!("{{\"type\":\"err\",\"seq\":{seq},\"error\":").into_bytes();
    out.extend_from_slice(&crate::proto::gojson::to_vec(err));
    out.push(b'}');
    out
}

/// A PubAck with a fast batch's `"batch":"<id>","count":N` added before its closing brace.
fn batch_pub_ack(mut body: Vec<u8>, id: &str, count: u64) -> Vec<u8> {
    body.pop();
    body.extend_from_slice(b",\"batch\":");
    crate::proto::gojson::push_quoted(&mut body, id);
    body.extend_from_slice(b",\"count\":");
    body.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    body.push(b'}');
    body
}

impl Fast {
    /// Send a flow-control ack when enough has been stored; tune the ack interval to
    /// the number of batches. Whether one was sent.
    fn check_flow(&mut self, batches: usize, out: &mut Vec<Vec<u8>>) -> bool {
        let am = u64::from(self.ack_messages.max(1));
        if self.pseq < self.fseq + am {
            return false;
        }
        self.fseq += (self.pseq - self.fseq) / am * am;
        let max = u16::try_from(500 / batches.max(1))
            .unwrap_or(1)
            .max(1)
            .min(self.max_ack_messages);
        if self.ack_messages < max {
            self.ack_messages = self.ack_messages.saturating_mul(2).min(max);
        } else if self.ack_messages > max {
            self.ack_messages = (self.ack_messages / 2).max(max);
        }
        out.push(flow_ack(self.fseq, self.ack_messages));
        true
    }
}

impl super::batch::Batches {
    pub(super) fn expire_fast(&mut self, now: i64) {
        let before = self.fast.len();
        self.fast.retain(|_, b| b.commit || b.expires > now);
        let gone = (before - self.fast.len()) as i64;
        if gone > 0 {
            FAST_INFLIGHT.fetch_sub(gone, Ordering::Relaxed);
        }
    }

    fn drop_fast(&mut self, id: &str) {
        if self.fast.remove(id).is_some() {
            FAST_INFLIGHT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Stream {
    fn fast_pub_ack(&self, domain: &str, sseq: u64, id: &str, count: u64) -> Vec<u8> {
        batch_pub_ack(pub_ack(&self.name, domain, sseq, false), id, count)
    }

    /// End the batch: the PubAck (once durable) for what was stored. The batch is gone
    /// afterwards.
    fn fast_commit(&mut self, id: &str, reply: &[u8], domain: &str) {
        let Some(b) = self.batches.fast.get_mut(id) else { return };
        b.commit = true;
        let (sseq, count) = (b.sseq, b.lseq);
        self.batches.drop_fast(id);
        if !reply.is_empty() {
            let body = self.fast_pub_ack(domain, sseq, id, count);
            self.acks.push(sseq, reply, &body);
            // Durable already: the stream's ack queue releases it at the next poll.
            self.dirty = true;
        }
    }

    /// A message published with a fast batch reply subject (`batch` is `None` when that
    /// subject is malformed).
    #[allow(clippy::too_many_arguments)]
    pub fn fast_publish(
        &mut self,
        batch: Option<FastRef>,
        subject: &str,
        reply: &[u8],
        hdr: Option<&[u8]>,
        payload: &[u8],
        now: i64,
        domain: &str,
        max_payload: i64,
        limits: &BatchLimits,
    ) -> BatchOutcome {
        let mut out = BatchOutcome::default();
        let respond = !self.cfg.no_ack && !reply.is_empty();
        match self.fast_start(batch.as_ref(), hdr, payload, now, limits) {
            Err(err) => {
                if respond {
                    out.replies.push(pub_ack_error(&self.name, &err));
                }
                out
            }
            Ok(()) => {
                let Some(b) = batch else { return out };
                let stripped = match super::batch::strip_api_level(hdr) {
                    Ok(s) => s,
                    Err(err) => {
                        self.batches.drop_fast(&b.id);
                        if respond {
                            out.replies.push(pub_ack_error(&self.name, &err));
                        }
                        return out;
                    }
                };
                let hdr = stripped.as_deref().or(hdr);
                self.fast_step(&b, subject, reply, hdr, payload, now, domain, max_payload, &mut out);
                out
            }
        }
    }

    fn fast_start(
        &mut self,
        batch: Option<&FastRef>,
        hdr: Option<&[u8]>,
        payload: &[u8],
        now: i64,
        limits: &BatchLimits,
    ) -> Result<(), ApiError> {
        if self.cfg.sealed {
            return Err(e::JS_STREAM_SEALED_ERR.err());
        }
        let max_size = i64::from(self.cfg.max_msg_size);
        let (hl, pl) = (hdr.map_or(0, <[u8]>::len) as i64, payload.len() as i64);
        if max_size >= 0 && (hl > max_size || pl > max_size - hl) {
            return Err(e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
        }
        if !self.cfg.allow_batched {
            return Err(e::JS_BATCH_PUBLISH_DISABLED_ERR.err());
        }
        let Some(b) = batch else {
            return Err(e::JS_BATCH_PUBLISH_INVALID_PATTERN_ERR.err());
        };
        if b.id.len() > 64 {
            return Err(e::JS_BATCH_PUBLISH_INVALID_BATCH_ID_ERR.err());
        }
        self.batches.expire(now);
        if !self.batches.fast.contains_key(&b.id) {
            if b.seq != 1 {
                return Err(e::JS_BATCH_PUBLISH_UNKNOWN_BATCH_ID_ERR.err());
            }
            if self.batches.fast.len() as i64 + 1 > limits.fast_per_stream() {
                return Err(e::JS_BATCH_PUBLISH_TOO_MANY_INFLIGHT.err());
            }
            if FAST_INFLIGHT.fetch_add(1, Ordering::Relaxed) + 1 > limits.fast_total() {
                FAST_INFLIGHT.fetch_sub(1, Ordering::Relaxed);
                return Err(e::JS_BATCH_PUBLISH_TOO_MANY_INFLIGHT.err());
            }
            let others = !self.batches.fast.is_empty();
            self.batches.fast.insert(
                b.id.clone(),
                Fast {
                    lseq: 0,
                    pseq: 0,
                    fseq: 0,
                    sseq: 0,
                    ack_messages: if others { 1 } else { b.flow.min(500) },
                    max_ack_messages: b.flow,
                    gap_ok: b.gap_ok,
                    commit: false,
                    expires: 0,
                },
            );
        }
        if let Some(f) = self.batches.fast.get_mut(&b.id) {
            f.expires = now.saturating_add(limits.timeout_ns());
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn fast_step(
        &mut self,
        b: &FastRef,
        subject: &str,
        reply: &[u8],
        hdr: Option<&[u8]>,
        payload: &[u8],
        now: i64,
        domain: &str,
        max_payload: i64,
        out: &mut BatchOutcome,
    ) {
        let n = self.batches.fast.len();
        let Some(f) = self.batches.fast.get_mut(&b.id) else {
            return;
        };
        if b.ping {
            let mut send_flow = true;
            if b.seq > f.lseq {
                out.replies.push(gap(f.lseq + 1, b.seq + 1));
                if f.gap_ok {
                    f.lseq = b.seq;
                    f.pseq = f.lseq;
                    send_flow = !f.check_flow(n, &mut out.replies);
                } else {
                    self.fast_commit(&b.id, reply, domain);
                    return;
                }
            }
            if send_flow {
                out.replies.push(flow_ack(f.fseq, f.ack_messages));
            }
            return;
        }
        if f.commit {
            return;
        }
        f.lseq += 1;
        if f.lseq != b.seq {
            if b.seq > f.lseq {
                out.replies.push(gap(f.lseq, b.seq));
            }
            if f.gap_ok && b.seq > f.lseq {
                f.lseq = b.seq;
            } else {
                f.lseq -= 1;
                self.fast_commit(&b.id, reply, domain);
                return;
            }
        }
        if b.commit && b.eob {
            f.lseq -= 1;
            f.pseq = f.lseq;
            self.fast_commit(&b.id, reply, domain);
            return;
        }
        if b.seq == 1 && !self.cfg.no_ack && !reply.is_empty() && !b.commit {
            out.replies.push(flow_ack(0, f.ack_messages));
        }
        // The message on its own is checked as an atomic batch of one.
        let staged_hdr = hdr.unwrap_or_default().to_vec();
        if let Err(err) = self.check_single(subject, &staged_hdr, payload, max_payload) {
            self.fast_rejected(b, reply, hdr, domain, err, out);
            return;
        }
        let mode = self.ingest_mode;
        self.ingest_mode = Mode {
            checked: true,
            sourced: false,
        };
        let next = self.store.fast_state().last_seq + 1;
        let interest = self.cfg.retention != crate::jetstream::api::config::Retention::Interest
            || self.consumers.values().any(|s| s.c.needs(next, subject));
        let r = self.ingest(subject, b"", hdr, payload, now, interest, domain, max_payload);
        self.ingest_mode = mode;
        match r {
            Ingested::Stored { seq, purged } => {
                out.stored.push((seq, subject.to_string()));
                out.purged |= purged;
                let Some(f) = self.batches.fast.get_mut(&b.id) else {
                    return;
                };
                f.sseq = seq;
                f.pseq = f.lseq;
                if b.commit {
                    self.fast_commit(&b.id, reply, domain);
                } else {
                    f.check_flow(n, &mut out.replies);
                }
            }
            Ingested::Reply(body) => out.replies.push(body),
            Ingested::Quiet => {}
        }
    }

    /// A message of the batch failed its checks.
    fn fast_rejected(
        &mut self,
        b: &FastRef,
        reply: &[u8],
        hdr: Option<&[u8]>,
        domain: &str,
        err: ApiError,
        out: &mut BatchOutcome,
    ) {
        let n = self.batches.fast.len();
        let dup = err.err_code == e::JS_ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE_ERR.err_code;
        let Some(f) = self.batches.fast.get_mut(&b.id) else {
            return;
        };
        if dup {
            f.pseq = b.seq;
            f.check_flow(n, &mut out.replies);
            if !b.commit {
                return;
            }
        }
        if !f.gap_ok && f.lseq == 1 {
            // A batch failing at once is answered as a plain publish.
            self.batches.drop_fast(&b.id);
            if self.cfg.no_ack || reply.is_empty() {
                return;
            }
            // A duplicate of a stored message: its PubAck, as for a plain publish.
            let msg_id = hdr
                .and_then(|h| crate::proto::headers::get(h, "Nats-Msg-Id"))
                .and_then(|v| std::str::from_utf8(v).ok())
                .unwrap_or_default();
            let window = self.cfg.duplicate_window;
            let now = crate::jetstream::shard::wall_ns();
            match self.dedupe.check(msg_id, now, window).filter(|s| dup && *s > 0) {
                Some(seq) => {
                    out.replies
                        .push(batch_pub_ack(pub_ack(&self.name, domain, seq, true), &b.id, b.seq));
                }
                None => out.replies.push(pub_ack_error(&self.name, &err)),
            }
            return;
        }
        if !dup {
            out.replies.push(flow_err(b.seq, &err));
        }
        if f.gap_ok {
            return;
        }
        if !dup {
            f.lseq -= 1;
        }
        self.fast_commit(&b.id, reply, domain);
    }

    /// The checks of one message as a batch of its own.
    fn check_single(&mut self, subject: &str, hdr: &[u8], payload: &[u8], max_payload: i64) -> Result<(), ApiError> {
        self.check_batch_one(subject, hdr, payload, max_payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Option<Option<FastRef>> {
        parse_reply(s.as_bytes())
    }

    #[test]
    fn reply_subjects() {
        assert_eq!(r("_INBOX.abc"), None);
        let b = r("_INBOX.x.uuid.100.fail.1.0.$FI").unwrap().unwrap();
        assert_eq!(
            b,
            FastRef {
                id: "uuid".into(),
                seq: 1,
                flow: 100,
                ping: false,
                gap_ok: false,
                commit: false,
                eob: false
            }
        );
        let c = r("p.id.0.ok.5.2.$FI").unwrap().unwrap();
        assert!(c.commit && !c.eob && c.gap_ok && c.flow == 10 && c.seq == 5);
        let eob = r("p.id.99999.ok.5.3.$FI").unwrap().unwrap();
        assert!(eob.commit && eob.eob && eob.flow == u16::MAX);
        assert!(r("p.id.10.ok.5.4.$FI").unwrap().unwrap().ping);
        for bad in [
            "p.id.10.ok.5.5.$FI",
            "p.id.10.ok.0.1.$FI",
            "p.id.10.ok.1.3.$FI",
            "p.id.10.ok.2.0.$FI",
            "p.id.10.ok.1.1.$FI",
            "p.id.10.maybe.1.0.$FI",
            "id.10.ok.1.0.$FI",
            "10.ok.1.0.$FI",
            "x.$FI",
        ] {
            assert_eq!(r(bad), Some(None), "{bad}");
        }
    }

    #[test]
    fn flow_control_ramps() {
        let mut f = Fast {
            lseq: 0,
            pseq: 0,
            fseq: 0,
            sseq: 0,
            ack_messages: 2,
            max_ack_messages: 8,
            gap_ok: false,
            commit: false,
            expires: 0,
        };
        let mut out = Vec::new();
        f.pseq = 1;
        assert!(!f.check_flow(1, &mut out));
        f.pseq = 2;
        assert!(f.check_flow(1, &mut out));
        assert_eq!(out.pop().unwrap(), br#"{"type":"ack","seq":2,"msgs":4}"#);
        f.pseq = 11;
        assert!(f.check_flow(1, &mut out));
        assert_eq!(out.pop().unwrap(), br#"{"type":"ack","seq":10,"msgs":8}"#);
        // Many batches: slows down.
        f.pseq = 18;
        assert!(f.check_flow(250, &mut out));
        assert_eq!(out.pop().unwrap(), br#"{"type":"ack","seq":18,"msgs":4}"#);
        let err = flow_err(3, &e::JS_STREAM_NOT_MATCH_ERR.err());
        assert!(String::from_utf8(err)
            .unwrap()
            .starts_with(r#"{"type":"err","seq":3,"error":{"code":400"#));
        assert_eq!(gap(2, 5), br#"{"type":"gap","last_seq":2,"seq":5}"#);
    }
}
