//! The client protocol parser: a resumable byte-level state machine.
//!
//! It follows nats-server 2.14's parser state for state (protocol.md §1, §3), because
//! clients see its exact reactions to malformed input: which byte triggers
//! `-ERR 'Unknown Protocol Operation'`, when `maximum control line exceeded` fires on a
//! line that is still incomplete, which argument errors close the connection silently.
//!
//! Zero-copy when an op is complete in the buffer handed in; when a frame is split across
//! reads, the argument line (bounded by `max_control_line`) and the payload (bounded by
//! `max_payload`, grown only as bytes really arrive) are kept in the parser.
//!
//! Ownership: one parser per client connection, owned by the connection's shard.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::args::{parse_size, split_pub_args, split_sub_args, PubArgs};
pub use super::pub_fast::PlainPub;
use crate::core::subject::is_valid_literal_subject;
use std::ops::Range;

/// What the connection allows right now.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_control_line: usize,
    /// Negative: no limit.
    pub max_payload: i64,
    /// The client negotiated headers (HPUB allowed).
    pub headers: bool,
    /// Authentication is required and no CONNECT was processed yet: the first byte of
    /// every op must start CONNECT.
    pub awaiting_auth: bool,
    /// Pedantic mode: publish subjects must be valid literals.
    pub pedantic: bool,
}

/// Why parsing stopped for good. The connection closes after each of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// `-ERR 'Unknown Protocol Operation'`, then close.
    #[error("unknown protocol operation")]
    UnknownOp,
    /// `-ERR 'maximum control line exceeded'`, then close.
    #[error("maximum control line exceeded")]
    MaxControlLine,
    /// `-ERR 'Maximum Payload Violation'`, then close.
    #[error("maximum payload violation: {size} vs {max}")]
    MaxPayload { size: i64, max: i64 },
    /// `-ERR 'Authorization Violation'`, then close (op other than CONNECT first).
    #[error("authorization violation")]
    AuthViolation,
    /// Close without any `-ERR`: bad argument count or size, HPUB without headers.
    #[error("{0}")]
    Silent(&'static str),
}

/// Which op a state belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pub,
    HPub,
    HMsg,
    Sub,
    Unsub,
    Ping,
    Pong,
    Connect,
    Info,
    Ok,
    Err,
}

const OPS: [(&[u8], Kind); 11] = [
    (b"PUB", Kind::Pub),
    (b"PING", Kind::Ping),
    (b"PONG", Kind::Pong),
    (b"HPUB", Kind::HPub),
    (b"HMSG", Kind::HMsg),
    (b"SUB", Kind::Sub),
    (b"UNSUB", Kind::Unsub),
    (b"CONNECT", Kind::Connect),
    (b"INFO", Kind::Info),
    (b"+OK", Kind::Ok),
    (b"-ERR", Kind::Err),
];

