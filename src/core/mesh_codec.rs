//! Records that cross cores: the byte format of mesh batches.
//!
//! A batch is one `Vec<u8>` of records, appended by the producing shard during one
//! processing step and handed over as one ring item. Records of a batch are applied in
//! order, and batches on a link are FIFO, so interest changes, barriers and messages from
//! one shard are seen by another in the order they were made (ARCHITECTURE.md, invariants
//! 4 and 7).
//!
//! | tag | record | fields (little endian) |
//! |---|---|---|
//! | 1 | message | flags u8, hops u8, account u32, subject, reply, header length u32 (`u32::MAX` = none), data, [size text, header size text if `RAW_SIZES`], [shown subject if `SHOWN`], queue count u8 + queue names |
//! | 2 | interest | account u32, subject, queue (empty = none), delta i32 |
//! | 3 | barrier | id u64 |
//! | 4 | barrier ack | id u64 |
//! | 5 | responder info | account u32, subject, ClientInfo JSON (ahead of a tracked response) |
//! | 6 | trace part | trace id u64, leg u64, child leg count u16 + legs u64, encoded trace steps |
//! | 7 | run | consecutive plain messages of one subject (module [`mesh_run`](super::mesh_run)) |
//!
//! A message record with flag `BLOB` carries, in place of its data, a u32: where the data
//! starts in the batch's next blob ([`Batch::blobs`], taken in record order). A blob is
//! the payload of one large message in a buffer of its own, with room in front for the
//! receiving shard's `MSG` line, so the receiver can hand the buffer itself to a
//! connection instead of copying the payload again (see `ShardCore::deliver_blob`).
//!
//! A message record with flag `TRACE` ends with its trace tag: trace id u64, leg u64,
//! ingress account u32, trace-only u8, stream link exporter u32 and index u32 (`u32::MAX`
//! = none). See `core::shard::trace`.
//!
//! Strings are a u32 length and the bytes. Only our own shards write these batches;
//! decoding still never panics on a short or malformed batch, it stops.

/// Delivery flags of a message record.
pub mod flags {
    /// Deliver only to the named queue groups (a re-routed queue message).
    pub const QUEUE_ONLY: u8 = 1;
    /// The publisher's size texts follow the data (they were not plain decimals).
    pub const RAW_SIZES: u8 = 2;
    /// A publish on a service response subject (`_R_.`) for the shard that owns its
    /// response mapping; no plain delivery.
    pub const RESPONSE: u8 = 4;
    /// Published by the server itself (see `Msg::internal`).
    pub const INTERNAL: u8 = 8;
    /// A traced message: a trace tag follows the queue names.
    pub const TRACE: u8 = 16;
    /// The subject subscribers see differs from the routed one (JetStream's deliveries to
    /// a pull request's reply subject keep the stored subject); it follows the sizes.
    pub const SHOWN: u8 = 32;
    /// The data is in the batch's next blob (see the module map).
    pub const BLOB: u8 = 64;
}

/// One ring item between two shards: records, and the blobs their `BLOB` messages use.
#[derive(Debug, Default)]
pub struct Batch {
    pub records: Vec<u8>,
    pub blobs: Vec<Vec<u8>>,
    /// Bytes in `blobs` (the records' bytes are `records.len()`).
    pub blob_bytes: usize,
}

impl Batch {
    /// Bytes held: records and blobs.
    pub fn len(&self) -> usize {
        self.records.len() + self.blob_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.blobs.is_empty()
    }

    /// Emptied for reuse, keeping the records' capacity.
    pub fn clear(&mut self) {
        self.records.clear();
        self.blobs.clear();
        self.blob_bytes = 0;
    }

    /// Append `later`'s records and blobs (their order is kept).
    pub fn append(&mut self, later: &mut Batch) {
        self.records.extend_from_slice(&later.records);
        self.blobs.append(&mut later.blobs);
        self.blob_bytes += later.blob_bytes;
        later.clear();
    }
}

const TAG_MSG: u8 = 1;
const TAG_INTEREST: u8 = 2;
const TAG_BARRIER: u8 = 3;
const TAG_BARRIER_ACK: u8 = 4;
const TAG_RESP_INFO: u8 = 5;
const TAG_TRACE_PART: u8 = 6;
const NO_HEADER: u32 = u32::MAX;

