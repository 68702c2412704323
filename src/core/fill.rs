//! Appending a frame's pieces to a vector with one capacity check for the whole frame.
//!
//! A delivered `MSG` frame is nine to eleven pieces (`MSG `, the subject, the sid, the
//! size, the payload, the separators). Appended with `Vec::extend_from_slice` one by one,
//! each piece paid the vector's capacity check and length update and, for the short ones
//! (a sid of one digit, a size of two), a `memcpy` call: a third of the instructions of a
//! delivery to one subscriber. [`Fill`] reserves the frame's room once and copies the
//! pieces into it; pieces of up to 32 bytes are copied by moves of a known size (no call).
//!
//! The caller adds up the frame's pieces' lengths for [`Fill::new`] and puts exactly those
//! pieces ([`Fill::put_unchecked`]; `core::shard::route`'s `MSG` and `HMSG` frames and
//! frame heads): one capacity check for the frame, none per piece.

/// Pieces appended to `vec` past its length; they join it when the `Fill` is dropped.
pub struct Fill<'a> {
    vec: &'a mut Vec<u8>,
    /// Where the next piece goes, within the reserved room.
    at: *mut u8,
    /// The end of the reserved room.
    end: *mut u8,
}

impl<'a> Fill<'a> {
    /// Room for `most` bytes, reserved once.
    #[inline(always)]
    pub fn new(vec: &'a mut Vec<u8>, most: usize) -> Self {
        vec.reserve(most);
        let spare = vec.spare_capacity_mut().as_mut_ptr_range();
        Fill {
            at: spare.start.cast(),
            end: spare.end.cast(),
            vec,
        }
    }

    /// Bytes of reserved room left (checked in debug builds).
    #[inline(always)]
    fn room(&self) -> usize {
        self.end as usize - self.at as usize
    }

    /// Append `s` without checking the room: for a frame whose pieces' lengths were
    /// added up for [`Fill::new`]. Up to 32 bytes (a subject, a small payload) are copied
    /// by two moves of a known size that overlap as needed, without a `memcpy` call (whose
    /// call alone cost more than such a copy, and made the caller keep its state on the
    /// stack).
    ///
    /// # Safety
    /// The bytes put since `new` (this piece included) must not exceed its `most`.
    #[inline(always)]
    pub unsafe fn put_unchecked(&mut self, s: &[u8]) {
        let n = s.len();
        debug_assert!(n <= self.room());
        // SAFETY: `at..at + n` is within the reserved room by the caller's contract, and
        // `s`, a shared borrow, cannot overlap the vector's spare capacity.
        unsafe {
            copy_small(s.as_ptr(), self.at, n);
            self.at = self.at.add(n);
        }
    }
}

/// Copy `n` bytes from `src` to `dst`: up to 32 by moves of a known size (overlapping as
/// needed), more by `memcpy`.
///
/// # Safety
/// `src..src + n` must be readable, `dst..dst + n` writable, and the two must not overlap.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: each arm reads only within `src..src + n` and writes the same offsets of
    // `dst` (its moves start at 0, at `n / 2` or at `n` less their size, which the arm's
    // bounds on `n` keep at or above 0), as the caller allows.
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                dst.write(*src);
                dst.add(n / 2).write(*src.add(n / 2));
                dst.add(n - 1).write(*src.add(n - 1));
            }
            4..=7 => move_pair::<4>(src, dst, n),
            8..=15 => move_pair::<8>(src, dst, n),
            16..=32 => move_pair::<16>(src, dst, n),
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Copy `n` bytes (`K <= n <= 2 * K`) from `src` to `dst` as the first `K` and the last
/// `K` (overlapping when `n < 2 * K`).
///
/// # Safety
/// `src..src + n` must be readable, `dst..dst + n` writable, and `K <= n <= 2 * K`.
#[inline(always)]
unsafe fn move_pair<const K: usize>(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: by the caller's contract both moves stay within the `n` bytes of each side
    // (`n - K` is at least 0 and the second move ends at `n`).
    unsafe {
        let head = src.cast::<[u8; K]>().read_unaligned();
        let tail = src.add(n - K).cast::<[u8; K]>().read_unaligned();
        dst.cast::<[u8; K]>().write_unaligned(head);
        dst.add(n - K).cast::<[u8; K]>().write_unaligned(tail);
    }
}

impl Drop for Fill<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let written = self.at as usize - self.vec.as_ptr() as usize;
        // SAFETY: `at` only moved forward from the start of the spare capacity, over
        // bytes `put_unchecked` wrote, and never past `end` (its callers' contract): so
        // the first `written` bytes are initialized and within the capacity. (The vector
        // is borrowed mutably by the `Fill`, so nothing reallocates it meanwhile.)
        unsafe { self.vec.set_len(written) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_in_order() {
        let pieces: [&[u8]; 8] = [b"MSG ", b"7", b"12", b"345", b"6789", b"abcdefgh", b"", &[b'x'; 40]];
        let mut v = b"ab".to_vec();
        {
            let mut f = Fill::new(&mut v, pieces.iter().map(|p| p.len()).sum());
            for p in pieces {
                // SAFETY: the pieces' lengths were added up for `new`.
                unsafe { f.put_unchecked(p) };
            }
        }
        let mut want = b"abMSG 7123456789abcdefgh".to_vec();
        want.extend_from_slice(&[b'x'; 40]);
        assert_eq!(v, want);
    }

    #[test]
    fn unchecked_pieces_fill_an_exact_reservation() {
        let src: Vec<u8> = (0..80u8).collect();
        for n in 0..=80 {
            for before in [0usize, 5, 64] {
                let mut v = vec![0xee; before];
                v.shrink_to_fit();
                {
                    let mut f = Fill::new(&mut v, n + 3);
                    // SAFETY: 1 + n + 2 bytes, as reserved.
                    unsafe {
                        f.put_unchecked(b"<");
                        f.put_unchecked(&src[..n]);
                        f.put_unchecked(b">\n");
                    }
                }
                let mut want = vec![0xee; before];
                want.push(b'<');
                want.extend_from_slice(&src[..n]);
                want.extend_from_slice(b">\n");
                assert_eq!(v, want, "length {n} after {before}");
            }
        }
    }

    #[test]
    fn nothing_put_leaves_the_vector_as_it_was() {
        let mut v = b"keep".to_vec();
        drop(Fill::new(&mut v, 100));
        assert_eq!(v, b"keep");
    }
}
