//! A connection's outbound buffer: bytes queued for the socket, bounded by `max_pending`
//! (past it the connection is a slow consumer).
//!
//! Bytes are kept in chunks of up to [`CHUNK`] bytes: appends go to the last chunk, the
//! driver writes from the first ([`OutBuf::pending`]) and reports progress with
//! [`OutBuf::consume`]. Written chunks leave the connection at once (into a bounded
//! per-shard pool), so a connection's memory follows what is actually pending (a backlog
//! of 16 MiB holds ~16 MiB, not the high-water mark of one ever-growing vector), and an
//! idle connection keeps at most a small tail (`KEEP_TAIL`).
//!
//! A finished frame can also join as a chunk of its own without being copied
//! ([`OutBuf::push_owned`]): a large message from another shard arrives in a buffer with
//! room for its `MSG` line in front, and that buffer is what goes to the socket.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

/// Full-size chunks kept for reuse per thread (each shard is one thread). Without reuse,
/// glibc returned written-out chunks to the kernel and faulted fresh pages back in: 14% of
/// the CPU of a 1 KiB fan-out. Bounded, so an idle shard holds at most 4 MiB.
const POOL_MAX: usize = 64;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    /// Written-out blobs (see [`OutBuf::push_owned`]) waiting to go back to the shard
    /// that allocated them, with that shard's index, and their bytes in all.
    static SPENT_BLOBS: RefCell<Spent> = const { RefCell::new((Vec::new(), 0)) };
}

/// Spent blobs with their owners' shard indexes, and their bytes in all.
type Spent = (Vec<(u16, Vec<u8>)>, usize);

/// The first bytes of a blob that has been delivered: [`BLOB_TAG`] and the index of the
/// shard that allocated it (u16, little endian), in the room before its `MSG` line.
pub const BLOB_TAG_LEN: usize = 8;
const BLOB_TAG: [u8; 4] = *b"bLoB";
/// Most bytes of spent blobs a shard keeps for their owners between mesh batches.
const SPENT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Mark `blob` as allocated by shard `owner`, for its return once written out.
pub fn tag_blob(blob: &mut [u8], owner: u16) {
    if let Some(tag) = blob.get_mut(..BLOB_TAG_LEN) {
        tag[..4].copy_from_slice(&BLOB_TAG);
        tag[4..6].copy_from_slice(&owner.to_le_bytes());
    }
}

/// The shard a written-out buffer goes back to, if it is a tagged blob. (A buffer that
/// merely starts with the same bytes is sent back as well: it is plain memory, and the
/// shard that gets it uses it as a blob or drops it.)
fn blob_owner(v: &[u8]) -> Option<u16> {
    let tag = v.get(..BLOB_TAG_LEN)?;
    (tag[..4] == BLOB_TAG).then(|| u16::from_le_bytes([tag[4], tag[5]]))
}

/// Move the spent blobs that belong to shard `owner` into `out`, to travel back with
/// the next recycled mesh batch (so the shard that filled them fills them again, rather
/// than this shard freeing memory of the other's allocator arena).
pub fn take_spent_blobs(owner: u16, out: &mut Vec<Vec<u8>>) {
    SPENT_BLOBS.with(|s| {
        let (list, bytes) = &mut *s.borrow_mut();
        if list.is_empty() {
            return;
        }
        let mut i = 0;
        while i < list.len() {
            if list[i].0 == owner {
                let (_, b) = list.swap_remove(i);
                *bytes -= b.capacity();
                out.push(b);
            } else {
                i += 1;
            }
        }
    });
}

/// A chunk of `CHUNK` capacity, reused when possible.
fn take_chunk() -> Vec<u8> {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(CHUNK))
}

/// Give a chunk back for reuse: one the driver was lent ([`OutBuf::take_front`]) once
/// its bytes went out. Only full-size chunks are kept.
pub fn recycle_chunk(v: Vec<u8>) {
    give_chunk(v)
}

