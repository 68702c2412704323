//! Messages crossing accounts (FEATURES.md §7): a publish that a service import matches
//! goes to the exporting account with a fresh `_R_.` reply; a response on such a reply
//! goes back to the requester; a publish that a stream export feeds is delivered in every
//! importing account too.
//!
//! All of this happens on the publisher's shard, which then routes in the other account
//! like any publish there (its local subscribers, envelopes to other shards). The one
//! exception is a response: its mapping lives on the shard that routed the request, whose
//! index the `_R_.` subject carries, so a response published elsewhere is forwarded there
//! first (mesh flag `RESPONSE`).

use super::latency;
use super::route::Msg;
use super::ShardCore;
use crate::core::accounts::links::{ResponseType, ServiceImport};
use crate::core::accounts::state::{ResponseMap, Tracking};
use crate::core::accounts::AccountId;
use crate::core::client::ConnKey;
use crate::core::mesh_codec::{self, flags};
use crate::core::trace::{TRACE_DEST, TRACE_DISABLED};
use crate::proto::client_info::ClientInfo;
use crate::proto::{gotime, headers};
use std::time::{Duration, Instant};

/// How many account crossings one message may make (imports can chain).
const MAX_IMPORT_DEPTH: u8 = 8;
/// The header a service import stamps on requests.
pub const REQUEST_INFO_HDR: &str = "Nats-Request-Info";
/// Response mappings are swept for expiry this often.
const RESPONSE_SWEEP: Duration = Duration::from_secs(1);

const B62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// `_R_.` + account prefix (6) + `.` + shard (2) + random (6).
const PREFIX_LEN: usize = 4 + 6 + 1;
const REPLY_LEN: usize = PREFIX_LEN + 2 + 6;

/// A service reply subject (`_R_.` prefix), as nats-server tests for one.
pub fn is_service_reply(s: &[u8]) -> bool {
    s.len() > 3 && s.starts_with(b"_R_.")
}

/// A subject used once: a service reply (`_R_.`) or a JetStream ack subject (`$JS.ACK.`,
/// unique per delivery). Routed without the sublist caches, which they would only churn
/// (and evict the subjects that repeat from).
pub fn is_one_shot(s: &[u8]) -> bool {
    is_service_reply(s) || s.starts_with(b"$JS.ACK.")
}

/// The JSON of a `ClientInfo` holding only an account and an RTT, as nats-server writes
/// it (`{"acc":"B","rtt":123}`, empty fields left out), written directly; names that need
/// escaping go through the serializer.
pub(crate) fn brief_info_json(account: &str, rtt: i64) -> String {
    if !crate::proto::gojson::is_plain(account) {
        let ci = ClientInfo {
            account: account.to_string(),
            rtt,
            ..Default::default()
        };
        return ci.to_json();
    }
    let mut out = String::with_capacity(account.len() + 32);
    out.push('{');
    if !account.is_empty() {
        out.push_str("\"acc\":\"");
        out.push_str(account);
        out.push('"');
    }
    if rtt != 0 {
        if !account.is_empty() {
            out.push(',');
        }
        out.push_str("\"rtt\":");
        out.push_str(itoa::Buffer::new().format(rtt));
    }
    out.push('}');
    out
}

fn push_b62(out: &mut Vec<u8>, mut v: u64, n: usize) {
    for _ in 0..n {
        out.push(B62[(v % 62) as usize]);
        v /= 62;
    }
}

/// An owned copy of a message with a new subject, reply and/or header block.
struct Rewritten {
    subject: Vec<u8>,
    reply: Vec<u8>,
    header_len: Option<usize>,
    data: Vec<u8>,
    size_text: String,
    hdr_text: String,
}

impl Rewritten {
    fn new(subject: Vec<u8>, reply: Vec<u8>, header: Option<Vec<u8>>, payload: &[u8]) -> Rewritten {
        let header_len = header.as_ref().map(Vec::len);
        let mut data = header.unwrap_or_default();
        data.extend_from_slice(payload);
        Rewritten {
            size_text: data.len().to_string(),
            hdr_text: header_len.map(|h| h.to_string()).unwrap_or_default(),
            subject,
            reply,
            header_len,
            data,
        }
    }

    fn msg(&self) -> Msg<'_> {
        Msg {
            subject: &self.subject,
            reply: &self.reply,
            header_len: self.header_len,
            data: &self.data,
            size_text: self.size_text.as_bytes(),
            hdr_text: self.hdr_text.as_bytes(),
            internal: false,
            shown: b"",
        }
    }
}

