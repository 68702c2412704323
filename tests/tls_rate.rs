//! `connection_rate_limit` (FEATURES.md §10): TLS clients beyond the limit within a second
//! get the INFO (unless the handshake comes first), the reference's `-ERR` and a close,
//! and the refusals are logged once a second; compared with the reference, on both
//! reactors with 1 and 4 shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::pki::Pki;
use common::{scratch_dir, Reactor, Server};
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

const THROTTLED: &str = "-ERR 'Connection throttling is active. Please try again later.'\r\n";

/// What one connection saw: `(got the INFO, was throttled)`.
fn outcomes(port: u16, n: usize) -> Vec<(bool, bool)> {
    let socks: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut out: Vec<(bool, bool)> = socks
        .into_iter()
        .map(|mut s| {
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                }
            }
            let text = String::from_utf8_lossy(&got).to_string();
            let throttled = text.ends_with(THROTTLED);
            // Nothing else after the INFO line, or before the error.
            let rest = text.strip_suffix(THROTTLED).unwrap_or(&text);
            let info = rest.starts_with("INFO {") && rest.ends_with("\r\n");
            assert!(info || rest.is_empty(), "unexpected bytes: {text:?}");
            (info, throttled)
        })
        .collect();
    out.sort();
    out
}

fn conf(pki: &Pki, first: bool) -> String {
    let extra = format!("connection_rate_limit: 2\n  handshake_first: {first}\n  timeout: 3");
    let path = pki.dir.join(format!("rate-{first}.conf"));
    std::fs::write(&path, pki.tls_block(&extra)).unwrap();
    path.to_str().unwrap().to_string()
}

fn expected(first: bool) -> Vec<(bool, bool)> {
    let mut v = vec![
        (!first, false),
        (!first, false),
        (!first, true),
        (!first, true),
        (!first, true),
    ];
    v.sort();
    v
}

fn check(srv: &Server, first: bool) {
    assert_eq!(outcomes(srv.port, 5), expected(first), "handshake_first: {first}");
    srv.wait_for_log(
        "Rejected 3 connections due to TLS rate limiting",
        Duration::from_secs(3),
    )
    .unwrap();
}

both_reactors!(throttles_beyond_the_limit, |r| {
    let pki = Pki::new(&scratch_dir());
    for shards in ["1", "4"] {
        for first in [false, true] {
            let srv = Server::start(r, &["-c", &conf(&pki, first), "--shards", shards]);
            check(&srv, first);
            // The next second has room again.
            std::thread::sleep(Duration::from_millis(1100));
            let again = outcomes(srv.port, 1);
            assert_eq!(again, vec![(!first, false)]);
        }
    }
});

/// The reference, started on the same files, shows the same.
#[test]
fn differential_rate_limit() {
    let pki = Pki::new(&scratch_dir());
    let reference = common::reference_server();
    for first in [false, true] {
        let c = conf(&pki, first);
        let theirs = Server::start_cmd(&reference, &["-a", "127.0.0.1", "-p", "-1", "-c", &c]);
        let ours = Server::start(Reactor::Mio, &["-c", &c]);
        let (a, b) = (outcomes(theirs.port, 5), outcomes(ours.port, 5));
        assert_eq!(a, b, "handshake_first: {first}");
        assert_eq!(a, expected(first));
        for srv in [&theirs, &ours] {
            srv.wait_for_log(
                "Rejected 3 connections due to TLS rate limiting",
                Duration::from_secs(3),
            )
            .unwrap();
        }
    }
}
