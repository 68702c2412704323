//! Test harness: start the real `rnats` binary on a random loopback port with a chosen
//! reactor, talk to it with raw TCP or `async-nats`, and stop it.
#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

pub mod diff;
pub mod jsdiff;
pub mod pki;
pub mod ws;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which reactor a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reactor {
    Uring,
    Mio,
}

impl Reactor {
    pub fn flag(self) -> &'static str {
        match self {
            // `RNATS_TEST_URING_MODE=poll`: the io_uring tests run on its readiness path
            // (as on a kernel without completion I/O).
            Reactor::Uring if std::env::var("RNATS_TEST_URING_MODE").is_ok_and(|v| v == "poll") => "uring-poll",
            Reactor::Uring => "uring",
            Reactor::Mio => "mio",
        }
    }

    /// The reactor's arguments: `--reactor` and, on io_uring, with
    /// `RNATS_TEST_URING_MODE=sqpoll` kernel submission threads (`--sqpoll_ms`), with
    /// `RNATS_TEST_URING_MODE=send_zc` every send zero-copy (`--send_zc 1`).
    pub fn args(self) -> Vec<&'static str> {
        let mut v = vec!["--reactor", self.flag()];
        if self == Reactor::Uring {
            match std::env::var("RNATS_TEST_URING_MODE").as_deref() {
                Ok("sqpoll") => v.extend(["--sqpoll_ms", "20"]),
                Ok("send_zc") => v.extend(["--send_zc", "1"]),
                _ => {}
            }
        }
        v
    }
}

/// The `--reactor` values this build can run (io_uring only with the `uring` feature).
pub fn reactor_flags() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(all(target_os = "linux", feature = "uring")) {
        v.push("uring");
    }
    v.push("mio");
    v
}

/// Run a test body once per reactor: `both_reactors!(name, |r| body(r));`.
/// Without the `uring` feature only the mio variant exists.
#[macro_export]
macro_rules! both_reactors {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[cfg(all(target_os = "linux", feature = "uring"))]
            #[test]
            fn uring() {
                let f: fn(common::Reactor) = $body;
                f(common::Reactor::Uring)
            }
            #[test]
            fn mio() {
                let f: fn(common::Reactor) = $body;
                f(common::Reactor::Mio)
            }
        }
    };
}

/// A running server process; stopped (SIGTERM, then kill) on drop.
pub struct Server {
    pub child: Option<Child>,
    pub port: u16,
    pub http_port: Option<u16>,
    pub log: Arc<Mutex<Vec<String>>>,
    pub dir: std::path::PathBuf,
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rnats")
}

