//! The I/O paths under pressure, on every reactor (io_uring completion I/O, and with
//! `RNATS_TEST_URING_MODE=poll` its readiness path; mio): receive buffers running out,
//! reading paused behind a backed-up mesh and resumed, and connections closed while their
//! sends are in flight. Nothing may be lost, reordered or leaked.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{Raw, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Read MSG frames from `s` until `want` payloads arrived; returns the payloads.
fn collect(s: &mut TcpStream, want: usize) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::with_capacity(want);
    let mut chunk = vec![0u8; 256 * 1024];
    let deadline = Instant::now() + Duration::from_secs(120);
    while out.len() < want {
        assert!(Instant::now() < deadline, "only {} of {want} arrived", out.len());
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {} of {want}", out.len());
        buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        loop {
            let rest = &buf[at..];
            let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                break;
            };
            let line = std::str::from_utf8(&rest[..eol]).unwrap();
            if line == "PING" {
                s.write_all(b"PONG\r\n").unwrap();
                at += eol + 2;
                continue;
            }
            if line == "PONG" || line.starts_with("+OK") {
                at += eol + 2;
                continue;
            }
            assert!(line.starts_with("MSG "), "unexpected {line:?}");
            let len: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
            if rest.len() < eol + 2 + len + 2 {
                break;
            }
            out.push(rest[eol + 2..eol + 2 + len].to_vec());
            at += eol + 2 + len + 2;
        }
        buf.drain(..at);
    }
    out
}

fn subscriber(s: &Server, subject: &str) -> Raw {
    let mut sub = s.raw();
    sub.handshake();
    sub.send_str(&format!("SUB {subject} 1\r\nPING\r\n"));
    sub.expect("PONG\r\n");
    sub
}

/// Publishers that all send at once outrun a shard's receive buffers: reading waits
/// for buffers to come back, and every message still arrives, in each publisher's order.
fn many_publishers(r: common::Reactor, shards: &str) {
    let s = Server::start(r, &["--shards", shards]);
    let mut sub = subscriber(&s, "flood");
    const PUBS: usize = 300;
    const EACH: usize = 24;
    let body = vec![b'p'; 4000];
    let mut conns: Vec<Raw> = (0..PUBS)
        .map(|_| {
            let mut p = s.raw();
            p.handshake();
            p
        })
        .collect();
    // Each publisher's whole burst is written before anyone is read from.
    let bursts: Vec<Vec<u8>> = (0..PUBS)
        .map(|i| {
            let mut b = Vec::new();
            for k in 0..EACH {
                let payload = [format!("{i:04}-{k:04}-").as_bytes(), &body].concat();
                b.extend_from_slice(format!("PUB flood {}\r\n", payload.len()).as_bytes());
                b.extend_from_slice(&payload);
                b.extend_from_slice(b"\r\n");
            }
            b
        })
        .collect();
    let reader = std::thread::spawn(move || collect(&mut sub.s, PUBS * EACH));
    for (p, b) in conns.iter_mut().zip(&bursts) {
        p.send(b);
    }
    let got = reader.join().unwrap();
    let mut next = vec![0usize; PUBS];
    for m in &got {
        let head = std::str::from_utf8(&m[..10]).unwrap();
        let i: usize = head[..4].parse().unwrap();
        let k: usize = head[5..9].parse().unwrap();
        assert_eq!(k, next[i], "publisher {i}'s messages in order");
        next[i] += 1;
        assert_eq!(m.len(), 10 + body.len());
    }
    assert!(next.iter().all(|n| *n == EACH));
    for p in &mut conns {
        p.ping_pong();
    }
}

/// One publisher floods a subscriber on the other shard: the mesh backs up, the
/// publisher's reading pauses and resumes many times, and the stream arrives whole and
/// in order.
fn cross_shard_flood(r: common::Reactor) {
    let s = Server::start(r, &["--shards", "2"]);
    // Connections go to shards in turn: the subscriber on one, the publisher on the other.
    let mut sub = subscriber(&s, "x");
    let mut p = s.raw();
    p.handshake();
    const N: usize = 200_000;
    let mut burst = Vec::with_capacity(N * 24);
    for k in 0..N {
        let payload = format!("{k:08}");
        burst.extend_from_slice(format!("PUB x {}\r\n{payload}\r\n", payload.len()).as_bytes());
    }
    let reader = std::thread::spawn(move || collect(&mut sub.s, N));
    p.send(&burst);
    let got = reader.join().unwrap();
    for (k, m) in got.iter().enumerate() {
        assert_eq!(m, format!("{k:08}").as_bytes());
    }
    p.ping_pong();
}

