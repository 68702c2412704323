//! Runs: consecutive plain messages for one shard that share account, subject, reply,
//! flags and the queue group they were assigned to (if any), sent as one mesh record (tag 7
//! of [`mesh_codec`](super::mesh_codec)) that names them once and then carries each
//! payload. A publisher streaming on one subject to a subscriber on another shard costs the
//! receiver one record and one interest lookup per run instead of per message, and the
//! sender writes only a length and the payload.
//!
//! | tag | record | fields (little endian) |
//! |---|---|---|
//! | 7 | run | flags u8, account u32, subject, reply, queue (empty: none), payload bytes u32, then the payloads, each a u32 length and the bytes |
//!
//! Plain means: no headers, plain size text, at most one queue name, no trace, not a
//! blob, not a service response, not a queue re-pick (`QUEUE_ONLY`); everything else stays
//! a message record. The sender extends the run that ends its staging batch ([`RunMark`])
//! when the next message has the same shape, and starts a new one otherwise; any other
//! record appended after it ends it.
//!
//! Ownership: a `RunMark` belongs to the shard staging the batch it points into.

use super::subject::same;

pub(super) const TAG_RUN: u8 = 7;

/// Runs end at this many payload bytes (a batch is handed over well before).
const MAX_RUN_BYTES: usize = 1 << 30;

/// Where the run that may be extended sits in a staging batch.
#[derive(Debug, Clone, Copy)]
pub struct RunMark {
    flags: u8,
    account: u32,
    subject_at: usize,
    subject_len: usize,
    reply_at: usize,
    reply_len: usize,
    queue_at: usize,
    queue_len: usize,
    /// Where the payload byte count is.
    bytes_at: usize,
    /// The batch's length after the run: extendable only while nothing followed it.
    end: usize,
}

/// The shape of the messages of one run: all but the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape<'a> {
    pub flags: u8,
    pub account: u32,
    pub subject: &'a [u8],
    pub reply: &'a [u8],
    /// The queue group the messages were assigned to on the receiving shard (empty: none).
    pub queue: &'a [u8],
}

/// Append a plain message to `out`: to the run `mark` points at if it ends `out` and has
/// the message's shape, else as a new run (then `mark` points at that one).
pub fn put_run(out: &mut Vec<u8>, mark: &mut Option<RunMark>, shape: &Shape<'_>, data: &[u8]) {
    if let Some(mk) = mark.as_mut() {
        if extends(out, mk, shape) {
            put_payload(out, mk, data);
            return;
        }
    }
    let Shape {
        flags,
        account,
        subject,
        reply,
        queue,
    } = *shape;
    out.reserve(26 + subject.len() + reply.len() + queue.len() + data.len());
    out.push(TAG_RUN);
    out.push(flags);
    out.extend_from_slice(&account.to_le_bytes());
    out.extend_from_slice(&(subject.len() as u32).to_le_bytes());
    let subject_at = out.len();
    out.extend_from_slice(subject);
    out.extend_from_slice(&(reply.len() as u32).to_le_bytes());
    let reply_at = out.len();
    out.extend_from_slice(reply);
    out.extend_from_slice(&(queue.len() as u32).to_le_bytes());
    let queue_at = out.len();
    out.extend_from_slice(queue);
    let bytes_at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mk = mark.insert(RunMark {
        flags,
        account,
        subject_at,
        subject_len: subject.len(),
        reply_at,
        reply_len: reply.len(),
        queue_at,
        queue_len: queue.len(),
        bytes_at,
        end: out.len(),
    });
    put_payload(out, mk, data);
}

/// The run `mk` ends `out` and has this shape.
#[inline]
fn extends(out: &[u8], mk: &RunMark, sh: &Shape<'_>) -> bool {
    let field =
        |at: usize, len: usize, want: &[u8]| len == want.len() && out.get(at..at + len).is_some_and(|s| same(s, want));
    mk.end == out.len()
        && mk.flags == sh.flags
        && mk.account == sh.account
        && mk.end - mk.bytes_at + 4 + sh.subject.len() + sh.reply.len() <= MAX_RUN_BYTES
        && field(mk.subject_at, mk.subject_len, sh.subject)
        && field(mk.reply_at, mk.reply_len, sh.reply)
        && field(mk.queue_at, mk.queue_len, sh.queue)
}

fn put_payload(out: &mut Vec<u8>, mk: &mut RunMark, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    mk.end = out.len();
    let total = (mk.end - mk.bytes_at - 4) as u32;
    if let Some(b) = out.get_mut(mk.bytes_at..mk.bytes_at + 4) {
        b.copy_from_slice(&total.to_le_bytes());
    }
}

/// A decoded run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord<'a> {
    pub shape: Shape<'a>,
    payloads: &'a [u8],
}

impl<'a> RunRecord<'a> {
    pub(super) fn new(shape: Shape<'a>, payloads: &'a [u8]) -> Self {
        RunRecord { shape, payloads }
    }

    /// The payloads in order (a malformed rest ends the iteration).
    pub fn payloads(&self) -> Payloads<'a> {
        Payloads(self.payloads)
    }
}

