//! Stream data flows compared with the reference (nats-server 2.14.0) over raw protocol:
//! the configuration checks of subject transforms, republish and subject delete
//! markers; the subjects messages are stored under; the republished messages, header
//! block byte for byte (time stamps masked); the markers max age leaves (stored headers
//! through `STREAM.MSG.GET`, and republished). Both reactors, one and three shards.
//! The expiry scenarios read the stream about a second away from any expiry, so that
//! both servers' timers have fired (or not) whatever their granularity.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::jsdiff::{h, r, Req};

fn compare(rx: common::Reactor, shards: &str) {
    // Every scenario on file storage, then again with the streams on memory storage.
    let mut all = scenarios();
    all.extend(common::jsdiff::on_memory(scenarios()));
    common::jsdiff::compare(rx, shards, all);
}

fn scenarios() -> Vec<(&'static str, Vec<Req>)> {
    vec![
        (
            "config checks",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"subject_transform":{"src":"a.*.>","dest":"b.$2"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"subject_transform":{"src":"a..b","dest":"b"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"subject_transform":{"src":"a.*","dest":"b.{{nope(1)}}"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"republish":{"src":">","dest":"a.b.>"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"republish":{"src":"a.*","dest":"r.$2"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.A",
                    r#"{"name":"A","subjects":["a.>"],"republish":{"dest":"r.>"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.B",
                    r#"{"name":"B","subjects":["b.>"],"republish":{"dest":"rb.>"},"pedantic":true}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.C",
                    r#"{"name":"C","subjects":["c.*"],"subject_transform":{"src":"c.*","dest":"d.$1"},"republish":{"src":">","dest":">"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M",
                    r#"{"name":"M","subjects":["m"],"subject_delete_marker_ttl":500000000}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M",
                    r#"{"name":"M","subjects":["m"],"subject_delete_marker_ttl":-1}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M",
                    r#"{"name":"M","subjects":["m"],"subject_delete_marker_ttl":1000000000,"pedantic":true}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M",
                    r#"{"name":"M","subjects":["m"],"subject_delete_marker_ttl":1000000000}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.A",
                    r#"{"name":"A","subjects":["a.>"],"republish":{"src":">","dest":"r2.>","headers_only":true},"subject_transform":{"src":"a.x","dest":"ax"}}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.A",
                    r#"{"name":"A","subjects":["a.>"],"republish":{"src":">","dest":"a.>"}}"#,
                ),
                r("$JS.API.STREAM.INFO.A", ""),
                // The updated transforms apply to the next publishes.
                r("_sub", "r2.>"),
                r("a.x", "mapped"),
                r("a.y", "kept"),
                r("_take", ""),
                r("$JS.API.STREAM.MSG.GET.A", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.GET.A", r#"{"seq":2}"#),
                r("$JS.API.STREAM.UPDATE.A", r#"{"name":"A","subjects":["a.>"]}"#),
                r("a.x", "plain again"),
                r("_take", ""),
                r("$JS.API.STREAM.MSG.GET.A", r#"{"seq":3}"#),
                r(
                    "$JS.API.STREAM.UPDATE.A",
                    r#"{"name":"A","subjects":["a.>"],"max_age":5000000000,"subject_delete_marker_ttl":1000000000}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.M",
                    r#"{"name":"M","subjects":["m"],"subject_delete_marker_ttl":0,"allow_msg_ttl":true,"allow_rollup_hdrs":true}"#,
                ),
            ],
        ),
        (
            "transformed subjects and republish",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.T",
                    r#"{"name":"T","subjects":["t.>"],"subject_transform":{"src":"t.*.*","dest":"x.$2.$1"},"republish":{"src":"x.>","dest":"rp.>"}}"#,
                ),
                r("_sub", "rp.>"),
                r("t.a.b", "one"),
                h("t.a.b", "K: v\r\nK2: w", "two"),
                r("t.c", "not transformed, not republished"),
                h("t.q.r", "Nats-Msg-Id: m1", ""),
                h("t.q.r", "Nats-Msg-Id: m1", "duplicate"),
                r("_take", ""),
                r("$JS.API.STREAM.MSG.GET.T", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.GET.T", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.GET.T", r#"{"seq":3}"#),
                r("$JS.API.STREAM.MSG.GET.T", r#"{"last_by_subj":"x.b.a"}"#),
                r("$JS.API.STREAM.MSG.GET.T", r#"{"last_by_subj":"t.a.b"}"#),
                r(
                    "$JS.API.STREAM.CREATE.H",
                    r#"{"name":"H","subjects":["h.>"],"republish":{"src":"h.>","dest":"rp.h.>","headers_only":true}}"#,
                ),
                r("h.x", "twelve bytes"),
                h("h.y", "A: 1", ""),
                r("_take", ""),
                r("$JS.API.STREAM.INFO.T", ""),
            ],
        ),
        (
            "max age markers",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.E",
                    r#"{"name":"E","subjects":["e.>"],"max_age":2000000000,"subject_delete_marker_ttl":5000000000,"allow_msg_ttl":true,"allow_rollup_hdrs":true,"republish":{"src":">","dest":"rp.>"}}"#,
                ),
                r("_sub", "rp.>"),
                r("e.a", "1"),
                r("e.a", "2"),
                h("e.b", "Nats-TTL: 1s", "short ttl is raised"),
                h("e.c", "Nats-TTL: never", "never"),
                h("e.d", "KV-Operation: PURGE\r\nNats-Rollup: sub", ""),
                h("e.f", "KV-Operation: DEL", ""),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"seq":3}"#),
                r("_take", ""),
                r("_sleep", "2300"),
                r("_take", ""),
                r("$JS.API.STREAM.INFO.E", ""),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"last_by_subj":"e.a"}"#),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"last_by_subj":"e.b"}"#),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"last_by_subj":"e.c"}"#),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"last_by_subj":"e.d"}"#),
                r("$JS.API.STREAM.MSG.GET.E", r#"{"last_by_subj":"e.f"}"#),
            ],
        ),
        (
            "ttl markers",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.K",
                    r#"{"name":"K","subjects":["k.>"],"subject_delete_marker_ttl":2000000000,"allow_msg_ttl":true,"allow_rollup_hdrs":true,"max_msgs_per_subject":5}"#,
                ),
                h("k.a", "Nats-TTL: 1s", "expires"),
                r("k.b", "stays"),
                h("k.b", "Nats-TTL: 1", "expires, not last"),
                h("k.p", "KV-Operation: PURGE\r\nNats-Rollup: sub\r\nNats-TTL: 1s", ""),
                r("_sleep", "3000"),
                r("$JS.API.STREAM.INFO.K", ""),
                r("$JS.API.STREAM.MSG.GET.K", r#"{"last_by_subj":"k.a"}"#),
                r("$JS.API.STREAM.MSG.GET.K", r#"{"last_by_subj":"k.b"}"#),
                r("$JS.API.STREAM.MSG.GET.K", r#"{"last_by_subj":"k.p"}"#),
                r("_sleep", "2000"),
                r("$JS.API.STREAM.INFO.K", ""),
            ],
        ),
    ]
}

mod one_shard {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "1"));
}

mod three_shards {
    use super::*;
    both_reactors!(responses_match_the_reference, |r| super::compare(r, "3"));
}
