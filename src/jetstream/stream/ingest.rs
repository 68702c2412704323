//! A publish into a stream, as the reference's `processJetStreamMsg` handles it on a
//! standalone server: sealed streams refuse it; the `Nats-Expected-*` headers, the
//! duplicate window, rollups, per-message TTLs and the size limits are checked in the
//! reference's order; the store assigns the sequence; the PubAck waits for durability.
//! Counters ([`super::counter`]) and schedules ([`super::schedule`]) hook in where the
//! reference checks them; the messages of a committing batch ([`super::batch`]) were
//! checked as a whole before and skip the per-message consistency checks.

use super::Stream;
use crate::jetstream::api::config::Retention;
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use crate::proto::headers;

/// How a message comes in: `checked` for the messages of a committing batch (checked as
/// a whole before), `sourced` for messages the stream makes itself or copies from
/// another stream (stored as they are: no increment, TTL, schedule or rollup permission
/// checks).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mode {
    pub checked: bool,
    pub sourced: bool,
}

/// What became of a publish.
pub enum Ingested {
    /// Stored at `seq`; the PubAck (if the publish wants one) waits in the stream's
    /// queue. `purged` is set when a rollup removed messages.
    Stored { seq: u64, purged: bool },
    /// Answered at once (an error or a duplicate), with this body.
    Reply(Vec<u8>),
    /// Nothing to say (no reply subject, or `no_ack`).
    Quiet,
}

/// The PubAck `{"stream":"S",["domain":"D",]"seq":N}` (the reference writes it by hand in
/// this order).
pub fn pub_ack(stream: &str, domain: &str, seq: u64, duplicate: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + stream.len() + domain.len());
    pub_ack_into(&mut out, stream, domain, seq, duplicate);
    out
}

/// [`pub_ack`], appended to `out`.
pub fn pub_ack_into(out: &mut Vec<u8>, stream: &str, domain: &str, seq: u64, duplicate: bool) {
    use crate::proto::gojson::push_quoted;
    out.extend_from_slice(b"{\"stream\":");
    push_quoted(out, stream);
    if !domain.is_empty() {
        out.extend_from_slice(b",\"domain\":");
        push_quoted(out, domain);
    }
    out.extend_from_slice(b",\"seq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    if duplicate {
        out.extend_from_slice(b",\"duplicate\": true");
    }
    out.push(b'}');
}

/// The failed PubAck `{"error":{...},"stream":"S","seq":0}`.
pub fn pub_ack_error(stream: &str, err: &ApiError) -> Vec<u8> {
    let e = crate::proto::gojson::to_vec(err);
    let mut out = b"{\"error\":".to_vec();
    out.extend_from_slice(&e);
    out.extend_from_slice(b",\"stream\":");
    out.extend_from_slice(json_str(stream).as_bytes());
    out.extend_from_slice(b",\"seq\":0}");
    out
}

pub(super) fn json_str(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    crate::proto::gojson::push_quoted(&mut out, s);
    String::from_utf8(out).unwrap_or_else(|_| "\"\"".into())
}

/// Parse `Nats-TTL` as the reference does: seconds > 0, -1 for `never`, 0 for none.
pub fn parse_ttl(v: &str) -> Result<i64, ApiError> {
    if v.eq_ignore_ascii_case("never") {
        return Ok(-1);
    }
    if let Some(ns) = crate::jetstream::api::duration::parse_go_duration(v) {
        if ns < 1_000_000_000 {
            return Err(e::JS_MESSAGE_TTL_INVALID_ERR.err());
        }
        return Ok(ns / 1_000_000_000);
    }
    match v.parse::<i64>() {
        Ok(t) if t >= 0 => Ok(t),
        _ => Err(e::JS_MESSAGE_TTL_INVALID_ERR.err()),
    }
}

fn hdr_str<'a>(hdr: Option<&'a [u8]>, key: &str) -> Option<&'a str> {
    hdr.and_then(|h| headers::get(h, key))
        .and_then(|v| std::str::from_utf8(v).ok())
}