/// Iterator over a run's payloads.
#[derive(Clone)]
pub struct Payloads<'a>(&'a [u8]);

impl<'a> Iterator for Payloads<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.0.split_first_chunk::<4>()?;
        let n = u32::from_le_bytes(*len) as usize;
        if rest.len() < n {
            self.0 = &[];
            return None;
        }
        let (data, rest) = rest.split_at(n);
        self.0 = rest;
        Some(data)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::core::mesh_codec::{put_barrier, records, Record};

    fn shape<'a>(flags: u8, account: u32, subject: &'a [u8], reply: &'a [u8], queue: &'a [u8]) -> Shape<'a> {
        Shape {
            flags,
            account,
            subject,
            reply,
            queue,
        }
    }

    fn runs(b: &[u8]) -> Vec<(u32, Vec<u8>, Vec<Vec<u8>>)> {
        records(b)
            .filter_map(|r| match r {
                Record::Run(r) => Some((
                    r.shape.account,
                    r.shape.subject.to_vec(),
                    r.payloads().map(<[u8]>::to_vec).collect(),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn same_shape_extends_the_run_and_anything_else_starts_one() {
        let mut b = Vec::new();
        let mut mark = None;
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"a");
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"");
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"ccc");
        // Another subject, account, reply or flags: a new run.
        put_run(&mut b, &mut mark, &shape(0, 1, b"fox", b"", b""), b"d");
        put_run(&mut b, &mut mark, &shape(0, 2, b"fox", b"", b""), b"e");
        put_run(&mut b, &mut mark, &shape(0, 2, b"fox", b"r", b""), b"f");
        put_run(&mut b, &mut mark, &shape(8, 2, b"fox", b"r", b""), b"g");
        // A record in between ends the run even for the same shape.
        put_barrier(&mut b, 9, false);
        put_run(&mut b, &mut mark, &shape(8, 2, b"fox", b"r", b""), b"h");
        let got = runs(&b);
        let want: Vec<(u32, Vec<u8>, Vec<Vec<u8>>)> = vec![
            (1, b"foo".to_vec(), vec![b"a".to_vec(), b"".to_vec(), b"ccc".to_vec()]),
            (1, b"fox".to_vec(), vec![b"d".to_vec()]),
            (2, b"fox".to_vec(), vec![b"e".to_vec()]),
            (2, b"fox".to_vec(), vec![b"f".to_vec()]),
            (2, b"fox".to_vec(), vec![b"g".to_vec()]),
            (2, b"fox".to_vec(), vec![b"h".to_vec()]),
        ];
        assert_eq!(got, want);
        assert_eq!(records(&b).count(), 7, "six runs and the barrier, in order");
        match records(&b).nth(4).unwrap() {
            Record::Run(r) => assert_eq!((r.shape.flags, r.shape.reply), (8, &b"r"[..])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn runs_keep_their_queue_name() {
        let mut b = Vec::new();
        let mut mark = None;
        for (q, d) in [
            (&b"q1"[..], &b"a"[..]),
            (b"q1", b"b"),
            (b"q2", b"c"),
            (b"", b"d"),
            (b"", b"e"),
        ] {
            put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"r", q), d);
        }
        let got: Vec<(Vec<u8>, Vec<Vec<u8>>)> = records(&b)
            .filter_map(|r| match r {
                Record::Run(r) => Some((r.shape.queue.to_vec(), r.payloads().map(<[u8]>::to_vec).collect())),
                _ => None,
            })
            .collect();
        let want: Vec<(Vec<u8>, Vec<Vec<u8>>)> = vec![
            (b"q1".to_vec(), vec![b"a".to_vec(), b"b".to_vec()]),
            (b"q2".to_vec(), vec![b"c".to_vec()]),
            (b"".to_vec(), vec![b"d".to_vec(), b"e".to_vec()]),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_mark_into_a_batch_that_was_replaced_is_not_extended() {
        let mut b = Vec::new();
        let mut mark = None;
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"a");
        // The batch went out and a new one holds something else of the same length.
        let len = b.len();
        b.clear();
        b.resize(len, 0);
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"b");
        let tail = &b[len..];
        assert_eq!(runs(tail), vec![(1, b"foo".to_vec(), vec![b"b".to_vec()])]);
    }

    #[test]
    fn truncated_runs_end_decoding_without_panicking() {
        let mut b = Vec::new();
        let mut mark = None;
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"abc");
        put_run(&mut b, &mut mark, &shape(0, 1, b"foo", b"", b""), b"def");
        for cut in 0..b.len() {
            for r in records(&b[..cut]) {
                if let Record::Run(r) = r {
                    let _ = r.payloads().count();
                }
            }
        }
        // A payload length past the end stops the payloads.
        let mut bad = b.clone();
        let last = bad.len() - 7;
        bad[last..last + 4].copy_from_slice(&100u32.to_le_bytes());
        match records(&bad).next().unwrap() {
            Record::Run(r) => assert_eq!(r.payloads().count(), 1),
            other => panic!("{other:?}"),
        }
    }
}
