//! RFC 6455 frames, sans-IO: a decoder fed bytes split anywhere (headers included) that
//! unmasks client frames, joins fragmented messages, answers pings and closes, and
//! rejects what nats-server rejects with its close codes and texts; and the encoder for
//! the server's frames (never masked).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::deflate::{self, InflateError};

pub const OP_CONTINUATION: u8 = 0;
pub const OP_TEXT: u8 = 1;
pub const OP_BINARY: u8 = 2;
pub const OP_CLOSE: u8 = 8;
pub const OP_PING: u8 = 9;
pub const OP_PONG: u8 = 10;

const FIN: u8 = 0x80;
const RSV1: u8 = 0x40;
const RSV23: u8 = 0x30;
const MASK: u8 = 0x80;
/// Largest control frame payload.
pub const MAX_CONTROL: usize = 125;

pub const CLOSE_NORMAL: u16 = 1000;
pub const CLOSE_GOING_AWAY: u16 = 1001;
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
pub const CLOSE_NO_STATUS: u16 = 1005;
pub const CLOSE_INVALID_PAYLOAD: u16 = 1007;
pub const CLOSE_POLICY_VIOLATION: u16 = 1008;
pub const CLOSE_MESSAGE_TOO_BIG: u16 = 1009;
pub const CLOSE_INTERNAL_ERROR: u16 = 1011;
pub const CLOSE_TLS_HANDSHAKE: u16 = 1015;

/// Why the decoder stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A protocol error; a close frame with 1002 and this text was queued.
    #[error("{0}")]
    Protocol(String),
    /// A compressed message inflates (or accumulates) beyond the limit.
    #[error("maximum payload exceeded")]
    TooLarge,
    /// A compressed message does not inflate.
    #[error("{0}")]
    Inflate(String),
}

/// The decoder's limits and negotiated options.
#[derive(Debug, Clone, Copy)]
pub struct DecoderConfig {
    /// Client frames must be masked (unless `Nats-No-Masking` was agreed).
    pub require_mask: bool,
    /// permessage-deflate was negotiated.
    pub compression: bool,
    /// Largest inflated message (the connection's max payload).
    pub max_payload: usize,
}

impl DecoderConfig {
    /// nats-server's `wsMaxMessageSize`: compressed bytes kept for one message.
    fn max_compressed(&self) -> usize {
        let mpay = if self.max_payload == 0 {
            1024 * 1024
        } else {
            self.max_payload
        };
        mpay.saturating_mul(8).min(64 * 1024 * 1024)
    }
}

/// What a batch of input did besides producing data.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The client sent a close frame (the answer is queued): the connection ends as
    /// "Client Closed".
    pub closed: bool,
}

#[derive(Debug)]
enum State {
    Header,
    Payload,
}

/// The client-to-server frame decoder.
pub struct Decoder {
    cfg: DecoderConfig,
    state: State,
    hdr: [u8; 14],
    hdr_len: usize,
    opcode: u8,
    fin: bool,
    masked: bool,
    mask: [u8; 4],
    mask_pos: usize,
    remaining: u64,
    /// A message is open (its final frame not seen yet).
    in_message: bool,
    /// The open message is compressed.
    compressed: bool,
    control: Vec<u8>,
    zbuf: Vec<u8>,
    inflater: Option<flate2::Decompress>,
    done: bool,
}

