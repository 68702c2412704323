//! Large messages between shards in one copy (`blob.rs`): what subscribers receive is
//! byte for byte what the copying path gives, and the last subscriber on a shard gets the
//! blob itself.

use super::*;
use crate::core::shard::blob::BLOB_MIN;

/// A payload of `n` bytes that shows any shift or truncation.
fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 0x40)
        .collect()
}

/// `got == want`, or a failure that shows where they part (not megabytes of numbers).
#[track_caller]
fn same_bytes(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let show = |b: &[u8]| String::from_utf8_lossy(&b[at.saturating_sub(40)..(at + 40).min(b.len())]).into_owned();
    panic!(
        "{what}: {} bytes, want {}; first difference at {at}: got {:?}, want {:?}",
        got.len(),
        want.len(),
        show(got),
        show(want)
    );
}

fn frame(head: &str, payload: &[u8]) -> Vec<u8> {
    let mut f = head.as_bytes().to_vec();
    f.extend_from_slice(payload);
    f.extend_from_slice(b"\r\n");
    f
}

/// Everything queued for `k`, taking finished chunks as the completion driver does, and
/// how many of them were blobs queued whole (sent from past the blob's room, which only
/// the one-copy path makes).
fn drain_counting_blobs(w: &mut World, s: usize, k: ConnKey) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut blobs = 0;
    loop {
        if let Some((chunk, off)) = w.shards[s].take_output_chunk(k) {
            if off > 0 && chunk.capacity() != crate::core::outbuf::CHUNK {
                blobs += 1;
            }
            out.extend_from_slice(&chunk[off..]);
            w.shards[s].written(k, chunk.len() - off, w.now);
            continue;
        }
        let rest = w.take_bytes(s, k);
        if rest.is_empty() {
            return (out, blobs);
        }
        out.extend_from_slice(&rest);
    }
}

#[test]
fn large_messages_reach_every_subscriber_of_another_shard_byte_for_byte() {
    for (size, pub_shard) in [(BLOB_MIN, 0usize), (BLOB_MIN + 1, 2), (200_000, 0), (BLOB_MIN - 1, 0)] {
        let mut w = World::new(3, CoreConfig::default());
        let (s1, a) = w.connect(1, QUIET);
        let (_, b) = w.connect(1, QUIET);
        let (s0, local) = w.connect(0, QUIET);
        w.send(s1, a, "SUB big.* 1\r\nSUB big.x 2\r\nPING\r\n");
        w.send(s1, b, "SUB big.> 9\r\nPING\r\n");
        w.send(s0, local, "SUB big.x 5\r\nPING\r\n");
        assert_eq!(w.take(s1, a), "PONG\r\n");
        assert_eq!(w.take(s1, b), "PONG\r\n");
        assert_eq!(w.take(s0, local), "PONG\r\n");
        let (sp, p) = w.connect(pub_shard, QUIET);
        let data = body(size, 7);
        let mut publish = format!("PUB big.x r.1 {size}\r\n").into_bytes();
        publish.extend_from_slice(&data);
        publish.extend_from_slice(b"\r\n");
        w.send_bytes(sp, p, &publish);
        let (got_a, blobs_a) = drain_counting_blobs(&mut w, s1, a);
        let (got_b, blobs_b) = drain_counting_blobs(&mut w, s1, b);
        let one = frame(&format!("MSG big.x 1 r.1 {size}\r\n"), &data);
        let two = frame(&format!("MSG big.x 2 r.1 {size}\r\n"), &data);
        // a's two subscriptions in either order.
        assert!(
            got_a == [one.clone(), two.clone()].concat() || got_a == [two, one].concat(),
            "size {size}"
        );
        same_bytes(&got_b, &frame(&format!("MSG big.x 9 r.1 {size}\r\n"), &data), "b");
        let want_blobs = usize::from(size >= BLOB_MIN);
        assert_eq!(
            blobs_a + blobs_b,
            want_blobs,
            "size {size}: one blob per receiving shard"
        );
        if pub_shard == 0 {
            same_bytes(
                &w.take_bytes(s0, local),
                &frame(&format!("MSG big.x 5 r.1 {size}\r\n"), &data),
                "local",
            );
        }
    }
}

