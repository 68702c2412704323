//! The consumer engine: one JetStream consumer as a sans-IO state machine, driven by the
//! shard that owns its stream (FEATURES.md §14.3, jetstream-api.md §6.2-6.5, §7). It reads
//! the stream through [`ConsumerEnv::store`], learns the time from the caller (`Instant`
//! for its timers, [`ConsumerEnv::now_ns`] for wall-clock stamps) and sends everything it
//! produces through [`ConsumerEnv`]; it never does I/O itself.
//!
//! Module map:
//! - [`engine`]: the [`Consumer`] itself: creation (start position per deliver policy,
//!   restored state), configuration updates, pause, reset, removals, stop, unpin.
//! - `query`: what it reports: [`Consumer::state`], [`Consumer::stats`] ([`ConsumerStats`]),
//!   [`Consumer::needs`] (interest retention), [`Consumer::inactive`].
//! - `deliver`: [`Consumer::poll`]: picking the next message (redeliveries first, lowest
//!   stream sequence first, then the last-per-subject skip list, then new messages),
//!   max ack pending, replay timing, rate limiting, headers only, the ack reply subject.
//! - `pull`: pull requests: parsing limits, the waiting queue (max waiting, priority
//!   groups: overflow, pinned client, prioritized), expiry, heartbeats and statuses.
//! - `ack`: the ack protocol (`+ACK`, `-NAK [delay]`, `+WPI`, `+NXT`, `+TERM`), ack floors,
//!   double acks, sampled ack metrics.
//! - `timers`: [`Consumer::tick`] and [`Consumer::next_deadline`]: redelivery after
//!   ack wait / backoff and max deliver, push heartbeats and flow control, pause end,
//!   pinned TTL.
//! - [`wire`]: the byte formats: ack subjects and payloads, pull request bodies, status
//!   headers (private parsers until `api::consumer_msgs` is unified with them).
//! - `advisory`: the consumer advisories and the ack metric (`$JS.EVENT...`).
//! - `tests_*`: sans-IO tests on a memory store and a recording env; `testdata/` holds
//!   the script that printed the reference's status bytes the tests assert.
//!
//! The caller's contract: call [`Consumer::poll`] after [`Consumer::on_stored`],
//! [`Consumer::on_pull`], acks, flow-control replies and interest changes on a push
//! consumer's deliver subject (and again while it returns true; [`Consumer::wants_poll`]
//! says whether an event asked for it); call [`Consumer::tick`] when
//! [`Consumer::next_deadline`] passes (it delivers what became due), then ask
//! [`Consumer::inactive`]; persist [`Consumer::state`] when [`Consumer::take_dirty`]
//! says so; feed [`Consumer::on_ack`]'s result and [`Consumer::take_acked`] to interest
//! retention.

mod ack;
mod advisory;
mod deliver;
pub mod engine;
mod pull;
mod query;
mod timers;
pub mod wire;

#[cfg(test)]
mod tests_ack;
#[cfg(test)]
mod tests_deliver;
#[cfg(test)]
mod tests_pull;
#[cfg(test)]
mod tests_push;
#[cfg(test)]
mod tests_support;

pub use engine::Consumer;
pub use query::{ConsumerStats, PriorityGroupState, SequenceInfo};

/// What a consumer needs from the shard that owns its stream.
pub trait ConsumerEnv {
    fn store(&mut self) -> &mut dyn storage::Store;
    /// Wall clock, Unix ns (timestamps in ack subjects, last_active, pause_until).
    fn now_ns(&self) -> i64;
    /// Would a publish on `subject` reach anyone (push deliver subject, pull reply subjects)?
    fn has_interest(&mut self, subject: &str) -> bool;
    /// Is a push consumer's deliver subject bound: a subscription on exactly `subject`,
    /// plain when `group` is empty, else in queue group `group`.
    fn has_delivery_interest(&mut self, subject: &str, group: &str) -> bool;
    /// Publish into the consumer's account (deliveries, status messages, advisories).
    fn publish(&mut self, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]);
    /// Deliver a stream message: routed on `to` (the deliver subject, or a pull request's
    /// reply subject) while the receiver sees the message's own `subject`, as a
    /// consumer's deliveries keep the stored subject.
    fn deliver(&mut self, to: &str, subject: &str, reply: &str, header: Option<&[u8]>, payload: &[u8]);
}
