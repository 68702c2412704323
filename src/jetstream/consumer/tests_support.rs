//! The tests' world: a memory store on a manual clock, a [`ConsumerEnv`] that records
//! what the consumer sends and lets a test set interest, and helpers to build consumers.

use super::{Consumer, ConsumerEnv};
use crate::jetstream::api::config::{AckPolicy, ConsumerConfig};
use crate::jetstream::api::GoTime;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::{ManualClock, MemStore, Store, StoreConfig};

/// Start of the tests' wall clock (Unix ns).
pub const T0: i64 = 1_800_000_000_000_000_000;

/// One message the consumer sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    /// Where it was routed.
    pub to: String,
    /// The subject the receiver sees.
    pub subject: String,
    pub reply: String,
    pub hdr: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Out {
    pub fn hdr_str(&self) -> String {
        String::from_utf8_lossy(&self.hdr).into_owned()
    }
    /// The stream sequence of a delivery (from its ack subject).
    pub fn sseq(&self) -> u64 {
        super::wire::parse_ack_subject(&self.reply).map_or(0, |a| a.stream_seq)
    }
    pub fn dc(&self) -> u64 {
        super::wire::parse_ack_subject(&self.reply).map_or(0, |a| a.deliveries)
    }
    pub fn is_delivery(&self) -> bool {
        self.reply.starts_with("$JS.ACK.")
    }
}

pub struct TestEnv {
    pub store: MemStore,
    pub clock: ManualClock,
    pub interest: HashSet<String>,
    pub out: Vec<Out>,
}

impl ConsumerEnv for TestEnv {
    fn store(&mut self) -> &mut dyn Store {
        &mut self.store
    }
    fn now_ns(&self) -> i64 {
        storage::Clock::now_nanos(&self.clock)
    }
    fn has_interest(&mut self, subject: &str) -> bool {
        self.interest.contains(subject)
    }
    fn has_delivery_interest(&mut self, subject: &str, _group: &str) -> bool {
        self.interest.contains(subject)
    }
    fn publish(&mut self, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        self.out.push(Out {
            to: subject.to_string(),
            subject: subject.to_string(),
            reply: reply.to_string(),
            hdr: header.unwrap_or_default().to_vec(),
            payload: payload.to_vec(),
        });
    }
    fn deliver(&mut self, to: &str, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]) {
        self.out.push(Out {
            to: to.to_string(),
            subject: subject.to_string(),
            reply: reply.to_string(),
            hdr: header.unwrap_or_default().to_vec(),
            payload: payload.to_vec(),
        });
    }
}

/// A stream store, the env, and virtual time.
pub struct World {
    pub env: TestEnv,
    pub t0: Instant,
    pub elapsed: Duration,
}

impl World {
    pub fn new() -> World {
        let clock = ManualClock::new(T0);
        World {
            env: TestEnv {
                store: MemStore::with_clock(StoreConfig::new("S"), Arc::new(clock.clone())),
                clock,
                interest: HashSet::new(),
                out: Vec::new(),
            },
            t0: Instant::now(),
            elapsed: Duration::ZERO,
        }
    }

    pub fn now(&self) -> Instant {
        self.t0 + self.elapsed
    }

    pub fn advance(&mut self, d: Duration) {
        self.elapsed += d;
        self.env.clock.advance(i64::try_from(d.as_nanos()).unwrap());
    }

    /// Store a message (the clock moves 1 ms first so timestamps differ).
    pub fn store(&mut self, subject: &str, payload: &[u8]) -> u64 {
        self.advance(Duration::from_millis(1));
        self.env.store.store_msg(subject, b"", payload, 0).unwrap().0
    }

    pub fn store_hdr(&mut self, subject: &str, hdr: &[u8], payload: &[u8]) -> u64 {
        self.advance(Duration::from_millis(1));
        self.env.store.store_msg(subject, hdr, payload, 0).unwrap().0
    }

    pub fn listen(&mut self, subject: &str) {
        self.env.interest.insert(subject.to_string());
    }

    pub fn unlisten(&mut self, subject: &str) {
        self.env.interest.remove(subject);
    }

    pub fn consumer(&mut self, cfg: ConsumerConfig) -> Consumer {
        let now = self.now();
        Consumer::new("S", "C", cfg, GoTime(T0), None, &mut self.env, now)
    }

    pub fn take(&mut self) -> Vec<Out> {
        std::mem::take(&mut self.env.out)
    }

    /// Poll until done, then take what was sent.
    pub fn poll(&mut self, c: &mut Consumer) -> Vec<Out> {
        let now = self.now();
        while c.poll(&mut self.env, now) {}
        self.take()
    }

    /// Advance by `d`, tick, and take what was sent.
    pub fn tick_after(&mut self, c: &mut Consumer, d: Duration) -> Vec<Out> {
        self.advance(d);
        let now = self.now();
        c.tick(&mut self.env, now);
        self.take()
    }

    pub fn pull(&mut self, c: &mut Consumer, reply: &str, body: &str) -> Vec<Out> {
        self.listen(reply);
        let now = self.now();
        c.on_pull(&mut self.env, reply, None, body.as_bytes(), now);
        self.poll(c)
    }

    pub fn inactive(&mut self, c: &Consumer) -> bool {
        let now = self.now();
        c.inactive(&mut self.env, now)
    }

    pub fn ack(&mut self, c: &mut Consumer, d: &Out, body: &str) -> Vec<u64> {
        let now = self.now();
        c.on_ack(&mut self.env, &d.reply, "", body.as_bytes(), now)
    }
}

/// Stream sequences of the deliveries in `out`.
pub fn seqs(out: &[Out]) -> Vec<u64> {
    out.iter().filter(|o| o.is_delivery()).map(Out::sseq).collect()
}

/// Header texts of the non-deliveries in `out`.
pub fn statuses(out: &[Out]) -> Vec<String> {
    out.iter().filter(|o| !o.is_delivery()).map(Out::hdr_str).collect()
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A push consumer on `D` with explicit acks and a 1 s ack wait.
pub fn push_cfg() -> ConsumerConfig {
    ConsumerConfig {
        durable_name: "C".into(),
        deliver_subject: "D".into(),
        ack_policy: AckPolicy::Explicit,
        ack_wait: 1_000_000_000,
        max_deliver: -1,
        max_ack_pending: 1000,
        ..ConsumerConfig::default()
    }
}

/// A pull consumer with explicit acks, a 1 s ack wait and max waiting 512.
pub fn pull_cfg() -> ConsumerConfig {
    ConsumerConfig {
        durable_name: "C".into(),
        ack_policy: AckPolicy::Explicit,
        ack_wait: 1_000_000_000,
        max_deliver: -1,
        max_ack_pending: 1000,
        max_waiting: 512,
        ..ConsumerConfig::default()
    }
}
