//! The config file (`-c`) and `-t` (FEATURES.md §4, §5): the reference's keys and
//! messages, flags over file values, and the configuration examples from the NATS docs.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, reference_server, rt, scratch_dir, Server};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn run(program: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(program).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The reference reports several problems in Go's random map order; rnats in file
/// order. Compare the lines as a set.
fn unordered((code, out, err): (i32, String, String)) -> (i32, String, Vec<String>) {
    let body = err.strip_prefix("nats-server: ").unwrap_or(&err);
    let mut lines: Vec<String> = body.lines().map(str::to_string).collect();
    lines.sort();
    (code, out, lines)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `-t` on rnats and on the reference give the same output and exit code.
#[test]
fn check_config_matches_the_reference() {
    let reference = reference_server();
    let dir = scratch_dir();
    let cases = [
        "port: 4333\nserver_name: x\nmax_pending: 5000000\n",
        "foo: 1\nbar {\n x: 1}\n",
        "port: \"abc\"\n",
        "debug: 1\n",
        "ping_interval: 5\n",
        "ping_interval: \"5x\"\n",
        "max_payload: 100\nmax_pending: 10\n",
        "lame_duck_duration: \"10s\"\n",
        "",
        "authorization { user: a, token: b }\n",
        "authorization { users: [ {user: a, password: b} ], foo: 1 }\n",
        "authorization { timeout: 100 }\n",
        "authorization { users: [ {user: a}, {user: a} ] }\n",
        "authorization { users: [ {password: b} ] }\n",
        "authorization { users: [ 5 ] }\n",
        "authorization { users: 5 }\n",
        "authorization { timeout: \"1x\" }\n",
        "authorization { users = [ {user: a, password: \"$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG\"} ] }\n",
        "server_name: \"a b\"\n",
        "listen: \"127.0.0.1:4333\"\nport: 5\n",
        "listen: \"nohost\"\n",
        "max_control_line: 3000000000\n",
        "max_sub_tokens: 300\n",
        "a = 1\nport: $a\n",
        "listen: 4222\nhttp: \"localhost:8222\"\n",
        "write_deadline: \"2s\"\nlog_file: \"/tmp/x.log\"\nlog_size_limit: 1MB\nlogfile_max_num: 3\n",
        "lame_duck_grace_period: \"-1s\"\n",
        "x {\n",
        "include nope.conf\n",
    ];
    for (i, text) in cases.iter().enumerate() {
        let f = write(&dir, &format!("c{i}.conf"), text);
        let want = unordered(run(&reference, &["-t", "-c", &f]));
        let got = unordered(run(bin(), &["-t", "-c", &f]));
        assert_eq!(got, want, "config {text:?}");
    }
    assert_eq!(run(bin(), &["-t"]), run(&reference, &["-t"]), "-t without -c");
    assert_eq!(
        run(bin(), &["-t", "-c", "/nonexistent/x.conf"]),
        run(&reference, &["-t", "-c", "/nonexistent/x.conf"])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The NATS documentation's examples (conf/tests/fixtures/docs): where rnats has every
/// feature a file uses, `-t` agrees with the reference, digest included; otherwise rnats
/// names each key it does not support yet, with its position.
#[test]
fn documentation_examples() {
    let reference = reference_server();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/tests/fixtures/docs");
    for e in std::fs::read_dir(&docs).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "conf") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        // Run from the docs directory so that relative paths read the same.
        let out = Command::new(bin())
            .args(["-t", "-c", &name])
            .current_dir(&docs)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            let want = Command::new(&reference)
                .args(["-t", "-c", &name])
                .current_dir(&docs)
                .output()
                .unwrap();
            assert_eq!(err, String::from_utf8_lossy(&want.stderr), "{name}");
        } else {
            let body = err.strip_prefix("nats-server: ").unwrap_or(&err);
            for line in body.lines().filter(|l| !l.is_empty()) {
                assert!(
                    line.starts_with(&format!("{name}:")) && line.ends_with("is not supported by rnats yet"),
                    "{name}: {line}"
                );
            }
        }
    }
}

both_reactors!(file_values_and_flag_overrides, |r| {
    let dir = scratch_dir();
    let f = write(
        &dir,
        "s.conf",
        "server_name: fromfile\nmax_payload: 512\nauthorization { user: u, password: p }\nping_interval: 30\n",
    );
    let s = Server::start(r, &["-c", &f, "-n", "fromflag"]);
    let c = s.raw();
    assert!(c.info.contains("\"server_name\":\"fromflag\""), "{}", c.info);
    assert!(c.info.contains("\"max_payload\":512"), "{}", c.info);
    assert!(c.info.contains("\"auth_required\":true"), "{}", c.info);
    let text = s.log_lines().join("\n");
    assert!(
        text.contains(&format!("[INF] Using configuration file: {f} (sha256:")),
        "{text}"
    );
    assert!(
        text.contains("[WRN] Plaintext passwords detected, use nkeys or bcrypt"),
        "{text}"
    );
    // The duration-as-integer warning went to stderr before logging, as in the reference.
    assert!(
        text.contains("invalid use of field \"ping_interval\": ping_interval should be converted to a duration"),
        "{text}"
    );
    let url = s.url();
    rt().block_on(async {
        let nc = async_nats::ConnectOptions::with_user_and_password("u".into(), "p".into())
            .connect(&url)
            .await
            .unwrap();
        nc.flush().await.unwrap();
        assert!(
            async_nats::ConnectOptions::with_user_and_password("u".into(), "wrong".into())
                .max_reconnects(Some(0))
                .connect(&url)
                .await
                .is_err()
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
});

#[test]
fn bad_files_stop_startup() {
    let dir = scratch_dir();
    let f = write(&dir, "bad.conf", "port: 1\nnope: true\n");
    let (code, out, err) = run(bin(), &["-c", &f]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err, format!("nats-server: {f}:2:1: unknown field \"nope\"\n\n"));
    let f = write(&dir, "v.conf", "max_payload: 100\nmax_pending: 10\n");
    let (code, _, err) = run(bin(), &["-c", &f]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "nats-server: max_payload (100) cannot be higher than max_pending (10)\n"
        )
    );
    let f = write(
        &dir,
        "l.conf",
        "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"40s\"\n",
    );
    let (code, _, err) = run(bin(), &["-c", &f]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "nats-server: lame duck grace period (40s) should be strictly lower than lame duck duration (30s)\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(bcrypt_users_from_the_file, |r| {
    let dir = scratch_dir();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let f = write(
        &dir,
        "b.conf",
        &format!("authorization {{ users = [ {{user: alice, password: \"{hash}\"}} ], timeout: \"1s\" }}\n"),
    );
    let s = Server::start(r, &["-c", &f]);
    assert!(!s.log_lines().join("\n").contains("Plaintext passwords"));
    let mut ok = s.raw();
    ok.send_str("CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"s3cret\"}\r\nPING\r\n");
    ok.expect("PONG\r\n");
    let mut bad = s.raw();
    bad.send_str("CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"x\"}\r\nPING\r\n");
    assert_eq!(
        bad.until_closed(Duration::from_secs(5)),
        "-ERR 'Authorization Violation'\r\n"
    );
    // The authorization timeout from the file.
    let mut slow = s.raw();
    let got = slow.until_closed(Duration::from_secs(5));
    assert_eq!(got, "-ERR 'Authentication Timeout'\r\n");
    let _ = std::fs::remove_dir_all(&dir);
});
