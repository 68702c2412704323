//! Fuzz target `storage_ops`: random operation sequences on the file store (tmpfs or the
//! temp dir, buffered I/O, small blocks, restarts included) checked step by step against
//! the memory store as the model: same results, same state (bytes aside: the two kinds
//! account sizes by different formulas), same messages.
//!
//! Input: a sequence of 3-byte ops [op, a, b].
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use storage::filestore::{Checksum, Compression};
use storage::io::IoChoice;
use storage::{FileStore, FileStoreConfig, ManualClock, MemStore, Store, StoreConfig};

const T0: i64 = 1_700_000_000_000_000_000;

fn base() -> std::path::PathBuf {
    let shm = std::path::PathBuf::from("/dev/shm");
    if shm.is_dir() { shm } else { std::env::temp_dir() }
}

fuzz_target!(|data: &[u8]| {
    let dir = base().join(format!("rnats-fuzz-storage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(T0);
    let mut cfg = StoreConfig::new("F");
    cfg.allow_msg_ttl = true;
    cfg.max_age = std::time::Duration::from_secs(20);
    let mut fcfg = FileStoreConfig::new(&dir);
    fcfg.block_size = 4096;
    fcfg.io = IoChoice::Buffered;
    if data.first().is_some_and(|b| b & 1 != 0) {
        fcfg.compression = Compression::S2;
        fcfg.checksum = Checksum::Highway;
    }
    let open = |cfg: &StoreConfig| FileStore::open_with_clock(fcfg.clone(), cfg.clone(), Arc::new(clock.clone())).expect("open");
    let mut fs = open(&cfg);
    let mut ms = MemStore::with_clock(cfg.clone(), Arc::new(clock.clone()));
    for op in data.get(1..).unwrap_or(&[]).chunks(3).take(200) {
        let (o, a, b) = (op[0] % 12, op.get(1).copied().unwrap_or(0), op.get(2).copied().unwrap_or(0));
        let st = ms.fast_state();
        let seq = st.first_seq.saturating_sub(1) + u64::from(a) % (st.last_seq.saturating_sub(st.first_seq) + 3);
        match o {
            0..=3 => {
                let subj = format!("f.{}", a % 4);
                let payload = vec![b; usize::from(b) * 3];
                let ttl = i64::from(a % 4) - 1;
                assert_eq!(
                    fs.store_msg(&subj, b"", &payload, ttl).map_err(|e| e.to_string()),
                    ms.store_msg(&subj, b"", &payload, ttl).map_err(|e| e.to_string())
                );
            }
            4 => assert_eq!(fs.remove_msg(seq).ok(), ms.remove_msg(seq).ok()),
            5 => assert_eq!(fs.erase_msg(seq).ok(), ms.erase_msg(seq).ok()),
            6 => assert_eq!(fs.purge_ex(&format!("f.{}", b % 5), 0, u64::from(b % 3)).ok(), ms.purge_ex(&format!("f.{}", b % 5), 0, u64::from(b % 3)).ok()),
            7 => assert_eq!(fs.compact(seq).ok(), ms.compact(seq).ok()),
            8 => assert_eq!(fs.truncate(seq).is_ok(), ms.truncate(seq).is_ok()),
            9 => {
                clock.advance(i64::from(b % 30) * 1_000_000_000);
                assert_eq!(fs.expire().ok(), ms.expire().ok());
            }
            10 => assert_eq!(fs.skip_msgs(0, u64::from(b % 4)).is_ok(), ms.skip_msgs(0, u64::from(b % 4)).is_ok()),
            _ => {
                fs.stop().expect("stop");
                drop(fs);
                fs = open(&cfg);
            }
        }
        let (mut x, mut y) = (fs.state(), ms.state());
        x.bytes = 0;
        y.bytes = 0;
        assert_eq!(x, y);
        assert_eq!(fs.corruptions(), 0);
    }
    let want: Vec<_> = ms.messages().collect();
    assert_eq!(fs.messages(), want);
    drop(fs);
    let _ = std::fs::remove_dir_all(&dir);
});
