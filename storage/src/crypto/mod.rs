//! Encryption at rest, with nats-server 2.14's configuration and key derivation, so that
//! encrypted reference store directories can be read and rnats's own blocks can be sealed.
//!
//! The configuration is the reference's `jetstream { key, cipher, prev_key }` block
//! ([`EncryptionConfig`]). Keys are derived as the reference derives them:
//!
//! - The server key and an *info* string (the account name, or the meta group's name)
//!   make a key-generation function: `prf(context) = HMAC-SHA256(key, info ‖ context)`.
//! - A *key encryption key* (KEK) is an AEAD keyed by `prf(context)`: XChaCha20-Poly1305
//!   for `chachapoly`, AES-256-GCM with a 16-byte nonce for `aes`. The context of a
//!   stream's `meta.key` is the stream name; that of a message block's `<n>.key` is
//!   `<stream>:<n>`.
//! - A key file is `nonce ‖ KEK.seal(nonce, seed)`: the KEK's nonce followed by a sealed,
//!   random 32-byte *seed*. The seed keys the asset's AEAD (which seals `meta.inf` and
//!   `index.db` as `nonce ‖ ciphertext`), and, with the key file's nonce, a stream cipher
//!   (XChaCha20, or AES-256-CTR with the nonce as IV) that is XORed over a whole block
//!   file from offset 0.
//! - When a key file does not open with the configured cipher, the other cipher is tried,
//!   then both with `prev_key` (key rotation), as the reference does; [`SeedKey::rotated`]
//!   says that the file needs rewriting under the current key.
//!
//! # API for the file store
//!
//! [`StreamKeys::new`] holds the keys of one stream. Two sealers derive from it, both
//! `Send + Sync` and both needing only the configuration to reopen a store (no key files):
//!
//! - [`StreamKeys::record_sealer`]: a [`RecordSealer`] whose
//!   [`RecordSealer::seal_at`]`(file_id, offset, buf)` encrypts and authenticates `buf` in
//!   place (16 bytes longer) with a nonce made of the pair, and whose
//!   [`RecordSealer::open_at`] reverses it (falling back to `prev_key`). This is the shape
//!   of the file store's `BlockCipher` hook (a block's unique file id and the record's
//!   offset, never repeated for different bytes): `RecordSealer` implements it
//!   (`storage::filestore::cipher`), so `FileStoreConfig::cipher` takes it as it is.
//!
//! - [`StreamKeys::block_cipher`]`(n)`: a [`BlockCrypter`] for block `n` whose
//!   [`BlockCrypter::seal`] turns plaintext into `nonce ‖ ciphertext ‖ tag` (random nonce)
//!   under a key derived from `prf("<stream>:<n>:rnats-block")`, and whose
//!   [`BlockCrypter::open`] reverses it.
//!
//! Either one reports, through `opened_with_prev()`, that something opened only with
//! `prev_key`, so the store can rewrite it under the current key. The keys derive from the
//! same `prf` as the reference's, with contexts the reference never uses, so they cannot
//! collide with its key files. [`StreamKeys::new_key_file`] and
//! [`StreamKeys::open_key_file`] give the reference's random-seed key files for stores
//! that want the reference's layout.
//!
//! TPM-sealed keys: see [`tpm`].

pub mod tpm;
#[cfg(feature = "tpm")]
mod tpm_esapi;

use crate::error::{Result, StoreError};
use aes::Aes256;
use aes_gcm::aead::consts::U16;
use aes_gcm::aead::{Aead as _, KeyInit};
use aes_gcm::AesGcm;
use chacha20::cipher::{KeyIvInit, StreamCipher};
use chacha20poly1305::XChaCha20Poly1305;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use std::sync::atomic::{AtomicBool, Ordering};

/// AES-256-GCM with the 16-byte nonce the reference uses.
type Aes256Gcm16 = AesGcm<Aes256, U16>;
type Aes256Ctr = ctr::Ctr128BE<Aes256>;

/// Smallest key file the reference accepts (`minMetaKeySize`, `minBlkKeySize`).
pub const MIN_KEY_FILE: usize = 64;
/// Size of a generated seed.
pub const SEED_LEN: usize = 32;

/// The store cipher (`cipher: chachapoly | aes`; `chacha` is accepted too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cipher {
    #[default]
    ChaCha,
    Aes,
}

impl Cipher {
    /// Parse the reference's config value (case-insensitive).
    pub fn parse(s: &str) -> Result<Cipher> {
        match s.to_ascii_lowercase().as_str() {
            "chacha" | "chachapoly" => Ok(Cipher::ChaCha),
            "aes" => Ok(Cipher::Aes),
            _ => Err(StoreError::Config(format!("Unknown cipher type: {s:?}"))),
        }
    }

