//! Table tests: config text to options, and the reference's error texts.

use super::*;

fn load(text: &str) -> Result<(Options, Report), String> {
    let dir = std::env::temp_dir().join(format!("rnats-config-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("t{}.conf", N.fetch_add(1, Ordering::SeqCst)));
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    let mut o = Options::default();
    let r = apply_file(path.to_str().unwrap_or_default(), &mut o);
    let _ = std::fs::remove_file(&path);
    match r {
        Ok(rep) => Ok((o, rep)),
        Err(e) => {
            // Positions name the file; keep line:col and message only.
            Err(e
                .to_string()
                .lines()
                .map(|l| l.split_once(".conf:").map_or(l, |(_, rest)| rest).to_string())
                .collect::<Vec<_>>()
                .join("\n"))
        }
    }
}

#[test]
fn keys_and_aliases() {
    let (o, rep) = load(
        "listen: 127.0.0.1:4333\nserver_name: n1\nDEBUG: true\ntrace_verbose: true\nlogtime: false\n\
         max_payload: 2KB\nmax_pending: 1MB\nmax_conn: 10\nmax_subs: 5\nping_interval: \"30s\"\nping_max: 4\n\
         write_deadline: \"3s\"\nlog_file: \"/tmp/x.log\"\nlogfile_size_limit: 1000\nlog_max_num: 3\n\
         pid_file: p.pid\nports_file_dir: /tmp\nmax_traced_msg_len: 10\nlame_duck_duration: \"1m\"\n\
         lame_duck_grace_period: \"5s\"\nno_header_support: true\nno_sublist_cache: true\nhttp: \"127.0.0.1:8222\"\n\
         server_tags: [a]\n",
    )
    .unwrap();
    assert_eq!(
        (o.host.as_str(), o.port, o.server_name.as_str()),
        ("127.0.0.1", 4333, "n1")
    );
    assert!(o.debug && o.trace && o.trace_verbose && !o.logtime);
    assert_eq!(
        (o.max_payload, o.max_pending, o.max_connections),
        (2048, 1024 * 1024, 10)
    );
    assert_eq!((o.max_subscriptions, o.ping_max), (5, 4));
    assert_eq!(o.ping_interval, Duration::from_secs(30));
    assert_eq!(o.write_deadline, Duration::from_secs(3));
    assert_eq!(
        (o.log_file.as_str(), o.log_size_limit, o.log_max_num),
        ("/tmp/x.log", 1000, 3)
    );
    assert_eq!((o.pid_file.as_str(), o.ports_file_dir.as_str()), ("p.pid", "/tmp"));
    assert_eq!(o.lame_duck_duration, Duration::from_secs(60));
    assert_eq!(o.lame_duck_grace_period, Duration::from_secs(5));
    assert!(o.no_header_support && o.no_sublist_cache);
    assert_eq!((o.http_host.as_str(), o.http_port), ("127.0.0.1", 8222));
    assert!(o.config_digest.starts_with("sha256:"));
    assert_eq!(rep.notes.len(), 1, "{:?}", rep.notes);
    assert!(rep.notes[0].ends_with("\"server_tags\" has no effect in rnats yet"));
}

#[test]
fn authorization_blocks() {
    let (o, _) = load("authorization { user: a, password: b, timeout: 0.5 }").unwrap();
    assert_eq!(
        (o.username.as_str(), o.password.as_str(), o.auth_timeout),
        ("a", "b", 0.5)
    );
    let (o, _) = load("authorization { token: \"$2a$11$abc\" }").unwrap();
    assert_eq!(o.authorization, "$2a$11$abc");
    let (o, _) = load("authorization { users = [ {user: a, password: x}, {username: b, pass: y} ] }").unwrap();
    let users = &o.security.users;
    assert_eq!(users.len(), 2);
    assert_eq!((users[1].username.as_str(), users[1].password.as_str()), ("b", "y"));
    assert!(o.core_config().authenticator.required());
    let (o, _) = load("authorization { users = [] }").unwrap();
    assert!(o.security.users.is_empty() && !o.core_config().authenticator.required());
}

#[test]
fn errors_as_the_reference_words_them() {
    let cases: &[(&str, &str)] = &[
        ("foo: 1", "1:0: unknown field \"foo\""),
        (
            "port: \"x\"",
            "1:0: interface conversion: interface {} is string, not int64",
        ),
        ("debug: 1", "1:0: interface conversion: interface {} is int64, not bool"),
        (
            "authorization: 1",
            "1:0: interface conversion: interface {} is int64, not map[string]interface {}\n\
             1:0: runtime error: invalid memory address or nil pointer dereference",
        ),
        (
            "ping_interval: \"5x\"",
            "1:0: error parsing ping_interval: time: unknown unit \"x\" in duration \"5x\"",
        ),
        (
            "lame_duck_duration: \"10s\"",
            "1:0: invalid lame_duck_duration of 10s, minimum is 30 seconds",
        ),
        (
            "lame_duck_grace_period: \"-1s\"",
            "1:0: invalid lame_duck_grace_period, needs to be positive",
        ),
        ("server_name: \"a b\"", "1:0: server name cannot contain spaces"),
        ("listen: \"nohost\"", "1:0: could not parse address string \"nohost\""),
        ("listen: \"h:x\"", "1:0: could not parse port \"x\""),
        ("max_payload: 3000000000", "1:0: max_payload value is too big"),
        ("max_sub_tokens: 0", "1:0: max_sub_tokens value can not be negative"),
        (
            "authorization { user: a, token: b }",
            "1:0: Cannot have a user/pass and token",
        ),
        (
            "authorization { user: a, users: [] }",
            "1:0: Can not have a single user/pass and a users array",
        ),
        (
            "authorization { token: a, users: [] }",
            "1:0: Can not have a token and a users array",
        ),
        (
            "authorization { users: [ {user: a}, {user: a} ] }",
            "1:0: Duplicate user \"a\" detected",
        ),
        (
            "authorization { users: [ 5 ] }",
            "1:25: Expected user entry to be a map/struct, got 5",
        ),
        ("mqtt { }", "1:0: \"mqtt\" is not supported by rnats yet"),
        ("tls { x: 1 }", "1:6: error parsing tls config, unknown field \"x\""),
        ("websocket: 5", "1:0: Expected websocket to be a map, got int64"),
        ("authorization { x: 1 }", "1:16: unknown field \"x\""),
    ];
    for (text, want) in cases {
        assert_eq!(load(text).unwrap_err(), *want, "{text}");
    }
}

#[test]
fn warnings_do_not_fail_a_load() {
    let (o, rep) = load("ping_interval: 5").unwrap();
    assert_eq!(o.ping_interval, Duration::from_secs(5));
    assert_eq!(rep.warnings.len(), 1);
    assert!(rep.warnings[0]
        .ends_with("invalid use of field \"ping_interval\": ping_interval should be converted to a duration"));
    let (_, rep) = load("").unwrap();
    assert!(rep.warnings[0].ends_with("config has no values or is empty"));
}

#[test]
fn used_variables_are_not_unknown() {
    let (o, _) = load("p = 4333\nport: $p\n").unwrap();
    assert_eq!(o.port, 4333);
}

mod security {
    use super::load;
    use crate::auth::config::*;
    use std::time::Duration;

    #[test]
    fn users_nkeys_and_permissions() {
        let u = nkeys::KeyPair::new_user().public_key();
        let text = format!(
            "authorization {{\n default_permissions: {{ subscribe: {{ deny: \">\" }} }}\n users: [\n  \
             {{user: a, password: pa, permissions: {{ publish: [\"x\", \"y.>\"], subscribe: {{ allow: \"q.* grp\" }}, \
             allow_responses: {{ max: 5, expires: \"1s\" }} }}, allowed_connection_types: [websocket, STANDARD], proxy_required: true}}\n  \
             {{user: b, password: pb}}\n  {{nkey: {u}}}\n ]\n timeout: 3\n}}\nno_auth_user: b\n"
        );
        let (o, _) = load(&text).unwrap();
        let s = &o.security;
        assert!(s.authorization_block);
        assert_eq!(o.auth_timeout, 3.0);
        let a = &s.users[0];
        assert_eq!(
            (a.username.as_str(), a.password.as_str(), a.proxy_required),
            ("a", "pa", true)
        );
        assert_eq!(
            a.allowed_connection_types,
            Some(vec!["WEBSOCKET".to_string(), "STANDARD".to_string()])
        );
        let p = a.permissions.as_ref().unwrap();
        assert_eq!(
            p.publish,
            Some(SubjectPermission {
                allow: Some(vec!["x".into(), "y.>".into()]),
                deny: None
            })
        );
        assert_eq!(p.subscribe.as_ref().unwrap().allow, Some(vec!["q.* grp".to_string()]));
        assert_eq!(
            p.response,
            Some(ResponsePermission {
                max_msgs: 5,
                expires_nanos: 1_000_000_000
            })
        );
        // The block's default permissions go to the users without their own.
        let deny_all = Some(SubjectPermission {
            allow: None,
            deny: Some(vec![">".into()]),
        });
        assert_eq!(s.users[1].permissions.as_ref().unwrap().subscribe, deny_all);
        assert_eq!(s.nkeys[0].nkey, u);
        assert_eq!(s.nkeys[0].permissions.as_ref().unwrap().subscribe, deny_all);
        assert_eq!(s.no_auth_user, "b");
        assert!(
            o.refuse_missing_features().is_ok(),
            "proxy_required and the rest are all supported"
        );
    }

    #[test]
    fn responses_only_turn_off_blanket_publish() {
        let (o, _) = load("authorization { users: [ {user: a, permissions: { allow_responses: true }} ] }").unwrap();
        let p = o.security.users[0].permissions.clone().unwrap();
        assert_eq!(p.response, Some(ResponsePermission::default()));
        assert_eq!(p.publish.unwrap().allow, Some(vec![]));
    }

    #[test]
    fn accounts_exports_imports_mappings() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/tests/fixtures/security/services.conf"),
        )
        .unwrap();
        let (o, rep) = load(&text).unwrap();
        assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
        let s = &o.security;
        let names: Vec<&str> = s.accounts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["provider", "consumer"]);
        let p = s.account("provider").unwrap();
        assert_eq!(p.exports.len(), 5);
        assert_eq!(
            p.exports[1],
            Export {
                subject: "private.>".into(),
                accounts: Some(vec!["consumer".into()]),
                account_token_position: 0,
                kind: ExportKind::Stream
            }
        );
        let ExportKind::Service(api) = &p.exports[2].kind else {
            panic!()
        };
        assert_eq!(api.response_type, ResponseType::Streamed);
        assert_eq!(api.response_threshold, Some(Duration::from_secs(5)));
        let ExportKind::Service(ping) = &p.exports[3].kind else {
            panic!()
        };
        assert_eq!(
            ping.latency,
            Some(Latency {
                sampling: LatencySampling::Percent(25),
                subject: "latency.ping".into()
            })
        );
        assert_eq!(p.exports[4].account_token_position, 2);
        assert_eq!(p.mappings[0].destinations[0].subject, "orders");
        assert_eq!(
            p.mappings[1].destinations.iter().map(|d| d.weight).collect::<Vec<_>>(),
            [30, 70]
        );
        assert_eq!(
            p.limits,
            AccountLimits {
                max_connections: 100,
                max_subscriptions: 1000,
                max_payload: 65536,
                max_leafnodes: -1
            }
        );
        let c = s.account("consumer").unwrap();
        assert_eq!(
            c.imports[0],
            Import::Stream(StreamImport {
                account: "provider".into(),
                subject: "metrics.>".into(),
                prefix: "from.provider".into(),
                to: String::new(),
                allow_trace: false
            })
        );
        assert_eq!(
            c.imports[2],
            Import::Service(ServiceImport {
                account: "provider".into(),
                subject: "api.x".into(),
                to: "provider.api".into(),
                share: false
            })
        );
        assert!(matches!(&c.imports[3], Import::Service(i) if i.share && i.to == "ping"));
        assert_eq!(
            c.msg_trace,
            Some(MsgTrace {
                dest: "trace.consumer".into(),
                sampling: 10
            })
        );
        let cu: Vec<&User> = s.account_users("consumer").collect();
        assert_eq!(cu.len(), 1);
        // Account default permissions, with responses allowed.
        let perms = cu[0].permissions.as_ref().unwrap();
        assert!(perms.response.is_some());
        assert_eq!(s.global_mappings[0].source, "legacy.>");
        assert_eq!(
            s.users.iter().map(|u| u.account.as_deref()).collect::<Vec<_>>(),
            [Some("provider"), Some("consumer")]
        );
    }

    #[test]
    fn cross_account_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "accounts { A { exports: [{stream: \"x.>\"}], imports: [ {stream: {account: B, subject: \"y.>\"}, to: \"x.>\"} ] }, \
                 B { exports: [{stream: \"y.>\"}], imports: [ {stream: {account: A, subject: \"x.>\"}, to: \"y.>\"} ] } }",
                "1:0: Error adding stream import \"x.>\": import forms a cycle",
            ),
            (
                "accounts { A { exports: [{service: \"x\"}], imports: [ {service: {account: B, subject: \"y\"}, to: \"x\"} ] }, \
                 B { exports: [{service: \"y\"}], imports: [ {service: {account: A, subject: \"x\"}, to: \"y\"} ] } }",
                "1:0: Error adding service import \"x\": import forms a cycle",
            ),
            (
                "no_system_account: true\naccounts { A { exports: [ {service: \"foo\", latency: \"lat\"} ] } }",
                "2:1: Error adding service latency sampling for \"foo\": system account not setup",
            ),
            (
                "accounts { A { users: [ {user: a, password: b} ] } }\nauthorization { user: x, password: y }",
                "2:1: Can not have a single user/pass and a users array",
            ),
            (
                "authorization { user: x, password: y }\naccounts { A { users: [ {user: a, password: b} ] } }",
                "2:16: Can not have a single user/pass and accounts",
            ),
            (
                "accounts { A { users: [ {user: a} ] }, B { users: [ {user: a} ] } }",
                "1:43: Duplicate user \"a\" detected",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(load(text).unwrap_err(), *want, "{text}");
        }
    }

    #[test]
    fn operators_resolvers_and_store_dir() {
        let op = nkeys::KeyPair::new_operator();
        let sys = nkeys::KeyPair::new_account().public_key();
        let jwt = crate::server::config::jwt::tests::sign(
            &op,
            serde_json::json!({"sub": op.public_key(), "name": "op",
                "nats": {"type": "operator", "version": 2, "system_account": sys, "account_server_url": "http://h:1"}}),
        );
        let (o, _) = load(&format!("operator: {jwt}\nstore_dir: /tmp/js\n")).unwrap();
        let s = &o.security;
        assert_eq!(s.operators[0].subject, op.public_key());
        assert_eq!(s.system_account, sys, "taken from the operator");
        assert_eq!(s.resolver, Some(ResolverConfig::Url("http://h:1/accounts/".into())));
        assert_eq!(o.store_dir, "/tmp/js");
        let (o, _) = load(&format!("resolver: MEMORY\noperator: {jwt}\n")).unwrap();
        assert_eq!(
            o.security.resolver,
            Some(ResolverConfig::Memory),
            "an explicit resolver wins"
        );
        let dir = std::env::temp_dir().join(format!("rnats-resolver-{}", std::process::id()));
        let text = format!(
            "resolver {{ type: full, dir: \"{}\", allow_delete: true, interval: \"1m\", timeout: \"2s\" }}",
            dir.display()
        );
        let (o, _) = load(&text).unwrap();
        assert!(dir.is_dir(), "the directory is made, as the reference does");
        assert_eq!(
            o.security.resolver,
            Some(ResolverConfig::Full(DirResolver {
                dir: dir.display().to_string(),
                interval: Duration::from_secs(60),
                timeout: Some(Duration::from_secs(2)),
                delete: DeleteMode::Rename,
                ..DirResolver::default()
            }))
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            load("store_dir: a\nstoredir: b").unwrap_err(),
            "2:1: Duplicate 'store_dir' configuration"
        );
        let (o, _) = load("resolver_pinned_accounts: [b, a, b]\ntrusted: []").unwrap();
        assert_eq!(o.security.resolver_pinned_accounts, ["b", "a"]);
        assert_eq!(
            load("jetstream { }").unwrap_err(),
            "1:0: \"jetstream\" is not supported by rnats yet"
        );
    }
}
