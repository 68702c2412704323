//! JetStream API responses compared with the reference: the same request sequences (raw
//! protocol) against nats-server 2.14.0 and rnats, each response parsed as JSON (or its
//! status line for header-only answers) with the volatile parts (times, server names and
//! ids) masked, must be equal. Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::jsdiff::{h, r, Req};

fn compare(rx: common::Reactor, shards: &str) {
    common::jsdiff::compare(rx, shards, scenarios());
}

fn scenarios() -> Vec<(&'static str, Vec<Req>)> {
    vec![
        (
            "direct get after an update allows it",
            vec![
                r("$JS.API.STREAM.CREATE.DG", r#"{"name":"DG","subjects":["dg.>"]}"#),
                r("dg.a", "1"),
                r("$JS.API.DIRECT.GET.DG", r#"{"seq":1}"#),
                r(
                    "$JS.API.STREAM.UPDATE.DG",
                    r#"{"name":"DG","subjects":["dg.>"],"allow_direct":true}"#,
                ),
                r("$JS.API.DIRECT.GET.DG", r#"{"seq":1}"#),
                r("$JS.API.DIRECT.GET.DG.dg.a", ""),
            ],
        ),
        (
            "stream info subjects with deletes and names empty",
            vec![
                r("$JS.API.STREAM.NAMES", ""),
                r("$JS.API.STREAM.CREATE.SUB", r#"{"name":"SUB","subjects":["sub.>"]}"#),
                r("sub.a", "1"),
                r("sub.b", "2"),
                r("sub.a", "3"),
                r("$JS.API.STREAM.MSG.DELETE.SUB", r#"{"seq":2}"#),
                r("$JS.API.STREAM.INFO.SUB", r#"{"subjects_filter":"sub.>"}"#),
                r(
                    "$JS.API.STREAM.INFO.SUB",
                    r#"{"subjects_filter":"sub.>","deleted_details":true}"#,
                ),
            ],
        ),
        (
            "stream crud",
            vec![
                r("$JS.API.INFO", ""),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["s1.>"]}"#),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["s1.>"]}"#),
                r("$JS.API.STREAM.CREATE.S1", r#"{"name":"S1","subjects":["other"]}"#),
                r("$JS.API.STREAM.CREATE.S2", r#"{"name":"S2","subjects":["s1.x"]}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S4"}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","bogus":1}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","max_age":5}"#),
                r("$JS.API.STREAM.CREATE.S3", r#"{"name":"S3","#),
                r(
                    "$JS.API.STREAM.CREATE.M1",
                    r#"{"name":"M1","storage":"memory","max_msgs":10,"discard":"new"}"#,
                ),
                r("$JS.API.STREAM.INFO.S1", ""),
                r("$JS.API.STREAM.INFO.NOPE", ""),
                r("$JS.API.STREAM.NAMES", ""),
                r("$JS.API.STREAM.NAMES", r#"{"subject":"s1.a"}"#),
                r("$JS.API.STREAM.LIST", ""),
                r(
                    "$JS.API.STREAM.UPDATE.S1",
                    r#"{"name":"S1","subjects":["s1.>"],"storage":"memory"}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.S1",
                    r#"{"name":"S1","subjects":["s1.>","more"],"max_msgs":100}"#,
                ),
                r("$JS.API.STREAM.UPDATE.NOPE", r#"{"name":"NOPE"}"#),
                r("$JS.API.STREAM.DELETE.M1", ""),
                r("$JS.API.STREAM.DELETE.M1", ""),
                r("$JS.API.STREAM.NAMES", ""),
                r("$JS.API.FOO", ""),
            ],
        ),
        (
            "publish and get",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.P",
                    r#"{"name":"P","subjects":["p.*"],"allow_rollup_hdrs":true}"#,
                ),
                r("p.a", "one"),
                r("p.b", "two"),
                h("p.a", "Nats-Msg-Id: m1", "three"),
                h("p.a", "Nats-Msg-Id: m1", "three again"),
                h("p.a", "Nats-Expected-Stream: Q", "x"),
                h("p.a", "Nats-Expected-Last-Sequence: 1", "x"),
                h("p.a", "Nats-Expected-Last-Sequence: 3", "four"),
                h("p.b", "Nats-Expected-Last-Subject-Sequence: 2", "five"),
                h("p.b", "Nats-Expected-Last-Subject-Sequence: 2", "x"),
                h("p.a", "Nats-Expected-Last-Msg-Id: nope", "x"),
                h("p.a", "Nats-TTL: 10s", "x"),
                h("p.c", "Nats-Rollup: bogus", "x"),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"last_by_subj":"p.a"}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"next_by_subj":"p.b","seq":3}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":99}"#),
                r("$JS.API.STREAM.MSG.GET.P", r#"{"seq":1,"last_by_subj":"p.a"}"#),
                r("$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":1}"#),
                r("$JS.API.STREAM.INFO.P", r#"{"deleted_details":true}"#),
                h("p.c", "Nats-Rollup: sub", "rolled"),
                r("$JS.API.STREAM.PURGE.P", r#"{"filter":"p.b"}"#),
                r("$JS.API.STREAM.PURGE.P", r#"{"seq":3,"keep":1}"#),
                r("$JS.API.STREAM.PURGE.P", ""),
                r("$JS.API.STREAM.INFO.P", ""),
            ],
        ),
        (
            // What each store answers for a message that is not there: the file store by
            // where the sequence falls, the memory store always "not found".
            "deletes of missing messages",
            vec![
                r("$JS.API.STREAM.CREATE.DF", r#"{"name":"DF","subjects":["df"]}"#),
                r(
                    "$JS.API.STREAM.CREATE.DM",
                    r#"{"name":"DM","subjects":["dm"],"storage":"memory"}"#,
                ),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":1}"#),
                r("df", "1"),
                r("df", "2"),
                r("df", "3"),
                r("df", "4"),
                r("dm", "1"),
                r("dm", "2"),
                r("dm", "3"),
                r("dm", "4"),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":2,"no_erase":true}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":9}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":0}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":2}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":9}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":1}"#),
                r("$JS.API.STREAM.MSG.DELETE.DM", r#"{"seq":1}"#),
                r("$JS.API.STREAM.PURGE.DF", ""),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":3}"#),
                r("$JS.API.STREAM.MSG.DELETE.DF", r#"{"seq":5}"#),
            ],
        ),
        (
            "consumers",
            vec![
                r("$JS.API.STREAM.CREATE.C", r#"{"name":"C","subjects":["c.*"]}"#),
                r("c.1", "a"),
                r("c.2", "b"),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D1",
                    r#"{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit","max_deliver":5},"action":"create"}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D2",
                    r#"{"stream_name":"C","config":{"name":"D2"},"action":"update"}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D3",
                    r#"{"stream_name":"C","config":{"name":"D3","deliver_policy":"by_start_sequence"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.C.D4.c.2",
                    r#"{"stream_name":"C","config":{"name":"D4","filter_subject":"c.2","deliver_subject":"dlv","ack_policy":"none"}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.DURABLE.CREATE.C.D5",
                    r#"{"stream_name":"C","config":{"durable_name":"D5","ack_policy":"all","max_ack_pending":10}}"#,
                ),
                r(
                    "$JS.API.CONSUMER.CREATE.NOPE.X",
                    r#"{"stream_name":"NOPE","config":{"name":"X"}}"#,
                ),
                r("$JS.API.CONSUMER.INFO.C.D1", ""),
                r("$JS.API.CONSUMER.INFO.C.NOPE", ""),
                r("$JS.API.CONSUMER.NAMES.C", ""),
                r("$JS.API.CONSUMER.MSG.NEXT.C.D1", r#"{"batch":1}"#),
                r("$JS.API.CONSUMER.MSG.NEXT.C.D4", ""),
                r(
                    "$JS.API.CONSUMER.PAUSE.C.D1",
                    r#"{"pause_until":"2099-01-01T00:00:00Z"}"#,
                ),
                r("$JS.API.CONSUMER.PAUSE.C.D1", ""),
                r("$JS.API.CONSUMER.DELETE.C.D5", ""),
                r("$JS.API.CONSUMER.DELETE.C.D5", ""),
                r("$JS.API.CONSUMER.NAMES.C", ""),
            ],
        ),
        (
            "pull statuses and direct get",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.K",
                    r#"{"name":"K","subjects":["k.>"],"allow_direct":true,"max_msgs_per_subject":2}"#,
                ),
                r("k.a", "1"),
                r("k.a", "2"),
                r("k.a", "3"),
                r("k.b", "4"),
                r("$JS.API.DIRECT.GET.K", r#"{"seq":3}"#),
                r("$JS.API.DIRECT.GET.K.k.a", ""),
                r("$JS.API.DIRECT.GET.K.k.zzz", ""),
                r("$JS.API.DIRECT.GET.K", ""),
                r("$JS.API.DIRECT.GET.K", r#"{"seq":1,"last_by_subj":"k.a"}"#),
                r(
                    "$JS.API.CONSUMER.CREATE.K.P",
                    r#"{"stream_name":"K","config":{"durable_name":"P","ack_policy":"explicit","max_batch":5}}"#,
                ),
                r("$JS.API.CONSUMER.MSG.NEXT.K.P", r#"{"batch":10}"#),
                r(
                    "$JS.API.CONSUMER.MSG.NEXT.K.P",
                    r#"{"batch":1,"idle_heartbeat":2000000000,"expires":1000000000}"#,
                ),
                r("$JS.API.CONSUMER.MSG.NEXT.K.P", r#"{"batch":bad}"#),
                r("$JS.API.CONSUMER.MSG.NEXT.K.NOPE", ""),
                r("$JS.API.CONSUMER.MSG.NEXT.NOPE.P", ""),
                r("$JS.API.DIRECT.GET.NOPE", r#"{"seq":1}"#),
                r(
                    "$JS.API.STREAM.CREATE.R",
                    r#"{"name":"R","subjects":["r.*"],"allow_rollup_hdrs":true}"#,
                ),
                h("r.a", "Nats-Rollup: sub", "first"),
                r("$JS.API.STREAM.MSG.GET.R", r#"{"last_by_subj":"r.a"}"#),
                r(
                    "$JS.API.STREAM.UPDATE.R",
                    r#"{"name":"R","subjects":["r.*"],"allow_rollup_hdrs":true,"sealed":true}"#,
                ),
                r("r.b", "after seal"),
                r("$JS.API.STREAM.CREATE.L", r#"{"name":"L","subjects":["l"]}"#),
                r(
                    "$JS.API.CONSUMER.CREATE.L.D",
                    r#"{"stream_name":"L","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
                ),
                r(
                    "$JS.API.STREAM.UPDATE.L",
                    r#"{"name":"L","subjects":["l"],"consumer_limits":{"max_ack_pending":10}}"#,
                ),
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
