//! A consumer's durable state (the reference's `ConsumerState`): what was delivered, the
//! ack floor, the deliveries awaiting an ack and the redelivery counts. The JetStream layer
//! owns consumers; this crate keeps the shape and its on-disk encoding (`o.dat`).

use std::collections::BTreeMap;

/// A consumer sequence and the stream sequence it stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqPair {
    pub consumer: u64,
    pub stream: u64,
}

/// A delivery awaiting its ack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// The consumer sequence of the (latest) delivery.
    pub sequence: u64,
    /// When it was delivered, Unix nanoseconds.
    pub timestamp: i64,
}

/// A consumer's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerState {
    /// The last delivered message.
    pub delivered: SeqPair,
    /// Everything at or below this is acknowledged.
    pub ack_floor: SeqPair,
    /// Deliveries awaiting an ack, by stream sequence.
    pub pending: BTreeMap<u64, Pending>,
    /// How often each stream sequence was redelivered (above one delivery).
    pub redelivered: BTreeMap<u64, u64>,
}