    /// The reference's display name (`ChaCha20-Poly1305`, `AES-GCM`).
    pub fn name(self) -> &'static str {
        match self {
            Cipher::ChaCha => "ChaCha20-Poly1305",
            Cipher::Aes => "AES-GCM",
        }
    }

    /// The other cipher (tried on a cipher conversion).
    pub fn other(self) -> Cipher {
        match self {
            Cipher::ChaCha => Cipher::Aes,
            Cipher::Aes => Cipher::ChaCha,
        }
    }

    /// Nonce length of this cipher's AEAD (and of its key files' nonce).
    pub fn nonce_len(self) -> usize {
        match self {
            Cipher::ChaCha => 24,
            Cipher::Aes => 16,
        }
    }
}

/// The reference's encryption settings (`jetstream { key, cipher, prev_key }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncryptionConfig {
    pub key: String,
    pub cipher: Cipher,
    /// The key before a rotation: files that do not open with `key` are tried with it.
    pub prev_key: Option<String>,
}

impl EncryptionConfig {
    pub fn new(key: &str, cipher: Cipher) -> EncryptionConfig {
        EncryptionConfig {
            key: key.to_string(),
            cipher,
            prev_key: None,
        }
    }
}

fn enc_err(why: impl Into<String>) -> StoreError {
    StoreError::Encryption(why.into())
}

/// `HMAC-SHA256(key, info ‖ context)`.
fn prf(key: &str, info: &str, context: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length; this cannot fail.
    let Ok(mut h) = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()) else {
        return [0; 32];
    };
    h.update(info.as_bytes());
    h.update(context);
    h.finalize().into_bytes().into()
}

/// An AEAD of either cipher, keyed by 32 bytes. Sealed data is `nonce ‖ ciphertext ‖ tag`.
#[derive(Clone)]
pub struct Aead {
    cipher: Cipher,
    inner: AeadInner,
}

#[derive(Clone)]
enum AeadInner {
    ChaCha(Box<XChaCha20Poly1305>),
    Aes(Box<Aes256Gcm16>),
}

impl std::fmt::Debug for Aead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Aead({})", self.cipher.name())
    }
}

impl Aead {
    pub fn new(cipher: Cipher, key: &[u8; 32]) -> Aead {
        let inner = match cipher {
            Cipher::ChaCha => AeadInner::ChaCha(Box::new(XChaCha20Poly1305::new(key.into()))),
            Cipher::Aes => AeadInner::Aes(Box::new(Aes256Gcm16::new(key.into()))),
        };
        Aead { cipher, inner }
    }

    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    pub fn nonce_len(&self) -> usize {
        self.cipher.nonce_len()
    }

    /// Seal `plain` with the given nonce (of [`Aead::nonce_len`] bytes); returns the
    /// ciphertext and tag without the nonce.
    pub fn seal_with(&self, nonce: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
        if nonce.len() != self.nonce_len() {
            return Err(enc_err("bad nonce length"));
        }
        let r = match &self.inner {
            AeadInner::ChaCha(a) => a.encrypt(nonce.into(), plain),
            AeadInner::Aes(a) => a.encrypt(nonce.into(), plain),
        };
        r.map_err(|_| enc_err("seal failed"))
    }

    /// Seal with a fresh random nonce: `nonce ‖ ciphertext ‖ tag`.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        let mut nonce = vec![0u8; self.nonce_len()];
        rand::thread_rng().fill_bytes(&mut nonce);
        let body = self.seal_with(&nonce, plain).unwrap_or_default();
        nonce.extend_from_slice(&body);
        nonce
    }

    /// Open `nonce ‖ ciphertext ‖ tag`.
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>> {
        let ns = self.nonce_len();
        if sealed.len() < ns + 16 {
            return Err(enc_err("sealed data too short"));
        }
        let (nonce, body) = sealed.split_at(ns);
        let r = match &self.inner {
            AeadInner::ChaCha(a) => a.decrypt(nonce.into(), body),
            AeadInner::Aes(a) => a.decrypt(nonce.into(), body),
        };
        r.map_err(|_| enc_err("authentication failed (wrong key or damaged data)"))
    }
}

/// XOR `buf` in place with the block stream cipher of (`seed`, `nonce`) from offset 0:
/// XChaCha20 for ChaCha (24-byte nonce), AES-256-CTR for AES (16-byte IV).
pub fn xor_block(cipher: Cipher, seed: &[u8; 32], nonce: &[u8], buf: &mut [u8]) -> Result<()> {
    if nonce.len() != cipher.nonce_len() {
        return Err(enc_err("bad block nonce length"));
    }
    match cipher {
        Cipher::ChaCha => {
            let mut c = chacha20::XChaCha20::new(seed.into(), nonce.into());
            c.apply_keystream(buf);
        }
        Cipher::Aes => {
            let mut c = Aes256Ctr::new(seed.into(), nonce.into());
            c.apply_keystream(buf);
        }
    }
    Ok(())
}

