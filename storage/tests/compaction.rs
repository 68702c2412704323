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
    // Direct I/O pads each rewritten block's end to 4 KiB (a quarter of these tiny
    // blocks; nothing with real ones).
    let padding = if s.io_backend() == "threaded" {
        0
    } else {
        4096 * n as u64
    };
    assert!((after - padding) * 2 < before, "{before} -> {after} bytes");
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

// ---------------------------------------------------------------------------------------
// Automatic compaction: driven by the owner's loop, crash-safe at every step.

fn payload(seq: u64) -> Vec<u8> {
    let mut v = format!("auto {seq} ").into_bytes();
    v.resize(100, b'a' + (seq % 26) as u8);
    v
}

fn auto_config(dir: &std::path::Path, io: &IoChoice) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    // Blocks of two steps' reads each, so a rewrite spans several loop turns.
    f.block_size = 512 * 1024;
    f.io = io.clone();
    f
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).expect("dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

/// Open a copy (through the buffered backend: an independent read path) and check that it
/// holds exactly the live messages, intact, and none of the removed ones.
fn check_copy(dir: &std::path::Path, live: &std::collections::BTreeSet<u64>, last: u64, ctx: &str) {
    let mut s = FileStore::open(auto_config(dir, &IoChoice::Buffered), StoreConfig::new("A")).expect("reopen");
    for seq in 1..=last {
        match s.load_msg(seq) {
            Ok(m) => {
                assert!(live.contains(&seq), "{ctx}: removed seq {seq} came back");
                assert_eq!(&m.payload[..], &payload(seq)[..], "{ctx}: seq {seq}");
            }
            Err(StoreError::MsgNotFound) => assert!(!live.contains(&seq), "{ctx}: live seq {seq} lost"),
            Err(e) => panic!("{ctx}: seq {seq}: {e}"),
        }
    }
    let st = s.fast_state();
    assert_eq!(st.msgs, live.len() as u64, "{ctx}");
    assert_eq!(st.last_seq, last, "{ctx}");
    assert_eq!(s.corruptions(), 0, "{ctx}");
}

fn blocks_of(dir: &std::path::Path) -> std::collections::BTreeMap<std::ffi::OsString, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".blk"))
        .map(|e| (e.file_name(), std::fs::read(e.path()).expect("read")))
        .collect()
}

fn crash_at_every_step(io: IoChoice, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = TempDir::new(None, "auto-compact");
    let mut s = FileStore::open(auto_config(dir.path(), &io), StoreConfig::new("A")).expect("open");
    // Small messages: the tombstones of 90% of them fill blocks of their own.
    let n = 20_000u64;
    for seq in 1..=n {
        s.store_msg(&format!("a.{}", seq % 7), b"", &payload(seq), 0)
            .expect("store");
    }
    s.sync().expect("sync");
    let mut live: std::collections::BTreeSet<u64> = (1..=n).collect();
    // 90% removed at random (never the last message: the test checks last_seq).
    for seq in 1..n {
        if rng.gen_bool(0.9) {
            assert!(s.remove_msg(seq).expect("remove"));
            live.remove(&seq);
        }
    }
    s.sync().expect("sync");
    let before = dir_size(dir.path());
    let mut prev = blocks_of(dir.path());
    let mut idle = 0;
    let mut erased = None;
    for step in 0..400 {
        // Removals and an erasure while blocks are being rewritten.
        if step % 5 == 2 {
            if let Some(&seq) = live.iter().nth(rng.gen_range(0..live.len() - 1)) {
                if erased.is_none() && s.compaction_running() {
                    assert!(s.erase_msg(seq).expect("erase"));
                    erased = Some(seq);
                } else {
                    assert!(s.remove_msg(seq).expect("remove"));
                }
                live.remove(&seq);
            }
        }
        s.submit().expect("submit");
        s.poll_completions().expect("poll");
        s.sync().expect("sync");
        // A kill here: the files as they are.
        let copy = TempDir::new(None, "auto-compact-copy");
        copy_dir(dir.path(), copy.path());
        let ctx = format!("step {step}");
        // A cut of the half-written new block changes nothing.
        for e in std::fs::read_dir(copy.path()).expect("dir") {
            let p = e.expect("entry").path();
            if p.to_string_lossy().ends_with(".tmp") {
                let len = std::fs::metadata(&p).expect("meta").len();
                let f = std::fs::OpenOptions::new().write(true).open(&p).expect("open tmp");
                f.set_len(rng.gen_range(0..=len)).expect("cut");
            }
        }
        let now = blocks_of(dir.path());
        check_copy(copy.path(), &live, n, &ctx);
        // The rename of this step not on disk yet: the old copy of that block with
        // everything else as it is now.
        for (name, old) in &prev {
            let id = |b: &[u8]| storage::filestore::block_header(b).map(|h| h.file_id);
            if now.get(name).is_some_and(|b| id(b) != id(old)) {
                let alt = TempDir::new(None, "auto-compact-alt");
                copy_dir(dir.path(), alt.path());
                std::fs::write(alt.path().join(name), old).expect("write old");
                check_copy(alt.path(), &live, n, &format!("{ctx}, old {name:?}"));
            }
        }
        prev = now;
        if s.compaction_running() {
            idle = 0;
        } else {
            idle += 1;
            if idle > 3 {
                break;
            }
        }
    }
    let after = dir_size(dir.path());
    let (msgs, tombs) = s.compaction_dropped();
    let st = s.stats();
    eprintln!(
        "{}: {} rewrites, {msgs} dead messages and {tombs} tombstones dropped, {before} -> {after} bytes",
        s.io_backend(),
        st.compactions
    );
    assert!(st.compactions >= 3, "{} rewrites", st.compactions);
    assert!(tombs > 10_000, "{tombs} tombstones dropped");
    assert!(after * 4 < before, "{before} -> {after} bytes");
    // The erased message's bytes are gone from every file.
    if let Some(seq) = erased {
        let needle = format!("auto {seq} ").into_bytes();
        for (name, data) in blocks_of(dir.path()) {
            assert!(
                !data.windows(needle.len()).any(|w| w == needle),
                "erased seq {seq} in {name:?}"
            );
        }
    }
    s.stop().expect("stop");
    drop(s);
    check_copy(dir.path(), &live, n, "after a clean stop");
}

