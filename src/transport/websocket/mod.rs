//! WebSocket (RFC 6455) as nats-server serves it, sans-IO.
//!
//! - [`upgrade`]: the HTTP upgrade request parser, the reference's checks and answers.
//! - [`frame`]: the frame decoder (masking, fragmentation, control frames, limits) and
//!   the encoder.
//! - [`deflate`]: permessage-deflate without context takeover.
//! - [`WsSession`] (here): one upgraded connection: decodes client frames into protocol
//!   bytes and frames the server's protocol bytes (compressed past 64 bytes when
//!   negotiated; 4 KiB frames for browsers, as the reference sends them).

pub mod deflate;
pub mod frame;
pub mod upgrade;

use crate::core::client::ClosedState;
use frame::{Decoded, Decoder, DecoderConfig, FrameError};

/// Messages this small are sent uncompressed (nats-server's `wsCompressThreshold`).
const COMPRESS_THRESHOLD: usize = 64;
/// Frame size for browsers (nats-server's `wsFrameSizeForBrowsers`).
const BROWSER_FRAME: usize = 4096;

/// The close status the reference sends when it closes a connection for `reason`.
pub fn close_status(reason: ClosedState) -> u16 {
    use ClosedState as C;
    match reason {
        C::ClientClosed => frame::CLOSE_NORMAL,
        C::AuthenticationTimeout
        | C::AuthenticationViolation
        | C::SlowConsumerPendingBytes
        | C::SlowConsumerWriteDeadline
        | C::MaxAccountConnectionsExceeded
        | C::MaxConnectionsExceeded
        | C::MaxControlLineExceeded
        | C::MaxSubscriptionsExceeded
        | C::AuthenticationExpired => frame::CLOSE_POLICY_VIOLATION,
        C::TlsHandshakeError => frame::CLOSE_TLS_HANDSHAKE,
        C::ParseError | C::ProtocolViolation | C::BadClientProtocolVersion => frame::CLOSE_PROTOCOL_ERROR,
        C::MaxPayloadExceeded => frame::CLOSE_MESSAGE_TOO_BIG,
        C::WriteError | C::ReadError | C::StaleConnection | C::ServerShutdown => frame::CLOSE_GOING_AWAY,
        _ => frame::CLOSE_INTERNAL_ERROR,
    }
}

/// One upgraded connection.
pub struct WsSession {
    dec: Decoder,
    compress: bool,
    browser: bool,
    no_compressed_fragments: bool,
    deflater: Option<flate2::Compress>,
    zbuf: Vec<u8>,
    close_sent: bool,
}

impl WsSession {
    pub fn new(up: &upgrade::Upgraded, max_payload: usize) -> WsSession {
        WsSession {
            dec: Decoder::new(DecoderConfig {
                require_mask: !up.no_masking,
                compression: up.compress,
                max_payload,
            }),
            compress: up.compress,
            browser: up.browser,
            no_compressed_fragments: up.no_compressed_fragments,
            deflater: None,
            zbuf: Vec::new(),
            close_sent: false,
        }
    }

    /// Decode client bytes: protocol bytes to `app`, frames to send to `reply`.
    pub fn decode(&mut self, input: &[u8], app: &mut Vec<u8>, reply: &mut Vec<u8>) -> Result<Decoded, FrameError> {
        let r = self.dec.decode(input, app, reply);
        if matches!(r, Err(FrameError::Protocol(_)) | Ok(Decoded { closed: true })) {
            self.close_sent = true;
        }
        r
    }

    /// The connection's max payload changed (CONNECT bound it to an account).
    pub fn set_max_payload(&mut self, n: usize) {
        self.dec.set_max_payload(n);
    }

    /// Frame `data` (protocol bytes from the core) into `out`.
    pub fn encode(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if data.is_empty() || self.close_sent {
            return;
        }
        if self.compress && data.len() > COMPRESS_THRESHOLD {
            let mut z = std::mem::take(&mut self.zbuf);
            z.clear();
            let c = self.deflater.get_or_insert_with(deflate::compressor);
            deflate::deflate(c, data, &mut z);
            if self.browser && !self.no_compressed_fragments && z.len() > BROWSER_FRAME {
                let n = z.len().div_ceil(BROWSER_FRAME);
                for (i, part) in z.chunks(BROWSER_FRAME).enumerate() {
                    frame::put_header(out, frame::OP_BINARY, i == 0, i + 1 == n, i == 0, part.len());
                    out.extend_from_slice(part);
                }
            } else {
                frame::put_header(out, frame::OP_BINARY, true, true, true, z.len());
                out.extend_from_slice(&z);
            }
            if z.capacity() <= 256 * 1024 {
                self.zbuf = z;
            }
            return;
        }
        if self.browser {
            for part in data.chunks(BROWSER_FRAME) {
                frame::put_header(out, frame::OP_BINARY, true, true, false, part.len());
                out.extend_from_slice(part);
            }
        } else {
            frame::put_header(out, frame::OP_BINARY, true, true, false, data.len());
            out.extend_from_slice(data);
        }
    }

    /// Queue the close frame for `reason` (once).
    pub fn close(&mut self, reason: ClosedState, out: &mut Vec<u8>) {
        if self.close_sent {
            return;
        }
        self.close_sent = true;
        frame::put_control(
            out,
            frame::OP_CLOSE,
            &frame::close_payload(close_status(reason), reason.as_str()),
        );
    }

    /// A close frame went out (answer, protocol error or ours).
    pub fn close_sent(&self) -> bool {
        self.close_sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(compress: bool, browser: bool) -> WsSession {
        let up = upgrade::Upgraded {
            kind: upgrade::Kind::Client,
            compress,
            no_masking: false,
            client_ip: None,
            browser,
            no_compressed_fragments: false,
            cookies: Vec::new(),
            response: Vec::new(),
        };
        WsSession::new(&up, 1 << 20)
    }

    #[test]
    fn frames_as_the_reference() {
        let mut s = session(false, false);
        let mut out = Vec::new();
        s.encode(b"PONG\r\n", &mut out);
        assert_eq!(out, b"\x82\x06PONG\r\n");
        let mut s = session(false, true);
        let mut out = Vec::new();
        s.encode(&vec![b'x'; 5000], &mut out);
        assert_eq!(out.get(..4), Some(&[0x82, 126, 0x10, 0x00][..]));
        assert_eq!(out.get(4100..4104), Some(&[0x82, 126, 0x03, 0x88][..]));
        let mut s = session(true, false);
        let mut out = Vec::new();
        s.encode(b"small", &mut out);
        assert_eq!(out, b"\x82\x05small");
        out.clear();
        let big = b"MSG foo 1 5\r\nhello\r\n".repeat(10);
        s.encode(&big, &mut out);
        assert_eq!(out.first(), Some(&0xc2));
        let mut s = session(false, false);
        let mut out = Vec::new();
        s.close(ClosedState::AuthenticationViolation, &mut out);
        assert_eq!(out, [&[0x88, 24, 0x03, 0xf0][..], b"Authentication Failure"].concat());
        out.clear();
        s.close(ClosedState::ClientClosed, &mut out);
        s.encode(b"late", &mut out);
        assert!(out.is_empty());
    }
}
