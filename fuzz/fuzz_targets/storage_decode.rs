//! Fuzz target `storage_decode`: the file store's block and record decoder
//! (`storage::filestore::{block_header, scan_block, format}`).
//!
//! Checks, beyond "never panics" and "never allocates by a claimed length":
//! (a) every record the scanner hands out validates on its own at its offset, lies inside
//!     the input and is followed by the next one (offsets only grow);
//! (b) the scanned end never passes the input or the limit.
//!
//! Input layout: [0] flags (1: HighwayHash checksums, 2: use a limit), [1..3] limit (u16),
//! the rest is the block's data after a valid header (file id 7), or, when the input
//! starts with the block magic, the whole block as it is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::filestore::format::{self, BlockHeader, Checksum, DATA_START, MAGIC};
use storage::filestore::{block_header, scan_block};

fuzz_target!(|data: &[u8]| {
    let flags = data.first().copied().unwrap_or(0);
    let limit = u16::from_le_bytes([data.get(1).copied().unwrap_or(0), data.get(2).copied().unwrap_or(0)]);
    let rest = data.get(3..).unwrap_or(&[]);
    let block: Vec<u8> = if rest.starts_with(MAGIC) {
        rest.to_vec()
    } else {
        let hdr = BlockHeader {
            flags: if flags & 1 != 0 { format::BF_HIGHWAY } else { 0 },
            ordinal: 1,
            file_id: 7,
            prev_len: 0,
            sealed_len: 0,
            created: 0,
        };
        let mut b = hdr.encode().to_vec();
        b.extend_from_slice(&hdr.encode());
        b.extend_from_slice(rest);
        b
    };
    let Some(hdr) = block_header(&block) else { return };
    let limit = (flags & 2 != 0).then_some(DATA_START as u64 + u64::from(limit));
    let cs: Checksum = hdr.checksum();
    let mut last_end = DATA_START as u64;
    let scan = scan_block(&block, &hdr, limit, |off, len, r| {
        assert!(off >= last_end, "records overlap");
        let end = off + u64::from(len);
        assert!(end <= block.len() as u64 + 7, "record past the input");
        let again = format::decode_record(&block[off as usize..], cs, hdr.file_id).expect("handed-out record validates");
        assert_eq!(again.0.seq, r.seq);
        last_end = end;
        // Bounded decompression whatever the body claims.
        let _ = format::s2_decode(r.body, r.plain_len as usize);
    });
    assert!(scan.end <= (block.len() as u64).max(DATA_START as u64) + 7);
    if let Some(l) = limit {
        assert!(scan.end <= l.max(DATA_START as u64) + 7);
    }
    let _ = format::decode_record(rest, cs, 7);
    let _ = format::s2_decode(rest, 1 << 16);
});
