//! The config file (`-c`) and `-t` (FEATURES.md §4, §5): the reference's keys and
//! messages, flags over file values, and the configuration examples from the NATS docs.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, reference_server, rt, scratch_dir, Server};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Run to completion; a server that starts instead of exiting is killed after 10 s and
/// reported as exit code -2 (so an unexpected start fails the comparison, not the run).
fn run(program: &str, args: &[&str]) -> (i32, String, String) {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break -2;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    (code, out_t.join().unwrap(), err_t.join().unwrap())
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
            // Each line names a key rnats does not support yet, or is one of the
            // reference's own errors for the file.
            let want = Command::new(&reference)
                .args(["-t", "-c", &name])
                .current_dir(&docs)
                .output()
                .unwrap();
            let want = String::from_utf8_lossy(&want.stderr).into_owned();
            let body = err.strip_prefix("nats-server: ").unwrap_or(&err);
            for line in body.lines().filter(|l| !l.is_empty()) {
                assert!(
                    (line.starts_with(&format!("{name}:")) && line.ends_with("is not supported by rnats yet"))
                        || want.contains(line),
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

/// Keys and JWTs for the security fixtures' placeholders (see
/// conf/tests/fixtures/security/README.md).
struct SecurityFixtures {
    dir: std::path::PathBuf,
    vars: Vec<(&'static str, String)>,
}

fn b64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// A NATS v2 JWT of `claims`, issued and signed by `kp`.
fn sign_jwt(kp: &nkeys::KeyPair, mut claims: serde_json::Value) -> String {
    claims["iss"] = serde_json::Value::String(kp.public_key());
    let input = format!(
        "{}.{}",
        b64url(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#),
        b64url(claims.to_string().as_bytes())
    );
    let sig = kp.sign(input.as_bytes()).unwrap();
    format!("{input}.{}", b64url(&sig))
}

impl SecurityFixtures {
    fn new() -> SecurityFixtures {
        let dir = scratch_dir();
        let op = nkeys::KeyPair::new_operator();
        let acc = nkeys::KeyPair::new_account();
        let op_jwt = sign_jwt(
            &op,
            serde_json::json!({
                "jti": "OPERATOR1", "iat": 1_700_000_000, "name": "test-operator", "sub": op.public_key(),
                "nats": {"type": "operator", "version": 2, "system_account": acc.public_key()}
            }),
        );
        let acc_jwt = sign_jwt(
            &op,
            serde_json::json!({
                "jti": "ACCOUNT1", "iat": 1_700_000_000, "name": "SYS", "sub": acc.public_key(),
                "nats": {"type": "account", "version": 2, "limits": {"conn": -1, "subs": -1, "payload": -1}}
            }),
        );
        let op_file = dir.join("op.jwt");
        std::fs::write(
            &op_file,
            format!("-----BEGIN TEST OPERATOR JWT-----\n{op_jwt}\n------END TEST OPERATOR JWT------\n"),
        )
        .unwrap();
        let vars = vec![
            ("{U}", nkeys::KeyPair::new_user().public_key()),
            ("{A}", acc.public_key()),
            ("{O}", op.public_key()),
            ("{X}", nkeys::XKey::new().public_key()),
            ("{OPJWT}", op_jwt),
            ("{OPFILE}", op_file.to_str().unwrap().to_string()),
            ("{ACCJWT}", acc_jwt),
            ("{DIR}", dir.to_str().unwrap().to_string()),
        ];
        SecurityFixtures { dir, vars }
    }

    fn fill(&self, text: &str) -> String {
        self.vars.iter().fold(text.to_string(), |t, (k, v)| t.replace(k, v))
    }
}

/// The security keys (users, nkeys, permissions, auth callout, accounts with their
/// exports, imports, mappings and limits, operators, resolvers): `-t` on rnats and on the
/// reference agree on the exit code and on every error and warning line, positions
/// included, for the fixture configs and for each small case.
#[test]
fn security_configs_match_the_reference() {
    let reference = reference_server();
    let fx = SecurityFixtures::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/tests/fixtures/security");
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    names.sort();
    for p in names {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        texts.push((name, std::fs::read_to_string(&p).unwrap()));
    }
    let cases = std::fs::read_to_string(src.join("reference_cases.txt")).unwrap();
    for (i, case) in cases.split("\n====\n").enumerate() {
        texts.push((format!("case{i}.conf"), case.to_string()));
    }
    let mut valid = 0;
    for (name, text) in &texts {
        let f = write(&fx.dir, name, &fx.fill(text));
        let want = unordered(run(&reference, &["-t", "-c", &f]));
        let got = unordered(run(bin(), &["-t", "-c", &f]));
        assert_eq!(got, want, "{name}:\n{text}");
        valid += usize::from(want.0 == 0);
    }
    // Both kinds are exercised.
    assert!(valid > 20 && texts.len() - valid > 80, "{valid} of {}", texts.len());
    let _ = std::fs::remove_dir_all(&fx.dir);
}

/// Startup refuses the security settings whose runtime rnats lacks, after the checks
/// the reference makes at startup (same messages as the reference for those).
#[test]
fn security_settings_at_startup() {
    let reference = reference_server();
    let fx = SecurityFixtures::new();
    let startup_errors = [
        "accounts { A { users: [ {user: a} ] } }\nno_auth_user: b\n",
        "no_auth_user: b\n",
        "default_sentinel: abc\n",
        "operator: {OPFILE}\nresolver: MEMORY\naccounts: [B]\n",
        "operator: {OPFILE}\nresolver: MEMORY\nsystem_account: {U}\n",
        "operator: {OPFILE}\nresolver: MEMORY\ndefault_sentinel: abc\n",
        "operator: {OPFILE}\nresolver: MEMORY\ntrusted: {O}\n",
        "operator: {OPFILE}\nresolver: MEMORY\nno_auth_user: x\n",
        "operator: {OPFILE}\nresolver { type: full, dir: \"{DIR}/full\" }\nsystem_account: {U}\n",
        "authorization { users: [ {user: a} ] }\nno_auth_user: b\n",
        "proxies { trusted: [{}] }\n",
        "proxies { trusted: [{key: {U}}, {}] }\n",
    ];
    for text in startup_errors {
        let f = write(&fx.dir, "s.conf", &fx.fill(text));
        let want = run(&reference, &["-c", &f, "-p", "-1"]);
        let got = run(bin(), &["-c", &f, "-p", "-1"]);
        assert_eq!((got.0, &got.2), (want.0, &want.2), "{text}");
    }
    let _ = std::fs::remove_dir_all(&fx.dir);
}
