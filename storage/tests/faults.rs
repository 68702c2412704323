//! Faults injected under the I/O layer: a failed fdatasync or write makes the store refuse
//! writes (typed error) without acknowledging anything it could not make durable; a full
//! disk gives a clear error; short writes are completed; and whatever was durable before
//! the fault is there after a reopen.

mod common;

use common::{file_store, TempDir};
use std::time::{Duration, Instant};
use storage::io::fault::Faults;
use storage::io::IoChoice;
use storage::{FileStore, Store, StoreError, SyncMode};

fn wait_durable(s: &mut FileStore, seq: u64) -> Result<u64, StoreError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = s.poll_completions()?;
        if d >= seq {
            return Ok(d);
        }
        assert!(Instant::now() < deadline, "never durable");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn failed_fsync_refuses_writes_and_acknowledges_nothing_more() {
    let dir = TempDir::new(None, "fault-sync");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    for i in 0..10u8 {
        s.store_msg("a", b"", &[i], 0).expect("store");
    }
    s.sync().expect("sync");
    assert_eq!(s.durable_seq(), 10);
    faults.fail_sync_in(1);
    s.store_msg("a", b"", b"lost?", 0).expect("buffered");
    let err = s.sync().expect_err("the sync fails");
    assert!(
        matches!(err, StoreError::WritesRefused(ref m) if m.contains("Input/output error")),
        "{err}"
    );
    assert_eq!(s.durable_seq(), 10, "the failed write is not acknowledged");
    assert!(matches!(
        s.store_msg("a", b"", b"x", 0),
        Err(StoreError::WritesRefused(_))
    ));
    assert!(matches!(s.remove_msg(1), Err(StoreError::WritesRefused(_))));
    assert!(matches!(s.poll_completions(), Ok(10)));
    assert!(s.failure().is_some());
    // Reads still work.
    assert_eq!(s.load_msg(3).expect("read").payload, &[2u8][..]);
    drop(s);
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Buffered);
    assert!(s.fast_state().last_seq >= 10);
    for seq in 1..=10 {
        assert!(s.load_msg(seq).is_ok(), "durable seq {seq} kept");
    }
}

#[test]
fn failed_write_refuses_writes_in_group_commit() {
    let dir = TempDir::new(None, "fault-write");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    s.store_msg("a", b"", b"one", 0).expect("store");
    wait_durable(&mut s, 1).expect("durable");
    faults.fail_write_in(1);
    s.store_msg("a", b"", b"two", 0).expect("buffered");
    s.submit().expect("submit");
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        match s.poll_completions() {
            Err(e) => break e,
            Ok(d) => assert_eq!(d, 1, "a failed write never becomes durable"),
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(matches!(err, StoreError::WritesRefused(_)), "{err}");
    assert!(matches!(
        s.store_msg("a", b"", b"x", 0),
        Err(StoreError::WritesRefused(_))
    ));
    assert!(matches!(s.sync(), Err(StoreError::WritesRefused(_))));
}

#[test]
fn full_disk_is_a_clear_error() {
    let dir = TempDir::new(None, "fault-enospc");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::Always, IoChoice::Faulty(faults.clone()));
    s.store_msg("a", b"", b"fits", 0).expect("store");
    wait_durable(&mut s, 1).expect("durable");
    faults.space_left(100);
    // sync_always hands the write to the disk at once and does not wait for it: the
    // failure comes back with the completion (or, if that was quick, with the call).
    let err = match s.store_msg("a", b"", &[7u8; 4000], 0) {
        Err(e) => e,
        Ok(_) => wait_durable(&mut s, 2).expect_err("disk full"),
    };
    match &err {
        StoreError::WritesRefused(m) => assert!(m.contains("No space left on device"), "{m}"),
        e => panic!("unexpected {e}"),
    }
    assert_eq!(s.durable_seq(), 1);
    assert!(matches!(
        s.store_msg("a", b"", b"x", 0),
        Err(StoreError::WritesRefused(_))
    ));
}

#[test]
fn short_writes_are_completed() {
    let dir = TempDir::new(None, "fault-short");
    let faults = Faults::new();
    faults.short_writes(true);
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    for i in 0..50u32 {
        s.store_msg("s", b"", &[i as u8; 333], 0).expect("store");
    }
    s.sync().expect("sync");
    let writes = faults.writes();
    assert!(writes > 10, "short writes were retried ({writes} calls)");
    s.stop().expect("stop");
    drop(s);
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Buffered);
    for seq in 1..=50u64 {
        assert_eq!(s.load_msg(seq).expect("load").payload, &[(seq - 1) as u8; 333][..]);
    }
    assert_eq!(s.corruptions(), 0);
}

#[test]
fn sync_modes() {
    // sync_always: every write call starts its write and fdatasync itself (no submit
    // needed), and is acknowledged when that sync completed.
    let dir = TempDir::new(None, "mode-always");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::Always, IoChoice::Faulty(faults.clone()));
    for i in 1..=5u64 {
        let before = faults.syncs();
        s.store_msg("a", b"", b"x", 0).expect("store");
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.durable_seq() < i {
            assert!(Instant::now() < deadline, "never durable");
            std::thread::sleep(Duration::from_millis(1));
            s.poll_completions().expect("poll");
        }
        assert!(
            faults.syncs() > before,
            "write {i} acknowledged without its own fdatasync"
        );
    }
    // sync_interval: acknowledged before the sync, as the reference does.
    let dir = TempDir::new(None, "mode-interval");
    let faults = Faults::new();
    let mut s = file_store(
        dir.path(),
        SyncMode::Interval(Duration::from_secs(3600)),
        IoChoice::Faulty(faults.clone()),
    );
    let before = faults.syncs();
    for _ in 0..20 {
        s.store_msg("a", b"", b"x", 0).expect("store");
        s.submit().expect("submit");
    }
    assert_eq!(s.durable_seq(), 20);
    std::thread::sleep(Duration::from_millis(20));
    s.poll_completions().expect("poll");
    assert_eq!(faults.syncs(), before, "no fdatasync before the interval");
    s.sync().expect("explicit sync");
    assert!(faults.syncs() > before);
    // Group commit: many writes share one fdatasync.
    let dir = TempDir::new(None, "mode-group");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    s.sync().expect("sync");
    let before = faults.syncs();
    for i in 0..1000u32 {
        s.store_msg("g", b"", &i.to_le_bytes(), 0).expect("store");
        if i % 100 == 0 {
            s.submit().expect("submit");
        }
    }
    wait_durable(&mut s, 1000).expect("durable");
    let used = faults.syncs() - before;
    assert!((1..=20).contains(&used), "1000 writes took {used} fdatasyncs");
}

/// One write at a time (a synchronous publisher): each becomes durable only through its
/// own fdatasync, never before the sync that covers it has completed.
#[test]
fn one_write_at_a_time_pays_one_sync_each() {
    let dir = TempDir::new(None, "one-at-a-time");
    let faults = Faults::new();
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    s.sync().expect("sync");
    let before = faults.syncs();
    for i in 1..=50u64 {
        s.store_msg("one", b"", b"x", 0).expect("store");
        let synced = faults.syncs();
        assert!(s.durable_seq() < i, "write {i} durable before any sync");
        s.submit().expect("submit");
        wait_durable(&mut s, i).expect("durable");
        assert!(faults.syncs() > synced, "write {i} durable without a new fdatasync");
    }
    assert!(faults.syncs() - before >= 50);
}
