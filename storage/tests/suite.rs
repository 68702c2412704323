//! The behavioural suite: every store API, run against the memory store and the file store
//! (ext4 with io_uring/O_DIRECT where available, tmpfs with the buffered fallback, and s2 +
//! HighwayHash with small blocks). File stores are also restarted in the middle of each
//! case, and must answer the same after it.

mod common;

use common::{Harness, Variant, T0};
use std::time::Duration;
use storage::{Discard, Filter, StoreConfig, StoreError};

const SEC: i64 = 1_000_000_000;

fn cfg() -> StoreConfig {
    StoreConfig::new("suite")
}

fn store_and_load(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    let (seq, ts) = s.store_msg("orders.eu", b"", b"first", 0).expect("store");
    assert_eq!((seq, ts), (1, T0));
    h.clock.advance(SEC);
    let hdr = b"NATS/1.0\r\nK: v\r\n\r\n";
    assert_eq!(s.store_msg("orders.us", hdr, b"second", 0).expect("store").0, 2);
    let big = vec![0xabu8; 70_000];
    assert_eq!(s.store_msg("big", b"", &big, 0).expect("store").0, 3);
    for round in 0..2 {
        let m = s.load_msg(2).expect("load");
        assert_eq!((m.seq, m.ts, m.subject.as_str()), (2, T0 + SEC, "orders.us"));
        assert_eq!((&m.headers[..], &m.payload[..]), (&hdr[..], &b"second"[..]));
        assert_eq!(s.load_msg(1).expect("load").payload, &b"first"[..]);
        assert_eq!(s.load_msg(3).expect("load").payload.len(), 70_000);
        assert_eq!(s.subject_for_seq(1).expect("subject"), "orders.eu");
        assert!(matches!(s.load_msg(4), Err(StoreError::Eof)), "round {round}");
        let st = s.fast_state();
        assert_eq!(
            (st.msgs, st.first_seq, st.last_seq, st.first_ts, st.last_ts),
            (3, 1, 3, T0, T0 + SEC)
        );
        assert_eq!(st.num_subjects, 3);
        assert_eq!(
            st.bytes,
            [("orders.eu", 0, 5), ("orders.us", hdr.len(), 6), ("big", 0, 70_000)]
                .iter()
                .map(|(sub, h, p)| s.msg_size(sub, &vec![0; *h], &vec![0; *p]))
                .sum::<u64>()
        );
        s = h.restart(s);
    }
}

fn queries(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    let subjects = ["a.1", "b.1", "a.2", "b.2", "a.1", "c", "a.2"];
    for (i, subj) in subjects.iter().enumerate() {
        h.clock.set(T0 + i as i64 * SEC);
        s.store_msg(subj, b"", format!("m{}", i + 1).as_bytes(), 0)
            .expect("store");
    }
    for round in 0..2 {
        assert_eq!(
            s.load_next_msg(&Filter::new("a.*"), 2).expect("next").seq,
            3,
            "round {round}"
        );
        assert_eq!(s.load_next_msg(&Filter::new("b.2"), 1).expect("next").seq, 4);
        assert_eq!(s.load_next_msg(&Filter::many(["c", "b.>"]), 5).expect("next").seq, 6);
        assert!(matches!(s.load_next_msg(&Filter::new("c"), 7), Err(StoreError::Eof)));
        assert_eq!(s.load_prev_msg(&Filter::new("a.1"), 4).expect("prev").seq, 1);
        assert_eq!(s.load_prev_msg(&Filter::all(), 100).expect("prev").seq, 7);
        assert_eq!(s.load_last_msg("a.*").expect("last").seq, 7);
        assert_eq!(s.load_last_msg("a.1").expect("last").seq, 5);
        assert_eq!(s.load_last_msg("").expect("last").seq, 7);
        assert!(matches!(s.load_last_msg("zzz"), Err(StoreError::MsgNotFound)));
        let fs = s.filtered_state(1, "a.>");
        assert_eq!((fs.msgs, fs.first, fs.last), (4, 1, 7));
        let fs = s.filtered_state(4, "a.*");
        assert_eq!((fs.msgs, fs.first, fs.last), (2, 5, 7));
        let ss = s.subjects_state("a.*");
        assert_eq!(ss.len(), 2);
        let a1 = ss.get("a.1").expect("a.1");
        assert_eq!((a1.msgs, a1.first, a1.last), (2, 1, 5));
        let tot = s.subjects_totals(">");
        assert_eq!(tot.get("b.1"), Some(&1));
        assert_eq!(tot.get("a.2"), Some(&2));
        assert_eq!(tot.len(), 5);
        assert_eq!(s.num_pending(1, &Filter::new("a.*"), false), 4);
        assert_eq!(s.num_pending(1, &Filter::new("a.*"), true), 2);
        assert_eq!(s.all_last_seqs(), vec![2, 4, 5, 6, 7]);
        assert_eq!(s.multi_last_seqs(&Filter::new("a.*"), 6, 0).expect("multi"), vec![3, 5]);
        assert!(matches!(
            s.multi_last_seqs(&Filter::all(), 0, 2),
            Err(StoreError::TooManyResults)
        ));
        assert_eq!(s.seq_from_time(T0 + 3 * SEC), 4);
        assert_eq!(s.seq_from_time(T0 + 100 * SEC), 8);
        s = h.restart(s);
    }
}

