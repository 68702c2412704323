//! Restart time and resident memory of the stores with millions of messages (issue 11):
//! a one-shot measurement, too long for criterion's repeated samples.
//!
//! For each subject count, a file store (default configuration: group commit, 8 MiB blocks)
//! is filled with `--msgs` messages of 16 B over that many distinct subjects and stopped
//! cleanly; then it is opened (a) with its state file, (b) after the state file is deleted
//! (every block scanned), and (c) after a writer process appending to it was killed with
//! SIGKILL (no state file, a possibly torn tail). Memory: the resident set growth
//! (`/proc/self/statm`) per million messages of a memory store filled the same way, of the
//! file store while it is filled, and of the file store after each kind of open.
//!
//! Every measurement runs in a fresh process (this binary re-run with `--phase`), so the
//! resident set of one does not include what the allocator kept from another. One line is
//! printed per figure.
//!
//! cargo run --release -p storage --example restart_bench -- [--msgs N] [--subjects 1000,1000000] [--dir /tmp]

use std::error::Error;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use storage::{FileStore, FileStoreConfig, MemStore, Store, StoreConfig};

type Res<T> = std::result::Result<T, Box<dyn Error>>;

/// Messages stored between two `submit` + `poll_completions` calls (one loop turn).
const BATCH: u64 = 8192;
const PAYLOAD: [u8; 16] = [0x42; 16];
/// Bytes per page in `/proc/self/statm` (4 KiB on x86_64 Linux, this machine).
const PAGE: u64 = 4096;
/// Messages the killed writer must have made durable before it is killed.
const CRASH_EXTRA: u64 = 100_000;

struct Args {
    msgs: u64,
    subjects: Vec<u64>,
    dir: PathBuf,
    phase: Option<String>,
    /// For `open-crash`: the last sequence the killed writer saw durable.
    expect: u64,
}

fn parse_args() -> Res<Args> {
    let mut a = Args {
        msgs: 10_000_000,
        subjects: vec![1_000, 1_000_000],
        dir: PathBuf::from("/tmp"),
        phase: None,
        expect: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--msgs" => a.msgs = v.parse()?,
            "--subjects" => {
                a.subjects = v.split(',').map(str::parse).collect::<std::result::Result<_, _>>()?;
            }
            "--dir" => a.dir = PathBuf::from(v),
            "--phase" => a.phase = Some(v),
            "--expect" => a.expect = v.parse()?,
            _ => return Err(format!("unknown option {k}").into()),
        }
    }
    if a.subjects.contains(&0) {
        return Err("--subjects: counts must be positive".into());
    }
    Ok(a)
}

/// Resident set size of this process in bytes.
fn rss() -> Res<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("short /proc/self/statm")?
        .parse()?;
    Ok(pages * PAGE)
}

fn mib_per_million(before: u64, after: u64, msgs: u64) -> f64 {
    after.saturating_sub(before) as f64 / (1024.0 * 1024.0) / (msgs as f64 / 1e6)
}

fn file_config(dir: &Path) -> FileStoreConfig {
    FileStoreConfig::new(dir)
}

/// Store `n` messages on `subjects` distinct subjects, as a shard's loop does: a burst of
/// stores, then `submit` and a non-blocking `poll_completions`; `sync` at the end.
fn fill(s: &mut dyn Store, n: u64, subjects: u64) -> Res<()> {
    let mut subject = String::with_capacity(32);
    for i in 0..n {
        subject.clear();
        write!(subject, "bench.{}", i % subjects)?;
        s.store_msg(&subject, b"", &PAYLOAD, 0)?;
        if i % BATCH == BATCH - 1 {
            s.submit()?;
            s.poll_completions()?;
        }
    }
    s.sync()?;
    Ok(())
}

/// Fill a fresh file store and stop it cleanly.
fn phase_fill(a: &Args, subjects: u64) -> Res<()> {
    let before = rss()?;
    let t = Instant::now();
    let mut s = FileStore::open(file_config(&a.dir), StoreConfig::new("BENCH"))?;
    fill(&mut s, a.msgs, subjects)?;
    let took = t.elapsed();
    let after = rss()?;
    s.stop()?;
    println!(
        "fill         subjects={subjects:<8} {:>9.2} s   ({:.0} msgs/s, io {})",
        took.as_secs_f64(),
        a.msgs as f64 / took.as_secs_f64(),
        s.io_backend()
    );
    println!(
        "memory       subjects={subjects:<8} {:>9.1} MiB per million msgs  filestore while filling",
        mib_per_million(before, after, a.msgs)
    );
    Ok(())
}