/// The seed a key file holds, with what opened it.
#[derive(Clone, Debug)]
pub struct SeedKey {
    pub cipher: Cipher,
    pub seed: [u8; 32],
    /// The key file's nonce (the block stream cipher's nonce).
    pub nonce: Vec<u8>,
    /// Opened with the other cipher or with `prev_key`: the file should be rewritten.
    pub rotated: bool,
}

impl SeedKey {
    /// The asset AEAD (seals `meta.inf`, `index.db`, consumer state).
    pub fn aead(&self) -> Aead {
        Aead::new(self.cipher, &self.seed)
    }

    /// Decrypt (or encrypt) a whole block file in place.
    pub fn xor_block(&self, buf: &mut [u8]) -> Result<()> {
        xor_block(self.cipher, &self.seed, &self.nonce, buf)
    }
}

/// The encryption keys of one stream.
#[derive(Clone, Debug)]
pub struct StreamKeys {
    cfg: EncryptionConfig,
    info: String,
    stream: String,
}

impl StreamKeys {
    /// Keys of `stream` in `account` (the prf's info string; for clustered streams the
    /// reference uses the raft group's name instead).
    pub fn new(cfg: &EncryptionConfig, account: &str, stream: &str) -> StreamKeys {
        StreamKeys {
            cfg: cfg.clone(),
            info: account.to_string(),
            stream: stream.to_string(),
        }
    }

    pub fn stream(&self) -> &str {
        &self.stream
    }

    pub fn cipher(&self) -> Cipher {
        self.cfg.cipher
    }

    /// (key, cipher, rotated) in the order the reference tries them.
    fn candidates(&self) -> Vec<(&str, Cipher, bool)> {
        let c = self.cfg.cipher;
        let mut v = vec![
            (self.cfg.key.as_str(), c, false),
            (self.cfg.key.as_str(), c.other(), true),
        ];
        if let Some(p) = &self.cfg.prev_key {
            v.push((p.as_str(), c, true));
            v.push((p.as_str(), c.other(), true));
        }
        v
    }

    fn kek(&self, key: &str, cipher: Cipher, context: &str) -> Aead {
        Aead::new(cipher, &prf(key, &self.info, context.as_bytes()))
    }

    /// Context of the stream's `meta.key`.
    pub fn meta_context(&self) -> String {
        self.stream.clone()
    }

    /// Context of block `n`'s `<n>.key`.
    pub fn block_context(&self, block: u32) -> String {
        format!("{}:{block}", self.stream)
    }

    /// Open a key file written for `context`.
    pub fn open_key_file(&self, context: &str, file: &[u8]) -> Result<SeedKey> {
        if file.len() < MIN_KEY_FILE {
            return Err(enc_err(format!("bad key file length {}", file.len())));
        }
        for (key, cipher, rotated) in self.candidates() {
            let kek = self.kek(key, cipher, context);
            let Ok(seed) = kek.open(file) else { continue };
            let Ok(seed) = <[u8; 32]>::try_from(seed.as_slice()) else {
                continue;
            };
            let nonce = file.get(..cipher.nonce_len()).unwrap_or_default().to_vec();
            return Ok(SeedKey {
                cipher,
                seed,
                nonce,
                rotated,
            });
        }
        Err(enc_err("unable to recover keys"))
    }

    /// A new random seed and its key file under the current key.
    pub fn new_key_file(&self, context: &str) -> (SeedKey, Vec<u8>) {
        let cipher = self.cfg.cipher;
        let kek = self.kek(&self.cfg.key, cipher, context);
        let mut seed = [0u8; SEED_LEN];
        rand::thread_rng().fill_bytes(&mut seed);
        let file = kek.seal(&seed);
        let nonce = file.get(..cipher.nonce_len()).unwrap_or_default().to_vec();
        (
            SeedKey {
                cipher,
                seed,
                nonce,
                rotated: false,
            },
            file,
        )
    }

    /// Open an encrypted `meta.inf` with its `meta.key` (trying both ciphers and the
    /// previous key as the reference does). Returns the plaintext and whether a rotated
    /// key or cipher opened it.
    pub fn open_meta(&self, meta_key: &[u8], meta_inf: &[u8]) -> Result<(Vec<u8>, SeedKey)> {
        if meta_key.len() < MIN_KEY_FILE {
            return Err(enc_err(format!(
                "Bad stream encryption key length of {}",
                meta_key.len()
            )));
        }
        let ctx = self.meta_context();
        for (key, cipher, rotated) in self.candidates() {
            let kek = self.kek(key, cipher, &ctx);
            let Ok(seed) = kek.open(meta_key) else { continue };
            let Ok(seed) = <[u8; 32]>::try_from(seed.as_slice()) else {
                continue;
            };
            let sk = SeedKey {
                cipher,
                seed,
                nonce: meta_key.get(..cipher.nonce_len()).unwrap_or_default().to_vec(),
                rotated,
            };
            if let Ok(plain) = sk.aead().open(meta_inf) {
                return Ok((plain, sk));
            }
        }
        Err(enc_err("unable to recover keys"))
    }

