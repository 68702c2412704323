//! Pull requests (`$JS.API.CONSUMER.MSG.NEXT.<S>.<C>`): admission (the consumer's request
//! limits, priority group checks, `no_wait`, max waiting), the waiting queue (FIFO, or
//! ordered by priority for `prioritized`), picking the request a message goes to
//! (max bytes, pinned client, overflow thresholds, requester interest), and expiry and
//! heartbeats of waiting requests, each with the reference's status replies.

use super::engine::Consumer;
use super::wire::{self, PriorityGroup};
use super::ConsumerEnv;
use crate::jetstream::api::config::PriorityPolicy;
use std::time::{Duration, Instant};

/// A waiting pull request.
#[derive(Clone, Debug)]
pub(super) struct PullReq {
    pub reply: String,
    /// Messages still wanted.
    pub n: i64,
    /// Messages delivered.
    pub d: i64,
    /// Bytes still allowed (0: no byte limit).
    pub b: i64,
    pub expires: Option<Instant>,
    pub hb: Option<Duration>,
    pub hbt: Option<Instant>,
    pub no_wait: bool,
    pub group: Option<PriorityGroup>,
}

impl PullReq {
    fn priority(&self) -> i64 {
        self.group.as_ref().map_or(i64::MAX, |g| g.priority)
    }
    fn pin(&self) -> &str {
        self.group.as_ref().map_or("", |g| g.id.as_str())
    }
}

/// The request a message was handed to, after the hand-over.
pub(super) struct Target {
    pub reply: String,
    pub n: i64,
    pub b: i64,
    pub done: bool,
    pub hb: Option<Duration>,
}

impl Consumer {
    fn send_status(env: &mut dyn ConsumerEnv, to: &str, hdr: &[u8]) {
        env.publish(to, "", Some(hdr), b"");
    }

    /// A pull request with its reply subject and headers.
    pub fn on_pull(
        &mut self,
        env: &mut dyn ConsumerEnv,
        reply: &str,
        header: Option<&[u8]>,
        body: &[u8],
        now: Instant,
    ) {
        self.last_now = now;
        if reply.is_empty() || self.closed {
            return;
        }
        let err =
            |env: &mut dyn ConsumerEnv, code: u16, text: &str| Self::send_status(env, reply, &wire::status(code, text));
        if self.cfg.is_push() {
            return err(env, 409, "Consumer is push based");
        }
        if wire::requires_newer_api(header) {
            return err(env, 412, "Required Api Level");
        }
        let req = match wire::parse_pull(body) {
            Ok(r) => r,
            Err(e) => return err(env, 400, &format!("Bad Request - {e}")),
        };
        if self.cfg.max_batch > 0 && req.batch > self.cfg.max_batch {
            return err(env, 409, &format!("Exceeded MaxRequestBatch of {}", self.cfg.max_batch));
        }
        if req.expires > 0 && self.cfg.max_expires > 0 && req.expires > self.cfg.max_expires {
            let d = crate::monitor::gofmt::go_duration(Self::dur(self.cfg.max_expires));
            return err(env, 409, &format!("Exceeded MaxRequestExpires of {d}"));
        }
        if req.max_bytes > 0 && self.cfg.max_bytes > 0 && req.max_bytes > self.cfg.max_bytes {
            return err(
                env,
                409,
                &format!("Exceeded MaxRequestMaxBytes of {}", self.cfg.max_bytes),
            );
        }
        let policy = self.cfg.priority_policy;
        if let Some(g) = &req.group {
            // As the reference: the two policy mismatches answer but do not refuse.
            if (g.min_pending != 0 || g.min_ack_pending != 0) && policy != PriorityPolicy::Overflow {
                err(env, 400, "Bad Request - Not a Overflow Priority consumer");
            }
            if !g.id.is_empty() && policy != PriorityPolicy::PinnedClient {
                err(env, 400, "Bad Request - Not a Pinned Client Priority consumer");
            }
            if !(0..=9).contains(&g.priority) {
                return err(env, 400, "Bad Request - Priority must be between 0 and 9");
            }
            if policy != PriorityPolicy::None {
                if g.group.is_empty() {
                    return err(env, 400, "Bad Request - Priority Group missing");
                }
                if !self.cfg.priority_groups.contains(&g.group) {
                    return err(env, 400, "Bad Request - Invalid Priority Group");
                }
                if !self.pin_id.is_empty() {
                    if g.id == self.pin_id {
                        self.pin_deadline = Some(now + Self::dur(self.cfg.priority_timeout));
                    } else if !g.id.is_empty() {
                        return err(env, 423, "Nats-Pin-Id mismatch");
                    }
                }
            }
        }
        if self.waiting.len() >= self.max_waiting
            && self
                .last_wait_check
                .is_none_or(|t| now.saturating_duration_since(t) > Duration::from_secs(1))
        {
            self.process_waiting(false, env, now);
        }
        let expires = (req.expires > 0).then(|| now + Self::dur(req.expires));
        if req.no_wait {
            let pending = self.num_pending(env) + self.rdq.len() as u64;
            if pending == 0 && expires.is_none() {
                self.waiting_last = now;
                return err(env, 404, "No Messages");
            }
            if pending > 0 {
                let (_, _, brp, _) = self.process_waiting(false, env, now);
                if pending < brp {
                    self.waiting_last = now;
                    return err(env, 408, "Requests Pending");
                }
            }
        }
        let hb = (req.heartbeat > 0).then(|| Self::dur(req.heartbeat));
        let wr = PullReq {
            reply: reply.to_string(),
            n: req.batch,
            d: 0,
            b: req.max_bytes,
            expires,
            hb,
            hbt: hb.map(|h| now + h),
            no_wait: req.no_wait,
            group: req.group,
        };
        if self.waiting.len() >= self.max_waiting {
            if hb.is_none() {
                err(env, 409, "Exceeded MaxWaiting");
            }
            return;
        }
        if policy == PriorityPolicy::Prioritized {
            self.insert_by_priority(wr);
        } else {
            self.waiting.push_back(wr);
        }
        self.waiting_last = now;
        self.wake = true;
    }

