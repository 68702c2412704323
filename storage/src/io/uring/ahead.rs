//! Read-ahead for in-order readers: when a store misses its chunk cache on the chunk right
//! after its previous miss in the same file, the chunk after that is read into a buffer
//! of its own in the background, so the next miss finds it arrived (or on its way)
//! instead of waiting for the device. A consumer delivering a stream in order otherwise
//! stops once per 64 KiB for a synchronous device read.
//!
//! One read-ahead per store at a time. Its result holds what the disk held when the device
//! served it, with the bytes of writes that were in flight when it started laid over
//! them (as for a synchronous read); a write started afterwards, a completion of a write
//! overlapping it, or the file's close marks it stale, and a stale read-ahead is never
//! used. Its buffer lives until its completion is reaped, stale or not.

use super::{Aligned, Uring, ALIGN, CHUNK};
use crate::io::FileNo;
use io_uring::{opcode, types};
use std::io;
use std::os::fd::AsRawFd;

/// `user_data` of a read-ahead's completion.
pub(super) const AHEAD_TAG: u64 = u64::MAX - 2;

/// A chunk read started before it was asked for.
pub(super) struct Ahead {
    file: FileNo,
    idx: u64,
    buf: Aligned,
    /// In-flight writes' bytes over this chunk when the read started, with their offsets.
    overlay: Vec<(u64, Vec<u8>)>,
    /// The completion's result, once reaped.
    result: Option<i32>,
    /// Something wrote to (or closed) its range after it started: never to be used.
    stale: bool,
}

impl Uring {
    /// A miss of chunk `idx` of `file` was served synchronously: when the previous miss
    /// was the chunk just before it, start reading the next one.
    pub(super) fn after_miss(&mut self, file: FileNo, idx: u64) {
        let in_order = self.last_miss == (file, idx.wrapping_sub(1));
        self.last_miss = (file, idx);
        if in_order {
            self.start_ahead(file, idx + 1);
        }
    }

