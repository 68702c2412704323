//! A store opened with a wake-up eventfd signals it when its writes complete, on every
//! backend, so its owner can sleep instead of polling for completions: the test waits on
//! the eventfd alone (a `poll(2)` on it) and only then asks the store what is durable.
#![cfg(target_os = "linux")]

mod common;

use common::TempDir;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use storage::io::{IoChoice, Wake};
use storage::{FileStore, FileStoreConfig, Store, StoreConfig};

fn eventfd() -> Arc<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor, owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd");
    // SAFETY: `fd` was just created and nobody else owns it.
    Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wait up to `ms` for the eventfd to be signalled; empty it. True if it was.
fn signalled(fd: &OwnedFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd of ours for at most `ms`.
    if unsafe { libc::poll(&mut p, 1, ms) } != 1 {
        return false;
    }
    let mut n = 0u64;
    // SAFETY: reads the 8-byte counter of our eventfd into a local.
    unsafe { libc::read(fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    n > 0
}

fn run(io: IoChoice, backend: Option<&str>) {
    let dir = TempDir::new(None, "wake");
    let efd = eventfd();
    let mut f = FileStoreConfig::new(dir.path());
    f.io = io;
    f.wake = Some(Wake(efd.clone()));
    let mut s = FileStore::open(f, StoreConfig::new("W")).expect("open");
    if let Some(b) = backend {
        assert_eq!(s.io_backend(), b);
    }
    assert!(s.signals_completions());
    // Opening may have done I/O of its own: start from a quiet eventfd.
    while s.poll_completions().expect("poll") < s.fast_state().last_seq {}
    signalled(&efd, 0);
    for round in 1..=20u64 {
        let (seq, _) = s.store_msg("a", b"", b"payload", 0).expect("store");
        assert_eq!(seq, round);
        s.submit().expect("submit");
        assert!(
            signalled(&efd, 5000),
            "round {round}: the write's completion did not signal"
        );
        let mut durable = s.poll_completions().expect("poll");
        // A batch in flight may have ended first (the signal was its): the next one follows.
        while durable < seq {
            assert!(signalled(&efd, 5000), "round {round}: the second batch did not signal");
            durable = s.poll_completions().expect("poll");
        }
    }
}

#[cfg(feature = "uring")]
#[test]
fn completions_signal_the_wake_through_io_uring() {
    run(IoChoice::Auto, Some("uring+direct"));
}

#[test]
fn completions_signal_the_wake_through_the_threaded_backend() {
    run(IoChoice::Buffered, Some("threaded"));
}

#[test]
fn without_a_wake_the_owner_polls() {
    let dir = TempDir::new(None, "nowake");
    let s = FileStore::open(FileStoreConfig::new(dir.path()), StoreConfig::new("W")).expect("open");
    assert!(!s.signals_completions());
}
