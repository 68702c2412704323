//! Shared test machinery: temporary directories (ext4 under the target dir, or tmpfs
//! `/dev/shm`), and the ways of opening each store kind the suites run against.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use storage::filestore::{Checksum, Compression};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, ManualClock, MemStore, Store, StoreConfig, SyncMode};

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

static N: AtomicU64 = AtomicU64::new(0);

impl TempDir {
    /// A fresh directory under `base` (`None`: the system temp dir, ext4 here).
    pub fn new(base: Option<&Path>, tag: &str) -> TempDir {
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p = base.join(format!("rnats-storage-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file store's block files, in log order.
pub fn blocks(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .collect();
    v.sort();
    v
}

/// Where the tmpfs variants live (skipped where there is no /dev/shm).
pub fn shm() -> Option<PathBuf> {
    let p = PathBuf::from("/dev/shm");
    p.is_dir().then_some(p)
}

/// One way of running a store in a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Mem,
    /// File store on the system temp dir (ext4 here; io_uring + O_DIRECT where available).
    File,
    /// File store on tmpfs (O_DIRECT refused: the buffered fallback).
    FileShm,
    /// Buffered backend, s2 bodies, HighwayHash checksums, small blocks.
    FileS2Highway,
}

/// A store under test, with its clock and (for file stores) its directory.
pub struct Harness {
    pub variant: Variant,
    pub clock: ManualClock,
    pub dir: Option<TempDir>,
    pub cfg: StoreConfig,
}

pub const T0: i64 = 1_700_000_000_000_000_000;

impl Harness {
    pub fn new(variant: Variant, cfg: StoreConfig) -> Harness {
        let dir = match variant {
            Variant::Mem => None,
            Variant::File | Variant::FileS2Highway => Some(TempDir::new(None, "suite")),
            Variant::FileShm => Some(TempDir::new(shm().as_deref(), "suite-shm")),
        };
        Harness {
            variant,
            clock: ManualClock::new(T0),
            dir,
            cfg,
        }
    }

    pub fn file_config(&self) -> Option<FileStoreConfig> {
        let dir = self.dir.as_ref()?;
        let mut f = FileStoreConfig::new(dir.path());
        if self.variant == Variant::FileS2Highway {
            f.compression = Compression::S2;
            f.checksum = Checksum::Highway;
            f.block_size = 4096;
            f.io = IoChoice::Buffered;
        }
        Some(f)
    }

    pub fn open(&self) -> Box<dyn Store> {
        let clock = Arc::new(self.clock.clone());
        match self.file_config() {
            None => Box::new(MemStore::with_clock(self.cfg.clone(), clock)),
            Some(f) => Box::new(FileStore::open_with_clock(f, self.cfg.clone(), clock).expect("open file store")),
        }
    }

    /// Stop and reopen a file store (a memory store is handed back as it is).
    pub fn restart(&self, mut s: Box<dyn Store>) -> Box<dyn Store> {
        if self.variant == Variant::Mem {
            return s;
        }
        s.stop().expect("stop");
        drop(s);
        self.open()
    }
}

/// Open a file store in `dir` with `sync` and `io`.
pub fn file_store(dir: &Path, sync: SyncMode, io: IoChoice) -> FileStore {
    let mut f = FileStoreConfig::new(dir);
    f.sync = sync;
    f.io = io;
    FileStore::open(f, StoreConfig::new("T")).expect("open")
}

/// A writer process for the kill -9 tests: this test binary again, running only the ignored
/// test `child` with `env_key` set to `dir`; its stdout lines arrive on the channel (read
/// by the returned thread) until it dies.
#[allow(dead_code)]
pub fn spawn_writer(
    child: &str,
    env_key: &str,
    dir: &Path,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().expect("test binary");
    let mut proc = Command::new(exe)
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads=1"])
        .env(env_key, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    let stdout = proc.stdout.take().expect("pipe");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (proc, rx, reader)
}