fn remove_and_erase(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    for i in 1..=10u64 {
        s.store_msg(&format!("s.{}", i % 3), b"", format!("secret-{i}").as_bytes(), 0)
            .expect("store");
    }
    assert!(s.remove_msg(3).expect("remove"));
    assert!(!s.remove_msg(3).expect("remove twice"));
    assert!(s.erase_msg(4).expect("erase"));
    assert!(s.remove_msg(1).expect("remove first"));
    assert!(!s.remove_msg(99).expect("remove missing"));
    for round in 0..2 {
        assert!(matches!(s.load_msg(3), Err(StoreError::MsgNotFound)), "round {round}");
        assert!(matches!(s.load_msg(4), Err(StoreError::MsgNotFound)));
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq, st.num_deleted), (7, 2, 10, 2));
        assert_eq!(st.deleted, vec![3, 4]);
        let dr = s.deleted_ranges();
        assert_eq!(dr.len(), 1);
        assert_eq!((dr[0].first, dr[0].num), (3, 2));
        assert_eq!(s.load_msg(5).expect("load").payload, &b"secret-5"[..]);
        s = h.restart(s);
    }
    s.stop().expect("stop");
    drop(s);
    if let Some(d) = &h.dir {
        // The erased message's bytes are gone from the files; the others are there.
        let mut seen5 = false;
        for e in std::fs::read_dir(d.path()).expect("dir") {
            let data = std::fs::read(e.expect("entry").path()).expect("read");
            assert!(!data.windows(8).any(|w| w == b"secret-4"), "erased bytes still on disk");
            seen5 |= data.windows(8).any(|w| w == b"secret-5");
        }
        assert!(
            seen5 || v == Variant::FileS2Highway,
            "a stored message is not in the files"
        );
    }
}

fn purge_compact_truncate(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    for i in 1..=20u64 {
        s.store_msg(if i % 2 == 0 { "even" } else { "odd" }, b"", &i.to_le_bytes(), 0)
            .expect("store");
    }
    assert_eq!(s.purge_ex("even", 0, 2).expect("purge keep"), 8);
    assert_eq!(s.filtered_state(1, "even").msgs, 2);
    assert_eq!(s.purge_ex("odd", 6, 0).expect("purge below"), 3);
    s = h.restart(s);
    assert_eq!(s.fast_state().msgs, 9);
    assert_eq!(s.load_next_msg(&Filter::new("odd"), 0).expect("next").seq, 7);
    assert_eq!(s.compact(10).expect("compact"), 2);
    let st = s.fast_state();
    assert_eq!((st.first_seq, st.msgs), (11, 7));
    s.truncate(15).expect("truncate");
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.first_seq, st.last_seq, st.msgs), (11, 15, 3));
    assert_eq!(s.store_msg("odd", b"", b"new16", 0).expect("store").0, 16);
    assert_eq!(s.load_msg(16).expect("load").payload, &b"new16"[..]);
    assert_eq!(s.purge().expect("purge"), 4);
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 17, 16));
    assert_eq!(s.store_msg("x", b"", b"y", 0).expect("store").0, 17);
    assert_eq!(s.compact(100).expect("compact past end"), 1);
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 100, 99));
    s.truncate(0).expect("truncate all");
    s = h.restart(s);
    assert_eq!(s.store_msg("x", b"", b"again", 0).expect("store").0, 1);
}

