//! Answering a `$SYS.REQ` request the way nats-server's `zReq` does: no reply subject or
//! a stopped system sender means no answer; the JSON body (if any) is decoded into the
//! endpoint's options, a body that fails to decode is answered with code 400 and Go's
//! error text, a server the request's filter does not select stays silent; the answer is
//! `{"server":...,"data":...}`, or an error with code 500 (`"data": null` where
//! nats-server's builder returned a typed nil). Successful answers are compressed when the
//! request asked (`Accept-Encoding`).

use super::compress::Encoding;
use super::envelope::ApiError;
use super::System;
use crate::core::accounts::AccountId;
use crate::core::shard::internal::InternalMsg;
use crate::core::shard::ShardCore;
use crate::monitor::optjson::EventFilter;
use crate::monitor::MonitorError;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// What a handler answers.
pub enum Answer {
    /// `data`: the endpoint's JSON, already encoded.
    Data(Vec<u8>),
    /// No `data` (a successful action).
    Done,
    /// An error after the options were decoded (code 500); `null_data` adds `"data":null`.
    Failed { description: String, null_data: bool },
    /// Nothing at all (nats-server's `errSkipZreq`).
    Skip,
}

impl Answer {
    /// `v` as `data`.
    pub fn json<T: Serialize>(v: &T) -> Answer {
        Answer::Data(crate::proto::gojson::to_vec(v))
    }

    /// A builder's result: its JSON, or its error with `"data": null` (nats-server's
    /// builders return a nil pointer with their errors).
    pub fn from_result<T: Serialize>(r: Result<T, MonitorError>) -> Answer {
        match r {
            Ok(v) => Answer::json(&v),
            Err(e) => Answer::Failed {
                description: e.to_string(),
                null_data: true,
            },
        }
    }
}

/// Where and how to answer one request.
pub struct Request {
    pub sys: Arc<System>,
    /// The account the reply is published in (the system account).
    pub account: AccountId,
    pub reply: Vec<u8>,
    pub encoding: Encoding,
}

impl Request {
    /// Take a request apart like `zReq`: `None` when nothing must be answered (no reply,
    /// the sender stopped, the filter excludes this server, or the body failed to decode,
    /// which has been answered already).
    pub fn start<O>(
        sys: &Arc<System>,
        core: &mut ShardCore,
        m: &InternalMsg,
        decode: impl FnOnce(&[u8]) -> Result<(O, EventFilter), String>,
        now: Instant,
    ) -> Option<(O, Request)> {
        if m.reply.is_empty() || sys.stopped() {
            return None;
        }
        let req = Request {
            sys: sys.clone(),
            account: m.account,
            reply: m.reply.clone(),
            encoding: Encoding::from_header(m.header.as_deref()),
        };
        match decode(&m.payload) {
            Ok((opts, filter)) => {
                if !m.payload.is_empty() && excluded(sys, &filter) {
                    return None;
                }
                Some((opts, req))
            }
            Err(e) => {
                req.error(core, 400, &e, now);
                None
            }
        }
    }

    /// Send `answer`.
    pub fn answer(self, core: &mut ShardCore, answer: Answer, now: Instant) {
        let body = match answer {
            Answer::Skip => return,
            Answer::Data(d) => envelope(&self.sys, Some(&d), None),
            Answer::Done => envelope(&self.sys, None, None),
            Answer::Failed { description, null_data } => {
                let e = ApiError { code: 500, description };
                let body = envelope(&self.sys, null_data.then_some(&b"null"[..]), Some(&e));
                self.publish(core, None, &body, now);
                return;
            }
        };
        let (hdr, body) = self.encoding.apply(body);
        self.publish(core, hdr.as_deref(), &body, now);
    }

    /// An error envelope with `code` (never compressed).
    pub fn error(&self, core: &mut ShardCore, code: u16, description: &str, now: Instant) {
        let e = ApiError {
            code,
            description: description.to_string(),
        };
        let body = envelope(&self.sys, None, Some(&e));
        self.publish(core, None, &body, now);
    }

    /// A message that is not an envelope (IDZ, STATSZ, CONNS, NSUBS), never compressed.
    pub fn raw(&self, core: &mut ShardCore, body: &[u8], now: Instant) {
        self.publish(core, None, body, now);
    }

    fn publish(&self, core: &mut ShardCore, hdr: Option<&[u8]>, body: &[u8], now: Instant) {
        if self.sys.stopped() {
            return;
        }
        core.publish_internal(self.account, &self.reply, b"", hdr, body, now);
    }
}

/// nats-server's `filterRequest`: true if this server is not one the request asks.
pub fn excluded(sys: &System, f: &EventFilter) -> bool {
    let s = sys.server();
    f.excludes(&s.name, &s.host, &s.cluster, &s.tags, &s.domain)
}

/// `{"server":<info>[,"data":<data>][,"error":<error>]}` with the next sequence number.
pub fn envelope(sys: &System, data: Option<&[u8]>, error: Option<&ApiError>) -> Vec<u8> {
    let server = crate::proto::gojson::to_vec(&sys.server().info());
    let mut out = Vec::with_capacity(server.len() + data.map_or(0, <[u8]>::len) + 64);
    out.extend_from_slice(b"{\"server\":");
    out.extend_from_slice(&server);
    if let Some(d) = data {
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(d);
    }
    if let Some(e) = error {
        out.extend_from_slice(b",\"error\":");
        out.extend_from_slice(&crate::proto::gojson::to_vec(e));
    }
    out.push(b'}');
    out
}
