//! Unit tests of `/jsz`'s options and shapes.

use super::*;

#[test]
fn query_options_in_the_reference_order() {
    let o = JszOptions::from_query(&Query::parse("acc=A&consumers=1&config=true&offset=2&limit=3&raft=1"));
    assert_eq!(
        o,
        Ok(JszOptions {
            account: "A".into(),
            consumer: true,
            config: true,
            offset: 2,
            limit: 3,
            raft: true,
            ..Default::default()
        })
    );
    assert_eq!(
        JszOptions::from_query(&Query::parse("raft=x"))
            .err()
            .map(|e| e.to_string()),
        Some("Error decoding boolean for 'raft': strconv.ParseBool: parsing \"x\": invalid syntax".into())
    );
    assert!(JszOptions::from_query(&Query::parse("limit=x")).is_err());
    assert_eq!(
        JszOptions::from_query(&Query::parse("leader-only=true")).map(|o| o.leader_only),
        Ok(true)
    );
}

#[test]
fn defaults_follow_the_reference() {
    let cases = [
        // (consumer, streams, account) -> (streams, accounts)
        (true, false, "", true, true),
        (false, true, "", true, true),
        (false, true, "A", true, false),
        (true, false, "A", true, false),
        (false, false, "", false, false),
    ];
    for (consumer, streams, account, want_streams, want_accounts) in cases {
        let o = JszOptions {
            consumer,
            streams,
            account: account.into(),
            offset: -3,
            ..Default::default()
        }
        .normalized();
        assert_eq!(
            (o.streams, o.accounts),
            (want_streams, want_accounts),
            "{consumer} {streams} {account}"
        );
        assert_eq!((o.offset, o.limit), (0, DEFAULT_LIMIT));
    }
}

#[test]
fn json_options_by_field() {
    use crate::monitor::optjson::Val;
    let v = vec![
        ("account", Val::Str("A".into())),
        ("consumer", Val::Bool(true)),
        ("limit", Val::Int(5)),
        ("stream_leader_only", Val::Bool(true)),
    ];
    let o = JszOptions::from_values(&v);
    assert_eq!(o.account, "A");
    assert!(o.consumer && o.stream_leader_only && !o.streams);
    assert_eq!(o.limit, 5);
}

#[test]
fn disabled_and_enabled_shapes() {
    let off = Jsz {
        server_id: "S".into(),
        now: "T".into(),
        disabled: true,
        ..Default::default()
    };
    let text = String::from_utf8(crate::proto::gojson::to_vec(&off)).unwrap_or_default();
    assert_eq!(
        text,
        r#"{"memory":0,"storage":0,"reserved_memory":0,"reserved_storage":0,"accounts":0,"ha_assets":0,"api":{"level":0,"total":0,"errors":0},"server_id":"S","now":"T","disabled":true,"config":{"max_memory":0,"max_storage":0},"streams":0,"consumers":0,"messages":0,"bytes":0,"total":0}"#
    );
    let on = Jsz {
        limits: Some(JsLimits::default()),
        streams_leader: 1,
        account_details: vec![AccountDetail {
            name: "$G".into(),
            id: "$G".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let v: serde_json::Value = serde_json::from_slice(&crate::proto::gojson::to_vec(&on)).unwrap_or_default();
    assert_eq!(v["limits"], serde_json::json!({}));
    assert_eq!(v["streams_leader"], 1);
    assert!(v.get("consumers_leader").is_none() && v.get("disabled").is_none());
    assert_eq!(v["account_details"][0]["api"]["level"], 0);
    assert!(v["account_details"][0].get("stream_detail").is_none());
    assert_eq!(
        serde_json::to_value(JetStreamVarz::default()).unwrap_or_default(),
        serde_json::json!({})
    );
}
