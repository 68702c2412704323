//! Fuzz target `trace`: message tracing's header rules (`rnats::core::trace`) on arbitrary
//! header blocks, and a shard publishing them as a traced message's headers.
//!
//! Checked, beyond "never panics": a block that asks for a trace keeps at least one
//! header; every `slice_header` value lies inside the block and holds no line break; the
//! output of the subscriber of `>` (which also sees the trace events) stays bounded.
//!
//! Input: the header block (used as is, its length as the header size).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::core::accounts::links::Rewrite;
use rnats::core::config::CoreConfig;
use rnats::core::shard::{NoMesh, ShardCore};
use rnats::core::stats::Shared;
use rnats::core::trace;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

fuzz_target!(|hdr: &[u8]| {
    let _ = trace::may_trace(hdr);
    if let Some(f) = trace::scan(hdr) {
        assert!(!f.headers.is_empty(), "a trace asked for by no header");
        let _ = (f.trace_only(), f.first(trace::TRACE_DEST));
    }
    for key in [trace::TRACE_DEST, trace::ACCEPT_ENCODING, ""] {
        if let Some(v) = trace::slice_header(hdr, key) {
            assert!(v.len() <= hdr.len());
            assert!(!v.windows(2).any(|w| w == b"\r\n"), "a value spans lines");
        }
    }
    let _ = trace::sampled_traceparent(hdr);
    let _ = trace::shadow::shadow_subject(hdr, &Rewrite::Prefix(b"p.".to_vec().into()), hdr);

    let shared = Arc::new(Shared::new(1));
    shared.accounts.install(|b| {
        let g = b.plain("$G");
        b.add(g);
        let s = b.plain("$SYS");
        let id = s.id;
        b.add(s);
        b.set_system(Some(id));
    });
    let now = Instant::now();
    let mut core = ShardCore::new(0, 1, Arc::new(CoreConfig::default()), shared, Box::new(NoMesh));
    let peer: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 40000));
    let k = core.accept(peer, now);
    let mut input = br#"CONNECT {"verbose":false,"pedantic":false,"headers":true}"#.to_vec();
    input.extend_from_slice(b"\r\nSUB > 1\r\n");
    input.extend_from_slice(format!("HPUB foo {} {}\r\n", hdr.len(), hdr.len() + 1).as_bytes());
    input.extend_from_slice(hdr);
    input.extend_from_slice(b"x\r\nPING\r\n");
    core.input(k, &input, now);
    assert!(core.pending_len(k) < 64 * 1024 + 4 * hdr.len(), "output bounded");
});
