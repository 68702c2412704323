//! The hook for encryption at rest: a [`BlockCipher`] seals each message body before it is
//! framed into a block and opens it after the frame's checksum passed. The store gives it
//! the block's file id (random, unique for every block file ever written, including the
//! rewrites of compaction and the fresh block started on every open) and the record's
//! offset in that file: the pair never repeats for different bytes, so a cipher may derive
//! its nonce from it. A message's subject, headers length and body are sealed as one (see
//! the record format in [`format`](mod@super::format)); tombstones, sequence ranges and commit records
//! hold only numbers. The state file is sealed whole (at a random id and offset
//! `u64::MAX`).

use crate::error::{Result, StoreError};

/// Seals and opens record bodies. Implementations live in the crypto module.
pub trait BlockCipher: Send + Sync {
    /// Encrypt `buf` in place; it may grow (an authentication tag).
    fn seal(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()>;
    /// Decrypt and authenticate `buf` in place; a failure is reported as a corruption.
    fn open(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()>;
}

/// No encryption: bodies are stored as they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCipher;

impl BlockCipher for NoCipher {
    fn seal(&self, _: u64, _: u64, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn open(&self, _: u64, _: u64, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
}

/// The stream's record sealer (`jetstream { key, cipher, prev_key }`, keys derived as in
/// [`crate::crypto`]) is the file store's cipher.
impl BlockCipher for crate::crypto::RecordSealer {
    fn seal(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.seal_at(file_id, offset, buf)
    }
    fn open(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.open_at(file_id, offset, buf)
    }
}

/// What a message record with a sealed subject holds once opened.
pub(crate) struct Opened {
    pub subject: Vec<u8>,
    pub hdr_len: u32,
    /// The stored body (s2-compressed when the record says so).
    pub body: Vec<u8>,
}

/// Seal a message's subject, headers length and stored body as one buffer:
/// `subject length (u16) ‖ headers length (u32) ‖ subject ‖ body`, sealed at (`file_id`,
/// `offset`).
pub(crate) fn seal_content(
    cipher: &dyn BlockCipher,
    file_id: u64,
    offset: u64,
    subject: &[u8],
    hdr_len: u32,
    body: &[u8],
) -> Result<Vec<u8>> {
    let slen = u16::try_from(subject.len()).map_err(|_| StoreError::MsgTooLarge)?;
    let mut buf = Vec::with_capacity(6 + subject.len() + body.len() + 32);
    buf.extend_from_slice(&slen.to_le_bytes());
    buf.extend_from_slice(&hdr_len.to_le_bytes());
    buf.extend_from_slice(subject);
    buf.extend_from_slice(body);
    cipher.seal(file_id, offset, &mut buf)?;
    Ok(buf)
}

/// Open what [`seal_content`] sealed. An error: the wrong key, another position, or bytes
/// that do not hold what they should.
pub(crate) fn open_content(cipher: &dyn BlockCipher, file_id: u64, offset: u64, sealed: &[u8]) -> Result<Opened> {
    let mut buf = sealed.to_vec();
    cipher.open(file_id, offset, &mut buf)?;
    let bad = || StoreError::Encryption("sealed message content malformed".into());
    let slen = usize::from(u16::from_le_bytes(
        buf.get(..2).and_then(|b| b.try_into().ok()).ok_or_else(bad)?,
    ));
    let hdr_len = u32::from_le_bytes(buf.get(2..6).and_then(|b| b.try_into().ok()).ok_or_else(bad)?);
    let subject = buf.get(6..6 + slen).ok_or_else(bad)?.to_vec();
    let body = buf.split_off(6 + slen);
    Ok(Opened { subject, hdr_len, body })
}
