//! Raw-protocol tests over real sockets, on both reactors: framing edges, bad input,
//! limits and slow consumers. Texts and close behaviour follow spec/protocol.md.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{Raw, Server};
use std::io::Write;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

both_reactors!(frames_split_byte_by_byte, |r| {
    // protocol.md §1: frames split at any byte boundary across reads must parse.
    let s = Server::start(r, &["--shards", "2"]);
    let mut a = s.raw();
    let stream = b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\nSUB split.* 7\r\nPUB split.one reply 11\r\nhello world\r\nHPUB split.two 12 15\r\nNATS/1.0\r\n\r\nabc\r\nPING\r\n";
    for (i, b) in stream.iter().enumerate() {
        a.s.write_all(&[*b]).unwrap();
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    a.expect("MSG split.one 7 reply 11\r\nhello world\r\n");
    a.expect("HMSG split.two 7 12 15\r\nNATS/1.0\r\n\r\nabc\r\n");
    a.expect("PONG\r\n");
});

both_reactors!(verbose_and_connect_info, |r| {
    let s = Server::start(r, &[]);
    let mut a = s.raw();
    assert!(a.info.starts_with("INFO {\"server_id\":\"N"), "{}", a.info);
    assert!(a.info.contains("\"version\":\"2.14.0\""));
    assert!(a.info.contains("\"max_payload\":1048576"));
    a.send_str("CONNECT {\"protocol\":1}\r\nSUB v 1\r\nPUB v 2\r\nok\r\nPING\r\n");
    a.expect("+OK\r\n+OK\r\n+OK\r\nMSG v 1 2\r\nok\r\nPONG\r\n");
    let info = a.read_line(T);
    assert!(
        info.contains("\"connect_info\":true") && info.contains("\"remote_account\":\"$G\""),
        "{info}"
    );
});

both_reactors!(ops_before_connect_and_case_insensitive, |r| {
    // protocol.md §2.7: without auth, ops before CONNECT are accepted.
    let s = Server::start(r, &[]);
    let mut a = s.raw();
    a.send_str("ping\r\nsub\tx  1\r\npUb x 1\r\nz\r\nPING   trailing\r\n");
    a.expect("PONG\r\n+OK\r\n+OK\r\nMSG x 1 1\r\nz\r\nPONG\r\n");
});

both_reactors!(bad_input_gets_the_reference_answer, |r| {
    let s = Server::start(r, &["--shards", "2"]);
    // A well-behaved client on the same server keeps working throughout.
    let mut good = s.raw();
    good.handshake();
    good.send_str("SUB ok 1\r\nPING\r\n");
    good.expect("PONG\r\n");
    for (input, want) in [
        ("FOO\r\n", "-ERR 'Unknown Protocol Operation'\r\n"),
        ("MSG x 1 2\r\nhi\r\n", "-ERR 'Unknown Protocol Operation'\r\n"),
        ("PUB x 2\r\nhiX\r\n", "-ERR 'Unknown Protocol Operation'\r\n"),
        ("PUB x 2000000\r\n", "-ERR 'Maximum Payload Violation'\r\n"),
        ("PUB x\r\n", ""),
        ("PUB x y z 2\r\n", ""),
        ("SUB x\r\n", ""),
        ("UNSUB\r\n", "-ERR 'Unknown Protocol Operation'\r\n"),
        ("CONNECT {\"verbose\":\r\n", ""),
        ("CONNECT {\"protocol\":5}\r\n", "-ERR 'invalid client protocol'\r\n"),
        (
            "CONNECT {\"no_responders\":true}\r\n",
            "-ERR 'no responders requires headers support'\r\n",
        ),
        ("HPUB x 2 2\r\nhi\r\n", ""),
        ("-ERR 'bye'\r\n", ""),
    ] {
        let mut a = s.raw();
        a.send_str(input);
        assert_eq!(a.until_closed(T), want, "{input:?}");
    }
    // A control line longer than 4096 bytes, sent without ever finishing it.
    let mut a = s.raw();
    a.send_str("PUB ");
    a.send(&vec![b'a'; 5000]);
    assert_eq!(a.until_closed(T), "-ERR 'maximum control line exceeded'\r\n");
    // Errors that keep the connection open.
    let mut a = s.raw();
    a.handshake();
    a.send_str("SUB foo..bar 1\r\nSUB x _sys_ 2\r\nPUB _GR_.x.y 0\r\n\r\nPUB a _R_.b 0\r\n\r\nPING\r\n");
    a.expect("-ERR 'Invalid Subject'\r\n");
    a.expect("-ERR 'Permissions Violation for Subscription to \"x\" using queue \"_sys_\"'\r\n");
    a.expect("-ERR 'Permissions Violation for Publish to \"_GR_.x.y\"'\r\n");
    a.expect("-ERR 'Permissions Violation for Publish with Reply of \"_R_.b\"'\r\n");
    a.expect("PONG\r\n");
    // The good client never noticed.
    let mut p = s.raw();
    p.handshake();
    p.send_str("PUB ok 2\r\nok\r\nPING\r\n");
    p.expect("PONG\r\n");
    good.expect("MSG ok 1 2\r\nok\r\n");
});

both_reactors!(garbage_from_many_clients_never_hurts_the_server, |r| {
    let s = Server::start(r, &["--shards", "3"]);
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces: &[&[u8]] = &[
        b"PUB ",
        b"SUB ",
        b"HPUB ",
        b"UNSUB ",
        b"PING\r\n",
        b"CONNECT {\"headers\":true}\r\n",
        b"foo",
        b".",
        b"*",
        b">",
        b" ",
        b"\t",
        b"\r\n",
        b"\r",
        b"\n",
        b"12",
        b"999999999",
        b"-1",
        b"NATS/1.0\r\n\r\n",
        b"{",
        b"\xff\x00",
    ];
    for _ in 0..40 {
        let mut a = Raw::connect(s.port);
        let mut data = Vec::new();
        for _ in 0..(rand() % 60) {
            data.extend_from_slice(pieces[(rand() % pieces.len() as u64) as usize]);
        }
        let _ = a.s.write_all(&data);
        let _ = a.drain(Duration::from_millis(20));
    }
    let mut ok = s.raw();
    ok.handshake();
    ok.send_str("SUB still.alive 1\r\nPUB still.alive 1\r\n!\r\nPING\r\n");
    ok.expect("MSG still.alive 1 1\r\n!\r\nPONG\r\n");
});

both_reactors!(one_mib_payload_and_just_over, |r| {
    let s = Server::start(r, &["--shards", "2"]);
    let mut sub = s.raw();
    sub.handshake();
    sub.send_str("SUB big 1\r\nPING\r\n");
    sub.expect("PONG\r\n");
    let mut p = s.raw();
    p.handshake();
    let body = vec![b'q'; 1024 * 1024];
    let mut frame = b"PUB big 1048576\r\n".to_vec();
    frame.extend_from_slice(&body);
    frame.extend_from_slice(b"\r\nPING\r\n");
    p.send(&frame);
    p.expect("PONG\r\n");
    sub.expect("MSG big 1 1048576\r\n");
    let got = sub.read_line(T);
    assert_eq!(got.len(), body.len());
    p.send_str("PUB big 1048577\r\n");
    assert_eq!(p.until_closed(T), "-ERR 'Maximum Payload Violation'\r\n");
});

both_reactors!(slow_consumer_is_cut_off, |r| {
    // protocol.md §7: past max_pending (64 MiB) the consumer is closed without -ERR,
    // counted in varz, and the publisher is unaffected.
    let s = Server::start(r, &["--shards", "2", "-m", "-1"]);
    let mut slow = s.raw();
    slow.handshake();
    slow.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    slow.send_str("SUB sc 1\r\nPING\r\n");
    slow.expect("PONG\r\n");
    let mut p = s.raw();
    p.handshake();
    let body = vec![b's'; 64 * 1024];
    let mut frame = b"PUB sc 65536\r\n".to_vec();
    frame.extend_from_slice(&body);
    frame.extend_from_slice(b"\r\n");
    let mut batch = Vec::new();
    for _ in 0..16 {
        batch.extend_from_slice(&frame);
    }
    // 1 GiB max: the server must give up on the reader long before.
    let mut cut = false;
    for round in 0..1024 {
        p.send(&batch);
        if round % 64 == 63 {
            p.ping_pong();
            let (_, varz) = s.http_get("/varz");
            if varz.contains("\"slow_consumers\": 1") {
                cut = true;
                break;
            }
        }
    }
    assert!(cut, "slow consumer detected");
    // Its socket is closed (after what the kernel buffered), with no -ERR in the stream.
    let rest = slow.until_closed(Duration::from_secs(30));
    assert!(!rest.contains("-ERR"), "closed silently");
    p.ping_pong();
});

both_reactors!(no_responders_raw_bytes, |r| {
    // protocol.md §6.3.
    let s = Server::start(r, &["--shards", "2"]);
    let mut a = s.raw();
    a.send_str("CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB inbox 1\r\nPUB nobody inbox 0\r\n\r\nPING\r\n");
    a.expect("HMSG inbox 1 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n\r\nPONG\r\n");
});

both_reactors!(unsub_max_across_shards, |r| {
    let s = Server::start(r, &["--shards", "4"]);
    let mut a = s.raw();
    a.handshake();
    a.send_str("SUB auto 5\r\nUNSUB 5 3\r\nPING\r\n");
    a.expect("PONG\r\n");
    let mut others: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
    for o in &mut others {
        o.handshake();
    }
    for (i, o) in others.iter_mut().enumerate() {
        o.send_str(&format!("PUB auto 1\r\n{i}\r\nPUB auto 1\r\n{i}\r\nPING\r\n"));
        o.expect("PONG\r\n");
    }
    let got = a.drain(Duration::from_millis(300));
    assert_eq!(got.matches("MSG auto 5").count(), 3, "{got}");
});

both_reactors!(auth_timeout_for_a_silent_client, |r| {
    // protocol.md §2.5: no CONNECT within the auth timeout (2 s) -> -ERR and close, even
    // for a connection that never sent a byte.
    let s = Server::start(r, &["--user", "u", "--pass", "p"]);
    let mut a = s.raw();
    let t = std::time::Instant::now();
    assert_eq!(
        a.until_closed(Duration::from_secs(10)),
        "-ERR 'Authentication Timeout'\r\n"
    );
    assert!(t.elapsed() >= Duration::from_millis(1500), "not before the timeout");
});

/// CPU time (user + system) of a process so far, in clock ticks (Linux `/proc`).
#[cfg(target_os = "linux")]
fn cpu_ticks(pid: u32) -> u64 {
    stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap())
}