fn skips_and_raw(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    s.store_msg("a", b"", b"1", 0).expect("store");
    assert_eq!(s.skip_msg(0).expect("skip"), 2);
    s.skip_msgs(3, 5).expect("skip many");
    assert!(matches!(s.skip_msg(5), Err(StoreError::SequenceMismatch)));
    s.store_raw_msg("a", b"", b"raw", 8, T0 + 77, 0, false).expect("raw");
    assert!(matches!(
        s.store_raw_msg("a", b"", b"raw", 20, T0, 0, false),
        Err(StoreError::SequenceMismatch)
    ));
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (2, 1, 8));
    assert_eq!(s.load_msg(8).expect("load").ts, T0 + 77);
    assert!(matches!(s.load_msg(5), Err(StoreError::MsgNotFound)));
    // Skips on an empty stream move the first sequence too.
    let h2 = Harness::new(v, cfg());
    let mut e = h2.open();
    e.skip_msgs(1, 10).expect("skip");
    e = h2.restart(e);
    let st = e.fast_state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 11, 10));
    assert_eq!(e.store_msg("a", b"", b"", 0).expect("store").0, 11);
}

fn limits(v: Variant) {
    let mut c = cfg();
    c.max_msgs = 5;
    let h = Harness::new(v, c.clone());
    let mut s = h.open();
    for i in 0..8u8 {
        s.store_msg("a", b"", &[i], 0).expect("store");
    }
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (5, 4, 8));
    // Discard new.
    c.discard = Discard::New;
    s.update_config(c.clone()).expect("config");
    assert!(matches!(s.store_msg("a", b"", b"x", 0), Err(StoreError::MaxMsgs)));
    // Lowering the limit removes the oldest at once.
    c.discard = Discard::Old;
    c.max_msgs = 2;
    s.update_config(c.clone()).expect("config");
    assert_eq!(s.fast_state().first_seq, 7);
    s = h.restart(s);
    assert_eq!(s.fast_state().msgs, 2);

    let mut c = cfg();
    c.max_msgs_per_subject = 2;
    let h = Harness::new(v, c.clone());
    let mut s = h.open();
    for i in 0..6u8 {
        s.store_msg(if i < 4 { "p" } else { "q" }, b"", &[i], 0).expect("store");
    }
    assert_eq!(s.filtered_state(1, "p").msgs, 2);
    assert_eq!(s.load_next_msg(&Filter::new("p"), 0).expect("next").seq, 3);
    c.discard = Discard::New;
    c.discard_new_per_subject = true;
    s.update_config(c).expect("config");
    assert!(matches!(
        s.store_msg("q", b"", b"x", 0),
        Err(StoreError::MaxMsgsPerSubject)
    ));
    s = h.restart(s);
    assert_eq!(s.fast_state().msgs, 4);

    let mut c = cfg();
    c.max_bytes = 3 * s.msg_size("b", b"", &[0; 100]) as i64;
    c.max_msg_size = 200;
    let h = Harness::new(v, c);
    let mut s = h.open();
    for _ in 0..5 {
        s.store_msg("b", b"", &[7; 100], 0).expect("store");
    }
    assert!(matches!(
        s.store_msg("b", b"", &[0; 300], 0),
        Err(StoreError::MsgTooLarge)
    ));
    s = h.restart(s);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq), (3, 3));
}

