//! Message tracing on the shards (FEATURES.md §20): what is recorded while a traced
//! message is routed, and how the shards that deliver it make one trace event. The
//! headers' rules and the JSON are in `core::trace`.
//!
//! Ownership: the shard a traced message is published on (its ingress shard) owns the
//! trace event, as one nats-server owns the event of its hop. While the message is routed
//! there, the steps it takes (mapping, service imports, stream exports, each delivery
//! attempt) are recorded in `ShardCore::tracing`. Every copy handed to another shard
//! carries a trace tag with a fresh leg id; the shard that delivers it records its own
//! steps the same way and sends them back to the owner as a trace part (a mesh record),
//! naming the legs it handed on in turn (a queue message picked again elsewhere, a
//! response forwarded). The owner publishes the event when every leg it knows of has
//! reported, or after [`PART_WAIT`] (a bound only: rings are lossless and FIFO, so parts
//! always come). A child leg may report before its parent; `early` keeps those.
//!
//! The event is published, as the reference does, from the ingress account's internal
//! client to the trace destination, once the step is over, and only when the server has
//! a system account. It has no trace headers, so it is never traced itself.
//!
//! Cost for untraced messages: the header block of a message that has one is tested once
//! (`trace::may_trace`); each delivery and each copy staged for another shard tests an
//! `Option`.

use super::route::Msg;
use super::ShardCore;
use crate::core::accounts::AccountId;
use crate::core::client::{ConnKey, SubId};
use crate::core::mesh_codec::{self, flags, TraceTag};
use crate::core::trace::compress::Encoding;
use crate::core::trace::event::{self, errors, Egress, IngressStep, Step};
use crate::core::trace::{self, Found, ACCEPT_ENCODING, CONTENT_ENCODING, TRACE_DEST, TRACE_DISABLED};
use crate::core::FastMap;
use crate::proto::{headers, reply};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the owner of a trace waits for the other shards' parts at most.
pub const PART_WAIT: Duration = Duration::from_secs(2);
/// Traces waiting for parts beyond which the oldest is published as it is.
const MAX_PENDING: usize = 4096;
/// Bits of a trace or leg id below the shard index.
const ID_BITS: u32 = 48;

/// The `seq` of the server description in trace events.
static EVENT_SEQ: AtomicU64 = AtomicU64::new(0);

/// What only the owner of a trace knows: where the event goes and how it starts.
#[derive(Debug)]
struct Head {
    dest: String,
    /// The account the event is published in (the publisher's).
    acc: AccountId,
    encoding: Encoding,
    /// The traced message's headers (`None`: not read, the message was refused).
    header: Option<BTreeMap<String, Vec<String>>>,
    msgsize: usize,
    ingress: IngressStep,
}

/// A stream import the message is being delivered through.
#[derive(Debug, Clone, Copy)]
struct Link {
    exporter: AccountId,
    index: u32,
    allow: bool,
}

/// A traced message being routed on this shard (one leg of its trace).
#[derive(Debug)]
pub(crate) struct Active {
    id: u64,
    leg: u64,
    /// The account the message was published in.
    ingress: AccountId,
    only: bool,
    link: Option<Link>,
    /// Encoded steps, comma-separated.
    steps: Vec<u8>,
    /// Legs handed to other shards meanwhile.
    children: Vec<u64>,
    /// On the ingress shard only.
    head: Option<Box<Head>>,
}

/// A trace whose event waits for other shards' parts.
struct Pending {
    head: Head,
    steps: Vec<u8>,
    legs: Legs,
    deadline: Instant,
}

/// The legs of a trace that have not reported yet.
#[derive(Debug, Default)]
pub(super) struct Legs {
    outstanding: Vec<u64>,
    /// Legs that reported before the leg that made them did.
    early: Vec<u64>,
}

impl Legs {
    pub(super) fn new(outstanding: Vec<u64>) -> Legs {
        Legs {
            outstanding,
            early: Vec::new(),
        }
    }

