//! Zero-copy sends against real sockets: whole and in order through short sends, reported
//! only after the kernel let go of the buffer, kept past a removal until then, and turned
//! off where a socket refuses them.

use super::*;
use crate::uring_io::tests::{pair, pattern, poller, pump, stall_a_send, Seen};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A zero-copy-capable poller, or none where this kernel lacks completion I/O.
fn zc_poller(min: usize) -> Option<UringPoller> {
    let mut p = poller(8, 4096)?;
    p.set_send_zc(min);
    Some(p)
}

#[test]
fn zero_copy_sends_arrive_whole_and_buffers_wait_for_their_notifications() {
    let Some(mut p) = zc_poller(16 * 1024) else { return };
    let (mut c, s) = pair();
    p.add_stream(s.as_raw_fd(), 2);
    let total = 4 * 1024 * 1024;
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 9000];
        while got.len() < total {
            // A slow reader: sends come back short and are continued.
            std::thread::sleep(Duration::from_micros(100));
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let want = pattern(total);
    let mut seen = Seen::default();
    // Owned buffers of 1 MiB (zero-copy), with copied sends of 100 bytes (below the
    // threshold: plain) in between. Each large buffer is remembered with the number of
    // zero-copy requests made up to its send's end: it may come back only once that many
    // notifications came (one connection's notifications come in order).
    let mut sent_bufs: Vec<(*const u8, u64)> = Vec::new();
    let mut returned = 0;
    let mut check_spent = |p: &mut UringPoller, sent_bufs: &[(*const u8, u64)]| {
        while let Some(b) = p.take_spent() {
            let (_, notifs, _) = p.zc_counts();
            let (_, needed) = sent_bufs
                .iter()
                .find(|(ptr, _)| *ptr == b.as_ptr())
                .expect("a buffer we sent");
            assert!(
                notifs >= *needed,
                "a buffer came back before its notifications ({notifs} < {needed})"
            );
            returned += 1;
        }
    };
    let mut off = 0;
    let mut round = 0;
    while off < total {
        let n = if round % 2 == 0 {
            let n = (1024 * 1024).min(total - off);
            let buf = want[off..off + n].to_vec();
            let ptr = buf.as_ptr();
            let old = p.send_owned(2, buf, 0);
            assert!(old.len() <= 4096, "the connection kept only a small buffer");
            sent_bufs.push((ptr, u64::MAX));
            n
        } else {
            p.send(2, &want[off..off + 100])
        };
        assert!(p.send_busy(2));
        let before = seen.sent.len();
        pump(&mut p, &mut seen, true, &mut Vec::new(), |s| s.sent.len() > before);
        assert_eq!(seen.sent.last(), Some(&(2, n, 0)), "all of it, once");
        if round % 2 == 0 {
            if let Some(last) = sent_bufs.last_mut() {
                last.1 = p.zc_counts().0;
            }
        }
        check_spent(&mut p, &sent_bufs);
        off += n;
        round += 1;
    }
    assert_eq!(reader.join().unwrap(), want);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.zc_counts().2 > 0 {
        assert!(Instant::now() < deadline, "notifications never came");
        pump(&mut p, &mut seen, true, &mut Vec::new(), |_| true);
        check_spent(&mut p, &sent_bufs);
    }
    let (requests, notifs, _) = p.zc_counts();
    assert!(requests >= 2, "the large sends went zero-copy ({requests} requests)");
    assert_eq!(requests, notifs, "every zero-copy request was notified");
    assert_eq!(returned, sent_bufs.len(), "every large buffer came back");
    assert_eq!(p.send_zc(), 16 * 1024, "never refused on TCP");
}

#[test]
fn a_removed_connection_keeps_its_zero_copy_buffer_until_notified() {
    let Some(mut p) = zc_poller(1) else { return };
    let (c, s) = pair();
    p.add_stream(s.as_raw_fd(), 6);
    // The peer never reads: a send stalls once the socket buffers are full, and its
    // queued bytes still reference the buffer.
    let mut seen = stall_a_send(&mut p, 6);
    while p.take_spent().is_some() {}
    p.remove(6);
    assert!(p.zc_counts().2 > 0, "requests still out");
    assert!(p.take_spent().is_none(), "the buffer is kept while they are");
    // Closing both ends frees the queued bytes: the last completions come.
    drop(s);
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.zc_counts().2 > 0 {
        assert!(p.take_spent().is_none(), "the buffer came back while requests were out");
        assert!(Instant::now() < deadline, "the buffer was never let go");
        pump(&mut p, &mut seen, true, &mut Vec::new(), |_| true);
    }
    let back = p.take_spent().expect("then it comes back");
    assert!(back.capacity() >= SEND_MAX);
    assert!(p.cio.as_ref().is_some_and(|c| c.graveyard.is_empty()));
}

#[test]
fn a_socket_that_refuses_zero_copy_gets_plain_sends() {
    let Some(mut p) = zc_poller(1) else { return };
    // Unix sockets do not do zero-copy.
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    p.add_stream(a.as_raw_fd(), 3);
    let want = pattern(50_000);
    let n = p.send(3, &want);
    assert_eq!(n, want.len());
    let mut seen = Seen::default();
    pump(&mut p, &mut seen, true, &mut Vec::new(), |s| !s.sent.is_empty());
    assert_eq!(seen.sent, vec![(3, want.len(), 0)]);
    let mut got = vec![0u8; want.len()];
    b.read_exact(&mut got).unwrap();
    assert_eq!(got, want);
    assert_eq!(p.send_zc(), 0, "zero-copy is off for the ring from then on");
    drop(a);
}
