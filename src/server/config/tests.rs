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
        assert_eq!(o.jetstream.store_dir, "/tmp/js");
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
    }
}

/// The `jetstream` key; texts from nats-server 2.14.0's `-t`.
mod jetstream {
    use super::*;
    use crate::server::jetstream_opts::{JetStreamOptions, StoreCipher};

    fn js(text: &str) -> Result<JetStreamOptions, String> {
        load(text).map(|(o, _)| o.jetstream)
    }

    #[test]
    fn forms_of_the_key() {
        for (text, enabled) in [
            ("jetstream: enabled", true),
            ("jetstream: Enable", true),
            ("jetstream: disabled", false),
            ("jetstream: disable", false),
            ("jetstream: true", true),
            ("jetstream: yes", true),
            ("jetstream: false", false),
            ("jetstream {}", true),
            ("jetstream { enabled: false }", false),
            ("jetstream { enable: true, domain: x }", true),
        ] {
            assert_eq!(js(text).map(|j| j.enabled), Ok(enabled), "{text}");
        }
    }

    #[test]
    fn block_keys_and_aliases() {
        let j = js("jetstream {\n  store: /data\n  max_mem: 1G\n  max_file_store: \"2G\"\n  domain: hub\n  \
                    sync: always\n  ek: s3cr3t\n  prev_encryption_key: old\n  cipher: AES\n  unique_tag: \" AZ \"\n  \
                    strict: false\n  extension_hint: will_extend\n  max_outstanding_catchup: \"64M\"\n  \
                    max_buffered_size: 1K\n  max_buffered_msgs: 10\n  request_queue_limit: 50\n  info_queue_limit: 5\n  \
                    meta_compact: 3\n  meta_compact_size: \"1K\"\n  meta_compact_sync: true\n  \
                    limits { max_ack_pending: 100, max_ha_assets: 2, max_request_batch: 9, duplicate_window: \"2m\",\n    \
                    batch { max_inflight_per_stream: 1, max_inflight_total: 2, max_msgs: 3, timeout: \"4s\" } }\n}")
        .unwrap();
        assert!(j.enabled && !j.strict && j.sync_always && j.meta_compact_sync);
        assert_eq!(j.store_dir, "/data");
        assert_eq!((j.max_memory, j.max_store), (1_000_000_000, 2 << 30));
        assert_eq!((j.domain.as_str(), j.unique_tag.as_str()), ("hub", "az"));
        assert_eq!(
            (j.key.as_str(), j.prev_key.as_str(), j.cipher),
            ("s3cr3t", "old", StoreCipher::Aes)
        );
        assert_eq!(j.extension_hint, "will_extend");
        assert_eq!(j.sync_interval, Some(Duration::from_secs(120)));
        assert_eq!(
            (j.max_outstanding_catchup, j.max_buffered_size, j.max_buffered_msgs),
            (64 << 20, 1000, 10)
        );
        assert_eq!((j.request_queue_limit, j.info_queue_limit), (50, 5));
        assert_eq!((j.meta_compact, j.meta_compact_size), (3, 1024));
        let l = &j.limits;
        assert_eq!((l.max_ack_pending, l.max_ha_assets, l.max_request_batch), (100, 2, 9));
        assert_eq!(l.duplicate_window, Duration::from_secs(120));
        assert_eq!(
            (
                l.max_batch_inflight_per_stream,
                l.max_batch_inflight_total,
                l.max_batch_size
            ),
            (1, 2, 3)
        );
        assert_eq!(l.max_batch_timeout, Duration::from_secs(4));

        let j = js("jetstream { store_dir: a, max_memory_store: 5, max_file: \"\", sync_interval: \"5s\",\n\
                    encryption_key: k, tpm { keys_file: f, encryption_password: p, srk_password: s, pcr: 7, cipher: chacha } }")
        .unwrap();
        assert_eq!((j.store_dir.as_str(), j.max_memory, j.max_store), ("a", 5, 0));
        assert_eq!(j.sync_interval, Some(Duration::from_secs(5)));
        assert_eq!((j.key.as_str(), j.cipher), ("k", StoreCipher::ChaCha));
        let t = &j.tpm;
        assert_eq!(
            (
                t.keys_file.as_str(),
                t.encryption_password.as_str(),
                t.srk_password.as_str(),
                t.pcr
            ),
            ("f", "p", "s", 7)
        );
        for text in [
            "jetstream { storedir: b }",
            "storedir: b\njetstream: true",
            "jetstream: true\nstore_dir: b",
        ] {
            assert_eq!(js(text).map(|j| j.store_dir), Ok("b".into()), "{text}");
        }
        let j = js("jetstream {}").unwrap();
        assert_eq!(
            (j.max_memory, j.max_store, j.sync_interval, j.strict),
            (-1, -1, None, true)
        );
    }

