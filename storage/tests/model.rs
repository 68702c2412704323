//! The model test: random sequences of store, remove, erase, purge, purge by subject,
//! compact, truncate, skip, expire, limit changes, block compaction, loop turns (which
//! drive automatic compaction one bounded step at a time), clean restarts and crashes (the
//! store's files copied as they are, often in the middle of a block rewrite, and reopened
//! from the copy) on a file store (small blocks, so blocks rotate, die and get rewritten
//! often), checked after every step against the memory
//! store as the model (same engine, so every answer must agree; only the accounted bytes
//! differ, by the reference's size formulas).

mod common;

use common::{TempDir, T0};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;
use storage::filestore::{Checksum, Compression};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, Filter, ManualClock, MemStore, Store, StoreConfig, StreamState};

#[derive(Clone, Debug)]
enum Op {
    Store {
        subj: u8,
        len: u16,
        ttl: i8,
    },
    Remove(u8),
    Erase(u8),
    Purge,
    PurgeEx {
        subj: u8,
        seq: u8,
        keep: u8,
    },
    Compact(u8),
    Truncate(u8),
    Skip(u8),
    Advance(u8),
    Limits {
        max_msgs: i8,
        per_subject: i8,
    },
    Restart,
    CompactBlocks,
    /// Turns of the owner's loop: submit, poll_completions (one compaction step each), and
    /// a wait for the disk.
    Tick(u8),
    /// Everything synced, then the files copied as they are (a kill at this point) and
    /// the store reopened from the copy.
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..6, 0u16..2000, -1i8..4).prop_map(|(subj, len, ttl)| Op::Store { subj, len, ttl }),
        2 => any::<u8>().prop_map(Op::Remove),
        1 => any::<u8>().prop_map(Op::Erase),
        1 => Just(Op::Purge),
        1 => (0u8..7, any::<u8>(), 0u8..4).prop_map(|(subj, seq, keep)| Op::PurgeEx { subj, seq, keep }),
        1 => any::<u8>().prop_map(Op::Compact),
        1 => any::<u8>().prop_map(Op::Truncate),
        1 => (1u8..5).prop_map(Op::Skip),
        1 => (0u8..20).prop_map(Op::Advance),
        1 => (-1i8..30, -1i8..5).prop_map(|(max_msgs, per_subject)| Op::Limits { max_msgs, per_subject }),
        1 => Just(Op::Restart),
        1 => Just(Op::CompactBlocks),
        3 => (1u8..8).prop_map(Op::Tick),
        2 => Just(Op::Crash),
    ]
}

fn subject(i: u8) -> String {
    match i {
        0..=5 => format!("m.{}", i % 3) + if i > 2 { ".x" } else { "" },
        _ => "m.>".into(),
    }
}

fn no_bytes(mut s: StreamState) -> StreamState {
    s.bytes = 0;
    s
}