    /// Leg `leg` reported, having handed on `children`. True when every leg is in.
    pub(super) fn report(&mut self, leg: u64, children: &[u64]) -> bool {
        match self.outstanding.iter().position(|l| *l == leg) {
            Some(i) => {
                self.outstanding.swap_remove(i);
            }
            None => self.early.push(leg),
        }
        for c in children {
            match self.early.iter().position(|l| l == c) {
                Some(i) => {
                    self.early.swap_remove(i);
                }
                None => self.outstanding.push(*c),
            }
        }
        self.outstanding.is_empty() && self.early.is_empty()
    }
}

/// The traces of one shard.
#[derive(Default)]
pub(crate) struct Traces {
    pending: FastMap<u64, Pending>,
    next: u64,
    /// Events to publish at the end of the step.
    ready: Vec<ReadyEvent>,
}

/// An event to publish: account, subject, header block, payload.
type ReadyEvent = (AccountId, String, Option<Vec<u8>>, Vec<u8>);

impl Traces {
    /// Events wait to be published.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The earliest time a trace stops waiting for parts.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    fn new_id(&mut self, shard: usize) -> u64 {
        self.next = (self.next + 1) & ((1 << ID_BITS) - 1);
        ((shard as u64) << ID_BITS) | self.next
    }
}

/// How a delivery goes on once the trace had its say.
pub(super) enum Pre {
    /// Decided: return this.
    Done(bool),
    /// Deliver; record the egress (false: this delivery is not traced).
    Deliver { record: bool },
}