#[test]
fn the_blob_goes_to_the_last_subscriber_and_is_sent_from_its_start() {
    let size = BLOB_MIN * 2;
    let mut w = World::new(2, CoreConfig::default());
    let (s1, a) = w.connect(1, QUIET);
    w.send(s1, a, "SUB big 1\r\nPING\r\n");
    assert_eq!(w.take(s1, a), "PONG\r\n");
    let (s0, p) = w.connect(0, QUIET);
    let data = body(size, 1);
    for _ in 0..2 {
        let mut publish = format!("PUB big {size}\r\n").into_bytes();
        publish.extend_from_slice(&data);
        publish.extend_from_slice(b"\r\nPUB big 2\r\nhi\r\n");
        w.send_bytes(s0, p, &publish);
    }
    let want = frame(&format!("MSG big 1 {size}\r\n"), &data);
    // Lent to the driver as it is: the line, the payload and the CRLF, nothing else.
    let (chunk, off) = w.shards[s1].take_output_chunk(a).expect("the blob is a finished chunk");
    same_bytes(&chunk[off..], &want, "the lent blob");
    let n = chunk.len() - off;
    w.shards[s1].written(a, n, w.now);
    let mut rest = b"MSG big 1 2\r\nhi\r\n".to_vec();
    rest.extend_from_slice(&want);
    rest.extend_from_slice(b"MSG big 1 2\r\nhi\r\n");
    same_bytes(&w.take_bytes(s1, a), &rest, "after the blob");
    assert_eq!(w.shards[s1].pending_len(a), 0);
}

#[test]
fn headers_raw_sizes_and_long_sids_keep_their_exact_bytes() {
    let size = BLOB_MIN + 100;
    let mut w = World::new(2, CoreConfig::default());
    let hdrs = r#"{"verbose":false,"pedantic":false,"headers":true}"#;
    let (s1, h) = w.connect(1, hdrs);
    let (_, plain) = w.connect(1, QUIET);
    let long_sid = "s".repeat(60);
    let (_, long) = w.connect(1, QUIET);
    w.send(s1, h, "SUB hdr 1\r\nSUB raw 3\r\nPING\r\n");
    w.send(s1, plain, "SUB hdr 2\r\nPING\r\n");
    w.send(s1, long, &format!("SUB raw {long_sid}\r\nPING\r\n"));
    for k in [h, plain, long] {
        assert_eq!(w.take(s1, k), "PONG\r\n");
    }
    let (s0, p) = w.connect(0, hdrs);
    let hdr = b"NATS/1.0\r\nA: b\r\n\r\n";
    let data = body(size, 3);
    let total = hdr.len() + size;
    let mut publish = format!("HPUB hdr {} {total}\r\n", hdr.len()).into_bytes();
    publish.extend_from_slice(hdr);
    publish.extend_from_slice(&data);
    publish.extend_from_slice(b"\r\n");
    // Sizes with leading zeros are echoed as written.
    publish.extend_from_slice(format!("PUB raw 0{size}\r\n").as_bytes());
    publish.extend_from_slice(&data);
    publish.extend_from_slice(b"\r\n");
    w.send_bytes(s0, p, &publish);
    let mut with_hdr = format!("HMSG hdr 1 {} {total}\r\n", hdr.len()).into_bytes();
    with_hdr.extend_from_slice(hdr);
    with_hdr.extend_from_slice(&data);
    with_hdr.extend_from_slice(b"\r\n");
    with_hdr.extend(frame(&format!("MSG raw 3 0{size}\r\n"), &data));
    same_bytes(&w.take_bytes(s1, h), &with_hdr, "headers");
    // A client without headers gets the payload alone (the copying path).
    same_bytes(
        &w.take_bytes(s1, plain),
        &frame(&format!("MSG hdr 2 {size}\r\n"), &data),
        "stripped",
    );
    // A sid longer than the room in front of the blob: copied, same bytes.
    same_bytes(
        &w.take_bytes(s1, long),
        &frame(&format!("MSG raw {long_sid} 0{size}\r\n"), &data),
        "long sid",
    );
    // Alone on its shard, a headers message goes out as the blob itself.
    w.send(s1, h, "SUB solo 4\r\nPING\r\n");
    assert_eq!(w.take(s1, h), "PONG\r\n");
    let mut publish = format!("HPUB solo r {} {total}\r\n", hdr.len()).into_bytes();
    publish.extend_from_slice(hdr);
    publish.extend_from_slice(&data);
    publish.extend_from_slice(b"\r\n");
    w.send_bytes(s0, p, &publish);
    let mut want = format!("HMSG solo 4 r {} {total}\r\n", hdr.len()).into_bytes();
    want.extend_from_slice(hdr);
    want.extend_from_slice(&data);
    want.extend_from_slice(b"\r\n");
    let (got, blobs) = drain_counting_blobs(&mut w, s1, h);
    same_bytes(&got, &want, "solo");
    assert_eq!(blobs, 1);
}

