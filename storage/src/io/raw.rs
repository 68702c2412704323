//! Positional file access as the threaded backend uses it, behind a trait so a fault layer
//! can sit under the backend: [`RawFile`] (pwrite, pread, fdatasync) and [`Opener`].

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file that can be written and read at offsets from any thread.
pub trait RawFile: Send + Sync {
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize>;
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    fn sync_data(&self) -> io::Result<()>;
    fn file_len(&self) -> io::Result<u64>;

    /// Write all of `buf` at `off`, going on after short writes.
    fn write_all_at(&self, mut buf: &[u8], mut off: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, off) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) => {
                    buf = buf.get(n..).unwrap_or(&[]);
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Opens files and syncs directories.
pub trait Opener: Send + Sync {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn RawFile>>;
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Plain std files.
pub struct StdOpener;

struct StdFile(File);

impl RawFile for StdFile {
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        pwrite(&self.0, buf, off)
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        pread(&self.0, buf, off)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn file_len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Opener for StdOpener {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn RawFile>> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if create {
            o.create_new(true);
        }
        Ok(Arc::new(StdFile(o.open(path)?)))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
}

/// fsync a directory (durable creates, renames and removes). A no-op off Unix.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(unix)]
fn pwrite(f: &File, buf: &[u8], off: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(f, buf, off)
}

#[cfg(unix)]
fn pread(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, off)
}

#[cfg(windows)]
fn pwrite(f: &File, buf: &[u8], off: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(f, buf, off)
}

#[cfg(windows)]
fn pread(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(f, buf, off)
}

/// Read up to `len` bytes at `off` (fewer only at the end of the file).
pub fn read_full(f: &dyn RawFile, off: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let dst = buf.get_mut(got..).unwrap_or(&mut []);
        match f.read_at(dst, off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}