    /// Start reading chunk `idx` of `file` in the background. A read-ahead of another
    /// chunk (the reader went elsewhere) is dropped if it arrived, else marked stale and
    /// left to arrive; none starts then.
    fn start_ahead(&mut self, file: FileNo, idx: u64) {
        if let Some(a) = self.ahead.as_mut() {
            if a.result.is_none() {
                if (a.file, a.idx) != (file, idx) {
                    a.stale = true;
                }
                return;
            }
            self.ahead = None;
        }
        let Ok(fd) = self.file(file).map(|f| f.as_raw_fd()) else {
            return;
        };
        let off = idx * CHUNK as u64;
        let overlay = self.in_flight_bytes(file, off, CHUNK);
        let mut a = Ahead {
            file,
            idx,
            buf: Aligned::zeroed(CHUNK),
            overlay,
            result: None,
            stale: false,
        };
        let dst = a.buf.as_mut();
        let sqe = opcode::Read::new(types::Fd(fd), dst.as_mut_ptr(), CHUNK as u32)
            .offset(off)
            .build()
            .user_data(AHEAD_TAG);
        // SAFETY: the SQE points into `a.buf`, a heap buffer that moves into
        // `self.ahead` below (moving the `Aligned` does not move its heap memory) and
        // stays there until this read's completion is reaped (`ahead_reaped`); `Drop`
        // waits for that completion, and leaks the buffer if it cannot.
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            return;
        }
        self.ahead = Some(a);
        if self.ring.submit().is_err() {
            // Whether the kernel took it is unknown: keep the buffer until a completion
            // says so, but never use it.
            if let Some(a) = self.ahead.as_mut() {
                a.stale = true;
            }
        }
    }

    /// The read-ahead's completion arrived.
    pub(super) fn ahead_reaped(&mut self, result: i32) {
        let stale = match self.ahead.as_mut() {
            Some(a) => {
                a.result = Some(result);
                a.stale
            }
            None => false,
        };
        if stale {
            self.ahead = None;
        }
    }

    /// Whether a read-ahead's completion has yet to arrive.
    pub(super) fn ahead_in_flight(&self) -> bool {
        self.ahead.as_ref().is_some_and(|a| a.result.is_none())
    }

    /// Writes, a close or a reopen touch `[off, off + len)` of `file` (all of it with
    /// `None`; every file with `file == None`): a read-ahead over it is never used.
    pub(super) fn ahead_stale(&mut self, file: Option<FileNo>, range: Option<(u64, u64)>) {
        let Some(a) = self.ahead.as_mut() else { return };
        let (lo, hi) = (a.idx * CHUNK as u64, (a.idx + 1) * CHUNK as u64);
        let hit = file.is_none_or(|f| f == a.file) && range.is_none_or(|(off, len)| off < hi && off + len > lo);
        if !hit {
            return;
        }
        if a.result.is_some() {
            self.ahead = None;
        } else {
            a.stale = true;
        }
        if file.is_none() {
            self.last_miss = (FileNo::MAX, 0);
        }
    }

    /// Chunk `idx` of `file` from the read-ahead, waiting for its completion if needed:
    /// its buffer and the bytes valid in it. `None` when no usable read-ahead holds it
    /// (the caller reads it itself).
    pub(super) fn take_ahead(&mut self, file: FileNo, idx: u64) -> io::Result<Option<(Aligned, usize)>> {
        if !self
            .ahead
            .as_ref()
            .is_some_and(|a| a.file == file && a.idx == idx && !a.stale)
        {
            return Ok(None);
        }
        while self.ahead_in_flight() {
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            self.reap();
        }
        let Some(a) = self.ahead.take() else {
            return Ok(None);
        };
        let res = a.result.unwrap_or(-libc::EIO);
        // A failed or interrupted read-ahead: read it the ordinary way instead.
        if a.stale || res < 0 {
            return Ok(None);
        }
        let mut buf = a.buf;
        let mut got = (res as usize).min(CHUNK);
        if got < CHUNK && got % ALIGN == 0 && got > 0 {
            // Short but not at the end of the file (a direct read stops short only
            // there): let the caller read it whole.
            return Ok(None);
        }
        let base = idx * CHUNK as u64;
        for (at, bytes) in a.overlay {
            let from = (at - base) as usize;
            if let Some(dst) = buf.as_mut().get_mut(from..from + bytes.len()) {
                dst.copy_from_slice(&bytes);
                got = got.max(from + bytes.len());
            }
        }
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
                data: chunk_bytes(idx, gen),
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
                let a = u.ahead.as_ref().expect("a read-ahead after two misses in order");
                assert_eq!((a.file, a.idx), (f, idx + 1));
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

    #[test]
    fn a_write_after_the_read_ahead_started_is_what_the_reader_sees() {
        let Some((mut u, dir)) = backend("stale") else { return };
        let (f, _) = u.open("a.blk", true).expect("open");
        write(&mut u, f, 0, 6, 0);
        read_chunk(&mut u, f, 0);
        read_chunk(&mut u, f, 1);
        settle(&mut u);
        assert!(u
            .ahead
            .as_ref()
            .is_some_and(|a| a.idx == 2 && a.result == Some(CHUNK as i32)));
        // Chunk 2 rewritten after its read-ahead arrived: the read-ahead is dropped.
        write(&mut u, f, 2, 1, 0x5a);
        assert!(u.ahead.is_none(), "a read-ahead under a write is never used");
        assert!(read_chunk(&mut u, f, 2) == chunk_bytes(2, 0x5a));
        // A write started while a read-ahead is in flight marks it stale.
        assert!(u.ahead.as_ref().is_some_and(|a| a.idx == 3));
        write(&mut u, f, 3, 1, 0x33);
        assert!(read_chunk(&mut u, f, 3) == chunk_bytes(3, 0x33));
        // Untouched chunks still come through it.
        assert!(read_chunk(&mut u, f, 4) == chunk_bytes(4, 0));
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_closed_file_s_read_ahead_never_serves_its_successor() {
        let Some((mut u, dir)) = backend("reuse") else { return };
        let (f, _) = u.open("a.blk", true).expect("open");
        write(&mut u, f, 0, 4, 0);
        read_chunk(&mut u, f, 0);
        read_chunk(&mut u, f, 1);
        settle(&mut u);
        u.close(f);
        assert!(u.ahead.is_none());
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