impl Kind {
    /// Ops whose name must be followed by at least one space or tab.
    fn needs_space(self) -> bool {
        matches!(
            self,
            Kind::Pub | Kind::HPub | Kind::HMsg | Kind::Sub | Kind::Unsub | Kind::Err
        )
    }
    /// Ops that ignore everything up to the newline.
    fn skips_line(self) -> bool {
        matches!(self, Kind::Ping | Kind::Pong | Kind::Ok)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    /// Inside an op name: `matched` bytes so far agree with the candidates in `mask`.
    Name {
        mask: u16,
        matched: u8,
    },
    /// Op name complete; a space or tab must follow.
    NeedSpace(Kind),
    /// Skipping spaces before the argument.
    Space(Kind),
    /// Collecting the argument line.
    Arg(Kind),
    /// PING, PONG, +OK: waiting for the newline.
    Line(Kind),
    /// Collecting a payload of `pa.size` bytes.
    Payload,
    EndR,
    EndN,
}

/// One event for the connection. Slices borrow the input or the parser's own buffers.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Connect(&'a [u8]),
    Info(&'a [u8]),
    /// A PUB/HPUB control line whose subject fails pedantic checks: send
    /// `-ERR 'Invalid Publish Subject'` now, at the control line, as the reference does
    /// (the message itself still follows).
    PedanticViolation,
    /// A complete message. `header_len` is `Some` for HPUB.
    Msg {
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
        header_len: Option<usize>,
        /// Header block and payload, without the trailing CRLF.
        data: &'a [u8],
        /// The total size and header size as written by the client (`"05"` stays `"05"`).
        size_text: &'a [u8],
        hdr_text: Option<&'a [u8]>,
    },
    Sub {
        subject: &'a [u8],
        queue: Option<&'a [u8]>,
        sid: &'a [u8],
    },
    Unsub {
        sid: &'a [u8],
        /// Negative when absent or not a number.
        max: i64,
    },
    Ping,
    Pong,
    /// A client-sent `-ERR`: logged, then the connection closes.
    Err(&'a [u8]),
}

/// Where the current op's bytes are.
#[derive(Default)]
struct Stash {
    /// Argument line collected across reads (`None`: not split).
    arg: Option<Vec<u8>>,
    /// Payload collected across reads.
    msg: Option<Vec<u8>>,
}

/// The parser. `Default` is a parser at the start of a connection.
pub struct Parser {
    state: State,
    /// Start and end of the argument within the current buffer (when not split).
    arg_start: usize,
    arg_end: usize,
    /// A `\r` was seen inside the current argument.
    drop: bool,
    /// Start of the payload within the current buffer.
    msg_start: usize,
    pa: PubArgs,
    stash: Stash,
    /// Tests compare the whole-frame path with the byte-wise one.
    #[cfg(test)]
    no_fast: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            state: State::Start,
            arg_start: 0,
            arg_end: 0,
            drop: false,
            msg_start: 0,
            pa: PubArgs::default(),
            stash: Stash::default(),
            #[cfg(test)]
            no_fast: false,
        }
    }
}

/// Append to a stash, growing geometrically but never past `cap` (the most the stash can
/// legitimately hold), so a split frame costs at most its own size in memory.
fn extend_capped(v: &mut Vec<u8>, data: impl Iterator<Item = u8>, upper: usize, cap: usize) {
    // `upper` may count bytes the iterator filters out (`\r` in a split line): never
    // reserve past the cap for them (one byte more is enough to see the cap exceeded).
    let bound = cap.saturating_add(1).max(v.len());
    let need = (v.len() + upper).min(bound);
    if need > v.capacity() {
        let target = need.max(v.capacity().saturating_mul(2).min(bound));
        v.reserve_exact(target - v.len());
    }
    v.extend(data);
}

fn shift(r: &Range<usize>, base: usize) -> Range<usize> {
    r.start.saturating_sub(base)..r.end.saturating_sub(base)
}

/// Recognise PUB/HPUB/SUB/UNSUB (with their separator) and PING/PONG at the start of
/// `rest`: how many bytes they take and the state the byte-wise match would reach.
fn fast_op(rest: &[u8]) -> Option<(usize, State)> {
    // Letters compare in either case, as the byte-wise match does.
    let word = |name: &[u8]| rest.get(..name.len()).is_some_and(|w| w.eq_ignore_ascii_case(name));
    let sep = |n: usize| rest.get(n).is_some_and(|&c| is_space(c));
    let (len, state) = match upper(*rest.first()?) {
        b'P' if word(b"PUB") && sep(3) => (4, State::Space(Kind::Pub)),
        b'P' if word(b"PING") => (4, State::Line(Kind::Ping)),
        b'P' if word(b"PONG") => (4, State::Line(Kind::Pong)),
        b'S' if word(b"SUB") && sep(3) => (4, State::Space(Kind::Sub)),
        b'H' if word(b"HPUB") && sep(4) => (5, State::Space(Kind::HPub)),
        b'U' if word(b"UNSUB") && sep(5) => (6, State::Space(Kind::Unsub)),
        _ => return None,
    };
    Some((len, state))
}

