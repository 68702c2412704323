//! Server-to-client frame parser (protocol.md §3): `INFO`, `MSG`, `HMSG`, `PING`, `PONG`,
//! `+OK`, `-ERR`. Zero-copy: frames borrow from the read buffer. Never panics on input.

use memchr::memchr;
use std::io::Write;

/// Longest control line accepted before the stream is declared garbage. The server's own
/// lines are short, except `INFO`, which stays well under this.
pub const MAX_CONTROL_LINE: usize = 64 * 1024;

/// One `MSG`/`HMSG` delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg<'a> {
    pub subject: &'a [u8],
    pub sid: &'a [u8],
    pub reply: Option<&'a [u8]>,
    /// Header block length (0 for `MSG`).
    pub header_len: usize,
    /// Headers followed by payload.
    pub data: &'a [u8],
}

/// One parsed frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Info(&'a [u8]),
    Msg(Msg<'a>),
    Ping,
    Pong,
    Ok,
    /// `-ERR` text without the quotes.
    Err(&'a [u8]),
}

/// Why the byte stream cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown operation {0:?}")]
    UnknownOp(String),
    #[error("malformed {op} line {line:?}")]
    Malformed { op: &'static str, line: String },
    #[error("control line longer than {MAX_CONTROL_LINE} bytes")]
    LineTooLong,
    #[error("payload not followed by CRLF")]
    MissingCrlf,
}

fn show(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(80)];
    String::from_utf8_lossy(cut).into_owned()
}

/// Parses one frame from the start of `buf`.
///
/// Returns `Ok(None)` when `buf` holds only part of a frame, otherwise the frame and the number
/// of bytes it used.
pub fn parse_frame(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, ParseError> {
    if let Some(done) = server_msg(buf) {
        return Ok(Some(done));
    }
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > MAX_CONTROL_LINE {
            return Err(ParseError::LineTooLong);
        }
        return Ok(None);
    };
    if nl > MAX_CONTROL_LINE {
        return Err(ParseError::LineTooLong);
    }
    let line_end = nl + 1;
    let mut line = &buf[..nl];
    if let Some((&b'\r', rest)) = line.split_last() {
        line = rest;
    }
    let (op, args) = split_op(line);
    match op.len() {
        3 if op.eq_ignore_ascii_case(b"MSG") => parse_msg(buf, line, args, line_end, false),
        4 if op.eq_ignore_ascii_case(b"HMSG") => parse_msg(buf, line, args, line_end, true),
        4 if op.eq_ignore_ascii_case(b"PING") => Ok(Some((Frame::Ping, line_end))),
        4 if op.eq_ignore_ascii_case(b"PONG") => Ok(Some((Frame::Pong, line_end))),
        4 if op.eq_ignore_ascii_case(b"INFO") => Ok(Some((Frame::Info(trim(args)), line_end))),
        3 if op.eq_ignore_ascii_case(b"+OK") => Ok(Some((Frame::Ok, line_end))),
        4 if op.eq_ignore_ascii_case(b"-ERR") => {
            let text = trim(args);
            let text = text.strip_prefix(b"'").unwrap_or(text);
            let text = text.strip_suffix(b"'").unwrap_or(text);
            Ok(Some((Frame::Err(text), line_end)))
        }
        _ => Err(ParseError::UnknownOp(show(line))),
    }
}

/// Longest `MSG` line [`server_msg`] takes; longer ones go the general way.
const FAST_LINE_MAX: usize = 1024;

