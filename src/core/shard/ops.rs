//! Client protocol operations: running the parser over a connection's input and acting
//! on each event, with nats-server's replies and closes (protocol.md §2, §3, §7).

use super::ShardCore;
use crate::core::client::{ClosedState, ConnKey, Pause};
use crate::core::mesh_codec;
use crate::proto::parser::{Event, Limits, ParseError, PlainPub};
use crate::proto::reply;
use std::time::{Duration, Instant};

impl ShardCore {
    fn limits(&self, key: ConnKey) -> Option<Limits> {
        let c = self.client(key)?;
        Some(Limits {
            max_control_line: self.cfg.max_control_line,
            max_payload: super::connect::min_limit(c.max_payload, self.cfg.max_payload),
            headers: c.headers,
            awaiting_auth: c.awaiting_auth,
            pedantic: c.opts.pedantic,
        })
    }

    /// Parse and act on `data` until it is used up, the connection closes, or it pauses
    /// (then the rest is stashed for [`ShardCore::resume`]).
    pub(super) fn process(&mut self, key: ConnKey, data: &[u8], now: Instant) {
        self.process_events(key, data, now);
        // What the last publishes put in the local run goes out with this input (module
        // `local_run`), and may hold the producer back.
        if !self.local_run.is_empty() {
            self.flush_local_run(now);
            if let Some((producer, consumer, ttl)) = self.stall_req.take() {
                if producer == key {
                    self.stall(key, consumer, ttl, now);
                }
            }
        }
    }

    /// A message as the parser gave it: traced if tracing, then published.
    #[inline(always)]
    fn on_parsed_msg(&mut self, key: ConnKey, p: PlainPub<'_>, now: Instant) {
        let m = super::route::Msg {
            subject: p.subject,
            reply: p.reply,
            header_len: p.header_len,
            data: p.data,
            size_text: p.size_text,
            hdr_text: p.hdr_text,
            internal: false,
            shown: b"",
        };
        if self.cfg.trace {
            self.trace_pub(key, &m);
        }
        self.on_msg(key, &m, now);
    }