/// The kinds of import a message may take further (see [`ShardCore::route_onward`]).
#[derive(Clone, Copy, Default)]
pub(super) struct Onward {
    /// A service reply (`_R_.`): back to the requester's account.
    response: bool,
    /// The account's service imports may cover the subject.
    services: bool,
    /// Another account's stream import may cover it.
    streams: bool,
}

impl Onward {
    /// Some import may take the message further.
    #[inline]
    pub(super) fn any(self) -> bool {
        self.response || self.services || self.streams
    }
}

impl ShardCore {
    /// Deliver in `acc` and follow imports, `depth` crossings deep.
    pub(super) fn route_at(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let delivered = self.deliver_in(acc, publisher, m, now);
        delivered | self.route_onward(acc, publisher, m, now, depth)
    }

    /// Which kinds of import could take a message on `subject` in `acc` further.
    #[inline]
    pub(super) fn onward(&self, acc: AccountId, subject: &[u8]) -> Onward {
        let st = self.accts.get(acc as usize);
        Onward {
            response: is_service_reply(subject),
            services: st.is_some_and(|st| st.has_service_imports() && st.service_gate.may_match(subject)),
            streams: st.is_some_and(|st| st.has_stream_links() && st.stream_gate.may_match(subject)),
        }
    }

    /// Follow the imports a message delivered in `acc` takes further. Inlined: most
    /// publishes have none to follow, and are told so without a call.
    #[inline]
    fn route_onward(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let via = self.onward(acc, m.subject);
        self.follow(acc, publisher, m, now, depth, via)
    }

    /// Follow the imports `via` says may take a message in `acc` further.
    #[inline]
    pub(super) fn follow(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
        via: Onward,
    ) -> bool {
        if !via.any() || depth >= MAX_IMPORT_DEPTH {
            return false;
        }
        let mut delivered = false;
        if via.response {
            delivered |= self.route_response(acc, publisher, m, now, depth);
        }
        if via.services {
            delivered |= self.via_service_imports(acc, publisher, m, now, depth);
        }
        if via.streams {
            delivered |= self.via_stream_links(acc, publisher, m, now, depth);
        }
        delivered
    }

    /// Stream exports of `acc` that other accounts import: deliver there too.
    fn via_stream_links(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let st = self.acct(acc);
        let found = st.stream_out.matches(m.subject);
        if found.psubs.is_empty() {
            return false;
        }
        let Some(def) = st.def.clone() else { return false };
        let mut delivered = false;
        let mut buf = Vec::new();
        for &i in &found.psubs {
            let Some(link) = def.stream_links.get(i as usize) else {
                continue;
            };
            let subject = link.rewrite.apply(m.subject, &mut buf).to_vec();
            let moved = Msg {
                subject: &subject,
                ..*m
            };
            if self.tracing.is_some() {
                // The deliveries in the importer are stream exports (`se`), reported on
                // the subscriptions nats-server would shadow; imports further on are not.
                self.trace_link_begin(acc, i, link.allow_trace);
                delivered |= self.deliver_in(link.importer, publisher, &moved, now);
                self.trace_link_end();
                delivered |= self.route_onward(link.importer, publisher, &moved, now, depth + 1);
                continue;
            }
            delivered |= self.route_at(link.importer, publisher, &moved, now, depth + 1);
        }
        delivered
    }

    /// Service imports of `acc` matching the subject: the request goes to the exporter.
    fn via_service_imports(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let st = self.acct(acc);
        let found = st.service_in.matches(m.subject);
        if found.psubs.is_empty() {
            return false;
        }
        let Some(def) = st.def.clone() else { return false };
        let mut delivered = false;
        for &i in &found.psubs {
            let Some(si) = def.service_imports.get(i as usize) else {
                continue;
            };
            delivered |= self.request_through(acc, si, i, publisher, m, now, depth);
        }
        delivered
    }

