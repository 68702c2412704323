//! The I/O layer under the file store. The store hands it batches of writes and syncs
//! (always at offsets and lengths aligned to [`Io::alignment`]) and learns of their
//! completion by polling; reads are synchronous. Two backends share this interface:
//!
//! - [`threaded::Threaded`]: buffered std I/O on one helper thread per store (portable; the
//!   fallback where io_uring or O_DIRECT is refused, e.g. tmpfs). Files are reached through
//!   the [`raw::Opener`] trait, so [`fault::Faults`] can fail writes and syncs under it.
//! - `uring::Uring` (Linux, feature `uring`): O_DIRECT files driven through an io_uring
//!   ring owned by the calling thread: no locks, no helper thread; the owning shard calls
//!   [`Io::start`] and [`Io::poll`] from its loop. Reads are O_DIRECT reads on the same
//!   ring (a synchronous wait for their completion) with a bounded chunk cache (`uring::cache`).
//!
//! Both keep their open files in a `table::FileTable`. Writes carry their bytes in a
//! [`WriteBuf`] (`buf`), aligned memory a direct backend writes from as it is.
//!
//! Completion is learned by polling, but the owner need not poll on a timer: given a
//! [`Wake`] (its shard's wake-up eventfd), a backend signals it whenever a batch completes
//! (the ring's registered eventfd; the helper thread's write after each batch), so a
//! sleeping shard wakes for the completion and polls once.
//!
//! [`open_backend`] picks one: io_uring with O_DIRECT when asked for and available, else
//! the threaded backend.

mod buf;
pub mod fault;
pub mod raw;
mod table;
pub mod threaded;
#[cfg(all(target_os = "linux", feature = "uring"))]
pub mod uring;

use std::io;
use std::path::Path;

pub use buf::{WriteBuf, BUF_ALIGN};

/// A file opened through a backend.
pub type FileNo = u32;

/// One step of a batch; a batch runs its steps in order and stops at the first failure.
#[derive(Debug)]
pub enum Op {
    /// Write `data` at `off` (aligned for direct backends).
    Write { file: FileNo, off: u64, data: WriteBuf },
    /// fdatasync the file.
    Sync { file: FileNo },
    /// fsync the directory the files live in (new or removed files).
    SyncDir,
}

/// Work handed to the backend; `token` comes back with its completion.
#[derive(Debug, Default)]
pub struct Batch {
    pub token: u64,
    pub ops: Vec<Op>,
}

/// A finished batch.
#[derive(Debug)]
pub struct Done {
    pub token: u64,
    pub result: io::Result<()>,
}

/// How often an owner calls [`Io::trim`] (and [`crate::Store::trim`]).
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// What a backend does for the file store.
pub trait Io {
    /// Offsets and lengths of writes must be multiples of this (1: anything goes).
    fn alignment(&self) -> usize;
    /// A short name for logs and reports (`uring+direct`, `threaded`).
    fn name(&self) -> &'static str;
    /// Open (or with `create`, create anew) a file of the store's directory; returns it
    /// with its current length.
    fn open(&mut self, name: &str, create: bool) -> io::Result<(FileNo, u64)>;
    fn close(&mut self, file: FileNo);
    /// Remove a file of the directory (closing it first if open).
    fn remove(&mut self, name: &str) -> io::Result<()>;
    /// Rename a file of the directory (atomic replace).
    fn rename(&mut self, from: &str, to: &str) -> io::Result<()>;
    /// Read exactly `len` bytes at `off` (fewer at the end of the file).
    fn read_at(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<Vec<u8>>;
    /// [`Io::read_at`] for a message load: a backend with a read cache may hand out a
    /// window of a cached chunk instead of a copy.
    fn read_shared(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<bytes::Bytes> {
        self.read_at(file, off, len).map(bytes::Bytes::from)
    }
    /// An empty buffer for the next batch's write: backends that keep the buffers of
    /// finished writes hand one back (its pages already mapped).
    fn write_buf(&mut self) -> WriteBuf {
        WriteBuf::new()
    }
    /// Start a batch.
    fn start(&mut self, batch: Batch) -> io::Result<()>;
    /// A finished batch, if any (never blocks).
    fn poll(&mut self) -> Option<Done>;
    /// Wait for the next finished batch; `None` when nothing is in flight.
    fn wait(&mut self) -> Option<Done>;
    /// Batches started and not yet returned by poll/wait.
    fn in_flight(&self) -> usize;
    /// May a batch start now with its writes under way at once? True when the writes of
    /// every batch in flight have ended (only their syncs may still run), so a batch
    /// started now overlaps the device's flush instead of queueing behind writes.
    /// Backends that cannot tell say so only when nothing is in flight.
    fn writes_idle(&mut self) -> bool {
        self.in_flight() == 0
    }
    /// Called now and then by the owner (every [`TRIM_EVERY`] or so): give back the
    /// memory kept for reuse (cached chunks, spare write buffers) that went unused since
    /// the last call, so idle stores hold little.
    fn trim(&mut self) {}
    /// From now on signal `wake` each time a batch completes (the owner's event loop
    /// sleeps on it instead of looking for completions on a timer). False where the
    /// backend cannot.
    fn wake_on_completion(&mut self, _wake: &Wake) -> bool {
        false
    }
}

/// An eventfd the owner of a store sleeps on (its shard's event loop), for backends to
/// signal when a batch completes. Nothing to signal on targets without eventfds.
#[derive(Clone, Debug)]
pub struct Wake(#[cfg(target_os = "linux")] pub std::sync::Arc<std::os::fd::OwnedFd>);

impl Wake {
    /// Add one to the eventfd's counter (what wakes a poll on it).
    pub fn signal(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let one: u64 = 1;
            // SAFETY: writes the 8 bytes of a local integer to an eventfd we hold open;
            // a full counter (EAGAIN) means a wake-up is pending anyway.
            unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

/// Which backend a store asks for.
#[derive(Clone, Debug, Default)]
pub enum IoChoice {
    /// io_uring + O_DIRECT where the kernel and file system allow it, else threaded.
    #[default]
    Auto,
    /// As `Auto`, with reads by `pread` on buffered descriptors instead of O_DIRECT reads
    /// through the ring (what `RNATS_STORAGE_READS=buffered` makes of `Auto`).
    AutoBufferedReads,
    /// Always the threaded buffered backend.
    Buffered,
    /// The threaded backend over a fault-injecting file layer (tests).
    Faulty(fault::Faults),
}

/// Open the backend for directory `dir`.
pub fn open_backend(dir: &Path, choice: &IoChoice) -> io::Result<Box<dyn Io>> {
    match choice {
        IoChoice::Auto | IoChoice::AutoBufferedReads => {
            #[cfg(all(target_os = "linux", feature = "uring"))]
            {
                match uring::Uring::open(dir, matches!(choice, IoChoice::Auto)) {
                    Ok(u) => return Ok(Box::new(u)),
                    Err(e) => {
                        tracing::debug!(dir = %dir.display(), error = %e, "storage: io_uring/O_DIRECT unavailable, buffered I/O")
                    }
                }
            }
            Ok(Box::new(threaded::Threaded::new(
                dir,
                std::sync::Arc::new(raw::StdOpener),
            )?))
        }
        IoChoice::Buffered => Ok(Box::new(threaded::Threaded::new(
            dir,
            std::sync::Arc::new(raw::StdOpener),
        )?)),
        IoChoice::Faulty(f) => Ok(Box::new(threaded::Threaded::new(
            dir,
            std::sync::Arc::new(fault::FaultOpener::new(f.clone())),
        )?)),
    }
}
