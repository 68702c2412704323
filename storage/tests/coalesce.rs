//! Interval (lazy) mode gathers small appends before writing them, as the reference's
//! flush loop does; group commit and `sync_always` never hold anything back.
//!
//! - Small appends are acknowledged at once but not written until `write_due`: one batch
//!   for many messages, readable meanwhile from memory.
//! - 16 KiB waiting are written at once.
//! - A clean stop writes what is held; a reopen finds everything.
//! - The interval's fdatasync runs on time with nothing more written (`write_due` says
//!   when).
//! - In group-commit mode every submit starts its batch.

mod common;

use common::{file_store, TempDir};
use std::time::{Duration, Instant};
use storage::io::IoChoice;
use storage::{FileStore, Store, SyncMode};

const LAZY: SyncMode = SyncMode::Interval(Duration::from_secs(120));

fn ios() -> [IoChoice; 2] {
    [IoChoice::Auto, IoChoice::Buffered]
}

/// No write is held: nothing is due before the interval's sync (2 minutes).
fn nothing_due_soon(s: &FileStore, io: &IoChoice) {
    let soon = Instant::now() + Duration::from_secs(60);
    assert!(s.write_due().is_none_or(|t| t > soon), "{io:?}: a write is still held");
}

/// Wait for the time `write_due` gives, then submit.
fn submit_when_due(s: &mut FileStore) {
    let due = s.write_due().expect("held until written");
    std::thread::sleep(due.saturating_duration_since(Instant::now()) + Duration::from_micros(100));
    s.submit().expect("submit when due");
}

/// Write and sync everything so far, waiting for it: nothing is in flight after.
fn settle(s: &mut FileStore) {
    s.sync().expect("sync");
}

#[test]
fn small_appends_are_held_until_due_then_written_in_one_batch() {
    for io in ios() {
        let dir = TempDir::new(None, "coalesce-small");
        let mut s = file_store(dir.path(), LAZY, io.clone());
        settle(&mut s);
        let before = s.stats();
        let first = Instant::now();
        for i in 0..50u32 {
            s.store_msg("lazy.a", b"", &i.to_le_bytes(), 0).expect("store");
            s.submit().expect("submit");
        }
        assert_eq!(s.durable_seq(), 50, "{io:?}: interval mode acknowledges at once");
        assert_eq!(s.stats().batches, before.batches, "{io:?}: nothing written yet");
        let due = s.write_due().expect("a write is due later");
        assert!(due <= first + Duration::from_millis(8), "{io:?}: held too long");
        // Held messages are read from memory.
        let m = s.load_msg(50).expect("load held message");
        assert_eq!(&m.payload[..], &49u32.to_le_bytes());
        // Nothing new arrives: at the next look, or at the latest 8 ms after the first
        // write (the first look saw the writes had grown), one batch writes all fifty.
        let mut looks = 0;
        while s.stats().batches == before.batches {
            looks += 1;
            assert!(looks <= 4, "{io:?}: still held after {looks} looks");
            submit_when_due(&mut s);
        }
        assert_eq!(s.stats().batches, before.batches + 1, "{io:?}: one batch for the lot");
        nothing_due_soon(&s, &io);
        assert_eq!(
            s.stats().syncs,
            before.syncs,
            "{io:?}: no fdatasync before the interval"
        );
        s.stop().expect("stop");
        drop(s);
        let mut s = file_store(dir.path(), LAZY, io.clone());
        assert_eq!(s.fast_state().msgs, 50, "{io:?}");
        let m = s.load_msg(1).expect("load after reopen");
        assert_eq!(&m.payload[..], &0u32.to_le_bytes());
    }
}

