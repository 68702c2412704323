//! A consumer's durable state (the reference's `ConsumerState`): what was delivered, the
//! ack floor, the deliveries awaiting an ack and the redelivery counts. The JetStream layer
//! owns consumers; this crate keeps the shape and its on-disk encoding (`o.dat`, the
//! reference's: magic 22, version 2, uvarints, pending entries as deltas from the floors
//! with timestamps in seconds against a base, then the redelivery counts).

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

use crate::error::StoreError;

/// The first byte of an `o.dat`.
const MAGIC: u8 = 22;
/// The version the reference writes (1 is still read).
const VERSION: u8 = 2;
const NANOS_PER_SEC: i64 = 1_000_000_000;

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    // Zig-zag, as Go's binary.PutVarint.
    put_uvarint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A consumer's state by reference (what [`encode_into`] writes without a copy of the
/// pending and redelivery maps).
#[derive(Clone, Copy, Debug)]
pub struct StateRef<'a> {
    pub delivered: SeqPair,
    pub ack_floor: SeqPair,
    pub pending: &'a BTreeMap<u64, Pending>,
    pub redelivered: &'a BTreeMap<u64, u64>,
}

impl<'a> From<&'a ConsumerState> for StateRef<'a> {
    fn from(s: &'a ConsumerState) -> Self {
        StateRef {
            delivered: s.delivered,
            ack_floor: s.ack_floor,
            pending: &s.pending,
            redelivered: &s.redelivered,
        }
    }
}

/// Encode as the reference's `o.dat`, with `now_secs` (Unix seconds) as the base the
/// pending timestamps are stored against (whole seconds).
pub fn encode_at(state: &ConsumerState, now_secs: i64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, state.into(), now_secs);
    out
}

/// [`encode_at`] into `out` (cleared first; its capacity is reused).
pub fn encode_into(out: &mut Vec<u8>, state: StateRef<'_>, now_secs: i64) {
    out.clear();
    out.reserve(2 + 10 * (5 + 3 * state.pending.len() + 2 * state.redelivered.len()));
    out.extend_from_slice(&[MAGIC, VERSION]);
    let (adflr, asflr) = (state.ack_floor.consumer, state.ack_floor.stream);
    put_uvarint(out, adflr);
    put_uvarint(out, asflr);
    put_uvarint(out, state.delivered.consumer);
    put_uvarint(out, state.delivered.stream);
    put_uvarint(out, state.pending.len() as u64);
    if !state.pending.is_empty() {
        put_varint(out, now_secs);
        for (sseq, p) in state.pending {
            put_uvarint(out, sseq.wrapping_sub(asflr));
            put_uvarint(out, p.sequence.wrapping_sub(adflr));
            put_varint(out, now_secs.wrapping_sub(p.timestamp / NANOS_PER_SEC));
        }
    }
    put_uvarint(out, state.redelivered.len() as u64);
    for (sseq, n) in state.redelivered {
        put_uvarint(out, sseq.wrapping_sub(asflr));
        put_uvarint(out, *n);
    }
}

/// Unix seconds, rounded, as the pending timestamps' base.
pub fn now_secs() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    i64::try_from((now + 500) / 1000).unwrap_or(i64::MAX)
}

/// Encode as the reference's `o.dat` (pending timestamps relative to now, rounded to the
/// second).
pub fn encode(state: &ConsumerState) -> Vec<u8> {
    encode_at(state, now_secs())
}

/// A cursor over the encoded bytes; a failed read poisons it.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl Reader<'_> {
    /// Go's `binary.Uvarint`: at most 10 bytes, overflow is an error.
    fn uvarint(&mut self) -> u64 {
        if self.failed {
            return 0;
        }
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos + i) else { break };
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.pos += i + 1;
                return v;
            }
        }
        self.failed = true;
        0
    }

    fn varint(&mut self) -> i64 {
        let u = self.uvarint();
        if self.failed {
            return -1;
        }
        ((u >> 1) as i64) ^ -((u & 1) as i64)
    }
}

fn corrupt() -> StoreError {
    StoreError::Corrupt("corrupt state".to_string())
}

