//! A consumer state file (`o.dat`) written by the reference nats-server 2.14.0, decoded
//! with `storage::consumer_state::decode`: a durable pull consumer on a file stream gets
//! 10 messages, 6 are pulled, 1 and 2 acked (the floor), 4 acked with the legacy `+OK`,
//! 5 terminated, 3 NAKed and pulled again, 6 left pending; after a clean stop the file
//! must say exactly that. (storage/tests/fixtures/consumer_o.dat is such a file, kept for
//! the crate's unit test.) The reference writes `o.dat` at most every 100 ms after a
//! change, and on stop.

mod reference_util;

use reference_util::*;
use serde_json::json;
use std::collections::BTreeMap;
use storage::consumer_state::{decode, encode};
use storage::SeqPair;

#[test]
fn decodes_what_the_reference_wrote() {
    if !reference_available() {
        return;
    }
    let dir = TempDir::new("ostate");
    let mut srv = RefServer::start(&dir.0, "");
    let mut c = srv.client();
    c.api(
        "$JS.API.STREAM.CREATE.F",
        &json!({"name": "F", "subjects": ["f.>"], "storage": "file"}),
    );
    for i in 0..10 {
        c.js_publish("f.x", b"", format!("m{i}").as_bytes());
    }
    c.api(
        "$JS.API.CONSUMER.DURABLE.CREATE.F.D",
        &json!({"stream_name": "F", "config": {"durable_name": "D", "ack_policy": "explicit"}}),
    );
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;

    // The client's `_INBOX.t.>` subscription gets the pulled messages.
    let inbox = c.new_inbox();
    c.publish("$JS.API.CONSUMER.MSG.NEXT.F.D", Some(&inbox), b"", b"6");
    let acks: Vec<String> = (0..6).map(|_| c.next_msg().reply.expect("ack subject")).collect();
    // Acks sent as requests are answered once processed, which keeps the order.
    for (i, body) in [(0, "+ACK"), (1, ""), (3, "+OK"), (4, "+TERM done"), (2, "-NAK")] {
        c.request(&acks[i], b"", body.as_bytes());
    }
    c.publish("$JS.API.CONSUMER.MSG.NEXT.F.D", Some(&inbox), b"", b"1");
    let again = c.next_msg();
    assert!(
        again
            .reply
            .as_deref()
            .unwrap_or_default()
            .starts_with("$JS.ACK.F.D.2.3.7."),
        "{again:?}"
    );
    srv.stop();

    let path = srv.stream_dir("F").join("obs").join("D").join("o.dat");
    let buf = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = decode(&buf).unwrap();
    assert_eq!(st.delivered, SeqPair { consumer: 7, stream: 6 });
    assert_eq!(st.ack_floor, SeqPair { consumer: 2, stream: 2 });
    let seqs: Vec<(u64, u64)> = st.pending.iter().map(|(s, p)| (*s, p.sequence)).collect();
    assert_eq!(seqs, [(3, 3), (6, 6)]);
    let end = start + 60;
    for p in st.pending.values() {
        let secs = p.timestamp / 1_000_000_000;
        assert!((start - 2..end).contains(&secs), "{secs} not in {start}..{end}");
    }
    assert_eq!(st.redelivered, BTreeMap::from([(3, 1)]));
    assert_eq!(decode(&encode(&st)).unwrap(), st);
}
