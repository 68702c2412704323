//! Logging (FEATURES.md §23): log files with `log_size_limit` rotation and
//! `logfile_max_num` purging, reopening on SIGUSR1 (external rotation), remote syslog,
//! and log settings changed by a reload.
// Driven by Unix signals (graceful stop, reload, reopen), as these features are.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{scratch_dir, wait_file, Raw, Server};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

both_reactors!(size_limit_rotates_and_max_num_purges, |r| {
    let dir = scratch_dir();
    let log = dir.join("server.log");
    let conf = dir.join("s.conf");
    std::fs::write(
        &conf,
        format!(
            "debug: true\nlog_file: \"{}\"\nlog_size_limit: 2000\nlogfile_max_num: 3\n",
            log.display()
        ),
    )
    .unwrap();
    let p = Server::spawn_logging_to(r, &log, &["-c", conf.to_str().unwrap()]);
    let port = p.port;
    // Debug lines for every connection fill the file several times over.
    for _ in 0..40 {
        let mut c = Raw::connect(port);
        c.handshake();
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let backups: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("server.log."))
            .collect();
        let current = std::fs::read_to_string(&log).unwrap_or_default();
        if current.contains("Purged log file") {
            // logfile_max_num 3: the current file and at most two backups.
            assert!(backups.len() <= 2, "{backups:?}");
            let b = &backups[0];
            // server.log.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn
            assert_eq!(b.len(), "server.log.".len() + 29, "{b}");
            break;
        }
        assert!(Instant::now() < deadline, "no purge; backups {backups:?}\n{current}");
        let mut c = Raw::connect(port);
        c.handshake();
    }
    let current = std::fs::read_to_string(&log).unwrap();
    let first = current.lines().next().unwrap();
    assert!(first.contains("[INF] Rotated log, backup saved as \""), "{first}");
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(sigusr1_reopens_the_log_file, |r| {
    let dir = scratch_dir();
    let log = dir.join("server.log");
    let p = Server::spawn_logging_to(r, &log, &["-l", log.to_str().unwrap()]);
    let moved = dir.join("server.log.1");
    std::fs::rename(&log, &moved).unwrap();
    p.signal(libc::SIGUSR1);
    let text = wait_file(&log, "File log re-opened", WAIT);
    assert!(!text.contains("Starting nats-server"), "a fresh file: {text}");
    let old = std::fs::read_to_string(&moved).unwrap();
    assert!(old.contains("Trapped \"user defined signal 1\" signal"), "{old}");
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(remote_syslog_over_udp, |r| {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(WAIT)).unwrap();
    let url = format!("udp://{}", rx.local_addr().unwrap());
    // The port is the server's choice (`-p -1`): this test never connects.
    let p = Server::spawn_any_port(r, &["-r", &url]);
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while !got.iter().any(|l: &String| l.contains("Server is ready")) {
        let n = rx.recv(&mut buf).unwrap_or_else(|e| panic!("{e}; got {got:?}"));
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let pid = p.pid();
    let first = &got[0];
    // <PRI>RFC3339 hostname tag[pid]: message — notice on the kern facility.
    assert!(first.starts_with("<5>"), "{first}");
    assert!(
        first.ends_with(&format!("rnats[{pid}]: Starting nats-server\n")),
        "{first}"
    );
    drop(p);
});

both_reactors!(reload_switches_logging, |r| {
    let dir = scratch_dir();
    let log = dir.join("server.log");
    let conf = dir.join("s.conf");
    std::fs::write(&conf, format!("log_file: \"{}\"\n", log.display())).unwrap();
    let p = Server::spawn_logging_to(r, &log, &["-c", conf.to_str().unwrap()]);
    let port = p.port;
    std::fs::write(
        &conf,
        format!("log_file: \"{}\"\nlogtime: false\ntrace: true\n", log.display()),
    )
    .unwrap();
    p.signal(libc::SIGHUP);
    let text = wait_file(&log, "Reloaded server configuration", WAIT);
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("[{}] [INF] Reloaded server configuration (sha256:", p.pid())),
        "logtime off after the reload: {last}"
    );
    let mut c = Raw::connect(port);
    c.handshake();
    wait_file(&log, "[TRC] 127.0.0.1:", WAIT);
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
});

// The label every log line of a client carries, once its CONNECT is accepted: the
// reference's `"<version>:<lang>:<name>"` and `"<account>/<credentials>"` parts, with or
// without `-D`. The same clients against both servers give the same lines (addresses,
// client ids and times left out).
both_reactors!(client_labels_match_the_reference, |r| {
    let confs = [
        // Users in an account, one of them the no-auth user; a denied subject gets a line.
        "accounts { A: { users = [ {user: alice, password: pw, permissions: {publish: {deny: secret}}}, {user: bob, password: pw, permissions: {publish: {deny: secret}}} ] } }\nno_auth_user: alice\n",
        // No authentication: credentials a client sends anyway still show.
        "debug: true\n",
    ];
    let connects = [
        r#"{"verbose":false,"user":"bob","pass":"pw","name":"my app","lang":"python","version":"2.1"}"#,
        r#"{"verbose":false,"user":"bob","pass":"pw"}"#,
        r#"{"verbose":false,"name":"q\"x\u0001é"}"#,
        r#"{"verbose":false,"auth_token":"tok","lang":"rust"}"#,
        r#"{"verbose":false,"version":"1.0"}"#,
        r#"{"verbose":false}"#,
        r#"{"verbose":false,"user":"bob","pass":"wrong","name":"n"}"#,
    ];
    for conf_text in confs {
        let mut lines = Vec::new();
        for reference in [false, true] {
            // Both log to stderr, which the harness keeps.
            let dir = scratch_dir();
            let conf = dir.join("s.conf");
            std::fs::write(&conf, format!("listen: 127.0.0.1:-1\n{conf_text}")).unwrap();
            let conf = conf.to_str().unwrap();
            let s = if reference {
                Server::start_cmd(&common::reference_server(), &["-c", conf])
            } else {
                Server::start_cmd(common::bin(), &[&["-c", conf][..], &r.args()[..]].concat())
            };
            let port = s.port;
            for connect in connects {
                let mut c = Raw::connect(port);
                c.send_str(&format!("CONNECT {connect}\r\nPUB secret 1\r\nx\r\nPING\r\n"));
                // Until PONG, or the close of a refused login.
                let deadline = Instant::now() + WAIT;
                let mut seen = String::new();
                while !seen.contains("PONG") && !seen.contains("Authorization Violation") {
                    assert!(Instant::now() < deadline, "{seen}");
                    seen.push_str(&c.read_line(WAIT));
                }
            }
            // Every client's lines are written once the last one's are: its refused login,
            // or (with `debug`) every client's close.
            let deadline = Instant::now() + WAIT;
            let text = loop {
                let text = s.log_lines().join("\n");
                let done = if conf_text.contains("debug") {
                    text.matches("Client connection closed").count() == connects.len()
                } else {
                    text.contains("authentication error - User \"bob\"")
                };
                if done {
                    break text;
                }
                assert!(Instant::now() < deadline, "{text}");
                std::thread::sleep(Duration::from_millis(20));
            };
            let mut found: Vec<String> = text
                .lines()
                .filter_map(|l| {
                    let rest = l.split(" - cid:").nth(1)?;
                    let rest = rest.split_once(' ').map_or("", |(_, r)| r);
                    (!rest.contains("Client connection created")).then(|| rest.to_string())
                })
                .filter(|l| l.contains("Violation") || l.contains("error") || l.contains("closed"))
                .collect();
            found.sort();
            drop(s);
            lines.push(found);
            let _ = std::fs::remove_dir_all(&dir);
        }
        assert_eq!(
            lines[0], lines[1],
            "rnats (left) and the reference (right) with {conf_text:?}"
        );
        assert!(!lines[0].is_empty());
    }
});
