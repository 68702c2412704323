//! Fuzz target `js_api_decode`: arbitrary bytes through the JetStream API's strict request
//! decoding (`decode_stream_create`, then the create checks and an update check against a
//! fixed stream) and the other stream request decoders, including direct get. Must never
//! panic; an accepted create config must pass its own checks again (normalizing is stable).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::jetstream::api::decode::{decode, decode_as, decode_optional};
use rnats::jetstream::api::requests::{
    direct_get_last_by_subject, direct_get_request, MsgDeleteRequest, MsgGetRequest, NamesRequest, PurgeRequest,
    StreamInfoRequest, STREAM_NAMES_REQUEST,
};
use rnats::jetstream::api::stream_check::{check_update, normalize_and_check, set_static_metadata, StreamLimitsCtx};
use rnats::jetstream::api::{config::StreamConfig, decode::decode_stream_create};

fuzz_target!(|data: &[u8]| {
    if let Ok((mut cfg, pedantic)) = decode_stream_create(data) {
        set_static_metadata(&mut cfg);
        let ctx = StreamLimitsCtx { pedantic, max_duplicate_window: 60_000_000_000, ..Default::default() };
        let before = cfg.clone();
        if normalize_and_check(&mut cfg, &ctx).is_ok() {
            let mut again = cfg.clone();
            assert!(normalize_and_check(&mut again, &StreamLimitsCtx::default()).is_ok());
            assert_eq!(again, cfg);
            let mut upd = before;
            let _ = check_update(&cfg, &mut upd, &StreamLimitsCtx::default());
        }
        let old = StreamConfig { name: cfg.name.clone(), ..Default::default() };
        let _ = check_update(&old, &mut cfg.clone(), &ctx);
    }
    let _ = decode_optional::<StreamInfoRequest>(data);
    let _ = decode_as::<NamesRequest>(data, &STREAM_NAMES_REQUEST);
    let _ = decode::<PurgeRequest>(data);
    let _ = decode::<MsgGetRequest>(data);
    let _ = decode::<MsgDeleteRequest>(data);
    let _ = direct_get_request(data);
    let _ = direct_get_last_by_subject("$JS.API.DIRECT.GET.S.a.b", data);
});
