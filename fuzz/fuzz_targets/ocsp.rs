//! Fuzz target `ocsp`: what the server reads from OCSP responders and its peer cache
//! file — `transport::ocsp::Response::parse` (x509-ocsp decoding, then the server's own
//! signature, delegation and time checks) against a fixed CA, the cache's Snappy framing
//! (`cache::unframe`), and the certificate reader (`tls::x509::Certificate::parse`).
//!
//! Beyond "never panics": an accepted response keeps the input as its raw bytes and
//! parses again to the same status; framing what `unframe` returned reads back the same.
//!
//! Seeds in `corpus/ocsp/`: responses from `openssl ocsp` for a certificate of the
//! fixture CA (`fixtures/ocsp-ca.der`), signed by the CA and by a delegated responder,
//! good and revoked, and a request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::transport::ocsp::cache::{frame, unframe};
use rnats::transport::ocsp::Response;
use rnats::transport::tls::x509::Certificate;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

fn issuer() -> &'static Certificate {
    static CA: OnceLock<Certificate> = OnceLock::new();
    CA.get_or_init(|| Certificate::parse(include_bytes!("../fixtures/ocsp-ca.der")).expect("fixture CA"))
}

fuzz_target!(|data: &[u8]| {
    let ca = issuer();
    let now = SystemTime::now();
    match Response::parse(data, ca) {
        Ok(r) => {
            assert_eq!(r.raw, data);
            let again = Response::parse(&r.raw, ca).expect("an accepted response parses again");
            assert_eq!(again.status, r.status);
            let _ = r.valid_at(now);
            let _ = r.current(now, Duration::from_secs(30), Duration::from_secs(3600));
            let _ = r.valid_delegation(ca);
            let _ = r.is_for(&ca.serial);
        }
        Err(e) => assert!(!e.0.is_empty()),
    }
    if let Ok(d) = unframe(data) {
        assert_eq!(unframe(&frame(&d)).expect("own framing"), d);
    }
    let _ = Certificate::parse(data);
});
