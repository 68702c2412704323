//! The reference's message block decoding (storage::reference): the input is a block file
//! as it lies on disk (plain records, or `cmp`-framed s2), replayed into a MemStore; the
//! same bytes are also decoded as `index.db` and, XORed with a fixed key's block cipher,
//! as an encrypted block. Invariants beyond "no panic, no huge allocation": every record
//! that decodes re-encodes to exactly its bytes, every message the import stores is one
//! such record, and the store's state is consistent with what it holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::crypto::{Cipher, EncryptionConfig, StreamKeys};
use storage::reference::import::Importer;
use storage::reference::record::{self, RefRecord};
use storage::reference::{block, indexdb};
use storage::{MemStore, Store, StoreConfig};

const SEED: &[u8] = b"S-1";

/// Every record that decodes at the start of `buf`, in order, each checked to re-encode to
/// exactly its bytes.
fn check_records(buf: &[u8]) {
    let mut at = 0;
    while let Some(rest) = buf.get(at..) {
        let Ok((rec, n)) = record::decode(rest, SEED) else {
            break;
        };
        if let RefRecord::Msg {
            seq,
            ts,
            subject,
            headers,
            payload,
        } = rec
        {
            let mut again = Vec::new();
            record::encode(&mut again, SEED, seq, ts, subject, headers, payload);
            assert_eq!(&again[..], &rest[..n], "a decoded record re-encodes to its bytes");
        }
        at += n;
    }
}

/// Is there a record anywhere in `buf` that is this message?
fn is_record_of(buf: &[u8], m: &storage::StoredMsg) -> bool {
    (0..buf.len()).any(|at| match record::decode(&buf[at..], SEED) {
        Ok((
            RefRecord::Msg {
                seq,
                ts,
                subject,
                headers,
                payload,
            },
            _,
        )) => {
            seq == m.seq
                && ts == m.ts
                && String::from_utf8_lossy(subject) == m.subject
                && headers == &m.headers[..]
                && payload == &m.payload[..]
        }
        _ => false,
    })
}

fn replay(plain: &[u8]) {
    let mut store = MemStore::new(StoreConfig::new("S"));
    let mut imp = Importer::new("S", &mut store);
    if imp.block(1, plain, &mut |_| {}).is_err() {
        return;
    }
    let _ = imp.finish(None, &mut |_| {});
    check_records(plain);
    let held: Vec<_> = store.messages().collect();
    assert_eq!(store.fast_state().msgs as usize, held.len());
    for m in &held {
        assert!(
            is_record_of(plain, m),
            "stored message {} is a record of the block",
            m.seq
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(plain) = block::plain_block(1, data.to_vec(), None) {
        replay(&plain);
    }
    let _ = indexdb::decode(data);
    let _ = indexdb::verify("S", data).and_then(|b| indexdb::decode(&b));
    // As an encrypted block: the same bytes are ciphertext under a fixed seed.
    let keys = StreamKeys::new(&EncryptionConfig::new("k", Cipher::ChaCha), "$G", "S");
    let (sk, file) = keys.new_key_file("S:1");
    let _ = keys.open_key_file("S:1", data);
    let _ = keys.open_key_file("S:1", &file);
    if let Ok(plain) = block::plain_block(1, data.to_vec(), Some(&sk)) {
        replay(&plain);
    }
});
