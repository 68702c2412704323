//! The owning thread never waits for an fdatasync: with every sync of the disk held (the
//! fault layer's gate), a `sync_always` write, the deletion of a dead front block, writes
//! past the backpressure threshold, loads and polls all return at once; nothing is
//! acknowledged until the syncs run; the dead block's file stays until the range that
//! replaces it is durable; and everything is there after a reopen.
//!
//! Were any of these calls to wait for a sync, it would return only when the watchdog
//! releases the gate (after `HOLD`), and the elapsed-time assertion fails.

mod common;

use common::TempDir;
use std::path::Path;
use std::time::{Duration, Instant};
use storage::io::fault::Faults;
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Store, StoreConfig, SyncMode};

/// How long the watchdog holds the syncs at most (a blocked owner waits this long).
const HOLD: Duration = Duration::from_secs(6);
/// What the owner's calls may take in all while the syncs are held.
const QUICK: Duration = Duration::from_secs(3);

fn open(dir: &Path, sync: SyncMode, io: IoChoice) -> FileStore {
    let mut f = FileStoreConfig::new(dir);
    f.block_size = 4096;
    f.sync = sync;
    f.io = io;
    FileStore::open(f, StoreConfig::new("NB")).expect("open")
}

fn wait_durable(s: &mut FileStore, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.poll_completions().expect("poll") < seq {
        assert!(Instant::now() < deadline, "never durable");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn block_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".blk"))
        .collect();
    v.sort();
    v
}

/// Releases the gate after `HOLD` even if the test hangs on it (then fails on time).
struct Watchdog(Option<std::thread::JoinHandle<()>>, std::sync::mpsc::Sender<()>);

impl Watchdog {
    fn start(faults: &Faults) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let f = faults.clone();
        let h = std::thread::spawn(move || {
            let _ = rx.recv_timeout(HOLD);
            f.release_syncs();
        });
        Watchdog(Some(h), tx)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.1.send(());
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn a_held_fsync_blocks_none_of_the_owners_calls() {
    let dir = TempDir::new(None, "nonblocking");
    let faults = Faults::new();
    let mut s = open(dir.path(), SyncMode::Always, IoChoice::Faulty(faults.clone()));
    // Three blocks' worth of messages (4 KiB blocks), all durable.
    let body = [b'm'; 1500];
    for _ in 0..6 {
        s.store_msg("front", b"", &body, 0).expect("store");
    }
    wait_durable(&mut s, 6);
    let first_block = block_files(dir.path()).first().cloned().expect("a block");
    assert!(block_files(dir.path()).len() >= 3);

    faults.hold_syncs();
    let _dog = Watchdog::start(&faults);
    let t0 = Instant::now();

    // sync_always: the write is handed to the disk, the call returns, nothing is
    // acknowledged while its fdatasync is held.
    let (seq, _) = s.store_msg("held", b"", b"while the disk is slow", 0).expect("store");
    assert_eq!(seq, 7);
    assert!(t0.elapsed() < QUICK, "a sync_always write waited for its fdatasync");
    // Its sync is held (the helper thread waits at the gate, not the owner).
    let deadline = Instant::now() + Duration::from_secs(2);
    while faults.held_syncs() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(faults.held_syncs() > 0, "the write's fdatasync never started");
    assert!(s.durable_seq() < seq, "acknowledged before its fdatasync ran");
    // Loads (from the buffer and from the files) go on.
    assert_eq!(
        &s.load_msg(seq).expect("load new").payload[..],
        b"while the disk is slow"
    );
    assert_eq!(&s.load_msg(1).expect("load old").payload[..], &body[..]);
    // The front block dies: its deletion waits for the durable range, the owner does not.
    let t1 = Instant::now();
    s.remove_msg(1).expect("remove");
    s.remove_msg(2).expect("remove");
    assert!(t1.elapsed() < QUICK, "deleting a dead block waited for an fdatasync");
    assert!(
        block_files(dir.path()).contains(&first_block),
        "a dead block deleted before the range that replaces it is durable"
    );
    // Writes past the backpressure threshold (4 MiB buffered) while the syncs are held.
    let big = vec![b'b'; 256 * 1024];
    let mut last = seq;
    let t2 = Instant::now();
    for _ in 0..24 {
        last = s.store_msg("big", b"", &big, 0).expect("store big").0;
    }
    assert!(t2.elapsed() < QUICK, "backpressure waited for an fdatasync");
    assert_eq!(
        s.poll_completions().expect("poll"),
        6,
        "nothing more acknowledged while held"
    );
    let elapsed = t0.elapsed();
    assert!(elapsed < QUICK, "the owner waited {elapsed:?} for held fdatasyncs");
    assert_eq!(s.stats().stalls, 0);

    faults.release_syncs();
    wait_durable(&mut s, last);
    // Once the range is durable the dead block goes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while block_files(dir.path()).contains(&first_block) {
        assert!(Instant::now() < deadline, "the dead block was never deleted");
        s.poll_completions().expect("poll");
        std::thread::sleep(Duration::from_millis(1));
    }
    s.stop().expect("stop");
    drop(s);
    let mut s = open(dir.path(), SyncMode::GroupCommit, IoChoice::Buffered);
    let st = s.fast_state();
    assert_eq!((st.first_seq, st.last_seq, st.msgs), (3, last, last - 2));
    assert_eq!(&s.load_msg(seq).expect("load").payload[..], b"while the disk is slow");
    assert_eq!(s.load_msg(last).expect("load").payload.len(), big.len());
    assert_eq!(s.corruptions(), 0);
}