    fn process_events(&mut self, key: ConnKey, data: &[u8], now: Instant) {
        let Some(c) = self.client_mut(key) else { return };
        let mut parser = std::mem::take(&mut c.parser);
        let (msgs0, subs_changed0) = (c.in_msgs, c.interest_changed);
        let mut pos = 0;
        // Where the current window of stall budget started (module `stall`); and only
        // this input's deliveries may ask to hold its producer back.
        let mut stall_window = 0;
        self.stall_req = None;
        let Some(mut lim) = self.limits(key) else { return };
        'parse: loop {
            // The commonest frame first, taken apart where the parser returns it (as an
            // event, it was written out and read back once more per publish). One call
            // of `on_parsed_msg` for both paths, so that the publish path is inlined here.
            let control = 'event: {
                let p = match parser.next_plain(data, &mut pos, &lim) {
                    Some(p) => p,
                    None => match parser.next_general(data, &mut pos, &lim) {
                        Ok(Some(Event::Msg {
                            subject,
                            reply,
                            header_len,
                            data: body,
                            size_text,
                            hdr_text,
                        })) => PlainPub {
                            subject,
                            reply: reply.unwrap_or_default(),
                            header_len,
                            data: body,
                            size_text,
                            hdr_text: hdr_text.unwrap_or_default(),
                        },
                        Ok(Some(ev)) => {
                            // Publishes held in the local run go out before anything else.
                            self.flush_local_run(now);
                            self.on_event(key, ev, now);
                            break 'event true;
                        }
                        Ok(None) => break 'parse,
                        Err(e) => {
                            if matches!(e, ParseError::MaxPayload { .. }) {
                                self.trace_payload_violation(key, data, pos);
                            }
                            self.parse_error(key, e, now);
                            break 'parse;
                        }
                    },
                };
                self.on_parsed_msg(key, p, now);
                false
            };
            parser.release();
            // Only a control operation (CONNECT, an authentication step) changes what
            // the parser is limited by; a message does not.
            if control {
                let Some(l) = self.limits(key) else { return };
                lim = l;
            }
            if let Some((producer, consumer, ttl)) = self.stall_req {
                self.stall_req = None;
                if producer == key {
                    // Each window of input gets a budget of its own, as each of
                    // nats-server's reads (of at most 64 KiB) does.
                    if pos - stall_window >= super::stall::STALL_WINDOW {
                        stall_window = pos;
                        if let Some(c) = self.client_mut(key) {
                            c.stall_total = Duration::ZERO;
                        }
                    }
                    self.stall(key, consumer, ttl, now);
                }
            }
            let Some(c) = self.client_mut(key) else { return };
            if c.closing.is_some() {
                break;
            }
            let running = c.pause == Pause::Running;
            if running && !self.mesh_backlogged() {
                continue;
            }
            if running {
                self.flush_mesh(now);
                if self.mesh_backlogged() {
                    if let Some(c) = self.client_mut(key) {
                        c.pause = Pause::Mesh;
                    }
                    self.mesh_waiters.push(key);
                }
            }
            let Some(c) = self.client_mut(key) else { return };
            if c.pause != Pause::Running {
                c.stash.extend_from_slice(data.get(pos..).unwrap_or_default());
                break;
            }
        }
        if let Some(c) = self.client_mut(key) {
            c.parser = parser;
            // nats-server counts a read with messages or interest changes as activity.
            if c.in_msgs != msgs0 || c.interest_changed != subs_changed0 {
                c.last_in = now;
            }
        }
    }

    /// Continue a paused connection: run what it sent meanwhile, then let it read again.
    pub(super) fn resume(&mut self, key: ConnKey, now: Instant) {
        let Some(c) = self.client_mut(key) else { return };
        c.pause = Pause::Running;
        let stash = std::mem::take(&mut c.stash);
        if !stash.is_empty() {
            self.process(key, &stash, now);
        }
        self.wake(key);
    }

    fn parse_error(&mut self, key: ConnKey, e: ParseError, now: Instant) {
        let label = self.label(key);
        match e {
            ParseError::UnknownOp => {
                self.send_err(key, reply::ERR_UNKNOWN_OP, now);
                tracing::error!("{label} - Client parser ERROR");
                self.close(key, ClosedState::ProtocolViolation);
            }
            ParseError::MaxControlLine => {
                self.send_err(key, reply::ERR_MAX_CONTROL_LINE, now);
                tracing::error!("{label} - {}", reply::ERR_MAX_CONTROL_LINE);
                self.close(key, ClosedState::MaxControlLineExceeded);
            }
            ParseError::MaxPayload { size, max } => {
                tracing::error!("{label} - maximum payload exceeded: {size} vs {max}");
                self.send_err(key, reply::ERR_MAX_PAYLOAD, now);
                self.close(key, ClosedState::MaxPayloadExceeded);
            }
            ParseError::AuthViolation => self.auth_violation(key, now),
            ParseError::Silent(why) => {
                tracing::error!("{label} - {why}");
                self.close(key, ClosedState::ProtocolViolation);
            }
        }
    }

    fn trace_in(&self, key: ConnKey, op: &str, arg: &[u8]) {
        if let Some(c) = self.client(key) {
            let mut arg = String::from_utf8_lossy(arg).into_owned();
            if self.cfg.max_traced_msg_len > 0 && arg.len() > self.cfg.max_traced_msg_len {
                let mut cut = self.cfg.max_traced_msg_len;
                while !arg.is_char_boundary(cut) {
                    cut -= 1;
                }
                arg.truncate(cut);
                arg.push_str("...");
            }
            if arg.is_empty() {
                tracing::trace!("{} - <<- [{op}]", c.label);
            } else {
                tracing::trace!("{} - <<- [{op} {arg}]", c.label);
            }
        }
    }

    // Inlined into its one caller, the parse loop, as it was before the local run's flush
    // split that loop out of `process` (a call per event: +4.5 % instructions on `pub`).
    #[inline(always)]
    fn on_event(&mut self, key: ConnKey, ev: Event<'_>, now: Instant) {
        let trace = self.cfg.trace;
        match ev {
            Event::Connect(arg) => {
                if trace {
                    self.trace_in(key, "CONNECT", &redact_connect(arg));
                }
                self.on_connect(key, arg, now)
            }
            Event::Info(arg) => {
                // Parsed and ignored; invalid JSON closes the connection.
                if serde_json::from_slice::<serde::de::IgnoredAny>(arg).is_err() {
                    self.close(key, ClosedState::ProtocolViolation);
                }
            }
            Event::Ping => {
                if trace {
                    self.trace_in(key, "PING", b"");
                }
                self.on_ping(key, now)
            }
            Event::Pong => {
                if trace {
                    self.trace_in(key, "PONG", b"");
                }
                if let Some(c) = self.client_mut(key) {
                    c.pings_out = 0;
                    if let Some(s) = c.rtt_start {
                        c.rtt = Some(now.saturating_duration_since(s).max(Duration::from_nanos(1)));
                    }
                }
            }
            Event::Err(arg) => {
                tracing::error!("{} - Client Error {}", self.label(key), String::from_utf8_lossy(arg));
                self.close(key, ClosedState::ParseError);
            }
            Event::Sub { subject, queue, sid } => {
                if trace {
                    let mut a = subject.to_vec();
                    for part in [queue.unwrap_or_default(), sid] {
                        if !part.is_empty() {
                            a.push(b' ');
                            a.extend_from_slice(part);
                        }
                    }
                    self.trace_in(key, "SUB", &a);
                }
                self.on_sub(key, subject, queue, sid, now)
            }
            Event::Unsub { sid, max } => {
                if trace {
                    self.trace_in(key, "UNSUB", sid);
                }
                self.on_unsub(key, sid, max, now)
            }
            Event::PedanticViolation => self.send_err(key, reply::ERR_INVALID_PUB_SUBJECT, now),
            // (Taken in `process_events`.)
            Event::Msg { .. } => {}
        }
    }

    /// The protocol trace of a client's publish (`-V`).
    #[cold]
    fn trace_pub(&self, key: ConnKey, m: &super::route::Msg<'_>) {
        let mut a = m.subject.to_vec();
        if !m.reply.is_empty() {
            a.push(b' ');
            a.extend_from_slice(m.reply);
        }
        a.extend_from_slice(format!(" {}", m.data.len()).as_bytes());
        self.trace_in(key, if m.header_len.is_some() { "HPUB" } else { "PUB" }, &a);
        self.trace_in(
            key,
            "MSG_PAYLOAD:",
            format!("[{:?}]", String::from_utf8_lossy(m.data)).as_bytes(),
        );
    }

    fn on_ping(&mut self, key: ConnKey, now: Instant) {
        // A PONG acknowledges what came before it: requests this connection made to a
        // service on this shard (`$SYS.REQ.USER.INFO`) are answered first, as a client
        // of nats-server sees them.
        self.run_handlers(now);
        let Some(c) = self.client_mut(key) else { return };
        c.last_in = now;
        let changed = c.interest_changed;
        // Interest changes handed to the rings are applied by every shard before it
        // processes any later input, so a PONG can go out at once; only records still
        // staged behind a full ring need the barrier round trip.
        let mut blocked = false;
        if changed && self.nshards > 1 {
            self.flush_mesh(now);
            blocked = self.mesh_pending();
        }
        let id = self.next_barrier;
        let Some(c) = self.client_mut(key) else { return };
        if blocked {
            // Flush is a barrier (ARCHITECTURE.md, invariant 4): the PONG waits until
            // every shard has applied this connection's interest changes.
            c.interest_changed = false;
            c.pause = Pause::Barrier(id);
            self.next_barrier += 1;
            self.barriers.insert(
                id,
                super::PendingBarrier {
                    conn: key,
                    remaining: self.nshards - 1,
                },
            );
            for dst in 0..self.nshards {
                if dst != self.idx {
                    mesh_codec::put_barrier(self.stage(dst), id, false);
                }
            }
            return;
        }
        if let Some(c) = self.client_mut(key) {
            c.interest_changed = false;
        }
        self.pong(key, now);
    }

    /// PONG, and after the first one of a `protocol: 1` client the connect-info INFO.
    pub(super) fn pong(&mut self, key: ConnKey, now: Instant) {
        let cfg = self.cfg.clone();
        let (account_name, is_sys) = match self.client(key) {
            Some(c) => (
                self.table.name(c.account).to_string(),
                self.table.system() == Some(c.account),
            ),
            None => return,
        };
        let Some(c) = self.client_mut(key) else { return };
        if c.closing.is_some() {
            return;
        }
        c.out.writer(now).extend_from_slice(reply::PONG);
        if c.connect_received && !c.first_pong_sent {
            c.first_pong_sent = true;
            if c.opts.protocol >= 1 {
                let mut info = cfg.info.clone();
                info.client_id = c.cid;
                info.client_ip = c.peer.ip().to_string();
                info.connect_info = true;
                info.remote_account = account_name;
                info.acc_is_sys = is_sys;
                info.write_line(&mut c.out.writer(now));
            }
        }
        self.queued(key);
    }

    pub(super) fn barrier_acked(&mut self, id: u64, now: Instant) {
        let Some(b) = self.barriers.get_mut(&id) else { return };
        b.remaining = b.remaining.saturating_sub(1);
        if b.remaining > 0 {
            return;
        }
        let key = b.conn;
        self.barriers.remove(&id);
        if self.client(key).is_some_and(|c| c.pause == Pause::Barrier(id)) {
            self.pong(key, now);
            self.resume(key, now);
        }
    }
}

/// CONNECT as traced: passwords and tokens replaced by `[REDACTED]`.
fn redact_connect(arg: &[u8]) -> Vec<u8> {
    let Ok(serde_json::Value::Object(mut m)) = serde_json::from_slice::<serde_json::Value>(arg) else {
        return arg.to_vec();
    };
    for k in ["pass", "auth_token", "sig", "nkey", "proxy_sig"] {
        if let Some(v) = m.get_mut(k) {
            *v = serde_json::Value::String("[REDACTED]".into());
        }
    }
    serde_json::to_vec(&m).unwrap_or_default()
}