/// User + system ticks from a `/proc/.../stat` line.
#[cfg(target_os = "linux")]
fn stat_ticks(stat: &str) -> u64 {
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// CPU time of a process's shard threads (`rnats-shard-N`) so far, in clock ticks: not
/// the kernel submission threads that `--sqpoll_ms` adds to the process, which poll for
/// that long after each submission by design.
#[cfg(target_os = "linux")]
fn shard_ticks(pid: u32) -> u64 {
    let mut ticks = 0;
    let mut shards = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.starts_with("rnats-shard") {
            shards += 1;
            ticks += std::fs::read_to_string(dir.join("stat")).map_or(0, |s| stat_ticks(&s));
        }
    }
    assert!(shards > 0, "no rnats-shard thread in process {pid}");
    ticks
}

// A shard busy-polls only while traffic flows in short gaps: after a request/reply
// ping-pong across two shards (which makes both spin), an idle server sleeps.
#[cfg(target_os = "linux")]
both_reactors!(an_idle_server_stops_spinning, |r| {
    let s = Server::start(r, &["--shards", "2", "--spin_us", "5000"]);
    // Two connections, one per shard (they are placed round-robin).
    let mut req = s.raw();
    let mut rep = s.raw();
    rep.send_str("CONNECT {\"verbose\":false}\r\nSUB svc 1\r\nPING\r\n");
    rep.expect("PONG\r\n");
    req.send_str("CONNECT {\"verbose\":false}\r\nSUB r 1\r\nPING\r\n");
    req.expect("PONG\r\n");
    for i in 0..200 {
        req.send_str("PUB svc r 1\r\nq\r\n");
        rep.expect_answering_pings("MSG svc 1 r 1\r\nq\r\n");
        let body = format!("{i}");
        rep.send_str(&format!("PUB r {}\r\n{body}\r\n", body.len()));
        req.expect_answering_pings(&format!("MSG r 1 {}\r\n{body}\r\n", body.len()));
    }
    // The spin window is 5 ms: well past it, two seconds of idleness cost (next to) no
    // CPU. Clock ticks are 10 ms: one spinning shard would show about 200. The bound
    // leaves room for a loaded or virtualised machine's tick accounting (a CI run on a
    // busy VM charged 6 ticks to one idle second), and is still a tenth of that.
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_ticks(s.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(s.pid()) - before;
    assert!(used <= 20, "{used} ticks of CPU in two idle seconds");
});

// Busy-polling is for request/reply (a client waits on each round trip). A one-way stream
// whose messages come back within the spin window of each other (here every millisecond,
// the window 5 ms) makes its shards sleep between messages, not spin: a shard spinning
// through the second would show about 100 ticks of CPU, two shards about 200. The shard
// threads are measured (with `--sqpoll_ms` the kernel's submission threads poll on).
#[cfg(target_os = "linux")]
both_reactors!(a_one_way_stream_does_not_spin, |r| {
    let s = Server::start(r, &["--shards", "2", "--spin_us", "5000"]);
    let mut sub = s.raw();
    let mut publ = s.raw();
    sub.send_str("CONNECT {\"verbose\":false}\r\nSUB feed 1\r\nPING\r\n");
    sub.expect("PONG\r\n");
    publ.send_str("CONNECT {\"verbose\":false}\r\nPING\r\n");
    publ.expect("PONG\r\n");
    std::thread::sleep(Duration::from_millis(100));
    let before = shard_ticks(s.pid());
    let n = 1000;
    for _ in 0..n {
        publ.send_str("PUB feed 1\r\nq\r\n");
        std::thread::sleep(Duration::from_millis(1));
    }
    let used = shard_ticks(s.pid()) - before;
    sub.expect_answering_pings(&"MSG feed 1 1\r\nq\r\n".repeat(n));
    assert!(
        used <= 40,
        "{used} ticks of CPU for {n} one-way messages a millisecond apart"
    );
});
