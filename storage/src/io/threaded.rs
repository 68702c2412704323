//! The portable backend: buffered std I/O, with batches (writes, fdatasyncs) run in order
//! on one helper thread so the owning thread never waits for the disk on the write path.
//! Reads run on the calling thread (pread, usually from the page cache).

use super::raw::{read_full, Opener, RawFile};
use super::table::FileTable;
use super::{Batch, Done, FileNo, Io, Op};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

enum Step {
    Write(Arc<dyn RawFile>, u64, super::WriteBuf),
    Sync(Arc<dyn RawFile>),
    SyncDir,
}

struct Job {
    token: u64,
    steps: Vec<Step>,
}

/// Buffered I/O on a helper thread.
pub struct Threaded {
    dir: PathBuf,
    opener: Arc<dyn Opener>,
    files: FileTable<Arc<dyn RawFile>>,
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    in_flight: usize,
    thread: Option<JoinHandle<()>>,
    /// Signalled by the helper thread after each batch, once set.
    wake: Arc<std::sync::OnceLock<super::Wake>>,
}

impl Threaded {
    pub fn new(dir: &Path, opener: Arc<dyn Opener>) -> io::Result<Threaded> {
        let (jtx, jrx) = channel::<Job>();
        let (dtx, drx) = channel::<Done>();
        let d = dir.to_path_buf();
        let o = opener.clone();
        let wake = Arc::new(std::sync::OnceLock::new());
        let w = wake.clone();
        let thread = std::thread::Builder::new()
            .name("storage-io".into())
            .spawn(move || run(jrx, dtx, &d, o.as_ref(), &w))?;
        Ok(Threaded {
            dir: dir.to_path_buf(),
            opener,
            files: FileTable::default(),
            jobs: Some(jtx),
            done: drx,
            in_flight: 0,
            thread: Some(thread),
            wake,
        })
    }

    fn file(&self, f: FileNo) -> io::Result<Arc<dyn RawFile>> {
        self.files.get(f).cloned()
    }
}

fn run(
    jobs: Receiver<Job>,
    done: Sender<Done>,
    dir: &Path,
    opener: &dyn Opener,
    wake: &std::sync::OnceLock<super::Wake>,
) {
    while let Ok(job) = jobs.recv() {
        let mut result = Ok(());
        for step in job.steps {
            let r = match step {
                Step::Write(f, off, data) => f.write_all_at(&data, off),
                Step::Sync(f) => f.sync_data(),
                Step::SyncDir => opener.sync_dir(dir),
            };
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        if done
            .send(Done {
                token: job.token,
                result,
            })
            .is_err()
        {
            return;
        }
        if let Some(w) = wake.get() {
            w.signal();
        }
    }
}

impl Io for Threaded {
    fn alignment(&self) -> usize {
        1
    }

    fn name(&self) -> &'static str {
        "threaded"
    }

    fn open(&mut self, name: &str, create: bool) -> io::Result<(FileNo, u64)> {
        let f = self.opener.open(&self.dir.join(name), create)?;
        let len = f.file_len()?;
        Ok((self.files.insert(name, f), len))
    }

    fn close(&mut self, file: FileNo) {
        self.files.close(file);
    }

    fn remove(&mut self, name: &str) -> io::Result<()> {
        self.files.close_name(name);
        std::fs::remove_file(self.dir.join(name))
    }

    fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.dir.join(from), self.dir.join(to))
    }

    fn read_at(&mut self, file: FileNo, off: u64, len: usize) -> io::Result<Vec<u8>> {
        read_full(self.file(file)?.as_ref(), off, len)
    }

    fn start(&mut self, batch: Batch) -> io::Result<()> {
        let mut steps = Vec::with_capacity(batch.ops.len());
        for op in batch.ops {
            steps.push(match op {
                Op::Write { file, off, data } => Step::Write(self.file(file)?, off, data),
                Op::Sync { file } => Step::Sync(self.file(file)?),
                Op::SyncDir => Step::SyncDir,
            });
        }
        let tx = self.jobs.as_ref().ok_or_else(|| io::Error::other("I/O thread gone"))?;
        tx.send(Job {
            token: batch.token,
            steps,
        })
        .map_err(|_| io::Error::other("I/O thread gone"))?;
        self.in_flight += 1;
        Ok(())
    }

    fn poll(&mut self) -> Option<Done> {
        let d = self.done.try_recv().ok()?;
        self.in_flight = self.in_flight.saturating_sub(1);
        Some(d)
    }

    fn wait(&mut self) -> Option<Done> {
        if self.in_flight == 0 {
            return None;
        }
        match self.done.recv() {
            Ok(d) => {
                self.in_flight -= 1;
                Some(d)
            }
            Err(_) => {
                self.in_flight = 0;
                Some(Done {
                    token: 0,
                    result: Err(io::Error::other("I/O thread gone")),
                })
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn wake_on_completion(&mut self, wake: &super::Wake) -> bool {
        let _ = self.wake.set(wake.clone());
        true
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