    /// Insert after the last request of the same or a more urgent priority.
    fn insert_by_priority(&mut self, wr: PullReq) {
        let p = wr.priority();
        let at = self
            .waiting
            .iter()
            .position(|w| w.priority() > p)
            .unwrap_or(self.waiting.len());
        self.waiting.insert(at, wr);
    }

    /// Move the head request to the back.
    fn cycle(&mut self) {
        if let Some(wr) = self.waiting.pop_front() {
            self.waiting.push_back(wr);
        }
    }

    /// Hand one message to the head request.
    fn pop_head(&mut self) -> Option<Target> {
        let len = self.waiting.len();
        let wr = self.waiting.front_mut()?;
        wr.d += 1;
        wr.n -= 1;
        let t = Target {
            reply: wr.reply.clone(),
            n: wr.n,
            b: wr.b,
            done: wr.n <= 0,
            hb: wr.hb,
        };
        if t.done {
            self.waiting.pop_front();
        } else if len > 1 {
            if let Some(wr) = self.waiting.pop_front() {
                if self.cfg.priority_policy == PriorityPolicy::Prioritized {
                    self.insert_by_priority(wr);
                } else {
                    self.waiting.push_back(wr);
                }
            }
        }
        Some(t)
    }

    fn assign_pin(&mut self, env: &mut dyn ConsumerEnv, now: Instant) {
        let Some(group) = self
            .waiting
            .front()
            .and_then(|w| w.group.as_ref())
            .map(|g| g.group.clone())
        else {
            return;
        };
        if group.is_empty() {
            return;
        }
        self.pin_id = self.nuid.next_id();
        self.pinned_ts = env.now_ns();
        if let Some(g) = self.waiting.front_mut().and_then(|w| w.group.as_mut()) {
            g.id = self.pin_id.clone();
        }
        self.pin_deadline = Some(now + Self::dur(self.cfg.priority_timeout));
        self.pinned_advisory(env, &group);
    }

