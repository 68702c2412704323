//! The read cache of one io_uring store: chunks of [`CHUNK`] bytes of its block files,
//! found by (file, chunk index) in a map, least recently used out.
//!
//! A store starts with room for [`BASE_CHUNKS`] (1 MiB), enough for readers going through
//! a stream once (a consumer: each chunk is read once, ahead of it). It grows, up to
//! [`CACHE_CHUNKS`] (16 MiB), only when it misses on a chunk it evicted recently (the keys
//! of the last evicted chunks are remembered): readers coming back to what they read (KV
//! gets cycling over their keys, several consumers at different places) get a cache that
//! holds their working set, and a single pass does not fill memory with chunks never read
//! again. All the stores together hold at most the process-wide budget
//! ([`PROCESS_CHUNKS`] by default); past it a store recycles its own chunks.
//!
//! Buffers of dropped chunks are kept (a few) for the next reads, so a store reading
//! through a stream larger than its cache neither allocates nor zeroes 64 KiB per miss.
//!
//! Owned by the store's [`Uring`](super::Uring), on the store's shard; only the count of
//! cached chunks is shared (an atomic), for the budget.

use super::{FileNo, WriteBuf, CHUNK};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Chunks a store may cache at first (1 MiB).
pub const BASE_CHUNKS: usize = 16;
/// Chunks a store may cache at most (16 MiB), after misses on chunks it evicted, while the
/// process-wide budget has room: enough for a KV bucket of ten thousand 1 KiB values read
/// over and over (with 1 MiB, such a cycle missed on every chunk, and each miss cost a
/// device read and a fresh buffer).
pub const CACHE_CHUNKS: usize = 256;
/// Chunks cached by all the stores of the process together, by default (128 MiB): past
/// it a store recycles its own least recently used chunk instead of taking a new one (it
/// may still take its first), so hundreds of streams cannot hold 16 MiB each.
pub const PROCESS_CHUNKS: usize = 2048;
/// Buffers of dropped chunks kept for the next misses and read-aheads (no allocation, no
/// zeroing, pages already mapped).
const FREE_CHUNKS: usize = 8;

/// Chunks held by every store's cache, and the budget for them.
static CACHED_CHUNKS: AtomicUsize = AtomicUsize::new(0);
static CHUNK_BUDGET: AtomicUsize = AtomicUsize::new(PROCESS_CHUNKS);

/// Chunks cached in the whole process now.
pub fn cached_chunks() -> usize {
    CACHED_CHUNKS.load(Ordering::Relaxed)
}

/// Change the process-wide chunk budget (default [`PROCESS_CHUNKS`]).
pub fn set_chunk_budget(chunks: usize) {
    CHUNK_BUDGET.store(chunks, Ordering::Relaxed);
}

/// A cached chunk of a file: `valid` bytes from `idx * CHUNK`. Its buffer is shared with
/// the windows handed out ([`Chunk::window`]); it never changes once cached (a write drops
/// the chunk instead).
pub(super) struct Chunk {
    pub file: FileNo,
    pub idx: u64,
    /// The buffer, for reuse once the chunk and every window of it are gone.
    buf: Arc<WriteBuf>,
    /// The same buffer as `Bytes`, made once: a window is a slice of it (a count
    /// incremented, no allocation).
    bytes: Bytes,
    pub valid: usize,
    used: u64,
}