/// Append a frame header.
pub fn put_header(out: &mut Vec<u8>, opcode: u8, first: bool, fin: bool, compressed: bool, len: usize) {
    let mut b0 = if first { opcode } else { OP_CONTINUATION };
    if fin {
        b0 |= FIN;
    }
    if compressed {
        b0 |= RSV1;
    }
    out.push(b0);
    if len <= 125 {
        out.push(len as u8);
    } else if len < 65536 {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// A close frame's payload: the status and the text, cut to fit with `...`.
pub fn close_payload(status: u16, body: &str) -> Vec<u8> {
    let mut text = body;
    let mut cut = false;
    if text.len() > MAX_CONTROL - 2 {
        let mut end = MAX_CONTROL - 5;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = text.get(..end).unwrap_or_default();
        cut = true;
    }
    let mut p = Vec::with_capacity(2 + text.len() + 3);
    p.extend_from_slice(&status.to_be_bytes());
    p.extend_from_slice(text.as_bytes());
    if cut {
        p.extend_from_slice(b"...");
    }
    p
}

/// Append a whole control frame.
pub fn put_control(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    put_header(out, opcode, true, true, false, payload.len());
    out.extend_from_slice(payload);
}

/// nats-server's `wsIsValidCloseStatus`.
pub fn valid_close_status(code: u16) -> bool {
    !matches!(code, 1004..=1006 | 1015) && (1000..5000).contains(&code) && !(1016..=2999).contains(&code)
}

impl Decoder {
    pub fn new(cfg: DecoderConfig) -> Decoder {
        Decoder {
            cfg,
            state: State::Header,
            hdr: [0; 14],
            hdr_len: 0,
            opcode: 0,
            fin: false,
            masked: false,
            mask: [0; 4],
            mask_pos: 0,
            remaining: 0,
            in_message: false,
            compressed: false,
            control: Vec::new(),
            zbuf: Vec::new(),
            inflater: None,
            done: false,
        }
    }

    /// Change the payload limit (the connection's max payload may be learned later).
    pub fn set_max_payload(&mut self, n: usize) {
        self.cfg.max_payload = n;
    }

    fn protocol(reply: &mut Vec<u8>, msg: impl Into<String>) -> FrameError {
        let msg = msg.into();
        put_control(reply, OP_CLOSE, &close_payload(CLOSE_PROTOCOL_ERROR, &msg));
        FrameError::Protocol(msg)
    }

    /// Bytes needed for the header seen so far (2 until the second byte is known).
    fn header_need(&self) -> usize {
        let Some(&b1) = self.hdr.get(1).filter(|_| self.hdr_len >= 2) else {
            return 2;
        };
        let ext = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        2 + ext + if b1 & MASK != 0 { 4 } else { 0 }
    }

    /// Check the first two bytes as the reference does, in its order.
    fn check_start(&mut self, reply: &mut Vec<u8>) -> Result<(), FrameError> {
        let (b0, b1) = (self.hdr[0], self.hdr[1]);
        let opcode = b0 & 0x0f;
        let fin = b0 & FIN != 0;
        let compressed = b0 & RSV1 != 0;
        if b0 & RSV23 != 0 {
            return Err(Self::protocol(reply, "RSV2 and RSV3 must be clear"));
        }
        if compressed && !self.cfg.compression {
            return Err(Self::protocol(
                reply,
                "compressed frame received without negotiated permessage-deflate",
            ));
        }
        if self.cfg.require_mask && b1 & MASK == 0 {
            return Err(Self::protocol(reply, "mask bit missing"));
        }
        let len7 = usize::from(b1 & 0x7f);
        match opcode {
            OP_PING | OP_PONG | OP_CLOSE => {
                if len7 > MAX_CONTROL {
                    return Err(Self::protocol(
                        reply,
                        format!("control frame length bigger than maximum allowed of {MAX_CONTROL} bytes"),
                    ));
                }
                if !fin {
                    return Err(Self::protocol(reply, "control frame does not have final bit set"));
                }
                if compressed {
                    return Err(Self::protocol(reply, "control frame must not be compressed"));
                }
            }
            OP_TEXT | OP_BINARY => {
                if self.in_message {
                    return Err(Self::protocol(
                        reply,
                        "new message started before final frame for previous message was received",
                    ));
                }
                self.in_message = !fin;
                self.compressed = compressed;
            }
            OP_CONTINUATION => {
                if !self.in_message || compressed {
                    return Err(Self::protocol(reply, "invalid continuation frame"));
                }
                self.in_message = !fin;
            }
            other => return Err(Self::protocol(reply, format!("unknown opcode {other}"))),
        }
        self.opcode = opcode;
        self.fin = fin;
        self.masked = b1 & MASK != 0;
        Ok(())
    }

    /// The header is complete: read the length and the mask.
    fn finish_header(&mut self, reply: &mut Vec<u8>) -> Result<(), FrameError> {
        let b1 = self.hdr[1];
        let (len, at) = match b1 & 0x7f {
            126 => (u64::from(u16::from_be_bytes([self.hdr[2], self.hdr[3]])), 4),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(self.hdr.get(2..10).unwrap_or(&[0; 8]));
                let n = u64::from_be_bytes(b);
                if n & (1 << 63) != 0 {
                    return Err(Self::protocol(reply, "invalid 64-bit payload length"));
                }
                (n, 10)
            }
            n => (u64::from(n), 2),
        };
        if self.masked {
            if let Some(m) = self.hdr.get(at..at + 4) {
                self.mask.copy_from_slice(m);
            }
        }
        self.mask_pos = 0;
        self.remaining = len;
        self.control.clear();
        Ok(())
    }

    fn unmask(&mut self, data: &mut [u8]) {
        if !self.masked {
            return;
        }
        // The key rotated to where this frame's payload stands, applied a word at a time.
        let p = self.mask_pos;
        let mut key = self.mask;
        key.rotate_left(p & 3);
        let word = u64::from_ne_bytes([key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]]);
        let mut chunks = data.chunks_exact_mut(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            c.copy_from_slice(&(u64::from_ne_bytes(w) ^ word).to_ne_bytes());
        }
        for (b, k) in chunks.into_remainder().iter_mut().zip(key.iter().cycle()) {
            *b ^= *k;
        }
        self.mask_pos = (p + data.len()) & 3;
    }

    /// Decode `input`: message data is appended to `app`, frames the server must send
    /// (pong, close) to `reply`. After an error or a close nothing more is decoded.
    pub fn decode(&mut self, mut input: &[u8], app: &mut Vec<u8>, reply: &mut Vec<u8>) -> Result<Decoded, FrameError> {
        let mut out = Decoded::default();
        while !input.is_empty() && !self.done {
            match self.state {
                State::Header => {
                    let need = self.header_need();
                    let take = (need - self.hdr_len).min(input.len());
                    let (head, rest) = input.split_at(take);
                    if let Some(dst) = self.hdr.get_mut(self.hdr_len..self.hdr_len + take) {
                        dst.copy_from_slice(head);
                    }
                    let had = self.hdr_len;
                    self.hdr_len += take;
                    input = rest;
                    if had < 2 && self.hdr_len >= 2 {
                        if let Err(e) = self.check_start(reply) {
                            self.done = true;
                            return Err(e);
                        }
                    }
                    if self.hdr_len >= 2 && self.hdr_len == self.header_need() {
                        if let Err(e) = self.finish_header(reply) {
                            self.done = true;
                            return Err(e);
                        }
                        self.hdr_len = 0;
                        self.state = State::Payload;
                        if self.remaining == 0 {
                            if let Err(e) = self.end_frame(app, reply, &mut out) {
                                self.done = true;
                                return Err(e);
                            }
                        }
                    }
                }
                State::Payload => {
                    let n = usize::try_from(self.remaining).unwrap_or(usize::MAX).min(input.len());
                    let (chunk, rest) = input.split_at(n);
                    input = rest;
                    self.remaining -= n as u64;
                    if let Err(e) = self.payload(chunk, app, reply) {
                        self.done = true;
                        return Err(e);
                    }
                    if self.remaining == 0 {
                        if let Err(e) = self.end_frame(app, reply, &mut out) {
                            self.done = true;
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    fn payload(&mut self, chunk: &[u8], app: &mut Vec<u8>, _reply: &mut Vec<u8>) -> Result<(), FrameError> {
        let is_control = self.opcode >= OP_CLOSE;
        if is_control {
            let start = self.control.len();
            self.control.extend_from_slice(chunk);
            let mut tmp = std::mem::take(&mut self.control);
            if let Some(t) = tmp.get_mut(start..) {
                self.unmask(t);
            }
            self.control = tmp;
        } else if self.compressed {
            if self.zbuf.len() + chunk.len() > self.cfg.max_compressed() {
                return Err(FrameError::TooLarge);
            }
            let start = self.zbuf.len();
            self.zbuf.extend_from_slice(chunk);
            let mut tmp = std::mem::take(&mut self.zbuf);
            if let Some(t) = tmp.get_mut(start..) {
                self.unmask(t);
            }
            self.zbuf = tmp;
        } else {
            let start = app.len();
            app.extend_from_slice(chunk);
            if let Some(t) = app.get_mut(start..) {
                self.unmask(t);
            }
        }
        Ok(())
    }

    fn end_frame(&mut self, app: &mut Vec<u8>, reply: &mut Vec<u8>, out: &mut Decoded) -> Result<(), FrameError> {
        self.state = State::Header;
        match self.opcode {
            OP_PING => {
                let p = std::mem::take(&mut self.control);
                put_control(reply, OP_PONG, &p);
                self.control = p;
            }
            OP_PONG => {}
            OP_CLOSE => {
                let p = std::mem::take(&mut self.control);
                self.close_received(&p, reply)?;
                out.closed = true;
                self.done = true;
            }
            _ => {
                if self.compressed && !self.in_message {
                    // The final frame of a compressed message.
                    let z = std::mem::take(&mut self.zbuf);
                    let limit = if self.cfg.max_payload == 0 {
                        1024 * 1024
                    } else {
                        self.cfg.max_payload
                    };
                    let inf = self.inflater.get_or_insert_with(deflate::decompressor);
                    let start = app.len();
                    let r = deflate::inflate(inf, &z, limit, app);
                    if r.is_err() {
                        // A message that does not inflate (or inflates too far) yields
                        // nothing: how far a corrupt stream gets depends on buffer sizes.
                        app.truncate(start);
                    }
                    self.zbuf = z;
                    self.zbuf.clear();
                    self.compressed = false;
                    match r {
                        Ok(()) => {}
                        Err(InflateError::TooLarge) => return Err(FrameError::TooLarge),
                        Err(InflateError::Corrupt(e)) => return Err(FrameError::Inflate(e)),
                    }
                    if self.zbuf.capacity() > 64 * 1024 {
                        self.zbuf = Vec::new();
                    }
                }
            }
        }
        Ok(())
    }

    fn close_received(&mut self, p: &[u8], reply: &mut Vec<u8>) -> Result<(), FrameError> {
        if p.len() == 1 {
            return Err(Self::protocol(reply, "close frame payload cannot be 1 byte"));
        }
        let mut status = CLOSE_NO_STATUS;
        let mut body = String::new();
        if let [a, b, rest @ ..] = p {
            status = u16::from_be_bytes([*a, *b]);
            if !valid_close_status(status) {
                return Err(Self::protocol(reply, format!("invalid close status code {status}")));
            }
            if !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(s) => body = s.to_string(),
                    Err(_) => {
                        status = CLOSE_INVALID_PAYLOAD;
                        body = "invalid utf8 body in close frame".into();
                    }
                }
            }
        }
        if status == CLOSE_NO_STATUS {
            put_control(reply, OP_CLOSE, &[]);
        } else {
            put_control(reply, OP_CLOSE, &close_payload(status, &body));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn client_frame(opcode: u8, fin: bool, rsv1: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut out = Vec::new();
        put_header(&mut out, opcode, true, fin, rsv1, payload.len());
        if let Some(m) = mask {
            if let Some(b1) = out.get_mut(1) {
                *b1 |= MASK;
            }
            out.extend_from_slice(&m);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        } else {
            out.extend_from_slice(payload);
        }
        out
    }

    fn dec() -> Decoder {
        Decoder::new(DecoderConfig {
            require_mask: true,
            compression: true,
            max_payload: 1 << 20,
        })
    }

    #[test]
    fn split_at_every_byte() {
        let m = Some([1, 2, 3, 4]);
        let mut stream = client_frame(OP_BINARY, false, false, b"PUB a 2\r\n", m);
        stream.extend(client_frame(OP_PING, true, false, b"hi", m));
        let mut cont = client_frame(OP_CONTINUATION, true, false, &vec![b'x'; 300], m);
        if let Some(b0) = cont.get_mut(0) {
            *b0 = FIN;
        }
        stream.extend(cont);
        for split in 0..stream.len() {
            let mut d = dec();
            let (mut app, mut reply) = (Vec::new(), Vec::new());
            let (a, b) = stream.split_at(split);
            for part in [a, b] {
                for byte in part.chunks(if split % 2 == 0 { 1 } else { 7 }) {
                    d.decode(byte, &mut app, &mut reply).unwrap();
                }
            }
            let mut want = b"PUB a 2\r\n".to_vec();
            want.extend(vec![b'x'; 300]);
            assert_eq!(app, want, "split {split}");
            assert_eq!(reply, vec![0x8a, 2, b'h', b'i']);
        }
    }

    #[test]
    fn the_reference_rejections() {
        let m = Some([9, 9, 9, 9]);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0x82 | 0x20, 0x80, 0, 0, 0, 0], "RSV2 and RSV3 must be clear"),
            (client_frame(OP_BINARY, true, false, b"x", None), "mask bit missing"),
            (
                vec![0x89, 0x80 | 126, 0, 200],
                "control frame length bigger than maximum allowed of 125 bytes",
            ),
            (
                client_frame(OP_PING, false, false, b"", m),
                "control frame does not have final bit set",
            ),
            (
                client_frame(OP_PING, true, true, b"", m),
                "control frame must not be compressed",
            ),
            (
                client_frame(OP_CONTINUATION, true, false, b"x", m),
                "invalid continuation frame",
            ),
            (client_frame(3, true, false, b"x", m), "unknown opcode 3"),
            (
                vec![0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],
                "invalid 64-bit payload length",
            ),
            (
                client_frame(OP_CLOSE, true, false, b"x", m),
                "close frame payload cannot be 1 byte",
            ),
            (
                client_frame(OP_CLOSE, true, false, &[0x03, 0xed], m),
                "invalid close status code 1005",
            ),
        ];
        for (input, want) in cases {
            let mut d = dec();
            let (mut app, mut reply) = (Vec::new(), Vec::new());
            let err = d.decode(&input, &mut app, &mut reply);
            assert_eq!(err, Err(FrameError::Protocol(want.to_string())), "{want}");
            let mut close = Vec::new();
            put_control(&mut close, OP_CLOSE, &close_payload(CLOSE_PROTOCOL_ERROR, want));
            assert_eq!(reply, close, "{want}");
            // Nothing more is decoded.
            assert!(d.decode(b"more", &mut app, &mut reply).is_ok());
            assert!(app.is_empty());
        }
        let mut d = dec();
        let two = [
            client_frame(OP_BINARY, false, false, b"a", m),
            client_frame(OP_TEXT, true, false, b"b", m),
        ]
        .concat();
        let err = d.decode(&two, &mut Vec::new(), &mut Vec::new()).unwrap_err();
        assert_eq!(
            err,
            FrameError::Protocol("new message started before final frame for previous message was received".into())
        );
        let mut d = Decoder::new(DecoderConfig {
            require_mask: true,
            compression: false,
            max_payload: 100,
        });
        let err = d
            .decode(
                &client_frame(OP_BINARY, true, true, b"a", m),
                &mut Vec::new(),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(
            err,
            FrameError::Protocol("compressed frame received without negotiated permessage-deflate".into())
        );
    }

    #[test]
    fn close_echoes_status_and_checks_utf8() {
        let m = Some([5, 6, 7, 8]);
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (vec![], vec![0x88, 0]),
            (
                [&1000u16.to_be_bytes()[..], b"bye"].concat(),
                [&[0x88, 5][..], &1000u16.to_be_bytes(), b"bye"].concat(),
            ),
            (
                [&1000u16.to_be_bytes()[..], &[0xff, 0xfe]].concat(),
                [
                    &[0x88, 34][..],
                    &1007u16.to_be_bytes(),
                    b"invalid utf8 body in close frame",
                ]
                .concat(),
            ),
        ];
        for (payload, want) in cases {
            let mut d = dec();
            let mut reply = Vec::new();
            let r = d
                .decode(
                    &client_frame(OP_CLOSE, true, false, &payload, m),
                    &mut Vec::new(),
                    &mut reply,
                )
                .unwrap();
            assert!(r.closed);
            assert_eq!(reply, want);
        }
    }

    #[test]
    fn compressed_messages_and_limits() {
        let m = Some([1, 1, 1, 1]);
        let mut c = deflate::compressor();
        let msg = b"PUB foo 11\r\nhello world\r\n".repeat(20);
        let mut z = Vec::new();
        deflate::deflate(&mut c, &msg, &mut z);
        let (a, b) = z.split_at(z.len() / 2);
        let mut first = client_frame(OP_BINARY, false, true, a, m);
        let mut second = client_frame(OP_CONTINUATION, true, false, b, m);
        if let Some(b0) = second.get_mut(0) {
            *b0 = FIN;
        }
        first.append(&mut second);
        let mut d = dec();
        let mut app = Vec::new();
        d.decode(&first, &mut app, &mut Vec::new()).unwrap();
        assert_eq!(app, msg);
        let mut d = Decoder::new(DecoderConfig {
            require_mask: true,
            compression: true,
            max_payload: 100,
        });
        let err = d
            .decode(
                &client_frame(OP_BINARY, true, true, &z, m),
                &mut Vec::new(),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err, FrameError::TooLarge);
        // Compressed bytes beyond 8 x max payload are refused before inflating.
        let mut d = Decoder::new(DecoderConfig {
            require_mask: false,
            compression: true,
            max_payload: 10,
        });
        let err = d
            .decode(
                &client_frame(OP_BINARY, true, true, &[0u8; 81], None),
                &mut Vec::new(),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err, FrameError::TooLarge);
    }

    #[test]
    fn close_text_is_cut_with_dots() {
        let long = "é".repeat(100);
        let p = close_payload(1000, &long);
        assert!(p.len() <= MAX_CONTROL);
        assert!(p.ends_with(b"..."));
        assert!(std::str::from_utf8(p.get(2..).unwrap_or_default()).is_ok());
        assert!(valid_close_status(1000) && valid_close_status(4999) && valid_close_status(3000));
        assert!(!valid_close_status(1005) && !valid_close_status(1016) && !valid_close_status(999));
    }
}
