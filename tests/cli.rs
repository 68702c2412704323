//! The command line, process lifecycle and monitoring, as operators and test harnesses
//! use them: Go `flag` spellings, the reference's messages and exit codes, startup log
//! lines, PID and ports files, signals, and io_uring fallback.
// Driven by Unix signals (graceful stop, reload, reopen), as these features are.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, Server};
use std::process::Command;
use std::time::Duration;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help() {
    for v in ["-v", "--version", "-version", "version"] {
        let (code, out, _) = run(&[v]);
        assert_eq!(code, 0);
        assert!(out.starts_with("nats-server: v2.14.0"), "{v}: {out}");
    }
    for h in ["-h", "--help", "help"] {
        let (code, out, _) = run(&[h]);
        assert_eq!(code, 0);
        assert!(out.contains("Usage: nats-server [options]"), "{h}");
        assert!(out.contains("--shards"), "rnats options are listed");
    }
}

/// The flag names a usage text lists (`-x`, `--name`, `-ms,--https_port`, ...).
fn listed_flags(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|t| t.starts_with('-') && t.len() > 1)
        .map(|t| t.trim_start_matches('-').to_string())
        .collect()
}

#[test]
fn help_lists_the_reference_flags_and_the_rnats_only_ones() {
    let (_, ours, _) = run(&["--help"]);
    let reference = Command::new(common::reference_server()).arg("--help").output().unwrap();
    let theirs = listed_flags(&String::from_utf8_lossy(&reference.stdout));
    assert!(theirs.contains("store_dir"), "{theirs:?}");
    let ours_all = listed_flags(&ours);
    let missing: Vec<_> = theirs.difference(&ours_all).collect();
    assert!(missing.is_empty(), "nats-server lists, rnats does not: {missing:?}");
    // What rnats lists beyond nats-server is exactly its own section...
    let start = ours.find("rnats Options").expect("an rnats section");
    let end = ours.find("Common Options").unwrap();
    let section = listed_flags(&ours[start..end]);
    let extra: std::collections::BTreeSet<String> = ours_all.difference(&theirs).cloned().collect();
    assert_eq!(extra, section);
    assert!(section.contains("shards") && section.contains("reactor"), "{section:?}");
    // ...and those are flags rnats takes and nats-server does not.
    for flag in &section {
        let arg = format!("--{flag}");
        let out = Command::new(common::reference_server()).arg(&arg).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("flag provided but not defined"),
            "nats-server {arg}: {err}"
        );
        let (_, _, err) = run(&[&arg]);
        assert!(!err.contains("not defined"), "rnats {arg}: {err}");
    }
}

#[test]
fn unknown_flags_and_bad_values_like_go_flag() {
    // nats-server prints the flag error on stderr, the usage on stdout, and exits 0.
    let (code, out, err) = run(&["--foo"]);
    assert_eq!((code, err.trim()), (0, "flag provided but not defined: -foo"));
    assert!(out.contains("Usage: nats-server"));
    let (code, _, err) = run(&["-p", "abc"]);
    assert_eq!(
        (code, err.trim()),
        (0, "invalid value \"abc\" for flag -p: parse error")
    );
    let (code, out, err) = run(&["extra"]);
    assert_eq!(
        (code, err.trim(), out.as_str()),
        (1, "nats-server: unrecognized command: \"extra\"", "")
    );
}