fn hdr_u64(hdr: Option<&[u8]>, key: &str) -> Option<u64> {
    // The reference parses with its own parseInt64: a bad number reads as "absent".
    hdr_str(hdr, key).and_then(|v| v.trim().parse::<u64>().ok())
}

impl Stream {
    /// Take a publish on `subject`. `now` is the wall clock in Unix ns; `interest` tells
    /// (interest retention) whether any consumer wants this subject; `max_payload` is the
    /// server's limit.
    #[allow(clippy::too_many_arguments)]
    pub fn ingest(
        &mut self,
        subject: &str,
        reply: &[u8],
        hdr: Option<&[u8]>,
        payload: &[u8],
        now: i64,
        interest: bool,
        domain: &str,
        max_payload: i64,
    ) -> Ingested {
        let respond = !self.cfg.no_ack && !reply.is_empty();
        let fail = |s: &Stream, err: ApiError| {
            if respond {
                Ingested::Reply(pub_ack_error(&s.name, &err))
            } else {
                Ingested::Quiet
            }
        };
        // A committing batch was checked as a whole already.
        let Mode { checked, sourced } = self.ingest_mode;
        let batch_tail = if checked { super::batch::ack_tail(hdr) } else { None };
        if self.cfg.sealed && !checked {
            return fail(self, e::JS_STREAM_SEALED_ERR.err());
        }
        // Not stored: the client info the server itself adds to requests.
        let cleaned;
        let mut hdr = hdr;
        if let Some(h) = hdr {
            if headers::get(h, "Nats-Request-Info").is_some() {
                cleaned = headers::without_key(h, "Nats-Request-Info");
                hdr = Some(&cleaned);
            }
        }
        let mut msg_id = "";
        let mut rollup_sub = false;
        let mut rollup_all = false;
        let mut ttl = 0i64;
        let mut incr = None;
        let scheduled_hdr;
        if let (Some(h), false) = (hdr, checked) {
            match super::counter::increment(hdr) {
                Ok(Some(i)) => {
                    if !sourced {
                        if let Err(err) = super::counter::check_increment(h, payload, self.cfg.allow_msg_counter) {
                            return fail(self, err);
                        }
                    }
                    incr = Some(i);
                }
                Ok(None) => {}
                Err(err) => return fail(self, err),
            }
            if let Some(name) = hdr_str(hdr, "Nats-Expected-Stream") {
                if !name.is_empty() && name != self.name {
                    return fail(self, e::JS_STREAM_NOT_MATCH_ERR.err());
                }
            }
            if let Some(v) = hdr_str(hdr, "Nats-TTL") {
                let parsed = parse_ttl(v).unwrap_or(0);
                if parsed != 0 && !self.cfg.allow_msg_ttl && !sourced {
                    return fail(self, e::JS_MESSAGE_TTL_DISABLED_ERR.err());
                }
            }
            let opt_subj = hdr_str(hdr, "Nats-Expected-Last-Subject-Sequence-Subject").filter(|s| !s.is_empty());
            if let Some(want) = hdr_u64(hdr, "Nats-Expected-Last-Subject-Sequence") {
                let on = opt_subj.unwrap_or(subject);
                let have = match self.store.load_last_msg(on) {
                    Ok(m) => m.seq,
                    Err(_) => 0,
                };
                if have != want {
                    return fail(
                        self,
                        e::JS_STREAM_WRONG_LAST_SEQUENCE_ERR_F.with(&[("seq", &have.to_string())]),
                    );
                }
            } else if opt_subj.is_some() {
                return fail(self, e::JS_STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID.err());
            }
            if let Some(want) = hdr_u64(hdr, "Nats-Expected-Last-Sequence") {
                let last = self.store.fast_state().last_seq;
                if want != last {
                    return fail(
                        self,
                        e::JS_STREAM_WRONG_LAST_SEQUENCE_ERR_F.with(&[("seq", &last.to_string())]),
                    );
                }
            }
            match super::schedule::check_headers(h, subject, &self.cfg, sourced) {
                Ok(Some(with_rollup)) => {
                    scheduled_hdr = with_rollup;
                    hdr = Some(&scheduled_hdr);
                }
                Ok(None) => {}
                Err(err) => return fail(self, err),
            }
        }
        if hdr.is_some() {
            msg_id = hdr_str(hdr, "Nats-Msg-Id").unwrap_or("");
            if !msg_id.is_empty() && self.cfg.mirror.is_none() && !checked {
                if let Some(seq) = self.dedupe.check(msg_id, now, self.cfg.duplicate_window) {
                    return if respond {
                        Ingested::Reply(pub_ack(&self.name, domain, seq, true))
                    } else {
                        Ingested::Quiet
                    };
                }
            }
            if let Some(want) = hdr_str(hdr, "Nats-Expected-Last-Msg-Id") {
                if !want.is_empty() && want != self.last_msg_id {
                    let last = self.last_msg_id.clone();
                    return fail(self, e::JS_STREAM_WRONG_LAST_MSG_ID_ERR_F.with(&[("id", &last)]));
                }
            }
            if let Some(r) = hdr_str(hdr, "Nats-Rollup").filter(|r| !r.is_empty()) {
                if (!self.cfg.allow_rollup_hdrs || self.cfg.deny_purge) && !checked && !sourced {
                    return fail(self, e::JS_STREAM_ROLLUP_FAILED_F.err_with("rollup not permitted"));
                }
                match r {
                    "sub" => rollup_sub = true,
                    "all" => rollup_all = true,
                    other => {
                        return fail(
                            self,
                            e::JS_STREAM_ROLLUP_FAILED_F.err_with(format!("rollup value invalid: {other:?}")),
                        )
                    }
                }
            }
        }
        if !checked && incr.is_none() && self.cfg.allow_msg_counter {
            return fail(self, e::JS_MESSAGE_INCR_MISSING_ERR.err());
        }
        let counted;
        let mut payload = payload;
        if let (Some(i), true) = (&incr, self.cfg.allow_msg_counter) {
            let last = self.store.load_last_msg(subject).ok();
            let h = hdr.unwrap_or_default();
            match super::counter::apply(
                last.as_ref().map(|m| (&m.headers[..], &m.payload[..])),
                subject,
                h,
                payload,
                i,
            ) {
                Ok(a) => counted = a,
                Err(err) => return fail(self, err),
            }
            if let Some(nh) = &counted.hdr {
                hdr = Some(nh);
            }
            payload = &counted.body;
            let (hl, pl) = (hdr.map_or(0, <[u8]>::len) as i64, payload.len() as i64);
            if hl > max_payload || pl > max_payload - hl {
                return fail(self, e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
            }
        }
        let hlen = hdr.map_or(0, <[u8]>::len) as i64;
        let plen = payload.len() as i64;
        if !checked {
            if hlen > max_payload || plen > max_payload - hlen {
                return fail(self, e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
            }
            let max_size = i64::from(self.cfg.max_msg_size);
            if max_size >= 0 && (hlen > max_size || plen > max_size - hlen) {
                return fail(self, e::JS_STREAM_MESSAGE_EXCEEDS_MAXIMUM_ERR.err());
            }
            if hlen > i64::from(u16::MAX) {
                return fail(self, e::JS_STREAM_HEADER_EXCEEDS_MAXIMUM_ERR.err());
            }
        }
        // The PubAck's extra fields: a batch's id and count, or a counter's total.
        let tail = match batch_tail {
            Some(t) => Some(t),
            None if self.cfg.allow_msg_counter => {
                Some(format!(",\"val\":{}", json_str(&super::counter::total_in(payload))))
            }
            None => None,
        };
        if self.cfg.retention == Retention::Interest && !interest {
            // Nobody would consume it: the sequence is taken without a message.
            let seq = match self.store.skip_msg(0) {
                Ok(s) => s,
                Err(err) => return fail(self, e::JS_STREAM_STORE_FAILED_F.err_with(err)),
            };
            self.last_msg_id = msg_id.to_string();
            if !msg_id.is_empty() {
                self.dedupe.insert(msg_id, seq, now);
            }
            self.dirty = true;
            return self.stored(seq, reply, respond, domain, false, tail);
        }
        if let Some(v) = hdr_str(hdr, "Nats-TTL") {
            match parse_ttl(v) {
                Ok(t) => ttl = t,
                Err(err) => return fail(self, err),
            }
        }
        let raised;
        if let Some((t, h)) = super::markers::raise_ttl(&self.cfg, ttl, hdr) {
            ttl = t;
            raised = h;
            hdr = Some(&raised);
        }
        let republish = self.republish_plan(subject);
        let (seq, ts) = match self.store.store_msg_at(subject, hdr.unwrap_or(&[]), payload, now, ttl) {
            Ok(r) => r,
            Err(err) => {
                if !err.is_limit() {
                    tracing::error!("JetStream failed to store a msg on stream '{}': {err}", self.name);
                }
                return fail(self, e::JS_STREAM_STORE_FAILED_F.err_with(err));
            }
        };
        self.dirty = true;
        self.last_msg_id = msg_id.to_string();
        if !msg_id.is_empty() {
            self.dedupe.insert(msg_id, seq, now);
        }
        let mut purged = false;
        // A rollup keeps only the message just stored (of its subject, or of the stream);
        // one copied from elsewhere into a stream without rollups is stored as is.
        let rollups = self.cfg.allow_rollup_hdrs && !self.cfg.deny_purge;
        if !rollups {
            (rollup_sub, rollup_all) = (false, false);
        }
        if rollup_sub {
            purged = self.store.purge_ex(subject, 0, 1).unwrap_or(0) > 0;
        } else if rollup_all {
            purged = self.store.purge_ex("", 0, 1).unwrap_or(0) > 0;
        }
        purged |= self.after_store_schedules(seq, subject, hdr.unwrap_or_default(), ts);
        if let Some(plan) = republish {
            self.queue_republish(plan, subject, hdr.unwrap_or(&[]), payload, seq, ts);
        }
        self.stored(seq, reply, respond, domain, purged, tail)
    }

    #[allow(clippy::too_many_arguments)]
    fn stored(
        &mut self,
        seq: u64,
        reply: &[u8],
        respond: bool,
        domain: &str,
        purged: bool,
        tail: Option<String>,
    ) -> Ingested {
        if respond {
            let name = &self.name;
            self.acks.push_with(seq, reply, |out| {
                pub_ack_into(out, name, domain, seq, false);
                if let Some(t) = tail {
                    out.pop();
                    out.extend_from_slice(t.as_bytes());
                    out.push(b'}');
                }
            });
        }
        Ingested::Stored { seq, purged }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pub_ack_shapes() {
        assert_eq!(pub_ack("S", "", 3, false), br#"{"stream":"S","seq":3}"#.to_vec());
        assert_eq!(
            pub_ack("S", "hub", 3, false),
            br#"{"stream":"S","domain":"hub","seq":3}"#.to_vec()
        );
        assert_eq!(
            pub_ack("S", "", 3, true),
            br#"{"stream":"S","seq":3,"duplicate": true}"#.to_vec()
        );
        let err = pub_ack_error("S", &e::JS_STREAM_SEALED_ERR.err());
        assert_eq!(
            String::from_utf8(err).unwrap(),
            r#"{"error":{"code":400,"err_code":10109,"description":"invalid operation on sealed stream"},"stream":"S","seq":0}"#
        );
    }

    #[test]
    fn ttl_values() {
        assert_eq!(parse_ttl("never").unwrap(), -1);
        assert_eq!(parse_ttl("10s").unwrap(), 10);
        assert_eq!(parse_ttl("1m").unwrap(), 60);
        assert_eq!(parse_ttl("30").unwrap(), 30);
        assert!(parse_ttl("500ms").is_err());
        assert!(parse_ttl("-1").is_err());
        assert!(parse_ttl("soon").is_err());
    }
}