fn expiry(v: Variant) {
    let mut c = cfg();
    c.max_age = Duration::from_secs(10);
    c.allow_msg_ttl = true;
    let h = Harness::new(v, c);
    let mut s = h.open();
    s.store_msg("a", b"", b"ages", 0).expect("store");
    s.store_msg("b", b"", b"ttl 2s", 2).expect("store");
    s.store_msg("c", b"", b"never", -1).expect("store");
    h.clock.advance(SEC);
    s.store_msg("d", b"", b"later", 0).expect("store");
    assert_eq!(s.next_expiry(), Some(T0 + 2 * SEC));
    s = h.restart(s);
    h.clock.set(T0 + 3 * SEC);
    assert_eq!(s.expire().expect("expire"), 1);
    assert!(matches!(s.load_msg(2), Err(StoreError::MsgNotFound)));
    h.clock.set(T0 + 10 * SEC);
    assert_eq!(s.expire().expect("expire"), 1);
    s = h.restart(s);
    h.clock.set(T0 + 100 * SEC);
    assert_eq!(s.expire().expect("expire"), 1);
    let st = s.fast_state();
    assert_eq!((st.msgs, st.first_seq), (1, 3));
    assert_eq!(s.load_msg(3).expect("never expires").payload, &b"never"[..]);
}

/// `take_due` lists what expiry would remove, in sequence order, and removes nothing; a
/// TTL-due sequence is listed once, an age-due one until it is removed.
fn due_without_removal(v: Variant) {
    let mut c = cfg();
    c.max_age = Duration::from_secs(10);
    c.allow_msg_ttl = true;
    let h = Harness::new(v, c);
    let mut s = h.open();
    s.store_msg("a", b"", b"ages", 0).expect("store");
    s.store_msg("b", b"", b"ttl 2s", 2).expect("store");
    s.store_msg("c", b"", b"never", -1).expect("store");
    s.store_msg("d", b"", b"ttl 3s", 3).expect("store");
    h.clock.set(T0 + 2 * SEC);
    assert_eq!(s.take_due().expect("due"), vec![2]);
    assert_eq!(s.take_due().expect("due"), Vec::<u64>::new());
    assert_eq!(s.fast_state().msgs, 4);
    h.clock.set(T0 + 10 * SEC);
    assert_eq!(s.take_due().expect("due"), vec![1, 2, 4]);
    assert!(s.remove_msg(1).expect("remove"));
    assert!(s.remove_msg(2).expect("remove"));
    assert_eq!(s.take_due().expect("due"), vec![4]);
    assert!(s.remove_msg(4).expect("remove"));
    assert_eq!(s.take_due().expect("due"), Vec::<u64>::new());
    assert_eq!(s.load_msg(3).expect("never expires").payload, &b"never"[..]);
}