/// One decoded record, borrowing the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Msg(MsgRecord<'a>),
    Run(super::mesh_run::RunRecord<'a>),
    Interest {
        account: u32,
        subject: &'a [u8],
        queue: Option<&'a [u8]>,
        delta: i32,
    },
    Barrier(u64),
    BarrierAck(u64),
    /// The responder of a latency-tracked response (the response record follows).
    RespInfo {
        account: u32,
        subject: &'a [u8],
        info: &'a [u8],
    },
    /// What one shard recorded of a traced message, for the shard that owns the trace.
    TracePart {
        id: u64,
        leg: u64,
        /// Legs this shard handed on to other shards.
        children: Vec<u64>,
        /// Encoded trace steps, comma-separated.
        steps: &'a [u8],
    },
}

/// The trace of a message record (flag `TRACE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceTag {
    /// The trace (its owner shard in the top bits).
    pub id: u64,
    /// This hop of the message between shards.
    pub leg: u64,
    /// The account the message was published in.
    pub ingress: u32,
    pub only: bool,
    /// Delivered through this stream link: (exporting account, index of its links).
    pub link: Option<(u32, u32)>,
}

/// A message for another shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgRecord<'a> {
    pub flags: u8,
    /// How many times this message was re-routed for a queue group.
    pub hops: u8,
    pub account: u32,
    pub subject: &'a [u8],
    pub reply: &'a [u8],
    pub header_len: Option<u32>,
    /// The data (empty for a `BLOB` record: it is in the blob).
    pub data: &'a [u8],
    /// For a `BLOB` record: where the data starts in its blob.
    pub blob_head: Option<u32>,
    /// The publisher's size texts, when not plain decimals.
    pub raw_sizes: Option<(&'a [u8], &'a [u8])>,
    /// The subject subscribers see (empty: the routed one).
    pub shown: &'a [u8],
    queues: &'a [u8],
    nqueues: u8,
    /// The trace tag of a traced message.
    pub trace: Option<TraceTag>,
}

impl<'a> MsgRecord<'a> {
    /// This record with its data in `data` (a `BLOB` record read with its blob).
    pub fn with_data<'b>(&self, data: &'b [u8]) -> MsgRecord<'b>
    where
        'a: 'b,
    {
        MsgRecord {
            data,
            blob_head: None,
            ..self.clone()
        }
    }

    /// Queue groups this shard must pick a member of.
    pub fn queues(&self) -> QueueIter<'a> {
        QueueIter {
            rest: self.queues,
            left: self.nqueues,
        }
    }
}

/// Iterator over the queue names of a message record.
pub struct QueueIter<'a> {
    rest: &'a [u8],
    left: u8,
}

impl<'a> Iterator for QueueIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut r = Reader(self.rest);
        let q = r.bytes()?;
        self.rest = r.0;
        Some(q)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// The parts of a message that travel to other shards.
pub struct MsgParts<'a> {
    pub subject: &'a [u8],
    pub reply: &'a [u8],
    pub header_len: Option<usize>,
    pub data: &'a [u8],
    /// The subject subscribers see (empty: `subject`).
    pub shown: &'a [u8],
}

/// Append a message record.
pub fn put_msg(
    out: &mut Vec<u8>,
    flags: u8,
    hops: u8,
    account: u32,
    m: &MsgParts<'_>,
    raw_sizes: Option<(&[u8], &[u8])>,
    queues: &[&[u8]],
) {
    put_msg_as(out, flags & !flags::BLOB, hops, account, m, raw_sizes, queues, None)
}

/// Append a message record whose data travels in a blob of its own, with `room` bytes
/// free in front of it for the receiver's `MSG` line (see the module map). The blob is
/// built in `blob` (a buffer to reuse, or a new empty one).
pub fn put_msg_blob(
    out: &mut Batch,
    flags: u8,
    account: u32,
    m: &MsgParts<'_>,
    raw_sizes: Option<(&[u8], &[u8])>,
    room: usize,
    mut blob: Vec<u8>,
) {
    blob.clear();
    blob.reserve_exact(room + m.data.len() + 2);
    blob.resize(room, 0);
    blob.extend_from_slice(m.data);
    out.blob_bytes += blob.capacity();
    out.blobs.push(blob);
    put_msg_as(
        &mut out.records,
        flags | flags::BLOB,
        0,
        account,
        m,
        raw_sizes,
        &[],
        Some(room as u32),
    );
}

