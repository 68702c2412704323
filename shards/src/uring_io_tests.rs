//! Completion I/O against real sockets: order, end of stream, buffer exhaustion, short
//! sends, pause and resume, removal with sends in flight.

use super::*;
use crate::uring_send::SEND_MAX;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub(crate) fn poller(count: u16, size: usize) -> Option<UringPoller> {
    if crate::uring::probe(64).is_err() || probe_completion().is_err() {
        eprintln!("io_uring completion I/O unavailable here; skipping");
        return None;
    }
    let mut p = UringPoller::new(64).unwrap();
    p.enable_completion(count, size).unwrap();
    Some(p)
}

pub(crate) fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    s.set_nonblocking(true).unwrap();
    (c, s)
}

/// What completions reported: bytes per token, receive ends, sends.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) bytes: std::collections::HashMap<usize, Vec<u8>>,
    pub(crate) ends: Vec<(usize, i32)>,
    pub(crate) sent: Vec<(usize, usize, i32)>,
}

/// Wait for completions (at least once) until `until` holds of what was gathered.
pub(crate) fn pump(
    p: &mut UringPoller,
    seen: &mut Seen,
    recycle: bool,
    held: &mut Vec<u16>,
    until: impl Fn(&Seen) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut done = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "timed out");
        p.wait(&mut Vec::new(), &mut done, Duration::from_millis(20)).unwrap();
        for c in done.drain(..) {
            match c {
                Completion::Data { token, bid, len } => {
                    let d = p.data(bid, len).to_vec();
                    seen.bytes.entry(token).or_default().extend(d);
                    if recycle {
                        p.recycle(bid);
                    } else {
                        held.push(bid);
                    }
                }
                Completion::RecvEnd { token, err } => seen.ends.push((token, err)),
                Completion::Sent { token, n, err } => seen.sent.push((token, n, err)),
                Completion::Readable { .. } => {}
            }
        }
        if until(seen) {
            return;
        }
    }
}

pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Send `SEND_MAX` bytes at a time to `token`, whose peer never reads, until a send
/// stays in flight (the socket buffers are full); returns what completions reported.
pub(crate) fn stall_a_send(p: &mut UringPoller, token: usize) -> Seen {
    let big = pattern(SEND_MAX);
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline);
        if !p.send_busy(token) {
            p.send(token, &big);
        }
        pump(p, &mut seen, true, &mut Vec::new(), |_| true);
        std::thread::sleep(Duration::from_millis(20));
        pump(p, &mut seen, true, &mut Vec::new(), |_| true);
        if p.send_busy(token) {
            return seen;
        }
    }
}

#[test]
fn the_probe_round_trips() {
    if crate::uring::probe(64).is_err() {
        return;
    }
    probe_completion().unwrap();
}

#[test]
fn bytes_arrive_in_order_then_the_end() {
    let Some(mut p) = poller(8, 64) else { return };
    let (mut c, s) = pair();
    assert!(p.add_stream(s.as_raw_fd(), 5));
    let want = pattern(10_000);
    for part in want.chunks(700) {
        c.write_all(part).unwrap();
    }
    drop(c);
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| !s.ends.is_empty());
    assert_eq!(seen.bytes.get(&5).map(Vec::len), Some(want.len()));
    assert_eq!(seen.bytes[&5], want);
    assert_eq!(seen.ends, vec![(5, 0)]);
    assert_eq!(p.free_buffers(), 8, "every buffer came back");
}

#[test]
fn running_out_of_buffers_stops_reading_instead_of_failing() {
    let Some(mut p) = poller(2, 16) else { return };
    let (mut a, sa) = pair();
    let (mut b, sb) = pair();
    p.add_stream(sa.as_raw_fd(), 1);
    p.add_stream(sb.as_raw_fd(), 2);
    let (wa, wb) = (pattern(200), pattern(90));
    a.write_all(&wa).unwrap();
    b.write_all(&wb).unwrap();
    let mut seen = Seen::default();
    let mut held = Vec::new();
    // Both buffers filled and kept: reading stops, nothing fails.
    let until_two = |s: &Seen| s.bytes.values().map(Vec::len).sum::<usize>() >= 32;
    pump(&mut p, &mut seen, false, &mut held, until_two);
    std::thread::sleep(Duration::from_millis(50));
    pump(&mut p, &mut seen, false, &mut held, |_| true);
    assert_eq!(held.len(), 2, "only the two buffers were filled");
    assert_eq!(p.free_buffers(), 0);
    assert!(seen.ends.is_empty(), "no connection failed: {:?}", seen.ends);
    // Buffers back: both connections are read to the end, in order.
    for b in held.drain(..) {
        p.recycle(b);
    }
    pump(&mut p, &mut seen, true, &mut held, |s| {
        s.bytes.get(&1).map_or(0, Vec::len) == 200 && s.bytes.get(&2).map_or(0, Vec::len) == 90
    });
    assert_eq!(seen.bytes[&1], wa);
    assert_eq!(seen.bytes[&2], wb);
    assert!(seen.ends.is_empty());
}