#[test]
fn a_slow_consumer_is_cut_off_as_on_the_copying_path() {
    let size = BLOB_MIN * 2;
    let cfg = CoreConfig {
        max_pending: 3 * size,
        ..CoreConfig::default()
    };
    let mut w = World::new(2, cfg);
    let (s1, a) = w.connect(1, QUIET);
    w.send(s1, a, "SUB big 1\r\nPING\r\n");
    assert_eq!(w.take(s1, a), "PONG\r\n");
    let (s0, p) = w.connect(0, QUIET);
    let data = body(size, 9);
    let mut publish = format!("PUB big {size}\r\n").into_bytes();
    publish.extend_from_slice(&data);
    publish.extend_from_slice(b"\r\n");
    // Two fit; the third would pass max_pending: the connection closes as a slow consumer.
    for _ in 0..2 {
        w.send_bytes(s0, p, &publish);
    }
    let one = format!("MSG big 1 {size}\r\n").len() + size + 2;
    assert_eq!(w.shards[s1].pending_len(a), 2 * one);
    assert!(matches!(w.shards[s1].status(a), ConnStatus::Open { .. }));
    w.send_bytes(s0, p, &publish);
    assert_eq!(w.shards[s1].status(a), ConnStatus::Close);
    assert_eq!(
        w.shards[s1].closing_reason(a),
        Some(ClosedState::SlowConsumerPendingBytes)
    );
}

#[test]
fn queue_groups_and_auto_unsubscribe_take_the_copying_path() {
    let size = BLOB_MIN + 5;
    let mut w = World::new(2, CoreConfig::default());
    let (s1, a) = w.connect(1, QUIET);
    w.send(s1, a, "SUB big q 1\r\nSUB big 2\r\nUNSUB 2 1\r\nPING\r\n");
    assert_eq!(w.take(s1, a), "PONG\r\n");
    let (s0, p) = w.connect(0, QUIET);
    let data = body(size, 4);
    let mut publish = format!("PUB big {size}\r\n").into_bytes();
    publish.extend_from_slice(&data);
    publish.extend_from_slice(b"\r\n");
    w.send_bytes(s0, p, &publish);
    w.send_bytes(s0, p, &publish);
    let out = w.take_bytes(s1, a);
    let mut want = Vec::new();
    // First message: the auto-unsubscribing plain sub and the queue member.
    let one = frame(&format!("MSG big 1 {size}\r\n"), &data);
    let two = frame(&format!("MSG big 2 {size}\r\n"), &data);
    want.extend_from_slice(&two);
    want.extend_from_slice(&one);
    want.extend_from_slice(&one);
    assert_eq!(out.len(), want.len());
    let count = |needle: &[u8]| out.windows(needle.len()).filter(|w| *w == needle).count();
    assert_eq!(count(format!("MSG big 1 {size}\r\n").as_bytes()), 2);
    assert_eq!(count(format!("MSG big 2 {size}\r\n").as_bytes()), 1);
}

#[test]
fn written_blobs_go_back_to_the_shard_that_filled_them_and_are_filled_again() {
    let size = BLOB_MIN + 1000;
    let mut w = World::new(2, CoreConfig::default());
    let (s1, a) = w.connect(1, QUIET);
    w.send(s1, a, "SUB big 1\r\nPING\r\n");
    assert_eq!(w.take(s1, a), "PONG\r\n");
    let (s0, p) = w.connect(0, QUIET);
    let publish = |k: u8| {
        let mut v = format!("PUB big {size}\r\n").into_bytes();
        v.extend_from_slice(&body(size, k));
        v.extend_from_slice(b"\r\n");
        v
    };
    let want = |k: u8| frame(&format!("MSG big 1 {size}\r\n"), &body(size, k));
    let mut sent_from = Vec::new();
    for (round, next) in (0..4u8).enumerate() {
        w.send_bytes(s0, p, &publish(next));
        // Written out as the completion driver does it: the blob is lent, then given back.
        let (chunk, off) = w.shards[s1].take_output_chunk(a).expect("the blob");
        same_bytes(&chunk[off..], &want(next), "blob");
        sent_from.push(chunk.as_ptr() as usize);
        let n = chunk.len() - off;
        w.shards[s1].written(a, n, w.now);
        crate::core::outbuf::recycle_chunk(chunk);
        // The next batch shard 1 hands back to shard 0 carries the blob home, where the
        // next large message is built in it.
        w.send(s0, p, "PUB big 1\r\nx\r\n");
        same_bytes(&w.take_bytes(s1, a), b"MSG big 1 1\r\nx\r\n", "small");
        // Round 0's blob rides back with the batch of round 0's small message, which
        // shard 0 takes back at its next flush (round 1's): from then on one is waiting.
        let waiting = usize::from(round > 0);
        assert_eq!(w.shards[s0].blob_pool_len(), waiting, "round {round}");
    }
    assert_eq!(
        w.shards[s1].blob_pool_len(),
        0,
        "nothing kept by the shard that wrote them"
    );
    // Rounds 2 and 3 were built in the buffers of rounds 0 and 1.
    assert_eq!(sent_from[2], sent_from[0]);
    assert_eq!(sent_from[3], sent_from[1]);
}
