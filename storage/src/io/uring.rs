//! The io_uring backend (Linux, feature `uring`): block files opened with O_DIRECT, each
//! batch submitted as one chain of linked SQEs (writes, then fdatasyncs) on a ring owned by
//! the calling thread; completions are reaped by [`Io::poll`] without blocking, and
//! reported in the order the batches started. A batch started while an earlier one still
//! has writes under way is held until they end (both may rewrite the tail's last page, and
//! two direct writes of one page in flight land in either order); it may then run while
//! the earlier batch's fdatasync does. Writes
//! come aligned from the store (the partial tail block is rewritten as it grows) and are
//! copied into 4096-aligned buffers that live until their batch completes.
//!
//! Reads go through the same ring with O_DIRECT: a read SQE for the aligned range, then a
//! synchronous wait on the ring for its completion (completions of batches that arrive
//! meanwhile are kept for [`Io::poll`]). Loads are synchronous in the store's API, and a
//! wait on the store's own ring costs no more than a `pread` would (both wait for the
//! device; neither involves another thread). Small reads go through a bounded cache of
//! aligned chunks of [`CHUNK`] bytes per store (1 MiB, growing to 16 MiB for readers that
//! come back to what they read; see [`cache`]), least recently
//! used out (and [`PROCESS_CHUNKS`] for all the stores of the process together), so that a
//! consumer reading messages in order pays one device read per 64 KiB instead of one per
//! message, and does not wait for it: from its second miss in order the next chunk is read
//! ahead in the background ([`ahead`]); writes (at the start and at the completion of their batch),
//! opens and closes drop the chunks they touch. A read far from the previous one (a
//! random access) reads only its own 4 KiB pages, uncached: a whole chunk would cost a
//! 64 KiB transfer for a few hundred bytes. Reads of a chunk or more (recovery, compaction)
//! bypass the cache.
//!
//! Measured (`examples/read_bench.rs`, 1M messages of 128 B, pages evicted before each
//! pass, 3 alternating runs on this 2-core VM while other builds ran, so ±40%): in order
//! with `load_next_msg` 0.9–1.7 µs/msg direct against 1.3–2.1 µs/msg with the former
//! buffered `pread` path (both are CPU-bound: one device read per 64 KiB chunk); random
//! `load_msg` 43–67 µs against 52–79 µs (one device read each either way); last by subject
//! 0.9–1.3 against 0.8–5.5 µs. The direct path is not slower on any pattern and is the
//! default; `RNATS_STORAGE_READS=buffered` in the environment selects `pread` on a second,
//! buffered descriptor of each file instead (served by the page cache).
//!
//! A read may meet writes of batches still in flight (the tail page is rewritten as the
//! block grows, and a chunk read spans what is being appended). The device may serve it
//! before, during or after them, so the bytes those writes carry are copied over what it
//! returns: a read, and the chunk it may fill, always hold what the disk will hold once
//! the writes land. (Without that, a chunk read while a write was in flight, and cached
//! after the write's completion was reaped during the read's own wait, kept the zeros that
//! were on disk before; `tests/reads.rs` caught it about once in fifteen runs.)
//!
//! [`Uring::open`] refuses (and the store falls back to the threaded backend) when the
//! ring cannot be set up or does not answer (seccomp, `kernel.io_uring_disabled`), on
//! tmpfs (no device under it: direct I/O buys nothing), or when the file system rejects
//! O_DIRECT.
//!
//! This is the crate's only `unsafe` code: pushing an SQE hands the kernel raw pointers,
//! which must stay valid until the completion arrives. Every buffer of a batch is owned by
//! the batch's entry in `batches` until all of its completions are reaped, and dropping the
//! backend waits for everything in flight first.

mod ahead;
mod cache;

use super::table::FileTable;
use super::{Batch, Done, FileNo, Io, Op, WriteBuf};
use ahead::{ahead_slot, Ahead};
use cache::ChunkCache;
pub use cache::{cached_chunks, set_chunk_budget, BASE_CHUNKS, CACHE_CHUNKS, PROCESS_CHUNKS};
use io_uring::{opcode, squeue, types, IoUring};
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const ALIGN: usize = super::BUF_ALIGN;
const RING: u32 = 256;
/// Bytes of a cached read chunk.
pub const CHUNK: usize = 64 * 1024;
/// The largest write of a lone batch that carries its own sync ([`Uring::lone_append`]).
const DSYNC_MAX: usize = 2 * ALIGN;
/// Reads larger than this go to the device in pieces of this size.
const BIG_READ: usize = 4 << 20;
/// `user_data` of a read's completion (batches use `id << 20 | op`).
const READ_TAG: u64 = u64::MAX - 1;
const TMPFS_MAGIC: i64 = 0x0102_1994;

struct InBatch {
    token: u64,
    pending: usize,
    /// Expected byte counts of the writes, by op index (0 for syncs).
    expect: Vec<u32>,
    /// What the writes cover (file, offset, length): cached chunks to drop on completion.
    writes: Vec<(FileNo, u64, u64)>,
    error: Option<io::Error>,
    /// The writes' buffers, in the order of `writes`; the kernel reads them until the
    /// batch completes.
    bufs: Vec<WriteBuf>,
    /// Writes of the batch not completed yet.
    writes_left: usize,
    /// Handed to the kernel (else held until the writes of the batches before it end).
    submitted: bool,
    /// Every completion reaped (its `Done` waits for the batches before it).
    done: bool,
}