/// A whole `MSG` frame in the form servers write it: `MSG `, arguments separated by single
/// spaces, CRLF, the payload and its CRLF. Anything else (tabs, runs of blanks, a frame not
/// yet whole, a malformed line) is `None` and left to [`parse_frame`]'s general path,
/// which decides. One pass over the line, no searcher calls: a fan-out subscriber parses
/// every delivery, and the general path's trims and per-argument searches made the
/// measuring client as busy as the server it measured (`fanout`, 16 B).
#[inline]
fn server_msg(buf: &[u8]) -> Option<(Frame<'_>, usize)> {
    let line = buf.get(4..)?;
    if buf.get(..4)? != b"MSG " {
        return None;
    }
    // Offsets in `line` of the (up to three) separating spaces, and of the CR.
    let mut sp = [0usize; 3];
    let mut n = 0;
    let mut cr = None;
    let mut at = 0;
    // Eight bytes at a time; the last few are padded with a byte that is none of the four.
    while cr.is_none() && at < FAST_LINE_MAX {
        let rest = line.get(at..).filter(|r| !r.is_empty())?;
        let chunk = match rest.first_chunk::<8>() {
            Some(c) => *c,
            None => {
                let mut c = [b'x'; 8];
                c[..rest.len()].copy_from_slice(rest);
                c
            }
        };
        let w = u64::from_le_bytes(chunk);
        let r = bytes_eq(w, b'\r');
        // Only what comes before the first CR belongs to the line.
        let before = if r == 0 { u64::MAX } else { (r & r.wrapping_neg()) - 1 };
        if (bytes_eq(w, b'\t') | bytes_eq(w, b'\n')) & before != 0 {
            return None;
        }
        let mut spaces = bytes_eq(w, b' ') & before;
        while spaces != 0 {
            *sp.get_mut(n)? = at + (spaces.trailing_zeros() / 8) as usize;
            n += 1;
            spaces &= spaces - 1;
        }
        if r != 0 {
            cr = Some(at + (r.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let cr = cr?;
    if n < 2 || line.get(cr + 1) != Some(&b'\n') {
        return None;
    }
    let tok = |from: usize, to: usize| line.get(from..to).filter(|t| !t.is_empty());
    let subject = tok(0, sp[0])?;
    let sid = tok(sp[0] + 1, sp[1])?;
    let reply = if n == 3 { Some(tok(sp[1] + 1, sp[2])?) } else { None };
    let total = parse_len(tok(sp[n - 1] + 1, cr)?)?;
    let start = 4 + cr + 2;
    let data = buf.get(start..start + total)?;
    if buf.get(start + total..start + total + 2)? != b"\r\n" {
        return None;
    }
    let msg = Msg {
        subject,
        sid,
        reply,
        header_len: 0,
        data,
    };
    Some((Frame::Msg(msg), start + total + 2))
}

/// The high bit of each byte of `w` that equals `b` (exact per byte: no carries cross
/// from one byte to the next).
#[inline(always)]
fn bytes_eq(w: u64, b: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = w ^ (0x0101_0101_0101_0101 * u64::from(b));
    !(((x & LOW7) + LOW7) | x | LOW7)
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let Some((&f, rest)) = s.split_first() {
        if !is_space(f) {
            break;
        }
        s = rest;
    }
    while let Some((&l, rest)) = s.split_last() {
        if !is_space(l) {
            break;
        }
        s = rest;
    }
    s
}

fn split_op(line: &[u8]) -> (&[u8], &[u8]) {
    let line = trim(line);
    match line.iter().position(|&b| is_space(b)) {
        Some(i) => (&line[..i], &line[i..]),
        None => (line, &[]),
    }
}

/// Splits arguments on runs of spaces/tabs into `out`; returns how many were found (at most
/// `out.len() + 1`, so callers can detect too many). Separators are found with SIMD
/// (`memchr2`): this runs for every delivery, and a byte loop over the subjects was a fifth
/// of a consuming client's time.
fn split_args<'a>(mut args: &'a [u8], out: &mut [&'a [u8]; 5]) -> usize {
    let mut n = 0;
    loop {
        while let Some((&f, rest)) = args.split_first() {
            if !is_space(f) {
                break;
            }
            args = rest;
        }
        if args.is_empty() {
            return n;
        }
        let end = memchr::memchr2(b' ', b'\t', args).unwrap_or(args.len());
        let (tok, rest) = args.split_at(end);
        if let Some(slot) = out.get_mut(n) {
            *slot = tok;
        }
        n += 1;
        if n > out.len() {
            return n;
        }
        args = rest;
    }
}

fn parse_len(tok: &[u8]) -> Option<usize> {
    if tok.is_empty() || tok.len() > 10 {
        return None;
    }
    let mut v: usize = 0;
    for &b in tok {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + usize::from(b - b'0');
    }
    Some(v)
}

fn parse_msg<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    args: &'a [u8],
    line_end: usize,
    headers: bool,
) -> Result<Option<(Frame<'a>, usize)>, ParseError> {
    let op = if headers { "HMSG" } else { "MSG" };
    let bad = || ParseError::Malformed { op, line: show(line) };
    let mut toks: [&[u8]; 5] = [&[]; 5];
    let n = split_args(args, &mut toks);
    // MSG: subject sid [reply] len; HMSG: subject sid [reply] hlen tlen.
    let sizes = if headers { 2 } else { 1 };
    if n < 2 + sizes || n > 3 + sizes {
        return Err(bad());
    }
    let reply = if n == 3 + sizes { Some(toks[2]) } else { None };
    let total = parse_len(toks[n - 1]).ok_or_else(bad)?;
    let header_len = if headers {
        let h = parse_len(toks[n - 2]).ok_or_else(bad)?;
        if h > total {
            return Err(bad());
        }
        h
    } else {
        0
    };
    let frame_end = line_end + total + 2;
    if buf.len() < frame_end {
        return Ok(None);
    }
    if buf.get(line_end + total..frame_end) != Some(b"\r\n".as_slice()) {
        return Err(ParseError::MissingCrlf);
    }
    let msg = Msg {
        subject: toks[0],
        sid: toks[1],
        reply,
        header_len,
        data: &buf[line_end..line_end + total],
    };
    Ok(Some((Frame::Msg(msg), frame_end)))
}

/// Appends `PUB <subject> [reply] <len>\r\n<payload>\r\n` to `out`.
pub fn encode_pub(out: &mut Vec<u8>, subject: &[u8], reply: Option<&[u8]>, payload: &[u8]) {
    out.extend_from_slice(b"PUB ");
    out.extend_from_slice(subject);
    out.push(b' ');
    if let Some(r) = reply {
        out.extend_from_slice(r);
        out.push(b' ');
    }
    // No allocation and no formatter: the reqrep responder encodes inside every timed
    // round trip, a consumer for every ack.
    out.extend_from_slice(itoa::Buffer::new().format(payload.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

/// Appends `HPUB <subject> [reply] <hdr len> <total len>\r\n<header><payload>\r\n` to `out`;
/// `header` is the whole header block (`NATS/1.0\r\n...\r\n\r\n`).
pub fn encode_hpub(out: &mut Vec<u8>, subject: &[u8], reply: Option<&[u8]>, header: &[u8], payload: &[u8]) {
    out.extend_from_slice(b"HPUB ");
    out.extend_from_slice(subject);
    out.push(b' ');
    if let Some(r) = reply {
        out.extend_from_slice(r);
        out.push(b' ');
    }
    let _ = write!(out, "{} {}", header.len(), header.len() + payload.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(header);
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

/// Appends `SUB <subject> [queue] <sid>\r\n` to `out`.
pub fn encode_sub(out: &mut Vec<u8>, subject: &str, queue: Option<&str>, sid: u64) {
    out.extend_from_slice(b"SUB ");
    out.extend_from_slice(subject.as_bytes());
    out.push(b' ');
    if let Some(q) = queue {
        out.extend_from_slice(q.as_bytes());
        out.push(b' ');
    }
    let _ = write!(out, "{sid}");
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(mut buf: &[u8]) -> Vec<Frame<'_>> {
        let mut out = Vec::new();
        while let Some((f, n)) = parse_frame(buf).unwrap() {
            out.push(f);
            buf = &buf[n..];
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        out
    }

    // protocol.md §3.6: MSG <subject> <sid> [reply] <#bytes>CRLF<payload>CRLF
    #[test]
    fn msg_with_and_without_reply() {
        let f = all(b"MSG foo.bar 9 5\r\nhello\r\nMSG a 1 _INBOX.x 0\r\n\r\n");
        assert_eq!(
            f[0],
            Frame::Msg(Msg {
                subject: b"foo.bar",
                sid: b"9",
                reply: None,
                header_len: 0,
                data: b"hello"
            })
        );
        assert_eq!(
            f[1],
            Frame::Msg(Msg {
                subject: b"a",
                sid: b"1",
                reply: Some(b"_INBOX.x"),
                header_len: 0,
                data: b""
            })
        );
    }

    // Runs of spaces and tabs separate arguments; too many arguments are refused.
    #[test]
    fn msg_arguments_split_on_runs_of_blanks() {
        let f = all(b"MSG  a.b\t 7 \t_INBOX.y   3 \r\nabc\r\n");
        assert_eq!(
            f[0],
            Frame::Msg(Msg {
                subject: b"a.b",
                sid: b"7",
                reply: Some(b"_INBOX.y"),
                header_len: 0,
                data: b"abc"
            })
        );
        assert!(parse_frame(b"MSG a 1 r x 3\r\nabc\r\n").is_err());
        assert!(parse_frame(b"MSG a 1 r x y z 3\r\nabc\r\n").is_err());
        assert!(parse_frame(b"MSG a\r\n").is_err());
    }

    // §3.6: HMSG <subject> <sid> [reply] <#hdr> <#total>
    #[test]
    fn hmsg() {
        let f = all(b"HMSG s 2 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
        assert_eq!(
            f[0],
            Frame::Msg(Msg {
                subject: b"s",
                sid: b"2",
                reply: Some(b"r"),
                header_len: 12,
                data: b"NATS/1.0\r\n\r\nhi"
            })
        );
        assert!(parse_frame(b"HMSG s 2 15 14\r\n").is_err(), "header longer than total");
    }

    // §1: server lines end in CRLF; INFO has a space before CRLF; ops are case-insensitive.
    #[test]
    fn control_frames() {
        let f = all(b"INFO {\"a\":1} \r\nPING\r\nPONG\r\n+OK\r\n-ERR 'Slow Consumer'\r\nping\r\n");
        assert_eq!(
            f,
            vec![
                Frame::Info(b"{\"a\":1}"),
                Frame::Ping,
                Frame::Pong,
                Frame::Ok,
                Frame::Err(b"Slow Consumer"),
                Frame::Ping
            ]
        );
    }

    #[test]
    fn split_anywhere_is_incomplete_not_error() {
        let wire: &[u8] = b"MSG foo 1 _R 11\r\nhello world\r\nPING\r\nHMSG x 2 12 13\r\nNATS/1.0\r\n\r\n!\r\n";
        for cut in 0..wire.len() {
            let head = &wire[..cut];
            let mut pos = 0;
            let mut frames = 0;
            while let Some((_, n)) = parse_frame(&head[pos..]).unwrap() {
                pos += n;
                frames += 1;
            }
            assert!(frames <= 3, "cut {cut}");
        }
        assert_eq!(all(wire).len(), 3);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(matches!(
            parse_frame(b"HTTP/1.1 400 Bad Request\r\n"),
            Err(ParseError::UnknownOp(_))
        ));
        assert!(parse_frame(b"MSG foo 1\r\n").is_err());
        assert!(parse_frame(b"MSG foo 1 a b 3\r\n").is_err());
        assert!(parse_frame(b"MSG foo 1 -3\r\n").is_err());
        assert!(parse_frame(b"MSG foo 1 99999999999\r\n").is_err());
        assert_eq!(parse_frame(b"MSG foo 1 3\r\nabcXY"), Err(ParseError::MissingCrlf));
        let long = vec![b'x'; MAX_CONTROL_LINE + 1];
        assert_eq!(parse_frame(&long), Err(ParseError::LineTooLong));
    }

    #[test]
    fn tabs_and_extra_spaces() {
        let f = all(b"MSG\tfoo  7\t 2\r\nhi\r\n");
        assert_eq!(
            f[0],
            Frame::Msg(Msg {
                subject: b"foo",
                sid: b"7",
                reply: None,
                header_len: 0,
                data: b"hi"
            })
        );
    }

    /// The general path alone, for comparing with [`server_msg`].
    fn general(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, ParseError> {
        let Some(nl) = memchr(b'\n', buf) else { return Ok(None) };
        let mut line = &buf[..nl];
        if let Some((&b'\r', rest)) = line.split_last() {
            line = rest;
        }
        let (_, args) = split_op(line);
        parse_msg(buf, line, args, nl + 1, false)
    }

    // The fast path gives the general path's frame for every whole frame in the server's
    // form, and leaves everything else (every cut, other blanks, garbage) to it.
    #[test]
    fn server_form_agrees_with_the_general_path() {
        let server_form: [&[u8]; 4] = [
            b"MSG foo.bar 9 5\r\nhello\r\n",
            b"MSG a 1 _INBOX.x 0\r\n\r\n",
            b"MSG perf.bench 12345 16\r\n0123456789abcdef\r\n",
            b"MSG a.b 7 r.1.2 3\r\na\r\n\r\n",
        ];
        let other: [&[u8]; 6] = [
            b"MSG  a 1 2\r\nab\r\n",
            b"MSG a 1 2 \r\nab\r\n",
            b"MSG a 1 r x 3\r\nabc\r\n",
            b"MSG a 1 3\r\nabcXY",
            b"MSG a\t1 2\r\nab\r\n",
            b"MSG a 1 2\nab\r\n",
        ];
        for wire in server_form {
            let whole = server_msg(wire);
            assert!(whole.is_some(), "{:?}", String::from_utf8_lossy(wire));
            assert_eq!(Ok(whole), general(wire));
        }
        for wire in server_form.iter().chain(other.iter()) {
            for cut in 0..wire.len() + usize::from(other.contains(wire)) {
                let head = &wire[..cut];
                if let Some(fast) = server_msg(head) {
                    panic!("{:?} taken as {fast:?}", String::from_utf8_lossy(head));
                }
            }
        }
        // Lines of every length around the eight-byte steps, each argument split at
        // every place, against the general path.
        for subject_len in 1..20 {
            for sid in ["1", "12345678", "123456789"] {
                for reply in ["", "_INBOX.abcdefgh "] {
                    let subject = "s".repeat(subject_len);
                    let wire = format!("MSG {subject} {sid} {reply}3\r\nabc\r\n");
                    let fast = server_msg(wire.as_bytes());
                    assert!(fast.is_some(), "{wire:?}");
                    assert_eq!(Ok(fast), general(wire.as_bytes()), "{wire:?}");
                    let tabbed = wire.replacen(' ', "\t", 2);
                    assert!(server_msg(tabbed.as_bytes()).is_none(), "{tabbed:?}");
                }
            }
        }
        assert_eq!(
            bytes_eq(u64::from_le_bytes(*b"a b\r  \r\x80"), b' '),
            0x0000_8080_0000_8000
        );
        assert_eq!(
            bytes_eq(u64::from_le_bytes(*b"\x00\x01\x7f\x80\xff\x20\x21\x1f"), b' '),
            0x0000_8000_0000_0000
        );
        let long = [b"MSG ".as_slice(), &vec![b'x'; FAST_LINE_MAX + 8], b" 1 0\r\n\r\n"].concat();
        assert!(server_msg(&long).is_none(), "long lines go the general way");
        assert!(matches!(parse_frame(&long), Ok(Some((Frame::Msg(_), _)))));
    }

    #[test]
    fn encoders() {
        let mut out = Vec::new();
        encode_pub(&mut out, b"a.b", None, b"xyz");
        encode_pub(&mut out, b"a", Some(b"r.1"), b"");
        encode_sub(&mut out, "a.*", None, 1);
        encode_sub(&mut out, "a.>", Some("q"), 22);
        assert_eq!(
            out,
            b"PUB a.b 3\r\nxyz\r\nPUB a r.1 0\r\n\r\nSUB a.* 1\r\nSUB a.> q 22\r\n"
        );
        out.clear();
        encode_hpub(&mut out, b"c.0", Some(b"r"), b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n", b"");
        encode_hpub(&mut out, b"c", None, b"NATS/1.0\r\n\r\n", b"ab");
        assert_eq!(
            out,
            b"HPUB c.0 r 26 26\r\nNATS/1.0\r\nNats-Incr: 1\r\n\r\n\r\nHPUB c 12 14\r\nNATS/1.0\r\n\r\nab\r\n"
        );
    }
}