/// The dead block's deletion is durable-ordered: killed (dropped without its syncs) before
/// the range is durable, the block is still there and the reopened store is consistent.
#[test]
fn dead_blocks_outlive_a_crash_before_their_range_is_durable() {
    let dir = TempDir::new(None, "nonblocking-crash");
    let faults = Faults::new();
    let mut s = open(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    let body = [b'x'; 1500];
    for _ in 0..6 {
        s.store_msg("a", b"", &body, 0).expect("store");
    }
    s.sync().expect("sync");
    let before = block_files(dir.path());
    faults.fail_sync_in(1);
    s.remove_msg(1).expect("remove");
    s.remove_msg(2).expect("remove");
    s.submit().expect("submit");
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.poll_completions().is_ok() {
        assert!(Instant::now() < deadline, "the failing sync never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        block_files(dir.path()),
        before,
        "a block deleted though its range is not durable"
    );
    drop(s);
    let mut s = open(dir.path(), SyncMode::GroupCommit, IoChoice::Buffered);
    for seq in 3..=6 {
        assert_eq!(&s.load_msg(seq).expect("load").payload[..], &body[..]);
    }
    assert_eq!(s.corruptions(), 0);
}

/// Under a disk stalled for good the buffer stays bounded: past four times the
/// backpressure threshold a store call waits for the batch in flight (the last resort,
/// counted), and goes on once the sync completes.
#[test]
fn buffering_stays_bounded_under_a_stalled_disk() {
    let dir = TempDir::new(None, "nonblocking-stall");
    let faults = Faults::new();
    let mut s = open(dir.path(), SyncMode::GroupCommit, IoChoice::Faulty(faults.clone()));
    s.store_msg("a", b"", b"first", 0).expect("store");
    wait_durable(&mut s, 1);
    faults.hold_syncs();
    let f = faults.clone();
    let hold = Duration::from_millis(600);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(hold);
        f.release_syncs();
    });
    let t0 = Instant::now();
    let big = vec![b'b'; 256 * 1024];
    let mut last = 1;
    let mut buffered_before_stall = 0;
    for i in 0..80u64 {
        last = s.store_msg("big", b"", &big, 0).expect("store").0;
        s.submit().expect("submit");
        if s.stats().stalls == 0 {
            buffered_before_stall = (i + 1) * big.len() as u64;
        }
    }
    releaser.join().expect("releaser");
    let stalls = s.stats().stalls;
    assert!(stalls >= 1, "20 MiB buffered against a stalled disk without waiting");
    assert!(
        t0.elapsed() >= hold - Duration::from_millis(100),
        "the stall did not wait for the sync"
    );
    // 4 MiB threshold (4 KiB blocks), hard limit four times that.
    assert!(
        buffered_before_stall <= 16 * 1024 * 1024 + big.len() as u64,
        "{buffered_before_stall} bytes buffered before the first stall"
    );
    wait_durable(&mut s, last);
    s.stop().expect("stop");
    drop(s);
    let mut s = open(dir.path(), SyncMode::GroupCommit, IoChoice::Buffered);
    assert_eq!(s.fast_state().msgs, last);
    assert_eq!(s.load_msg(last).expect("load").payload.len(), big.len());
    assert_eq!(s.corruptions(), 0);
}