fn unique_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "rnats-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    // A directory of this name is left from a dead process whose pid was reused (pids
    // wrap at 32,768 here): its old streams must not leak into this test.
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Server {
    /// Start with `--reactor r`, a random port and `extra` flags.
    pub fn start(r: Reactor, extra: &[&str]) -> Server {
        if let Ok(other) = std::env::var("RNATS_TEST_OTHER_SERVER") {
            // Experiments: run the same test against another server (rnats-only flags dropped).
            let mut args = vec!["-a", "127.0.0.1", "-p", "-1"];
            let mut it = extra.iter();
            while let Some(a) = it.next() {
                if *a == "--shards" || *a == "--reactor" {
                    it.next();
                } else {
                    args.push(a);
                }
            }
            return Self::start_cmd(&other, &args);
        }
        Self::start_cmd(
            bin(),
            &[&["-a", "127.0.0.1", "-p", "-1"], &r.args()[..], extra].concat(),
        )
    }

    /// Start any nats-server compatible binary with exactly `args`.
    pub fn start_cmd(program: &str, args: &[&str]) -> Server {
        Self::start_env(program, args, &[])
    }

    /// Start with extra environment variables.
    pub fn start_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = unique_dir();
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l2 = log.clone();
        std::thread::spawn(move || {
            let mut ready_sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let ready = line.contains("Server is ready");
                l2.lock().unwrap().push(line);
                if ready && !ready_sent {
                    ready_sent = true;
                    let _ = tx.send(());
                }
            }
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(20));
        let lines = log.lock().unwrap().clone();
        let port = lines
            .iter()
            .find_map(|l| l.split("Listening for client connections on ").nth(1))
            .and_then(|hp| hp.rsplit(':').next())
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("server did not start: {lines:#?}"));
        let http_port = lines
            .iter()
            .find_map(|l| l.split("Starting http monitor on ").nth(1))
            .and_then(|hp| hp.rsplit(':').next())
            .and_then(|p| p.trim().parse().ok());
        Server {
            child: Some(child),
            port,
            http_port,
            log,
            dir,
        }
    }

    /// Start on a port the server picks (`-p -1`), not known here: for a test that never
    /// connects (its server logs to syslog, say).
    pub fn spawn_any_port(r: Reactor, extra: &[&str]) -> Server {
        let mut args = vec!["-a", "127.0.0.1", "-p", "-1"];
        args.extend(r.args());
        args.extend_from_slice(extra);
        let child = Command::new(bin()).args(&args).spawn().unwrap();
        Server {
            child: Some(child),
            port: 0,
            http_port: None,
            log: Arc::default(),
            dir: unique_dir(),
        }
    }

    /// Start on a port the server picks (`-p -1`) for a test whose server logs to the file
    /// `log` (named by `extra` or its config file): waits until the file says the server is
    /// ready and reads the port from it. (A port probed free beforehand can be taken by a
    /// parallel test's server before this one binds it.)
    pub fn spawn_logging_to(r: Reactor, log: &std::path::Path, extra: &[&str]) -> Server {
        let mut s = Self::spawn_any_port(r, extra);
        let text = wait_file(log, "Server is ready", Duration::from_secs(20));
        s.port = text
            .lines()
            .find_map(|l| l.split("Listening for client connections on ").nth(1))
            .and_then(|hp| hp.trim().rsplit(':').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no listening port in {}:\n{text}", log.display()));
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// GET a monitoring path, returning (status, body).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        http_get(self.http_port.expect("monitoring not enabled"), path)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Send a signal and wait for the exit status.
    pub fn stop_with(&mut self, sig: i32) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        send_signal(&mut child, sig);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not exit on signal {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            send_signal(&mut c, SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut exited = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    exited = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if !exited {
                // A test that checks what a clean stop writes would otherwise fail without
                // saying that the stop was not clean.
                eprintln!("the server did not stop within 5 s of SIGTERM: killed");
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A raw protocol connection.
pub struct Raw {
    pub s: TcpStream,
    pub buf: Vec<u8>,
    pub info: String,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        let mut r = Raw {
            s,
            buf: Vec::new(),
            info: String::new(),
        };
        let info = r.read_line(Duration::from_secs(5));
        assert!(info.starts_with("INFO {"), "expected INFO, got {info:?}");
        r.info = info;
        r
    }

    pub fn send(&mut self, data: &[u8]) {
        self.s.write_all(data).unwrap();
    }

    pub fn send_str(&mut self, data: &str) {
        self.send(data.as_bytes());
    }

    fn fill(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        self.s
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut chunk = [0u8; 65536];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return true;
                }
                // A signal to the test process (not the peer): read again.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Read one CRLF-terminated line.
    pub fn read_line(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..p + 2).collect();
                return String::from_utf8_lossy(&line[..p]).into_owned();
            }
            if !self.fill(deadline) {
                panic!(
                    "no line within {timeout:?}; have {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
        }
    }

    /// Expect exactly `want` next (waits until that many bytes arrived).
    /// PING, then wait for its PONG, answering the server's own PINGs meanwhile (its RTT
    /// probe comes about 2 s after CONNECT, so a long test on a loaded machine sees it).
    pub fn ping_pong(&mut self) {
        self.send_str("PING\r\n");
        loop {
            match self.read_line(Duration::from_secs(10)).as_str() {
                "PING" => self.send_str("PONG\r\n"),
                line => {
                    assert_eq!(line, "PONG");
                    return;
                }
            }
        }
    }

    /// [`Raw::expect`], answering (and dropping) the server's own PINGs that come first.
    pub fn expect_answering_pings(&mut self, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            while self.buf.len() < want.len().min(6) && self.fill(deadline) {}
            if self.buf.starts_with(b"PING\r\n") && !want.starts_with("PING\r\n") {
                self.buf.drain(..6);
                self.send_str("PONG\r\n");
                continue;
            }
            return self.expect(want);
        }
    }

    pub fn expect(&mut self, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.buf.len() < want.len() {
            if !self.fill(deadline) {
                break;
            }
        }
        let got = String::from_utf8_lossy(&self.buf[..self.buf.len().min(want.len())]).into_owned();
        assert_eq!(got, want, "full buffer: {:?}", String::from_utf8_lossy(&self.buf));
        self.buf.drain(..want.len());
    }

    /// Everything that arrives until `quiet` passes without data (or EOF).
    pub fn drain(&mut self, quiet: Duration) -> String {
        loop {
            if !self.fill(Instant::now() + quiet) {
                break;
            }
        }
        let out = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        out
    }

    /// Read until the server closes; returns what arrived before.
    pub fn until_closed(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "connection still open; have {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.s.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                    panic!("connection still open; have {:?}", String::from_utf8_lossy(&self.buf))
                }
                Err(e) => {
                    eprintln!("until_closed: read failed ({e}); treated as closed");
                    break;
                }
            }
        }
        let out = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        out
    }

    /// CONNECT quietly and wait for the PONG.
    pub fn handshake(&mut self) {
        self.send_str("CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\nPING\r\n");
        self.expect("PONG\r\n");
    }
}

