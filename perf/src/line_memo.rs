//! The last `MSG` line a connection parsed, to take the next frame with the same line in one
//! comparison. A subscriber of the throughput scenarios gets the same line (subject, sid,
//! size) for every delivery; parsing each one was over half of the load generator's CPU in
//! `pairs`, which shares the machine's CPUs with the server it measures.
//!
//! A frame taken from the memo is checked as fully as [`parse_frame`] checks it: the same
//! line byte for byte means the same subject, sid, reply and size, then the payload must be
//! whole and followed by CRLF. Anything else goes to [`parse_frame`].

use crate::proto::{parse_frame, Frame, Msg, ParseError};

/// Longest line remembered; longer ones are parsed every time.
const MAX_LINE: usize = 256;

/// Where a remembered line's parts are, as offsets from the frame's start.
#[derive(Debug, Clone, Copy, Default)]
struct Parts {
    subject: (usize, usize),
    sid: (usize, usize),
    reply: Option<(usize, usize)>,
    /// The payload's length.
    total: usize,
}

/// One connection's memo (empty until its first plain `MSG`).
#[derive(Debug, Default)]
pub struct LineMemo {
    /// `MSG ...\r\n`, or empty.
    line: Vec<u8>,
    parts: Parts,
}

impl LineMemo {
    /// [`parse_frame`], answered from the memo when `buf` starts with the remembered line.
    #[inline]
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, ParseError> {
        if let Some(hit) = self.hit(buf) {
            return Ok(Some(hit));
        }
        let parsed = parse_frame(buf)?;
        if let Some((Frame::Msg(m), _)) = &parsed {
            self.remember(buf, m);
        }
        Ok(parsed)
    }

    #[inline]
    fn hit<'a>(&self, buf: &'a [u8]) -> Option<(Frame<'a>, usize)> {
        let n = self.line.len();
        if n == 0 || !starts_with(buf, &self.line) {
            return None;
        }
        let p = &self.parts;
        let end = n + p.total + 2;
        if buf.get(n + p.total..end)? != b"\r\n" {
            return None;
        }
        let part = |(from, to): (usize, usize)| buf.get(from..to);
        let msg = Msg {
            subject: part(p.subject)?,
            sid: part(p.sid)?,
            reply: match p.reply {
                Some(r) => Some(part(r)?),
                None => None,
            },
            header_len: 0,
            data: buf.get(n..n + p.total)?,
        };
        Some((Frame::Msg(msg), end))
    }

    /// Remembers `m`'s line when it is a plain `MSG` that `buf` starts with.
    fn remember(&mut self, buf: &[u8], m: &Msg<'_>) {
        self.line.clear();
        if m.header_len != 0 || !buf.starts_with(b"MSG ") {
            return;
        }
        let (Some(subject), Some(sid), Some(line_len)) = (
            span(buf, m.subject),
            span(buf, m.sid),
            span(buf, m.data).map(|(from, _)| from),
        ) else {
            return;
        };
        let reply = match m.reply {
            Some(r) => match span(buf, r) {
                Some(s) => Some(s),
                None => return,
            },
            None => None,
        };
        // Headers ("HMSG") never get here; a MSG's line ends right before its payload.
        if line_len > MAX_LINE || buf.get(line_len.saturating_sub(2)..line_len) != Some(b"\r\n".as_slice()) {
            return;
        }
        self.line.extend_from_slice(&buf[..line_len]);
        self.parts = Parts {
            subject,
            sid,
            reply,
            total: m.data.len(),
        };
    }
}

/// `buf.starts_with(line)` eight bytes at a time: the lines are a few dozen bytes, where a
/// call to the C library's `memcmp` was a tenth of the subscriber's time.
#[inline]
fn starts_with(buf: &[u8], line: &[u8]) -> bool {
    let n = line.len();
    let Some(head) = buf.get(..n) else { return false };
    if n < 8 {
        return head == line;
    }
    let word = |s: &[u8], at: usize| {
        s.get(at..at + 8)
            .and_then(|w| w.first_chunk::<8>())
            .map(|w| u64::from_ne_bytes(*w))
    };
    let mut at = 0;
    while at + 8 < n {
        if word(head, at) != word(line, at) {
            return false;
        }
        at += 8;
    }
    // The last eight bytes, overlapping what was compared already.
    word(head, n - 8) == word(line, n - 8)
}