/// Pick a sequence near the stream's range from a random byte.
fn pick(st: &StreamState, b: u8) -> u64 {
    let span = st.last_seq.saturating_sub(st.first_seq) + 3;
    st.first_seq.saturating_sub(1) + u64::from(b) % span
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).expect("dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

fn run(ops: Vec<Op>, variant: u8) -> Result<u64, TestCaseError> {
    let mut dir = TempDir::new(None, "model");
    let clock = ManualClock::new(T0);
    let mut cfg = StoreConfig::new("M");
    cfg.allow_msg_ttl = true;
    cfg.max_age = Duration::from_secs(30);
    let mut fcfg = FileStoreConfig::new(dir.path());
    fcfg.block_size = 4096;
    fcfg.io = if variant == 2 {
        IoChoice::Auto
    } else {
        IoChoice::Buffered
    };
    if variant == 1 {
        fcfg.compression = Compression::S2;
        fcfg.checksum = Checksum::Highway;
    }
    let open = |cfg: &StoreConfig, dir: &std::path::Path| {
        let mut f = fcfg.clone();
        f.dir = dir.to_path_buf();
        FileStore::open_with_clock(f, cfg.clone(), Arc::new(clock.clone())).expect("open")
    };
    let mut fs = open(&cfg, dir.path());
    let mut compactions = 0;
    let mut ms = MemStore::with_clock(cfg.clone(), Arc::new(clock.clone()));
    let mut payload_no = 0u32;
    for (step, op) in ops.into_iter().enumerate() {
        let st = ms.fast_state();
        let ctx = format!("step {step}: {op:?}");
        match op {
            Op::Store { subj, len, ttl } => {
                payload_no += 1;
                let mut p = payload_no.to_le_bytes().to_vec();
                p.resize(usize::from(len).max(4), (payload_no % 251) as u8);
                let s = subject(subj % 6);
                let a = fs.store_msg(&s, b"", &p, i64::from(ttl)).map_err(|e| e.to_string());
                let b = ms.store_msg(&s, b"", &p, i64::from(ttl)).map_err(|e| e.to_string());
                prop_assert_eq!(a, b, "{}", ctx);
            }
            Op::Remove(b) => {
                let s = pick(&st, b);
                prop_assert_eq!(fs.remove_msg(s).ok(), ms.remove_msg(s).ok(), "{}", ctx);
            }
            Op::Erase(b) => {
                let s = pick(&st, b);
                prop_assert_eq!(fs.erase_msg(s).ok(), ms.erase_msg(s).ok(), "{}", ctx);
            }
            Op::Purge => prop_assert_eq!(fs.purge().ok(), ms.purge().ok(), "{}", ctx),
            Op::PurgeEx { subj, seq, keep } => {
                let s = subject(subj);
                let q = if seq % 3 == 0 { 0 } else { pick(&st, seq) };
                let k = u64::from(keep);
                prop_assert_eq!(fs.purge_ex(&s, q, k).ok(), ms.purge_ex(&s, q, k).ok(), "{}", ctx);
            }
            Op::Compact(b) => {
                let s = pick(&st, b);
                prop_assert_eq!(fs.compact(s).ok(), ms.compact(s).ok(), "{}", ctx);
            }
            Op::Truncate(b) => {
                let s = pick(&st, b);
                prop_assert_eq!(fs.truncate(s).is_ok(), ms.truncate(s).is_ok(), "{}", ctx);
            }
            Op::Skip(n) => {
                prop_assert_eq!(
                    fs.skip_msgs(0, u64::from(n)).is_ok(),
                    ms.skip_msgs(0, u64::from(n)).is_ok(),
                    "{}",
                    ctx
                );
            }
            Op::Advance(s) => {
                clock.advance(i64::from(s) * 1_000_000_000);
                prop_assert_eq!(fs.expire().ok(), ms.expire().ok(), "{}", ctx);
            }
            Op::Limits { max_msgs, per_subject } => {
                cfg.max_msgs = i64::from(max_msgs);
                cfg.max_msgs_per_subject = i64::from(per_subject);
                prop_assert_eq!(
                    fs.update_config(cfg.clone()).is_ok(),
                    ms.update_config(cfg.clone()).is_ok(),
                    "{}",
                    ctx
                );
            }
            Op::CompactBlocks => {
                fs.compact_blocks().expect("compact blocks");
            }
            Op::Restart => {
                compactions += fs.stats().compactions;
                fs.stop().expect("stop");
                drop(fs);
                fs = open(&cfg, dir.path());
            }
            Op::Tick(n) => {
                for _ in 0..n {
                    fs.submit().expect("submit");
                    fs.poll_completions().expect("poll");
                    fs.sync().expect("sync");
                }
            }
            Op::Crash => {
                compactions += fs.stats().compactions;
                fs.sync().expect("sync");
                let copy = TempDir::new(None, "model-crash");
                copy_dir(dir.path(), copy.path());
                drop(fs);
                dir = copy;
                fs = open(&cfg, dir.path());
            }
        }
        prop_assert_eq!(no_bytes(fs.state()), no_bytes(ms.state()), "{}", ctx);
        prop_assert_eq!(fs.subjects_state(">"), ms.subjects_state(">"), "{}", ctx);
        // next_expiry is a lower bound in both (removals leave TTL entries behind until
        // they fire, and a restart drops them), so only its presence for live TTLs is
        // compared through expire() above.
        let f = Filter::new("m.*.x");
        let start = pick(&ms.fast_state(), step as u8);
        prop_assert_eq!(
            fs.load_next_msg(&f, start).ok(),
            ms.load_next_msg(&f, start).ok(),
            "{}",
            ctx
        );
        prop_assert_eq!(fs.corruptions(), 0);
    }
    // Every message reads back the same.
    let want: Vec<_> = ms.messages().collect();
    prop_assert_eq!(fs.messages(), want);
    compactions += fs.stats().compactions;
    Ok(compactions)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("RNATS_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn file_store_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, 0)?;
    }

    #[test]
    fn file_store_s2_highway_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops, 1)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("RNATS_MODEL_CASES").ok().and_then(|v| v.parse().ok()).map_or(12, |n: u32| n / 4),
        ..ProptestConfig::default()
    })]

    /// On io_uring + O_DIRECT where available (every batch is an fdatasync on the disk:
    /// fewer cases).
    #[test]
    fn file_store_direct_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops, 2)?;
    }
}

/// The op sequences above do rewrite blocks (automatically or asked): a guard against a
/// model test that stops exercising compaction.
#[test]
fn model_sequences_rewrite_blocks() {
    let mut ops = Vec::new();
    for i in 0..60u8 {
        ops.push(Op::Store {
            subj: i % 6,
            len: 700,
            ttl: 0,
        });
    }
    for i in 0..60u8 {
        if i % 5 != 0 {
            ops.push(Op::Remove(i));
        }
        if i % 17 == 0 {
            ops.push(Op::Tick(3));
        }
        if i == 31 {
            ops.push(Op::Crash);
        }
    }
    ops.push(Op::Tick(7));
    ops.push(Op::Crash);
    let n = run(ops, 0).expect("model");
    assert!(n > 3, "{n} blocks rewritten");
}

/// A rewrite whose block died (and was deleted) while its directory fsync was in flight
/// must not close its new file's number again (it was reused by the next tail block).
#[test]
fn rewritten_block_deleted_before_the_rewrite_ends() {
    use Op::*;
    let ops = vec![
        Limits {
            max_msgs: 2,
            per_subject: 0,
        },
        Store {
            subj: 0,
            len: 0,
            ttl: 0,
        },
        Store {
            subj: 0,
            len: 0,
            ttl: 0,
        },
        Remove(33),
        Restart,
        Tick(2),
        Store {
            subj: 0,
            len: 34,
            ttl: 0,
        },
        Store {
            subj: 0,
            len: 418,
            ttl: 0,
        },
        Store {
            subj: 0,
            len: 1682,
            ttl: 0,
        },
        Store {
            subj: 3,
            len: 952,
            ttl: 0,
        },
        Store {
            subj: 0,
            len: 298,
            ttl: 0,
        },
        Tick(1),
    ];
    run(ops, 0).expect("run");
}