    /// The sealer of block `block` for rnats's own blocks (see the module docs).
    pub fn block_cipher(&self, block: u32) -> BlockCrypter {
        let ctx = format!("{}:{block}:rnats-block", self.stream);
        let current = Aead::new(self.cfg.cipher, &prf(&self.cfg.key, &self.info, ctx.as_bytes()));
        let prev = self
            .cfg
            .prev_key
            .as_deref()
            .map(|k| Aead::new(self.cfg.cipher, &prf(k, &self.info, ctx.as_bytes())));
        BlockCrypter {
            current,
            prev,
            used_prev: AtomicBool::new(false),
        }
    }

    /// The record sealer of this stream for rnats's own blocks (see the module docs).
    pub fn record_sealer(&self) -> RecordSealer {
        let ctx = format!("{}:rnats-records", self.stream);
        let key = |k: &str| Aead::new(self.cfg.cipher, &prf(k, &self.info, ctx.as_bytes()));
        RecordSealer {
            current: key(&self.cfg.key),
            prev: self.cfg.prev_key.as_deref().map(key),
            used_prev: AtomicBool::new(false),
        }
    }
}

/// Seals record bodies in place with a nonce made of (file id, offset); see the module docs.
#[derive(Debug)]
pub struct RecordSealer {
    current: Aead,
    prev: Option<Aead>,
    used_prev: AtomicBool,
}

/// Length of the authentication tag a sealed buffer gains.
pub const TAG_LEN: usize = 16;

impl RecordSealer {
    fn nonce(&self, file_id: u64, offset: u64) -> Vec<u8> {
        let mut n = vec![0u8; self.current.nonce_len()];
        n.get_mut(..8)
            .unwrap_or_default()
            .copy_from_slice(&file_id.to_le_bytes());
        n.get_mut(8..16)
            .unwrap_or_default()
            .copy_from_slice(&offset.to_le_bytes());
        n
    }

    /// Encrypt and authenticate `buf` in place ([`TAG_LEN`] bytes longer). The pair
    /// (`file_id`, `offset`) must never be used again for different bytes.
    pub fn seal_at(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        let sealed = self.current.seal_with(&self.nonce(file_id, offset), buf)?;
        *buf = sealed;
        Ok(())
    }

    /// Authenticate and decrypt `buf` in place; the previous key is tried when the current
    /// one fails. An error means damaged data, another position, or the wrong key.
    pub fn open_at(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        let nonce = self.nonce(file_id, offset);
        let sealed = std::mem::take(buf);
        let mut nonce_and_body = nonce.clone();
        nonce_and_body.extend_from_slice(&sealed);
        let r = match self.current.open(&nonce_and_body) {
            Ok(p) => Ok(p),
            Err(e) => match &self.prev {
                Some(p) => p
                    .open(&nonce_and_body)
                    .inspect(|_| self.used_prev.store(true, Ordering::Relaxed)),
                None => Err(e),
            },
        };
        match r {
            Ok(p) => {
                *buf = p;
                Ok(())
            }
            Err(e) => {
                *buf = sealed;
                Err(e)
            }
        }
    }

    /// Did an open need the previous key (the data should be rewritten)?
    pub fn opened_with_prev(&self) -> bool {
        self.used_prev.load(Ordering::Relaxed)
    }
}

/// Seals and opens the records (or chunks) of one block. Sealed form:
/// `nonce ‖ ciphertext ‖ 16-byte tag` ([`BlockCrypter::overhead`] bytes more than the input).
#[derive(Debug)]
pub struct BlockCrypter {
    current: Aead,
    prev: Option<Aead>,
    used_prev: AtomicBool,
}

impl BlockCrypter {
    /// Bytes a sealed buffer has beyond its plaintext.
    pub fn overhead(&self) -> usize {
        self.current.nonce_len() + 16
    }

    /// Encrypt and authenticate `plain` under the current key.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        self.current.seal(plain)
    }

    /// Authenticate and decrypt; falls back to the previous key (then
    /// [`BlockCrypter::opened_with_prev`] is true).
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>> {
        match self.current.open(sealed) {
            Ok(p) => Ok(p),
            Err(e) => match &self.prev {
                Some(p) => {
                    let r = p.open(sealed)?;
                    self.used_prev.store(true, Ordering::Relaxed);
                    Ok(r)
                }
                None => Err(e),
            },
        }
    }

    /// Did an [`BlockCrypter::open`] need the previous key?
    pub fn opened_with_prev(&self) -> bool {
        self.used_prev.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
