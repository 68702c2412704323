//! A connection's outbound buffer: bytes queued for the socket, bounded by `max_pending`
//! (past it the connection is a slow consumer). The driver writes from [`OutBuf::pending`]
//! and reports progress with [`OutBuf::consume`]; nothing is copied on the way out.

use std::time::Instant;

/// Capacity kept after a full flush; larger buffers are released so idle connections
/// stay small.
const KEEP_CAPACITY: usize = 64 * 1024;

#[derive(Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    head: usize,
    /// When the oldest unwritten byte was queued without any write progress since.
    stalled_since: Option<Instant>,
}

impl OutBuf {
    /// Bytes queued and not yet written.
    pub fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes to write next.
    pub fn pending(&self) -> &[u8] {
        self.buf.get(self.head..).unwrap_or_default()
    }

    /// Space to append to. Marks the start of a stall if the buffer was empty.
    pub fn writer(&mut self, now: Instant) -> &mut Vec<u8> {
        if self.is_empty() {
            self.stalled_since = Some(now);
        }
        &mut self.buf
    }

    /// Append without a clock (the stall timer starts at the next write attempt).
    pub fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// `n` bytes were written to the socket.
    pub fn consume(&mut self, n: usize, now: Instant) {
        self.head = (self.head + n).min(self.buf.len());
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
            self.stalled_since = None;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            }
        } else {
            if n > 0 {
                self.stalled_since = Some(now);
            }
            // Reclaim the written prefix once it dominates the buffer.
            if self.head > KEEP_CAPACITY && self.head * 2 > self.buf.len() {
                self.buf.drain(..self.head);
                self.head = 0;
            }
        }
    }

    /// Drop everything queued (a connection closed without flushing).
    pub fn clear(&mut self) {
        self.buf = Vec::new();
        self.head = 0;
        self.stalled_since = None;
    }

    /// Since when output has been waiting without progress.
    pub fn stalled_since(&self) -> Option<Instant> {
        if self.is_empty() {
            None
        } else {
            self.stalled_since
        }
    }

    /// Bytes held in memory (for accounting).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consume_and_release() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        o.writer(now).extend_from_slice(b"hello world");
        assert_eq!(o.pending(), b"hello world");
        o.consume(6, now);
        assert_eq!(o.pending(), b"world");
        assert!(o.stalled_since().is_some());
        o.consume(5, now);
        assert!(o.is_empty());
        assert!(o.stalled_since().is_none());
        o.writer(now).extend_from_slice(&vec![0u8; 200_000]);
        o.consume(200_000, now);
        assert_eq!(o.capacity(), 0, "large buffers are released when drained");
    }
}