#[test]
fn a_held_write_is_written_once_16_kib_wait() {
    for io in ios() {
        let dir = TempDir::new(None, "coalesce-full");
        let mut s = file_store(dir.path(), LAZY, io.clone());
        settle(&mut s);
        let before = s.stats().batches;
        let payload = vec![7u8; 1024];
        let mut n = 0;
        while s.stats().batches == before {
            n += 1;
            assert!(n <= 17, "{io:?}: still held after {n} KiB");
            s.store_msg("lazy.big", b"", &payload, 0).expect("store");
            s.submit().expect("submit");
        }
        assert!(n >= 15, "{io:?}: written after only {n} KiB");
        nothing_due_soon(&s, &io);
    }
}

#[test]
fn a_clean_stop_writes_what_is_held() {
    for io in ios() {
        let dir = TempDir::new(None, "coalesce-stop");
        // A new store: its directory waits for a synced batch (the interval's), which
        // does not stop the hold.
        let mut s = file_store(dir.path(), LAZY, io.clone());
        std::thread::sleep(Duration::from_millis(20));
        s.poll_completions().expect("poll");
        let before = s.stats().batches;
        for i in 0..7u32 {
            s.store_msg("lazy.s", b"", &i.to_le_bytes(), 0).expect("store");
            s.submit().expect("submit");
        }
        assert!(s.write_due().is_some(), "{io:?}");
        assert_eq!(s.stats().batches, before, "{io:?}: held");
        s.stop().expect("stop");
        drop(s);
        let s = file_store(dir.path(), LAZY, io.clone());
        assert_eq!(s.fast_state().msgs, 7, "{io:?}");
    }
}

#[test]
fn the_interval_sync_runs_on_time_without_more_writes() {
    let every = Duration::from_millis(150);
    for io in ios() {
        let dir = TempDir::new(None, "coalesce-interval");
        let mut s = file_store(dir.path(), SyncMode::Interval(every), io.clone());
        let synced_at = Instant::now();
        settle(&mut s);
        let before = s.stats();
        for i in 0..3u32 {
            s.store_msg("lazy.i", b"", &i.to_le_bytes(), 0).expect("store");
            s.submit().expect("submit");
        }
        // The held appends go out first, unsynced.
        while s.stats().batches == before.batches {
            submit_when_due(&mut s);
        }
        assert_eq!(s.stats().syncs, before.syncs, "{io:?}: written, not synced yet");
        let due = s.write_due().expect("a sync is due");
        assert!(
            due <= synced_at + every + Duration::from_millis(50),
            "{io:?}: due too late"
        );
        // The owner does not call in until then (a shard learns that the batch ended only
        // when it looks): at that time the sync is still due, and stays due, rather than
        // moving ahead of the clock.
        std::thread::sleep(due.saturating_duration_since(Instant::now()) + Duration::from_millis(5));
        assert_eq!(s.write_due(), Some(due), "{io:?}");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.write_due(), Some(due), "{io:?}: the sync's time moves with the clock");
        s.submit().expect("submit when due");
        assert_eq!(s.stats().syncs, before.syncs + 1, "{io:?}: the interval's sync");
        assert!(synced_at.elapsed() >= every, "{io:?}: synced before the interval");
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.write_due().is_some() {
            assert!(Instant::now() < deadline, "{io:?}: still due after the sync");
            std::thread::sleep(Duration::from_millis(1));
            s.poll_completions().expect("poll");
        }
    }
}

#[test]
fn group_commit_never_holds() {
    let dir = TempDir::new(None, "coalesce-gc");
    let mut s = file_store(dir.path(), SyncMode::GroupCommit, IoChoice::Auto);
    settle(&mut s);
    for i in 0..5u32 {
        let before = s.stats().batches;
        s.store_msg("gc", b"", &i.to_le_bytes(), 0).expect("store");
        s.submit().expect("submit");
        assert_eq!(s.write_due(), None);
        assert_eq!(s.stats().batches, before + 1, "each submit starts its batch");
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.poll_completions().expect("poll") < u64::from(i) + 1 {
            assert!(Instant::now() < deadline, "never durable");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
