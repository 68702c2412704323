//! Fast producers and slow consumers on one shard (nats-server's producer stall): a
//! publisher whose messages leave a subscriber past three quarters of `max_pending` is
//! read no further for a moment, so a consumer that keeps reading, only more slowly than
//! the producer writes, gets every message and is not cut off. With
//! `no_fast_producer_stall: true` the producer is never held back and messages for the
//! consumer past the mark are dropped instead (it stays connected). Both reactors, 1 and
//! 3 shards (the producer placed on the consumer's shard).
//!
//! `RNATS_TEST_OTHER_SERVER=<nats-server>` runs the same against the reference, which
//! behaves the same way.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{Raw, Reactor, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const PAYLOAD: usize = 1024;
const MSGS: usize = 40 * 1024;
/// `MSG st 1 1024\r\n` + payload + `\r\n`.
const FRAME: usize = 15 + PAYLOAD + 2;

/// Publish `MSGS` messages as fast as the server takes them; the subscriber reads about
/// 32 MB/s. Returns (messages the subscriber got, `/varz`, the subscriber's `stalls` in
/// `/connz`).
fn run(r: Reactor, shards: usize, no_stall: bool) -> (usize, Value, u64) {
    let (s, dir) = start(r, shards, no_stall);
    let out = run_on(&s, shards);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// A server with `max_pending: 8MB`, and its configuration's directory.
fn start(r: Reactor, shards: usize, no_stall: bool) -> (Server, std::path::PathBuf) {
    let dir = common::scratch_dir();
    write_conf(&dir, no_stall);
    let conf = dir.join("s.conf");
    let n = shards.to_string();
    let s = Server::start(r, &["-c", conf.to_str().unwrap(), "--shards", &n, "-m", "-1"]);
    (s, dir)
}

fn write_conf(dir: &std::path::Path, no_stall: bool) {
    let extra = if no_stall { "no_fast_producer_stall: true\n" } else { "" };
    std::fs::write(dir.join("s.conf"), format!("max_pending: 8MB\n{extra}")).unwrap();
}

fn run_on(s: &Server, shards: usize) -> (usize, Value, u64) {
    let mut sub = s.raw();
    sub.send_str("CONNECT {\"verbose\":false,\"name\":\"slow\"}\r\nSUB st 1\r\nPING\r\n");
    sub.expect("PONG\r\n");
    // Connections go to the shards in turn: the producer lands on the subscriber's shard.
    let pads: Vec<Raw> = (1..shards).map(|_| s.raw()).collect();
    let mut p = s.raw();
    p.handshake();
    let producer = std::thread::spawn(move || {
        let mut frame = format!("PUB st {PAYLOAD}\r\n").into_bytes();
        frame.extend(std::iter::repeat_n(b'x', PAYLOAD));
        frame.extend_from_slice(b"\r\n");
        let batch: Vec<u8> = frame.iter().copied().cycle().take(frame.len() * 64).collect();
        for _ in 0..MSGS / 64 {
            p.send(&batch);
        }
        p.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        p.ping_pong();
        p
    });
    // A consumer slower than the producer: 32 KiB a millisecond at most.
    let mut all = std::mem::take(&mut sub.buf);
    let mut got = all.len();
    let mut chunk = vec![0u8; 32 * 1024];
    sub.s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut idle_since = None;
    while got < MSGS * FRAME && Instant::now() < deadline {
        match sub.s.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => {
                got += k;
                all.extend_from_slice(&chunk[..k]);
                idle_since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                // Nothing for a while: done once the producer is (what was dropped never
                // comes).
                if producer.is_finished() && idle_since.is_some_and(|t: Instant| t.elapsed() > Duration::from_secs(1)) {
                    break;
                }
                idle_since.get_or_insert_with(Instant::now);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let p = producer.join().unwrap();
    // Still connected: a PING gets its PONG after whatever was left.
    sub.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sub.s.write_all(b"PING\r\n").unwrap();
    let mut tail = Vec::new();
    while !tail.ends_with(b"PONG\r\n") {
        let k = sub.s.read(&mut chunk).unwrap();
        assert!(k > 0, "the consumer was closed");
        tail.extend_from_slice(&chunk[..k]);
    }
    all.extend_from_slice(&tail[..tail.len() - 6]);
    let varz: Value = serde_json::from_str(&s.http_get("/varz").1).unwrap();
    let connz: Value = serde_json::from_str(&s.http_get("/connz").1).unwrap();
    let stalls = connz["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "slow")
        .map_or(0, |c| c["stalls"].as_u64().unwrap_or(0));
    drop((p, pads));
    (messages(&all), varz, stalls)
}

/// The `MSG st` frames in `all` (the server's own PINGs skipped); panics on anything else.
fn messages(all: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    while at < all.len() {
        let rest = &all[at..];
        if rest.starts_with(b"PING\r\n") {
            at += 6;
        } else {
            assert!(
                rest.starts_with(format!("MSG st 1 {PAYLOAD}\r\n").as_bytes()),
                "at {at}"
            );
            at += FRAME;
            n += 1;
        }
    }
    n
}

fn stalled(r: Reactor, shards: usize) {
    let (got, varz, stalls) = run(r, shards, false);
    assert_eq!(got, MSGS, "every message delivered");
    assert_eq!(varz["slow_consumers"], 0, "{varz}");
    assert!(
        varz["stalled_clients"].as_u64().unwrap_or(0) > 0,
        "the producer was held back: {varz}"
    );
    assert!(stalls > 0, "counted on the consumer");
}

fn not_stalled(r: Reactor, shards: usize) {
    let (got, varz, stalls) = run(r, shards, true);
    assert!(got < MSGS, "messages past the mark are dropped");
    assert_eq!(varz["slow_consumers"], 0, "{varz}");
    assert_eq!(varz["stalled_clients"].as_u64().unwrap_or(0), 0, "{varz}");
    assert_eq!(stalls, 0);
}

both_reactors!(producer_is_held_back_one_shard, |r| stalled(r, 1));
both_reactors!(producer_is_held_back_three_shards, |r| stalled(r, 3));
both_reactors!(no_fast_producer_stall_drops_one_shard, |r| not_stalled(r, 1));
both_reactors!(no_fast_producer_stall_drops_three_shards, |r| not_stalled(r, 3));

// The setting is reloaded: after `no_fast_producer_stall: true` and SIGHUP, messages past
// the mark are dropped instead.
#[cfg(unix)]
both_reactors!(reload_turns_stalling_off, |r| {
    let (s, dir) = start(r, 1, false);
    write_conf(&dir, true);
    s.signal(libc::SIGHUP);
    s.wait_for_log("Reloaded: fast producers will not be stalled", Duration::from_secs(15))
        .unwrap();
    let (got, varz, _) = run_on(&s, 1);
    assert!(got < MSGS, "dropped after the reload");
    assert_eq!(varz["slow_consumers"], 0, "{varz}");
    let _ = std::fs::remove_dir_all(&dir);
});
