//! Mirror and source API replies compared with the reference (nats-server 2.14.0): the
//! creates and updates whose answers do not depend on how far sourcing has got (the
//! checks of mirror and source configurations, mirror_direct from the origin, what an
//! update may change, promotion of a mirror whose origin is empty, the `mirror` and
//! `sources` parts of create responses). What sourcing does over time is asserted in
//! tests/jetstream_sourcing.rs. Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::jsdiff::{r, Req};

fn compare(rx: common::Reactor, shards: &str) {
    common::jsdiff::compare(rx, shards, scenarios());
}

fn scenarios() -> Vec<(&'static str, Vec<Req>)> {
    vec![
        (
            "mirror configs",
            vec![
                r(
                    "$JS.API.STREAM.CREATE.O",
                    r#"{"name":"O","subjects":["o.>"],"allow_direct":true,"max_msg_size":1024}"#,
                ),
                r("$JS.API.STREAM.CREATE.M", r#"{"name":"M","mirror":{"name":"O"}}"#),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","subjects":["m2"],"mirror":{"name":"O"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O"},"sources":[{"name":"O"}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O"},"first_seq":5}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O"},"max_msg_size":10}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","filter_subject":"o.a","subject_transforms":[{"src":"o.b","dest":"x"}]}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","subject_transforms":[{"src":"o.*","dest":"x.{{wildcard(2)}}"}]}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","subject_transforms":[{"src":"o.>","dest":"x.>"},{"src":"o.a","dest":"y"}]}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"bad.name"}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","external":{"api":"$JS.API"}}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","external":{"api":"x.*"}}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror":{"name":"O","external":{"api":"x.api","deliver":"d.*"}}}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.M2",
                    r#"{"name":"M2","mirror_direct":true,"subjects":["m2"]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.MX",
                    r#"{"name":"MX","mirror":{"name":"O","filter_subject":"o.a","external":{"api":"JS.OTHER.API","deliver":"dl"}}}"#,
                ),
                // A mirror's mirror cannot change; it can be removed (promotion).
                r(
                    "$JS.API.STREAM.UPDATE.M",
                    r#"{"name":"M","mirror":{"name":"O","filter_subject":"o.a"}}"#,
                ),
                r("$JS.API.STREAM.UPDATE.M", r#"{"name":"M","mirror":{"name":"OTHER"}}"#),
                r(
                    "$JS.API.STREAM.UPDATE.M",
                    r#"{"name":"M","mirror":{"name":"O"},"subjects":["m"]}"#,
                ),
                r("$JS.API.STREAM.UPDATE.M", r#"{"name":"M","subjects":["m.>"]}"#),
                r(
                    "$JS.API.STREAM.UPDATE.M",
                    r#"{"name":"M","subjects":["m.>"],"mirror":{"name":"O"}}"#,
                ),
                r("$JS.API.STREAM.DELETE.MX", ""),
            ],
        ),
        (
            "source configs",
            vec![
                r("$JS.API.STREAM.CREATE.A", r#"{"name":"A","subjects":["a.>"]}"#),
                r("$JS.API.STREAM.CREATE.B", r#"{"name":"B","subjects":["b.>"]}"#),
                // One source per stream whose answer is compared: the reference lists
                // several in its map's (random) order.
                r(
                    "$JS.API.STREAM.CREATE.S",
                    r#"{"name":"S","subjects":["own"],"sources":[{"name":"B","subject_transforms":[{"src":"b.>","dest":"moved.>"}]}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S1",
                    r#"{"name":"S1","sources":[{"name":"A","opt_start_seq":2,"filter_subject":"a.1"}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S2",
                    r#"{"name":"S2","sources":[{"name":"A"},{"name":"A"}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"a b"}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","filter_subject":"a.1","subject_transforms":[{"src":"a.2","dest":"x"}]}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","subject_transforms":[{"src":"a.>","dest":"x.>"},{"src":"a.1","dest":"y"}]}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","subject_transforms":[{"src":"a.*","dest":"{{bogus(1)}}"}]}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","external":{"api":"$JS.API.X"}}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","consumer":{"name":"c","deliver_subject":"d"},"opt_start_seq":3}]}"#,
                ),
                r(
                    "$JS.API.STREAM.CREATE.S3",
                    r#"{"name":"S3","sources":[{"name":"A","external":{"api":"JS.X.API"}}]}"#,
                ),
                // Sources added and removed; a cycle refused.
                r(
                    "$JS.API.STREAM.UPDATE.S",
                    r#"{"name":"S","subjects":["own"],"sources":[{"name":"A","opt_start_seq":2}]}"#,
                ),
                r("$JS.API.STREAM.UPDATE.S", r#"{"name":"S","subjects":["own"]}"#),
                r(
                    "$JS.API.STREAM.UPDATE.A",
                    r#"{"name":"A","subjects":["a.>"],"sources":[{"name":"S3"}]}"#,
                ),
                r("$JS.API.STREAM.DELETE.S3", ""),
                r("$JS.API.STREAM.DELETE.S", ""),
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
