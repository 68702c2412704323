//! Accounts in the sans-IO core: isolation, stream and service imports, response
//! mappings, account limits and permissions, on one and several shards
//! (FEATURES.md §7 and §9; ARCHITECTURE.md, invariant 13).

use super::*;
use crate::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use crate::core::accounts::links::{ResponseType, Rewrite, ServiceImport, StreamLink, DEFAULT_RESPONSE_THRESHOLD};
use crate::core::accounts::AccountLimits;
use crate::core::perms::{PermSpec, SubjectPerm};

/// Accounts A (id 1) and B (id 2): A exports stream `feed.>` (B imports it with prefix
/// `a.`) and service `svc.>` (B imports it as is); users `a` and `b`.
pub(super) fn world(n: usize, perms_b: Option<PermSpec>, kind: ResponseType) -> World {
    let mut dir = UserDirectory::default();
    let mut w = World::new(n, CoreConfig::default());
    let t = w.shared.accounts.install(|b| {
        let mut a = b.plain("A");
        let mut bb = b.plain("B");
        a.stream_links.push(StreamLink {
            from: b"feed.>".to_vec().into(),
            importer: bb.id,
            rewrite: Rewrite::Prefix(b"a.".to_vec().into()),
            allow_trace: false,
        });
        bb.service_imports.push(ServiceImport {
            local: b"svc.>".to_vec().into(),
            exporter: a.id,
            rewrite: Rewrite::Same,
            export_subject: b"svc.>".to_vec().into(),
            response: kind,
            threshold: DEFAULT_RESPONSE_THRESHOLD,
            share: false,
            latency: None,
            allow_trace: false,
        });
        bb.limits = AccountLimits {
            max_connections: 3,
            ..AccountLimits::default()
        };
        b.add(a);
        b.add(bb);
    });
    let ida = t.by_name("A").unwrap().id;
    let idb = t.by_name("B").unwrap().id;
    for (name, acc, perms) in [("a", ida, None), ("b", idb, perms_b), ("b2", idb, None)] {
        dir.users.insert(
            name.into(),
            PasswordUser {
                name: name.into(),
                password: "p".into(),
                account: acc,
                permissions: perms,
                conn_types: Vec::new(),
                proxy_required: false,
            },
        );
    }
    let cfg = Arc::new(CoreConfig {
        authenticator: Arc::new(ConfigAuthenticator::new(dir)),
        ..CoreConfig::default()
    });
    for s in &mut w.shards {
        s.reconfigure(cfg.clone(), w.now);
    }
    w
}