/// Where `part` (a slice borrowed from `buf`) lies in `buf`, if it does.
fn span(buf: &[u8], part: &[u8]) -> Option<(usize, usize)> {
    let from = (part.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
    let to = from.checked_add(part.len())?;
    (to <= buf.len()).then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame of `stream` through a memo and through `parse_frame`: the same frames
    /// and lengths, and the same verdict where the stream goes bad.
    fn same_as_parse_frame(stream: &[u8]) -> usize {
        let mut memo = LineMemo::default();
        let (mut pos, mut frames) = (0, 0);
        loop {
            let a = memo.parse(&stream[pos..]);
            let b = parse_frame(&stream[pos..]);
            assert_eq!(a, b, "at byte {pos}");
            match a {
                Ok(Some((_, n))) => {
                    pos += n;
                    frames += 1;
                }
                _ => return frames,
            }
        }
    }

    #[test]
    fn repeated_lines_come_from_the_memo_as_parsed() {
        let mut s = Vec::new();
        for i in 0..5 {
            s.extend_from_slice(format!("MSG perf.pair.0 1 5\r\nhell{i}\r\n").as_bytes());
        }
        s.extend_from_slice(b"MSG perf.pair.0 1 _INBOX.x 2\r\nok\r\nPING\r\n");
        s.extend_from_slice(b"MSG perf.pair.0 1 _INBOX.x 2\r\nno\r\n");
        s.extend_from_slice(b"HMSG a 2 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
        s.extend_from_slice(b"MSG perf.pair.0 1 5\r\nhello\r\n");
        assert_eq!(same_as_parse_frame(&s), 10);
        let mut memo = LineMemo::default();
        memo.parse(b"MSG a 1 5\r\nhello\r\n").unwrap();
        assert_eq!(memo.line, b"MSG a 1 5\r\n");
        memo.parse(b"HMSG a 2 12 14\r\nNATS/1.0\r\n\r\nhi\r\n").unwrap();
        assert!(memo.line.is_empty(), "headers are never remembered");
    }

    #[test]
    fn a_remembered_line_with_a_bad_ending_or_a_partial_frame_is_parsed() {
        let mut s = b"MSG a 1 5\r\nhello\r\n".to_vec();
        s.extend_from_slice(b"MSG a 1 5\r\nhelloXX");
        assert_eq!(same_as_parse_frame(&s), 1);
        let mut memo = LineMemo::default();
        memo.parse(b"MSG a 1 5\r\nhello\r\n").unwrap();
        assert_eq!(memo.parse(b"MSG a 1 5\r\nhel").unwrap(), None);
        assert_eq!(
            memo.parse(b"MSG a 1 5\r\nhelloXX").unwrap_err(),
            ParseError::MissingCrlf
        );
        let (f, n) = memo.parse(b"MSG a 1 5\r\nhello\r\nPING\r\n").unwrap().unwrap();
        assert_eq!(n, 18);
        let Frame::Msg(m) = f else { panic!("not a MSG: {f:?}") };
        assert_eq!(
            (m.subject, m.sid, m.reply, m.data),
            (&b"a"[..], &b"1"[..], None, &b"hello"[..])
        );
    }

    #[test]
    fn word_compare_is_starts_with() {
        let line: Vec<u8> = (0..40u8).collect();
        for n in 0..line.len() {
            for flip in 0..=n {
                let mut buf = line.clone();
                if flip < n {
                    buf[flip] ^= 1;
                }
                assert_eq!(
                    starts_with(&buf, &line[..n]),
                    buf.starts_with(&line[..n]),
                    "n {n} flip {flip}"
                );
                assert!(!starts_with(&buf[..n.saturating_sub(1)], &line[..n]) || n == 0);
            }
        }
    }

    #[test]
    fn arbitrary_streams_parse_as_without_the_memo() {
        // Frames cut at every length, and runs of one line with changing payloads.
        let base = b"MSG s.1 7 r 3\r\nabc\r\nMSG s.1 7 r 3\r\nxyz\r\nMSG s.1 7 3\r\nabc\r\n+OK\r\n".to_vec();
        for cut in 0..base.len() {
            same_as_parse_frame(&base[..cut]);
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let mut s = Vec::new();
            for _ in 0..8 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let pick = b"MSG a 1 2\r\nxy\r\nMSG a 1 2\r\nx\r\r\nMSG a 12 2\r\nxy\r\nPONG\r\nMSG a  1 2\r\nxy\r\n";
                let from = (state % pick.len() as u64) as usize;
                let len = ((state >> 20) % 20) as usize;
                s.extend_from_slice(&pick[from..(from + len).min(pick.len())]);
            }
            same_as_parse_frame(&s);
        }
    }
}
