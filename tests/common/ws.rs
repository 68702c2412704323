//! A raw WebSocket client for the protocol edges: the upgrade request written by hand,
//! frames built and read byte by byte (masking, fragmentation, compression), over plain
//! TCP or a TLS stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The minimal valid upgrade request, with `extra` header lines.
pub fn request(extra: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// A frame as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    pub rsv1: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// A client frame: masked with `mask` unless `None`.
pub fn frame(opcode: u8, fin: bool, rsv1: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![opcode | if fin { 0x80 } else { 0 } | if rsv1 { 0x40 } else { 0 }];
    let m = if mask.is_some() { 0x80 } else { 0 };
    if payload.len() <= 125 {
        out.push(m | payload.len() as u8);
    } else if payload.len() < 65536 {
        out.push(m | 126);
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    } else {
        out.push(m | 127);
        out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    }
    match mask {
        Some(k) => {
            out.extend_from_slice(&k);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// Raw-deflate `data` as permessage-deflate does (sync flush tail removed).
pub fn deflate(data: &[u8]) -> Vec<u8> {
    let mut c = flate2::Compress::new(flate2::Compression::fast(), false);
    let mut out = Vec::with_capacity(data.len() + 64);
    c.compress_vec(data, &mut out, flate2::FlushCompress::Sync).unwrap();
    while out.len() == out.capacity() {
        out.reserve(1024);
        c.compress_vec(&[], &mut out, flate2::FlushCompress::Sync).unwrap();
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// Inflate a permessage-deflate message.
pub fn inflate(data: &[u8]) -> Vec<u8> {
    let mut d = flate2::Decompress::new(false);
    let mut input = data.to_vec();
    input.extend_from_slice(&[0, 0, 0xff, 0xff]);
    let mut out = Vec::with_capacity(data.len() * 4 + 1024);
    loop {
        let before = d.total_in();
        d.decompress_vec(&input[(before as usize)..], &mut out, flate2::FlushDecompress::Sync)
            .unwrap();
        if d.total_in() as usize >= input.len() {
            break;
        }
        out.reserve(out.capacity());
    }
    out
}

/// A WebSocket connection over any byte stream.
pub struct WsClient<S: Read + Write> {
    pub s: S,
    pub buf: Vec<u8>,
    /// The HTTP response head.
    pub response: String,
    /// Protocol bytes of data frames, in order.
    pub data: Vec<u8>,
    pub mask: Option<[u8; 4]>,
}

impl WsClient<TcpStream> {
    /// Connect over TCP and upgrade with `extra` headers; `Err(response)` if refused.
    pub fn connect(port: u16, extra: &str) -> Result<WsClient<TcpStream>, String> {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        WsClient::upgrade(s, extra)
    }
}

impl<S: Read + Write> WsClient<S> {
    pub fn upgrade(mut s: S, extra: &str) -> Result<WsClient<S>, String> {
        s.write_all(request(extra).as_bytes()).unwrap();
        s.flush().unwrap();
        let mut c = WsClient {
            s,
            buf: Vec::new(),
            response: String::new(),
            data: Vec::new(),
            mask: Some([0x11, 0x22, 0x33, 0x44]),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(p) = c.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head: Vec<u8> = c.buf.drain(..p + 4).collect();
                c.response = String::from_utf8_lossy(&head).into_owned();
                break;
            }
            if Instant::now() > deadline || !c.fill() {
                return Err(String::from_utf8_lossy(&c.buf).into_owned());
            }
        }
        if c.response.starts_with("HTTP/1.1 101") {
            Ok(c)
        } else {
            let mut r = c.response.clone();
            r.push_str(&String::from_utf8_lossy(&c.buf));
            Err(r)
        }
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    pub fn send_raw(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
        self.s.flush().unwrap();
    }

    /// Protocol bytes in one masked binary frame.
    pub fn send(&mut self, text: &str) {
        let f = frame(2, true, false, text.as_bytes(), self.mask);
        self.send_raw(&f);
    }

    /// The next frame, or `None` when the connection closed (or 5 s passed).
    pub fn next_frame(&mut self) -> Option<Frame> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some((f, used)) = parse_frame(&self.buf) {
                self.buf.drain(..used);
                return Some(f);
            }
            if Instant::now() > deadline || !self.fill() {
                return None;
            }
        }
    }

    /// The next protocol line (data frames joined, compressed ones inflated).
    pub fn line(&mut self) -> Option<String> {
        let mut message = Vec::new();
        let mut compressed = false;
        loop {
            if let Some(p) = self.data.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.data.drain(..p + 2).collect();
                return Some(String::from_utf8_lossy(&line[..p]).into_owned());
            }
            let f = self.next_frame()?;
            match f.opcode {
                0..=2 => {
                    if f.opcode != 0 {
                        compressed = f.rsv1;
                    }
                    message.extend_from_slice(&f.payload);
                    if f.fin {
                        let m = std::mem::take(&mut message);
                        if compressed {
                            self.data.extend(inflate(&m));
                        } else {
                            self.data.extend(m);
                        }
                    }
                }
                8 => return None,
                _ => {}
            }
        }
    }

    /// CONNECT and PING; wait for the PONG (the INFO is read first).
    pub fn handshake_nats(&mut self, connect: &str) -> Result<String, String> {
        let info = self.line().ok_or("no INFO")?;
        self.send(&format!("CONNECT {connect}\r\nPING\r\n"));
        loop {
            let l = self.line().ok_or("closed")?;
            if l == "PONG" {
                return Ok(info);
            }
            if l.starts_with("-ERR") {
                return Err(l);
            }
        }
    }
}

/// A whole frame from the start of `b`, and its length.
pub fn parse_frame(b: &[u8]) -> Option<(Frame, usize)> {
    let b0 = *b.first()?;
    let b1 = *b.get(1)?;
    let (len, mut at) = match b1 & 0x7f {
        126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
        127 => {
            let mut l = [0u8; 8];
            l.copy_from_slice(b.get(2..10)?);
            (u64::from_be_bytes(l) as usize, 10)
        }
        n => (n as usize, 2),
    };
    let mask = if b1 & 0x80 != 0 {
        let m = b.get(at..at + 4)?.to_vec();
        at += 4;
        Some(m)
    } else {
        None
    };
    let mut payload = b.get(at..at + len)?.to_vec();
    if let Some(m) = mask {
        for (i, x) in payload.iter_mut().enumerate() {
            *x ^= m[i % 4];
        }
    }
    Some((
        Frame {
            fin: b0 & 0x80 != 0,
            rsv1: b0 & 0x40 != 0,
            opcode: b0 & 0x0f,
            payload,
        },
        at + len,
    ))
}
