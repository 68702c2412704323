//! One connection's TLS, sans-IO: rustls's `ServerConnection` driven with
//! `read_tls`/`process_new_packets`/`write_tls` over byte buffers. Ciphertext comes in as
//! a slice read by the driver and plaintext goes out into a buffer the caller owns;
//! plaintext to send is encrypted into rustls's buffer, which the driver drains into the
//! socket with [`TlsSession::write_tls`] (any `io::Write`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::peer::TlsPeer;
use rustls::{AlertDescription, CertificateError, Error, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::sync::Arc;

/// A failed TLS connection, with the text nats-server logs for the closest Go error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

/// What one batch of ciphertext produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The handshake completed during this batch.
    pub handshake_done: bool,
    /// The peer sent `close_notify`.
    pub peer_closed: bool,
}

pub struct TlsSession {
    conn: ServerConnection,
    /// A record was accepted (the first one decides "does not look like TLS").
    seen_record: bool,
    was_handshaking: bool,
}

/// Go's error for a client that does not speak TLS.
pub const NOT_TLS: &str = "tls: first record does not look like a TLS handshake";

/// Go's wording for the most common failures (clients and tests look for these).
pub fn go_error_text(e: &Error, first_record: bool) -> String {
    match e {
        Error::InvalidMessage(_) if first_record => NOT_TLS.into(),
        Error::NoCertificatesPresented => "tls: client didn't provide a certificate".into(),
        Error::InvalidCertificate(c) => {
            let what = match c {
                CertificateError::UnknownIssuer => "x509: certificate signed by unknown authority".to_string(),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "x509: certificate has expired or is not yet valid".to_string()
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    "x509: certificate has expired or is not yet valid".to_string()
                }
                CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                    "x509: certificate specifies an incompatible key usage".to_string()
                }
                other => format!("x509: {other:?}"),
            };
            format!("tls: failed to verify certificate: {what}")
        }
        Error::AlertReceived(a) => format!("remote error: tls: {}", alert_text(*a)),
        Error::PeerIncompatible(p) => format!("tls: {p:?}"),
        other => format!("tls: {other}"),
    }
}

/// Go's alert names.
fn alert_text(a: AlertDescription) -> String {
    match a {
        AlertDescription::BadCertificate => "bad certificate".into(),
        AlertDescription::UnknownCA => "unknown certificate authority".into(),
        AlertDescription::CertificateExpired => "expired certificate".into(),
        AlertDescription::CertificateUnknown => "unknown certificate".into(),
        AlertDescription::HandshakeFailure => "handshake failure".into(),
        AlertDescription::ProtocolVersion => "protocol version not supported".into(),
        AlertDescription::DecryptError => "error decrypting message".into(),
        AlertDescription::InternalError => "internal error".into(),
        AlertDescription::CloseNotify => "close notify".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

impl TlsSession {
    pub fn new(cfg: Arc<ServerConfig>) -> Result<TlsSession, TlsError> {
        let mut conn = ServerConnection::new(cfg).map_err(|e| TlsError(format!("tls: {e}")))?;
        // The driver bounds what it hands over (it takes more plaintext only once the
        // ciphertext is written), so rustls need not.
        conn.set_buffer_limit(None);
        Ok(TlsSession {
            conn,
            seen_record: false,
            was_handshaking: true,
        })
    }

    /// Feed ciphertext read from the socket; decrypted bytes are appended to `plain`.
    /// On error the session may have queued an alert: write it before closing.
    pub fn read(&mut self, mut data: &[u8], plain: &mut Vec<u8>) -> Result<ReadOutcome, TlsError> {
        let mut out = ReadOutcome::default();
        while !data.is_empty() {
            match self.conn.read_tls(&mut data) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(TlsError(format!("tls: {e}"))),
            }
            let state = match self.conn.process_new_packets() {
                Ok(s) => s,
                Err(e) => return Err(TlsError(go_error_text(&e, !self.seen_record))),
            };
            self.seen_record = true;
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let start = plain.len();
                plain.resize(start + n, 0);
                let dst = plain.get_mut(start..).unwrap_or_default();
                if self.conn.reader().read_exact(dst).is_err() {
                    plain.truncate(start);
                }
            }
            if state.peer_has_closed() {
                out.peer_closed = true;
            }
        }
        if self.was_handshaking && !self.conn.is_handshaking() {
            self.was_handshaking = false;
            out.handshake_done = true;
        }
        Ok(out)
    }

    /// Still negotiating.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Encrypt `data` for sending (buffered until [`TlsSession::write_tls`]).
    pub fn write_plain(&mut self, data: &[u8]) -> Result<(), TlsError> {
        self.conn
            .writer()
            .write_all(data)
            .map_err(|e| TlsError(format!("tls: {e}")))
    }

    /// Ciphertext is waiting for the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Move queued ciphertext to `w` (the socket). `WouldBlock` comes back as an error.
    pub fn write_tls(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        self.conn.write_tls(w)
    }

    /// Queue a `close_notify` alert.
    pub fn close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    /// The client as authentication sees it (its certificate, if it sent one).
    pub fn peer(&self) -> TlsPeer {
        let chain = self.conn.peer_certificates().unwrap_or_default();
        TlsPeer::from_chain(chain, self.version(), self.cipher())
    }

    /// `1.2` or `1.3` (nats-server's debug line and `/connz`).
    pub fn version(&self) -> &'static str {
        match self.conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
            _ => "",
        }
    }

    /// The cipher suite's IANA name, as Go names it.
    pub fn cipher(&self) -> String {
        self.conn
            .negotiated_cipher_suite()
            .map(|s| super::config::go_cipher_name(s.suite()))
            .unwrap_or_default()
    }

    /// The server name the client asked for (SNI).
    pub fn server_name(&self) -> Option<&str> {
        self.conn.server_name()
    }
}
