//! [`WriteBuf`]: bytes in memory whose first byte is 4096-aligned, as O_DIRECT wants
//! them. A batch's writes carry their bytes in one, so an O_DIRECT backend hands it to
//! the kernel as it is (no copy into aligned memory), and a backend may give written
//! buffers back to the store for its next batch ([`super::Io::write_buf`]) with their
//! pages still mapped. The io_uring backend's reads and read cache use the same type.

use std::fmt;

/// Alignment of a buffer's first byte (the largest logical block size a direct backend
/// needs).
pub const BUF_ALIGN: usize = 4096;

/// A growable byte buffer that starts on a [`BUF_ALIGN`] boundary.
///
/// `mem[start..]` are the bytes; `mem[..start]` is padding up to the boundary. Growth
/// goes through [`WriteBuf::reserve`], which moves the bytes to new aligned memory, so
/// the vector never reallocates on its own (a reallocation would lose the alignment).
#[derive(Default)]
pub struct WriteBuf {
    mem: Vec<u8>,
    start: usize,
}

impl WriteBuf {
    /// An empty buffer (no memory until bytes are added).
    pub fn new() -> WriteBuf {
        WriteBuf::default()
    }

    /// An empty buffer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> WriteBuf {
        let mut b = WriteBuf::new();
        b.reserve(cap);
        b
    }

    /// `len` zero bytes (fresh zeroed memory: large buffers cost no writes of zeros).
    pub fn zeroed(len: usize) -> WriteBuf {
        let mut mem = vec![0u8; len + BUF_ALIGN];
        let start = (BUF_ALIGN - (mem.as_ptr() as usize % BUF_ALIGN)) % BUF_ALIGN;
        mem.truncate(start + len);
        WriteBuf { mem, start }
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> WriteBuf {
        let mut b = WriteBuf::with_capacity(data.len());
        b.extend_from_slice(data);
        b
    }

    pub fn len(&self) -> usize {
        self.mem.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the buffer holds without moving.
    pub fn capacity(&self) -> usize {
        self.mem.capacity().saturating_sub(self.start)
    }

    pub fn as_slice(&self) -> &[u8] {
        self.mem.get(self.start..).unwrap_or(&[])
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let start = self.start;
        self.mem.get_mut(start..).unwrap_or(&mut [])
    }

    /// Drop the bytes, keep the memory.
    pub fn clear(&mut self) {
        self.mem.truncate(self.start);
    }

    /// Make room for `extra` more bytes without a move.
    pub fn reserve(&mut self, extra: usize) {
        let len = self.len();
        if self.mem.capacity() - self.mem.len() >= extra {
            return;
        }
        let want = len.saturating_add(extra).max(len.saturating_mul(2)).max(BUF_ALIGN);
        let mut mem = Vec::with_capacity(want + BUF_ALIGN);
        let start = (BUF_ALIGN - (mem.as_ptr() as usize % BUF_ALIGN)) % BUF_ALIGN;
        mem.resize(start, 0);
        mem.extend_from_slice(self.as_slice());
        *self = WriteBuf { mem, start };
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.reserve(data.len());
        self.mem.extend_from_slice(data);
    }

    /// Grow with zeros (or cut) to `len` bytes.
    pub fn resize(&mut self, len: usize) {
        self.reserve(len.saturating_sub(self.len()));
        self.mem.resize(self.start + len, 0);
    }

    /// Whether the first byte is on a [`BUF_ALIGN`] boundary (always, once the buffer
    /// has memory).
    pub fn is_aligned(&self) -> bool {
        self.as_slice().as_ptr() as usize % BUF_ALIGN == 0
    }
}

impl std::ops::Deref for WriteBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for WriteBuf {
    /// A copy of `v` in aligned memory.
    fn from(v: Vec<u8>) -> WriteBuf {
        WriteBuf::from_slice(&v)
    }
}

impl fmt::Debug for WriteBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBuf").field("len", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_aligned_through_growth_and_reuse() {
        let mut b = WriteBuf::new();
        assert!(b.is_empty());
        let mut want = Vec::new();
        for i in 0..5000u32 {
            let piece = [(i % 251) as u8; 37];
            b.extend_from_slice(&piece);
            want.extend_from_slice(&piece);
            assert!(b.is_aligned());
        }
        assert_eq!(b.as_slice(), &want[..]);
        let cap = b.capacity();
        let ptr = b.as_slice().as_ptr();
        b.clear();
        b.extend_from_slice(&want[..1000]);
        assert_eq!(b.capacity(), cap, "a cleared buffer keeps its memory");
        assert_eq!(b.as_slice().as_ptr(), ptr);
        b.resize(4096);
        assert!(b.is_aligned());
        assert_eq!(&b[..1000], &want[..1000]);
        assert!(b[1000..].iter().all(|&x| x == 0));
        b.resize(10);
        assert_eq!(b.len(), 10);
        assert_eq!(WriteBuf::from(vec![7u8; 9000]).as_slice(), &[7u8; 9000][..]);
        assert!(WriteBuf::from_slice(&[1]).is_aligned());
        let z = WriteBuf::zeroed(3 * BUF_ALIGN + 5);
        assert!(z.is_aligned());
        assert_eq!(z.len(), 3 * BUF_ALIGN + 5);
        assert!(z.iter().all(|&x| x == 0));
    }
}
