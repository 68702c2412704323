//! PubAcks waiting for their message's write to be durable, in sequence order.
//!
//! Every acknowledged publish waits here, so the queue keeps no allocation per entry: the
//! reply subjects and bodies are appended to one byte buffer and an entry holds only the
//! sequence and the two lengths. The buffer is emptied whenever the queue is, and its
//! released front is dropped once it is over half of it.

use std::collections::VecDeque;

/// One waiting PubAck: its sequence and the lengths of its reply subject and body, which
/// follow each other in [`AckQueue::bytes`].
struct Entry {
    seq: u64,
    reply: u32,
    body: u32,
}

/// The waiting PubAcks of one stream.
#[derive(Default)]
pub struct AckQueue {
    entries: VecDeque<Entry>,
    bytes: Vec<u8>,
    /// Where the first waiting entry's bytes start (the bytes before were released).
    head: usize,
}

impl AckQueue {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queue the PubAck for `seq` to `reply`; `body` appends the body to the buffer it is
    /// given (and may edit only what it appended).
    pub fn push_with(&mut self, seq: u64, reply: &[u8], body: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(reply);
        let mid = self.bytes.len();
        body(&mut self.bytes);
        let (Ok(r), Ok(b)) = (
            u32::try_from(mid - start),
            u32::try_from(self.bytes.len().saturating_sub(mid)),
        ) else {
            // Not a PubAck any client could send or read: drop it rather than misframe.
            self.bytes.truncate(start);
            return;
        };
        self.entries.push_back(Entry { seq, reply: r, body: b });
    }

    /// Queue a PubAck with a body already built.
    pub fn push(&mut self, seq: u64, reply: &[u8], body: &[u8]) {
        self.push_with(seq, reply, |out| out.extend_from_slice(body));
    }

    /// How many PubAcks from the front have sequences at or below `durable`.
    pub fn ready(&self, durable: u64) -> usize {
        self.entries.iter().take_while(|e| e.seq <= durable).count()
    }

    /// Hand the first `n` PubAcks (reply, body) to `send` and forget them.
    pub fn release(&mut self, n: usize, mut send: impl FnMut(&[u8], &[u8])) {
        for _ in 0..n {
            let Some(e) = self.entries.pop_front() else { break };
            let mid = self.head + e.reply as usize;
            let end = mid + e.body as usize;
            if let (Some(reply), Some(body)) = (self.bytes.get(self.head..mid), self.bytes.get(mid..end)) {
                send(reply, body);
            }
            self.head = end;
        }
        if self.entries.is_empty() {
            self.bytes.clear();
            self.head = 0;
        } else if self.head > self.bytes.len() / 2 {
            self.bytes.drain(..self.head);
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut AckQueue, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        q.release(n, |r, b| out.push((r.to_vec(), b.to_vec())));
        out
    }

    #[test]
    fn acks_leave_in_order_once_durable() {
        let mut q = AckQueue::default();
        q.push(1, b"r1", b"{\"seq\":1}");
        q.push_with(2, b"", |out| out.extend_from_slice(b"{\"seq\":2}"));
        q.push_with(3, b"r3", |out| {
            out.extend_from_slice(b"{\"seq\":3}");
            out.pop();
            out.extend_from_slice(b",\"x\":1}");
        });
        assert_eq!(q.ready(0), 0);
        assert_eq!(q.ready(2), 2);
        assert_eq!(drain(&mut q, 1), vec![(b"r1".to_vec(), b"{\"seq\":1}".to_vec())]);
        // More arrive while the rest wait; the released front is dropped as it grows.
        for s in 4..200u64 {
            q.push(s, format!("r{s}").as_bytes(), format!("{{\"seq\":{s}}}").as_bytes());
        }
        assert_eq!(q.ready(u64::MAX), 198);
        let out = drain(&mut q, 2);
        assert_eq!(out[0], (b"".to_vec(), b"{\"seq\":2}".to_vec()));
        assert_eq!(out[1], (b"r3".to_vec(), b"{\"seq\":3,\"x\":1}".to_vec()));
        for s in 4..200u64 {
            let got = drain(&mut q, 1);
            assert_eq!(
                got,
                vec![(format!("r{s}").into_bytes(), format!("{{\"seq\":{s}}}").into_bytes())]
            );
            assert!(q.head <= q.bytes.len());
        }
        assert!(q.is_empty());
        assert!(q.bytes.is_empty());
        // Asking for more than there is releases what there is.
        q.push(7, b"r", b"b");
        assert_eq!(drain(&mut q, 5).len(), 1);
    }
}
