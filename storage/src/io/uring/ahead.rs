//! Read-ahead for in-order readers: when a store misses its chunk cache on the chunk right
//! after its previous miss in the same file, the next [`DEPTH`] chunks are read into
//! buffers of their own in the background, so the next misses find them arrived (or on
//! their way) instead of waiting for the device; once fewer than half of them are left,
//! the rest are read again, together. A consumer delivering a stream in order otherwise
//! stopped once per 64 KiB for a synchronous device read.
//!
//! A read-ahead's result holds what the disk held when the device served it, with the
//! bytes of writes that were in flight when it started laid over them (as for a
//! synchronous read); a write started afterwards, a completion of a write overlapping it,
//! or the file's close marks it stale, and a stale read-ahead is never used. Its buffer
//! lives until its completion is reaped, stale or not.

use super::{lay_over, Uring, WriteBuf, ALIGN, CHUNK};
use crate::io::FileNo;
use io_uring::{opcode, types};
use std::io;
use std::os::fd::AsRawFd;

/// Tag of a read-ahead's completion in `user_data`'s high bits; its slot is in the low ones.
pub(super) const AHEAD_TAG: u64 = 0xfffe_0000_0000_0000;
const SLOT_MASK: u64 = 0xffff;

/// Chunks a store keeps read ahead of an in-order reader (512 KiB).
pub(super) const DEPTH: usize = 8;

/// Whether `user_data` is a read-ahead's, and its slot.
pub(super) fn ahead_slot(user_data: u64) -> Option<usize> {
    (user_data & !SLOT_MASK == AHEAD_TAG).then_some((user_data & SLOT_MASK) as usize)
}

/// A chunk read started before it was asked for.
pub(super) struct Ahead {
    file: FileNo,
    idx: u64,
    buf: WriteBuf,
    /// In-flight writes' bytes over this chunk when the read started, with their offsets.
    overlay: Vec<(u64, Vec<u8>)>,
    /// The completion's result, once reaped.
    result: Option<i32>,
    /// Something wrote to (or closed) its range after it started: never to be used.
    stale: bool,
}

impl Uring {
    /// A miss of chunk `idx` of `file` (served by a read-ahead or synchronously): when the
    /// previous miss was the chunk just before it, keep the next [`DEPTH`] chunks read
    /// ahead. They are started in groups (once fewer than half are left), all in one
    /// submission: the block layer merges adjacent reads submitted together, so the
    /// device is notified once per group instead of once per chunk (on a VM each
    /// notification is an exit to the hypervisor, ~15 % of a consuming shard at 1 KiB
    /// messages when every chunk had its own).
    pub(super) fn after_miss(&mut self, file: FileNo, idx: u64) {
        let in_order = self.last_miss == (file, idx.wrapping_sub(1));
        self.last_miss = (file, idx);
        if !in_order {
            return;
        }
        // Read-aheads the reader went past or away from are of no use any more.
        self.drop_aheads(|a| a.file != file || a.idx <= idx || a.idx > idx + DEPTH as u64);
        let ahead = self.ahead.iter().flatten().filter(|a| !a.stale).count();
        if ahead >= DEPTH / 2 {
            return;
        }
        let mut started = false;
        for next in idx + 1..=idx + DEPTH as u64 {
            if !self.ahead.iter().flatten().any(|a| a.file == file && a.idx == next) {
                started |= self.start_ahead(file, next);
            }
        }
        if started && self.ring.submit().is_err() {
            // Whether the kernel took them is unknown: keep the buffers until completions
            // say so, but never use them.
            for a in self.ahead.iter_mut().flatten().filter(|a| a.result.is_none()) {
                a.stale = true;
            }
        }
    }

    /// Drop the arrived read-aheads `unwanted` picks (their buffers go back to the cache
    /// for reuse); mark those still in flight stale.
    fn drop_aheads(&mut self, unwanted: impl Fn(&Ahead) -> bool) {
        for slot in self.ahead.iter_mut() {
            let Some(a) = slot.as_mut() else { continue };
            if !unwanted(a) {
                continue;
            }
            if a.result.is_some() {
                if let Some(a) = slot.take() {
                    self.cache.recycle(a.buf);
                }
            } else {
                a.stale = true;
            }
        }
    }

