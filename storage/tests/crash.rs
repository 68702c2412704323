//! Crash and damage tests of the file store: a store's files are cut at random offsets,
//! zeroed from an offset to the end, or have a single bit flipped; then the store is
//! reopened and must (1) still hold every record the damage did not touch, in this block
//! and in every other, (2) never serve a message that differs from what was stored, and
//! (3) report every damage it detects (anything but the torn end of the last block).
//!
//! `RNATS_CRASH_CASES` sets the number of damaged copies per kind (default 60).

mod common;

use common::{blocks, TempDir};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use storage::filestore::{block_header, scan_block};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, StoreError};

fn config(dir: &Path, direct: bool) -> FileStoreConfig {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 16 * 1024;
    f.io = if direct { IoChoice::Auto } else { IoChoice::Buffered };
    f
}

fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{seq}:").into_bytes();
    while v.len() < len {
        v.push(b'a' + (v.len() as u64 * 7 + seq) as u8 % 26);
    }
    v
}

/// A record of the original files: which message, in which block file, at which bytes.
#[derive(Clone, Debug)]
struct Placed {
    seq: u64,
    file: PathBuf,
    start: u64,
    end: u64,
    /// End of the record's bytes without its zero padding.
    data_end: u64,
    last_block: bool,
    last_record: bool,
}

struct Original {
    _dir: TempDir,
    path: PathBuf,
    msgs: BTreeMap<u64, Vec<u8>>,
    placed: Vec<Placed>,
    files: Vec<PathBuf>,
    /// Each file's logical end (what its records cover; the tail block's file runs on in
    /// preformatted zeros).
    ends: Vec<u64>,
}

fn build(rng: &mut impl Rng, direct: bool) -> Original {
    let dir = TempDir::new(None, "crash-orig");
    let mut s = FileStore::open(config(dir.path(), direct), StoreConfig::new("C")).expect("open");
    let mut msgs = BTreeMap::new();
    for _ in 0..300 {
        let len = rng.gen_range(1..1500);
        let seq = s.fast_state().last_seq + 1;
        let p = payload(seq, len);
        let (got, _) = s.store_msg(&format!("sub.{}", seq % 5), b"", &p, 0).expect("store");
        assert_eq!(got, seq);
        msgs.insert(seq, p);
        if rng.gen_bool(0.05) {
            s.sync().expect("sync");
        }
    }
    s.stop().expect("stop");
    drop(s);
    let files = blocks(dir.path());
    let mut placed = Vec::new();
    let mut ends = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f).expect("read");
        let hdr = block_header(&bytes).expect("header");
        let limit = files
            .get(i + 1)
            .map(|n| block_header(&std::fs::read(n).expect("read")).expect("header").prev_len);
        let last_block = i + 1 == files.len();
        let scan = scan_block(&bytes, &hdr, limit, |off, len, r| {
            if r.kind == storage::filestore::format::Kind::Msg {
                placed.push(Placed {
                    seq: r.seq,
                    file: f.clone(),
                    start: off,
                    end: off + u64::from(len),
                    data_end: off
                        + storage::filestore::format::record_len(r.subject.len(), r.body.len(), hdr.checksum()) as u64,
                    last_block,
                    last_record: false,
                });
            }
        });
        assert!(scan.corruptions.is_empty(), "original is clean");
        ends.push(scan.end);
    }
    // The last record of the last block that holds records.
    let last_file = placed.last().map(|p| p.file.clone());
    if let Some(p) = placed.iter_mut().rev().find(|p| Some(&p.file) == last_file.as_ref()) {
        p.last_record = true;
        p.last_block = true;
    }
    assert_eq!(placed.len(), 300);
    Original {
        path: dir.path().to_path_buf(),
        _dir: dir,
        msgs,
        placed,
        files,
        ends,
    }
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Cut,
    ZeroTail,
    Flip,
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

