//! Permission rules as nats-server applies them (FEATURES.md §9).
#![allow(clippy::unwrap_used)]

use super::*;

fn list(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn perm(allow: Option<&[&str]>, deny: &[&str]) -> Option<SubjectPerm> {
    Some(SubjectPerm {
        allow: allow.map(list),
        deny: list(deny),
    })
}

#[test]
fn publish_allow_then_deny_and_empty_allow_list() {
    let now = Instant::now();
    let mut p = Perms::new(PermSpec {
        publish: perm(Some(&["foo.>", "bar"]), &["foo.secret"]),
        ..Default::default()
    });
    assert!(p.can_publish(b"foo.a", now));
    assert!(p.can_publish(b"foo.a.b", now));
    assert!(p.can_publish(b"bar", now));
    assert!(!p.can_publish(b"foo.secret", now));
    assert!(!p.can_publish(b"baz", now));
    // Cached answers stay the same.
    assert!(!p.can_publish(b"foo.secret", now));
    assert!(p.can_publish(b"foo.a", now));

    let mut none = Perms::new(PermSpec {
        publish: perm(Some(&[]), &[]),
        ..Default::default()
    });
    assert!(!none.can_publish(b"anything", now));
    let mut deny_only = Perms::new(PermSpec {
        publish: perm(None, &["x.*"]),
        ..Default::default()
    });
    assert!(deny_only.can_publish(b"y", now));
    assert!(!deny_only.can_publish(b"x.y", now));
    assert!(deny_only.can_publish(b"x.y.z", now));
}

#[test]
fn the_publish_cache_stays_bounded() {
    let now = Instant::now();
    let mut p = Perms::new(PermSpec {
        publish: perm(Some(&["a.>"]), &[]),
        ..Default::default()
    });
    for i in 0..10_000 {
        let s = format!("a.{i}");
        assert!(p.can_publish(s.as_bytes(), now));
    }
    assert!(p.pub_cache.len() <= MAX_PUB_CACHE);
}

#[test]
fn subscribe_patterns_queues_and_the_delivery_filter() {
    let mut p = Perms::new(PermSpec {
        subscribe: perm(Some(&["foo.>", "q.* workers"]), &["foo.secret", "foo.bad q1"]),
        ..Default::default()
    });
    assert!(p.can_subscribe(b"foo.a", None));
    assert!(p.can_subscribe(b"foo.*", None), "a pattern is matched as a subject");
    assert!(!p.can_subscribe(b"foo.secret", None));
    assert!(!p.can_subscribe(b"bar", None));
    // Queue entries: only the named group may subscribe.
    assert!(p.can_subscribe(b"q.x", Some(b"workers")));
    assert!(!p.can_subscribe(b"q.x", Some(b"others")));
    assert!(!p.can_subscribe(b"q.x", None));
    // A deny entry with a queue denies that group only.
    assert!(!p.can_subscribe(b"foo.bad", Some(b"q1")));
    assert!(p.can_subscribe(b"foo.bad", Some(b"q2")));
    // `foo.*` overlaps the deny entries: messages on denied subjects are filtered.
    assert!(p.filters_delivery());
    assert!(p.delivery_denied(b"foo.secret", b""));
    assert!(!p.delivery_denied(b"foo.public", b""));
    assert!(p.delivery_denied(b"foo.bad", b"q1"));
    assert!(!p.delivery_denied(b"foo.bad", b""));
}

#[test]
fn literal_subscriptions_do_not_turn_the_filter_on() {
    let mut p = Perms::new(PermSpec {
        subscribe: perm(None, &["foo.secret"]),
        ..Default::default()
    });
    assert!(p.can_subscribe(b"foo.public", None));
    assert!(!p.filters_delivery());
    assert!(!p.delivery_denied(b"foo.secret", b""));
    assert!(p.can_subscribe(b"bar.*", None));
    assert!(!p.filters_delivery(), "bar.* cannot see foo.secret");
    assert!(p.can_subscribe(b">", None));
    assert!(p.filters_delivery());
}

#[test]
fn allow_responses_grants_one_reply_per_request() {
    let t0 = Instant::now();
    let spec = PermSpec {
        publish: perm(Some(&["svc.>"]), &[]),
        response: Some(ResponsePerm {
            max: 0,
            expires: Duration::ZERO,
        }),
        ..Default::default()
    }
    .normalized();
    assert_eq!(
        spec.response,
        Some(ResponsePerm {
            max: DEFAULT_RESPONSE_MAX,
            expires: DEFAULT_RESPONSE_EXPIRES
        })
    );
    let mut p = Perms::new(spec);
    assert!(!p.can_publish(b"_INBOX.1", t0));
    p.track_reply(b"_INBOX.1", t0);
    assert!(p.can_publish(b"_INBOX.1", t0));
    assert!(!p.can_publish(b"_INBOX.1", t0), "max 1 response");
    // Replies on allowed subjects are not tracked; expired grants are refused.
    p.track_reply(b"svc.reply", t0);
    assert!(p.replies.is_empty());
    p.track_reply(b"_INBOX.2", t0);
    assert!(!p.can_publish(b"_INBOX.2", t0 + DEFAULT_RESPONSE_EXPIRES + Duration::from_secs(1)));
}

#[test]
fn responses_alone_limit_publishing_to_replies() {
    let spec = PermSpec {
        response: Some(ResponsePerm {
            max: 2,
            expires: Duration::from_secs(1),
        }),
        ..Default::default()
    }
    .normalized();
    let now = Instant::now();
    let mut p = Perms::new(spec);
    assert!(!p.can_publish(b"foo", now));
    p.track_reply(b"r", now);
    assert!(p.can_publish(b"r", now));
    assert!(p.can_publish(b"r", now));
    assert!(!p.can_publish(b"r", now));
}

#[test]
fn malformed_entries_are_skipped() {
    let mut p = Perms::new(PermSpec {
        subscribe: perm(Some(&["a b c", "", "ok"]), &[]),
        ..Default::default()
    });
    assert!(p.can_subscribe(b"ok", None));
    assert!(!p.can_subscribe(b"a", None));
}
