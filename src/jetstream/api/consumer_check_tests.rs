//! Tests of the consumer configuration rules; expected values are what the reference
//! answered (`consumer_create_response`) or its rule texts.

use super::*;
use crate::jetstream::api::config::{ConsumerLimits, StorageType};
use crate::jetstream::api::consumer_info::ConsumerAction;
use crate::jetstream::api::time::GoTime;

fn stream() -> StreamConfig {
    StreamConfig {
        name: "S".into(),
        subjects: vec!["s.>".into()],
        num_replicas: 1,
        storage: StorageType::File,
        ..StreamConfig::default()
    }
}

fn ctx(s: &StreamConfig) -> ConsumerCtx<'_> {
    ConsumerCtx {
        stream: s,
        pedantic: false,
        account_max_ack_pending: 0,
        server_max_ack_pending: -1,
        server_max_request_batch: 0,
    }
}

fn create(cfg: ConsumerConfig, s: &StreamConfig) -> Result<ConsumerConfig, ApiError> {
    let mut cfg = cfg;
    set_static_metadata(&mut cfg);
    let c = ctx(s);
    apply_defaults(&mut cfg, &c)?;
    check(&cfg, &c, false)?;
    Ok(cfg)
}

#[test]
fn defaults_match_reference() {
    let s = stream();
    // Durable pull, only ack_policy explicit (jetstream-api.md §10).
    let cfg = create(
        ConsumerConfig {
            durable_name: "C".into(),
            name: "C".into(),
            ack_policy: AckPolicy::Explicit,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap();
    let j = serde_json::to_string(&with_dynamic_metadata(&cfg)).unwrap();
    assert_eq!(
        j,
        r#"{"durable_name":"C","name":"C","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,"metadata":{"_nats.level":"4","_nats.req.level":"0","_nats.ver":"2.14.0"}}"#
    );
    // Ephemeral push with flow control: no max_waiting, no max_ack_pending for ack none.
    let cfg = create(
        ConsumerConfig {
            deliver_subject: "dd".into(),
            idle_heartbeat: 1_000_000_000,
            flow_control: true,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap();
    assert_eq!(
        (cfg.max_waiting, cfg.max_ack_pending, cfg.ack_wait, cfg.max_deliver),
        (0, 0, 0, -1)
    );
    // Pinned client: default priority_timeout 2m and required level 1.
    let cfg = create(
        ConsumerConfig {
            name: "G".into(),
            ack_policy: AckPolicy::Explicit,
            priority_groups: vec!["g1".into()],
            priority_policy: PriorityPolicy::PinnedClient,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap();
    assert_eq!(cfg.priority_timeout, 120_000_000_000);
    assert_eq!(cfg.metadata.get(META_REQUIRED_LEVEL).map(String::as_str), Some("1"));
    // Backoff overrides ack_wait; limits lower max_ack_pending.
    let mut c = ctx(&s);
    c.account_max_ack_pending = 300;
    c.server_max_ack_pending = 500;
    let mut cfg = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        backoff: vec![1_000_000_000, 2_000_000_000],
        ..ConsumerConfig::default()
    };
    apply_defaults(&mut cfg, &c).unwrap();
    assert_eq!((cfg.ack_wait, cfg.max_ack_pending), (1_000_000_000, 300));
    // Flow-control acks switch flow control and the 1s heartbeat on.
    let mut cfg = ConsumerConfig {
        ack_policy: AckPolicy::FlowControl,
        deliver_subject: "dd".into(),
        max_ack_pending: 10,
        ..ConsumerConfig::default()
    };
    apply_defaults(&mut cfg, &ctx(&s)).unwrap();
    assert!(cfg.flow_control);
    assert_eq!(cfg.idle_heartbeat, 1_000_000_000);
    check(&cfg, &ctx(&s), false).unwrap();
    set_static_metadata(&mut cfg);
    assert_eq!(cfg.metadata.get(META_REQUIRED_LEVEL).map(String::as_str), Some("4"));
}

#[test]
fn stream_limits_and_pedantic() {
    let mut s = stream();
    s.consumer_limits = ConsumerLimits {
        inactive_threshold: 5_000_000_000,
        max_ack_pending: 100,
    };
    let cfg = create(
        ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap();
    assert_eq!((cfg.max_ack_pending, cfg.inactive_threshold), (100, 5_000_000_000));
    let e = create(
        ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            max_ack_pending: 200,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap_err();
    assert_eq!(
        (e.err_code, e.description.as_str()),
        (10121, "consumer max ack pending exceeds system limit of 100")
    );
    let e = create(
        ConsumerConfig {
            inactive_threshold: 6_000_000_000,
            ..ConsumerConfig::default()
        },
        &s,
    )
    .unwrap_err();
    assert_eq!(
        (e.err_code, e.description.as_str()),
        (10153, "consumer inactive threshold exceeds system limit of 5s")
    );

    let mut c = ctx(&s);
    c.pedantic = true;
    let mut cfg = ConsumerConfig {
        max_deliver: -5,
        ..ConsumerConfig::default()
    };
    let e = apply_defaults(&mut cfg, &c).unwrap_err();
    assert_eq!(
        (e.err_code, e.description.as_str()),
        (10157, "pedantic mode: max_deliver must be set to -1")
    );
    let mut cfg = ConsumerConfig::default();
    let e = apply_defaults(&mut cfg, &c).unwrap_err();
    assert_eq!(
        e.description,
        "pedantic mode: max_ack_pending must be set if it's configured in stream limits"
    );
    // Not pedantic: negatives are corrected.
    let mut cfg = ConsumerConfig {
        max_deliver: -5,
        max_waiting: -1,
        max_ack_pending: -9,
        ..ConsumerConfig::default()
    };
    apply_defaults(&mut cfg, &ctx(&stream())).unwrap();
    assert_eq!((cfg.max_deliver, cfg.max_waiting, cfg.max_ack_pending), (-1, 512, -1));
}

#[test]
fn check_errors() {
    let s = stream();
    let base = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        ..ConsumerConfig::default()
    };
    let push = ConsumerConfig {
        deliver_subject: "dd".into(),
        ..ConsumerConfig::default()
    };
    let cases: Vec<(ConsumerConfig, u16, &str)> = vec![
        (
            ConsumerConfig {
                name: "a.b".into(),
                ..base.clone()
            },
            10052,
            "consumer name can not contain '.', '*', '>', '\\', '/'",
        ),
        (
            ConsumerConfig {
                num_replicas: 3,
                ..base.clone()
            },
            10126,
            "",
        ),
        (
            ConsumerConfig {
                num_replicas: -1,
                ..base.clone()
            },
            10133,
            "",
        ),
        (
            ConsumerConfig {
                backoff: vec![-1],
                max_deliver: 5,
                ..base.clone()
            },
            10184,
            "",
        ),
        (
            ConsumerConfig {
                backoff: vec![1, 2, 3],
                max_deliver: 2,
                ..base.clone()
            },
            10116,
            "",
        ),
        (
            ConsumerConfig {
                description: "x".repeat(4097),
                ..base.clone()
            },
            10107,
            "consumer description is too long, maximum allowed is 4096",
        ),
        (
            ConsumerConfig {
                deliver_subject: "d.*".into(),
                ..push.clone()
            },
            10079,
            "",
        ),
        (
            ConsumerConfig {
                deliver_subject: "s.x".into(),
                ..push.clone()
            },
            10081,
            "",
        ),
        (
            ConsumerConfig {
                max_waiting: 3,
                ..push.clone()
            },
            10080,
            "",
        ),
        (
            ConsumerConfig {
                idle_heartbeat: 50_000_000,
                ..push.clone()
            },
            10083,
            "consumer idle heartbeat needs to be >= 100ms",
        ),
        (
            ConsumerConfig {
                flow_control: true,
                ..push.clone()
            },
            10108,
            "",
        ),
        (
            ConsumerConfig {
                rate_limit_bps: 5,
                ..base.clone()
            },
            10086,
            "",
        ),
        (
            ConsumerConfig {
                max_expires: 5,
                ..base.clone()
            },
            10115,
            "",
        ),
        (
            ConsumerConfig {
                filter_subject: "a".into(),
                filter_subjects: vec!["b".into()],
                ..base.clone()
            },
            10136,
            "",
        ),
        (
            ConsumerConfig {
                filter_subjects: vec!["a.*".into(), "a.b".into()],
                ..base.clone()
            },
            10138,
            "",
        ),
        (
            ConsumerConfig {
                filter_subjects: vec![String::new()],
                ..base.clone()
            },
            10139,
            "",
        ),
        (
            ConsumerConfig {
                filter_subject: "a..b".into(),
                ..base.clone()
            },
            10052,
            "invalid subject",
        ),
        (
            ConsumerConfig {
                opt_start_seq: 3,
                ..base.clone()
            },
            10094,
            "consumer delivery policy is deliver all, but optional start sequence is also set",
        ),
        (
            ConsumerConfig {
                deliver_policy: DeliverPolicy::ByStartSequence,
                ..base.clone()
            },
            10094,
            "consumer delivery policy is deliver by start sequence, but optional start sequence is not set",
        ),
        (
            ConsumerConfig {
                deliver_policy: DeliverPolicy::LastPerSubject,
                ..base.clone()
            },
            10094,
            "consumer delivery policy is deliver last per subject, but optional filter subject is not set",
        ),
        (
            ConsumerConfig {
                deliver_policy: DeliverPolicy::ByStartTime,
                opt_start_seq: 1,
                opt_start_time: Some(GoTime(5)),
                ..base.clone()
            },
            10094,
            "consumer delivery policy is deliver by start time, but optional start start sequence is also set",
        ),
        (
            ConsumerConfig {
                sample_freq: "x%".into(),
                ..base.clone()
            },
            10095,
            "failed to parse consumer sampling configuration: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            ConsumerConfig {
                durable_name: "A".into(),
                name: "B".into(),
                ..base.clone()
            },
            10132,
            "",
        ),
        (
            ConsumerConfig {
                priority_policy: PriorityPolicy::Overflow,
                ..base.clone()
            },
            10159,
            "",
        ),
        (
            ConsumerConfig {
                priority_policy: PriorityPolicy::Overflow,
                priority_groups: vec!["bad group".into()],
                ..base.clone()
            },
            10162,
            "",
        ),
        (
            ConsumerConfig {
                priority_groups: vec!["g".into()],
                ..base.clone()
            },
            10196,
            "",
        ),
        (
            ConsumerConfig {
                ack_policy: AckPolicy::FlowControl,
                max_ack_pending: 5,
                ..base.clone()
            },
            10218,
            "",
        ),
    ];
    for (cfg, code, text) in cases {
        let mut c = cfg.clone();
        apply_defaults(&mut c, &ctx(&s)).unwrap();
        let e = check(&c, &ctx(&s), false).expect_err(&format!("{cfg:?}"));
        assert_eq!(e.err_code, code, "{cfg:?}: {e}");
        if !text.is_empty() {
            assert_eq!(e.description, text);
        }
    }
}

#[test]
fn update_rules() {
    let old = ConsumerConfig {
        name: "P".into(),
        ack_policy: AckPolicy::Explicit,
        max_waiting: 512,
        ..ConsumerConfig::default()
    };
    assert!(check_update(&old, &old).is_ok());
    let ok = ConsumerConfig {
        description: "d".into(),
        max_ack_pending: 7,
        ack_wait: 5,
        filter_subject: "x".into(),
        ..old.clone()
    };
    assert!(check_update(&old, &ok).is_ok());
    let cases: Vec<(ConsumerConfig, &str)> = vec![
        (
            ConsumerConfig {
                deliver_policy: DeliverPolicy::New,
                ..old.clone()
            },
            "deliver policy can not be updated",
        ),
        (
            ConsumerConfig {
                max_waiting: 3,
                ..old.clone()
            },
            "max waiting can not be updated",
        ),
        (
            ConsumerConfig {
                ack_policy: AckPolicy::All,
                ..old.clone()
            },
            "ack policy can not be updated",
        ),
        (
            ConsumerConfig {
                opt_start_time: Some(GoTime(1)),
                ..old.clone()
            },
            "start time can not be updated",
        ),
        (
            ConsumerConfig {
                deliver_subject: "d".into(),
                ..old.clone()
            },
            "can not update pull consumer to push based",
        ),
    ];
    for (new, text) in cases {
        let e = check_update(&old, &new).unwrap_err();
        assert_eq!((e.code, e.err_code, e.description.as_str()), (500, 10012, text));
    }
    let push = ConsumerConfig {
        deliver_subject: "a".into(),
        ..old.clone()
    };
    let moved = ConsumerConfig {
        deliver_subject: "b".into(),
        ..push.clone()
    };
    assert!(check_update(&push, &moved).is_ok());
    assert_eq!(check_update_bound(&push, &moved, true).unwrap_err().err_code, 10013);
}

#[test]
fn create_subjects() {
    let named = |s: &str, n: &str, f: Option<&str>| CreateSubject::Named {
        stream: s.into(),
        name: n.into(),
        filter: f.map(String::from),
    };
    let cases = [
        (
            "$JS.API.CONSUMER.CREATE.S",
            Some(CreateSubject::Legacy { stream: "S".into() }),
        ),
        ("$JS.API.CONSUMER.CREATE.S.C", Some(named("S", "C", None))),
        (
            "$JS.API.CONSUMER.CREATE.S.C.a.b.>",
            Some(named("S", "C", Some("a.b.>"))),
        ),
        (
            "$JS.API.CONSUMER.DURABLE.CREATE.S.C",
            Some(CreateSubject::Durable {
                stream: "S".into(),
                name: "C".into(),
            }),
        ),
        ("$JS.API.CONSUMER.DURABLE.CREATE.S.C.x", None),
        ("$JS.API.CONSUMER.DURABLE.CREATE.S", None),
        ("$JS.API.CONSUMER.CREATE", None),
        ("$JS.API.CONSUMER.INFO.S.C", None),
    ];
    for (subj, want) in cases {
        assert_eq!(parse_create_subject(subj), want, "{subj}");
    }

    let req = |durable: &str, name: &str, filter: &str| CreateConsumerRequest {
        stream_name: "S".into(),
        config: ConsumerConfig {
            durable_name: durable.into(),
            name: name.into(),
            filter_subject: filter.into(),
            ..ConsumerConfig::default()
        },
        action: ConsumerAction::CreateOrUpdate,
        pedantic: false,
    };
    let mut r = req("", "other", "");
    assert_eq!(resolve_create(&named("S", "X", None), &mut r).unwrap(), "X");
    assert_eq!(r.config.name, "X");
    let mut r = req("", "", "");
    assert_eq!(
        resolve_create(&CreateSubject::Legacy { stream: "S".into() }, &mut r).unwrap(),
        ""
    );
    let errs: Vec<(CreateSubject, CreateConsumerRequest, u16)> = vec![
        (named("T", "X", None), req("", "", ""), 10056),
        (named("S", "X", None), req("Y", "", ""), 10017),
        (named("S", "X", Some("s.b")), req("", "", "s.c"), 10131),
        (CreateSubject::Legacy { stream: "S".into() }, req("D", "", ""), 10020),
        (
            CreateSubject::Durable {
                stream: "S".into(),
                name: "D".into(),
            },
            req("", "", ""),
            10018,
        ),
        (
            CreateSubject::Durable {
                stream: "S".into(),
                name: "D".into(),
            },
            req("E", "", ""),
            10017,
        ),
    ];
    for (subj, mut r, code) in errs {
        assert_eq!(resolve_create(&subj, &mut r).unwrap_err().err_code, code, "{subj:?}");
    }
}

#[test]
fn metadata_and_names() {
    let mut cfg = ConsumerConfig::default();
    cfg.metadata.insert("_nats.ver".into(), "1".into());
    cfg.metadata.insert("_nats.foo".into(), "x".into());
    cfg.metadata.insert("_nats.req.level".into(), "9".into());
    set_static_metadata(&mut cfg);
    let keys: Vec<(&str, &str)> = cfg.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(keys, [("_nats.foo", "x"), ("_nats.req.level", "0")]);
    let shown = with_dynamic_metadata(&cfg);
    assert_eq!(shown.metadata.len(), 4);

    let n = ephemeral_name();
    assert_eq!(n.len(), 8);
    assert!(n.bytes().all(|c| c.is_ascii_alphanumeric()), "{n}");
    assert_ne!(ephemeral_name(), ephemeral_name());
}

#[test]
fn work_queue_rules() {
    let mut s = stream();
    s.retention = Retention::WorkQueue;
    let a = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        filter_subject: "s.a".into(),
        ..ConsumerConfig::default()
    };
    assert!(check_work_queue(&a, "A", &s, []).is_ok());
    let none = ConsumerConfig::default();
    assert_eq!(check_work_queue(&none, "N", &s, []).unwrap_err().err_code, 10098);
    let others = [("A", &a)];
    let all = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        ..ConsumerConfig::default()
    };
    assert_eq!(check_work_queue(&all, "B", &s, others).unwrap_err().err_code, 10099);
    let overlap = ConsumerConfig {
        filter_subject: "s.*".into(),
        ..all.clone()
    };
    assert_eq!(check_work_queue(&overlap, "B", &s, others).unwrap_err().err_code, 10100);
    let fine = ConsumerConfig {
        filter_subject: "s.b".into(),
        ..all.clone()
    };
    assert!(check_work_queue(&fine, "B", &s, others).is_ok());
    // Updating A itself is not an overlap.
    assert!(check_work_queue(&a, "A", &s, others).is_ok());
}