enum Start {
    No,
    Yes(Box<Active>),
    /// A `traceparent` not sampled this time: deliver with tracing turned off.
    SampledOut,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl ShardCore {
    /// A client published a message whose header block may ask for a trace: decide, then
    /// handle the publish with the trace recording.
    #[cold]
    pub(super) fn on_msg_maybe_traced(&mut self, key: ConnKey, m: &Msg<'_>, hdr: &[u8], now: Instant) {
        let Some(account) = self.client(key).map(|c| c.account) else {
            return;
        };
        let td = trace::slice_header(hdr, TRACE_DEST).filter(|v| !v.is_empty() && *v != TRACE_DISABLED.as_bytes());
        let denied = td.filter(|d| !self.trace_dest_allowed(key, account, d));
        let start = match trace::scan(hdr) {
            Some(found) => self.trace_start(key, account, found, td, denied.is_some(), m),
            None => Start::No,
        };
        match start {
            Start::No => self.on_msg_checked(key, m, denied, now),
            Start::SampledOut => {
                let header = headers::with(Some(hdr), TRACE_DEST, TRACE_DISABLED);
                let mut data = header.clone();
                data.extend_from_slice(m.payload());
                let (size, hlen) = (data.len().to_string(), header.len().to_string());
                let out = Msg {
                    header_len: Some(header.len()),
                    data: &data,
                    size_text: size.as_bytes(),
                    hdr_text: hlen.as_bytes(),
                    ..*m
                };
                self.on_msg_checked(key, &out, denied, now);
            }
            Start::Yes(active) => {
                self.tracing = Some(active);
                self.on_msg_checked(key, m, denied, now);
                if let Some(a) = self.tracing.take() {
                    self.trace_ingress_done(*a, now);
                }
            }
        }
    }

    /// nats-server's `allowedMsgTraceDest`: may this client have events sent to `dest`?
    /// Its publish permissions decide (reply grants aside), and the gateway reply prefix
    /// and, outside the system account, `$NRG.` are refused.
    fn trace_dest_allowed(&mut self, key: ConnKey, account: AccountId, dest: &[u8]) -> bool {
        if dest.len() > 5 && dest.starts_with(b"_GR_.") {
            return false;
        }
        if dest.starts_with(b"$NRG.") && self.table.system() != Some(account) {
            return false;
        }
        match self.client_mut(key).and_then(|c| c.perms.as_mut()) {
            Some(p) if p.checks_publish() => p.publish_allowed_static(dest),
            _ => true,
        }
    }

    fn trace_start(
        &mut self,
        key: ConnKey,
        account: AccountId,
        found: Found,
        td: Option<&[u8]>,
        dest_denied: bool,
        m: &Msg<'_>,
    ) -> Start {
        let (dest, only) = if found.external {
            let Some(t) = self.table.get(account).and_then(|d| d.msg_trace.clone()) else {
                return Start::No;
            };
            if t.dest.is_empty() {
                return Start::No;
            }
            let draw = self.next_rand();
            if !trace::keep_sample(t.sampling, draw) {
                return Start::SampledOut;
            }
            (t.dest, false)
        } else {
            let only = found.trace_only();
            if dest_denied {
                return Start::No;
            }
            let dest = match td {
                Some(d) => lossy(d),
                None => found.first(TRACE_DEST).to_string(),
            };
            if !trace::is_valid_publish_subject(dest.as_bytes()) {
                tracing::error!(
                    "{} - Destination {} is not valid, won't be able to trace events",
                    self.label(key),
                    reply::go_quote(dest.as_bytes())
                );
                if !only {
                    return Start::No;
                }
            }
            (dest, only)
        };
        let Some(c) = self.client(key) else { return Start::No };
        let ingress = IngressStep {
            ts: event::now_ts(),
            cid: c.cid,
            name: c.opts.name.clone(),
            acc: self.table.name(account).to_string(),
            subj: lossy(m.subject),
            error: String::new(),
        };
        let encoding = Encoding::from_accept(found.first(ACCEPT_ENCODING));
        let head = Head {
            dest,
            acc: account,
            encoding,
            header: Some(found.headers),
            msgsize: m.data.len(),
            ingress,
        };
        let id = self.traces.new_id(self.idx);
        Start::Yes(Box::new(Active {
            id,
            leg: 0,
            ingress: account,
            only,
            link: None,
            steps: Vec::new(),
            children: Vec::new(),
            head: Some(Box::new(head)),
        }))
    }

    /// A publish refused for its size (`data` is the read, the refused control line
    /// ends at `pos`): when the part of its header block this read holds names a trace
    /// destination the client may use, the event says so (an `in` step with the error,
    /// nothing else), as the reference does.
    #[cold]
    pub(super) fn trace_payload_violation(&mut self, key: ConnKey, data: &[u8], pos: usize) {
        let Some(account) = self.client(key).map(|c| c.account) else {
            return;
        };
        let line = data.get(..pos).unwrap_or_default();
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        let args: Vec<&[u8]> = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|a| !a.is_empty())
            .collect();
        let is_hpub = args.first().is_some_and(|op| op.eq_ignore_ascii_case(b"HPUB"));
        if !is_hpub || !(4..=5).contains(&args.len()) {
            return;
        }
        let num = |a: Option<&&[u8]>| -> Option<usize> { std::str::from_utf8(a?).ok()?.parse().ok() };
        let (Some(hdr_len), Some(size)) = (num(args.get(args.len() - 2)), num(args.last())) else {
            return;
        };
        let rest = data.get(pos..).unwrap_or_default();
        if hdr_len == 0 || rest.is_empty() {
            return;
        }
        let hdr = rest.get(..hdr_len.min(rest.len())).unwrap_or_default();
        let Some(dest) =
            trace::slice_header(hdr, TRACE_DEST).filter(|v| !v.is_empty() && *v != TRACE_DISABLED.as_bytes())
        else {
            return;
        };
        if !self.trace_dest_allowed(key, account, dest) {
            return;
        }
        let accept = trace::slice_header(hdr, ACCEPT_ENCODING).map(lossy).unwrap_or_default();
        let Some(c) = self.client(key) else { return };
        let ingress = IngressStep {
            ts: event::now_ts(),
            cid: c.cid,
            name: c.opts.name.clone(),
            error: "maximum payload exceeded".into(),
            ..IngressStep::default()
        };
        let head = Head {
            dest: lossy(dest),
            acc: account,
            encoding: Encoding::from_accept(&accept),
            header: None,
            msgsize: size,
            ingress,
        };
        self.trace_publish(head, &[]);
    }

