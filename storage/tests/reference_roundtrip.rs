//! Property: any store content written as a reference-format snapshot restores to the same
//! messages and sequence range (model: MemStore driven by random stores, removes, purges,
//! compacts and skips).

use proptest::prelude::*;
use storage::reference::snapshot::{restore, write_from_store};
use storage::{MemStore, SnapshotMeta, Store, StoreConfig};

#[derive(Clone, Debug)]
enum Op {
    Store { subj: u8, hdr: bool, len: u16 },
    Remove(u16),
    PurgeSubject(u8),
    Compact(u16),
    Skip(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..5, any::<bool>(), 0u16..3000).prop_map(|(subj, hdr, len)| Op::Store { subj, hdr, len }),
        2 => (0u16..400).prop_map(Op::Remove),
        1 => (0u8..5).prop_map(Op::PurgeSubject),
        1 => (0u16..400).prop_map(Op::Compact),
        1 => (1u8..20).prop_map(Op::Skip),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn snapshot_restores_what_was_stored(ops in proptest::collection::vec(op(), 0..300)) {
        let mut a = MemStore::new(StoreConfig::new("P"));
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Store { subj, hdr, len } => {
                    let h = if hdr { format!("NATS/1.0\r\nI: {i}\r\n\r\n").into_bytes() } else { Vec::new() };
                    let payload: Vec<u8> = (0..len).map(|j| (j as usize ^ i) as u8).collect();
                    a.store_msg(&format!("p.{subj}"), &h, &payload, 0).unwrap();
                }
                Op::Remove(s) => { a.remove_msg(u64::from(s)).unwrap(); }
                Op::PurgeSubject(s) => { a.purge_ex(&format!("p.{s}"), 0, 0).unwrap(); }
                Op::Compact(s) => { a.compact(u64::from(s)).unwrap(); }
                Op::Skip(n) => { let next = a.fast_state().last_seq + 1; a.skip_msgs(next, u64::from(n)).unwrap(); }
            }
        }
        let mut snap = Vec::new();
        write_from_store(&mut a, &SnapshotMeta::default(), &mut snap).unwrap();
        let mut b = MemStore::new(StoreConfig::new("P"));
        let mut reports = Vec::new();
        let r = restore(&mut &snap[..], &mut b, &mut |l| reports.push(l)).unwrap();
        prop_assert!(reports.is_empty(), "{:?}", reports);
        prop_assert_eq!(r.stats.corrupt, 0);
        prop_assert_eq!(a.messages().collect::<Vec<_>>(), b.messages().collect::<Vec<_>>());
        let (sa, sb) = (a.fast_state(), b.fast_state());
        prop_assert_eq!((sa.msgs, sa.bytes, sa.last_seq), (sb.msgs, sb.bytes, sb.last_seq));
        if sa.msgs > 0 {
            prop_assert_eq!(sa.first_seq, sb.first_seq);
        }
    }
}