    /// Route one request through service import `si` (index `idx` of `acc`'s imports).
    #[allow(clippy::too_many_arguments)]
    fn request_through(
        &mut self,
        acc: AccountId,
        si: &ServiceImport,
        idx: u32,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let mut buf = Vec::new();
        let mut subject = si.rewrite.apply(m.subject, &mut buf).to_vec();
        // The exporter's mappings apply to what arrives there.
        if let Some(mapped) = self.map_subject(si.exporter, &subject) {
            if mapped.is_empty() {
                return false;
            }
            subject = mapped;
        }
        // Tracing (`si`): an export that does not allow it ends a trace-only message
        // here, and hides the rest of a delivered one (its header says so too).
        let mut suspended = None;
        if self.tracing.is_some() {
            self.trace_service_import(si.exporter, m.subject, &subject);
            if !si.allow_trace {
                if self.trace_only() {
                    return false;
                }
                suspended = self.trace_suspend();
            }
        }
        // Latency tracking: sampled requests are timed to their first response.
        let tracking = match (&si.latency, publisher) {
            (Some(l), Some(p)) if depth == 0 => {
                let r = self.next_rand();
                latency::sample(l, m.header(), r).map(|header| {
                    Box::new(Tracking {
                        requester: p,
                        share: si.share,
                        subject: l.subject.clone(),
                        exporter: si.exporter,
                        header,
                        wall_start: std::time::SystemTime::now(),
                    })
                })
            }
            _ => None,
        };
        let reply = if m.reply.is_empty() {
            if let Some(t) = &tracking {
                self.latency_failed(t, 400);
            }
            Vec::new()
        } else {
            let t = tracking.clone();
            self.new_response(si.exporter, acc, m.reply, si.response, si.threshold, idx, t, now)
        };
        let mut header = match self.request_info(acc, si, publisher, m, depth) {
            Some(info) => Some(headers::with(m.header(), REQUEST_INFO_HDR, &info)),
            None => m.header().map(<[u8]>::to_vec),
        };
        if suspended.is_some() {
            header = Some(headers::with(header.as_deref(), TRACE_DEST, TRACE_DISABLED));
        }
        let out = Rewritten::new(subject, reply, header, m.payload());
        let mut delivered = self.route_at(si.exporter, publisher, &out.msg(), now, depth + 1);
        self.trace_resume(suspended);
        // A trace-only request reached nobody (nats-server: no responders).
        if delivered && self.trace_only() {
            delivered = false;
        }
        if !delivered && !out.reply.is_empty() {
            self.acct(si.exporter).responses.remove(&out.reply[..]);
            if let Some(t) = &tracking {
                self.latency_failed(t, 503);
            }
        }
        delivered
    }