    /// The message being routed is traced and only traced (not delivered).
    pub(super) fn trace_only(&self) -> bool {
        self.tracing.as_ref().is_some_and(|a| a.only)
    }

    fn trace_push(&mut self, step: &Step<'_>) {
        let json = event::encode(step);
        if let Some(a) = self.tracing.as_deref_mut() {
            event::append_encoded(&mut a.steps, &json);
        }
    }

    /// The publish was refused: the ingress step says why.
    #[cold]
    pub(super) fn trace_ingress_error(&mut self, text: &str) {
        if let Some(h) = self.tracing.as_deref_mut().and_then(|a| a.head.as_deref_mut()) {
            h.ingress.error = text.to_string();
        }
    }

    /// The subject was mapped (`sm`).
    #[cold]
    pub(super) fn trace_mapped(&mut self, to: &[u8]) {
        self.trace_push(&Step::Mapping { to: &lossy(to) });
    }

    /// A service import takes the request to `exporter` (`si`).
    #[cold]
    pub(super) fn trace_service_import(&mut self, exporter: AccountId, from: &[u8], to: &[u8]) {
        let acc = self.table.name(exporter).to_string();
        self.trace_push(&Step::ServiceImport {
            acc: &acc,
            from: &lossy(from),
            to: &lossy(to),
        });
    }

    /// Deliveries until [`Self::trace_link_end`] go through stream link `index` of
    /// `exporter`.
    #[cold]
    pub(super) fn trace_link_begin(&mut self, exporter: AccountId, index: u32, allow: bool) {
        if let Some(a) = self.tracing.as_deref_mut() {
            a.link = Some(Link { exporter, index, allow });
        }
    }

    #[cold]
    pub(super) fn trace_link_end(&mut self) {
        if let Some(a) = self.tracing.as_deref_mut() {
            a.link = None;
        }
    }

    /// Stop recording (a service import that does not allow tracing); the returned
    /// state goes back with [`Self::trace_resume`].
    #[cold]
    pub(super) fn trace_suspend(&mut self) -> Option<Box<Active>> {
        self.tracing.take()
    }

    #[cold]
    pub(super) fn trace_resume(&mut self, a: Option<Box<Active>>) {
        if a.is_some() {
            self.tracing = a;
        }
    }

    /// Before delivering to subscription `id` while tracing: the stream export step, and
    /// the attempts that fail or stop here (echo off, denied, closed, trace only).
    #[cold]
    pub(super) fn trace_pre_deliver(&mut self, id: SubId, publisher: Option<ConnKey>, m: &Msg<'_>) -> Pre {
        let Some((only, link)) = self.tracing.as_deref().map(|a| (a.only, a.link)) else {
            return Pre::Deliver { record: false };
        };
        let Some(sub) = self.subs.get(id as usize) else {
            return Pre::Deliver { record: false };
        };
        let (conn, sub_acc) = (sub.conn, sub.account);
        // Internal subscriptions (system services) get the message, trace-only or not, and
        // are not reported (nats-server: internal callbacks).
        if self.client(conn).is_none_or(|c| c.internal) {
            return Pre::Deliver { record: false };
        }
        if let Some(l) = link {
            let acc = self.table.name(sub_acc).to_string();
            self.trace_push(&Step::StreamExport {
                acc: &acc,
                to: &lossy(m.subject),
            });
            if !l.allow {
                return if only {
                    Pre::Done(true)
                } else {
                    Pre::Deliver { record: false }
                };
            }
        }
        let Some(sub) = self.subs.get(id as usize) else {
            return Pre::Deliver { record: false };
        };
        let Some(c) = self.clients.get_mut(conn.idx as usize).filter(|c| c.gen == conn.gen) else {
            return Pre::Deliver { record: false };
        };
        let queue = sub.queue.as_deref().unwrap_or_default();
        let error = if publisher == Some(conn) && !c.opts.echo {
            Some(errors::NO_ECHO)
        } else if c
            .perms
            .as_mut()
            .is_some_and(|p| p.filters_delivery() && p.delivery_denied(m.subject, queue))
        {
            Some(errors::SUB_DENY)
        } else if c.closing.is_some() {
            Some(errors::CLIENT_CLOSED)
        } else {
            None
        };
        if let Some(e) = error {
            self.trace_egress(id, e);
            return Pre::Done(false);
        }
        if only {
            self.trace_egress(id, "");
            return Pre::Done(true);
        }
        Pre::Deliver { record: true }
    }