/// Decode an `o.dat` (versions 1 and 2) with the reference's rules: the header, the
/// floors and pending entries must be intact; a short redelivered list ends quietly.
/// Never reads past the buffer nor trusts a claimed length for allocation.
pub fn decode(buf: &[u8]) -> Result<ConsumerState, StoreError> {
    let version = match buf {
        [MAGIC, v @ (1 | 2), ..] => *v,
        [MAGIC, v, ..] => return Err(StoreError::Corrupt(format!("unsupported version: {v}"))),
        _ => return Err(corrupt()),
    };
    let mut r = Reader {
        buf,
        pos: 2,
        failed: false,
    };
    let mut st = ConsumerState::default();
    st.ack_floor.consumer = r.uvarint();
    st.ack_floor.stream = r.uvarint();
    st.delivered.consumer = r.uvarint();
    st.delivered.stream = r.uvarint();
    if r.failed {
        return Err(corrupt());
    }
    if version == 1 {
        // Version 1 stored the next sequences to deliver.
        if st.ack_floor.consumer > 1 {
            st.delivered.consumer = st.delivered.consumer.wrapping_add(st.ack_floor.consumer - 1);
        }
        if st.ack_floor.stream > 1 {
            st.delivered.stream = st.delivered.stream.wrapping_add(st.ack_floor.stream - 1);
        }
    }
    const HIGH: u64 = 1 << 63;
    if st.ack_floor.stream & HIGH != 0 || st.delivered.stream & HIGH != 0 {
        return Err(corrupt());
    }
    let num_pending = r.uvarint();
    // A count that is negative as Go's int reads no entries there.
    if num_pending > 0 && num_pending < HIGH {
        let base = r.varint();
        for _ in 0..num_pending {
            let mut sseq = r.uvarint();
            let dseq = if version == 2 { r.uvarint() } else { 0 };
            let ts = r.varint();
            if r.failed {
                return Err(corrupt());
            }
            sseq = sseq.wrapping_add(st.ack_floor.stream);
            if sseq == 0 {
                return Err(corrupt());
            }
            let (sequence, secs) = if version == 2 {
                (dseq.wrapping_add(st.ack_floor.consumer), base.wrapping_sub(ts))
            } else {
                (0, ts.wrapping_add(base))
            };
            st.pending.insert(
                sseq,
                Pending {
                    sequence,
                    timestamp: secs.wrapping_mul(NANOS_PER_SEC),
                },
            );
        }
    }
    let num_redelivered = r.uvarint();
    if num_redelivered > 0 && num_redelivered < HIGH {
        for _ in 0..num_redelivered {
            let (seq, n) = (r.uvarint(), r.uvarint());
            if r.failed {
                break;
            }
            if seq > 0 && n > 0 {
                st.redelivered.insert(seq.wrapping_add(st.ack_floor.stream), n);
            }
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_into_a_used_buffer_gives_the_same_bytes() {
        let big = sample();
        let small = ConsumerState {
            delivered: SeqPair { consumer: 9, stream: 9 },
            ack_floor: SeqPair { consumer: 9, stream: 9 },
            ..ConsumerState::default()
        };
        let mut buf = Vec::new();
        encode_into(&mut buf, (&big).into(), 1_796_131_100);
        assert_eq!(buf, encode_at(&big, 1_796_131_100));
        encode_into(&mut buf, (&small).into(), 1_796_131_100);
        assert_eq!(buf, encode_at(&small, 1_796_131_100));
        assert_eq!(decode(&buf).unwrap(), small);
    }

    fn sample() -> ConsumerState {
        ConsumerState {
            delivered: SeqPair { consumer: 7, stream: 6 },
            ack_floor: SeqPair { consumer: 2, stream: 2 },
            pending: BTreeMap::from([
                (
                    3,
                    Pending {
                        sequence: 3,
                        timestamp: 1_796_131_030_000_000_000,
                    },
                ),
                (
                    6,
                    Pending {
                        sequence: 6,
                        timestamp: 1_796_131_034_000_000_000,
                    },
                ),
            ]),
            redelivered: BTreeMap::from([(3, 1)]),
        }
    }

    /// An `o.dat` nats-server 2.14.0 wrote: 10 messages, 6 pulled, 1, 2, 4 acked, 5
    /// terminated, 3 NAKed and redelivered, 6 left pending (see
    /// storage/tests/reference_consumer_state.rs for how such a file is made).
    #[test]
    fn decodes_reference_file() {
        let buf = include_bytes!("../tests/fixtures/consumer_o.dat");
        let st = decode(buf).unwrap();
        assert_eq!(st.delivered, SeqPair { consumer: 7, stream: 6 });
        assert_eq!(st.ack_floor, SeqPair { consumer: 2, stream: 2 });
        assert_eq!(st.pending.keys().copied().collect::<Vec<_>>(), [3, 6]);
        assert_eq!(st.pending.get(&6).map(|p| p.sequence), Some(6));
        assert_eq!(st.redelivered, BTreeMap::from([(3, 1)]));
        // Timestamps are whole seconds, in 2026.
        for p in st.pending.values() {
            assert_eq!(p.timestamp % NANOS_PER_SEC, 0);
            assert!((1_767_225_600..1_798_761_600).contains(&(p.timestamp / NANOS_PER_SEC)));
        }
        // Our encoding of it, against the same base, has the reference's bytes up to the
        // order of the pending entries (the reference writes them in map order).
        let base = Reader {
            buf: &buf[7..],
            pos: 0,
            failed: false,
        }
        .varint();
        let ours = encode_at(&st, base);
        assert_eq!(ours.len(), buf.len());
        assert_eq!(ours[..12], buf[..12]);
        assert_eq!(ours[18..], buf[18..]);
        let entries = |b: &[u8]| {
            let mut e = vec![b[12..15].to_vec(), b[15..18].to_vec()];
            e.sort();
            e
        };
        assert_eq!(entries(&ours), entries(buf));
    }

    #[test]
    fn round_trips() {
        let st = sample();
        assert_eq!(decode(&encode(&st)).unwrap(), st);
        let empty = ConsumerState::default();
        assert_eq!(encode(&empty), [22, 2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode(&encode(&empty)).unwrap(), empty);
    }

    #[test]
    fn rejects_damage_without_panicking() {
        let good = encode_at(&sample(), 1_796_131_040);
        assert!(decode(&[]).is_err());
        assert!(decode(&[22]).is_err());
        assert!(decode(&[21, 2, 0, 0, 0, 0]).is_err());
        assert!(matches!(decode(&[22, 3, 0, 0, 0, 0]), Err(StoreError::Corrupt(t)) if t == "unsupported version: 3"));
        // Every truncation inside the floors or pending entries is corrupt; a missing
        // count reads as none and inside the redelivered list the reference keeps what
        // it read.
        let redelivered_at = good.len() - 3;
        for n in 2..good.len() {
            let r = decode(&good[..n]);
            if n < 6 || (n > 6 && n < redelivered_at) {
                assert!(r.is_err(), "{n}");
            } else {
                assert!(r.is_ok(), "{n}");
            }
        }
        // Huge claimed counts neither allocate nor loop past the bytes.
        let mut huge = vec![22, 2, 0, 0, 0, 0];
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(decode(&huge).is_err());
        let mut huge = vec![22, 2, 0, 0, 0, 0, 0];
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(decode(&huge).unwrap(), ConsumerState::default());
        // A stream floor with the high bit set is refused.
        let mut high = vec![22, 2, 0];
        high.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        high.extend_from_slice(&[0, 0, 0, 0]);
        assert!(decode(&high).is_err());
    }

    #[test]
    fn reads_version_one() {
        // v1: delivered is the next to deliver, relative to the floors; pending has no
        // consumer sequence and timestamps are base + delta.
        let mut v1 = vec![22, 1];
        for v in [3u64, 4, 2, 2, 1] {
            put_uvarint(&mut v1, v);
        }
        put_varint(&mut v1, 100);
        put_uvarint(&mut v1, 1);
        put_varint(&mut v1, 5);
        put_uvarint(&mut v1, 0);
        let st = decode(&v1).unwrap();
        assert_eq!(st.delivered, SeqPair { consumer: 4, stream: 5 });
        assert_eq!(
            st.pending.get(&5),
            Some(&Pending {
                sequence: 0,
                timestamp: 105 * NANOS_PER_SEC
            })
        );
    }
}