/// Large messages to subscribers on the other shard go out from the buffer the
/// publisher's shard filled (`core::shard::blob`): two subscribers there (one copies, the
/// other sends the buffer itself), small messages in between, every byte in order.
fn large_messages_cross_shards_whole(r: common::Reactor) {
    let s = Server::start(r, &["--shards", "2", "-m", "-1"]);
    // Connections go to shards in turn: subscribers on shard 0, the publisher on 1.
    let mut a = subscriber(&s, "big.>");
    let mut filler = s.raw();
    filler.handshake();
    let mut b = subscriber(&s, "big.x");
    let mut p = s.raw();
    p.handshake();
    const N: usize = 40;
    let body = |k: usize| -> Vec<u8> {
        let mut v = format!("{k:08}").into_bytes();
        v.extend((0..300 * 1024 + k * 777).map(|i| b'a' + ((i * 7 + k) % 26) as u8));
        v
    };
    let mut burst = Vec::new();
    for k in 0..N {
        let data = if k % 3 == 2 {
            format!("{k:08}").into_bytes()
        } else {
            body(k)
        };
        burst.extend_from_slice(format!("PUB big.x {}\r\n", data.len()).as_bytes());
        burst.extend_from_slice(&data);
        burst.extend_from_slice(b"\r\n");
    }
    let ra = std::thread::spawn(move || collect(&mut a.s, N));
    let rb = std::thread::spawn(move || collect(&mut b.s, N));
    p.send(&burst);
    for got in [ra.join().unwrap(), rb.join().unwrap()] {
        for (k, m) in got.iter().enumerate() {
            let want = if k % 3 == 2 {
                format!("{k:08}").into_bytes()
            } else {
                body(k)
            };
            assert_eq!(m.len(), want.len(), "message {k}");
            assert!(*m == want, "message {k} differs");
        }
    }
    p.ping_pong();
    filler.ping_pong();
}

/// Subscribers that stop reading and then vanish while the server still sends to them:
/// their sends are cancelled, and the server goes on serving (and counts them gone).
fn close_with_sends_in_flight(r: common::Reactor) {
    let s = Server::start(r, &["--shards", "2", "-m", "-1"]);
    let mut p = s.raw();
    p.handshake();
    let body = vec![b'b'; 256 * 1024];
    let mut frame = format!("PUB big {}\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    frame.extend_from_slice(b"\r\n");
    for round in 0..6 {
        let stuck: Vec<Raw> = (0..3).map(|_| subscriber(&s, "big")).collect();
        // 8 MiB each: far more than the sockets hold, far less than max_pending.
        for _ in 0..32 {
            p.send(&frame);
        }
        p.ping_pong();
        for c in stuck {
            if round % 2 == 0 {
                // An abrupt close (RST): unread data in the client's socket.
                set_linger_zero(&c.s);
            }
            let _ = c.s.shutdown(std::net::Shutdown::Both);
            drop(c);
        }
        let mut fresh = subscriber(&s, "small");
        p.send_str("PUB small 2\r\nok\r\n");
        p.ping_pong();
        fresh.expect("MSG small 1 2\r\nok\r\n");
    }
    // The stuck subscribers are all gone once the server noticed (their sends failed or
    // were cancelled), and so are the fresh ones: only the publisher remains.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, varz) = s.http_get("/varz");
        if varz.contains("\"connections\": 1,") {
            break;
        }
        assert!(Instant::now() < deadline, "connections not released: {varz}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

both_reactors!(many_publishers_one_shard, |r| many_publishers(r, "1"));
both_reactors!(many_publishers_two_shards, |r| many_publishers(r, "2"));
both_reactors!(a_cross_shard_flood_pauses_and_resumes_in_order, cross_shard_flood);
both_reactors!(large_messages_cross_shards_whole, large_messages_cross_shards_whole);
both_reactors!(closing_with_sends_in_flight, close_with_sends_in_flight);

/// SO_LINGER 0: closing sends a reset instead of a FIN.
fn set_linger_zero(s: &TcpStream) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let l = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on a socket we own, with a live local of the declared size.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&l as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(unix))]
    let _ = s;
}