/// A tokio runtime for async-nats tests.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait for a server child that logs to the file `log` and was told to listen on `port`
/// to say it is ready. `false` when it exited first (most often: a parallel test's server
/// took the port between [`free_port`] and the bind, so the caller starts again on another).
pub fn wait_ready_on(child: &mut std::process::Child, log: &std::path::Path, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    let listening = format!("Listening for client connections on 127.0.0.1:{port}");
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(&listening) && text.contains("Server is ready") {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        assert!(Instant::now() < deadline, "server did not start:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until the file at `path` contains `needle`; its text then.
pub fn wait_file(path: &std::path::Path, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} not in {}:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory for a test's files (removed by the caller or left in the temp dir).
pub fn scratch_dir() -> std::path::PathBuf {
    unique_dir()
}

#[cfg(unix)]
const SIGTERM: i32 = libc::SIGTERM;
#[cfg(not(unix))]
const SIGTERM: i32 = 15;

/// Deliver `sig` to our child; without Unix signals, end it at once.
fn send_signal(child: &mut std::process::Child, sig: i32) {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own child's pid, not yet reaped.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    #[cfg(not(unix))]
    {
        let _ = sig;
        let _ = child.kill();
    }
}

/// The reference nats-server binary: `NATS_REFERENCE_SERVER`, or what the repository's
/// `tools/reference-server` prints (it downloads the binary into the user's cache on first
/// use). Looked up once per test binary.
pub fn reference_server() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("NATS_REFERENCE_SERVER") {
            return p;
        }
        let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/reference-server");
        let out = Command::new(&tool)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

impl Server {
    /// Wait until a log line containing `needle` appears; the log so far on timeout.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.log_lines();
            if lines.iter().any(|l| l.contains(needle)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(lines.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many log lines contain `needle`.
    pub fn count_log(&self, needle: &str) -> usize {
        self.log_lines().iter().filter(|l| l.contains(needle)).count()
    }

    /// Send a signal without waiting.
    #[cfg(unix)]
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid() as i32, sig);
        }
    }

    /// Wait for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
