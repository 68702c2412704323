//! Fuzz target `ws_frame`: the WebSocket frame decoder
//! (`rnats::transport::websocket::frame::Decoder`).
//!
//! Checks, beyond "never panics":
//! (a) split invariance: the protocol bytes, the frames queued for the client (pongs,
//!     close answers) and the final error are the same whether the input arrives in one
//!     read or in the fuzzer-chosen reads (headers may be split anywhere);
//! (b) bounded output: uncompressed data never exceeds the input, an inflated message
//!     never exceeds the payload limit (the decoder refuses it instead), and the reply
//!     frames stay small (control frames carry at most 125 bytes each).
//!
//! Input layout (missing bytes read as 0):
//!   [0] flags: 1 masking required, 2 permessage-deflate negotiated
//!   [1] max payload, index into `MP`   [2] number `k` of read sizes (0..=15)
//!   [3..3+k] read sizes (`b` bytes); the rest is the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::transport::websocket::frame::{Decoder, DecoderConfig, FrameError};

const MP: [usize; 4] = [16, 1024, 65536, 1 << 20];

fn run(cfg: DecoderConfig, reads: &[&[u8]]) -> (Vec<u8>, Vec<u8>, Option<FrameError>, bool) {
    let mut d = Decoder::new(cfg);
    let (mut app, mut reply) = (Vec::new(), Vec::new());
    let mut closed = false;
    for r in reads {
        match d.decode(r, &mut app, &mut reply) {
            Ok(o) => closed |= o.closed,
            Err(e) => return (app, reply, Some(e), closed),
        }
    }
    (app, reply, None, closed)
}

fuzz_target!(|data: &[u8]| {
    let flags = data.first().copied().unwrap_or(0);
    let mp = MP[usize::from(data.get(1).copied().unwrap_or(0)) % MP.len()];
    let k = usize::from(data.get(2).copied().unwrap_or(0) % 16);
    let sizes: Vec<usize> = (0..k).map(|i| usize::from(data.get(3 + i).copied().unwrap_or(0))).collect();
    let stream = data.get(3 + k..).unwrap_or_default();
    let cfg = DecoderConfig {
        require_mask: flags & 1 != 0,
        compression: flags & 2 != 0,
        max_payload: mp,
    };
    let mut reads: Vec<&[u8]> = Vec::new();
    let mut rest = stream;
    for s in sizes {
        let n = s.min(rest.len());
        let (a, b) = rest.split_at(n);
        reads.push(a);
        rest = b;
    }
    reads.push(rest);
    let whole = run(cfg, &[stream]);
    let split = run(cfg, &reads);
    assert_eq!(whole, split, "split changed the outcome");
    let (app, reply, _, _) = whole;
    if !cfg.compression {
        assert!(app.len() <= stream.len());
    } else {
        // Every inflated message is within the limit (plus the chunk the inflater may
        // produce before it notices).
        assert!(app.len() <= stream.len() + mp + 256 * 1024);
    }
    assert!(reply.len() <= stream.len() / 2 * 2 + 2 * 130);
});