#[test]
fn automatic_compaction_survives_a_crash_at_every_step() {
    crash_at_every_step(IoChoice::Buffered, 11);
}

#[test]
fn automatic_compaction_survives_a_crash_at_every_step_direct() {
    crash_at_every_step(IoChoice::Auto, 12);
}

/// After a clean restart the blocks on disk are not scanned, so which message records
/// they hold is unknown; an old block that is never rewritten (still mostly live) is read
/// once, so that the tombstones after it can still be dropped.
#[test]
fn tombstones_dropped_after_a_clean_restart() {
    for io in [IoChoice::Buffered, IoChoice::Auto] {
        let dir = TempDir::new(None, "auto-compact-restart");
        let n = 20_000u64;
        {
            let mut s = FileStore::open(auto_config(dir.path(), &io), StoreConfig::new("A")).expect("open");
            for seq in 1..=n {
                s.store_msg(&format!("a.{}", seq % 7), b"", &payload(seq), 0)
                    .expect("store");
            }
            s.stop().expect("stop");
        }
        let mut s = FileStore::open(auto_config(dir.path(), &io), StoreConfig::new("A")).expect("reopen");
        assert!(s.opened_from_state());
        // The first block keeps everything; 90% of the rest goes.
        let mut live: std::collections::BTreeSet<u64> = (1..=n).collect();
        for seq in 4000..n {
            if seq % 10 != 0 {
                s.remove_msg(seq).expect("remove");
                live.remove(&seq);
            }
        }
        // More messages, so that the blocks of tombstones are sealed.
        let mut last = n;
        for _ in 0..4000 {
            last += 1;
            s.store_msg("a.more", b"", &payload(last), 0).expect("store");
            live.insert(last);
        }
        s.compact_blocks().expect("compact");
        let (msgs, tombs) = s.compaction_dropped();
        assert!(msgs > 10_000, "{msgs} dead messages dropped");
        assert!(tombs > 10_000, "{tombs} tombstones dropped ({})", s.io_backend());
        s.stop().expect("stop");
        drop(s);
        // Everything still reads back (scanning the blocks this time).
        std::fs::remove_file(dir.path().join("state.rns")).expect("state file");
        let mut s = FileStore::open(auto_config(dir.path(), &io), StoreConfig::new("A")).expect("reopen");
        for seq in 1..=last {
            match s.load_msg(seq) {
                Ok(m) => assert_eq!(&m.payload[..], &payload(seq)[..]),
                Err(StoreError::MsgNotFound) => assert!(!live.contains(&seq), "seq {seq} lost"),
                Err(e) => panic!("seq {seq}: {e}"),
            }
        }
        assert_eq!(s.fast_state().msgs, live.len() as u64);
        assert_eq!(s.corruptions(), 0);
    }
}

