//! io_uring + O_DIRECT backend (Linux, feature `uring`).

use super::{Batch, Done, FileNo, Io};
use std::io;
use std::path::Path;

/// The io_uring backend.
pub struct Uring;

impl Uring {
    pub fn open(_dir: &Path) -> io::Result<Uring> {
        Err(io::Error::other("not yet"))
    }
}

impl Io for Uring {
    fn alignment(&self) -> usize {
        4096
    }
    fn name(&self) -> &'static str {
        "uring+direct"
    }
    fn open(&mut self, _: &str, _: bool) -> io::Result<(FileNo, u64)> {
        Err(io::Error::other("not yet"))
    }
    fn close(&mut self, _: FileNo) {}
    fn remove(&mut self, _: &str) -> io::Result<()> {
        Err(io::Error::other("not yet"))
    }
    fn rename(&mut self, _: &str, _: &str) -> io::Result<()> {
        Err(io::Error::other("not yet"))
    }
    fn read_at(&mut self, _: FileNo, _: u64, _: usize) -> io::Result<Vec<u8>> {
        Err(io::Error::other("not yet"))
    }
    fn start(&mut self, _: Batch) -> io::Result<()> {
        Err(io::Error::other("not yet"))
    }
    fn poll(&mut self) -> Option<Done> {
        None
    }
    fn wait(&mut self) -> Option<Done> {
        None
    }
    fn in_flight(&self) -> usize {
        0
    }
}
