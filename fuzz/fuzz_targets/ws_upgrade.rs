//! Fuzz target `ws_upgrade`: the WebSocket upgrade request parser and checks
//! (`rnats::transport::websocket::upgrade`).
//!
//! Checks, beyond "never panics": the outcome (request, bytes used, or error) is the same
//! whether the request arrives at once or in the fuzzer-chosen pieces; a complete request
//! either upgrades (the answer is a `101` with the accept key) or is refused with one of
//! the reference's statuses; nothing beyond the head limit is kept.
//!
//! Input layout: [0] flags (1 compression offered, 2 same-origin check, 4 an allowed
//! origin list), [1] number `k` of piece sizes (0..=15), [2..2+k] sizes; the rest is the
//! request bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::transport::websocket::upgrade::{self, Origins, RequestParser, UpgradePolicy, MAX_REQUEST_HEAD};

fn feed(pieces: &[&[u8]]) -> Option<Result<(upgrade::Request, usize, usize), upgrade::ParseError>> {
    let mut p = RequestParser::default();
    let mut before = 0usize;
    for piece in pieces {
        match p.feed(piece) {
            Ok(None) => before += piece.len(),
            Ok(Some((req, used))) => return Some(Ok((req, before + used, piece.len() - used))),
            Err(e) => return Some(Err(e)),
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    let flags = data.first().copied().unwrap_or(0);
    let k = usize::from(data.get(1).copied().unwrap_or(0) % 16);
    let sizes: Vec<usize> = (0..k).map(|i| usize::from(data.get(2 + i).copied().unwrap_or(0))).collect();
    let stream = data.get(2 + k..).unwrap_or_default();
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut rest = stream;
    for s in sizes {
        let n = s.min(rest.len());
        let (a, b) = rest.split_at(n);
        pieces.push(a);
        rest = b;
    }
    pieces.push(rest);
    let whole = feed(&[stream]);
    let split = feed(&pieces);
    let strip = |r: &Option<Result<(upgrade::Request, usize, usize), upgrade::ParseError>>| {
        r.as_ref().map(|x| x.as_ref().map(|(req, used, _)| (req.clone(), *used)).map_err(Clone::clone))
    };
    assert_eq!(strip(&whole), strip(&split));
    if let Some(Ok((req, used, _))) = whole {
        assert!(used <= MAX_REQUEST_HEAD + 4);
        let allowed = if flags & 4 != 0 {
            vec!["https://example.com".to_string()]
        } else {
            Vec::new()
        };
        let policy = UpgradePolicy {
            compression: flags & 1 != 0,
            origins: Origins::new(flags & 2 != 0, &allowed),
            raw_headers: String::new(),
            tls: false,
        };
        match upgrade::upgrade(&req, &policy, used < stream.len()) {
            Ok(up) => {
                assert!(up.response.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
                assert!(up.response.ends_with(b"\r\n\r\n"));
            }
            Err(r) => {
                assert!(matches!(r.status, 400 | 403 | 405), "{}", r.status);
                let resp = r.response(std::time::SystemTime::UNIX_EPOCH);
                assert!(resp.starts_with(b"HTTP/1."));
            }
        }
    }
});
