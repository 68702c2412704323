//! The hook for encryption at rest: a [`BlockCipher`] seals each message body before it is
//! framed into a block and opens it after the frame's checksum passed. The store gives it
//! the block's file id (random, unique for every block file ever written, including the
//! rewrites of compaction and the fresh block started on every open) and the record's
//! offset in that file: the pair never repeats for different bytes, so a cipher may derive
//! its nonce from it. Only message bodies (headers and payload) are sealed: subjects stay
//! plain in this format version, and tombstones and sequence ranges hold only numbers.

use crate::error::Result;

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