#[allow(clippy::too_many_arguments)]
fn put_msg_as(
    out: &mut Vec<u8>,
    flags: u8,
    hops: u8,
    account: u32,
    m: &MsgParts<'_>,
    raw_sizes: Option<(&[u8], &[u8])>,
    queues: &[&[u8]],
    blob_head: Option<u32>,
) {
    let flags = if raw_sizes.is_some() {
        flags | flags::RAW_SIZES
    } else {
        flags & !flags::RAW_SIZES
    };
    let flags = if m.shown.is_empty() {
        flags & !flags::SHOWN
    } else {
        flags | flags::SHOWN
    };
    let inline = if blob_head.is_some() { 0 } else { m.data.len() };
    out.reserve(32 + m.subject.len() + m.reply.len() + inline);
    out.push(TAG_MSG);
    out.push(flags);
    out.push(hops);
    out.extend_from_slice(&account.to_le_bytes());
    put_bytes(out, m.subject);
    put_bytes(out, m.reply);
    let h = m.header_len.map_or(NO_HEADER, |h| h as u32);
    out.extend_from_slice(&h.to_le_bytes());
    match blob_head {
        Some(head) => out.extend_from_slice(&head.to_le_bytes()),
        None => put_bytes(out, m.data),
    }
    if let Some((size, hdr)) = raw_sizes {
        put_bytes(out, size);
        put_bytes(out, hdr);
    }
    if !m.shown.is_empty() {
        put_bytes(out, m.shown);
    }
    out.push(queues.len().min(255) as u8);
    for q in queues.iter().take(255) {
        put_bytes(out, q);
    }
}

/// Append the trace tag of the message record just appended with flag `TRACE`.
pub fn put_trace_tag(out: &mut Vec<u8>, t: &TraceTag) {
    out.extend_from_slice(&t.id.to_le_bytes());
    out.extend_from_slice(&t.leg.to_le_bytes());
    out.extend_from_slice(&t.ingress.to_le_bytes());
    out.push(u8::from(t.only));
    let (exporter, index) = t.link.unwrap_or((u32::MAX, u32::MAX));
    out.extend_from_slice(&exporter.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
}

/// Append one shard's part of a trace.
pub fn put_trace_part(out: &mut Vec<u8>, id: u64, leg: u64, children: &[u64], steps: &[u8]) {
    out.push(TAG_TRACE_PART);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&leg.to_le_bytes());
    let n = children.len().min(usize::from(u16::MAX));
    out.extend_from_slice(&(n as u16).to_le_bytes());
    for c in children.iter().take(n) {
        out.extend_from_slice(&c.to_le_bytes());
    }
    put_bytes(out, steps);
}

/// Append an interest change.
pub fn put_interest(out: &mut Vec<u8>, account: u32, subject: &[u8], queue: Option<&[u8]>, delta: i32) {
    out.push(TAG_INTEREST);
    out.extend_from_slice(&account.to_le_bytes());
    put_bytes(out, subject);
    put_bytes(out, queue.unwrap_or_default());
    out.extend_from_slice(&delta.to_le_bytes());
}

/// Append a responder's details ahead of its tracked response.
pub fn put_resp_info(out: &mut Vec<u8>, account: u32, subject: &[u8], info: &[u8]) {
    out.push(TAG_RESP_INFO);
    out.extend_from_slice(&account.to_le_bytes());
    put_bytes(out, subject);
    put_bytes(out, info);
}

/// Append a barrier (`ack = false`) or its acknowledgement.
pub fn put_barrier(out: &mut Vec<u8>, id: u64, ack: bool) {
    out.push(if ack { TAG_BARRIER_ACK } else { TAG_BARRIER });
    out.extend_from_slice(&id.to_le_bytes());
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// Decode the records of a batch in order.
pub fn records(batch: &[u8]) -> Records<'_> {
    Records(Reader(batch))
}

