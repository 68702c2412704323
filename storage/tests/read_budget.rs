//! The process-wide budget of the io_uring read caches: many stores reading at once hold at
//! most the budget (plus one chunk each), read correctly past it, and give their chunks
//! back when they close. Its own test binary: the count is process-wide.

#[cfg(all(target_os = "linux", feature = "uring"))]
mod common;

#[cfg(all(target_os = "linux", feature = "uring"))]
#[test]
fn many_stores_share_one_read_cache_budget() {
    use common::TempDir;
    use storage::io::uring::{cached_chunks, set_chunk_budget, CACHE_CHUNKS};
    use storage::{FileStore, FileStoreConfig, Filter, Store, StoreConfig};
    const BUDGET: usize = 24;
    const STORES: usize = 6;
    set_chunk_budget(BUDGET);
    let dir = TempDir::new(None, "read-budget");
    let payload = |seq: u64| {
        let mut v = format!("{seq}|").into_bytes();
        v.resize(900, b'a' + (seq % 26) as u8);
        v
    };
    let mut stores = Vec::new();
    for k in 0..STORES {
        let mut cfg = FileStoreConfig::new(dir.path().join(format!("s{k}")));
        cfg.block_size = 8 << 20;
        let mut s = FileStore::open(cfg, StoreConfig::new(&format!("S{k}"))).expect("open");
        if s.io_backend() != "uring+direct" {
            eprintln!("skipped: backend {} here", s.io_backend());
            return;
        }
        // About 1.4 MiB each: more than one store's whole cache.
        for seq in 1..=1600u64 {
            s.store_msg("r", b"", &payload(seq), 0).expect("store");
        }
        s.sync().expect("sync");
        stores.push(s);
    }
    assert_eq!(cached_chunks(), 0, "nothing read yet");
    // Every store reads everything in order, several times, interleaved.
    for _round in 0..2 {
        for seq in (1..=1600u64).step_by(7) {
            for s in stores.iter_mut() {
                let m = s.load_next_msg(&Filter::all(), seq).expect("load");
                assert_eq!(m.seq, seq);
                assert_eq!(&m.payload[..], &payload(seq)[..]);
            }
            assert!(
                cached_chunks() <= BUDGET + STORES,
                "{} chunks cached, budget {BUDGET}",
                cached_chunks()
            );
        }
    }
    // The premise: without the budget the stores would hold far more.
    const { assert!(STORES * CACHE_CHUNKS > 2 * (BUDGET + STORES)) };
    assert!(cached_chunks() >= BUDGET, "the caches were used: {}", cached_chunks());
    drop(stores);
    assert_eq!(cached_chunks(), 0, "closed stores give their chunks back");
}