/// The pool starts small and grows as buffers are taken and kept, up to its limit; then
/// reading stops as above, and every byte still arrives in order once buffers come back.
#[test]
fn the_buffer_pool_grows_as_traffic_needs() {
    let Some(mut p) = poller(128, 64) else { return };
    assert_eq!(p.posted_buffers(), usize::from(INITIAL_BUFFERS));
    assert_eq!(p.free_buffers(), usize::from(INITIAL_BUFFERS));
    let (mut a, sa) = pair();
    p.add_stream(sa.as_raw_fd(), 1);
    // Little traffic, recycled at once: the pool stays as it was.
    let mut seen = Seen::default();
    let mut held = Vec::new();
    for i in 0..20 {
        a.write_all(&pattern(30)).unwrap();
        pump(&mut p, &mut seen, true, &mut held, |s| {
            s.bytes[&1].len() == 30 * (i + 1)
        });
    }
    assert_eq!(p.posted_buffers(), usize::from(INITIAL_BUFFERS));
    // 200 buffers' worth kept by the reader: all 128 are handed out, then reading stops.
    let want = pattern(200 * 64);
    a.write_all(&want).unwrap();
    let before = seen.bytes[&1].len();
    pump(&mut p, &mut seen, false, &mut held, |s| {
        s.bytes[&1].len() >= before + 128 * 64
    });
    assert_eq!(p.posted_buffers(), 128);
    assert_eq!(p.free_buffers(), 0);
    for b in held.drain(..) {
        p.recycle(b);
    }
    pump(&mut p, &mut seen, true, &mut held, |s| {
        s.bytes[&1].len() == before + want.len()
    });
    assert_eq!(&seen.bytes[&1][before..], &want[..]);
    assert!(seen.ends.is_empty(), "{:?}", seen.ends);
}

#[test]
fn short_sends_are_continued_in_order() {
    let Some(mut p) = poller(8, 4096) else { return };
    let (mut c, s) = pair();
    p.add_stream(s.as_raw_fd(), 3);
    let want = pattern(6 * 1024 * 1024);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 7000];
        while got.len() < 6 * 1024 * 1024 {
            // A slow reader: the kernel's socket buffer fills and sends come back short.
            std::thread::sleep(Duration::from_micros(200));
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let mut off = 0;
    let mut seen = Seen::default();
    while off < want.len() {
        let n = p.send(3, &want[off..]);
        assert!(n > 0 && n <= SEND_MAX);
        assert!(p.send_busy(3));
        assert_eq!(p.send(3, &want[off..]), 0, "one send in flight");
        let before = seen.sent.len();
        pump(&mut p, &mut seen, true, &mut Vec::new(), |s| s.sent.len() > before);
        assert_eq!(seen.sent.last(), Some(&(3, n, 0)), "all of it, once");
        off += n;
    }
    assert_eq!(reader.join().unwrap(), want);
}

#[test]
fn a_paused_receive_resumes_without_reordering() {
    let Some(mut p) = poller(16, 32) else { return };
    let (mut c, s) = pair();
    p.add_stream(s.as_raw_fd(), 4);
    let want = pattern(5000);
    let mut seen = Seen::default();
    for (i, part) in want.chunks(500).enumerate() {
        c.write_all(part).unwrap();
        if i % 2 == 0 {
            p.pause_recv(4);
        } else {
            p.resume_recv(4);
        }
        pump(&mut p, &mut seen, true, &mut Vec::new(), |_| true);
    }
    p.resume_recv(4);
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| {
        s.bytes.get(&4).map_or(0, Vec::len) >= 5000
    });
    assert_eq!(seen.bytes[&4], want);
}

#[test]
fn removing_a_connection_with_a_send_in_flight_cancels_it() {
    let Some(mut p) = poller(8, 256) else { return };
    let (c, s) = pair();
    p.add_stream(s.as_raw_fd(), 6);
    // The peer never reads: sends stall once the socket buffers are full.
    let mut seen = stall_a_send(&mut p, 6);
    p.remove(6);
    drop(s);
    assert_eq!(p.cio.as_ref().map(|c| c.graveyard.len()), Some(1), "its buffer is kept");
    pump(&mut p, &mut seen, true, &mut Vec::new(), |_| true);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.cio.as_ref().map(|c| c.graveyard.len()) != Some(0) {
        assert!(Instant::now() < deadline, "the cancelled send never ended");
        pump(&mut p, &mut seen, true, &mut Vec::new(), |_| true);
    }
    assert!(seen.sent.iter().all(|(t, _, _)| *t == 6));
    // The ring still serves other connections.
    let (mut c2, s2) = pair();
    p.add_stream(s2.as_raw_fd(), 6);
    c2.write_all(b"after").unwrap();
    let mut seen2 = Seen::default();
    pump(&mut p, &mut seen2, true, &mut Vec::new(), |s| {
        s.bytes.get(&6).map_or(0, Vec::len) == 5
    });
    assert_eq!(seen2.bytes[&6], b"after");
    drop(c);
}

