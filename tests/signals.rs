//! Signals and `--signal` commands (FEATURES.md §22), and lame duck mode: real clients
//! are told (INFO `ldm: true`), closed gradually after the grace period, and reconnect
//! to another server; the server then exits 0.
// Driven by Unix signals (graceful stop, reload, reopen), as these features are.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{bin, rt, scratch_dir, Server};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

fn ldm_conf(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("ldm.conf");
    std::fs::write(&p, "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"1s\"\n").unwrap();
    p
}

both_reactors!(lame_duck_moves_real_clients_elsewhere, |r| {
    let dir = scratch_dir();
    let conf = ldm_conf(&dir);
    let mut a = Server::start(r, &["-c", conf.to_str().unwrap(), "--shards", "2"]);
    let b = Server::start(r, &["--shards", "2"]);
    let mut raw = a.raw();
    raw.send_str("CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n");
    raw.expect("PONG\r\n");
    raw.drain(Duration::from_millis(100));
    let (a_url, b_url) = (a.url(), b.url());
    rt().block_on(async {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let nc = async_nats::ConnectOptions::new()
            .retain_servers_order()
            .event_callback(move |e| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(e.to_string());
                }
            })
            .connect(vec![
                a_url.parse::<async_nats::ServerAddr>().unwrap(),
                b_url.parse::<async_nats::ServerAddr>().unwrap(),
            ])
            .await
            .unwrap();
        let mut sub = nc.subscribe("ldm.test").await.unwrap();
        nc.flush().await.unwrap();
        let t0 = Instant::now();
        a.signal(libc::SIGUSR2);
        a.wait_for_log("Trapped \"user defined signal 2\" signal", WAIT)
            .unwrap();
        a.wait_for_log("Entering lame duck mode, stop accepting new clients", WAIT)
            .unwrap();
        // SIGTERM is ignored while in lame duck mode.
        a.signal(libc::SIGTERM);
        a.wait_for_log("Trapped \"terminated\" signal", WAIT).unwrap();
        // The raw protocol-1 client got the lame duck INFO.
        let info = raw.read_line(WAIT);
        assert!(info.starts_with("INFO ") && info.contains("\"ldm\":true"), "{info}");
        // No new clients meanwhile.
        assert!(std::net::TcpStream::connect(("127.0.0.1", a.port)).is_err());
        // The async client is closed after the grace period and lands on b.
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let e = tokio::time::timeout(deadline - Instant::now(), events.recv())
                .await
                .unwrap_or_else(|_| panic!("no reconnect; events: {seen:?}"))
                .unwrap();
            seen.push(e.clone());
            if e == "connected" && seen.iter().any(|x| x == "disconnected") {
                break;
            }
        }
        assert!(seen.iter().any(|x| x == "lame duck mode detected"), "{seen:?}");
        assert!(t0.elapsed() >= Duration::from_millis(900), "grace period respected");
        let other = async_nats::connect(b_url.as_str()).await.unwrap();
        // Resubscribed on b: a message published there arrives.
        let deadline = Instant::now() + WAIT;
        loop {
            other.publish("ldm.test", "moved".into()).await.unwrap();
            other.flush().await.unwrap();
            if let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(200), futures::StreamExt::next(&mut sub)).await
            {
                assert_eq!(m.payload.as_ref(), b"moved");
                break;
            }
            assert!(Instant::now() < deadline, "no message through b");
        }
    });
    let st = a.wait_exit(WAIT);
    assert_eq!(st.code(), Some(0));
    raw.until_closed(WAIT);
    a.wait_for_log("Server Exiting..", WAIT).unwrap();
    let text = a.log_lines().join("\n");
    for want in ["Closing existing clients", "Initiating Shutdown...", "Server Exiting.."] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
});

both_reactors!(lame_duck_without_clients_exits_at_once, |r| {
    let mut s = Server::start(r, &[]);
    s.signal(libc::SIGUSR2);
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
    s.wait_for_log("Server Exiting..", WAIT).unwrap();
    let text = s.log_lines().join("\n");
    assert!(
        text.contains("Entering lame duck mode") && text.contains("Server Exiting.."),
        "{text}"
    );
});

fn rnats(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

both_reactors!(signal_commands_by_pid_and_pid_file, |r| {
    let dir = scratch_dir();
    let pid_file = dir.join("s.pid");
    let mut s = Server::start(r, &["-P", pid_file.to_str().unwrap()]);
    let pid = s.pid().to_string();
    // reopen without a log file: logged and ignored.
    assert_eq!(rnats(&["--signal", &format!("reopen={pid}")]), (0, String::new()));
    s.wait_for_log("File log re-open ignored, not a file logger", WAIT)
        .unwrap();
    // quit by pid file: SIGINT, exit 0.
    assert_eq!(
        rnats(&["-sl", &format!("quit={}", pid_file.display())]),
        (0, String::new())
    );
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
    s.wait_for_log("Server Exiting..", WAIT).unwrap();
    assert!(s.log_lines().join("\n").contains("Trapped \"interrupt\" signal"));
    let _ = std::fs::remove_dir_all(&dir);
});

#[test]
fn signal_command_errors_like_the_reference() {
    assert_eq!(
        rnats(&["--signal", "reload=1=2"]),
        (1, "nats-server: invalid signal parameters: [2]\n".into())
    );
    assert_eq!(
        rnats(&["--signal", "reload=abc"]),
        (1, "nats-server: invalid pid: abc\n".into())
    );
    assert_eq!(
        rnats(&["--signal", "foo=999999"]),
        (1, "nats-server: unknown signal \"foo\"\n".into())
    );
    assert_eq!(
        rnats(&["--signal", "reload=999999"]),
        (1, "nats-server: \nsignal \"reload\" 999999: no such process\n".into())
    );
    // With two servers running, no pid is ambiguous.
    let _a = Server::start(common::Reactor::Mio, &[]);
    let _b = Server::start(common::Reactor::Mio, &[]);
    let (code, err) = rnats(&["--signal", "reload"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("nats-server: multiple rnats processes running:\n"),
        "{err}"
    );
}

both_reactors!(stop_kills, |r| {
    let mut s = Server::start(r, &[]);
    let pid = s.pid().to_string();
    assert_eq!(rnats(&["--signal", &format!("stop={pid}")]).0, 0);
    let st = s.wait_exit(WAIT);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(libc::SIGKILL));
});
