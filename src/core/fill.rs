//! Appending a frame's pieces to a vector with one capacity check for the whole frame.
//!
//! A delivered `MSG` frame is eight or nine pieces (`MSG `, the subject, the sid, the
//! size, the payload, the separators). Appended with `Vec::extend_from_slice` one by one,
//! each piece paid the vector's capacity check, its length update and, for the short ones
//! (a sid of one digit, a size of two), a `memcpy` call: a third of the instructions of a
//! delivery to one subscriber. [`Fill`] reserves the frame's room once and copies the
//! pieces into it; short pieces of up to four bytes are stored by moves of a known size.
//!
//! The reservation is an estimate from the caller. A piece that would pass it is appended
//! the ordinary way (the vector grows), so a wrong estimate costs speed, never bytes.

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

    /// Bytes of reserved room left.
    #[inline(always)]
    fn room(&self) -> usize {
        self.end as usize - self.at as usize
    }

    /// Append `s`. Up to 32 bytes (a subject, a small payload) are copied by two moves
    /// of a known size that overlap as needed, without a `memcpy` call (whose call alone
    /// cost more than such a copy, and made the caller keep its state on the stack).
    #[inline(always)]
    pub fn put(&mut self, s: &[u8]) {
        let n = s.len();
        if n > self.room() {
            return self.spill(s);
        }
        let (src, dst) = (s.as_ptr(), self.at);
        // SAFETY: `dst..dst + n` lies in the vector's spare capacity (checked just above
        // against `end`, its end), which `s`, a shared borrow, cannot overlap. Each arm
        // reads only within `src..src + n` (its two moves start at 0 and at `n` less
        // their size, which the arm's bounds on `n` keep at or above 0) and writes the
        // same offsets of `dst`.
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
            self.at = dst.add(n);
        }
    }

    /// Append `s`, usually one to four bytes (a sid, a size): stored by moves of a known
    /// size rather than a `memcpy` call.
    #[inline(always)]
    pub fn put_short(&mut self, s: &[u8]) {
        if s.len() > self.room() {
            return self.spill(s);
        }
        // SAFETY: as in `put`: `at..at + s.len()` is spare capacity, checked above; each
        // arm writes exactly `s.len()` bytes.
        unsafe {
            match *s {
                [a] => self.at.write(a),
                [a, b] => self.at.cast::<[u8; 2]>().write_unaligned([a, b]),
                [a, b, c] => self.at.cast::<[u8; 3]>().write_unaligned([a, b, c]),
                [a, b, c, d] => self.at.cast::<[u8; 4]>().write_unaligned([a, b, c, d]),
                _ => std::ptr::copy_nonoverlapping(s.as_ptr(), self.at, s.len()),
            }
            self.at = self.at.add(s.len());
        }
    }

    /// Past the reservation: what was written joins the vector, and `s` is appended to
    /// it the ordinary way (and the room is whatever the vector has spare after).
    #[cold]
    #[inline(never)]
    fn spill(&mut self, s: &[u8]) {
        self.commit();
        self.vec.extend_from_slice(s);
        let spare = self.vec.spare_capacity_mut().as_mut_ptr_range();
        self.at = spare.start.cast();
        self.end = spare.end.cast();
    }

    #[inline(always)]
    fn commit(&mut self) {
        let written = self.at as usize - self.vec.as_ptr() as usize;
        // SAFETY: `at` only moved forward from the start of the spare capacity, over
        // bytes `put` and `put_short` wrote, and never past `end` (its end): so the
        // first `written` bytes are initialized and within the capacity. (The vector is
        // borrowed mutably by the `Fill` and so not reallocated but by `spill`, which
        // commits first and takes the new room after.)
        unsafe { self.vec.set_len(written) };
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
        self.commit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_in_order_within_and_past_the_reservation() {
        for most in [0usize, 1, 5, 12, 64] {
            let mut v = b"ab".to_vec();
            {
                let mut f = Fill::new(&mut v, most);
                f.put(b"MSG ");
                f.put_short(b"7");
                f.put_short(b"12");
                f.put_short(b"345");
                f.put_short(b"6789");
                f.put_short(b"abcdefgh");
                f.put(b"");
                f.put_short(b"");
                f.put(&[b'x'; 40]);
            }
            let mut want = b"abMSG 7123456789abcdefgh".to_vec();
            want.extend_from_slice(&[b'x'; 40]);
            assert_eq!(v, want, "reservation {most}");
        }
    }

    #[test]
    fn every_length_is_copied_whole() {
        let src: Vec<u8> = (0..80u8).collect();
        for n in 0..=80 {
            for most in [0, n, n + 3] {
                let mut v = vec![0xee];
                {
                    let mut f = Fill::new(&mut v, most);
                    f.put(&src[..n]);
                    f.put(b"|");
                    f.put_short(&src[..n.min(9)]);
                }
                let mut want = vec![0xee];
                want.extend_from_slice(&src[..n]);
                want.push(b'|');
                want.extend_from_slice(&src[..n.min(9)]);
                assert_eq!(v, want, "length {n}, reservation {most}");
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