    /// The request the next message (of `sz` bytes) goes to, dropping requests that
    /// expired, lost interest, cannot take the message, or carry a stale pin id.
    pub(super) fn next_waiting(&mut self, sz: i64, env: &mut dyn ConsumerEnv, now: Instant) -> Option<Target> {
        let mut cycled = 0usize;
        let mut npc: Option<u64> = None;
        while let Some(wr) = self.waiting.front_mut() {
            if wr.b > 0 {
                if sz <= wr.b {
                    wr.b -= sz;
                    if wr.b == 0 {
                        wr.n = 1;
                    }
                } else {
                    let hdr = wire::status_pending(409, "Message Size Exceeds MaxBytes", wr.n, wr.b);
                    let to = wr.reply.clone();
                    self.waiting.pop_front();
                    Self::send_status(env, &to, &hdr);
                    continue;
                }
            }
            let (n, b, reply) = (wr.n, wr.b, wr.reply.clone());
            let live = wr.expires.is_none_or(|e| now < e);
            if !live {
                self.waiting.pop_front();
                Self::send_status(env, &reply, &wire::status_pending(408, "Request Timeout", n, b));
                continue;
            }
            let pin = wr.pin().to_string();
            if self.is_pinned_policy() && self.pin_id.is_empty() {
                if pin.is_empty() {
                    self.assign_pin(env, now);
                } else {
                    self.waiting.pop_front();
                    Self::send_status(env, &reply, &wire::status_pending(423, "Nats-Wrong-Pin-Id", n, b));
                    continue;
                }
            } else if !self.pin_id.is_empty() && pin != self.pin_id {
                if pin.is_empty() {
                    self.cycle();
                    cycled += 1;
                    if cycled >= self.waiting.len() {
                        return None;
                    }
                } else {
                    self.waiting.pop_front();
                    Self::send_status(env, &reply, &wire::status_pending(423, "Nats-Wrong-Pin-Id", n, b));
                }
                continue;
            }
            if self.cfg.priority_policy == PriorityPolicy::Overflow {
                let (mp, map) = self
                    .waiting
                    .front()
                    .and_then(|w| w.group.as_ref())
                    .map_or((0, 0), |g| (g.min_pending, g.min_ack_pending));
                if mp > 0 || map > 0 {
                    let np = *npc.get_or_insert_with(|| self.num_pending(env));
                    let over = (mp > 0 && u64::try_from(mp).unwrap_or(u64::MAX) <= np + 1)
                        || (map > 0 && usize::try_from(map).unwrap_or(usize::MAX) <= self.pending.len());
                    if !over {
                        self.cycle();
                        cycled += 1;
                        if cycled >= self.waiting.len() {
                            return None;
                        }
                        continue;
                    }
                }
            }
            if env.has_interest(&reply) {
                return self.pop_head();
            }
            self.waiting.pop_front();
            Self::send_status(env, &reply, &wire::status_pending(408, "Interest Expired", n, b));
        }
        None
    }

    /// Expire requests, answer one-shots at the end of the stream (`eos`), drop requests
    /// whose requester is gone, and send due heartbeats. Returns (removed, left, messages
    /// the left requests still want, their next deadline).
    pub(super) fn process_waiting(
        &mut self,
        eos: bool,
        env: &mut dyn ConsumerEnv,
        now: Instant,
    ) -> (usize, usize, u64, Option<Instant>) {
        if self.waiting.is_empty() {
            return (0, 0, 0, None);
        }
        self.last_wait_check = Some(now);
        let (mut removed, mut brp, mut fexp) = (0usize, 0u64, None::<Instant>);
        let earliest = |f: &mut Option<Instant>, t: Instant| {
            if f.is_none_or(|x| t < x) {
                *f = Some(t);
            }
        };
        let mut i = 0;
        while let Some(wr) = self.waiting.get_mut(i) {
            let expired = wr.expires.is_some_and(|e| now >= e);
            if (eos && wr.no_wait) || expired {
                let hdr = if expired {
                    Some(wire::status_pending(408, "Request Timeout", wr.n, wr.b))
                } else if wr.expires.is_none() || wr.d > 0 {
                    Some(wire::status(404, "No Messages"))
                } else {
                    None
                };
                if let Some(hdr) = hdr {
                    let to = wr.reply.clone();
                    self.waiting.remove(i);
                    removed += 1;
                    Self::send_status(env, &to, &hdr);
                    continue;
                }
            }
            let reply = wr.reply.clone();
            if !env.has_interest(&reply) {
                self.waiting.remove(i);
                removed += 1;
                continue;
            }
            let (last_c, last_s) = (self.dseq.saturating_sub(1), self.sseq.saturating_sub(1));
            let Some(wr) = self.waiting.get_mut(i) else {
                break;
            };
            brp += u64::try_from(wr.n.max(0)).unwrap_or(0);
            if let (Some(hbt), Some(hb)) = (wr.hbt, wr.hb) {
                let mut next = hbt;
                if now >= hbt {
                    next = now + hb;
                    wr.hbt = Some(next);
                    env.publish(&reply, "", Some(&wire::heartbeat(last_c, last_s, "")), b"");
                }
                earliest(&mut fexp, next);
            }
            if let Some(e) = self.waiting.get(i).and_then(|w| w.expires) {
                earliest(&mut fexp, e);
            }
            i += 1;
        }
        (removed, self.waiting.len(), brp, fexp)
    }

    /// The earliest expiry or heartbeat among waiting requests.
    pub(super) fn waiting_deadline(&self) -> Option<Instant> {
        self.waiting.iter().flat_map(|w| [w.expires, w.hbt]).flatten().min()
    }

    /// After a delivery to `t`: restart its heartbeat interval.
    pub(super) fn touch_request(&mut self, t: &Target, now: Instant) {
        if t.done {
            return;
        }
        if let Some(hb) = t.hb {
            if let Some(w) = self.waiting.iter_mut().find(|w| w.reply == t.reply) {
                w.hbt = Some(now + hb);
            }
        }
    }
}
