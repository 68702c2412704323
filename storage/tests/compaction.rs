//! Block compaction and the encryption hook: mostly dead blocks are rewritten smaller,
//! every live message still reads back (also after a restart), and bodies sealed by a
//! [`BlockCipher`] are re-sealed under the new block's file id.

mod common;

use common::TempDir;
use std::sync::Arc;
use storage::filestore::{BlockCipher, Compression};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, StoreError};

/// A toy cipher for the hook (not cryptography): XOR with a keystream drawn from the file
/// id and offset, plus a 4-byte tag that is checked on open.
struct Toy;

fn stream(file_id: u64, offset: u64, i: usize) -> u8 {
    (file_id.wrapping_mul(31).wrapping_add(offset).wrapping_add(i as u64 * 7) % 251) as u8
}

impl BlockCipher for Toy {
    fn seal(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> storage::Result<()> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b ^= stream(file_id, offset, i);
        }
        buf.extend_from_slice(&(file_id as u32 ^ offset as u32).to_le_bytes());
        Ok(())
    }
    fn open(&self, file_id: u64, offset: u64, buf: &mut Vec<u8>) -> storage::Result<()> {
        let n = buf
            .len()
            .checked_sub(4)
            .ok_or_else(|| StoreError::Encryption("short".into()))?;
        if buf[n..] != (file_id as u32 ^ offset as u32).to_le_bytes() {
            return Err(StoreError::Encryption("tag mismatch".into()));
        }
        buf.truncate(n);
        for (i, b) in buf.iter_mut().enumerate() {
            *b ^= stream(file_id, offset, i);
        }
        Ok(())
    }
}

fn config(dir: &std::path::Path, sealed: bool) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 16 * 1024;
    f.io = IoChoice::Auto;
    if sealed {
        f.cipher = Some(Arc::new(Toy));
        f.compression = Compression::S2;
    }
    f
}

fn dir_size(d: &std::path::Path) -> u64 {
    std::fs::read_dir(d)
        .expect("dir")
        .map(|e| e.expect("entry").metadata().expect("meta").len())
        .sum()
}

fn run(sealed: bool) {
    let dir = TempDir::new(None, "compaction");
    let mut s = FileStore::open(config(dir.path(), sealed), StoreConfig::new("C")).expect("open");
    // Barely compressible bodies, so s2 keeps the blocks about as many.
    let body = |i: u64| {
        let mut v = format!("message {i} ").into_bytes();
        let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        while v.len() < 420 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(x as u8);
        }
        v
    };
    for i in 1..=600u64 {
        s.store_msg(&format!("c.{}", i % 4), b"", &body(i), 0).expect("store");
    }
    for i in 1..=600u64 {
        if i % 4 != 0 {
            s.remove_msg(i).expect("remove");
        }
    }
    s.sync().expect("sync");
    if !sealed {
        assert!(
            !std::fs::read(dir.path().join("0000000002.blk"))
                .expect("block")
                .windows(9)
                .any(|w| w == b"message 7"),
            "test premise: block 2 holds other messages"
        );
    }
    let before = dir_size(dir.path());
    let n = s.compact_blocks().expect("compact");
    assert!(n > 5, "rewrote {n} blocks");
    let after = dir_size(dir.path());
    assert!(after * 2 < before, "{before} -> {after} bytes");
    for round in 0..2 {
        for i in (4..=600u64).step_by(4) {
            let m = s.load_msg(i).unwrap_or_else(|e| panic!("round {round}: seq {i}: {e}"));
            assert_eq!(&m.payload[..], &body(i)[..]);
        }
        assert!(matches!(s.load_msg(5), Err(StoreError::MsgNotFound)));
        assert_eq!(s.fast_state().msgs, 150);
        assert_eq!(s.corruptions(), 0);
        s.stop().expect("stop");
        drop(s);
        s = FileStore::open(config(dir.path(), sealed), StoreConfig::new("C")).expect("reopen");
    }
    // Sealed bodies are not on disk in the clear.
    if sealed {
        for e in std::fs::read_dir(dir.path()).expect("dir") {
            let data = std::fs::read(e.expect("entry").path()).expect("read");
            assert!(!data.windows(10).any(|w| w == b"message 8 "), "plaintext on disk");
        }
        // A wrong cipher is refused at open (it would serve nothing, and drop every
        // message it cannot open).
        drop(s);
        struct Other;
        impl BlockCipher for Other {
            fn seal(&self, _: u64, _: u64, _: &mut Vec<u8>) -> storage::Result<()> {
                Ok(())
            }
            fn open(&self, _: u64, _: u64, _: &mut Vec<u8>) -> storage::Result<()> {
                Err(StoreError::Encryption("wrong key".into()))
            }
        }
        let mut c = config(dir.path(), true);
        c.cipher = Some(Arc::new(Other));
        assert!(matches!(
            FileStore::open(c, StoreConfig::new("C")),
            Err(StoreError::Encryption(_))
        ));
    }
}

#[test]
fn compaction_rewrites_dead_blocks() {
    run(false);
}

#[test]
fn compaction_reseals_sealed_bodies() {
    run(true);
}