/// Open the store (after deleting the state file for `scan`), time it, stop it cleanly.
fn phase_open(a: &Args, subjects: u64, how: &str) -> Res<()> {
    if how == "scan" {
        std::fs::remove_file(a.dir.join("state.rns"))?;
    }
    let before = rss()?;
    let t = Instant::now();
    let mut s = FileStore::open(file_config(&a.dir), StoreConfig::new("BENCH"))?;
    let took = t.elapsed();
    let after = rss()?;
    let st = s.fast_state();
    let label = match how {
        "state" => "with state file",
        "scan" => "state file deleted (block scan)",
        _ => "after SIGKILL of a writer",
    };
    println!(
        "open         subjects={subjects:<8} {:>9.3} s   {label} ({} msgs, from_state={}, corruptions={})",
        took.as_secs_f64(),
        st.msgs,
        s.opened_from_state(),
        s.corruptions()
    );
    println!(
        "memory       subjects={subjects:<8} {:>9.1} MiB per million msgs  filestore after open, {label}",
        mib_per_million(before, after, st.msgs)
    );
    s.stop()?;
    if how == "crash" {
        if st.last_seq < a.expect {
            return Err(format!("lost durable writes: last seq {} < {}", st.last_seq, a.expect).into());
        }
    } else if st.msgs != a.msgs {
        return Err(format!("reopened with {} msgs, stored {}", st.msgs, a.msgs).into());
    }
    Ok(())
}

/// The writer that gets killed: open, append with group commit, say `ready` once
/// [`CRASH_EXTRA`] more messages are durable, and keep appending until killed.
fn phase_writer(a: &Args, subjects: u64) -> Res<()> {
    let mut s = FileStore::open(file_config(&a.dir), StoreConfig::new("BENCH"))?;
    let start = s.fast_state().last_seq;
    let mut subject = String::with_capacity(32);
    let mut told = false;
    for i in 0u64.. {
        subject.clear();
        write!(subject, "bench.{}", i % subjects)?;
        s.store_msg(&subject, b"", &PAYLOAD, 0)?;
        if i % BATCH == BATCH - 1 {
            s.submit()?;
            let durable = s.poll_completions()?;
            if !told && durable >= start + CRASH_EXTRA {
                println!("ready {durable}");
                told = true;
            }
        }
    }
    Ok(())
}

/// A memory store filled the same way.
fn phase_mem(a: &Args, subjects: u64) -> Res<()> {
    let before = rss()?;
    let mut s = MemStore::new(StoreConfig::new("BENCH"));
    fill(&mut s, a.msgs, subjects)?;
    let after = rss()?;
    println!(
        "memory       subjects={subjects:<8} {:>9.1} MiB per million msgs  memstore (its own count: {:.1})",
        mib_per_million(before, after, a.msgs),
        s.heap_bytes() as f64 / (1024.0 * 1024.0) / (a.msgs as f64 / 1e6)
    );
    Ok(())
}

/// Run this binary for one phase; its output goes to ours.
fn child(a: &Args, dir: &Path, subjects: u64, phase: &str, expect: u64) -> Res<()> {
    let st = Command::new(std::env::current_exe()?)
        .args(["--msgs", &a.msgs.to_string(), "--subjects", &subjects.to_string()])
        .args(["--expect", &expect.to_string()])
        .arg("--dir")
        .arg(dir)
        .args(["--phase", phase])
        .status()?;
    if !st.success() {
        return Err(format!("phase {phase} failed: {st}").into());
    }
    Ok(())
}

/// Start the writer, kill it (SIGKILL) shortly after it reports durable appends.
fn crash(a: &Args, dir: &Path, subjects: u64) -> Res<u64> {
    let mut w = Command::new(std::env::current_exe()?)
        .args(["--msgs", &a.msgs.to_string(), "--subjects", &subjects.to_string()])
        .arg("--dir")
        .arg(dir)
        .args(["--phase", "writer"])
        .stdout(Stdio::piped())
        .spawn()?;
    let out = w.stdout.take().ok_or("no writer stdout")?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let durable = line.strip_prefix("ready ").map(str::trim).unwrap_or("").parse::<u64>();
    // Let it run a little more, so the kill lands among writes in flight.
    std::thread::sleep(Duration::from_millis(20));
    w.kill()?;
    w.wait()?;
    Ok(durable?)
}

/// Removes the store directory however the run ends.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn main() -> Res<()> {
    let a = parse_args()?;
    let subjects = a.subjects.first().copied().unwrap_or(1);
    match a.phase.as_deref() {
        Some("fill") => return phase_fill(&a, subjects),
        Some("open-state") => return phase_open(&a, subjects, "state"),
        Some("open-scan") => return phase_open(&a, subjects, "scan"),
        Some("open-crash") => return phase_open(&a, subjects, "crash"),
        Some("writer") => return phase_writer(&a, subjects),
        Some("mem") => return phase_mem(&a, subjects),
        Some(p) => return Err(format!("unknown phase {p}").into()),
        None => {}
    }
    println!(
        "restart_bench: {} msgs of {} B per case, under {}",
        a.msgs,
        PAYLOAD.len(),
        a.dir.display()
    );
    for &n in &a.subjects {
        let dir = a.dir.join(format!("rnats-restart-bench-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _cleanup = Cleanup(dir.clone());
        child(&a, &dir, n, "mem", 0)?;
        child(&a, &dir, n, "fill", 0)?;
        child(&a, &dir, n, "open-state", 0)?;
        child(&a, &dir, n, "open-scan", 0)?;
        let durable = crash(&a, &dir, n)?;
        println!("crash        subjects={n:<8} writer killed with SIGKILL after seq {durable} was durable");
        child(&a, &dir, n, "open-crash", durable)?;
    }
    Ok(())
}