fn durability_contract(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    for i in 0..100u32 {
        s.store_msg("d", b"", &i.to_le_bytes(), 0).expect("store");
    }
    s.submit().expect("submit");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.poll_completions().expect("poll") < 100 {
        assert!(std::time::Instant::now() < deadline, "writes never became durable");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(s.durable_seq(), 100);
    s.store_msg("d", b"", b"x", 0).expect("store");
    s.sync().expect("sync");
    assert_eq!(s.durable_seq(), 101);
    s.stop().expect("stop");
    assert!(matches!(s.store_msg("d", b"", b"x", 0), Err(StoreError::Closed)));
    assert!(matches!(s.load_msg(1), Err(StoreError::Closed)));
}

fn many_blocks_and_restart(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    let payload = vec![0x5au8; 3000];
    for i in 0..400u64 {
        s.store_msg(&format!("k.{}", i % 7), b"", &payload, 0).expect("store");
        if i % 50 == 0 {
            s.poll_completions().expect("poll");
        }
    }
    for seq in (1..=400).step_by(3) {
        s.remove_msg(seq).expect("remove");
    }
    let before = s.state();
    let lasts = s.all_last_seqs();
    s = h.restart(s);
    assert_eq!(s.state(), before);
    assert_eq!(s.all_last_seqs(), lasts);
    for seq in [2u64, 3, 200, 399] {
        assert_eq!(s.load_msg(seq).expect("load").payload.len(), 3000);
    }
    // Removing the oldest messages frees their blocks.
    s.compact(390).expect("compact");
    s = h.restart(s);
    assert_eq!(s.fast_state().first_seq, 390);
    assert_eq!(s.corruptions(), 0);
}

fn snapshot_stream(v: Variant) {
    let h = Harness::new(v, cfg());
    let mut s = h.open();
    for i in 0..10u8 {
        s.store_msg("snap", b"", &[i; 10], 0).expect("store");
    }
    let mut out = Vec::new();
    s.snapshot(&storage::SnapshotMeta::default(), &mut out)
        .expect("snapshot");
    assert!(out.len() > 100);
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod mem { $( #[test] fn $case() { super::$case(super::Variant::Mem) } )* }
        mod file { $( #[test] fn $case() { super::$case(super::Variant::File) } )* }
        mod file_shm { $( #[test] fn $case() { if super::common::shm().is_some() { super::$case(super::Variant::FileShm) } } )* }
        mod file_s2_highway { $( #[test] fn $case() { super::$case(super::Variant::FileS2Highway) } )* }
    };
}

suite!(
    store_and_load,
    queries,
    remove_and_erase,
    purge_compact_truncate,
    skips_and_raw,
    limits,
    expiry,
    due_without_removal,
    durability_contract,
    many_blocks_and_restart,
    snapshot_stream,
);

/// The file store picks io_uring + O_DIRECT on a disk file system and the buffered
/// fallback on tmpfs.
#[test]
fn backend_choice() {
    use storage::io::IoChoice;
    let disk = common::TempDir::new(None, "backend");
    let s = common::file_store(disk.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
    let want = if cfg!(all(target_os = "linux", feature = "uring")) {
        "uring+direct"
    } else {
        "threaded"
    };
    assert_eq!(s.io_backend(), want);
    if let Some(shm) = common::shm() {
        let d = common::TempDir::new(Some(&shm), "backend");
        let s = common::file_store(d.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
        assert_eq!(s.io_backend(), "threaded");
    }
}

/// A clean stop leaves a state file that the next open uses (and deletes); a crash (no
/// stop) or a damaged state file means a scan of the blocks, with the same result.
#[test]
fn state_file_fast_restart() {
    use storage::io::IoChoice;
    use storage::Store;
    let d = common::TempDir::new(None, "state");
    let mut s = common::file_store(d.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
    for i in 0..500u32 {
        s.store_msg(
            &format!("st.{}", i % 9),
            b"",
            &i.to_le_bytes(),
            if i % 5 == 0 { 100 } else { 0 },
        )
        .expect("store");
    }
    for seq in (1..500).step_by(7) {
        s.remove_msg(seq).expect("remove");
    }
    s.erase_msg(300).expect("erase");
    let want = s.state();
    let subjects = s.subjects_state(">");
    s.stop().expect("stop");
    drop(s);
    assert!(d.path().join("state.rns").exists());
    let mut s = common::file_store(d.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
    assert!(s.opened_from_state());
    assert!(!d.path().join("state.rns").exists(), "deleted on open");
    assert_eq!(s.state(), want);
    assert_eq!(s.subjects_state(">"), subjects);
    assert_eq!(s.load_msg(499).expect("load").payload, &498u32.to_le_bytes()[..]);
    drop(s); // no stop: as after a crash
    let mut s = common::file_store(d.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
    assert!(!s.opened_from_state());
    assert_eq!(s.state(), want);
    s.stop().expect("stop");
    drop(s);
    // A damaged state file is ignored.
    let p = d.path().join("state.rns");
    let mut b = std::fs::read(&p).expect("state");
    let mid = b.len() / 2;
    b[mid] ^= 0x40;
    std::fs::write(&p, b).expect("write");
    let mut s = common::file_store(d.path(), storage::SyncMode::GroupCommit, IoChoice::Auto);
    assert!(!s.opened_from_state());
    assert_eq!(s.state(), want);
}