fn run(kind: Damage, seed: u64, direct: bool) {
    let cases: usize = std::env::var("RNATS_CRASH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let orig = build(&mut rng, direct);
    let mut detected = 0;
    for case in 0..cases {
        let copy = TempDir::new(None, "crash-copy");
        copy_dir(&orig.path, copy.path());
        // Damage is found by scanning the blocks; the state file of the clean stop would
        // skip that (and is covered by its own test).
        let _ = std::fs::remove_file(copy.path().join("state.rns"));
        let fi = rng.gen_range(0..orig.files.len());
        let name = orig.files[fi].file_name().expect("name").to_owned();
        let target = copy.path().join(&name);
        let orig_file = orig.files[fi].clone();
        // Damage lands among the records or just past them, not far out in the zeros
        // preformatted ahead of the tail.
        let len = std::fs::metadata(&target).expect("meta").len();
        let at = rng.gen_range(0..len.min(orig.ends[fi] + 4096));
        // Which original records the damage touches.
        let touched: Vec<&Placed> = orig
            .placed
            .iter()
            .filter(|p| {
                p.file == orig_file
                    && match kind {
                        Damage::Cut => p.end > at,
                        // Zeroing a record's padding (zeros already) changes nothing.
                        Damage::ZeroTail => p.data_end > at,
                        Damage::Flip => p.start <= at && at < p.data_end,
                    }
            })
            .collect();
        let mut bytes = std::fs::read(&target).expect("read");
        let bit = rng.gen_range(0..8);
        match kind {
            Damage::Cut => bytes.truncate(at as usize),
            Damage::ZeroTail => bytes[at as usize..].iter_mut().for_each(|b| *b = 0),
            Damage::Flip => bytes[at as usize] ^= 1 << bit,
        }
        std::fs::write(&target, &bytes).expect("write");
        let ctx = format!("{kind:?} case {case}: {name:?} at {at} bit {bit}, touching {touched:?}");

        let mut s = FileStore::open(config(copy.path(), direct), StoreConfig::new("C")).expect("reopen");
        let untouched = orig.placed.iter().filter(|p| !touched.iter().any(|t| t.seq == p.seq));
        for p in untouched {
            match s.load_msg(p.seq) {
                Ok(m) => assert_eq!(&m.payload[..], &orig.msgs[&p.seq][..], "{ctx}: seq {}", p.seq),
                Err(e) => panic!("{ctx}: untouched seq {} lost: {e}", p.seq),
            }
        }
        for p in &touched {
            match s.load_msg(p.seq) {
                Ok(m) => assert_eq!(&m.payload[..], &orig.msgs[&p.seq][..], "{ctx}: corrupt record served"),
                Err(StoreError::MsgNotFound | StoreError::Eof) => {}
                Err(e) => panic!("{ctx}: {e}"),
            }
        }
        // Damage inside a block's known length (any block but the last), or a flip in any
        // message record, must be reported (a clean stop ends the log with a commit record,
        // so even the last message is before the known durable end).
        let must_report = match kind {
            Damage::Flip => !touched.is_empty(),
            Damage::Cut | Damage::ZeroTail => touched.iter().any(|p| !p.last_block),
        };
        if must_report {
            assert!(s.corruptions() > 0, "{ctx}: damage not reported");
        }
        if s.corruptions() > 0 {
            detected += 1;
        }
        // The damaged store still takes writes, and they survive another restart.
        let (seq, _) = s
            .store_msg("after", b"", b"after damage", 0)
            .expect("store after damage");
        s.stop().expect("stop");
        drop(s);
        let mut s = FileStore::open(config(copy.path(), direct), StoreConfig::new("C")).expect("reopen 2");
        assert_eq!(s.load_msg(seq).expect("after").payload, &b"after damage"[..], "{ctx}");
    }
    eprintln!("{kind:?} (direct: {direct}): {cases} cases, {detected} with corruption reported");
}

#[test]
fn cut_at_random_offsets() {
    run(Damage::Cut, 1, false);
}

#[test]
fn zero_tails() {
    run(Damage::ZeroTail, 2, false);
}

#[test]
fn single_bit_flips() {
    run(Damage::Flip, 3, false);
}

/// The same on files written with O_DIRECT (padded to 4096; io_uring where available).
#[test]
fn damage_of_direct_written_files() {
    run(Damage::Cut, 4, true);
    run(Damage::ZeroTail, 5, true);
    run(Damage::Flip, 6, true);
}