/// A dead block at the front is taken off the list at once but deleted only once a synced
/// batch holding the sequence range that replaces it has completed (with a sync interval,
/// that can take a while). Until then a crash that loses the unsynced tail brings its
/// message records back, and only the tombstones in younger blocks delete them again: a
/// rewrite meanwhile must keep those tombstones, and drop them once the block is deleted.
#[test]
fn tombstones_kept_while_a_dead_block_waits_for_its_deletion() {
    for io in [IoChoice::Buffered, IoChoice::Auto] {
        let cfg = |d: &std::path::Path| {
            let mut f = FileStoreConfig::new(d);
            f.block_size = 16 * 1024;
            f.sync = storage::SyncMode::Interval(std::time::Duration::from_secs(3600));
            f.io = io.clone();
            f
        };
        let dir = TempDir::new(None, "auto-compact-doomed");
        let mut s = FileStore::open(cfg(dir.path()), StoreConfig::new("D")).expect("open");
        let n = 300u64;
        for seq in 1..=n {
            s.store_msg("d.x", b"", &payload(seq), 0).expect("store");
        }
        // Everything but the first and the last removed: the tombstones go to the tail,
        // blocks younger than the messages' own.
        let mut live: std::collections::BTreeSet<u64> = [1, n].into();
        for seq in 2..n {
            assert!(s.remove_msg(seq).expect("remove"));
        }
        // More messages, so that the blocks holding the tombstones are sealed.
        let mut last = n;
        for _ in 0..200 {
            last += 1;
            s.store_msg("d.y", b"", &payload(last), 0).expect("store");
            live.insert(last);
        }
        s.sync().expect("sync");
        let tail = blocks_of(dir.path()).into_iter().next_back().expect("a block");
        // Now the first block dies: it leaves the list (the second, dead too, with it),
        // its deletion waits for a synced batch, and none comes for an hour.
        assert!(s.remove_msg(1).expect("remove"));
        live.remove(&1);
        let first = dir.path().join("0000000001.blk");
        // The owner's loop turns (no sync: the batches complete in their own time).
        let turn = |s: &mut FileStore| {
            s.submit().expect("submit");
            s.poll_completions().expect("poll");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        for _ in 0..5000 {
            turn(&mut s);
            if s.stats().compactions > 0 && !s.compaction_running() {
                break;
            }
        }
        assert!(s.stats().compactions > 0, "test premise: a block was rewritten");
        assert!(first.exists(), "test premise: the dead block is still on disk");
        // A power loss now: what was synced stays (the rewritten blocks and the directory
        // are), the tail's unsynced end (the removal of 1, the new range) is lost.
        let img = TempDir::new(None, "auto-compact-doomed-img");
        copy_dir(dir.path(), img.path());
        std::fs::write(img.path().join(&tail.0), &tail.1).expect("tail as synced");
        let check = |d: &std::path::Path, maybe: &[u64], ctx: &str| {
            let mut r = FileStore::open(cfg(d), StoreConfig::new("D")).expect("reopen");
            for seq in 1..=last {
                match r.load_msg(seq) {
                    Ok(m) => {
                        assert!(
                            live.contains(&seq) || maybe.contains(&seq),
                            "{ctx}: removed seq {seq} came back"
                        );
                        assert_eq!(&m.payload[..], &payload(seq)[..], "{ctx}: seq {seq}");
                    }
                    Err(StoreError::MsgNotFound) => assert!(!live.contains(&seq), "{ctx}: live seq {seq} lost"),
                    Err(e) => panic!("{ctx}: seq {seq}: {e}"),
                }
            }
            assert_eq!(r.corruptions(), 0, "{ctx}");
        };
        // Seq 1's removal was never synced: it may come back; no other removal may.
        check(img.path(), &[1], "power loss before the dead block's deletion");
        // Once a synced batch has carried the range, the block goes and a rewrite drops
        // the tombstones after all.
        let (_, tombs_before) = s.compaction_dropped();
        s.sync().expect("sync");
        assert!(!first.exists(), "the dead block is deleted after a sync");
        for _ in 0..5000 {
            turn(&mut s);
            if !s.compaction_running() && s.compaction_dropped().1 > tombs_before {
                break;
            }
        }
        let (_, tombs_after) = s.compaction_dropped();
        assert!(
            tombs_after > tombs_before + 100,
            "{tombs_before} -> {tombs_after} tombstones dropped"
        );
        s.sync().expect("sync");
        let img = TempDir::new(None, "auto-compact-doomed-img2");
        copy_dir(dir.path(), img.path());
        check(img.path(), &[], "a crash after the rewrite");
        s.stop().expect("stop");
        drop(s);
        check(dir.path(), &[], "after a clean stop");
    }
}