/// io_uring + O_DIRECT.
pub struct Uring {
    ring: IoUring,
    dir: PathBuf,
    dir_file: File,
    /// Per file: the O_DIRECT descriptor (writes, syncs, reads) and, when reads are
    /// buffered, a buffered one.
    files: FileTable<(File, Option<File>)>,
    /// By batch id; looked up at every poll (a fast hash for integers).
    batches: HashMap<u64, InBatch, ahash::RandomState>,
    /// Batch ids in the order they started: completions are reported in this order.
    order: VecDeque<u64>,
    /// Batches waiting for the writes of earlier ones to end, with their chains.
    held: VecDeque<(u64, Vec<squeue::Entry>)>,
    next_batch: u64,
    finished: VecDeque<Done>,
    /// Reads through the ring (else `pread` on the buffered descriptors).
    direct_reads: bool,
    cache: ChunkCache,
    /// The result of the read in flight, once reaped.
    read_done: Option<i32>,
    /// Where the last small read ended (file, offset): a read near it fills a chunk.
    last_read: (FileNo, u64),
    /// The chunk of the last cache miss (file, index): a miss on the one after it starts
    /// a read-ahead of the next.
    last_miss: (FileNo, u64),
    /// Read-aheads in flight or arrived, by slot ([`ahead`]).
    ahead: Vec<Option<Ahead>>,
    /// Write buffers of finished batches, for the next writes (at most [`SPARE_BUFS`],
    /// each at most [`SPARE_MAX`] bytes).
    spare: Vec<WriteBuf>,
    /// Whether the store was read from, and written to, since the last [`Io::trim`].
    read_lately: bool,
    wrote_lately: bool,
}

/// Write buffers kept for reuse, and the largest kept.
const SPARE_BUFS: usize = 8;
const SPARE_MAX: usize = 8 << 20;

fn on_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_type as i64 == TMPFS_MAGIC
}

/// Let the ring's io-wq workers (the kernel threads that run its blocking requests: every
/// fdatasync, and writes that allocate blocks) run on the process's other CPUs, not on
/// the calling thread's. They inherit the affinity of the thread that made the ring, and
/// a shard is pinned to one core: its fdatasyncs then preempted it there, thousands of
/// times a second under a steady publish load, while the other cores had room (a KV put
/// load switched its shard out ~6,000 times a second, each time for a worker). Kept as
/// is when the thread may run everywhere the process may, or the kernel refuses.
fn workers_off_this_core(ring: &IoUring) {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is plain data (all zeros is the empty set); each call writes
    // at most `size` bytes into the set it is given.
    let (mut process, mut thread): (libc::cpu_set_t, libc::cpu_set_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    let ok = unsafe {
        libc::sched_getaffinity(libc::getpid(), size, &mut process) == 0
            && libc::sched_getaffinity(0, size, &mut thread) == 0
    };
    if !ok {
        return;
    }
    let mut others: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut any = false;
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: `cpu` is below CPU_SETSIZE, the sets' capacity.
        if unsafe { libc::CPU_ISSET(cpu, &process) && !libc::CPU_ISSET(cpu, &thread) } {
            unsafe { libc::CPU_SET(cpu, &mut others) };
            any = true;
        }
    }
    if any {
        let _ = ring.submitter().register_iowq_aff(&others);
    }
}

/// Copy the bytes of in-flight writes (each with its file offset, from
/// [`Uring::in_flight_bytes`]) over `buf`, which holds a read of the file from `base`
/// that returned `got` bytes; returns how many bytes of `buf` are valid now.
fn lay_over(buf: &mut WriteBuf, base: u64, overlay: Vec<(u64, Vec<u8>)>, mut got: usize) -> usize {
    for (at, bytes) in overlay {
        let from = (at - base) as usize;
        if from > got {
            // Past the end the device returned: what lies between is not on disk yet
            // (and a reused buffer still holds another chunk's bytes there).
            if let Some(gap) = buf.as_mut_slice().get_mut(got..from) {
                gap.fill(0);
            }
        }
        if let Some(dst) = buf.as_mut_slice().get_mut(from..from + bytes.len()) {
            dst.copy_from_slice(&bytes);
            got = got.max(from + bytes.len());
        }
    }
    got
}

/// Devices whose file system took an O_DIRECT probe write.
static DIRECT_OK: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

fn direct_known_ok(dev: u64) -> bool {
    DIRECT_OK.lock().is_ok_and(|v| v.contains(&dev))
}

fn remember_direct_ok(dev: u64) {
    if let Ok(mut v) = DIRECT_OK.lock() {
        if !v.contains(&dev) {
            v.push(dev);
        }
    }
}

