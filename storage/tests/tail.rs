//! The end of the log: damage to the last records of the last block is told from a torn
//! tail. A bit flip in the length field of the very last record (after a clean stop, or
//! with the store killed right after its last acknowledged write) is reported; a tail torn
//! after the last commit (any subset of the sectors of the writes then in flight, the file
//! cut anywhere past what was durable) is the end of the log: not reported, and every
//! acknowledged record is there.

mod common;

use common::{blocks, TempDir};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use storage::filestore::format::Kind;
use storage::filestore::{block_header, scan_block};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, StoreError};

fn config(dir: &Path, io: IoChoice) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 4 << 20;
    f.io = io;
    // The crash model below: what was written after the last commit is one batch in flight.
    f.early_batch = 0;
    f
}

fn payload(seq: u64) -> Vec<u8> {
    let len = 1 + (seq * 2654435761 % 1300) as usize;
    let mut v = format!("{seq}/").into_bytes();
    v.resize(len.max(v.len()), b'a' + (seq % 26) as u8);
    v
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("dir") {
        let e = e.expect("entry");
        if e.file_name() != "state.rns" {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
    }
}

/// (offset, kind) of every valid record of the last block holding records.
fn records(dir: &Path) -> (PathBuf, Vec<(u64, Kind)>) {
    for f in blocks(dir).into_iter().rev() {
        let bytes = std::fs::read(&f).expect("read");
        let hdr = block_header(&bytes).expect("header");
        let mut recs = Vec::new();
        let scan = scan_block(&bytes, &hdr, None, |off, _, r| recs.push((off, r.kind)));
        assert!(scan.corruptions.is_empty(), "original is clean");
        if !recs.is_empty() {
            return (f, recs);
        }
    }
    panic!("no records");
}

/// Reopen a damaged copy and check it: every message but `lost` intact, none different.
fn reopen(dir: &Path, msgs: &BTreeMap<u64, Vec<u8>>, lost: &[u64], ctx: &str) -> FileStore {
    let mut s = FileStore::open(config(dir, IoChoice::Buffered), StoreConfig::new("T")).expect("reopen");
    for (seq, p) in msgs {
        match s.load_msg(*seq) {
            Ok(m) => assert_eq!(&m.payload[..], &p[..], "{ctx}: seq {seq} differs"),
            Err(StoreError::MsgNotFound | StoreError::Eof) if lost.contains(seq) => {}
            Err(e) => panic!("{ctx}: seq {seq} lost: {e}"),
        }
    }
    s
}

/// Flip each bit of the length field of the record at `off` of `file` in a copy of `image`.
fn flip_length_bits(image: &Path, file: &Path, off: u64, msgs: &BTreeMap<u64, Vec<u8>>, lost: &[u64], what: &str) {
    let name = file.file_name().expect("name");
    for bit in 0..32u64 {
        let copy = TempDir::new(None, "tail-flip");
        copy_dir(image, copy.path());
        let target = copy.path().join(name);
        let mut bytes = std::fs::read(&target).expect("read");
        bytes[(off + bit / 8) as usize] ^= 1 << (bit % 8);
        std::fs::write(&target, &bytes).expect("write");
        let ctx = format!("{what}: length bit {bit} of the record at {off}");
        let mut s = reopen(copy.path(), msgs, lost, &ctx);
        assert!(s.corruptions() > 0, "{ctx}: not reported");
        // Still writable, and what it writes survives.
        let (seq, _) = s.store_msg("after", b"", b"after", 0).expect("store after");
        s.stop().expect("stop");
        drop(s);
        let mut s = FileStore::open(config(copy.path(), IoChoice::Buffered), StoreConfig::new("T")).expect("again");
        assert_eq!(&s.load_msg(seq).expect("after").payload[..], b"after", "{ctx}");
    }
}

fn write(s: &mut FileStore, msgs: &mut BTreeMap<u64, Vec<u8>>, n: u64, sync_every: u64) {
    for i in 0..n {
        let seq = s.fast_state().last_seq + 1;
        let p = payload(seq);
        s.store_msg(&format!("t.{}", seq % 7), b"", &p, 0).expect("store");
        msgs.insert(seq, p);
        if sync_every > 0 && i % sync_every == sync_every - 1 {
            s.sync().expect("sync");
        }
    }
}

fn length_flips(io: IoChoice, n: u64) {
    // Killed right after the last acknowledged write: the files as they are once its
    // fdatasync completed (copied while the store is still open).
    let dir = TempDir::new(None, "tail-kill");
    let mut s = FileStore::open(config(dir.path(), io.clone()), StoreConfig::new("T")).expect("open");
    let mut msgs = BTreeMap::new();
    write(&mut s, &mut msgs, n, 5);
    s.sync().expect("sync");
    let killed = TempDir::new(None, "tail-killed");
    copy_dir(dir.path(), killed.path());
    drop(s);
    let (file, recs) = records(killed.path());
    let &(last_off, last_kind) = recs.last().expect("a record");
    let last_msg = recs.iter().rev().find(|r| r.1 == Kind::Msg).expect("a message").0;
    let last_seq = *msgs.keys().last().expect("msgs");
    flip_length_bits(
        killed.path(),
        &file,
        last_msg,
        &msgs,
        &[last_seq],
        "killed, last message",
    );
    if last_off != last_msg {
        assert_eq!(last_kind, Kind::Commit);
        flip_length_bits(killed.path(), &file, last_off, &msgs, &[], "killed, last record");
    }

    // After a clean stop, the state file gone (a scan): the last record is the commit
    // record of the stop.
    let dir = TempDir::new(None, "tail-stop");
    let mut s = FileStore::open(config(dir.path(), io), StoreConfig::new("T")).expect("open");
    let mut msgs = BTreeMap::new();
    write(&mut s, &mut msgs, n, 0);
    s.stop().expect("stop");
    drop(s);
    let (file, recs) = records(dir.path());
    let &(last_off, last_kind) = recs.last().expect("a record");
    assert_eq!(last_kind, Kind::Commit, "a clean stop ends in a commit record");
    let last_msg = recs.iter().rev().find(|r| r.1 == Kind::Msg).expect("a message").0;
    let last_seq = *msgs.keys().last().expect("msgs");
    flip_length_bits(dir.path(), &file, last_msg, &msgs, &[last_seq], "stopped, last message");
    flip_length_bits(dir.path(), &file, last_off, &msgs, &[], "stopped, last record");
}

#[test]
fn last_record_length_flips_are_reported() {
    length_flips(IoChoice::Buffered, 23);
    // One message only: no commit record anywhere in the block.
    length_flips(IoChoice::Buffered, 1);
}

#[test]
fn last_record_length_flips_are_reported_direct() {
    length_flips(IoChoice::Auto, 23);
}

/// Overlay the sectors of `later` onto `earlier` past `from`, each kept with probability
/// `p`, then cut the file at a random sector past `from` (or not).
fn tear(earlier: &[u8], later: &[u8], from: usize, rng: &mut impl Rng) -> Vec<u8> {
    let mut out = earlier.to_vec();
    out.resize(later.len().max(earlier.len()), 0);
    let p = rng.gen_range(0.0..1.0);
    let unit = if rng.gen_bool(0.5) { 512 } else { 4096 };
    let mut at = from - from % unit;
    while at < later.len() {
        let end = (at + unit).min(later.len());
        if rng.gen_bool(p) {
            out[at..end].copy_from_slice(&later[at..end]);
        }
        at = end;
    }
    // The file's new size may not have reached the disk.
    if rng.gen_bool(0.3) {
        out.truncate(earlier.len().max(from));
    }
    out
}

fn torn_tails(io: IoChoice, seed: u64) {
    let cases: usize = std::env::var("RNATS_CRASH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = TempDir::new(None, "tail-torn");
    let mut s = FileStore::open(config(dir.path(), io), StoreConfig::new("T")).expect("open");
    let mut acked = BTreeMap::new();
    write(&mut s, &mut acked, 40, 7);
    s.sync().expect("sync");
    // The disk at the last commit: everything in `acked` was acknowledged.
    let earlier = TempDir::new(None, "tail-earlier");
    copy_dir(dir.path(), earlier.path());
    // What the writes in flight at the crash would have made of it.
    let mut more = BTreeMap::new();
    write(&mut s, &mut more, 60, 0);
    s.submit().expect("submit");
    s.sync().expect("sync");
    let later = TempDir::new(None, "tail-later");
    copy_dir(dir.path(), later.path());
    drop(s);
    let tail = blocks(earlier.path()).pop().expect("a block");
    let name = tail.file_name().expect("name").to_owned();
    assert_eq!(
        blocks(later.path()).last().and_then(|p| p.file_name()),
        Some(name.as_os_str()),
        "same tail block"
    );
    let a = std::fs::read(&tail).expect("read");
    let b = std::fs::read(later.path().join(&name)).expect("read");
    // What the earlier image's records cover (the rest of its file is padding).
    let a_end = scan_block(&a, &block_header(&a).expect("header"), None, |_, _, _| {}).end as usize;
    let mut all = acked.clone();
    all.extend(more.iter().map(|(k, v)| (*k, v.clone())));
    let lost: Vec<u64> = more.keys().copied().collect();
    let mut kept_some = 0;
    for case in 0..cases {
        let copy = TempDir::new(None, "tail-torn-copy");
        copy_dir(earlier.path(), copy.path());
        let torn = tear(&a, &b, a_end, &mut rng);
        std::fs::write(copy.path().join(&name), &torn).expect("write");
        let ctx = format!("case {case}");
        let mut s = reopen(copy.path(), &all, &lost, &ctx);
        if s.corruptions() != 0 {
            let scan = scan_block(&torn, &block_header(&torn).expect("header"), None, |_, _, _| {});
            panic!(
                "{ctx}: a torn tail reported as corruption: {:?} (earlier ends at {a_end}, later is {} bytes)",
                scan.corruptions,
                b.len()
            );
        }
        if s.fast_state().last_seq > 40 {
            kept_some += 1;
        }
        let (seq, _) = s.store_msg("after", b"", b"after", 0).expect("store after");
        s.stop().expect("stop");
        drop(s);
        let mut s = FileStore::open(config(copy.path(), IoChoice::Buffered), StoreConfig::new("T")).expect("again");
        assert_eq!(&s.load_msg(seq).expect("after").payload[..], b"after", "{ctx}");
        assert_eq!(s.corruptions(), 0, "{ctx}: second open");
    }
    eprintln!("torn tails: {cases} cases, {kept_some} kept some unacknowledged records");
}

#[test]
fn torn_tail_after_the_last_commit_is_not_reported() {
    torn_tails(IoChoice::Buffered, 11);
}

#[test]
fn torn_tail_after_the_last_commit_is_not_reported_direct() {
    torn_tails(IoChoice::Auto, 12);
}
