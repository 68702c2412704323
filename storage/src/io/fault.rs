//! A fault-injecting file layer for tests: fail the Nth write or fdatasync, make writes
//! short, run out of space after a number of bytes (ENOSPC), or hold every fdatasync (of
//! files and of the directory) until released: a disk whose syncs take as long as a test
//! likes. It sits under the threaded
//! backend ([`super::IoChoice::Faulty`]), so the store above sees exactly what a failing
//! disk would show it.

use super::raw::{Opener, RawFile, StdOpener};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The faults to inject; clones share their counters, so a test keeps one to arm faults
/// while the store runs. Counts are 1-based over every file of the store (0: never).
#[derive(Clone, Debug, Default)]
pub struct Faults(Arc<Plan>);

#[derive(Debug, Default)]
struct Plan {
    fail_write_at: AtomicU64,
    fail_sync_at: AtomicU64,
    short_writes: AtomicU64,
    space_left: AtomicU64,
    space_limited: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    /// Whether syncs are held, and the wake-up of the held ones.
    held: Mutex<bool>,
    release: Condvar,
    /// Syncs waiting at the gate now.
    waiting: AtomicU64,
}

impl Plan {
    fn gate(&self) {
        let Ok(mut held) = self.held.lock() else { return };
        if *held {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            while *held {
                held = match self.release.wait(held) {
                    Ok(h) => h,
                    Err(_) => break,
                };
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Faults {
    pub fn new() -> Faults {
        Faults::default()
    }
    /// The `n`th write call from now fails with EIO.
    pub fn fail_write_in(&self, n: u64) {
        let at = self.0.writes.load(Ordering::SeqCst) + n;
        self.0.fail_write_at.store(at, Ordering::SeqCst);
    }
    /// The `n`th fdatasync from now fails with EIO.
    pub fn fail_sync_in(&self, n: u64) {
        let at = self.0.syncs.load(Ordering::SeqCst) + n;
        self.0.fail_sync_at.store(at, Ordering::SeqCst);
    }
    /// Every write moves at most half its bytes (at least one).
    pub fn short_writes(&self, on: bool) {
        self.0.short_writes.store(u64::from(on), Ordering::SeqCst);
    }
    /// Only `bytes` more may be written; past that writes fail with ENOSPC.
    pub fn space_left(&self, bytes: u64) {
        self.0.space_left.store(bytes, Ordering::SeqCst);
        self.0.space_limited.store(1, Ordering::SeqCst);
    }
    /// Hold every fdatasync (and directory fsync) from now until [`Faults::release_syncs`].
    pub fn hold_syncs(&self) {
        if let Ok(mut h) = self.0.held.lock() {
            *h = true;
        }
    }
    /// Let held and later syncs run.
    pub fn release_syncs(&self) {
        if let Ok(mut h) = self.0.held.lock() {
            *h = false;
        }
        self.0.release.notify_all();
    }
    /// Syncs held at the gate right now.
    pub fn held_syncs(&self) -> u64 {
        self.0.waiting.load(Ordering::SeqCst)
    }
    pub fn writes(&self) -> u64 {
        self.0.writes.load(Ordering::SeqCst)
    }
    pub fn syncs(&self) -> u64 {
        self.0.syncs.load(Ordering::SeqCst)
    }
}

/// Opens files wrapped with the faults.
pub struct FaultOpener {
    faults: Faults,
    inner: StdOpener,
}

impl FaultOpener {
    pub fn new(faults: Faults) -> FaultOpener {
        FaultOpener {
            faults,
            inner: StdOpener,
        }
    }
}

impl Opener for FaultOpener {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn RawFile>> {
        let inner = self.inner.open(path, create)?;
        Ok(Arc::new(FaultFile {
            inner,
            faults: self.faults.clone(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.faults.0.gate();
        self.inner.sync_dir(dir)
    }
}

struct FaultFile {
    inner: Arc<dyn RawFile>,
    faults: Faults,
}

impl RawFile for FaultFile {
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        let p = &self.faults.0;
        let n = p.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if p.fail_write_at.load(Ordering::SeqCst) == n {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let mut len = buf.len();
        if p.short_writes.load(Ordering::SeqCst) != 0 && len > 1 {
            len /= 2;
        }
        if p.space_limited.load(Ordering::SeqCst) != 0 {
            let left = p.space_left.load(Ordering::SeqCst);
            if left == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            len = len.min(usize::try_from(left).unwrap_or(usize::MAX));
            p.space_left.fetch_sub(len as u64, Ordering::SeqCst);
        }
        self.inner.write_at(buf.get(..len).unwrap_or(buf), off)
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.inner.read_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        let p = &self.faults.0;
        p.gate();
        let n = p.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if p.fail_sync_at.load(Ordering::SeqCst) == n {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.sync_data()
    }

    fn file_len(&self) -> io::Result<u64> {
        self.inner.file_len()
    }
}