/// Give a written-out chunk back for reuse (only full-size ones are kept; blobs go back
/// to their shard, see [`take_spent_blobs`]).
fn give_chunk(mut v: Vec<u8>) {
    if v.capacity() != CHUNK {
        if let Some(owner) = blob_owner(&v) {
            SPENT_BLOBS.with(|s| {
                let (list, bytes) = &mut *s.borrow_mut();
                if *bytes + v.capacity() <= SPENT_MAX_BYTES {
                    *bytes += v.capacity();
                    list.push((owner, v));
                }
            });
        }
        return;
    }
    v.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_MAX {
            p.push(v);
        }
    });
}

/// Largest chunk built from small appends (a single larger append gets its own chunk).
pub const CHUNK: usize = 64 * 1024;
/// A drained tail larger than this is released rather than kept for the next write.
const KEEP_TAIL: usize = 4 * 1024;

#[derive(Default)]
pub struct OutBuf {
    /// Full chunks, oldest first, each with where its bytes start. The tail (being
    /// appended to) is separate.
    full: VecDeque<(Vec<u8>, usize)>,
    tail: Vec<u8>,
    /// Bytes of the front chunk already written.
    head: usize,
    /// Bytes queued and not yet written.
    len: usize,
    /// Of `len`, the bytes at the front whose chunk was lent to the driver to send from
    /// ([`OutBuf::take_front`]).
    lent: usize,
    /// When output started waiting without any write progress since.
    stalled_since: Option<Instant>,
}

impl OutBuf {
    /// Bytes queued and not yet written.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes to write next (the front chunk; more may follow once it is consumed).
    /// Nothing while a lent chunk is out: its bytes come first.
    pub fn pending(&self) -> &[u8] {
        if self.lent > 0 {
            return &[];
        }
        let front = self.full.front().map_or(&self.tail, |(c, _)| c);
        front.get(self.head..).unwrap_or_default()
    }

    /// Lend the front chunk itself to the driver, when it is a finished one (not the tail
    /// still being appended to): its buffer, and where its unwritten bytes start. The
    /// bytes stay pending until [`OutBuf::consume`] counts them; the buffer is the
    /// driver's (it can send from it without a copy, and gives it back with
    /// [`recycle_chunk`]). `None` while a lent chunk is still out, or when the front is
    /// the tail.
    pub fn take_front(&mut self) -> Option<(Vec<u8>, usize)> {
        if self.lent > 0 {
            return None;
        }
        let (chunk, _) = self.full.pop_front()?;
        let next = self.next_start();
        let off = std::mem::replace(&mut self.head, next);
        self.lent = chunk.len().saturating_sub(off);
        Some((chunk, off))
    }

    /// Where the written part of the chunk that just became the front ends: its start.
    fn next_start(&self) -> usize {
        self.full.front().map_or(0, |&(_, start)| start)
    }

    /// Queue `buf[start..]`, a whole frame, as a chunk of its own: the buffer itself is
    /// sent, not a copy. What was appended before goes first.
    pub fn push_owned(&mut self, buf: Vec<u8>, start: usize, now: Instant) {
        let n = buf.len().saturating_sub(start);
        if n == 0 {
            return;
        }
        if self.len == 0 {
            self.stalled_since = Some(now);
        }
        if !self.tail.is_empty() {
            let t = std::mem::replace(&mut self.tail, take_chunk());
            self.full.push_back((t, 0));
        }
        let front = self.full.is_empty();
        self.full.push_back((buf, start));
        if front {
            // The tail was empty, so nothing of it was written: this is the front now.
            self.head = start;
        }
        self.len += n;
    }

    /// Space to append up to `need` bytes to, as one piece (a frame stays in one chunk
    /// unless it alone is larger than [`CHUNK`]). Marks the start of a stall if empty.
    #[inline]
    pub fn writer_for(&mut self, need: usize, now: Instant) -> &mut Vec<u8> {
        if self.len == 0 {
            self.stalled_since = Some(now);
        }
        if self.tail.capacity() - self.tail.len() < need {
            self.make_room(need);
        }
        // `len` is brought up to date by `commit` after the caller appended.
        &mut self.tail
    }

