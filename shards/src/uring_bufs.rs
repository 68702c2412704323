//! A shard's provided-buffer ring (io_uring `IORING_REGISTER_PBUF_RING`): the buffers the
//! kernel fills for the shard's multishot receives, handed back one by one once the core
//! has taken their bytes.
//!
//! The ring is an array of `{addr, len, bid}` entries the kernel consumes from its head and
//! we refill at its tail (the tail index sits in the first entry's reserved field). The
//! buffers are one allocation carved into equal slots; slot `bid` is always buffer `bid`.
//!
//! The pool grows on demand: only a few buffers are handed to the kernel at first, and more
//! (doubling) once fewer than a quarter of those are free. The allocation is zeroed memory
//! the process does not touch until the kernel writes a buffer, so a shard with little
//! traffic keeps little of it resident (recycled buffers go back into the ring and are
//! used again, so the buffers ever handed out are the ones that cost memory).

use io_uring::types::BufRingEntry;
use io_uring::Submitter;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// The ring entries (page-aligned memory the kernel reads) and the buffers behind them.
pub struct BufRing {
    entries: *mut BufRingEntry,
    map_len: usize,
    count: u16,
    size: usize,
    /// Our tail (published to the kernel after each refill).
    tail: u16,
    bufs: Box<[u8]>,
    bgid: u16,
    /// Buffers the kernel may pick now.
    free: usize,
    /// Buffers never handed to the kernel yet, the lowest id last.
    reserve: Vec<u16>,
}

// SAFETY: the ring memory is owned by this value and only touched by the thread that
// owns it (a shard); the kernel is the only other party.
unsafe impl Send for BufRing {}

impl BufRing {
    /// Up to `count` buffers (a power of two, at most 32,768) of `size` bytes each,
    /// registered with `submitter` as buffer group `bgid`; `initial` of them (at least one)
    /// are handed to the kernel now, the rest as the traffic needs them.
    pub fn new(submitter: &Submitter<'_>, count: u16, size: usize, bgid: u16, initial: u16) -> io::Result<BufRing> {
        if !count.is_power_of_two() || count > 1 << 15 || size == 0 || size > u32::MAX as usize {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let map_len = (usize::from(count) * std::mem::size_of::<BufRingEntry>()).next_multiple_of(4096);
        // SAFETY: an anonymous private mapping, checked below; unmapped in `drop`.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = BufRing {
            entries: addr.cast(),
            map_len,
            count,
            size,
            tail: 0,
            bufs: vec![0u8; usize::from(count) * size].into_boxed_slice(),
            bgid,
            free: 0,
            reserve: (initial.clamp(1, count)..count).rev().collect(),
        };
        // SAFETY: `entries` points at `map_len` bytes that stay mapped until `drop`, which
        // unregisters the ring first.
        unsafe { submitter.register_buf_ring_with_flags(addr as u64, count, bgid, 0)? };
        for bid in 0..initial.clamp(1, count) {
            ring.put(bid);
        }
        ring.publish();
        Ok(ring)
    }

    pub fn group(&self) -> u16 {
        self.bgid
    }

    /// Buffers the kernel can still fill.
    pub fn free(&self) -> usize {
        self.free
    }

    /// The first `len` bytes of buffer `bid` (what a completion reported).
    pub fn get(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * self.size;
        self.bufs.get(start..start + len.min(self.size)).unwrap_or_default()
    }

    /// Hand buffer `bid` back to the kernel.
    pub fn recycle(&mut self, bid: u16) {
        if bid < self.count {
            self.put(bid);
            self.publish();
        }
    }

    /// Buffers handed to the kernel so far (free, or taken and not yet recycled).
    pub fn posted(&self) -> usize {
        usize::from(self.count) - self.reserve.len()
    }

    /// The kernel took a buffer. When fewer than a quarter of the buffers handed out are
    /// free, the pool grows.
    pub fn taken(&mut self) {
        self.free = self.free.saturating_sub(1);
        if self.free * 4 < self.posted() {
            self.grow();
        }
    }

    /// Hands the kernel as many new buffers as it has now (or what is left).
    pub fn grow(&mut self) {
        let n = self.posted().min(self.reserve.len());
        for _ in 0..n {
            if let Some(bid) = self.reserve.pop() {
                self.put(bid);
            }
        }
        if n > 0 {
            self.publish();
        }
    }

    fn put(&mut self, bid: u16) {
        let idx = usize::from(self.tail & (self.count - 1));
        let addr = self.bufs.as_ptr() as u64 + (usize::from(bid) * self.size) as u64;
        // SAFETY: `idx < count`, inside the mapping; the kernel reads this entry only after
        // the tail that covers it is published.
        let e = unsafe { &mut *self.entries.add(idx) };
        e.set_addr(addr);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.free += 1;
    }

    fn publish(&self) {
        // SAFETY: the tail field of the first entry, inside the mapping, is 2-byte aligned
        // and is only written by us; the kernel reads it with acquire ordering.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// Unregister from `submitter` (before the memory goes).
    pub fn unregister(&self, submitter: &Submitter<'_>) {
        let _ = submitter.unregister_buf_ring(self.bgid);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the owner unregisters the ring (or closes it)
        // before dropping us.
        unsafe {
            libc::munmap(self.entries.cast(), self.map_len);
        }
    }
}