both_reactors!(startup_lines_pid_and_ports_files, |r| {
    let dir = common::scratch_dir();
    let pid = dir.join("rnats.pid");
    let mut s = Server::start(
        r,
        &[
            "-P",
            pid.to_str().unwrap(),
            "--ports_file_dir",
            dir.to_str().unwrap(),
            "-m",
            "-1",
            "-n",
            "cli-test",
        ],
    );
    let lines = s.log_lines();
    let text = lines.join("\n");
    for want in [
        "[INF] Starting nats-server",
        "  Version:  2.14.0",
        "  Name:     cli-test",
        "Listening for client connections on 127.0.0.1:",
        "Server is ready",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert!(lines[0].starts_with(&format!("[{}] ", s.pid())), "{}", lines[0]);
    assert_eq!(std::fs::read_to_string(&pid).unwrap(), s.pid().to_string());
    let ports = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".ports"))
        .expect("ports file");
    let name = ports.file_name().to_string_lossy().into_owned();
    assert_eq!(name, format!("rnats_{}.ports", s.pid()));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(ports.path()).unwrap()).unwrap();
    assert_eq!(v["nats"][0], format!("nats://127.0.0.1:{}", s.port));
    assert!(v["monitoring"][0].as_str().unwrap().starts_with("http://127.0.0.1:"));
    // SIGTERM: graceful, exit 0, files removed, the reference's shutdown lines.
    let st = s.stop_with(libc::SIGTERM);
    assert_eq!(st.code(), Some(0));
    s.wait_for_log("Server Exiting..", Duration::from_secs(5)).unwrap();
    let text = s.log_lines().join("\n");
    assert!(
        text.contains("Trapped \"terminated\" signal") && text.contains("Server Exiting.."),
        "{text}"
    );
    assert!(!pid.exists() && !ports.path().exists());
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(sigint_closes_clients_and_exits_zero, |r| {
    let mut s = Server::start(r, &["--shards", "2"]);
    let mut clients: Vec<_> = (0..4).map(|_| s.raw()).collect();
    for c in &mut clients {
        c.handshake();
    }
    let st = s.stop_with(libc::SIGINT);
    assert_eq!(st.code(), Some(0));
    for c in &mut clients {
        c.until_closed(Duration::from_secs(5));
    }
    assert!(s.log_lines().join("\n").contains("Trapped \"interrupt\" signal"));
});

both_reactors!(port_in_use_fails_like_the_reference, |r| {
    let s = Server::start(r, &[]);
    let port = s.port.to_string();
    let start = std::time::Instant::now();
    let out = Command::new(bin())
        .args(["-a", "127.0.0.1", "-p", &port, "--reactor", r.flag()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // After waiting for the port (it might have been a server just killed).
    assert!(start.elapsed() >= rnats::server::BIND_PATIENCE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("[FTL] Error listening on port: 127.0.0.1:{port}, \"listen tcp 127.0.0.1:{port}: bind: address already in use\"")),
        "{err}"
    );
    // The first server is unaffected and gets every connection.
    for _ in 0..10 {
        let mut c = s.raw();
        c.handshake();
    }
});

both_reactors!(varz_and_healthz, |r| {
    let s = Server::start(r, &["-m", "-1", "--shards", "3"]);
    let (code, body) = s.http_get("/healthz");
    assert_eq!((code, body.as_str()), (200, "{\"status\":\"ok\"}"));
    // Internal subscriptions (system services) count too, as in nats-server: compare
    // with the count before the client subscribes.
    let (_, before) = s.http_get("/varz");
    let before: serde_json::Value = serde_json::from_str(&before).unwrap();
    let internal = before["subscriptions"].as_u64().unwrap();
    let mut c = s.raw();
    c.handshake();
    c.send_str("SUB a 1\r\nSUB b 2\r\nPUB a 5\r\nhello\r\nPING\r\n");
    c.expect("MSG a 1 5\r\nhello\r\nPONG\r\n");
    let (code, body) = s.http_get("/varz");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["version"], "2.14.0");
    assert_eq!(v["port"], s.port);
    assert_eq!(v["connections"], 1);
    assert_eq!(v["subscriptions"].as_u64(), Some(internal + 2));
    assert_eq!(v["in_msgs"], 1);
    assert_eq!(v["out_msgs"], 1);
    assert_eq!(v["in_bytes"], 5);
    assert_eq!(v["max_payload"], 1048576);
    assert_eq!(v["ping_interval"], 120_000_000_000u64);
    assert_eq!(v["auth_timeout"], 2);
    assert!(body.contains("\"auth_timeout\": 2,"), "integral floats print like Go");
    assert_eq!(v["http_req_stats"]["/varz"], 2);
    assert_eq!(v["rnats_shards"], 3);
    assert!(v["mem"].as_u64().unwrap() > 0);
    let (code, _) = s.http_get("/nope");
    assert_eq!(code, 404);
});

#[test]
fn falls_back_to_mio_when_io_uring_is_unavailable() {
    // The default reactor probes io_uring at run time; when setup fails the server says
    // why and serves on mio (issue 3). RNATS_FORCE_NO_URING makes the probe fail.
    let s = Server::start_env(
        bin(),
        &["-a", "127.0.0.1", "-p", "-1"],
        &[("RNATS_FORCE_NO_URING", "1")],
    );
    let text = s.log_lines().join("\n");
    assert!(
        text.contains("io_uring unavailable (disabled by RNATS_FORCE_NO_URING), using mio"),
        "{text}"
    );
    assert!(text.contains("Using the mio reactor"), "{text}");
    let mut c = s.raw();
    c.handshake();
    c.send_str("SUB x 1\r\nPUB x 2\r\nok\r\nPING\r\n");
    c.expect("MSG x 1 2\r\nok\r\nPONG\r\n");
    // Asking for io_uring explicitly then fails clearly instead of falling back.
    let out = Command::new(bin())
        .args(["-a", "127.0.0.1", "-p", "-1", "--reactor", "uring"])
        .env("RNATS_FORCE_NO_URING", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("io_uring reactor requested but unavailable"));
}

