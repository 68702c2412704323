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
    assert!(o.core_config().auth.required());
    let (o, _) = load("authorization { users = [] }").unwrap();
    assert!(o.security.users.is_empty() && !o.core_config().auth.required());
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
        ("tls { }", "1:0: \"tls\" is not supported by rnats yet"),
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