    /// The `Nats-Request-Info` a service import stamps: the requester's account and RTT,
    /// and with `share` its details and this server. Along a chain of imports the first
    /// one's info is kept, naming the account it passes through.
    fn request_info(
        &self,
        acc: AccountId,
        si: &ServiceImport,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        depth: u8,
    ) -> Option<String> {
        if depth > 0 {
            if let Some(prev) = m.header().and_then(|h| headers::get(h, REQUEST_INFO_HDR)) {
                let mut v: serde_json::Value = serde_json::from_slice(prev).ok()?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("svc".into(), self.table.name(acc).into());
                }
                return Some(String::from_utf8(crate::proto::gojson::to_vec(&v)).unwrap_or_default());
            }
        }
        if !si.share && self.table.system() != Some(si.exporter) {
            return self.brief_request_info(publisher?);
        }
        let mut ci = self.client_info(publisher?, si.share)?;
        if !si.share && self.table.system() == Some(si.exporter) {
            ci.server = self.cfg.info.server_name.clone();
        }
        Some(ci.to_json())
    }

    /// [`Self::client_info`]`(key, false).to_json()` without serde (this is on every
    /// request through a service import).
    fn brief_request_info(&self, key: ConnKey) -> Option<String> {
        let c = self.client(key)?;
        if c.internal {
            return None;
        }
        let rtt = c.rtt.map(gotime::duration_nanos).unwrap_or(0);
        Some(brief_info_json(self.table.name(c.account), rtt))
    }

    /// nats-server's `getClientInfo`: a client's account and RTT, and with `detailed` who
    /// it is and this server. `None` for internal clients.
    pub fn client_info(&self, key: ConnKey, detailed: bool) -> Option<ClientInfo> {
        let c = self.client(key)?;
        if c.internal {
            return None;
        }
        let mut ci = ClientInfo {
            account: self.table.name(c.account).to_string(),
            rtt: c.rtt.map(gotime::duration_nanos).unwrap_or(0),
            ..Default::default()
        };
        if detailed {
            ci.start = Some(gotime::rfc3339_nano(c.started));
            ci.host = c.peer.ip().to_string();
            ci.id = c.cid;
            ci.name = c.opts.name.clone();
            ci.user = c
                .identity
                .as_ref()
                .map(|i| i.user.clone())
                .unwrap_or_else(|| c.opts.user.clone());
            ci.lang = c.opts.lang.clone();
            ci.version = c.opts.version.clone();
            ci.jwt = c.opts.jwt.clone();
            if let Some(id) = &c.identity {
                ci.issuer_key = id.issuer_key.clone();
                ci.name_tag = id.name_tag.clone();
                ci.tags = id.tags.clone();
            }
            ci.kind = "Client".into();
            ci.client_type = "nats".into();
            ci.server = self.cfg.info.server_name.clone();
        }
        Some(ci)
    }

    /// The account prefix of response subjects: `_R_.XXXXXX.`, the same on every shard.
    fn response_prefix(&self, acc: AccountId) -> Vec<u8> {
        let mut out = Vec::with_capacity(REPLY_LEN);
        out.extend_from_slice(b"_R_.");
        let mixed = (self.shared.reply_seed ^ u64::from(acc).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_mul(0xBF58_476D_1CE4_E5B9);
        push_b62(&mut out, mixed >> 8, 6);
        out.push(b'.');
        out
    }

    /// Make a response mapping in `exporter` back to `requester`'s `reply`; returns the
    /// `_R_.` subject the exporter's responders will see.
    #[allow(clippy::too_many_arguments)]
    fn new_response(
        &mut self,
        exporter: AccountId,
        requester: AccountId,
        reply: &[u8],
        kind: ResponseType,
        threshold: Duration,
        import: u32,
        tracking: Option<Box<Tracking>>,
        now: Instant,
    ) -> Vec<u8> {
        let mut subject = self.response_prefix(exporter);
        push_b62(&mut subject, self.idx as u64, 2);
        let r = self.next_rand();
        push_b62(&mut subject, r, 6);
        if tracking.is_some() {
            subject.extend_from_slice(b".T");
        }
        let map = ResponseMap {
            requester,
            reply: reply.into(),
            kind,
            expires: now + threshold,
            import,
            started: now,
            tracking,
        };
        self.acct(exporter)
            .responses
            .insert(subject.clone().into_boxed_slice(), map);
        if self.resp_sweep_at.is_none() {
            self.resp_sweep_at = Some(now + RESPONSE_SWEEP);
        }
        subject
    }

    /// A publish on an `_R_.` subject in `acc`: send it to the shard owning the mapping,
    /// or follow the mapping here.
    fn route_response(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
        depth: u8,
    ) -> bool {
        let Some(owner) = self.response_owner(acc, m.subject) else {
            return false;
        };
        // A sampled request's responder: its details go along for the latency result.
        let responder = match publisher {
            Some(p) if latency::is_tracked_reply(m.subject) => self.client_info(p, true),
            _ => None,
        };
        if owner == self.idx {
            return self.follow_response(acc, publisher, m, responder.as_ref(), now, depth);
        }
        if let Some(info) = &responder {
            mesh_codec::put_resp_info(self.stage(owner), acc, m.subject, info.to_json().as_bytes());
        }
        let raw = m.raw_sizes();
        if self.tracing.is_some() {
            self.stage_msg(owner, flags::RESPONSE, depth, acc, m, raw, &[]);
        } else {
            mesh_codec::put_msg(self.stage(owner), flags::RESPONSE, depth, acc, &m.parts(), raw, &[]);
        }
        self.maybe_flush_early(owner, now);
        true
    }

    /// A response forwarded by another shard.
    pub(super) fn route_response_here(&mut self, acc: AccountId, m: &Msg<'_>, now: Instant, depth: u8) {
        let responder = self
            .resp_infos
            .remove(m.subject)
            .and_then(|j| serde_json::from_slice::<ClientInfo>(&j).ok());
        self.follow_response(acc, None, m, responder.as_ref(), now, depth);
    }

    /// A responder's details sent ahead of its response by another shard.
    pub(super) fn keep_resp_info(&mut self, subject: &[u8], info: &[u8]) {
        if self.resp_infos.len() >= 4096 {
            self.resp_infos.clear();
        }
        self.resp_infos.insert(subject.into(), info.to_vec());
    }

    /// The shard that made this `_R_.` subject in `acc`, if it is one of ours.
    fn response_owner(&self, acc: AccountId, subject: &[u8]) -> Option<usize> {
        let tracked = subject.len() == REPLY_LEN + 2 && latency::is_tracked_reply(subject);
        if (subject.len() != REPLY_LEN && !tracked)
            || subject.get(..PREFIX_LEN)? != self.response_prefix(acc).as_slice()
        {
            return None;
        }
        let digits = subject.get(PREFIX_LEN..PREFIX_LEN + 2)?;
        let mut shard = 0usize;
        for (i, d) in digits.iter().enumerate() {
            let v = B62.iter().position(|b| b == d)?;
            shard += v * if i == 0 { 1 } else { 62 };
        }
        (shard < self.nshards).then_some(shard)
    }

    fn follow_response(
        &mut self,
        acc: AccountId,
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        responder: Option<&ClientInfo>,
        now: Instant,
        depth: u8,
    ) -> bool {
        // Taken out while it is followed; put back (same key) if it stays alive.
        let Some((key, mut map)) = self.acct(acc).responses.remove_entry(m.subject) else {
            return false;
        };
        if map.expires <= now {
            if let Some(t) = &map.tracking {
                self.latency_timed_out(t);
            }
            return false;
        }
        if map.tracking.is_some() {
            // Only the first response is measured.
            self.latency_measured(&map, responder, now);
            map.tracking = None;
        }
        // Tracing: a response crosses back as through a service import (`si`) that never
        // allows tracing (nats-server's response imports).
        let mut suspended = None;
        let mut header = None;
        let only = self.trace_only();
        if self.tracing.is_some() {
            self.trace_service_import(map.requester, m.subject, &map.reply);
            if !only {
                suspended = self.trace_suspend();
                header = Some(headers::with(m.header(), TRACE_DEST, TRACE_DISABLED));
            }
        }
        let reply = if m.reply.is_empty() || only {
            Vec::new()
        } else {
            // A response that itself expects an answer: map it the other way.
            self.new_response(
                map.requester,
                acc,
                m.reply,
                ResponseType::Singleton,
                map.expires - now,
                map.import,
                None,
                now,
            )
        };
        let delivered = if only {
            false
        } else if let Some(header) = header {
            // Traced, through an import that hides the rest: the header says so.
            let out = Rewritten::new(map.reply.to_vec(), reply, Some(header), m.payload());
            self.route_at(map.requester, publisher, &out.msg(), now, depth.saturating_add(1))
        } else {
            // Only the subject and reply change: header and payload are passed on as they are.
            let (mut size, mut hdr) = (itoa::Buffer::new(), itoa::Buffer::new());
            let out = Msg {
                subject: &map.reply,
                reply: &reply,
                header_len: m.header_len,
                data: m.data,
                size_text: size.format(m.data.len()).as_bytes(),
                hdr_text: m.header_len.map(|h| hdr.format(h).as_bytes()).unwrap_or_default(),
                internal: false,
                shown: b"",
            };
            self.route_at(map.requester, publisher, &out, now, depth.saturating_add(1))
        };
        self.trace_resume(suspended);
        let end_of_stream = m.data.is_empty();
        if delivered && map.kind != ResponseType::Singleton && !end_of_stream {
            // Streamed and chunked responses keep the mapping alive while they flow.
            map.expires = now + (map.expires - map.started);
            map.started = now;
            self.acct(acc).responses.insert(key, map);
        }
        delivered
    }

    /// Drop response mappings whose threshold passed.
    pub(super) fn sweep_responses(&mut self, now: Instant) {
        if self.resp_sweep_at.is_none_or(|t| t > now) {
            return;
        }
        let mut left = 0;
        let mut timed_out = Vec::new();
        for st in &mut self.accts {
            if !st.responses.is_empty() {
                st.responses.retain(|_, r| {
                    let keep = r.expires > now;
                    if !keep {
                        if let Some(t) = r.tracking.take() {
                            timed_out.push(t);
                        }
                    }
                    keep
                });
                left += st.responses.len();
            }
        }
        for t in timed_out {
            self.latency_timed_out(&t);
        }
        self.resp_sweep_at = (left > 0).then_some(now + RESPONSE_SWEEP);
        self.resp_infos.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brief_info_is_what_the_serializer_writes() {
        for name in ["B", "", "a.b-c_d", "we\"ird", "x<y>&z", "tab\tname", "ünï"] {
            for rtt in [0, 1, 1_234_567, i64::MAX] {
                let ci = ClientInfo {
                    account: name.to_string(),
                    rtt,
                    ..Default::default()
                };
                assert_eq!(brief_info_json(name, rtt), ci.to_json(), "{name:?} {rtt}");
            }
        }
    }
}