pub(super) fn login(w: &mut World, shard: usize, user: &str) -> ConnKey {
    let (_, k) = w.connect(
        shard,
        &format!(r#"{{"verbose":false,"pedantic":false,"headers":true,"user":"{user}","pass":"p"}}"#),
    );
    w.send(shard, k, "PING\r\n");
    assert_eq!(w.take(shard, k), "PONG\r\n", "{user} logs in");
    k
}

#[test]
fn accounts_are_isolated_on_every_shard() {
    for n in [1, 3] {
        let mut w = world(n, None, ResponseType::Singleton);
        let a = login(&mut w, 0, "a");
        let b = login(&mut w, n - 1, "b");
        w.send(0, a, "SUB foo 1\r\nSUB foo q 2\r\nPING\r\n");
        w.send(n - 1, b, "SUB foo 1\r\nSUB foo q 2\r\nPING\r\n");
        w.take(0, a);
        w.take(n - 1, b);
        w.send(0, a, "PUB foo 2\r\nhi\r\n");
        let got_a = w.take(0, a);
        assert!(
            got_a.contains("MSG foo 1 2") && got_a.contains("MSG foo 2 2"),
            "{got_a}"
        );
        assert_eq!(w.take(n - 1, b), "", "nothing leaks into B ({n} shards)");
        w.send(n - 1, b, "PUB foo 2\r\nhi\r\n");
        let got_b = w.take(n - 1, b);
        assert!(
            got_b.contains("MSG foo 1 2") && got_b.contains("MSG foo 2 2"),
            "{got_b}"
        );
        assert_eq!(w.take(0, a), "");
    }
}

#[test]
fn stream_import_delivers_under_the_prefix() {
    for n in [1, 2] {
        let mut w = world(n, None, ResponseType::Singleton);
        let a = login(&mut w, 0, "a");
        let b = login(&mut w, n - 1, "b");
        w.send(n - 1, b, "SUB a.feed.> 1\r\nSUB feed.> 2\r\nPING\r\n");
        w.take(n - 1, b);
        w.send(0, a, "PUB feed.x r 2\r\nhi\r\nPUB other 2\r\nno\r\n");
        assert_eq!(w.take(n - 1, b), "MSG a.feed.x 1 r 2\r\nhi\r\n", "{n} shards");
    }
}

#[test]
fn service_import_round_trip_with_request_info() {
    for n in [1, 3] {
        let mut w = world(n, None, ResponseType::Singleton);
        let a = login(&mut w, 0, "a");
        let b = login(&mut w, n - 1, "b");
        w.send(0, a, "SUB svc.> 1\r\nPING\r\n");
        w.take(0, a);
        w.send(n - 1, b, "SUB _INBOX.x 9\r\nPUB svc.time _INBOX.x 3\r\nnow\r\n");
        let req = w.take(0, a);
        // HMSG svc.time 1 _R_.xxxxxx.yyyyyyyy <hdr> <total>
        let line = req.lines().next().unwrap().to_string();
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(&parts[..2], &["HMSG", "svc.time"], "{req}");
        let reply = parts[3].to_string();
        assert!(reply.starts_with("_R_.") && reply.len() == 19, "{reply}");
        assert!(req.contains("Nats-Request-Info: {\"acc\":\"B\""), "{req}");
        assert!(req.ends_with("now\r\n"));
        // The responder answers on the _R_ subject: B's requester gets it on its inbox.
        w.send(0, a, &format!("PUB {reply} 4\r\ntick\r\n"));
        assert_eq!(w.take(n - 1, b), "MSG _INBOX.x 9 4\r\ntick\r\n", "{n} shards");
        // Singleton: a second response goes nowhere.
        w.send(0, a, &format!("PUB {reply} 4\r\ntock\r\n"));
        assert_eq!(w.take(n - 1, b), "");
    }
}

#[test]
fn streamed_responses_flow_until_the_threshold() {
    let mut w = world(2, None, ResponseType::Stream);
    let a = login(&mut w, 0, "a");
    let b = login(&mut w, 1, "b");
    w.send(0, a, "SUB svc.> 1\r\nPING\r\n");
    w.take(0, a);
    w.send(1, b, "SUB _INBOX.s 9\r\nPUB svc.list _INBOX.s 0\r\n\r\n");
    let req = w.take(0, a);
    let reply = req.split(' ').nth(3).unwrap().to_string();
    for i in 0..3 {
        w.send(0, a, &format!("PUB {reply} 1\r\n{i}\r\n"));
        assert_eq!(w.take(1, b), format!("MSG _INBOX.s 9 1\r\n{i}\r\n"));
    }
    // Past the threshold the mapping is gone.
    w.advance(DEFAULT_RESPONSE_THRESHOLD + Duration::from_secs(2));
    w.take(1, b);
    w.take(0, a);
    w.send(0, a, &format!("PUB {reply} 1\r\nx\r\n"));
    assert_eq!(w.take(1, b), "");
}

#[test]
fn a_request_nobody_serves_gets_no_responders() {
    let mut w = world(1, None, ResponseType::Singleton);
    let b = login(&mut w, 0, "b");
    w.send(
        0,
        b,
        "CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true,\"user\":\"b\",\"pass\":\"p\"}\r\nSUB r 1\r\nPUB svc.none r 0\r\n\r\n",
    );
    let out = w.take(0, b);
    assert!(out.contains("NATS/1.0 503"), "{out}");
    assert!(
        w.shards[0].accts.iter().all(|a| a.responses.is_empty()),
        "mapping dropped"
    );
}

#[test]
fn account_connection_limit() {
    let mut w = world(2, None, ResponseType::Singleton);
    for i in 0..3 {
        login(&mut w, i % 2, "b");
    }
    let (s, k) = w.connect(1, r#"{"verbose":false,"user":"b","pass":"p"}"#);
    assert_eq!(w.take(s, k), "-ERR 'maximum account active connections exceeded'\r\n");
    assert_eq!(w.shards[s].status(k), ConnStatus::Close);
}

#[test]
fn permissions_deny_without_closing() {
    let perms = PermSpec {
        publish: Some(SubjectPerm {
            allow: Some(vec!["foo.>".into()]),
            deny: vec!["foo.secret".into()],
        }),
        subscribe: Some(SubjectPerm {
            allow: None,
            deny: vec!["foo.secret".into()],
        }),
        response: None,
    };
    let mut w = world(1, Some(perms), ResponseType::Singleton);
    let b = login(&mut w, 0, "b");
    w.send(
        0,
        b,
        "SUB foo.* 1\r\nSUB foo.secret 2\r\nPUB foo.x 1\r\nx\r\nPUB foo.secret 1\r\ns\r\nPUB bar 1\r\nb\r\nPING\r\n",
    );
    assert_eq!(
        w.take(0, b),
        "-ERR 'Permissions Violation for Subscription to \"foo.secret\"'\r\nMSG foo.x 1 1\r\nx\r\n\
         -ERR 'Permissions Violation for Publish to \"foo.secret\"'\r\n\
         -ERR 'Permissions Violation for Publish to \"bar\"'\r\nPONG\r\n"
    );
    // The delivery filter: `foo.*` does not carry `foo.secret` to b.
    let b2 = login(&mut w, 0, "b2");
    w.send(0, b2, "PUB foo.secret 1\r\ns\r\nPUB foo.open 1\r\no\r\n");
    assert_eq!(w.take(0, b), "MSG foo.open 1 1\r\no\r\n");
}