/// A chunk's buffer as the owner of [`Bytes`] windows.
struct Shared(Arc<WriteBuf>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

impl Chunk {
    fn new(file: FileNo, idx: u64, buf: WriteBuf, valid: usize, used: u64) -> Chunk {
        let buf = Arc::new(buf);
        Chunk {
            file,
            idx,
            bytes: Bytes::from_owner(Shared(Arc::clone(&buf))),
            buf,
            valid,
            used,
        }
    }

    /// The chunk's bytes (the valid ones first).
    pub fn data(&self) -> &[u8] {
        &self.bytes
    }

    /// `len` bytes from `from`, without a copy: the buffer stays alive (out of the
    /// cache's reuse) while the window does. `None` past the valid bytes.
    pub fn window(&self, from: usize, len: usize) -> Option<Bytes> {
        if from.checked_add(len)? > self.valid {
            return None;
        }
        Some(self.bytes.slice(from..from + len))
    }
}

pub(super) struct ChunkCache {
    chunks: Vec<Chunk>,
    /// Where each chunk is in `chunks`, by (file, chunk index).
    at: HashMap<(FileNo, u64), usize, ahash::RandomState>,
    /// Buffers of dropped chunks, for the next reads of a chunk.
    free: Vec<WriteBuf>,
    tick: u64,
    /// Chunks this store may hold now (from [`BASE_CHUNKS`] up to [`CACHE_CHUNKS`]).
    limit: usize,
    /// Keys of the chunks evicted last (at most [`CACHE_CHUNKS`]), oldest first: a miss
    /// on one of them means the cache is smaller than what its readers come back to.
    ghosts: std::collections::VecDeque<(FileNo, u64)>,
    ghost_set: std::collections::HashSet<(FileNo, u64), ahash::RandomState>,
}

impl Default for ChunkCache {
    fn default() -> ChunkCache {
        ChunkCache {
            chunks: Vec::new(),
            at: HashMap::default(),
            free: Vec::new(),
            tick: 0,
            limit: BASE_CHUNKS,
            ghosts: std::collections::VecDeque::new(),
            ghost_set: Default::default(),
        }
    }
}

impl ChunkCache {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// The position of chunk `idx` of `file`, if cached (and it is now the most recently
    /// used).
    pub fn find(&mut self, file: FileNo, idx: u64) -> Option<usize> {
        let i = *self.at.get(&(file, idx))?;
        self.tick += 1;
        if let Some(c) = self.chunks.get_mut(i) {
            c.used = self.tick;
        }
        Some(i)
    }

    pub fn contains(&self, file: FileNo, idx: u64) -> bool {
        self.at.contains_key(&(file, idx))
    }

    pub fn get(&self, i: usize) -> Option<&Chunk> {
        self.chunks.get(i)
    }

    /// A [`CHUNK`]-sized buffer to read into: a free one if any (its bytes are stale;
    /// readers only use what a read or an overlay filled), else a new zeroed one.
    pub fn buffer(&mut self) -> WriteBuf {
        self.free.pop().unwrap_or_else(|| WriteBuf::zeroed(CHUNK))
    }

    /// Cache chunk `idx` of `file` (not cached yet), read into `buf` with `valid` bytes;
    /// returns its position.
    pub fn insert(&mut self, file: FileNo, idx: u64, buf: WriteBuf, valid: usize) -> usize {
        self.tick += 1;
        if self.ghost_set.remove(&(file, idx)) && self.limit < CACHE_CHUNKS {
            // Read again soon after it was evicted: one chunk more.
            self.limit += 1;
        }
        let c = Chunk::new(file, idx, buf, valid, self.tick);
        // A store may always hold its first chunk, whatever the budget.
        let room = self.chunks.is_empty() || cached_chunks() < CHUNK_BUDGET.load(Ordering::Relaxed);
        // Full: the least recently used chunk makes room (a scan, but only on a miss,
        // which cost a device read or a read-ahead anyway).
        let full = self.chunks.len() >= self.limit || !room;
        let lru = if full {
            self.chunks
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.used)
                .map(|(i, _)| i)
        } else {
            None
        };
        let Some((lru, slot)) = lru.and_then(|i| Some((i, self.chunks.get_mut(i)?))) else {
            CACHED_CHUNKS.fetch_add(1, Ordering::Relaxed);
            self.at.insert((file, idx), self.chunks.len());
            self.chunks.push(c);
            return self.chunks.len() - 1;
        };
        let old = std::mem::replace(slot, c);
        self.at.remove(&(old.file, old.idx));
        self.at.insert((file, idx), lru);
        self.remember_evicted((old.file, old.idx));
        self.reclaim(old);
        lru
    }

    /// Drop the chunks of `file` that overlap `[off, off + len)` (all of them with `None`).
    pub fn invalidate(&mut self, file: FileNo, range: Option<(u64, u64)>) {
        let chunk = CHUNK as u64;
        let span = range.map(|(off, len)| (off / chunk, off.saturating_add(len).div_ceil(chunk)));
        match span {
            Some((first, end)) if end.saturating_sub(first) <= self.chunks.len() as u64 => {
                for idx in first..end {
                    if let Some(i) = self.at.get(&(file, idx)).copied() {
                        self.remove(i);
                    }
                }
            }
            _ => {
                let mut i = 0;
                while let Some(c) = self.chunks.get(i) {
                    if c.file == file && span.is_none_or(|(first, end)| (first..end).contains(&c.idx)) {
                        self.remove(i);
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }

    /// Drop every chunk.
    pub fn clear(&mut self) {
        uncount(self.chunks.len());
        self.chunks.clear();
        self.at.clear();
    }

    /// Back to the size of a new cache: no chunks, no spare buffers, no memory of
    /// evictions (the growth it earned is forgotten).
    pub fn shrink(&mut self) {
        // The old cache's drop takes its chunks off the process-wide count.
        *self = ChunkCache::default();
    }

    /// Keep `buf` (a chunk's buffer no longer used) for a later read, if there is room.
    pub fn recycle(&mut self, buf: WriteBuf) {
        if self.free.len() < FREE_CHUNKS && buf.len() == CHUNK {
            self.free.push(buf);
        }
    }

    fn remember_evicted(&mut self, key: (FileNo, u64)) {
        if self.ghost_set.insert(key) {
            self.ghosts.push_back(key);
        }
        while self.ghosts.len() > CACHE_CHUNKS {
            if let Some(old) = self.ghosts.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }

    /// Chunks this store may hold now.
    #[cfg(test)]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A dropped chunk's buffer, reused unless a window of it is still out.
    fn reclaim(&mut self, chunk: Chunk) {
        let Chunk { buf, bytes, .. } = chunk;
        drop(bytes);
        if let Ok(buf) = Arc::try_unwrap(buf) {
            self.recycle(buf);
        }
    }

    /// Remove the chunk at `i` (the last one takes its place).
    fn remove(&mut self, i: usize) {
        if i >= self.chunks.len() {
            return;
        }
        let c = self.chunks.swap_remove(i);
        self.at.remove(&(c.file, c.idx));
        if let Some(moved) = self.chunks.get(i) {
            self.at.insert((moved.file, moved.idx), i);
        }
        uncount(1);
        self.reclaim(c);
    }
}

impl Drop for ChunkCache {
    fn drop(&mut self) {
        self.clear();
    }
}

fn uncount(chunks: usize) {
    if chunks > 0 {
        CACHED_CHUNKS.fetch_sub(chunks, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(file: FileNo, idx: u64) -> WriteBuf {
        let mut b = WriteBuf::zeroed(CHUNK);
        b.as_mut_slice().fill((file as u64 * 31 + idx) as u8);
        b
    }

    fn holds(c: &mut ChunkCache, file: FileNo, idx: u64) -> bool {
        let Some(i) = c.find(file, idx) else { return false };
        let ch = c.get(i).expect("chunk at its position");
        assert_eq!((ch.file, ch.idx), (file, idx), "the map points at the chunk");
        assert_eq!(ch.data()[0], (file as u64 * 31 + idx) as u8, "its own bytes");
        true
    }

    /// Read chunks `0..chunks` of file 1 in order as a store does (a miss caches the
    /// chunk); returns the misses.
    fn pass(c: &mut ChunkCache, chunks: u64) -> usize {
        let mut misses = 0;
        for idx in 0..chunks {
            if !holds(c, 1, idx) {
                misses += 1;
                c.insert(1, idx, filled(1, idx), CHUNK);
            }
        }
        misses
    }

    /// A working set of 12 MiB read over and over gets cached: the second pass misses on
    /// chunks evicted in the first, which grows the cache; from the third on every read
    /// hits (with the former fixed 16 chunks, every read of such a cycle missed).
    #[test]
    fn a_cycle_over_twelve_mib_grows_the_cache_until_it_hits() {
        let mut c = ChunkCache::default();
        let chunks = 192u64;
        assert!(chunks as usize <= CACHE_CHUNKS);
        assert_eq!(pass(&mut c, chunks), 192, "first pass");
        assert_eq!(c.limit(), BASE_CHUNKS);
        assert_eq!(pass(&mut c, chunks), 192 - BASE_CHUNKS, "the last chunks stayed");
        for _ in 0..3 {
            assert_eq!(pass(&mut c, chunks), 0, "every chunk stayed cached");
        }
        assert_eq!(c.len(), chunks as usize);
    }

    /// A reader going through a stream once (a consumer) keeps the cache at its base
    /// size, however far it reads.
    #[test]
    fn a_single_pass_keeps_the_cache_at_its_base_size() {
        let mut c = ChunkCache::default();
        assert_eq!(pass(&mut c, 1000), 1000);
        assert_eq!(c.limit(), BASE_CHUNKS);
        assert_eq!(c.len(), BASE_CHUNKS);
    }

    #[test]
    fn the_least_recently_used_chunk_makes_room_and_its_buffer_is_reused() {
        let mut c = ChunkCache::default();
        for idx in 0..BASE_CHUNKS as u64 {
            c.insert(2, idx, filled(2, idx), CHUNK);
        }
        // Chunk 0 used again: chunk 1 is now the oldest.
        assert!(holds(&mut c, 2, 0));
        let n = BASE_CHUNKS as u64;
        c.insert(2, n, filled(2, n), CHUNK);
        assert!(!holds(&mut c, 2, 1), "the least recently used chunk left");
        assert!(holds(&mut c, 2, 0) && holds(&mut c, 2, n) && holds(&mut c, 2, 2));
        assert_eq!(c.len(), BASE_CHUNKS);
        // Its buffer is the next one handed out (with its stale bytes).
        assert_eq!(c.buffer()[0], (2 * 31 + 1) as u8);
        assert_eq!(c.buffer()[0], 0, "then fresh zeroed ones");
    }

    /// A window handed out keeps its chunk's bytes after the chunk leaves the cache, and
    /// the buffer is only reused once no window is left.
    #[test]
    fn a_window_outlives_its_chunk_and_holds_its_buffer_back() {
        let mut c = ChunkCache::default();
        c.insert(5, 0, filled(5, 0), 100);
        let i = c.find(5, 0).expect("cached");
        let w = c.get(i).and_then(|ch| ch.window(10, 90)).expect("window");
        assert!(
            c.get(i).and_then(|ch| ch.window(10, 91)).is_none(),
            "past the valid bytes"
        );
        assert_eq!(&w[..], &[5 * 31u8; 90][..]);
        c.invalidate(5, None);
        // Its buffer is not handed out while the window is alive: the next one is new.
        let mut next = c.buffer();
        assert_eq!(next[0], 0);
        next.as_mut_slice().fill(0xee);
        assert_eq!(&w[..], &[5 * 31u8; 90][..], "the window kept its bytes");
        // Without a window out, a dropped chunk's buffer is reused.
        c.insert(5, 1, filled(5, 1), CHUNK);
        c.invalidate(5, None);
        assert_eq!(c.buffer()[0], (5 * 31 + 1) as u8);
        drop(w);
    }

    #[test]
    fn invalidation_drops_exactly_the_overlapping_chunks_and_keeps_the_map_right() {
        let mut c = ChunkCache::default();
        c.limit = CACHE_CHUNKS;
        for file in [3, 4] {
            for idx in 0..40u64 {
                c.insert(file, idx, filled(file, idx), CHUNK);
            }
        }
        let chunk = CHUNK as u64;
        // A write over the end of chunk 5 and the start of chunk 6 of file 3.
        c.invalidate(3, Some((6 * chunk - 10, 20)));
        // A write inside chunk 39 only.
        c.invalidate(3, Some((39 * chunk + 100, 1)));
        // An empty range touches nothing; a huge one takes the scan.
        c.invalidate(3, Some((20 * chunk, 0)));
        c.invalidate(4, Some((30 * chunk, u64::MAX)));
        for idx in 0..40u64 {
            let gone3 = [5, 6, 39].contains(&idx);
            assert_eq!(holds(&mut c, 3, idx), !gone3, "file 3 chunk {idx}");
            assert_eq!(holds(&mut c, 4, idx), idx < 30, "file 4 chunk {idx}");
        }
        // A whole file.
        c.invalidate(3, None);
        assert!((0..40u64).all(|idx| !holds(&mut c, 3, idx)));
        assert!((0..30u64).all(|idx| holds(&mut c, 4, idx)));
        assert_eq!(c.len(), 30);
        c.clear();
        assert_eq!(c.len(), 0);
        assert!(!holds(&mut c, 4, 0));
    }
}
