//! Damaged reference files (written by the real nats-server 2.14.0, then truncated,
//! bit-flipped or zeroed): reading them never panics, never serves a message that differs
//! from what was stored, reports every damaged record, and keeps every record still
//! readable after the damage. Snapshots likewise: a damaged archive is refused or restores
//! only intact messages.

mod reference_util;

use reference_util::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use storage::crypto::{Cipher, EncryptionConfig};
use storage::reference::dir::StreamDir;
use storage::reference::snapshot::restore;
use storage::{MemStore, Store, StoreConfig, StoreError};

struct Fixture {
    _tmp: TempDir,
    dir: PathBuf,
    want: Vec<RefMsg>,
    snapshot: Vec<u8>,
}

fn fixture(js: &str) -> Fixture {
    let tmp = TempDir::new("damage");
    let mut srv = RefServer::start(&tmp.0, js);
    let mut c = srv.client();
    c.api(
        "$JS.API.STREAM.CREATE.S",
        &json!({ "name": "S", "subjects": ["s.>"], "storage": "file", "max_bytes": 120_000 }),
    );
    for i in 0..300usize {
        let h = if i % 2 == 0 {
            format!("NATS/1.0\r\nN: {i}\r\n\r\n").into_bytes()
        } else {
            Vec::new()
        };
        let payload: Vec<u8> = (0..(i * 41) % 350).map(|j| (i ^ j) as u8).collect();
        c.js_publish(&format!("s.{}", i % 3), &h, &payload);
    }
    let (_, want) = reference_messages(&mut c, "S");
    // A snapshot too (chunks acked as they come).
    c.subscribe("snap.d");
    c.api(
        "$JS.API.STREAM.SNAPSHOT.S",
        &json!({ "deliver_subject": "snap.d", "chunk_size": 8192 }),
    );
    let mut snapshot = Vec::new();
    loop {
        let m = c.next_msg();
        if m.subject != "snap.d" {
            continue;
        }
        if m.payload.is_empty() {
            break;
        }
        snapshot.extend_from_slice(&m.payload);
        if let Some(r) = m.reply.clone() {
            c.publish(&r, None, b"", b"");
        }
    }
    drop(c);
    srv.stop();
    let dir = srv.stream_dir("S");
    Fixture {
        _tmp: tmp,
        dir,
        want,
        snapshot,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Import a copy of the fixture damaged by `damage`; check what it serves.
/// Returns (messages served, reports).
fn import_damaged(
    fx: &Fixture,
    enc: Option<&EncryptionConfig>,
    damage: &dyn Fn(&Path),
) -> std::result::Result<(usize, Vec<String>), StoreError> {
    let tmp = TempDir::new("damaged-copy");
    let dir = tmp.0.join("S");
    copy_dir(&fx.dir, &dir);
    damage(&dir);
    let sd = StreamDir::open(&dir, "$G", enc)?;
    let mut store = MemStore::new(StoreConfig::new("S"));
    let mut reports = Vec::new();
    sd.import_into(&mut store, &mut |r| reports.push(r))?;
    let mut n = 0;
    for m in store.messages() {
        let w = fx
            .want
            .iter()
            .find(|w| w.seq == m.seq)
            .expect("no message appears that was not stored");
        let same =
            (&w.subject, &w.headers[..], &w.payload[..], w.ts) == (&m.subject, &m.headers[..], &m.payload[..], m.ts);
        if !same {
            return Ok((usize::MAX, vec![format!("seq {} served damaged", m.seq)]));
        }
        n += 1;
    }
    Ok((n, reports))
}

/// Offsets of the subject-length fields of header-less records in a plain block: the one
/// place the reference's format has no check for (see `storage::reference::record`).
fn blind_spots(block: &[u8], seed: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok((_, n)) = storage::reference::record::decode(&block[at..], seed) {
        let hbit = u32::from_le_bytes(block[at..at + 4].try_into().unwrap()) & (1 << 31) != 0;
        if !hbit {
            out.push(at + 20..at + 22);
        }
        at += n;
    }
    out
}

fn block(dir: &Path, n: u32) -> PathBuf {
    dir.join("msgs").join(format!("{n}.blk"))
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).unwrap();
    f(&mut b);
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_blocks() {
    if !reference_available() {
        return;
    }
    let fx = fixture("");
    let total = fx.want.len();
    let len1 = std::fs::metadata(block(&fx.dir, 1)).unwrap().len() as usize;
    assert!(std::fs::metadata(block(&fx.dir, 2)).is_ok(), "several blocks");

    // Untouched: everything, nothing reported.
    let (n, r) = import_damaged(&fx, None, &|_| {}).unwrap();
    assert_eq!((n, r.len()), (total, 0));

    // Single bit flips anywhere in block 1: at most the one record is lost, and reported;
    // nothing damaged is served, except in the format's one blind spot, where the flip
    // must at least not crash anything.
    let blk1 = std::fs::read(block(&fx.dir, 1)).unwrap();
    let blind = blind_spots(&blk1, b"S-1");
    assert!(blind.len() > 50, "block 1 has header-less records");
    let (mut cases, mut blind_hits) = (0, 0);
    for at in (0..len1).step_by(37) {
        for bit in [0u8, 5] {
            let (n, r) = import_damaged(&fx, None, &|d| edit(&block(d, 1), |b| b[at] ^= 1 << bit)).unwrap();
            if blind.iter().any(|b| b.contains(&at)) {
                blind_hits += 1;
                continue;
            }
            assert!(n != usize::MAX, "flip at {at} bit {bit}: {r:?}");
            assert!(n + 1 >= total, "flip at {at}: {n} of {total} kept");
            assert!(!r.is_empty(), "flip at {at} bit {bit}: damage not reported");
            cases += 1;
        }
    }
    assert!(cases > 200, "{cases} cases, {blind_hits} in the blind spot");
    // The header length (outside the hash) is caught by the structure checks: flip every
    // bit of the first record with headers' header length.
    let mut at = 0;
    let hdr_rec = loop {
        let (rec, n) = storage::reference::record::decode(&blk1[at..], b"S-1").unwrap();
        if matches!(rec, storage::reference::record::RefRecord::Msg { headers, .. } if !headers.is_empty()) {
            break at;
        }
        at += n;
    };
    let slen = u16::from_le_bytes([blk1[hdr_rec + 20], blk1[hdr_rec + 21]]) as usize;
    for byte in hdr_rec + 22 + slen..hdr_rec + 22 + slen + 4 {
        for bit in 0..8 {
            let (n, r) = import_damaged(&fx, None, &|d| edit(&block(d, 1), |b| b[byte] ^= 1 << bit)).unwrap();
            assert!(
                n != usize::MAX && n + 1 >= total && !r.is_empty(),
                "header length byte {byte} bit {bit}: {r:?}"
            );
        }
    }

    // Truncation of block 1 at many offsets: the records before the cut and all later
    // blocks survive; a cut inside a record is reported.
    for cut in (1..len1).step_by(131) {
        let (n, r) = import_damaged(&fx, None, &|d| edit(&block(d, 1), |b| b.truncate(cut))).unwrap();
        assert!(n < total && n > 0, "cut at {cut}: {n}");
        assert!(!r.is_empty(), "cut at {cut} not reported");
    }

    // A zeroed run in the middle of block 1: the records after it are still found.
    let (n, r) = import_damaged(&fx, None, &|d| {
        edit(&block(d, 1), |b| {
            for x in &mut b[len1 / 3..len1 / 3 + 700] {
                *x = 0;
            }
        })
    })
    .unwrap();
    assert!(n < total && n + 6 >= total, "zeroed run: {n} of {total}");
    assert!(!r.is_empty());

    // A zero-filled tail (torn or preallocated) ends the block quietly.
    let (n, _) = import_damaged(&fx, None, &|d| {
        edit(&block(d, 1), |b| b.extend_from_slice(&[0u8; 4096]))
    })
    .unwrap();
    assert_eq!(n, total);

    // A whole block zeroed, or emptied: its messages are gone, the rest is there.
    let (n, _) = import_damaged(&fx, None, &|d| {
        edit(&block(d, 1), |b| b.iter_mut().for_each(|x| *x = 0))
    })
    .unwrap();
    assert!(n > 0 && n < total);
    let (n, _) = import_damaged(&fx, None, &|d| edit(&block(d, 1), |b| b.clear())).unwrap();
    assert!(n > 0 && n < total);

    // A record claiming a huge length: refused, not allocated.
    let (n, r) = import_damaged(&fx, None, &|d| {
        edit(&block(d, 1), |b| b[0..4].copy_from_slice(&u32::MAX.to_le_bytes()))
    })
    .unwrap();
    assert!(n + 1 >= total && !r.is_empty());

    // index.db damaged: ignored and reported; the blocks alone give the same messages.
    let (n, r) = import_damaged(&fx, None, &|d| {
        edit(&d.join("msgs").join("index.db"), |b| b[10] ^= 0x20)
    })
    .unwrap();
    assert_eq!(n, total);
    assert!(r.iter().any(|l| l.contains("index.db")), "{r:?}");

    // meta.inf damaged: the checksum refuses the directory.
    let e = import_damaged(&fx, None, &|d| edit(&d.join("meta.inf"), |b| b[2] ^= 1)).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e}");
    // Missing meta.inf: an I/O error, not a panic.
    assert!(import_damaged(&fx, None, &|d| std::fs::remove_file(d.join("meta.inf")).unwrap()).is_err());
}

#[test]
fn damaged_encrypted_blocks() {
    if !reference_available() {
        return;
    }
    let enc = EncryptionConfig::new("kk", Cipher::ChaCha);
    let fx = fixture("key: \"kk\"\n  cipher: chachapoly");
    let total = fx.want.len();
    let (n, r) = import_damaged(&fx, Some(&enc), &|_| {}).unwrap();
    assert_eq!((n, r.len()), (total, 0));
    // A flipped byte of ciphertext is a flipped byte of plaintext: that record is lost.
    for at in [0usize, 30, 1000, 5000] {
        let (n, r) = import_damaged(&fx, Some(&enc), &|d| edit(&block(d, 1), |b| b[at] ^= 0x08)).unwrap();
        assert!(n + 1 >= total && !r.is_empty(), "flip at {at}");
    }
    // A damaged key file: the block is unreadable (reported), the others are there.
    let (n, r) = import_damaged(&fx, Some(&enc), &|d| {
        edit(&d.join("msgs").join("1.key"), |b| b[40] ^= 1)
    })
    .unwrap();
    assert!(n > 0 && n < total);
    assert!(r.iter().any(|l| l.contains("block 1 unreadable")), "{r:?}");
    // A short key file likewise.
    let (n, _) = import_damaged(&fx, Some(&enc), &|d| {
        edit(&d.join("msgs").join("1.key"), |b| b.truncate(10))
    })
    .unwrap();
    assert!(n < total);
    // meta.key damaged: the directory cannot be opened.
    assert!(import_damaged(&fx, Some(&enc), &|d| edit(&d.join("meta.key"), |b| b[50] ^= 1)).is_err());
}

#[test]
fn damaged_snapshots() {
    if !reference_available() {
        return;
    }
    let fx = fixture("");
    let total = fx.want.len();
    let snap = &fx.snapshot;
    let check = |data: &[u8]| -> Option<usize> {
        let mut store = MemStore::new(StoreConfig::new("S"));
        let r = restore(&mut &data[..], &mut store, &mut |_| {});
        r.ok()?;
        for m in store.messages() {
            let w = fx.want.iter().find(|w| w.seq == m.seq).expect("only stored messages");
            assert_eq!((&w.headers[..], &w.payload[..]), (&m.headers[..], &m.payload[..]));
        }
        Some(store.fast_state().msgs as usize)
    };
    assert_eq!(check(snap), Some(total));
    // Truncated anywhere: refused (the tar or the s2 stream ends early) or, at a clean
    // chunk boundary before the end of the archive, missing messages but nothing wrong.
    for cut in (1..snap.len()).step_by(snap.len() / 97 + 1) {
        if let Some(n) = check(&snap[..cut]) {
            assert!(n <= total);
        }
    }
    // Bit flips: the s2 CRCs catch them.
    let mut refused = 0;
    for at in (0..snap.len()).step_by(snap.len() / 89 + 1) {
        let mut f = snap.clone();
        f[at] ^= 0x10;
        if check(&f).is_none() {
            refused += 1;
        }
    }
    assert!(refused > 80, "{refused}");
    // Zeroed runs.
    for at in [0usize, 100, snap.len() / 2] {
        let mut f = snap.clone();
        let end = (at + 512).min(f.len());
        f[at..end].iter_mut().for_each(|x| *x = 0);
        assert!(check(&f).is_none(), "zeroed at {at}");
    }
    // Garbage and an s2 stream of garbage.
    assert!(check(b"not a snapshot at all").is_none());
    let mut junk = Vec::new();
    {
        use std::io::Write;
        let mut w = minlz::Writer::new(&mut junk);
        w.write_all(&[0x55; 3000]).unwrap();
        w.flush().unwrap();
    }
    assert!(check(&junk).is_none());
}