fn upper(b: u8) -> u8 {
    b.to_ascii_uppercase()
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

impl Parser {
    /// True between ops (nothing buffered, nothing pending).
    pub fn at_op_start(&self) -> bool {
        self.state == State::Start
    }

    /// Bytes held for a split frame (for memory accounting).
    pub fn buffered(&self) -> usize {
        self.stash.arg.as_ref().map_or(0, |a| a.capacity()) + self.stash.msg.as_ref().map_or(0, |m| m.capacity())
    }

    /// Parse from `buf[*pos..]` and return the next event, or `None` once `buf` is used
    /// up (the state is kept for the next buffer). `*pos` advances past what was consumed.
    /// After handling an event, call [`Parser::release`].
    ///
    /// Inlined into the caller for the commonest frames, a whole plain PUB or HPUB at an
    /// op boundary: it is recognised in one pass without entering the state machine, and
    /// its event is built in the caller's registers. Everything else takes
    /// [`Parser::next_general`].
    #[inline(always)]
    pub fn next<'a>(
        &'a mut self,
        buf: &'a [u8],
        pos: &mut usize,
        lim: &Limits,
    ) -> Result<Option<Event<'a>>, ParseError> {
        if let Some(m) = self.next_plain(buf, pos, lim) {
            return Ok(Some(m.into_event()));
        }
        self.next_general(buf, pos, lim)
    }

    /// The first half of [`Parser::next`]: the commonest frame, a whole plain PUB or HPUB
    /// (module `pub_fast`), as a plain struct. `None` leaves everything as it was, for
    /// [`Parser::next_general`].
    #[inline(always)]
    pub fn next_plain<'a>(&mut self, buf: &'a [u8], pos: &mut usize, lim: &Limits) -> Option<PlainPub<'a>> {
        #[cfg(test)]
        let fast = !self.no_fast;
        #[cfg(not(test))]
        let fast = true;
        // Awaiting authentication, a PUB is an error; pedantic, its subject is checked: both
        // are for the general path (as is HPUB without headers, checked inside).
        if !fast || !matches!(self.state, State::Start) || lim.awaiting_auth || lim.pedantic {
            return None;
        }
        let (end, m) = super::pub_fast::whole_plain_frame(buf, *pos, lim)?;
        // As the general path does at the start of an op: a finished split frame's buffers
        // go.
        if self.stash.arg.is_some() || self.stash.msg.is_some() {
            self.stash = Stash::default();
        }
        *pos = end;
        Some(m)
    }

    /// The second half of [`Parser::next`], after [`Parser::next_plain`] found no plain
    /// frame: the byte-wise state machine, with shortcuts for whole frames that keep to
    /// its states and results.
    #[inline(never)]
    pub fn next_general<'a>(
        &'a mut self,
        buf: &'a [u8],
        pos: &mut usize,
        lim: &Limits,
    ) -> Result<Option<Event<'a>>, ParseError> {
        loop {
            let i = *pos;
            let Some(&b) = buf.get(i) else {
                return self.end_of_buffer(buf, lim).map(|()| None);
            };
            match self.state {
                State::Start => {
                    if self.stash.arg.is_some() || self.stash.msg.is_some() {
                        self.stash = Stash::default();
                    }
                    if lim.awaiting_auth && upper(b) != b'C' {
                        return Err(ParseError::AuthViolation);
                    }
                    // A whole PUB frame in the buffer: one pass, no state changes. (A plain
                    // one was already tried by `next`, or follows a +OK in this call and is
                    // recognised here just the same, more slowly.)
                    #[cfg(test)]
                    let fast = !self.no_fast;
                    #[cfg(not(test))]
                    let fast = true;
                    if fast && upper(b) == b'P' && !lim.pedantic {
                        if let Some(end) = self.whole_pub(buf, i, pos, lim)? {
                            *pos = end;
                            return Ok(Some(self.msg_event(buf)));
                        }
                    }
                    // The common ops, whole in the buffer, skip the byte-wise name match
                    // (same states, same result).
                    if let Some((len, state)) = buf.get(i..).and_then(fast_op) {
                        *pos = i + len;
                        self.state = state;
                        continue;
                    }
                    // Re-examine this byte as the first of the op name.
                    self.state = State::Name {
                        mask: (1 << OPS.len()) - 1,
                        matched: 0,
                    };
                }
                State::Name { mask, matched } => {
                    let k = matched as usize;
                    let c = upper(b);
                    let mut next = 0u16;
                    for (n, (name, _)) in OPS.iter().enumerate() {
                        if mask & (1 << n) != 0 && name.get(k) == Some(&c) {
                            next |= 1 << n;
                        }
                    }
                    if next == 0 {
                        return Err(ParseError::UnknownOp);
                    }
                    *pos = i + 1;
                    // Op names are prefix-free: a completed name is the only candidate left.
                    let done = OPS
                        .iter()
                        .enumerate()
                        .find(|(n, (name, _))| next & (1 << n) != 0 && name.len() == k + 1)
                        .map(|(_, (_, kind))| *kind);
                    self.state = match done {
                        Some(kind) if kind.needs_space() => State::NeedSpace(kind),
                        Some(kind) if kind.skips_line() => State::Line(kind),
                        Some(kind) => State::Space(kind),
                        None => State::Name {
                            mask: next,
                            matched: matched + 1,
                        },
                    };
                }
                State::NeedSpace(kind) => {
                    if !is_space(b) {
                        return Err(ParseError::UnknownOp);
                    }
                    *pos = i + 1;
                    self.state = State::Space(kind);
                }
                State::Space(kind) => {
                    // Skip blanks; the first other byte, whatever it is, starts the argument
                    // (and is never itself taken as the line's CR or LF).
                    let rest = buf.get(i..).unwrap_or_default();
                    match rest.iter().position(|&c| !is_space(c)) {
                        None => *pos = buf.len(),
                        Some(off) => {
                            self.arg_start = i + off;
                            *pos = self.arg_start + 1;
                            self.drop = false;
                            self.state = State::Arg(kind);
                        }
                    }
                }
                State::Arg(kind) => {
                    let rest = buf.get(i..).unwrap_or_default();
                    let Some(off) = memchr::memchr(b'\n', rest) else {
                        match self.stash.arg.as_mut() {
                            Some(a) => extend_capped(
                                a,
                                rest.iter().copied().filter(|&c| c != b'\r'),
                                rest.len(),
                                lim.max_control_line,
                            ),
                            None => self.drop |= memchr::memchr(b'\r', rest).is_some(),
                        }
                        *pos = buf.len();
                        continue;
                    };
                    let nl = i + off;
                    *pos = nl + 1;
                    self.state = State::Start;
                    let tail = buf.get(i..nl).unwrap_or_default();
                    let split = match self.stash.arg.as_mut() {
                        Some(a) => {
                            extend_capped(
                                a,
                                tail.iter().copied().filter(|&c| c != b'\r'),
                                tail.len(),
                                lim.max_control_line,
                            );
                            true
                        }
                        None => {
                            self.drop |= memchr::memchr(b'\r', tail).is_some();
                            self.arg_end = if self.drop {
                                nl.saturating_sub(1).max(self.arg_start)
                            } else {
                                nl
                            };
                            false
                        }
                    };
                    let arg_len = match &self.stash.arg {
                        Some(a) => a.len(),
                        None => self.arg_end - self.arg_start,
                    };
                    if arg_len > lim.max_control_line {
                        return Err(ParseError::MaxControlLine);
                    }
                    match kind {
                        Kind::Pub | Kind::HPub | Kind::HMsg => {
                            self.pub_line(kind, buf, lim)?;
                            self.msg_start = nl + 1;
                            self.state = State::Payload;
                            let have = buf.len() - self.msg_start;
                            if have < self.pa.size.saturating_add(2) && !split {
                                // The payload spans reads: keep the line for the later event.
                                let line = buf.get(self.arg_start..self.arg_end).unwrap_or_default();
                                self.stash.arg = Some(line.to_vec());
                                self.rebase_pub_args();
                            }
                            if self.pa.pedantic_violation {
                                return Ok(Some(Event::PedanticViolation));
                            }
                            continue;
                        }
                        _ => return self.line_event(kind, buf).map(Some),
                    }
                }
                State::Line(kind) => {
                    let rest = buf.get(i..).unwrap_or_default();
                    match memchr::memchr(b'\n', rest) {
                        None => *pos = buf.len(),
                        Some(nl) => {
                            *pos = i + nl + 1;
                            self.state = State::Start;
                            match kind {
                                Kind::Ping => return Ok(Some(Event::Ping)),
                                Kind::Pong => return Ok(Some(Event::Pong)),
                                _ => {}
                            }
                        }
                    }
                }
                State::Payload => {
                    let want = self.pa.size;
                    match self.stash.msg.as_mut() {
                        Some(m) => {
                            let take = (buf.len() - i).min(want.saturating_sub(m.len()));
                            let part = buf.get(i..i + take).unwrap_or_default();
                            extend_capped(m, part.iter().copied(), part.len(), want);
                            *pos = i + take;
                            if m.len() >= want {
                                self.state = State::EndR;
                            }
                        }
                        // Same buffer as the control line: jump over a complete payload, or
                        // leave the rest to `end_of_buffer`, which stashes it.
                        None if buf.len() - i >= want => {
                            *pos = i + want;
                            self.state = State::EndR;
                        }
                        None => *pos = buf.len(),
                    }
                }
                State::EndR => {
                    if b != b'\r' {
                        return Err(ParseError::UnknownOp);
                    }
                    *pos = i + 1;
                    self.state = State::EndN;
                }
                State::EndN => {
                    if b != b'\n' {
                        return Err(ParseError::UnknownOp);
                    }
                    *pos = i + 1;
                    self.state = State::Start;
                    return Ok(Some(self.msg_event(buf)));
                }
            }
        }
    }

    /// The message whose arguments are in `self.pa` (its line and payload in `buf` or in
    /// the stash).
    fn msg_event<'a>(&'a self, buf: &'a [u8]) -> Event<'a> {
        let pa = &self.pa;
        let line: &[u8] = if pa.base_in_stash {
            self.stash.arg.as_deref().unwrap_or_default()
        } else {
            buf
        };
        let data: &[u8] = match self.stash.msg.as_deref() {
            Some(m) => m,
            None => buf.get(self.msg_start..self.msg_start + pa.size).unwrap_or_default(),
        };
        Event::Msg {
            subject: line.get(pa.subject.clone()).unwrap_or_default(),
            reply: pa.reply.clone().map(|r| line.get(r).unwrap_or_default()),
            header_len: pa.hdr,
            data,
            size_text: line.get(pa.size_text.clone()).unwrap_or_default(),
            hdr_text: pa.hdr_text.clone().map(|r| line.get(r).unwrap_or_default()),
        }
    }

    /// The common case in one pass: `PUB ` at `i` with its whole line (ending in CR LF, no
    /// other CR, no blank before the first argument, within the control-line limit), its
    /// payload and the CR LF after it all in `buf`. Returns where the frame ends, with
    /// `self.pa` and `self.msg_start` set; `None` leaves everything to the byte-wise path,
    /// which then reaches the same result or error. An argument error is the one that path
    /// gives at the end of the line (and `*pos` is left there, as it leaves it).
    fn whole_pub(&mut self, buf: &[u8], i: usize, pos: &mut usize, lim: &Limits) -> Result<Option<usize>, ParseError> {
        let Some(&[_, u, b, b' ', first]) = buf.get(i..i + 5) else {
            return Ok(None);
        };
        if upper(u) != b'U' || upper(b) != b'B' || is_space(first) {
            return Ok(None);
        }
        let start = i + 4;
        let rest = buf.get(start..).unwrap_or_default();
        // One scalar pass (lines are short: cheaper than two memchr calls): the LF, and
        // the first CR, which must be the one just before it.
        let limit = rest.len().min(lim.max_control_line.saturating_add(2));
        let mut cr = None;
        let mut nl = None;
        for (k, &c) in rest.iter().take(limit).enumerate() {
            if c == b'\n' {
                nl = Some(k);
                break;
            }
            if c == b'\r' && cr.is_none() {
                cr = Some(k);
            }
        }
        let Some(nl) = nl else { return Ok(None) };
        let Some(arg_len) = nl.checked_sub(1) else {
            return Ok(None);
        };
        if cr != Some(arg_len) || arg_len > lim.max_control_line {
            return Ok(None);
        }
        self.arg_start = start;
        self.arg_end = start + arg_len;
        let msg_start = start + nl + 1;
        if let Err(e) = self.pub_line(Kind::Pub, buf, lim) {
            *pos = msg_start;
            return Err(e);
        }
        let end = msg_start + self.pa.size;
        if buf.get(end..end + 2) != Some(&b"\r\n"[..]) {
            return Ok(None);
        }
        self.msg_start = msg_start;
        Ok(Some(end + 2))
    }

    /// Call after handling an event: frees the buffers of a finished split op.
    #[inline]
    pub fn release(&mut self) {
        // Usually there is nothing to free: only the two checks are inlined.
        if matches!(self.state, State::Start) && (self.stash.arg.is_some() || self.stash.msg.is_some()) {
            self.free_stash();
        }
    }

    #[inline(never)]
    fn free_stash(&mut self) {
        self.stash.arg = None;
        self.stash.msg = None;
    }

    fn arg<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self.stash.arg.as_deref() {
            Some(a) => a,
            None => buf.get(self.arg_start..self.arg_end).unwrap_or_default(),
        }
    }

    fn line_event<'a>(&'a self, kind: Kind, buf: &'a [u8]) -> Result<Event<'a>, ParseError> {
        let arg = self.arg(buf);
        match kind {
            Kind::Connect => Ok(Event::Connect(arg)),
            Kind::Info => Ok(Event::Info(arg)),
            Kind::Err => Ok(Event::Err(arg)),
            Kind::Sub => {
                let a = split_sub_args::<3>(arg).ok_or(ParseError::Silent("processSub Parse Error"))?;
                match *a.as_slice() {
                    [subject, sid] => Ok(Event::Sub {
                        subject,
                        queue: None,
                        sid,
                    }),
                    [subject, queue, sid] => Ok(Event::Sub {
                        subject,
                        queue: Some(queue),
                        sid,
                    }),
                    _ => Err(ParseError::Silent("processSub Parse Error")),
                }
            }
            Kind::Unsub => {
                let a = split_sub_args::<2>(arg).ok_or(ParseError::Silent("processUnsub Parse Error"))?;
                match *a.as_slice() {
                    [sid] => Ok(Event::Unsub { sid, max: -1 }),
                    [sid, max] => Ok(Event::Unsub {
                        sid,
                        max: parse_size(max),
                    }),
                    _ => Err(ParseError::Silent("processUnsub Parse Error")),
                }
            }
            _ => Err(ParseError::UnknownOp),
        }
    }

    fn pub_line(&mut self, kind: Kind, buf: &[u8], lim: &Limits) -> Result<(), ParseError> {
        let split = self.stash.arg.is_some();
        let base = if split { 0 } else { self.arg_start };
        let mut pa = PubArgs {
            base_in_stash: split,
            ..PubArgs::default()
        };
        match kind {
            // A client HMSG carries nothing usable: nats-server handles it as an empty
            // message with no subject, reply or payload.
            Kind::HMsg => {
                self.pa = pa;
                return Ok(());
            }
            Kind::HPub if !lim.headers => return Err(ParseError::Silent("message headers not supported")),
            _ => {}
        }
        let arg = self.arg(buf);
        let hpub = kind == Kind::HPub;
        let args = split_pub_args(arg).ok_or(ParseError::Silent("processPub Parse Error"))?;
        let (subject, reply, hdr, size) = match (hpub, args.as_slice()) {
            (false, &[s, z]) => (s, None, None, z),
            (false, &[s, r, z]) => (s, Some(r), None, z),
            (true, &[s, h, z]) => (s, None, Some(h), z),
            (true, &[s, r, h, z]) => (s, Some(r), Some(h), z),
            _ => return Err(ParseError::Silent("processPub Parse Error")),
        };
        let off = |s: &[u8]| {
            let start = s.as_ptr() as usize - arg.as_ptr() as usize + base;
            start..start + s.len()
        };
        let hdr_n = match hdr.map(parse_size) {
            Some(h) if h < 0 => return Err(ParseError::Silent("processHeaderPub Bad or Missing Header Size")),
            h => h,
        };
        let size_n = parse_size(size);
        if size_n < 0 {
            return Err(ParseError::Silent("processPub Bad or Missing Size"));
        }
        if hdr_n.is_some_and(|h| h > size_n) {
            return Err(ParseError::Silent("processHeaderPub Header Size larger then TotalSize"));
        }
        if lim.max_payload >= 0 && size_n > lim.max_payload {
            return Err(ParseError::MaxPayload {
                size: size_n,
                max: lim.max_payload,
            });
        }
        pa.subject = off(subject);
        pa.reply = reply.map(off);
        pa.size_text = off(size);
        pa.hdr_text = hdr.map(off);
        pa.hdr = hdr_n.map(|h| h as usize);
        pa.size = size_n as usize;
        pa.pedantic_violation = lim.pedantic && !is_valid_literal_subject(subject);
        self.pa = pa;
        Ok(())
    }

    /// Offsets were taken relative to the input buffer; the line now lives in the stash.
    fn rebase_pub_args(&mut self) {
        if self.pa.base_in_stash {
            return;
        }
        let base = self.arg_start;
        self.pa.subject = shift(&self.pa.subject, base);
        self.pa.reply = self.pa.reply.as_ref().map(|r| shift(r, base));
        self.pa.size_text = shift(&self.pa.size_text, base);
        self.pa.hdr_text = self.pa.hdr_text.as_ref().map(|r| shift(r, base));
        self.pa.base_in_stash = true;
    }

    /// The buffer ended: keep what a split op needs, and apply the control-line limit to
    /// an argument that is still incomplete (so a client cannot make us hold more).
    fn end_of_buffer(&mut self, buf: &[u8], lim: &Limits) -> Result<(), ParseError> {
        match self.state {
            State::Arg(_) => {
                if self.stash.arg.is_none() {
                    let end = if self.drop {
                        buf.len().saturating_sub(1).max(self.arg_start)
                    } else {
                        buf.len()
                    };
                    let part = buf.get(self.arg_start.min(end)..end).unwrap_or_default();
                    if part.len() > lim.max_control_line {
                        return Err(ParseError::MaxControlLine);
                    }
                    self.stash.arg = Some(part.to_vec());
                }
                if self.stash.arg.as_ref().map_or(0, Vec::len) > lim.max_control_line {
                    return Err(ParseError::MaxControlLine);
                }
            }
            State::Payload | State::EndR | State::EndN if self.stash.msg.is_none() => {
                // The line was stashed when it completed; now keep what arrived of the payload.
                let from = self.msg_start.min(buf.len());
                let upto = (from + self.pa.size).min(buf.len());
                self.stash.msg = Some(buf.get(from..upto).unwrap_or_default().to_vec());
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
#[path = "parser_tests.rs"]
mod tests;