#[test]
fn an_owned_buffer_is_sent_from_its_offset_and_given_back() {
    let Some(mut p) = poller(8, 4096) else { return };
    let (mut c, s) = pair();
    p.add_stream(s.as_raw_fd(), 2);
    let want = pattern(3 * 1024 * 1024);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 9000];
        while got.len() < 3 * 1024 * 1024 - 100 {
            std::thread::sleep(Duration::from_micros(100));
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    // The first 100 bytes count as written already: the send starts after them.
    let old = p.send_owned(2, want.clone(), 100);
    assert!(old.is_empty(), "the connection held no buffer before");
    assert!(p.send_busy(2));
    let refused = p.send_owned(2, vec![1, 2, 3], 0);
    assert_eq!(
        refused,
        vec![1, 2, 3],
        "one send in flight: the buffer comes back untouched"
    );
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| !s.sent.is_empty());
    assert_eq!(
        seen.sent,
        vec![(2, want.len() - 100, 0)],
        "all of it, once, short sends continued"
    );
    let back = p.take_spent().expect("the large buffer is given back");
    assert_eq!(back.len(), want.len());
    assert!(p.take_spent().is_none());
    assert_eq!(reader.join().unwrap(), want[100..]);
}

#[test]
fn readiness_and_received_bytes_are_reported_in_arrival_order() {
    let Some(mut p) = poller(8, 256) else { return };
    let (mut polled, sp) = pair();
    let (mut received, sr) = pair();
    p.add(sp.as_raw_fd(), 1);
    p.add_stream(sr.as_raw_fd(), 2);
    let mut done = Vec::new();
    p.wait(&mut Vec::new(), &mut done, Duration::from_millis(20)).unwrap();
    assert!(done.is_empty());
    for first_polled in [true, false, true] {
        if first_polled {
            polled.write_all(b"a").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            received.write_all(b"b").unwrap();
        } else {
            received.write_all(b"b").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            polled.write_all(b"a").unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut out = Vec::new();
        p.wait(&mut out, &mut done, Duration::from_millis(20)).unwrap();
        assert!(out.is_empty(), "readiness comes with the completions: {out:?}");
        let order: Vec<usize> = done
            .drain(..)
            .map(|c| match c {
                Completion::Readable { token } => token,
                Completion::Data { token, bid, .. } => {
                    p.recycle(bid);
                    token
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, if first_polled { vec![1, 2] } else { vec![2, 1] });
        let mut buf = [0u8; 8];
        assert_eq!((&sp).read(&mut buf).unwrap(), 1);
    }
}

/// With a kernel submission thread, nothing naming a removed socket is left queued when
/// `remove` returns: the caller closes the socket next, and its descriptor number may go
/// to a new connection at once. Also a round trip through the thread: receive and send.
#[test]
fn sqpoll_removal_leaves_nothing_queued() {
    if crate::uring::probe(64).is_err() || probe_completion().is_err() {
        return;
    }
    let Ok(mut p) = UringPoller::with_sqpoll(64, 10) else {
        eprintln!("no io_uring submission thread here; skipping");
        return;
    };
    p.enable_completion(8, 4096).unwrap();
    let (mut c, s) = pair();
    assert!(p.add_stream(s.as_raw_fd(), 1));
    c.write_all(b"ping").unwrap();
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| {
        s.bytes.get(&1).is_some_and(|b| b.len() == 4)
    });
    for round in 0..200 {
        // Sends queued for the socket, then its removal, all without waiting.
        let _ = p.send(1, &pattern(1000 + round));
        p.remove(1);
        assert!(p.ring.submission().is_empty(), "round {round}: entries still queued");
        assert!(p.add_stream(s.as_raw_fd(), 1));
    }
    p.remove(1);
}

#[test]
fn a_removed_socket_leaves_the_file_table_and_closes() {
    let Some(mut p) = poller(8, 256) else { return };
    let (mut c, s) = pair();
    p.add_stream(s.as_raw_fd(), 3);
    assert_eq!(p.fixed_files(), 1, "its requests name a table slot");
    c.write_all(b"in").unwrap();
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| {
        s.bytes.get(&3).map_or(0, Vec::len) == 2
    });
    p.send(3, b"out");
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| !s.sent.is_empty());
    assert_eq!(seen.sent, vec![(3, 3, 0)]);
    p.remove(3);
    assert_eq!(p.fixed_files(), 0);
    drop(s);
    // Closing the descriptor closes the socket: the table no longer holds it.
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).expect("the peer sees the end, not a timeout");
    assert_eq!(got, b"out");
}

#[test]
fn a_token_past_the_file_table_uses_its_descriptor() {
    let Some(mut p) = poller(8, 256) else { return };
    let (mut c, s) = pair();
    let t = FILE_SLOTS as usize + 7;
    p.add_stream(s.as_raw_fd(), t);
    assert_eq!(p.fixed_files(), 0);
    c.write_all(b"hello").unwrap();
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| {
        s.bytes.get(&t).map_or(0, Vec::len) == 5
    });
    p.send(t, b"back");
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| !s.sent.is_empty());
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"back");
    p.remove(t);
}
