//! The shard tells its driver when it saw request/reply traffic
//! ([`ShardCore::take_conversing`]): the driver busy-polls only then.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

fn quiet(w: &mut World) {
    for s in &mut w.shards {
        s.take_conversing();
    }
}

#[test]
fn a_request_marks_both_of_its_shards_and_a_stream_marks_none() {
    let mut w = World::new(2, CoreConfig::default());
    let (s0, responder) = w.connect(0, QUIET);
    let (s1, requester) = w.connect(1, QUIET);
    w.send(s0, responder, "SUB svc 1\r\nSUB feed 2\r\nPING\r\n");
    assert_eq!(w.take(s0, responder), "PONG\r\n");
    quiet(&mut w);

    for _ in 0..3 {
        w.send(s1, requester, "PUB feed 2\r\nhi\r\n");
    }
    assert_eq!(w.take(s0, responder), "MSG feed 2 2\r\nhi\r\n".repeat(3));
    assert!(!w.shards[0].take_conversing(), "a one-way stream, delivering shard");
    assert!(!w.shards[1].take_conversing(), "a one-way stream, publishing shard");

    w.send(s1, requester, "PUB svc _INBOX.r.1 2\r\nhi\r\n");
    assert_eq!(w.take(s0, responder), "MSG svc 1 _INBOX.r.1 2\r\nhi\r\n");
    assert!(w.shards[1].take_conversing(), "the requester's shard");
    assert!(w.shards[0].take_conversing(), "the responder's shard");
    assert!(!w.shards[0].take_conversing(), "taken once");
}

#[test]
fn a_request_nobody_takes_still_marks_its_shard() {
    // The requester waits all the same (for a reply, a timeout or a no-responders status).
    let mut w = World::new(1, CoreConfig::default());
    let (s, requester) = w.connect(0, QUIET);
    quiet(&mut w);
    w.send(s, requester, "PUB nobody.home _INBOX.r.2 0\r\n\r\n");
    assert!(w.shards[0].take_conversing());
}