#[cfg(all(target_os = "linux", feature = "uring"))]
#[test]
fn default_reactor_is_uring_when_it_works() {
    let s = Server::start_cmd(bin(), &["-a", "127.0.0.1", "-p", "-1"]);
    let text = s.log_lines().join("\n");
    if shards::uring::probe(rnats::driver::uring::RING_ENTRIES).is_err() {
        assert!(text.contains("using mio"), "{text}");
    } else if shards::uring_io::probe_completion().is_ok() {
        assert!(text.contains("Using the io_uring reactor on"), "{text}");
    } else {
        assert!(text.contains("using readiness polls"), "{text}");
        assert!(text.contains("Using the io_uring-poll reactor"), "{text}");
    }
}

/// `--reactor uring-poll` runs the ring as on a kernel without completion I/O (multishot
/// readiness polls, reads and writes by system call), and serves the same bytes.
#[cfg(all(target_os = "linux", feature = "uring"))]
#[test]
fn uring_poll_runs_without_completion_io() {
    if shards::uring::probe(rnats::driver::uring::RING_ENTRIES).is_err() {
        return;
    }
    let s = Server::start_cmd(bin(), &["-a", "127.0.0.1", "-p", "-1", "--reactor", "uring-poll"]);
    let text = s.log_lines().join("\n");
    assert!(text.contains("Using the io_uring-poll reactor"), "{text}");
    let mut c = s.raw();
    c.handshake();
    let body = "z".repeat(300_000);
    c.send_str(&format!("SUB x 1\r\nPUB x {}\r\n{body}\r\nPING\r\n", body.len()));
    c.expect(&format!("MSG x 1 {}\r\n{body}\r\nPONG\r\n", body.len()));
}

/// `--sqpoll_ms`: each shard's kernel submission thread takes its I/O. Connections that
/// close with output in flight while others open (and may get the freed descriptor
/// numbers) see only their own messages. (The unit test
/// `sqpoll_removal_leaves_nothing_queued` checks the invariant behind this directly.)
#[cfg(all(target_os = "linux", feature = "uring"))]
#[test]
fn sqpoll_threads_serve_and_keep_sockets_apart() {
    if shards::uring::probe(rnats::driver::uring::RING_ENTRIES).is_err() {
        return;
    }
    let s = Server::start_cmd(
        bin(),
        &["-a", "127.0.0.1", "-p", "-1", "--shards", "2", "--sqpoll_ms", "20"],
    );
    let text = s.log_lines().join("\n");
    assert!(text.contains("submission threads poll 20 ms"), "{text}");
    let body = "q".repeat(70_000);
    for round in 0..40 {
        // One connection floods itself and goes away without reading; the next ones check
        // that what they receive is theirs.
        let mut flood = s.raw();
        flood.handshake();
        let mut burst = format!("SUB gone.{round} 1\r\n");
        for _ in 0..20 {
            burst.push_str(&format!("PUB gone.{round} {}\r\n{body}\r\n", body.len()));
        }
        flood.send_str(&burst);
        drop(flood);
        let mut c = s.raw();
        c.handshake();
        c.send_str(&format!(
            "SUB mine.{round} 1\r\nPUB mine.{round} 5\r\nhello\r\nPING\r\n"
        ));
        c.expect(&format!("MSG mine.{round} 1 5\r\nhello\r\nPONG\r\n"));
    }
}

