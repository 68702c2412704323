//! Stream snapshot restore (storage::reference::snapshot::restore): the input is a
//! snapshot stream (s2-framed tar) restored into a MemStore. Invariants beyond "no panic,
//! no huge allocation": a restore that succeeds leaves a consistent store, and snapshotting
//! that store and restoring the result gives the same messages (the writer and the reader
//! agree).
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::reference::snapshot::restore;
use storage::{MemStore, SnapshotMeta, Store, StoreConfig};

fuzz_target!(|data: &[u8]| {
    let mut store = MemStore::new(StoreConfig::new("S"));
    let Ok(r) = restore(&mut &data[..], &mut store, &mut |_| {}) else {
        return;
    };
    let held: Vec<_> = store.messages().collect();
    assert_eq!(store.fast_state().msgs as usize, held.len());
    let meta = SnapshotMeta {
        meta_inf: r.meta_inf,
        extra: r.extra,
    };
    let mut again = Vec::new();
    store.snapshot(&meta, &mut again).expect("a restored store snapshots");
    let mut copy = MemStore::new(StoreConfig::new("S"));
    let r2 = restore(&mut &again[..], &mut copy, &mut |_| {}).expect("our own snapshot restores");
    assert_eq!(r2.stats.corrupt, 0);
    assert_eq!(
        copy.messages().collect::<Vec<_>>(),
        held,
        "round trip keeps every message"
    );
    assert_eq!(copy.fast_state().last_seq, store.fast_state().last_seq);
});