    /// Queue the read of chunk `idx` of `file` in a free slot (none free: not at all);
    /// the caller submits. Whether it was queued.
    fn start_ahead(&mut self, file: FileNo, idx: u64) -> bool {
        if self.ahead.len() < DEPTH {
            self.ahead.resize_with(DEPTH, || None);
        }
        let Some(slot) = self.ahead.iter().position(Option::is_none) else {
            return false;
        };
        let Ok(fd) = self.file(file).map(|f| f.as_raw_fd()) else {
            return false;
        };
        let off = idx * CHUNK as u64;
        let overlay = self.in_flight_bytes(file, off, CHUNK);
        let mut a = Ahead {
            file,
            idx,
            buf: self.cache.buffer(),
            overlay,
            result: None,
            stale: false,
        };
        let dst = a.buf.as_mut_slice();
        let sqe = opcode::Read::new(types::Fd(fd), dst.as_mut_ptr(), CHUNK as u32)
            .offset(off)
            .build()
            .user_data(AHEAD_TAG | slot as u64);
        // SAFETY: the SQE points into `a.buf`, a heap buffer that moves into
        // `self.ahead[slot]` below (moving the `WriteBuf` does not move its heap memory)
        // and stays there until this read's completion is reaped (`ahead_reaped`); `Drop`
        // waits for that completion, and leaks the buffer if it cannot.
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            return false;
        }
        if let Some(s) = self.ahead.get_mut(slot) {
            *s = Some(a);
        }
        true
    }

    /// The completion of the read-ahead in `slot` arrived.
    pub(super) fn ahead_reaped(&mut self, slot: usize, result: i32) {
        let Some(s) = self.ahead.get_mut(slot) else { return };
        let stale = match s.as_mut() {
            Some(a) => {
                a.result = Some(result);
                a.stale
            }
            None => false,
        };
        if stale {
            if let Some(a) = s.take() {
                self.cache.recycle(a.buf);
            }
        }
    }

    /// Whether a read-ahead's completion has yet to arrive.
    pub(super) fn ahead_in_flight(&self) -> bool {
        self.ahead.iter().flatten().any(|a| a.result.is_none())
    }

    /// Writes, a close or a reopen touch `[off, off + len)` of `file` (all of it with
    /// `None`; every file with `file == None`): a read-ahead over it is never used.
    pub(super) fn ahead_stale(&mut self, file: Option<FileNo>, range: Option<(u64, u64)>) {
        if self.ahead.iter().all(Option::is_none) {
            return;
        }
        self.drop_aheads(|a| {
            let (lo, hi) = (a.idx * CHUNK as u64, (a.idx + 1) * CHUNK as u64);
            file.is_none_or(|f| f == a.file) && range.is_none_or(|(off, len)| off < hi && off + len > lo)
        });
        if file.is_none() {
            self.last_miss = (FileNo::MAX, 0);
        }
    }

    /// Chunk `idx` of `file` from a read-ahead, waiting for its completion if needed: its
    /// buffer and the bytes valid in it. `None` when no usable read-ahead holds it (the
    /// caller reads it itself).
    pub(super) fn take_ahead(&mut self, file: FileNo, idx: u64) -> io::Result<Option<(WriteBuf, usize)>> {
        let wanted = |a: &Ahead| a.file == file && a.idx == idx && !a.stale;
        let Some(slot) = self.ahead.iter().position(|s| s.as_ref().is_some_and(wanted)) else {
            return Ok(None);
        };
        // A read-ahead keeps its slot until it is taken or dropped; reaping may mark it
        // stale (a write completed over it) or drop it (it arrived stale): both are
        // checked once it has arrived.
        while self
            .ahead
            .get(slot)
            .is_some_and(|s| s.as_ref().is_some_and(|a| a.result.is_none()))
        {
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            self.reap();
        }
        let Some(a) = self.ahead.get_mut(slot).and_then(Option::take) else {
            return Ok(None);
        };
        let res = a.result.unwrap_or(-libc::EIO);
        // A failed or interrupted read-ahead: read it the ordinary way instead.
        if a.stale || res < 0 {
            self.cache.recycle(a.buf);
            return Ok(None);
        }
        let got = (res as usize).min(CHUNK);
        if got < CHUNK && got % ALIGN == 0 && got > 0 {
            // Short but not at the end of the file (a direct read stops short only
            // there): let the caller read it whole.
            self.cache.recycle(a.buf);
            return Ok(None);
        }
        let mut buf = a.buf;
        let got = lay_over(&mut buf, idx * CHUNK as u64, a.overlay, got);
        Ok(Some((buf, got.min(CHUNK))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Batch, Io, Op};

    /// A backend on a fresh directory of the system temp dir, or `None` where io_uring or
    /// O_DIRECT is not available (the test then has nothing to check).
    fn backend(tag: &str) -> Option<(Uring, std::path::PathBuf)> {
        let dir = std::env::temp_dir().join(format!("rnats-ahead-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        match Uring::open(&dir, true) {
            Ok(u) => Some((u, dir)),
            Err(e) => {
                eprintln!("skipped: {e}");
                let _ = std::fs::remove_dir_all(&dir);
                None
            }
        }
    }

    fn chunk_bytes(idx: u64, gen: u8) -> Vec<u8> {
        (0..CHUNK).map(|i| (i as u64 * 31 + idx * 7) as u8 ^ gen).collect()
    }

    /// Write `chunks` chunks of generation `gen` from chunk `from`, and wait for them.
    fn write(u: &mut Uring, f: FileNo, from: u64, chunks: u64, gen: u8) {
        let mut ops = Vec::new();
        for idx in from..from + chunks {
            ops.push(Op::Write {
                file: f,
                off: idx * CHUNK as u64,
                data: chunk_bytes(idx, gen).into(),
            });
        }
        ops.push(Op::Sync { file: f });
        u.start(Batch { token: from, ops }).expect("start");
        u.wait().expect("done").result.expect("write");
    }

    /// Reap until the read-ahead in flight arrives.
    fn settle(u: &mut Uring) {
        while u.ahead_in_flight() {
            u.ring.submit_and_wait(1).expect("wait");
            u.reap();
        }
    }

    /// Read all of chunk `idx` in small pieces (as a consumer loads messages).
    fn read_chunk(u: &mut Uring, f: FileNo, idx: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let base = idx * CHUNK as u64;
        for piece in 0..(CHUNK / 1024) as u64 {
            out.extend(u.read_at(f, base + piece * 1024, 1024).expect("read"));
        }
        out
    }

    #[test]
    fn in_order_reads_are_served_by_the_read_ahead() {
        let Some((mut u, dir)) = backend("order") else { return };
        let (f, _) = u.open("a.blk", true).expect("open");
        write(&mut u, f, 0, 12, 0);
        for idx in 0..12 {
            let got = read_chunk(&mut u, f, idx);
            assert!(got == chunk_bytes(idx, 0), "chunk {idx}");
            if (1..11).contains(&idx) {
                // The miss on chunk idx followed the one on idx - 1: idx + 1 is ahead.
                let mut ahead: Vec<u64> = u
                    .ahead
                    .iter()
                    .flatten()
                    .filter(|a| a.file == f && !a.stale)
                    .map(|a| a.idx)
                    .collect();
                ahead.sort_unstable();
                // A run from the next chunk on, at least half the depth, at most all of it.
                let run: Vec<u64> = (idx + 1..idx + 1 + ahead.len() as u64).collect();
                assert_eq!(ahead, run, "after the miss on chunk {idx}");
                assert!(
                    (DEPTH / 2..=DEPTH).contains(&ahead.len()),
                    "after the miss on chunk {idx}: {ahead:?}"
                );
            }
        }
        // Past the end of the file: the last chunk's read-ahead reads nothing, and the
        // chunk after the file's end reads as empty.
        assert!(u
            .read_at(f, 12 * CHUNK as u64, 100)
            .expect("read past the end")
            .is_empty());
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file of `chunks` chunks (generation 0), read in order up to chunk 1 so that the
    /// chunks after it are read ahead, and those reads arrived.
    fn read_ahead_from_chunk_2(u: &mut Uring, name: &str, chunks: u64) -> FileNo {
        let (f, _) = u.open(name, true).expect("open");
        write(u, f, 0, chunks, 0);
        read_chunk(u, f, 0);
        read_chunk(u, f, 1);
        settle(u);
        f
    }

    /// The usable read-ahead of chunk `idx`, if any.
    fn ahead_of(u: &Uring, idx: u64) -> Option<&Ahead> {
        u.ahead.iter().flatten().find(|a| a.idx == idx && !a.stale)
    }

    #[test]
    fn a_write_after_the_read_ahead_started_is_what_the_reader_sees() {
        let Some((mut u, dir)) = backend("stale") else { return };
        let f = read_ahead_from_chunk_2(&mut u, "a.blk", 10);
        assert!(ahead_of(&u, 2).is_some_and(|a| a.result == Some(CHUNK as i32)));
        // Chunk 2 rewritten after its read-ahead arrived: the read-ahead is dropped.
        write(&mut u, f, 2, 1, 0x5a);
        assert!(ahead_of(&u, 2).is_none(), "a read-ahead under a write is never used");
        assert!(ahead_of(&u, 3).is_some(), "the others stay");
        assert!(read_chunk(&mut u, f, 2) == chunk_bytes(2, 0x5a));
        // Chunk 6 rewritten while its read-ahead is held: the reader gets the new bytes.
        write(&mut u, f, 6, 1, 0x66);
        assert!(ahead_of(&u, 6).is_none(), "a read-ahead under a write is never used");
        for idx in 3..6 {
            assert!(read_chunk(&mut u, f, idx) == chunk_bytes(idx, 0), "chunk {idx}");
        }
        assert!(read_chunk(&mut u, f, 6) == chunk_bytes(6, 0x66));
        // Untouched chunks still come through it.
        assert!(ahead_of(&u, 7).is_some());
        assert!(read_chunk(&mut u, f, 7) == chunk_bytes(7, 0));
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_closed_file_s_read_ahead_never_serves_its_successor() {
        let Some((mut u, dir)) = backend("reuse") else { return };
        let f = read_ahead_from_chunk_2(&mut u, "a.blk", 4);
        u.close(f);
        assert!(
            u.ahead.iter().flatten().all(|a| a.stale),
            "no read-ahead of a closed file is usable"
        );
        // A new file under the same number, other bytes in the same places.
        let (g, _) = u.open("b.blk", true).expect("open");
        write(&mut u, g, 0, 4, 0x77);
        for idx in 0..4 {
            assert!(read_chunk(&mut u, g, idx) == chunk_bytes(idx, 0x77), "chunk {idx}");
        }
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