    #[test]
    fn reference_errors() {
        for (text, err) in [
            (
                "jetstream: foo",
                "1:0: Expected 'enabled' or 'disabled' for string value, got 'foo'",
            ),
            (
                "jetstream: 1",
                "1:0: Expected map, bool or string to define JetStream, got int64",
            ),
            (
                "jetstream { max_mem: \"512MB\" }",
                "1:12: max_mem_store strconv.ParseInt: parsing \"512M\": invalid syntax",
            ),
            (
                "jetstream { max_mem: \"5X\" }",
                "1:12: max_mem_store sizes defined as strings must end in K, M, G, T",
            ),
            (
                "jetstream { max_mem: true }",
                "1:12: max_mem_store must be int64 or string",
            ),
            (
                "jetstream { max_file: 1.5 }",
                "1:12: max_file_store must be int64 or string",
            ),
            (
                "jetstream { max_file: \"99999999999999999999K\" }",
                "1:12: max_file_store strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
            ),
            ("jetstream { max_memory: 1G }", "1:12: unknown field \"max_memory\""),
            ("jetstream { max_store: 1G }", "1:12: unknown field \"max_store\""),
            (
                "jetstream { strict: 1 }",
                "1:12: Expected 'true' or 'false' for bool value, got '%!s(int64=1)'",
            ),
            (
                "jetstream { strict: \"x\" }",
                "1:12: Expected 'true' or 'false' for bool value, got 'x'",
            ),
            (
                "jetstream { domain: 1 }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
            ("jetstream { cipher: foo }", "1:12: Unknown cipher type: \"foo\""),
            (
                "jetstream { cipher: 1 }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
            (
                "jetstream { sync: \"1x\" }",
                "1:12: error parsing sync: time: unknown unit \"x\" in duration \"1x\"",
            ),
            (
                "jetstream { enabled: \"x\" }",
                "1:0: interface conversion: interface {} is string, not bool",
            ),
            (
                "jetstream { limits: 1 }",
                "1:12: Expected a map to define JetStreamLimits, got int64",
            ),
            ("jetstream { limits: { foo: 1 } }", "1:22: unknown field \"foo\""),
            (
                "jetstream { limits: { duplicate_window: \"x\" } }",
                "time: invalid duration \"x\"",
            ),
            (
                "jetstream { limits: { duplicate_window: 1m } }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
            (
                "jetstream { limits: { batch: 1 } }",
                "1:22: Expected a map to define batch limits, got int64",
            ),
            (
                "jetstream { tpm: 1 }",
                "1:12: Expected a map to define JetStreamLimits, got int64",
            ),
            (
                "jetstream { tpm: { foo: 1, cipher: x } }",
                "1:19: unknown field \"foo\"\n1:27: Unknown cipher type: \"x\"",
            ),
            ("jetstream { foo: 1 }", "1:12: unknown field \"foo\""),
            (
                "jetstream { max_buffered_msgs: \"x\" }",
                "1:12: Expected a parseable size for \"max_buffered_msgs\", got x",
            ),
            (
                "jetstream { request_queue_limit: \"x\" }",
                "1:12: Expected a parseable size for \"request_queue_limit\", got x",
            ),
            (
                "jetstream { meta_compact: -1 }",
                "1:12: Expected an absolute size for \"meta_compact\", got -1",
            ),
            (
                "jetstream { meta_compact_size: -1 }",
                "1:12: Expected an absolute size for \"meta_compact_size\", got -1",
            ),
            (
                "jetstream { max_outstanding_catchup: \"1Q\" }",
                "1:12: max_outstanding_catchup sizes defined as strings must end in K, M, G, T",
            ),
            (
                "store_dir: a\njetstream { store_dir: b }",
                "2:13: Duplicate 'store_dir' configuration",
            ),
            (
                "jetstream { store_dir: b }\nstore_dir: a",
                "2:1: Duplicate 'store_dir' configuration",
            ),
            (
                "jetstream { store: 1 }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
            (
                "jetstream { unique_tag: 1 }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
            // A type assertion ends the block: `foo` after it is not reported.
            (
                "jetstream { domain: 1, foo: 2 }",
                "1:0: interface conversion: interface {} is int64, not string",
            ),
        ] {
            assert_eq!(js(text).unwrap_err(), err, "{text}");
        }
    }

    #[test]
    fn sync_in_seconds_warns() {
        let (o, rep) = load("jetstream { sync: 10 }").unwrap();
        assert_eq!(o.jetstream.sync_interval, Some(Duration::from_secs(10)));
        let w: Vec<&str> = rep
            .warnings
            .iter()
            .map(|l| l.split_once(".conf:").map_or(l.as_str(), |(_, r)| r))
            .collect();
        assert_eq!(
            w,
            ["1:12: invalid use of field \"sync\": sync should be converted to a duration"]
        );
        // Neither a string nor an integer: the warning, then the reference's failed assertion.
        assert_eq!(
            load("jetstream { sync: true }").unwrap_err(),
            "1:12: invalid use of field \"sync\": sync should be converted to a duration\n\
             1:0: interface conversion: interface {} is bool, not int64"
        );
    }

    #[test]
    fn domain_is_checked_at_startup_not_by_the_parser() {
        let (o, _) = load("jetstream { domain: \"a.b\" }").unwrap();
        assert_eq!(
            o.validate().unwrap_err().to_string(),
            "invalid domain name: may not contain ., * or >"
        );
        let (o, _) = load("jetstream: disabled\njetstream { domain: \"a b\", enabled: false }").unwrap();
        assert_eq!(
            o.validate().unwrap_err().to_string(),
            "invalid domain name: derived \"$JS.a b.API.>\" is not a valid subject"
        );
    }
}