    /// The tail has no room for `need` more bytes. (Out of line: once per chunk or
    /// growth step, not per frame.)
    /// - A full chunk: continue in a full-size chunk from the pool, unless the frame alone
    ///   is bigger.
    /// - A tail growing past [`KEEP_TAIL`] (a burst to a connection that was idle): it
    ///   moves into a full-size chunk from the pool at once. Grown by doubling, a burst
    ///   of 40 KiB reallocated and copied its tail four more times, and the tail, not of
    ///   the pool's size, was freed when written out: 3 % of a one-subscriber publish.
    /// - A small tail grows as a vector does.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, need: usize) {
        let len = self.tail.len();
        if len > 0 && len + need > CHUNK {
            let next = if need <= CHUNK {
                take_chunk()
            } else {
                Vec::with_capacity(need)
            };
            let t = std::mem::replace(&mut self.tail, next);
            self.full.push_back((t, 0));
        } else if len + need > KEEP_TAIL && len + need <= CHUNK {
            let mut next = take_chunk();
            next.extend_from_slice(&self.tail);
            self.tail = next;
        } else {
            self.tail.reserve(need);
        }
    }

    /// Space to append a small protocol line to.
    pub fn writer(&mut self, now: Instant) -> Appender<'_> {
        Appender::new(self, 256, now)
    }

    /// Space to append one frame of `need` bytes (close estimate) to.
    pub fn frame(&mut self, need: usize, now: Instant) -> Appender<'_> {
        Appender::new(self, need, now)
    }

    /// `n` bytes were written to the socket.
    pub fn consume(&mut self, n: usize, now: Instant) {
        let mut n = n.min(self.len);
        if n > 0 {
            self.stalled_since = Some(now);
        }
        let lent = n.min(self.lent);
        self.lent -= lent;
        self.len -= lent;
        n -= lent;
        while n > 0 {
            let front_len = self.full.front().map_or(self.tail.len(), |(c, _)| c.len());
            let take = front_len.saturating_sub(self.head).min(n);
            self.head += take;
            self.len -= take;
            n -= take;
            if self.head >= front_len {
                match self.full.pop_front() {
                    Some((done, _)) => give_chunk(done),
                    None => self.tail.clear(),
                }
                self.head = self.next_start();
            }
        }
        if self.len == 0 {
            self.stalled_since = None;
            self.head = 0;
            self.tail.clear();
            if self.tail.capacity() > KEEP_TAIL {
                give_chunk(std::mem::take(&mut self.tail));
            }
        }
    }

    /// Drop everything queued (a connection closed without flushing).
    pub fn clear(&mut self) {
        for (c, _) in std::mem::take(&mut self.full) {
            give_chunk(c);
        }
        give_chunk(std::mem::take(&mut self.tail));
        *self = OutBuf::default();
    }

    /// Since when output has been waiting without progress.
    pub fn stalled_since(&self) -> Option<Instant> {
        if self.len == 0 {
            None
        } else {
            self.stalled_since
        }
    }

    /// Bytes held in memory (for accounting).
    pub fn capacity(&self) -> usize {
        self.tail.capacity() + self.full.iter().map(|(c, _)| c.capacity()).sum::<usize>()
    }
}

/// Appends to an [`OutBuf`]; the pending count is updated when it is dropped.
pub struct Appender<'a> {
    buf: &'a mut OutBuf,
    start: usize,
}

impl<'a> Appender<'a> {
    fn new(buf: &'a mut OutBuf, need: usize, now: Instant) -> Self {
        let start = buf.writer_for(need, now).len();
        Appender { buf, start }
    }
}

impl std::ops::Deref for Appender<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.buf.tail
    }
}