impl Uring {
    /// Set up the ring for directory `dir`, checking that io_uring works and that the
    /// directory's file system takes O_DIRECT.
    /// Reads are direct unless `direct_reads` is false or the environment says
    /// `RNATS_STORAGE_READS=buffered`.
    pub fn open(dir: &Path, direct_reads: bool) -> io::Result<Uring> {
        let direct_reads = direct_reads && std::env::var("RNATS_STORAGE_READS").map_or(true, |v| v != "buffered");
        if on_tmpfs(dir) {
            return Err(io::Error::other("tmpfs: no direct I/O"));
        }
        // Cooperative task running: a completion (a direct write's, from the block
        // device's interrupt) is finished on the owning thread's next system call instead
        // of an inter-processor interrupt stopping it at once (which the running shard
        // took for every batch); `reap` makes that call when the kernel flags such work.
        let mut ring = match IoUring::builder().setup_coop_taskrun().setup_taskrun_flag().build(RING) {
            Ok(r) => r,
            Err(_) => IoUring::new(RING)?,
        };
        workers_off_this_core(&ring);
        let nop = opcode::Nop::new().build().user_data(u64::MAX);
        // SAFETY: a NOP carries no pointers.
        unsafe { ring.submission().push(&nop) }.map_err(|_| io::Error::other("ring full"))?;
        ring.submit_and_wait(1)?;
        if ring.completion().next().map(|c| c.user_data()) != Some(u64::MAX) {
            return Err(io::Error::other("io_uring does not answer"));
        }
        // Does the file system take O_DIRECT (and 4096-aligned writes)? Asked once per
        // device: a stream create should not pay a probe write each time.
        let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(dir)?);
        if direct_known_ok(dev) {
            return Self::with_ring(ring, dir, direct_reads);
        }
        let probe = dir.join(".direct-probe");
        let _ = std::fs::remove_file(&probe);
        let r = (|| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_DIRECT)
                .open(&probe)?;
            f.write_all_at(&WriteBuf::zeroed(ALIGN), 0)
        })();
        let _ = std::fs::remove_file(&probe);
        r?;
        remember_direct_ok(dev);
        Self::with_ring(ring, dir, direct_reads)
    }

    fn with_ring(ring: IoUring, dir: &Path, direct_reads: bool) -> io::Result<Uring> {
        Ok(Uring {
            ring,
            dir: dir.to_path_buf(),
            dir_file: File::open(dir)?,
            files: FileTable::default(),
            batches: HashMap::default(),
            order: VecDeque::new(),
            held: VecDeque::new(),
            next_batch: 0,
            finished: VecDeque::new(),
            direct_reads,
            cache: ChunkCache::default(),
            read_done: None,
            last_read: (FileNo::MAX, 0),
            last_miss: (FileNo::MAX, 0),
            ahead: Vec::new(),
            spare: Vec::new(),
            read_lately: false,
            wrote_lately: false,
        })
    }

    /// Whether reads go through the ring with O_DIRECT (else buffered `pread`).
    pub fn direct_reads(&self) -> bool {
        self.direct_reads
    }

    fn file(&self, f: FileNo) -> io::Result<&File> {
        self.files.get(f).map(|(d, _)| d)
    }

    /// Drop the cached chunks of `file` that overlap `[off, off + len)` (all with `None`).
    fn invalidate(&mut self, file: FileNo, range: Option<(u64, u64)>) {
        self.cache.invalidate(file, range);
        self.ahead_stale(Some(file), range);
    }

    /// Drop every cached chunk.
    fn clear_cache(&mut self) {
        self.cache.clear();
        self.ahead_stale(None, None);
    }

    /// Read `len` bytes (a multiple of [`ALIGN`]) at `off` (aligned) with O_DIRECT through
    /// the ring, waiting for it; returns the buffer and the bytes read (fewer at the end
    /// of the file).
    fn direct_read(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<(WriteBuf, usize)> {
        let fd = self.file(file)?.as_raw_fd();
        let mut buf = if len == CHUNK {
            self.cache.buffer()
        } else {
            WriteBuf::zeroed(len)
        };
        let mut got = 0usize;
        // What in-flight writes put in this range: the device may serve the read before
        // or during them, so their bytes are laid over what it returns.
        let overlay = self.in_flight_bytes(file, off, len);
        while got < len {
            let dst = buf.as_mut_slice().get_mut(got..).unwrap_or(&mut []);
            let sqe = opcode::Read::new(types::Fd(fd), dst.as_mut_ptr(), dst.len() as u32)
                .offset(off + got as u64)
                .build()
                .user_data(READ_TAG);
            self.read_done = None;
            // SAFETY: the SQE points into `buf`, which this function owns and does not
            // free before the read's completion is reaped below; if the ring fails while
            // the read may still be in flight, `buf` is leaked instead of freed.
            if unsafe { self.ring.submission().push(&sqe) }.is_err() {
                // No room (a batch filled the queue): a plain read on the same descriptor.
                let n = self.file(file)?.read_at(dst, off + got as u64)?;
                if n == 0 {
                    break;
                }
                got += n;
                if n % ALIGN != 0 {
                    break;
                }
                continue;
            }
            let res = loop {
                if let Err(e) = self.ring.submit_and_wait(1) {
                    if e.kind() != io::ErrorKind::Interrupted {
                        std::mem::forget(buf);
                        return Err(e);
                    }
                }
                self.reap();
                if let Some(r) = self.read_done.take() {
                    break r;
                }
            };
            if res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res));
            }
            let n = res as usize;
            got += n;
            // The end of the file (a direct read stops short only there).
            if n == 0 || n % ALIGN != 0 {
                break;
            }
        }
        let got = lay_over(&mut buf, off, overlay, got);
        Ok((buf, got.min(len)))
    }

    /// The bytes that writes of in-flight batches put in `[off, off + len)` of `file`, in
    /// the order they were started (a later write over the same bytes wins), each with its
    /// offset.
    fn in_flight_bytes(&self, file: FileNo, off: u64, len: usize) -> Vec<(u64, Vec<u8>)> {
        let end = off + len as u64;
        let mut ids: Vec<u64> = self
            .batches
            .iter()
            .filter(|(_, b)| b.writes.iter().any(|&(f, o, l)| f == file && o < end && o + l > off))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        for id in ids {
            let Some(b) = self.batches.get(&id) else { continue };
            for (&(f, o, l), data) in b.writes.iter().zip(&b.bufs) {
                let (a, z) = (o.max(off), (o + l).min(end));
                if f != file || a >= z {
                    continue;
                }
                if let Some(src) = data.get((a - o) as usize..(z - o) as usize) {
                    out.push((a, src.to_vec()));
                }
            }
        }
        out
    }

    /// The cached chunk `idx` of `file`, read if needed; returns its position in the cache.
    fn chunk(&mut self, file: FileNo, idx: u64) -> io::Result<usize> {
        if let Some(i) = self.cache.find(file, idx) {
            return Ok(i);
        }
        let ahead = self.take_ahead(file, idx)?;
        // The next chunks' read-aheads (if this miss follows the last one) go to the device
        // before this chunk's own read, if it needs one.
        self.after_miss(file, idx);
        let (buf, valid) = match ahead {
            Some(read) => read,
            None => self.direct_read(file, idx * CHUNK as u64, CHUNK)?,
        };
        Ok(self.cache.insert(file, idx, buf, valid))
    }

    /// Is `ops` a lone small append: one write of at most [`DSYNC_MAX`] bytes, then its
    /// file's sync, with nothing else in flight? Such a batch (a synchronous publish, a
    /// store between bursts) is one write with `RWF_DSYNC` instead of a write then an
    /// fdatasync: the kernel flushes the device once the write ends, without handing an
    /// fdatasync to an io-wq worker on another core. Measured on this machine's virtual
    /// disk: 207 µs a batch before, 158 µs after (sync publish p50 0.76x). Larger batches
    /// keep the fdatasync, which lets the next batch's writes overlap it (with `RWF_DSYNC`
    /// on every lone batch, async publishing of 1 KiB messages lost 14 %).
    fn lone_append(&self, ops: &[Op]) -> bool {
        match ops {
            [Op::Write { file, data, .. }, Op::Sync { file: synced }] => {
                file == synced && data.len() <= DSYNC_MAX && self.batches.is_empty() && self.held.is_empty()
            }
            _ => false,
        }
    }

    /// Whether a small read at `off` of `file` is near where the last one ended (reads in
    /// order go through the chunk cache; others read only their own pages).
    fn near_last_read(&self, file: FileNo, off: u64) -> bool {
        let (lf, lend) = self.last_read;
        lf == file && off + (CHUNK as u64) >= lend && off <= lend + CHUNK as u64
    }

    /// A message load's read: a window of the cached chunk when the range lies in one
    /// chunk that is cached or (read near the last one) gets cached; else a copy, as
    /// [`Io::read_at`] makes it.
    fn read_window(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<Option<bytes::Bytes>> {
        let idx = off / CHUNK as u64;
        let from = (off - idx * CHUNK as u64) as usize;
        if !self.direct_reads || from + len > CHUNK {
            return Ok(None);
        }
        // A hit costs one lookup; a miss near the last read fills the chunk.
        let i = match self.cache.find(file, idx) {
            Some(i) => i,
            None if self.near_last_read(file, off) => self.chunk(file, idx)?,
            None => return Ok(None),
        };
        self.last_read = (file, off + len as u64);
        Ok(self.cache.get(i).and_then(|c| c.window(from, len)))
    }

    fn read_direct(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<Vec<u8>> {
        let end = off + len as u64;
        let mut out = Vec::with_capacity(len);
        if len >= CHUNK {
            let mut pos = off - off % ALIGN as u64;
            while pos < end {
                let n = (BIG_READ as u64).min((end - pos).div_ceil(ALIGN as u64) * ALIGN as u64) as usize;
                let (buf, got) = self.direct_read(file, pos, n)?;
                let from = off.saturating_sub(pos) as usize;
                let to = ((end - pos) as usize).min(got);
                if let Some(src) = buf.get(from..to) {
                    out.extend_from_slice(src);
                }
                if got < n {
                    break;
                }
                pos += n as u64;
            }
            return Ok(out);
        }
        // A read far from the last one (a random access): only its own pages, uncached
        // (a whole chunk would cost a 64 KiB transfer for a few hundred bytes).
        let near = self.near_last_read(file, off);
        self.last_read = (file, end);
        let cached = self.cache.contains(file, off / CHUNK as u64);
        if !near && !cached {
            let a0 = off - off % ALIGN as u64;
            let a1 = end.div_ceil(ALIGN as u64) * ALIGN as u64;
            let (buf, got) = self.direct_read(file, a0, (a1 - a0) as usize)?;
            let from = (off - a0) as usize;
            let to = ((end - a0) as usize).min(got);
            if let Some(src) = buf.get(from..to) {
                out.extend_from_slice(src);
            }
            return Ok(out);
        }
        let mut pos = off;
        while pos < end {
            let idx = pos / CHUNK as u64;
            let i = self.chunk(file, idx)?;
            let Some(c) = self.cache.get(i) else { break };
            let base = idx * CHUNK as u64;
            let from = (pos - base) as usize;
            let to = ((end - base) as usize).min(c.valid);
            if from >= to {
                break;
            }
            if let Some(src) = c.data().get(from..to) {
                out.extend_from_slice(src);
            }
            pos = base + to as u64;
            if to < CHUNK && c.valid < CHUNK {
                break;
            }
        }
        Ok(out)
    }

    fn reap(&mut self) {
        if self.ring.submission().taskrun() {
            // Completions wait as task work: any system call runs it.
            let _ = self.ring.submit();
        }
        let mut stale = Vec::new();
        let mut ahead = Vec::new();
        for cqe in self.ring.completion() {
            if cqe.user_data() == READ_TAG {
                self.read_done = Some(cqe.result());
                continue;
            }
            if let Some(slot) = ahead_slot(cqe.user_data()) {
                ahead.push((slot, cqe.result()));
                continue;
            }
            let id = cqe.user_data() >> 20;
            let op = (cqe.user_data() & 0xf_ffff) as usize;
            let Some(b) = self.batches.get_mut(&id) else { continue };
            b.pending = b.pending.saturating_sub(1);
            if b.expect.get(op).is_some_and(|&w| w > 0) {
                b.writes_left = b.writes_left.saturating_sub(1);
            }
            let res = cqe.result();
            if b.error.is_none() {
                if res < 0 {
                    b.error = Some(io::Error::from_raw_os_error(-res));
                } else if let Some(&want) = b.expect.get(op) {
                    if want > 0 && res as u32 != want {
                        b.error = Some(io::Error::new(io::ErrorKind::WriteZero, "short direct write"));
                    }
                }
            }
            if b.pending == 0 {
                b.done = true;
            }
        }
        for (slot, res) in ahead {
            self.ahead_reaped(slot, res);
        }
        // Report finished batches in the order they started.
        while let Some(&id) = self.order.front() {
            if !self.batches.get(&id).is_some_and(|b| b.done) {
                break;
            }
            self.order.pop_front();
            if let Some(b) = self.batches.remove(&id) {
                // A read while the batch was in flight may have cached what it
                // overwrote.
                stale.extend_from_slice(&b.writes);
                for buf in b.bufs {
                    if self.spare.len() < SPARE_BUFS && buf.capacity() <= SPARE_MAX {
                        self.spare.push(buf);
                    }
                }
                self.finished.push_back(Done {
                    token: b.token,
                    result: b.error.map_or(Ok(()), Err),
                });
            }
        }
        for (f, off, len) in stale {
            self.invalidate(f, Some((off, len)));
        }
        self.release_held();
    }

    /// True while a batch handed to the kernel still has writes to finish: a later batch
    /// may rewrite the same tail page, so its writes must not start before these end (two
    /// direct writes of one page in flight land in either order).
    fn writes_busy(&self) -> bool {
        self.batches.values().any(|b| b.submitted && b.writes_left > 0)
    }

    /// True while the kernel has completions of batches to deliver.
    fn kernel_busy(&self) -> bool {
        self.batches.values().any(|b| b.submitted && !b.done)
    }

    /// Hand held batches to the kernel once nothing before them is still writing.
    fn release_held(&mut self) {
        while !self.held.is_empty() && !self.writes_busy() {
            let Some((id, entries)) = self.held.pop_front() else {
                break;
            };
            if let Err(e) = self.push_chain(id, &entries) {
                if let Some(b) = self.batches.get_mut(&id) {
                    b.error = Some(e);
                    b.done = true;
                    b.submitted = false;
                }
            }
        }
    }

    /// Push a batch's chain and submit it.
    fn push_chain(&mut self, id: u64, entries: &[squeue::Entry]) -> io::Result<()> {
        // SAFETY: every pointer in `entries` points into a buffer owned by
        // `self.batches[id]`, kept until all of the batch's completions are reaped (and
        // `Drop` waits for them); file descriptors stay open while the store has writes
        // in flight to them (it never closes a file with a batch in flight).
        unsafe { self.ring.submission().push_multiple(entries) }.map_err(|_| io::Error::other("ring full"))?;
        if let Some(b) = self.batches.get_mut(&id) {
            b.submitted = true;
        }
        self.ring.submit()?;
        Ok(())
    }

    /// Run a batch too large for the ring with plain syscalls (rare: many erasures).
    fn run_blocking(&mut self, batch: Batch) {
        let mut result = Ok(());
        for op in batch.ops {
            let r = match op {
                Op::Write { file, off, data } => {
                    self.invalidate(file, Some((off, data.len() as u64)));
                    self.file(file).and_then(|f| f.write_all_at(&data, off))
                }
                Op::Sync { file } => self.file(file).and_then(|f| f.sync_data()),
                Op::SyncDir => self.dir_file.sync_all(),
            };
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        self.finished.push_back(Done {
            token: batch.token,
            result,
        });
    }
}

impl Io for Uring {
    fn alignment(&self) -> usize {
        ALIGN
    }

    fn name(&self) -> &'static str {
        "uring+direct"
    }

    fn write_buf(&mut self) -> WriteBuf {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b
    }

    fn open(&mut self, name: &str, create: bool) -> io::Result<(FileNo, u64)> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).custom_flags(libc::O_DIRECT);
        if create {
            o.create_new(true);
        }
        let f = o.open(self.dir.join(name))?;
        let r = if self.direct_reads {
            None
        } else {
            Some(File::open(self.dir.join(name))?)
        };
        let len = f.metadata()?.len();
        let no = self.files.insert(name, (f, r));
        self.invalidate(no, None);
        Ok((no, len))
    }

    fn close(&mut self, file: FileNo) {
        self.invalidate(file, None);
        self.files.close(file);
    }

    fn remove(&mut self, name: &str) -> io::Result<()> {
        self.clear_cache();
        self.files.close_name(name);
        std::fs::remove_file(self.dir.join(name))
    }

    fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        self.clear_cache();
        std::fs::rename(self.dir.join(from), self.dir.join(to))
    }

    fn read_shared(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<bytes::Bytes> {
        self.read_lately = true;
        match self.read_window(file, off, len)? {
            Some(window) => Ok(window),
            None => self.read_at(file, off, len).map(bytes::Bytes::from),
        }
    }

    fn read_at(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<Vec<u8>> {
        self.read_lately = true;
        if self.direct_reads {
            return self.read_direct(file, off, len);
        }
        let f = self
            .files
            .get(file)?
            .1
            .as_ref()
            .ok_or_else(|| io::Error::other("no buffered descriptor"))?;
        let mut buf = vec![0u8; len];
        let mut got = 0usize;
        while got < len {
            let dst = buf.get_mut(got..).unwrap_or(&mut []);
            match f.read_at(dst, off + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    fn trim(&mut self) {
        if !self.read_lately {
            // No reader since the last call: the cache starts over at its base size.
            self.clear_cache();
            self.cache.shrink();
        }
        if !self.wrote_lately {
            self.spare.clear();
        }
        self.read_lately = false;
        self.wrote_lately = false;
    }

    fn start(&mut self, mut batch: Batch) -> io::Result<()> {
        self.wrote_lately = true;
        if batch.ops.is_empty() {
            self.finished.push_back(Done {
                token: batch.token,
                result: Ok(()),
            });
            return Ok(());
        }
        let free = (RING as usize).saturating_sub(self.ring.submission().len());
        if batch.ops.len() > free || batch.ops.len() >= 1 << 20 {
            // Synchronous writes must not overtake batches in flight.
            while self.kernel_busy() {
                self.ring.submit_and_wait(1)?;
                self.reap();
            }
            self.run_blocking(batch);
            return Ok(());
        }
        let id = self.next_batch;
        self.next_batch += 1;
        // A lone small append: its sync rides on the write (`RWF_DSYNC`).
        let dsync = self.lone_append(&batch.ops);
        if dsync {
            batch.ops.pop();
        }
        let n = batch.ops.len();
        let mut entries = Vec::with_capacity(n);
        let mut bufs = Vec::new();
        let mut expect = Vec::with_capacity(n);
        let mut writes = Vec::new();
        for op in &batch.ops {
            if let Op::Write { file, off, data } = op {
                self.invalidate(*file, Some((*off, data.len() as u64)));
            }
        }
        for (i, op) in batch.ops.into_iter().enumerate() {
            let ud = (id << 20) | i as u64;
            let sqe = match op {
                Op::Write { file, off, data } => {
                    let fd = self.file(file)?.as_raw_fd();
                    if off % ALIGN as u64 != 0 || data.len() % ALIGN != 0 {
                        return Err(io::Error::new(io::ErrorKind::InvalidInput, "unaligned direct write"));
                    }
                    writes.push((file, off, data.len() as u64));
                    // Written from where it is: a `WriteBuf` with bytes starts aligned.
                    debug_assert!(data.is_empty() || data.is_aligned());
                    let buf = data;
                    let ptr = buf.as_slice().as_ptr();
                    expect.push(buf.len() as u32);
                    let e = opcode::Write::new(types::Fd(fd), ptr, buf.len() as u32)
                        .offset(off)
                        .rw_flags(if dsync && i + 1 == n { libc::RWF_DSYNC } else { 0 })
                        .build();
                    bufs.push(buf);
                    e
                }
                Op::Sync { file } => {
                    expect.push(0);
                    let fd = self.file(file)?.as_raw_fd();
                    opcode::Fsync::new(types::Fd(fd))
                        .flags(types::FsyncFlags::DATASYNC)
                        .build()
                }
                Op::SyncDir => {
                    expect.push(0);
                    opcode::Fsync::new(types::Fd(self.dir_file.as_raw_fd())).build()
                }
            };
            let sqe = if i + 1 < n {
                sqe.flags(squeue::Flags::IO_LINK)
            } else {
                sqe
            };
            entries.push(sqe.user_data(ud));
        }
        // The buffers move into the batch entry (the heap memory does not move), which
        // lives until the last completion of the batch is reaped.
        let writes_left = writes.len();
        self.batches.insert(
            id,
            InBatch {
                token: batch.token,
                pending: n,
                expect,
                writes,
                error: None,
                bufs,
                writes_left,
                submitted: false,
                done: false,
            },
        );
        self.order.push_back(id);
        if self.writes_busy() || !self.held.is_empty() {
            self.held.push_back((id, entries));
            return Ok(());
        }
        if let Err(e) = self.push_chain(id, &entries) {
            self.batches.remove(&id);
            self.order.retain(|&o| o != id);
            return Err(e);
        }
        Ok(())
    }

    fn writes_idle(&mut self) -> bool {
        if self.writes_busy() {
            self.reap();
        }
        !self.writes_busy() && self.held.is_empty()
    }

    fn poll(&mut self) -> Option<Done> {
        if self.finished.is_empty() && !self.batches.is_empty() {
            self.reap();
        }
        self.finished.pop_front()
    }

    fn wait(&mut self) -> Option<Done> {
        loop {
            if let Some(d) = self.finished.pop_front() {
                return Some(d);
            }
            if self.batches.is_empty() {
                return None;
            }
            if !self.kernel_busy() {
                // Finished (or refused) batches not reported yet: no completion is coming.
                self.reap();
                if self.finished.is_empty() && !self.kernel_busy() {
                    return None;
                }
                continue;
            }
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.kind() != io::ErrorKind::Interrupted {
                    let ids: Vec<u64> = self.batches.keys().copied().collect();
                    // The ring is broken: fail what is in flight (its buffers are kept in
                    // `Drop`'s final wait); the store refuses writes from here on.
                    for id in ids {
                        if let Some(b) = self.batches.get(&id) {
                            self.finished.push_back(Done {
                                token: b.token,
                                result: Err(io::Error::new(e.kind(), e.to_string())),
                            });
                        }
                    }
                    return self.finished.pop_front();
                }
            }
            self.reap();
        }
    }

    fn in_flight(&self) -> usize {
        self.batches.len() + self.finished.len()
    }

    fn wake_on_completion(&mut self, wake: &super::Wake) -> bool {
        // The kernel signals the eventfd with every completion it posts to this ring.
        self.ring.submitter().register_eventfd(wake.0.as_raw_fd()).is_ok()
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        self.clear_cache();
        // The kernel may still use the buffers of batches in flight.
        let mut tries = 0;
        while (self.kernel_busy() || self.ahead_in_flight()) && tries < 1000 {
            let _ = self.ring.submit_and_wait(1);
            self.reap();
            tries += 1;
        }
        if !self.kernel_busy() {
            // Held batches never reached the kernel.
            self.held.clear();
            self.batches.clear();
        }
        if !self.batches.is_empty() {
            // Never free memory the kernel may write from: leak it instead.
            std::mem::forget(std::mem::take(&mut self.batches));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUs a thread of this process may run on, from /proc.
    fn allowed_cpus(tid: i32) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
    }

    /// A ring made on a thread pinned to CPU 0 runs its fdatasync on workers that may not
    /// use CPU 0 (where the kernel default, the creator's affinity, would keep them).
    #[test]
    fn blocking_requests_run_off_the_pinned_core() {
        // SAFETY: plain data, filled by the calls.
        let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if unsafe { libc::sched_getaffinity(0, size, &mut all) } != 0
            || unsafe { libc::CPU_COUNT(&all) } < 2
            || !unsafe { libc::CPU_ISSET(0, &all) }
        {
            eprintln!("skipped: needs CPU 0 and another");
            return;
        }
        let dir = std::env::temp_dir().join(format!("rnats-iowq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let d = dir.clone();
        let found = std::thread::spawn(move || {
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(0, &mut one) };
            assert_eq!(unsafe { libc::sched_setaffinity(0, size, &one) }, 0, "pin to CPU 0");
            let me = unsafe { libc::gettid() };
            let mut u = match Uring::open(&d, true) {
                Ok(u) => u,
                Err(e) => return Err(format!("no ring: {e}")),
            };
            let (f, _) = u.open("w.blk", true).expect("open");
            let ops = vec![
                Op::Write {
                    file: f,
                    off: 0,
                    data: vec![1u8; ALIGN].into(),
                },
                Op::Sync { file: f },
            ];
            u.start(Batch { token: 1, ops }).expect("start");
            u.wait().expect("done").result.expect("write and sync");
            // The workers that ran it, named after the thread that made the ring.
            let name = format!("iou-wrk-{me}");
            let mut masks = Vec::new();
            for t in std::fs::read_dir("/proc/self/task").expect("tasks").flatten() {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                if comm.trim() == name {
                    let tid: i32 = t.file_name().to_string_lossy().parse().expect("tid");
                    masks.extend(allowed_cpus(tid));
                }
            }
            Ok((masks, allowed_cpus(me)))
        })
        .join()
        .expect("thread");
        let _ = std::fs::remove_dir_all(&dir);
        let (masks, mine) = match found {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        assert_eq!(mine.as_deref(), Some("0"), "the ring's maker was pinned to CPU 0");
        assert!(!masks.is_empty(), "an fdatasync ran on an io-wq worker");
        for m in masks {
            let cpus: Vec<u32> = m
                .split(',')
                .flat_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let (a, b) = (a.parse::<u32>().unwrap_or(0), b.parse::<u32>().unwrap_or(0));
                    a..=b
                })
                .collect();
            assert!(!cpus.contains(&0), "a worker may run on the pinned core: {m}");
            assert!(!cpus.is_empty(), "a worker with no CPU: {m}");
        }
    }

    /// A ring over a fresh directory named after `tag`, or `None` (with a note) where
    /// io_uring or O_DIRECT is refused.
    fn fresh_ring(tag: &str) -> Option<(PathBuf, Uring)> {
        let dir = std::env::temp_dir().join(format!("rnats-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        match Uring::open(&dir, true) {
            Ok(u) => Some((dir, u)),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    /// A lone small append is one write carrying its sync; a batch started while another
    /// is in flight, or a larger one, keeps its fdatasync. Either way the bytes are there.
    #[test]
    fn a_lone_small_append_carries_its_own_sync() {
        let Some((dir, mut u)) = fresh_ring("dsync") else {
            return;
        };
        let (f, _) = u.open("a.blk", true).expect("open");
        let page = |b: u8, pages: usize| WriteBuf::from(vec![b; pages * ALIGN]);
        let batch = |token, off, data| Batch {
            token,
            ops: vec![Op::Write { file: f, off, data }, Op::Sync { file: f }],
        };
        let ops_of = |u: &Uring, token: u64| u.batches.values().find(|b| b.token == token).map(|b| b.pending);
        u.start(batch(1, 0, page(1, 1))).expect("start");
        assert_eq!(ops_of(&u, 1), Some(1), "one write, no fdatasync");
        u.start(batch(2, ALIGN as u64, page(2, 1))).expect("start");
        assert_eq!(ops_of(&u, 2), Some(2), "behind a batch in flight: write and fdatasync");
        for _ in 0..2 {
            u.wait().expect("done").result.expect("batch");
        }
        u.start(batch(3, 2 * ALIGN as u64, page(3, 3))).expect("start");
        assert_eq!(ops_of(&u, 3), Some(2), "three pages: write and fdatasync");
        u.wait().expect("done").result.expect("batch");
        let got = u.read_at(f, 0, 5 * ALIGN).expect("read");
        let want = [page(1, 1).to_vec(), page(2, 1).to_vec(), page(3, 3).to_vec()].concat();
        assert!(got == want, "every batch's bytes");
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_overlay_past_the_end_read_leaves_zeros_in_a_reused_buffer() {
        // A reused chunk buffer still holds another chunk's bytes; the device returned one
        // page (the file's end on disk) and a write in flight lands at 16 KiB.
        let mut buf = WriteBuf::from_slice(&vec![0xffu8; CHUNK]);
        let write = vec![7u8; ALIGN];
        let got = lay_over(&mut buf, 0, vec![(4 * ALIGN as u64, write.clone())], ALIGN);
        assert_eq!(got, 5 * ALIGN);
        assert!(buf[ALIGN..4 * ALIGN].iter().all(|&b| b == 0), "nothing on disk between");
        assert_eq!(&buf[4 * ALIGN..5 * ALIGN], &write[..]);
        assert_eq!(buf[0], 0xff, "what the device returned is kept");
    }

    /// A write goes to the device from the store's own buffer, and the buffer comes back
    /// (same memory, emptied) for the next batch once the batch is done; what was
    /// written is on disk.
    #[test]
    fn write_buffers_are_written_in_place_and_come_back() {
        let Some((dir, mut u)) = fresh_ring("wbuf") else { return };
        let (f, _) = u.open("b.blk", true).expect("open");
        let mut data = u.write_buf();
        assert!(data.is_empty());
        let bytes: Vec<u8> = (0..3 * ALIGN).map(|i| (i % 251) as u8).collect();
        data.extend_from_slice(&bytes);
        let mem = data.as_slice().as_ptr();
        let ops = vec![Op::Write { file: f, off: 0, data }, Op::Sync { file: f }];
        u.start(Batch { token: 1, ops }).expect("start");
        assert_eq!(u.wait().map(|d| (d.token, d.result.is_ok())), Some((1, true)));
        let again = u.write_buf();
        assert!(again.is_empty(), "handed back empty");
        assert!(again.capacity() >= 3 * ALIGN);
        assert_eq!(again.as_slice().as_ptr(), mem, "the written buffer's memory comes back");
        // A misaligned buffer cannot reach the backend through `WriteBuf`; what was
        // written is what the file holds.
        assert_eq!(u.read_at(f, 0, 3 * ALIGN).expect("read"), bytes);
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An idle store gives back its cached chunks and spare write buffers at the second
    /// trim without reads or writes (the first one after activity keeps them), and reads
    /// and writes work as before afterwards.
    #[test]
    fn trimming_an_idle_store_gives_back_its_memory() {
        let Some((dir, mut u)) = fresh_ring("trim") else { return };
        if !u.direct_reads() {
            eprintln!("skipped: buffered reads here (no cache)");
            return;
        }
        let (f, _) = u.open("t.blk", true).expect("open");
        let bytes: Vec<u8> = (0..4 * CHUNK).map(|i| (i % 253) as u8).collect();
        let mut data = u.write_buf();
        data.extend_from_slice(&bytes);
        u.start(Batch {
            token: 1,
            ops: vec![Op::Write { file: f, off: 0, data }, Op::Sync { file: f }],
        })
        .expect("start");
        assert!(u.wait().is_some_and(|d| d.result.is_ok()));
        for k in 0..4 {
            let got = u.read_shared(f, (k * CHUNK + 100) as u64, 1000).expect("read");
            assert_eq!(&got[..], &bytes[k * CHUNK + 100..k * CHUNK + 1100]);
        }
        assert!(u.cache.len() > 0, "reads filled the cache");
        assert!(!u.spare.is_empty(), "the batch's buffer is kept");
        u.trim();
        assert!(
            u.cache.len() > 0 && !u.spare.is_empty(),
            "used since the last trim: kept"
        );
        u.trim();
        assert_eq!(u.cache.len(), 0, "idle: the cache is empty");
        assert_eq!(u.cache.limit(), cache::BASE_CHUNKS);
        assert!(u.spare.is_empty(), "idle: no spare write buffer");
        // Reads after the trim fill it again; a read keeps the next trim from emptying it.
        // (a lone read far from the last is served uncached: two in a row)
        for off in [5usize, 15] {
            let got = u.read_shared(f, off as u64, 10).expect("read");
            assert_eq!(&got[..], &bytes[off..off + 10]);
        }
        assert!(u.cache.len() > 0);
        u.trim();
        assert!(u.cache.len() > 0);
        drop(u);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