    /// A delivery attempt to subscription `id` (`eg`), with the reason it failed, if it
    /// did.
    #[cold]
    pub(super) fn trace_egress(&mut self, id: SubId, error: &str) {
        let Some(a) = self.tracing.as_deref() else { return };
        let Some(sub) = self.subs.get(id as usize) else { return };
        let Some(c) = self.client(sub.conn) else { return };
        let acc = if sub.account != a.ingress {
            self.table.name(sub.account)
        } else {
            ""
        };
        let shadow = a.link.and_then(|l| {
            let def = self.table.get(l.exporter)?;
            let link = def.stream_links.get(l.index as usize)?;
            trace::shadow::shadow_subject(&link.from, &link.rewrite, &sub.subject)
        });
        let subject = lossy(shadow.as_deref().unwrap_or(&sub.subject));
        let queue = sub.queue.as_deref().map(lossy).unwrap_or_default();
        let json = event::encode(&Step::Egress(Egress::client(
            c.cid,
            &c.opts.name,
            &subject,
            &queue,
            acc,
            error,
        )));
        if let Some(a) = self.tracing.as_deref_mut() {
            event::append_encoded(&mut a.steps, &json);
        }
    }

    /// Stage a message record for shard `dst`, with a trace tag when the message is
    /// traced (a new leg of its trace).
    #[allow(clippy::too_many_arguments)]
    #[cold]
    pub(super) fn stage_msg(
        &mut self,
        dst: usize,
        flags: u8,
        hops: u8,
        acc: AccountId,
        m: &Msg<'_>,
        raw: Option<(&[u8], &[u8])>,
        queues: &[&[u8]],
    ) {
        let tag = self.tracing.as_deref().map(|a| (a.id, a.ingress, a.only, a.link));
        let Some((id, ingress, only, link)) = tag else {
            mesh_codec::put_msg(self.stage(dst), flags, hops, acc, &m.parts(), raw, queues);
            return;
        };
        let leg = self.traces.new_id(self.idx);
        if let Some(a) = self.tracing.as_deref_mut() {
            a.children.push(leg);
        }
        let tag = TraceTag {
            id,
            leg,
            ingress,
            only,
            link: link.map(|l| (l.exporter, l.index)),
        };
        let out = self.stage(dst);
        mesh_codec::put_msg(out, flags | flags::TRACE, hops, acc, &m.parts(), raw, queues);
        mesh_codec::put_trace_tag(out, &tag);
    }

    /// A traced copy arrived from another shard: record this shard's steps of it.
    #[cold]
    pub(super) fn trace_enter(&mut self, tag: &TraceTag) {
        let link = tag.link.and_then(|(exporter, index)| {
            let l = self.table.get(exporter)?.stream_links.get(index as usize)?;
            Some(Link {
                exporter,
                index,
                allow: l.allow_trace,
            })
        });
        self.tracing = Some(Box::new(Active {
            id: tag.id,
            leg: tag.leg,
            ingress: tag.ingress,
            only: tag.only,
            link,
            steps: Vec::new(),
            children: Vec::new(),
            head: None,
        }));
    }