impl std::ops::DerefMut for Appender<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf.tail
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        self.buf.len += self.buf.tail.len().saturating_sub(self.start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(o: &mut OutBuf, now: Instant) -> Vec<u8> {
        let mut out = Vec::new();
        while !o.is_empty() {
            let p = o.pending().to_vec();
            out.extend_from_slice(&p);
            o.consume(p.len(), now);
        }
        out
    }

    #[test]
    fn a_lent_chunk_keeps_its_bytes_pending_until_consumed() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        let mut want = Vec::new();
        for i in 0..10_000u32 {
            let frame = format!("MSG s {i} 3\r\nabc\r\n");
            o.frame(frame.len(), now).extend_from_slice(frame.as_bytes());
            want.extend_from_slice(frame.as_bytes());
        }
        // Part of the first chunk already written by a plain write.
        let first = o.pending().len();
        o.consume(10, now);
        let mut out = want[..10].to_vec();
        let total = o.len();
        while !o.is_empty() {
            match o.take_front() {
                Some((chunk, off)) => {
                    assert!(o.pending().is_empty(), "nothing else goes before the lent bytes");
                    assert!(o.take_front().is_none(), "one chunk out at a time");
                    assert_eq!(o.len(), total - (out.len() - 10), "still pending while out");
                    out.extend_from_slice(&chunk[off..]);
                    o.consume(chunk.len() - off, now);
                    recycle_chunk(chunk);
                }
                None => {
                    // The tail: written from the buffer itself.
                    let p = o.pending().to_vec();
                    out.extend_from_slice(&p);
                    o.consume(p.len(), now);
                }
            }
        }
        assert!(first > 10);
        assert_eq!(out, want);
        // Cleared with a chunk out: the driver still owns that buffer; the count is gone.
        for _ in 0..5_000 {
            o.frame(20, now).extend_from_slice(&[b'x'; 20]);
        }
        let (chunk, _) = o.take_front().expect("a finished chunk");
        o.clear();
        assert!(o.is_empty() && o.pending().is_empty());
        assert!(!chunk.is_empty());
    }

    #[test]
    fn consume_and_release() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        o.writer(now).extend_from_slice(b"hello world");
        assert_eq!(o.len(), 11);
        assert_eq!(o.pending(), b"hello world");
        o.consume(6, now);
        assert_eq!(o.pending(), b"world");
        assert!(o.stalled_since().is_some());
        o.consume(5, now);
        assert!(o.is_empty());
        assert!(o.stalled_since().is_none());
        o.frame(200_000, now).extend_from_slice(&vec![0u8; 200_000]);
        o.consume(200_000, now);
        assert_eq!(o.capacity(), 0, "large buffers are released when drained");
    }

    #[test]
    fn chunks_keep_order_and_bound_memory() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        let mut want = Vec::new();
        for i in 0..20_000u32 {
            let frame = format!("MSG s {i} 3\r\nabc\r\n");
            o.frame(frame.len(), now).extend_from_slice(frame.as_bytes());
            want.extend_from_slice(frame.as_bytes());
        }
        assert_eq!(o.len(), want.len());
        assert!(o.capacity() < want.len() + 2 * CHUNK, "no doubling overshoot");
        // Partial writes across chunk boundaries.
        let mut got = Vec::new();
        while !o.is_empty() {
            let p = o.pending();
            let n = p.len().min(7777);
            got.extend_from_slice(&p[..n]);
            o.consume(n, now);
        }
        assert_eq!(got, want);
        assert_eq!(o.capacity(), 0);
    }

    #[test]
    fn a_burst_moves_into_a_pool_chunk_once_past_the_idle_tail() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        // A small exchange keeps a small tail.
        o.writer(now).extend_from_slice(b"PONG\r\n");
        assert!(o.capacity() <= KEEP_TAIL, "{}", o.capacity());
        // Partly written, then a burst: the unwritten bytes stay in order, and the tail
        // is one full-size chunk, not a vector grown by doubling.
        o.consume(2, now);
        let mut want = b"NG\r\n".to_vec();
        for i in 0..1000u32 {
            let frame = format!("MSG foo.bar 1 16\r\n{i:016}\r\n");
            o.frame(frame.len(), now).extend_from_slice(frame.as_bytes());
            want.extend_from_slice(frame.as_bytes());
        }
        assert_eq!(o.capacity(), CHUNK);
        assert_eq!(drain(&mut o, now), want);
        // Written out, the chunk goes back to the pool and the next burst takes it.
        assert_eq!(o.capacity(), 0);
        let pooled = POOL.with(|p| p.borrow().len());
        assert!(pooled > 0);
        o.frame(KEEP_TAIL + 1, now).extend_from_slice(&[b'x'; KEEP_TAIL + 1]);
        assert_eq!(o.capacity(), CHUNK);
        assert_eq!(POOL.with(|p| p.borrow().len()), pooled - 1);
    }

    #[test]
    fn owned_frames_go_out_in_order_from_their_start() {
        let now = Instant::now();
        // Every way an owned frame can meet the rest: first of all, behind a tail that is
        // partly written, behind full chunks, while a chunk is lent, twice in a row.
        for partial in [0usize, 3] {
            let mut o = OutBuf::default();
            let mut want = Vec::new();
            let owned = |tag: u8, n: usize| {
                let mut b = vec![0xEE; 7];
                b.extend(std::iter::repeat_n(tag, n));
                b
            };
            o.push_owned(owned(1, 100), 7, now);
            want.extend(std::iter::repeat_n(1, 100));
            assert_eq!(o.len(), 100);
            assert!(o.stalled_since().is_some());
            o.writer(now).extend_from_slice(b"PING\r\n");
            want.extend_from_slice(b"PING\r\n");
            let mut out = Vec::new();
            if partial > 0 {
                out.extend_from_slice(&o.pending()[..partial]);
                o.consume(partial, now);
            }
            for i in 0..5_000u32 {
                let f = format!("MSG s {i} 3\r\nabc\r\n");
                o.frame(f.len(), now).extend_from_slice(f.as_bytes());
                want.extend_from_slice(f.as_bytes());
            }
            o.push_owned(owned(2, 70_000), 7, now);
            o.push_owned(owned(3, 10), 7, now);
            o.push_owned(owned(4, 0), 7, now);
            want.extend(std::iter::repeat_n(2, 70_000));
            want.extend(std::iter::repeat_n(3, 10));
            o.writer(now).extend_from_slice(b"+OK\r\n");
            want.extend_from_slice(b"+OK\r\n");
            assert_eq!(o.len(), want.len() - out.len());
            // Alternate lent chunks and small plain writes.
            let mut k = 0;
            while !o.is_empty() {
                k += 1;
                if k % 2 == 0 {
                    if let Some((chunk, off)) = o.take_front() {
                        assert!(o.pending().is_empty());
                        out.extend_from_slice(&chunk[off..]);
                        o.consume(chunk.len() - off, now);
                        continue;
                    }
                }
                let p = o.pending();
                let n = p.len().min(4_000);
                out.extend_from_slice(&p[..n]);
                o.consume(n, now);
            }
            assert_eq!(out.len(), want.len());
            assert!(out == want, "bytes out of order (partial {partial})");
            assert!(o.stalled_since().is_none());
        }
    }

    #[test]
    fn an_owned_frame_behind_a_lent_chunk_waits_for_it() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        for _ in 0..4_000 {
            o.frame(20, now).extend_from_slice(&[b'x'; 20]);
        }
        let (chunk, off) = o.take_front().expect("a finished chunk");
        // The rest of the tail, then the owned frame.
        let rest = o.len() - (chunk.len() - off);
        o.push_owned(b"HDRpayload".to_vec(), 3, now);
        assert!(o.pending().is_empty(), "the lent bytes go first");
        o.consume(chunk.len() - off, now);
        assert_eq!(o.pending().len(), rest);
        o.consume(rest, now);
        assert_eq!(o.pending(), b"payload");
        o.consume(7, now);
        assert!(o.is_empty());
        o.clear();
        assert_eq!(o.capacity(), 0);
    }

    #[test]
    fn a_big_frame_gets_its_own_chunk() {
        let now = Instant::now();
        let mut o = OutBuf::default();
        o.writer(now).extend_from_slice(b"PONG\r\n");
        let big = vec![7u8; 3 * CHUNK];
        o.frame(big.len(), now).extend_from_slice(&big);
        o.writer(now).extend_from_slice(b"+OK\r\n");
        let mut want = b"PONG\r\n".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"+OK\r\n");
        assert_eq!(drain(&mut o, now), want);
    }
}
