//! Hot reload (SIGHUP, `--signal reload`), FEATURES.md §21: reloadable options change
//! for connected clients, authorization changes re-check them (as nats-server's
//! `reloadAuthorization`), and a bad file or a non-reloadable change leaves the server
//! serving on its old configuration.
// Driven by Unix signals (graceful stop, reload, reopen), as these features are.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, rt, scratch_dir, Raw, Server};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn conf(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("server.conf");
    std::fs::write(&p, text).unwrap();
    p
}

fn start(r: common::Reactor, dir: &Path, text: &str, extra: &[&str]) -> Server {
    let p = conf(dir, text);
    let mut args = vec!["-c", p.to_str().unwrap(), "--shards", "2"];
    args.extend_from_slice(extra);
    Server::start(r, &args)
}

/// Rewrite the file, send SIGHUP and wait for the `n`th outcome line.
fn reload(s: &Server, dir: &Path, text: &str, n: usize) {
    conf(dir, text);
    s.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + WAIT;
    while s.count_log("Reloaded server configuration") + s.count_log("Failed to reload server configuration") < n {
        assert!(std::time::Instant::now() < deadline, "{}", s.log_lines().join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn login(s: &Server, user: &str, pass: &str) -> Raw {
    let mut c = s.raw();
    c.send_str(&format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"user\":\"{user}\",\"pass\":\"{pass}\",\"protocol\":1}}\r\nPING\r\n"
    ));
    c.expect("PONG\r\n");
    c.drain(Duration::from_millis(100));
    c
}

both_reactors!(limits_and_logging_change_for_connected_clients, |r| {
    let dir = scratch_dir();
    let s = start(r, &dir, "max_payload: 1KB\n", &[]);
    let mut before = s.raw();
    before.handshake();
    before.send_str(&format!("PUB a 200\r\n{}\r\nPING\r\n", "x".repeat(200)));
    before.expect("PONG\r\n");

    reload(&s, &dir, "max_payload: 100\ndebug: true\nping_interval: \"1m\"\n", 1);
    for want in [
        "Trapped \"hangup\" signal",
        "Reloaded: debug = true",
        "Reloaded: authorization users",
        "Reloaded: accounts",
        "Reloaded: ping_interval = 1m0s",
        "Reloaded: max_payload = 100",
        "Reloaded server configuration (sha256:",
    ] {
        s.wait_for_log(want, WAIT).unwrap();
    }
    // The connected client is held to the new limit at once.
    before.send_str(&format!("PUB a 200\r\n{}\r\n", "x".repeat(200)));
    let got = before.until_closed(WAIT);
    assert!(got.contains("-ERR 'Maximum Payload Violation'"), "{got}");
    // New clients see it in INFO, and debug logging is on.
    let after = s.raw();
    assert!(after.info.contains("\"max_payload\":100"), "{}", after.info);
    s.wait_for_log("[DBG]", WAIT).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(users_added_changed_and_removed, |r| {
    let dir = scratch_dir();
    let users = |list: &str| format!("authorization {{ users = [ {list} ] }}\n");
    let s = start(r, &dir, &users("{user: a, password: pa}, {user: b, password: pb}"), &[]);
    s.wait_for_log("Plaintext passwords detected, use nkeys or bcrypt", WAIT)
        .unwrap();
    let mut a = login(&s, "a", "pa");
    let mut b = login(&s, "b", "pb");
    // A real client that stays valid across the reload.
    let url = s.url();
    let hash = bcrypt_hash("pc");
    rt().block_on(async {
        let nc = async_nats::ConnectOptions::with_user_and_password("a".into(), "pa".into())
            .connect(&url)
            .await
            .unwrap();
        let mut sub = nc.subscribe("r").await.unwrap();
        nc.flush().await.unwrap();
        // a's password changes, b is removed, c arrives with a bcrypt password.
        let list = format!("{{user: a, password: pa}}, {{user: c, password: \"{hash}\"}}");
        reload(&s, &dir, &users(&list), 1);
        nc.publish("r", "still here".into()).await.unwrap();
        let m = tokio::time::timeout(WAIT, futures::StreamExt::next(&mut sub))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.payload.as_ref(), b"still here");
    });
    // a is still valid; b was removed: closed without an error, as nats-server does.
    a.send_str("PING\r\n");
    a.expect("PONG\r\n");
    assert_eq!(b.until_closed(WAIT), "");
    let mut c = login(&s, "c", "pc");
    c.send_str("PING\r\n");
    c.expect("PONG\r\n");
    // Now a's password changes: -ERR 'Authorization Violation', then close.
    let list = format!("{{user: a, password: new}}, {{user: c, password: \"{hash}\"}}");
    reload(&s, &dir, &users(&list), 2);
    assert_eq!(a.until_closed(WAIT), "-ERR 'Authorization Violation'\r\n");
    s.wait_for_log("authentication error - User \"a\"", WAIT).unwrap();
    c.send_str("PING\r\n");
    c.expect("PONG\r\n");
    // Wrong credentials are refused from now on.
    let mut bad = s.raw();
    bad.send_str("CONNECT {\"verbose\":false,\"user\":\"c\",\"pass\":\"nope\"}\r\nPING\r\n");
    assert_eq!(bad.until_closed(WAIT), "-ERR 'Authorization Violation'\r\n");
    let _ = std::fs::remove_dir_all(&dir);
});

fn bcrypt_hash(p: &str) -> String {
    bcrypt::hash(p, 4).unwrap()
}

both_reactors!(token_change_disconnects_old_token_clients, |r| {
    let dir = scratch_dir();
    let s = start(r, &dir, "authorization { token: t1 }\n", &[]);
    let mut c = s.raw();
    c.send_str("CONNECT {\"verbose\":false,\"auth_token\":\"t1\"}\r\nPING\r\n");
    c.expect("PONG\r\n");
    reload(&s, &dir, "authorization { token: t2 }\n", 1);
    s.wait_for_log("Reloaded: authorization token", WAIT).unwrap();
    assert_eq!(c.until_closed(WAIT), "-ERR 'Authorization Violation'\r\n");
    s.wait_for_log("authentication error - Token \"[REDACTED]\"", WAIT)
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(bad_reloads_change_nothing, |r| {
    let dir = scratch_dir();
    let s = start(r, &dir, "max_payload: 1KB\nserver_name: one\n", &[]);
    let mut c = s.raw();
    c.handshake();
    // A file that does not parse.
    reload(&s, &dir, "max_payload: 100\nfoo: 1\n", 1);
    s.wait_for_log("[ERR] Failed to reload server configuration: ", WAIT)
        .unwrap();
    s.wait_for_log("unknown field \"foo\"", WAIT).unwrap();
    // A change that cannot be reloaded refuses the whole reload.
    reload(&s, &dir, "max_payload: 100\nserver_name: two\n", 2);
    s.wait_for_log(
        "Failed to reload server configuration: config reload not supported for ServerName: old=one, new=two",
        WAIT,
    )
    .unwrap();
    // Cross-option validation, as at startup.
    reload(&s, &dir, "max_payload: 100\nmax_pending: 10\nserver_name: one\n", 3);
    s.wait_for_log("max_payload (100) cannot be higher than max_pending (10)", WAIT)
        .unwrap();
    assert_eq!(s.count_log("Reloaded: max_payload"), 0);
    // Still serving, on the old limits.
    c.send_str(&format!("PUB a 500\r\n{}\r\nPING\r\n", "x".repeat(500)));
    c.expect("PONG\r\n");
    assert!(s.raw().info.contains("\"max_payload\":1024"));
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(reload_without_a_file_and_by_signal_command, |r| {
    let s = Server::start(r, &[]);
    s.signal(libc::SIGHUP);
    s.wait_for_log(
        "Failed to reload server configuration: can only reload config when a file is provided using -c or --config",
        WAIT,
    )
    .unwrap();

    // `--signal reload=<pidfile>` from another process.
    let dir = scratch_dir();
    let pid = dir.join("s.pid");
    let s = start(r, &dir, "debug: false\n", &["-P", pid.to_str().unwrap()]);
    conf(&dir, "debug: true\n");
    let out = std::process::Command::new(bin())
        .arg(format!("--signal=reload={}", pid.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    s.wait_for_log("Reloaded: debug = true", WAIT).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(flags_override_the_file_on_reload, |r| {
    let dir = scratch_dir();
    let s = start(r, &dir, "max_payload: 2KB\n", &["-D"]);
    reload(&s, &dir, "max_payload: 3KB\ndebug: false\n", 1);
    s.wait_for_log("Reloaded: max_payload = 3072", WAIT).unwrap();
    assert_eq!(s.count_log("Reloaded: debug"), 0, "-D on the command line wins");
    let _ = std::fs::remove_dir_all(&dir);
});

const ACCOUNTS_V1: &str = r#"
accounts {
  A { users = [
    {user: a, password: a, permissions: {subscribe: ["foo.>", "bar", "q.* workers"]}}
    {user: mover, password: m}
    {user: gone, password: g}
    {user: changed, password: c1}
  ] }
  B { users = [ {user: b, password: b} ] }
}
"#;

const ACCOUNTS_V2: &str = r#"
accounts {
  A { users = [
    {user: a, password: a, permissions: {subscribe: ["foo.>"]}}
    {user: changed, password: c2}
  ] }
  B { users = [ {user: b, password: b}, {user: mover, password: m} ] }
}
"#;

/// Accounts and permissions changed by a reload, as nats-server applies them: a user
/// moved to another account or removed is closed quietly, changed credentials get an
/// authorization violation, and subscriptions the new permissions forbid are removed
/// with a violation per subscription while the connection stays.
fn account_reload_outcomes(program: &str, extra: &[&str]) -> Vec<String> {
    let dir = scratch_dir();
    let p = conf(&dir, ACCOUNTS_V1);
    let mut args = vec!["-a", "127.0.0.1", "-p", "-1", "-c", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    let s = Server::start_cmd(program, &args);
    let mut a = login(&s, "a", "a");
    a.send_str("SUB foo.x 1\r\nSUB bar 2\r\nSUB q.a workers 3\r\nPING\r\n");
    a.expect("PONG\r\n");
    let mut others: Vec<Raw> = [("mover", "m"), ("gone", "g"), ("changed", "c1")]
        .iter()
        .map(|(u, pw)| login(&s, u, pw))
        .collect();
    let mut b = login(&s, "b", "b");
    reload(&s, &dir, ACCOUNTS_V2, 1);
    // One violation per removed subscription; nats-server sends them in map order.
    let mut violations: Vec<String> = a
        .drain(Duration::from_millis(300))
        .lines()
        .map(str::to_string)
        .collect();
    violations.sort();
    let mut out = vec![violations.join("\n")];
    for c in &mut others {
        out.push(c.until_closed(WAIT));
    }
    // `a` stays and still gets what it may subscribe to; `b` is untouched.
    a.send_str("PUB foo.x 2\r\nhi\r\nPUB bar 2\r\nno\r\nPING\r\n");
    out.push(a.drain(Duration::from_millis(300)));
    b.send_str("PING\r\n");
    out.push(b.drain(Duration::from_millis(200)));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

both_reactors!(account_and_permission_reload_like_the_reference, |r| {
    let want = account_reload_outcomes(&common::reference_server(), &[]);
    let got = account_reload_outcomes(bin(), &["--shards", "2", "--reactor", r.flag()]);
    assert_eq!(got, want);
});

/// A reload that lowers `max_connections` below the number connected closes the excess,
/// each with `-ERR 'maximum connections exceeded'`, and says how many it closed; the rest
/// stay. Which ones go is nats-server's map order, so the outcome is counted.
fn lowered_max_connections_outcome(program: &str, extra: &[&str]) -> Vec<String> {
    let dir = scratch_dir();
    let p = conf(&dir, "max_connections: 10\n");
    let mut args = vec!["-a", "127.0.0.1", "-p", "-1", "-c", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    let s = Server::start_cmd(program, &args);
    let mut clients: Vec<Raw> = (0..5)
        .map(|_| {
            let mut c = s.raw();
            c.handshake();
            c
        })
        .collect();
    reload(&s, &dir, "max_connections: 2\n", 1);
    let mut closed = Vec::new();
    let mut open = 0;
    for c in &mut clients {
        match c.drain(Duration::from_millis(300)) {
            got if got.is_empty() => {
                c.send_str("PING\r\n");
                c.expect("PONG\r\n");
                open += 1;
            }
            got => closed.push(got + &c.until_closed(WAIT)),
        }
    }
    let log: Vec<String> = s
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("max_connections"))
        .map(|l| l.split("] ").last().unwrap_or_default().to_string())
        .collect();
    // New connections past the new limit are refused.
    let mut late = s.raw();
    late.send_str("CONNECT {\"verbose\":false}\r\nPING\r\n");
    let refused = late.until_closed(WAIT);
    let _ = std::fs::remove_dir_all(&dir);
    vec![format!("{open} open"), closed.join(""), log.join("\n"), refused]
}

both_reactors!(lowering_max_connections_closes_the_excess_like_the_reference, |r| {
    let want = lowered_max_connections_outcome(&common::reference_server(), &[]);
    assert_eq!(want[0], "2 open");
    assert_eq!(want[1], "-ERR 'maximum connections exceeded'\r\n".repeat(3));
    for shards in ["1", "3"] {
        let got = lowered_max_connections_outcome(bin(), &["--shards", shards, "--reactor", r.flag()]);
        assert_eq!(got, want, "{shards} shards");
    }
});
