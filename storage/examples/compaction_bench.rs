//! Space and cost of automatic compaction: a file store (default configuration: group
//! commit, 8 MiB blocks) gets `--msgs` messages, then 90% of them are removed in random
//! order, the owner's loop (submit + poll_completions) turning every 1024 removes, as
//! the JetStream layer drives a store. Printed per mode (automatic compaction off / on):
//! the directory's bytes when full, after the removals, after the loop turned until the
//! rewrites ended (and, with it off, after an explicit `compact_blocks`); the time per
//! remove (the loop turns included) and the longest single remove and loop turn.
//!
//! cargo run --release -p storage --example compaction_bench -- [--msgs N] [--dir /tmp] [--payload 100]

use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage::{FileStore, FileStoreConfig, Store, StoreConfig};

type Res<T> = std::result::Result<T, Box<dyn Error>>;

fn dir_size(d: &Path) -> Res<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(d)? {
        n += e?.metadata()?.len();
    }
    Ok(n)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

fn turn(s: &mut FileStore, longest: &mut Duration) -> Res<()> {
    let t = Instant::now();
    s.submit()?;
    s.poll_completions()?;
    *longest = (*longest).max(t.elapsed());
    Ok(())
}

fn run(dir: &Path, msgs: u64, payload: usize, auto: bool) -> Res<()> {
    let _ = std::fs::remove_dir_all(dir);
    let mut f = FileStoreConfig::new(dir);
    f.auto_compact = auto;
    let mut s = FileStore::open(f, StoreConfig::new("B"))?;
    let body = vec![0x42u8; payload];
    for i in 0..msgs {
        s.store_msg(&format!("b.{}", i % 1000), b"", &body, 0)?;
        if i % 8192 == 8191 {
            s.submit()?;
            s.poll_completions()?;
        }
    }
    s.sync()?;
    let full = dir_size(dir)?;
    let mut seqs: Vec<u64> = (1..=msgs).collect();
    seqs.shuffle(&mut rand::rngs::StdRng::seed_from_u64(7));
    seqs.truncate((msgs * 9 / 10) as usize);
    let mut longest_turn = Duration::ZERO;
    let mut longest_remove = Duration::ZERO;
    let t = Instant::now();
    for (k, &seq) in seqs.iter().enumerate() {
        let r = Instant::now();
        s.remove_msg(seq)?;
        longest_remove = longest_remove.max(r.elapsed());
        if k % 1024 == 1023 {
            turn(&mut s, &mut longest_turn)?;
        }
    }
    turn(&mut s, &mut longest_turn)?;
    let removing = t.elapsed();
    s.sync()?;
    let removed = dir_size(dir)?;
    // The loop keeps turning (an idle shard's timer); rewrites go on until none is left.
    let t = Instant::now();
    let mut turns = 0u64;
    let mut idle = 0;
    while idle < 100 {
        turn(&mut s, &mut longest_turn)?;
        turns += 1;
        if s.compaction_running() {
            idle = 0;
        } else {
            idle += 1;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    s.sync()?;
    let settle = t.elapsed();
    let settled = dir_size(dir)?;
    let (dm, dt) = s.compaction_dropped();
    println!(
        "auto_compact={auto} backend={}: {msgs} msgs of {payload} B: full {}; after removing 90%: {} ({:.0} ns/remove incl. loop turns, longest remove {:?}, longest loop turn {:?}); after {turns} more loop turns ({:?}): {} ({} rewrites, {dm} dead messages and {dt} tombstones dropped)",
        s.io_backend(),
        mib(full),
        mib(removed),
        removing.as_nanos() as f64 / seqs.len() as f64,
        longest_remove,
        longest_turn,
        settle,
        mib(settled),
        s.stats().compactions,
    );
    if !auto {
        let t = Instant::now();
        let n = s.compact_blocks()?;
        println!(
            "  explicit compact_blocks: {n} rewrites in {:?} (the caller blocked): {}",
            t.elapsed(),
            mib(dir_size(dir)?)
        );
    }
    s.stop()?;
    drop(s);
    let t = Instant::now();
    let mut s = FileStore::open(FileStoreConfig::new(dir), StoreConfig::new("B"))?;
    println!("  reopen (state file): {:?}, {} msgs", t.elapsed(), s.fast_state().msgs);
    s.stop()?;
    drop(s);
    std::fs::remove_file(dir.join("state.rns"))?;
    let t = Instant::now();
    let s = FileStore::open(FileStoreConfig::new(dir), StoreConfig::new("B"))?;
    println!("  reopen (scan): {:?}, {} msgs", t.elapsed(), s.fast_state().msgs);
    drop(s);
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

fn main() -> Res<()> {
    let mut msgs = 1_000_000u64;
    let mut dir = PathBuf::from("/tmp");
    let mut payload = 100usize;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--msgs" => msgs = v.parse()?,
            "--dir" => dir = PathBuf::from(v),
            "--payload" => payload = v.parse()?,
            _ => return Err(format!("unknown argument {k}").into()),
        }
    }
    let d = dir.join(format!("rnats-compaction-bench-{}", std::process::id()));
    run(&d, msgs, payload, false)?;
    run(&d, msgs, payload, true)?;
    Ok(())
}
