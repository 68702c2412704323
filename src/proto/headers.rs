//! NATS message headers (`NATS/1.0\r\nKey: value\r\n...\r\n\r\n`): finding a value and
//! setting one the way nats-server does when it stamps a message (service imports'
//! `Nats-Request-Info`, later JetStream's headers).

/// The status line of a header block without a status.
pub const HDR_LINE: &[u8] = b"NATS/1.0\r\n";

/// Where the lines after the status line start: just after each `\r\n`. Used for
/// every header lookup and for the trace check of every HPUB, so the `\n`s are found
/// eight bytes at a time (a `memchr` call per line cost 40 % more on an HPUB).
pub fn line_starts(hdr: &[u8]) -> impl Iterator<Item = usize> + '_ {
    Newlines {
        hdr,
        next: 0,
        word_at: 0,
        mask: 0,
    }
    .filter(move |&i| i > 0 && hdr.get(i - 1) == Some(&b'\r'))
    .map(|i| i + 1)
}

/// The positions of the `\n` bytes of `hdr`, in order.
struct Newlines<'a> {
    hdr: &'a [u8],
    /// Where the next word starts.
    next: usize,
    /// Where the word of `mask` starts.
    word_at: usize,
    /// Candidates in that word: the top bit of each byte that may be a `\n`.
    mask: u64,
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        loop {
            if self.mask != 0 {
                let i = self.word_at + self.mask.trailing_zeros() as usize / 8;
                self.mask &= self.mask - 1;
                // A byte just above a `\n` may be a false candidate: checked here.
                if self.hdr.get(i) == Some(&b'\n') {
                    return Some(i);
                }
                continue;
            }
            let at = self.next;
            if let Some(w) = self.hdr.get(at..).and_then(|r| r.first_chunk::<8>()) {
                // A zero byte of `x` is a `\n` of the word.
                let x = u64::from_le_bytes(*w) ^ (ONES * u64::from(b'\n'));
                self.mask = x.wrapping_sub(ONES) & !x & (ONES << 7);
                self.word_at = at;
                self.next = at + 8;
                continue;
            }
            let i = at + self.hdr.get(at..)?.iter().position(|&b| b == b'\n')?;
            self.next = i + 1;
            return Some(i);
        }
    }
}

/// Where `key` starts in `hdr`: at a line start (after `\r\n`) and followed by `:`.
/// Keys match exactly (nats-server's lookups are case sensitive).
///
/// Walks the line starts rather than searching for `key` with `memmem::find`, which
/// built a searcher per call: JetStream looks up about ten headers per stored message.
fn key_index(key: &[u8], hdr: &[u8]) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    line_starts(hdr)
        .find(|&start| hdr.get(start..start + key.len()) == Some(key) && hdr.get(start + key.len()) == Some(&b':'))
}

/// Whether some header's name starts with `prefix` (a cheap test before lookups).
pub fn has_key_starting(hdr: &[u8], prefix: &str) -> bool {
    line_starts(hdr).any(|start| hdr.get(start..).is_some_and(|r| r.starts_with(prefix.as_bytes())))
}

/// The value of `key` in the header block `hdr` (leading spaces skipped), if present.
pub fn get<'a>(hdr: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let start = key_index(key.as_bytes(), hdr)? + key.len() + 1;
    let rest = hdr.get(start..)?;
    let skip = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    let rest = rest.get(skip..)?;
    let end = memchr::memchr(b'\r', rest).unwrap_or(rest.len());
    rest.get(..end)
}

/// `hdr` without its `key` lines.
pub fn without_key(hdr: &[u8], key: &str) -> Vec<u8> {
    without(hdr, key.as_bytes())
}

/// Remove every `key: ...\r\n` line of `hdr` (a block ending in the blank line).
fn without(hdr: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = hdr.to_vec();
    while let Some(start) = key_index(key, &out) {
        let Some(len) = out.get(start..).and_then(|r| memchr::memmem::find(r, b"\r\n")) else {
            break;
        };
        out.drain(start..start + len + 2);
    }
    out
}

/// A value as Go's `http.Header.Write` writes it: newlines become spaces, surrounding
/// spaces are trimmed.
fn clean_value(v: &str) -> std::borrow::Cow<'_, str> {
    let blank = |c: char| c == ' ' || c == '\t';
    if !v.contains(['\r', '\n']) {
        return std::borrow::Cow::Borrowed(v.trim_matches(blank));
    }
    std::borrow::Cow::Owned(v.replace(['\r', '\n'], " ").trim_matches(blank).to_string())
}