/// Iterator over a batch's records.
pub struct Records<'a>(Reader<'a>);

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        let r = &mut self.0;
        match r.u8()? {
            TAG_MSG => {
                let flags = r.u8()?;
                let hops = r.u8()?;
                let account = r.u32()?;
                let subject = r.bytes()?;
                let reply = r.bytes()?;
                let h = r.u32()?;
                let (data, blob_head) = if flags & flags::BLOB != 0 {
                    (&[][..], Some(r.u32()?))
                } else {
                    (r.bytes()?, None)
                };
                let raw_sizes = if flags & flags::RAW_SIZES != 0 {
                    Some((r.bytes()?, r.bytes()?))
                } else {
                    None
                };
                let shown = if flags & flags::SHOWN != 0 { r.bytes()? } else { &[] };
                let nqueues = r.u8()?;
                let start = r.0;
                for _ in 0..nqueues {
                    r.bytes()?;
                }
                let used = start.len() - r.0.len();
                let trace = if flags & flags::TRACE != 0 {
                    let (id, leg, ingress) = (r.u64()?, r.u64()?, r.u32()?);
                    let only = r.u8()? != 0;
                    let (exporter, index) = (r.u32()?, r.u32()?);
                    Some(TraceTag {
                        id,
                        leg,
                        ingress,
                        only,
                        link: (exporter != u32::MAX).then_some((exporter, index)),
                    })
                } else {
                    None
                };
                Some(Record::Msg(MsgRecord {
                    flags,
                    hops,
                    account,
                    subject,
                    reply,
                    header_len: (h != NO_HEADER).then_some(h),
                    data,
                    blob_head,
                    raw_sizes,
                    shown,
                    queues: start.get(..used)?,
                    nqueues,
                    trace,
                }))
            }
            super::mesh_run::TAG_RUN => {
                let flags = r.u8()?;
                let account = r.u32()?;
                let subject = r.bytes()?;
                let reply = r.bytes()?;
                let queue = r.bytes()?;
                let payloads = r.bytes()?;
                let shape = super::mesh_run::Shape {
                    flags,
                    account,
                    subject,
                    reply,
                    queue,
                };
                Some(Record::Run(super::mesh_run::RunRecord::new(shape, payloads)))
            }
            TAG_INTEREST => {
                let account = r.u32()?;
                let subject = r.bytes()?;
                let q = r.bytes()?;
                let delta = i32::from_le_bytes(r.take(4)?.try_into().ok()?);
                Some(Record::Interest {
                    account,
                    subject,
                    queue: (!q.is_empty()).then_some(q),
                    delta,
                })
            }
            TAG_BARRIER => Some(Record::Barrier(r.u64()?)),
            TAG_BARRIER_ACK => Some(Record::BarrierAck(r.u64()?)),
            TAG_RESP_INFO => {
                let account = r.u32()?;
                let subject = r.bytes()?;
                let info = r.bytes()?;
                Some(Record::RespInfo { account, subject, info })
            }
            TAG_TRACE_PART => {
                let id = r.u64()?;
                let leg = r.u64()?;
                let n = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
                let mut children = Vec::new();
                for _ in 0..n {
                    children.push(r.u64()?);
                }
                let steps = r.bytes()?;
                Some(Record::TracePart {
                    id,
                    leg,
                    children,
                    steps,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn view<'a>(subject: &'a [u8], reply: &'a [u8], header_len: Option<usize>, data: &'a [u8]) -> MsgParts<'a> {
        MsgParts {
            subject,
            reply,
            header_len,
            data,
            shown: b"",
        }
    }

    #[test]
    fn roundtrip_in_order() {
        let mut b = Vec::new();
        put_interest(&mut b, 0, b"foo.*", Some(b"q"), 1);
        let m = view(
            b"foo.bar",
            b"r",
            Some(12),
            b"NATS/1.0

hi",
        );
        put_msg(
            &mut b,
            flags::QUEUE_ONLY,
            2,
            7,
            &m,
            Some((b"014", b"12")),
            &[b"q", b"w"],
        );
        put_barrier(&mut b, 42, false);
        put_barrier(&mut b, 42, true);
        put_msg(&mut b, 0, 0, 0, &view(b"x", b"", None, b""), None, &[]);
        let recs: Vec<_> = records(&b).collect();
        assert_eq!(recs.len(), 5);
        assert_eq!(
            recs[0],
            Record::Interest {
                account: 0,
                subject: b"foo.*",
                queue: Some(b"q"),
                delta: 1
            }
        );
        match &recs[1] {
            Record::Msg(m) => {
                assert_eq!(
                    (m.flags, m.hops, m.account),
                    (flags::QUEUE_ONLY | flags::RAW_SIZES, 2, 7)
                );
                assert_eq!(m.raw_sizes, Some((&b"014"[..], &b"12"[..])));
                assert_eq!(m.subject, b"foo.bar");
                assert_eq!(m.reply, b"r");
                assert_eq!(m.header_len, Some(12));
                assert_eq!(m.queues().collect::<Vec<_>>(), vec![&b"q"[..], b"w"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(recs[2], Record::Barrier(42));
        assert_eq!(recs[3], Record::BarrierAck(42));
        match &recs[4] {
            Record::Msg(m) => assert_eq!((m.header_len, m.queues().count()), (None, 0)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn blob_records_point_into_their_blobs_in_order() {
        let mut b = Batch::default();
        let big = vec![5u8; 40_000];
        put_msg(&mut b.records, 0, 0, 1, &view(b"small", b"", None, b"abc"), None, &[]);
        put_msg_blob(
            &mut b,
            flags::INTERNAL,
            3,
            &view(b"big.one", b"r.1", Some(10), &big),
            None,
            48,
            Vec::new(),
        );
        // A reused buffer: what it held before is gone.
        put_msg_blob(
            &mut b,
            0,
            3,
            &view(b"big.two", b"", None, b"xyz"),
            Some((b"03", b"")),
            20,
            vec![9u8; 100],
        );
        assert_eq!(&b.blobs[1][20..], b"xyz");
        assert_eq!(b.blobs.len(), 2);
        assert!(b.len() >= 40_000 + 48 + 3 + 20, "blob bytes count toward the batch");
        assert_eq!(&b.blobs[0][48..], &big[..]);
        assert!(b.blobs[0].capacity() >= 48 + big.len() + 2, "room for the CRLF after");
        let recs: Vec<_> = records(&b.records).collect();
        let msgs: Vec<&MsgRecord<'_>> = recs
            .iter()
            .map(|r| match r {
                Record::Msg(m) => m,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!((msgs[0].data, msgs[0].blob_head), (&b"abc"[..], None));
        assert_eq!((msgs[1].subject, msgs[1].reply), (&b"big.one"[..], &b"r.1"[..]));
        assert_eq!(
            (msgs[1].data, msgs[1].blob_head, msgs[1].header_len),
            (&b""[..], Some(48), Some(10))
        );
        assert_eq!(msgs[1].flags, flags::INTERNAL | flags::BLOB);
        assert_eq!(msgs[2].blob_head, Some(20));
        assert_eq!(msgs[2].raw_sizes, Some((&b"03"[..], &b""[..])));
        // A plain put never sets the flag, whatever the caller passed.
        let mut plain = Vec::new();
        put_msg(&mut plain, flags::BLOB, 0, 0, &view(b"s", b"", None, b"d"), None, &[]);
        match records(&plain).next() {
            Some(Record::Msg(m)) => assert_eq!((m.flags, m.data, m.blob_head), (0, &b"d"[..], None)),
            other => panic!("{other:?}"),
        }
        // Merging keeps records and blobs in step.
        let mut later = Batch::default();
        put_msg_blob(
            &mut later,
            0,
            3,
            &view(b"big.three", b"", None, b"q"),
            None,
            8,
            Vec::new(),
        );
        b.append(&mut later);
        assert!(later.is_empty() && later.blob_bytes == 0);
        assert_eq!((records(&b.records).count(), b.blobs.len()), (4, 3));
        // Truncated in the blob head: decoding stops.
        let cut = b.records.len() - 3;
        assert!(records(&b.records[..cut]).count() < 4);
    }

    #[test]
    fn trace_tags_and_parts_roundtrip() {
        let mut b = Vec::new();
        let tag = TraceTag {
            id: (3 << 48) | 9,
            leg: 77,
            ingress: 4,
            only: true,
            link: Some((2, 5)),
        };
        put_msg(
            &mut b,
            flags::TRACE,
            1,
            4,
            &view(b"s", b"", Some(4), b"h\r\n\r\n"),
            None,
            &[b"q"],
        );
        put_trace_tag(&mut b, &tag);
        put_msg(&mut b, 0, 0, 4, &view(b"plain", b"", None, b"x"), None, &[]);
        put_trace_part(&mut b, tag.id, 77, &[78, 79], b"{\"type\":\"eg\"}");
        let recs: Vec<_> = records(&b).collect();
        assert_eq!(recs.len(), 3);
        match &recs[0] {
            Record::Msg(m) => {
                assert_eq!(m.trace, Some(tag));
                assert_eq!(m.queues().collect::<Vec<_>>(), vec![&b"q"[..]]);
            }
            other => panic!("{other:?}"),
        }
        match &recs[1] {
            Record::Msg(m) => assert_eq!((m.subject, m.trace), (&b"plain"[..], None)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            recs[2],
            Record::TracePart {
                id: tag.id,
                leg: 77,
                children: vec![78, 79],
                steps: b"{\"type\":\"eg\"}",
            }
        );
        for cut in 0..b.len() {
            let _ = records(&b[..cut]).count();
        }
    }

    #[test]
    fn truncated_batches_stop_cleanly() {
        let mut b = Vec::new();
        put_msg(
            &mut b,
            0,
            0,
            0,
            &view(b"subject", b"reply", None, b"payload"),
            None,
            &[b"q"],
        );
        for cut in 0..b.len() {
            assert!(records(&b[..cut]).next().is_none(), "cut at {cut}");
        }
    }
}
