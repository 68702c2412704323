//! Fuzz target `js_consumer_wire`: arbitrary bytes through the consumer side of the
//! JetStream wire: pull request bodies, ack payloads and ack subjects, the `o.dat` state
//! decoder, and consumer create requests through their defaults and checks. Must never
//! panic; a decoded state re-encodes to a stable point.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::jetstream::api::config::StreamConfig;
use rnats::jetstream::api::consumer_check::{apply_defaults, check, ConsumerCtx};
use rnats::jetstream::api::consumer_info::CreateConsumerRequest;
use rnats::jetstream::api::consumer_msgs::{parse_ack, parse_ack_subject, parse_pull};

fuzz_target!(|data: &[u8]| {
    let _ = parse_pull(data);
    let _ = parse_ack(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = parse_ack_subject(s);
    }
    if let Ok(state) = storage::consumer_state::decode(data) {
        // Timestamps are kept in seconds on disk, so one round trip may round them; after
        // that, encoding is stable.
        let once = storage::consumer_state::decode(&storage::consumer_state::encode(&state)).expect("re-decode");
        let twice = storage::consumer_state::decode(&storage::consumer_state::encode(&once)).expect("re-decode");
        assert_eq!(once, twice);
    }
    if let Ok(req) = CreateConsumerRequest::decode(data) {
        let stream = StreamConfig {
            name: "S".into(),
            subjects: vec!["s.>".into()],
            ..Default::default()
        };
        let ctx = ConsumerCtx {
            stream: &stream,
            pedantic: req.pedantic,
            account_max_ack_pending: -1,
            server_max_ack_pending: -1,
            server_max_request_batch: 0,
        };
        let mut cfg = req.config;
        if apply_defaults(&mut cfg, &ctx).is_ok() {
            let _ = check(&cfg, &ctx, false);
        }
    }
});