/// `--send_zc`: large sends go zero-copy; big messages still arrive whole and in order
/// (the unit tests in `shards/src/uring_send_tests.rs` check the notifications).
#[cfg(all(target_os = "linux", feature = "uring"))]
#[test]
fn zero_copy_sends_deliver_big_messages() {
    if shards::uring::probe(rnats::driver::uring::RING_ENTRIES).is_err()
        || shards::uring_io::probe_completion().is_err()
    {
        return;
    }
    let s = Server::start_cmd(
        bin(),
        &["-a", "127.0.0.1", "-p", "-1", "--shards", "2", "--send_zc", "16384"],
    );
    let text = s.log_lines().join("\n");
    assert!(text.contains("sends of 16384 bytes or more go zero-copy"), "{text}");
    let mut sub = s.raw();
    sub.handshake();
    sub.send_str("SUB big 1\r\nPING\r\n");
    sub.expect("PONG\r\n");
    let mut p = s.raw();
    p.handshake();
    for round in 0..30 {
        let body: String = (0..100_000)
            .map(|i| char::from(b'a' + ((i + round) % 26) as u8))
            .collect();
        p.send_str(&format!("PUB big {}\r\n{body}\r\n", body.len()));
        sub.expect(&format!("MSG big 1 {}\r\n{body}\r\n", body.len()));
    }
}

both_reactors!(logging_flags, |r| {
    // -T=false drops the timestamp; -D adds debug lines; -l writes to a file.
    let dir = common::scratch_dir();
    let log = dir.join("server.log");
    let mut s = Server::spawn_logging_to(r, &log, &["-T=false", "-D", "-l", log.to_str().unwrap()]);
    let mut c = common::Raw::connect(s.port);
    c.handshake();
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    let pid = s.pid();
    assert_eq!(s.stop_with(libc::SIGTERM).code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(first, format!("[{pid}] [INF] Starting nats-server"));
    assert!(text.contains("[DBG] 127.0.0.1:"), "{text}");
    assert!(text.contains("Client connection created"), "{text}");
    assert!(text.contains("Client connection closed: Client Closed"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
});

/// Flags of the reference's list whose feature rnats lacks: parsed with the reference's
/// types and messages, then refused at startup by name; `--routes` without a cluster
/// fails as in the reference.
#[test]
fn reference_flags_of_missing_features() {
    let reference = common::reference_server();
    let on = |p: &str, args: &[&str]| {
        let out = Command::new(p).args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in [
        &["--connect_retries", "x"][..],
        &["-ms", "x"][..],
        &["--profile=x"][..],
        &["-sd"][..],
        &["--no_advertise=x"][..],
        &["--routes", "nats://127.0.0.1:1"][..],
        &["-p", "-1", "--routes", "nats://127.0.0.1:1"][..],
        &["--tls"][..],
        &["--tls", "--tlscert", "c.pem"][..],
        &[
            "--tlsverify",
            "--tlscert",
            "/nonexistent/c.pem",
            "--tlskey",
            "/nonexistent/k.pem",
        ][..],
    ] {
        assert_eq!(on(bin(), args), on(&reference, args), "{args:?}");
    }
    let args = ["-p", "-1", "--cluster", "nats://127.0.0.1:-1"];
    let (code, err) = on(bin(), &args);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "nats-server: clustering (--cluster, --cluster_listen, --routes) is not supported by rnats yet\n"
        ),
        "{args:?}"
    );
}

both_reactors!(store_dir_and_cluster_tuning_flags_are_accepted, |r| {
    let dir = common::scratch_dir();
    let s = Server::start(
        r,
        &[
            "-sd",
            dir.to_str().unwrap(),
            "--cluster_name",
            "c1",
            "--no_advertise",
            "-js=false",
        ],
    );
    let mut c = s.raw();
    c.send_str("PING\r\n");
    c.expect("PONG\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
});

// A supervisor or test harness that starts the next server the moment the last one was
// killed finds the port free: the start waits a moment for a port in use, since io_uring
// rings let go of their listeners a few milliseconds after the process is gone (nats.py's
// harness restarts its server between every two tests). Here the next server starts while
// the old one still runs, and gets the port once it is killed.
both_reactors!(a_start_waits_for_the_port_of_a_server_just_killed, |r| {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let dir = common::scratch_dir();
    let sd = format!("-sd={}", dir.display());
    let args: Vec<String> = [&["-a", "127.0.0.1", "-p", &port, "-js", &sd][..], &r.args()[..]]
        .concat()
        .into_iter()
        .map(String::from)
        .collect();
    let mut old = Server::start_cmd(bin(), &args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut c = old.raw();
    c.handshake();
    let next =
        std::thread::spawn(move || Server::start_cmd(bin(), &args.iter().map(String::as_str).collect::<Vec<_>>()));
    std::thread::sleep(Duration::from_millis(300));
    let mut child = old.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop(c);
    let new = next.join().unwrap();
    let mut c = new.raw();
    c.handshake();
    c.ping_pong();
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
});