/// A new header block: `hdr` (a full block, or `None`) with `key` set to `value`
/// (an existing `key` line is dropped and the new one goes last).
pub fn with(hdr: Option<&[u8]>, key: &str, value: &str) -> Vec<u8> {
    let mut out = match hdr {
        Some(h) if h.len() > 2 => {
            let body = h.get(..h.len() - 2).unwrap_or_default();
            let stripped = without(body, key.as_bytes());
            if stripped.len() < HDR_LINE.len() {
                HDR_LINE.to_vec()
            } else {
                stripped
            }
        }
        _ => {
            let mut v = Vec::with_capacity(HDR_LINE.len() + key.len() + value.len() + 6);
            v.extend_from_slice(HDR_LINE);
            v
        }
    };
    out.reserve(key.len() + value.len() + 6);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(clean_value(value).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_values() {
        let h = b"NATS/1.0\r\nA: 1\r\nXA: 2\r\nB:3\r\n\r\n";
        assert_eq!(get(h, "A"), Some(&b"1"[..]));
        assert_eq!(get(h, "B"), Some(&b"3"[..]));
        assert_eq!(get(h, "XA"), Some(&b"2"[..]));
        assert_eq!(get(h, "C"), None);
        assert_eq!(get(h, "a"), None, "case sensitive");
        assert_eq!(get(b"", "A"), None);
        assert_eq!(get(b"NATS/1.0\r\nA:", "A"), Some(&b""[..]));
    }

    #[test]
    fn a_key_counts_only_at_a_line_start_and_before_its_colon() {
        // In a value, without a colon, after a lone CR, or as a longer key's prefix: no.
        let h = b"NATS/1.0\r\nX: A: 1\r\nA\r\nY: 2\rA: 3\r\nAB: 4\r\n\r\n";
        assert_eq!(get(h, "A"), None);
        assert_eq!(get(h, "AB"), Some(&b"4"[..]));
        // The first of repeated keys; a key on the last line without a CRLF after it.
        let h = b"NATS/1.0\r\nA: 1\r\nA: 2\r\nZ:9";
        assert_eq!(get(h, "A"), Some(&b"1"[..]));
        assert_eq!(get(h, "Z"), Some(&b"9"[..]));
        // A key of the status line is not a header.
        assert_eq!(get(b"A: 1\r\n\r\n", "A"), None);
        // Removal takes every line of the key and leaves the rest.
        let h = b"NATS/1.0\r\nA: 1\r\nB: 2\r\nA: 3\r\n\r\n";
        assert_eq!(without_key(h, "A"), b"NATS/1.0\r\nB: 2\r\n\r\n");
        assert!(has_key_starting(h, "B"));
        assert!(!has_key_starting(h, "C"));
        assert!(!has_key_starting(b"NATS/1.0\r\nX: Nats-Sched\r\n\r\n", "Nats-Sched"));
        assert!(has_key_starting(
            b"NATS/1.0\r\nNats-Schedule: @at x\r\n\r\n",
            "Nats-Sched"
        ));
    }

    /// Including bytes just above a `\n` that the word test flags falsely (0x0b).
    #[test]
    fn line_starts_are_the_positions_after_every_crlf() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let hdr: Vec<u8> = (0..len)
                .map(|k| b"\r\n\x0b\x0aA\x8a"[((seed >> (k % 60)) as usize + k) % 6])
                .collect();
            let naive: Vec<usize> = (2..=hdr.len()).filter(|&p| hdr[p - 2..p] == *b"\r\n").collect();
            assert_eq!(line_starts(&hdr).collect::<Vec<_>>(), naive, "{hdr:?}");
            let lfs: Vec<usize> = (0..hdr.len()).filter(|&p| hdr[p] == b'\n').collect();
            let found: Vec<usize> = Newlines {
                hdr: &hdr,
                next: 0,
                word_at: 0,
                mask: 0,
            }
            .collect();
            assert_eq!(found, lfs, "{hdr:?}");
        }
    }

    /// `get` against a search of every position, on blocks mutated at random.
    #[test]
    fn lookups_agree_with_a_search_of_every_position() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet = b"\r\n: \tAKab";
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let hdr: Vec<u8> = (0..len).map(|_| alphabet[(next() as usize) % alphabet.len()]).collect();
            for key in ["A", "AK", "a"] {
                let k = key.as_bytes();
                let naive = (2..=hdr.len()).find(|&p| {
                    hdr.get(p - 2..p) == Some(b"\r\n")
                        && hdr.get(p..).is_some_and(|r| r.starts_with(k))
                        && hdr.get(p + k.len()) == Some(&b':')
                });
                assert_eq!(key_index(k, &hdr), naive, "{key:?} in {hdr:?}");
            }
        }
    }

    #[test]
    fn set_a_value() {
        assert_eq!(with(None, "K", "v"), b"NATS/1.0\r\nK: v\r\n\r\n");
        let h = b"NATS/1.0\r\nK: old\r\nX: y\r\n\r\n";
        assert_eq!(
            with(Some(h), "K", "new\nline"),
            b"NATS/1.0\r\nX: y\r\nK: new line\r\n\r\n"
        );
        let h = b"NATS/1.0 503\r\n\r\n";
        assert_eq!(with(Some(h), "K", "v"), b"NATS/1.0 503\r\nK: v\r\n\r\n");
    }
}
