//! nats-server 2.14's file formats: its message records and blocks, `index.db`, the
//! `meta.inf`/`meta.sum` pair, encrypted key files, `cmp`-framed s2 blocks, and the stream
//! snapshot (an s2-framed tar). The file store reads a reference `store_dir` through this
//! module (converting it to rnats blocks on first open) and writes and reads snapshots in
//! the reference's format, so backups move between the two servers.

pub mod dir;
pub mod import;
pub mod indexdb;
pub mod record;
pub mod snapshot;

use highway::{HighwayHash, HighwayHasher, Key};
use sha2::{Digest, Sha256};

/// A HighwayHash-64 keyed as the reference keys it: by the SHA-256 of `seed`.
pub fn hasher(seed: &[u8]) -> HighwayHasher {
    let k: [u8; 32] = Sha256::digest(seed).into();
    let mut words = [0u64; 4];
    for (w, c) in words.iter_mut().zip(k.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        *w = u64::from_le_bytes(b);
    }
    HighwayHasher::new(Key(words))
}

/// HighwayHash-64 of the concatenation of `parts`, in the reference's byte order.
pub fn hash64(seed: &[u8], parts: &[&[u8]]) -> [u8; 8] {
    let mut h = hasher(seed);
    for p in parts {
        h.append(p);
    }
    h.finalize64().to_le_bytes()
}

/// The `meta.sum` contents for `meta.inf` bytes of stream `name`.
pub fn meta_sum(name: &str, meta: &[u8]) -> String {
    hash64(name.as_bytes(), &[meta])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The key the reference hashes a block's records with.
pub fn block_seed(name: &str, index: u32) -> Vec<u8> {
    format!("{name}-{index}").into_bytes()
}
