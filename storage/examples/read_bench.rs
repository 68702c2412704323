//! Read paths of the io_uring backend, measured on the consumers' access patterns: a file
//! store (default configuration) gets `--msgs` messages of `--payload` bytes over 1000
//! subjects and is stopped; then, for each read path (`direct`: O_DIRECT reads through the
//! store's ring with its chunk cache; `buffered`: `pread` on a buffered descriptor,
//! the page cache), the store is reopened with the files' pages evicted from the page cache
//! (`posix_fadvise(DONTNEED)`; the blocks were written with O_DIRECT, so nothing of them
//! is cached to begin with either) and read:
//! - `seq cold`: every message in order with `load_next_msg` (a consumer catching up);
//! - `seq warm`: the same again;
//! - `random`: `--random` messages by sequence at random;
//! - `last`: the last message of each subject.
//!
//! cargo run --release -p storage --example read_bench -- [--msgs N] [--payload B] [--random N] [--dir /tmp]

use rand::{Rng, SeedableRng};
use std::error::Error;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;
use storage::{FileStore, FileStoreConfig, Filter, Store, StoreConfig};

type Res<T> = std::result::Result<T, Box<dyn Error>>;

fn evict(dir: &Path) -> Res<()> {
    for e in std::fs::read_dir(dir)? {
        let f = std::fs::File::open(e?.path())?;
        // SAFETY: a valid descriptor; the call only drops cached pages.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    Ok(())
}

fn open(dir: &Path, reads: &str) -> Res<FileStore> {
    std::env::set_var("RNATS_STORAGE_READS", reads);
    Ok(FileStore::open(FileStoreConfig::new(dir), StoreConfig::new("R"))?)
}

fn main() -> Res<()> {
    let mut msgs = 1_000_000u64;
    let mut payload = 128usize;
    let mut random = 20_000u64;
    let mut dir = PathBuf::from("/tmp");
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--msgs" => msgs = v.parse()?,
            "--payload" => payload = v.parse()?,
            "--random" => random = v.parse()?,
            "--dir" => dir = PathBuf::from(v),
            _ => return Err(format!("unknown argument {k}").into()),
        }
    }
    let dir = dir.join(format!("rnats-read-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let mut s = open(&dir, "direct")?;
        let body = vec![0x5au8; payload];
        for i in 0..msgs {
            s.store_msg(&format!("r.{}", i % 1000), b"", &body, 0)?;
            if i % 8192 == 8191 {
                s.submit()?;
                s.poll_completions()?;
            }
        }
        s.stop()?;
    }
    let all = Filter::all();
    for reads in ["direct", "buffered", "direct", "buffered", "direct", "buffered"] {
        evict(&dir)?;
        let mut s = open(&dir, reads)?;
        let backend = s.io_backend();
        let mut line = format!("{backend} reads={reads}:");
        for pass in ["seq cold", "seq warm"] {
            let t = Instant::now();
            let mut seq = 1;
            let mut n = 0u64;
            while let Ok(m) = s.load_next_msg(&all, seq) {
                seq = m.seq + 1;
                n += 1;
            }
            assert_eq!(n, msgs);
            line += &format!(
                " {pass} {:.2} us/msg;",
                t.elapsed().as_nanos() as f64 / n as f64 / 1000.0
            );
        }
        s.stop()?;
        drop(s);
        evict(&dir)?;
        let mut s = open(&dir, reads)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let t = Instant::now();
        for _ in 0..random {
            s.load_msg(rng.gen_range(1..=msgs))?;
        }
        line += &format!(
            " random {:.2} us/msg;",
            t.elapsed().as_nanos() as f64 / random as f64 / 1000.0
        );
        let t = Instant::now();
        for i in 0..1000 {
            s.load_last_msg(&format!("r.{i}"))?;
        }
        line += &format!(
            " last-by-subject {:.2} us/msg",
            t.elapsed().as_nanos() as f64 / 1000.0 / 1000.0
        );
        println!("{line}");
        s.stop()?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