    /// Done with a traced copy from another shard: report to the owner.
    #[cold]
    pub(super) fn trace_leave(&mut self) {
        let Some(a) = self.tracing.take() else { return };
        let owner = (a.id >> ID_BITS) as usize;
        if owner == self.idx {
            self.trace_part(a.id, a.leg, &a.children, &a.steps);
        } else if owner < self.nshards {
            mesh_codec::put_trace_part(self.stage(owner), a.id, a.leg, &a.children, &a.steps);
        }
    }

    /// The ingress shard routed its traced message: publish, or wait for the legs.
    fn trace_ingress_done(&mut self, a: Active, now: Instant) {
        let Active {
            id,
            steps,
            children,
            head,
            ..
        } = a;
        let Some(head) = head.map(|h| *h) else { return };
        if children.is_empty() {
            self.trace_publish(head, &steps);
            return;
        }
        if self.traces.pending.len() >= MAX_PENDING {
            let oldest = self
                .traces
                .pending
                .iter()
                .min_by_key(|(_, p)| p.deadline)
                .map(|(k, _)| *k);
            if let Some(p) = oldest.and_then(|k| self.traces.pending.remove(&k)) {
                self.trace_publish(p.head, &p.steps);
            }
        }
        self.traces.pending.insert(
            id,
            Pending {
                head,
                steps,
                legs: Legs::new(children),
                deadline: now + PART_WAIT,
            },
        );
    }

    /// A shard's part of trace `id` (leg `leg`, which handed on `children`).
    pub(super) fn trace_part(&mut self, id: u64, leg: u64, children: &[u64], steps: &[u8]) {
        let Some(p) = self.traces.pending.get_mut(&id) else {
            return;
        };
        event::append_encoded(&mut p.steps, steps);
        if p.legs.report(leg, children) {
            if let Some(p) = self.traces.pending.remove(&id) {
                self.trace_publish(p.head, &p.steps);
            }
        }
    }

    /// Publish the traces that waited too long for their parts, as they are.
    pub(super) fn expire_traces(&mut self, now: Instant) {
        if self.traces.pending.is_empty() {
            return;
        }
        let due: Vec<u64> = self
            .traces
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        for id in due {
            if let Some(p) = self.traces.pending.remove(&id) {
                tracing::debug!("trace event to {:?} published without every shard's part", p.head.dest);
                self.trace_publish(p.head, &p.steps);
            }
        }
    }

    /// Queue the event for the end of the step.
    fn trace_publish(&mut self, head: Head, steps: &[u8]) {
        if self.table.system().is_none() || !trace::is_valid_publish_subject(head.dest.as_bytes()) {
            return;
        }
        let info = &self.cfg.info;
        let seq = EVENT_SEQ.fetch_add(1, Ordering::Relaxed) + 1;
        let server = event::Server::new(&info.server_name, &info.host, &info.server_id, &info.version, seq);
        let json = event::assemble(&server, head.header.as_ref(), head.msgsize, &head.ingress, steps);
        let header = head
            .encoding
            .header_value()
            .map(|v| headers::with(None, CONTENT_ENCODING, v));
        let payload = head.encoding.encode(json);
        self.traces.ready.push((head.acc, head.dest, header, payload));
    }

    /// Publish the events made during the step (from `finish`).
    pub(super) fn publish_traces(&mut self, now: Instant) {
        let ready = std::mem::take(&mut self.traces.ready);
        for (acc, subject, header, payload) in ready {
            self.publish_internal(acc, subject.as_bytes(), b"", header.as_deref(), &payload, now);
        }
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
