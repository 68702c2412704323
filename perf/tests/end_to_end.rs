//! End-to-end checks of the `rnats-perf` binary against the reference nats-server: every
//! scenario briefly (tiny counts), `compare` (reference against itself), and the refusals
//! (non-NATS port, non-loopback target); and the auth scenarios (`perms`, `import`,
//! `compare-auth`, `auth-config`) briefly against rnats (and the reference when present).
//!
//! The reference binary comes from `$NATS_REFERENCE_SERVER`, else from
//! the repository's `tools/reference-server` (which downloads it on first use); the rnats
//! binary from `$RNATS_BIN`, else the `rnats` built in this target folder (`cargo build -p
//! rnats`, debug or release). Without them the server tests are skipped with a message.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rnats-perf");

fn reference() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_REFERENCE_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("tools/reference-server");
    let out = Command::new(script).stderr(Stdio::null()).output().ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && path.is_file()).then_some(path)
}

fn rnats() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RNATS_BIN") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    // The test runs from <target>/<profile>/deps/.
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?;
    ["debug", "release"]
        .iter()
        .map(|profile| target.join(profile).join("rnats"))
        .find(|p| p.is_file())
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(bin: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "reference server did not start");
            thread::sleep(Duration::from_millis(20));
        }
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn perf(args: &[&str]) -> Output {
    Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap()
}

fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnats-perf-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_scenario_briefly_against_the_reference() {
    let Some(bin) = reference() else {
        eprintln!("SKIPPED: reference nats-server not available (set NATS_REFERENCE_SERVER)");
        return;
    };
    let server = Server::start(&bin);
    let url = format!("127.0.0.1:{}", server.port);
    let pid = server.child.id().to_string();
    let dir = tmp("scenarios");
    let cases: &[(&str, &[&str])] = &[
        ("pub", &["--msgs", "5000"]),
        ("pubsub", &["--msgs", "5000", "--pubs", "2", "--subs", "2"]),
        ("fanout", &["--msgs", "2000", "--subs", "3"]),
        ("fanin", &["--msgs", "5000", "--pubs", "3"]),
        ("queue", &["--msgs", "5000", "--subs", "3"]),
        ("pairs", &["--msgs", "6000", "--pubs", "3"]),
        ("reqrep", &["--msgs", "300", "--pubs", "2", "--subs", "2"]),
        ("conns", &["--conns", "50", "--msgs", "3"]),
        ("subjects", &["--subjects", "3000", "--msgs", "5000", "--subs", "2"]),
    ];
    for (scenario, extra) in cases {
        let json = dir.join(format!("{scenario}.json"));
        let json_s = json.to_str().unwrap();
        let mut args = vec![
            *scenario,
            "--url",
            &url,
            "--pid",
            &pid,
            "--quiet",
            "--duration",
            "10",
            "--json",
            json_s,
        ];
        args.extend_from_slice(extra);
        let out = perf(&args);
        assert!(out.status.success(), "{scenario}: {}", show(&out));
        let results: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let r = &results[0];
        assert_eq!(r["scenario"], *scenario);
        assert_eq!(r["complete"], true, "{scenario}: {r:#}");
        assert_eq!(r["delivered"], r["expected"], "{scenario}");
        assert!(r["msgs_per_s"].as_f64().unwrap() > 0.0, "{scenario}");
        assert!(
            r["server"]["rss_kb_after"].as_u64().unwrap() > 0,
            "{scenario}: server stats from --pid"
        );
        if !matches!(*scenario, "reqrep" | "conns") {
            // The flow scenarios: the load generator's CPU beside the server's.
            let l = &r["load"];
            assert!(l["cpu_s"].as_f64().is_some_and(|c| c >= 0.0), "{scenario}: {r:#}");
            assert!(l["cpus"].as_u64().is_some_and(|c| c >= 1), "{scenario}");
            assert!(l["wall_s"].as_f64().is_some_and(|w| w > 0.0), "{scenario}");
            assert!(l["ceiling_msgs_per_s"].as_f64().is_none_or(|c| c > 0.0), "{scenario}");
            assert!(l["busy_cpus"].as_f64().is_some(), "{scenario}: server CPU from --pid");
        }
        match *scenario {
            "reqrep" => assert!(r["latency_us"]["p99"].as_f64().unwrap() > 0.0),
            "queue" => assert_eq!(r["per_sub"].as_array().unwrap().len(), 3),
            // Each pair's subscriber gets its own publisher's share, and only that.
            "pairs" => assert_eq!(r["per_sub"], serde_json::json!([2000, 2000, 2000])),
            "conns" => assert_eq!(r["conns"]["conns"], 50),
            "subjects" => assert_eq!(r["subjects"]["subscriptions"], 3000),
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn compare_writes_json_and_svg() {
    let Some(bin) = reference() else {
        eprintln!("SKIPPED: reference nats-server not available (set NATS_REFERENCE_SERVER)");
        return;
    };
    let dir = tmp("compare");
    let bin = bin.to_str().unwrap();
    let out = perf(&[
        "compare",
        "--a",
        bin,
        "--b",
        bin,
        "--a-name",
        "ref1",
        "--b-name",
        "ref2",
        "--scenarios",
        "pubsub,reqrep",
        "--rounds",
        "2",
        "--msgs",
        "2000",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("A/B") && stdout.contains("pubsub") && stdout.contains("p99 us"),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("compare.json")).unwrap()).unwrap();
    assert_eq!(report["scenarios"].as_array().unwrap().len(), 2);
    assert_eq!(report["scenarios"][0]["a_runs"].as_array().unwrap().len(), 2);
    let svg = std::fs::read_to_string(dir.join("compare.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("pubsub"), "{svg}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_non_nats_port_fails_fast_and_clearly() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    // A tiny HTTP-like server: waits for a request, answers 400.
    let t = thread::spawn(move || {
        for _ in 0..2 {
            let Ok((mut s, _)) = l.accept() else { return };
            let mut buf = [0u8; 512];
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let started = Instant::now();
    let out = perf(&["pub", "--url", &format!("127.0.0.1:{port}"), "--quiet", "--msgs", "10"]);
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a NATS server"), "{err}");
    drop(t);
}

#[test]
fn non_loopback_targets_are_refused() {
    let out = perf(&["pub", "--url", "192.0.2.1:4222", "--quiet"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing non-loopback target"), "{err}");
}

fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn number(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `perms` and `import` against one server binary the lab starts (with its auth config).
fn auth_scenarios_against(name: &str, bin: &Path, dir: &Path) {
    let bin = bin.to_str().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("perms", &["--msgs", "20000", "--size", "16"]),
        ("import", &["--msgs", "300", "--size", "1024"]),
    ];
    for (scenario, extra) in cases {
        let json = dir.join(format!("{name}-{scenario}.json"));
        let mut args = vec![*scenario, "--server", bin, "--quiet", "--duration", "10"];
        args.extend_from_slice(&["--json", json.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = perf(&args);
        assert!(out.status.success(), "{name} {scenario}: {}", show(&out));
        let r = &json_file(&json)[0];
        assert_eq!(r["scenario"], *scenario);
        assert_eq!(r["complete"], true, "{name} {scenario}: {r:#}");
        assert_eq!(r["delivered"], r["expected"], "{name} {scenario}");
        let pair = &r["pair"];
        let runs = pair["baseline_runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{name} {scenario}: two baseline runs");
        assert!(runs.iter().all(|v| number(v) > 0.0), "{name} {scenario}: {pair:#}");
        // Sane, not a target: the same flow as another user cannot differ by 10x.
        let ratio = number(&pair["rate_ratio"]);
        assert!((0.1..10.0).contains(&ratio), "{name} {scenario}: ratio {ratio}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("checked: "), "{stdout}");
        match *scenario {
            "perms" => {
                assert_eq!(r["published"], 20000);
                assert_eq!(pair["checks"].as_array().unwrap().len(), 3);
                assert_eq!(pair["baseline"], "plain user");
            }
            _ => {
                assert_eq!(r["delivered"], 300);
                assert_eq!(pair["baseline"], "same account");
                for l in [&r["latency_us"], &pair["baseline_latency_us"]] {
                    let (p50, p90, p99) = (number(&l["p50"]), number(&l["p90"]), number(&l["p99"]));
                    assert!(0.0 < p50 && p50 <= p90 && p90 <= p99, "{name}: {l:#}");
                }
                let p99 = number(&pair["p99_ratio"]);
                let want = number(&r["latency_us"]["p99"]) / number(&pair["baseline_latency_us"]["p99"]);
                assert!((p99 - want).abs() < 1e-9, "{name}: p99 ratio {p99} vs {want}");
            }
        }
    }
}

#[test]
fn auth_scenarios_briefly_against_rnats() {
    let Some(rnats) = rnats() else {
        eprintln!("SKIPPED: rnats binary not found (cargo build -p rnats, or set RNATS_BIN)");
        return;
    };
    let dir = tmp("auth");
    // The written config is valid for both servers.
    let conf = dir.join("auth.conf");
    let out = perf(&["auth-config", conf.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let reference = reference();
    for bin in std::iter::once(&rnats).chain(reference.as_ref()) {
        let check = Command::new(bin)
            .args(["-t", "-c", conf.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(check.status.success(), "{}: {}", bin.display(), show(&check));
    }
    auth_scenarios_against("rnats", &rnats, &dir);
    if let Some(r) = &reference {
        auth_scenarios_against("reference", r, &dir);
    }

    let b = reference.unwrap_or_else(|| rnats.clone());
    let out_dir = dir.join("compare-auth");
    let out = perf(&[
        "compare-auth",
        "--a",
        rnats.to_str().unwrap(),
        "--b",
        b.to_str().unwrap(),
        "--rounds",
        "1",
        "--msgs",
        "500",
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("targets (issue 8)") && stdout.contains("perms/plain") && stdout.contains("p99 import/same"),
        "{stdout}"
    );
    let report = json_file(&out_dir.join("compare.json"));
    let labels: Vec<&str> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["perms 16B", "perms 1KiB", "import 16B", "import 1KiB"]);
    for s in report["scenarios"].as_array().unwrap() {
        assert!(s["a_errors"].as_array().unwrap().is_empty(), "{s:#}");
        assert_eq!(s["a_runs"][0]["complete"], true, "{s:#}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn auth_scenarios_refuse_a_server_without_the_lab_config() {
    let Some(bin) = rnats().or_else(reference) else {
        eprintln!("SKIPPED: no server binary (cargo build -p rnats, or set RNATS_BIN)");
        return;
    };
    let server = Server::start(&bin);
    let url = format!("127.0.0.1:{}", server.port);
    for (scenario, want) in [
        ("perms", "does not enforce the lab's permissions"),
        ("import", "does not run the lab's accounts"),
    ] {
        let out = perf(&[scenario, "--url", &url, "--quiet", "--msgs", "10"]);
        assert!(!out.status.success(), "{scenario}: {}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{scenario}: {err}");
    }
    let out = perf(&["all", "--scenarios", "pub,perms", "--url", &url, "--quiet"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("run them apart"),
        "{}",
        show(&out)
    );
}

/// The JetStream scenarios against one server binary the lab starts (with `-js -sd <tmp>`).
fn jetstream_scenarios_against(name: &str, bin: &Path, dir: &Path) {
    let bin = bin.to_str().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "js-pub-async",
            &["--msgs", "5000", "--streams", "2", "--inflight", "100"],
        ),
        ("js-pub-sync", &["--msgs", "300"]),
        ("js-pull", &["--msgs", "3000", "--fetch", "200"]),
        ("js-push", &["--msgs", "3000", "--size", "1024"]),
        ("kv-put", &["--msgs", "3000", "--keys", "500"]),
        (
            "kv-get",
            &["--msgs", "3000", "--keys", "500", "--size", "100", "--pad-conns", "1"],
        ),
    ];
    for (scenario, extra) in cases {
        let json = dir.join(format!("{name}-{scenario}.json"));
        let mut args = vec![*scenario, "--server", bin, "--quiet", "--duration", "20"];
        args.extend_from_slice(&["--json", json.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = perf(&args);
        assert!(out.status.success(), "{name} {scenario}: {}", show(&out));
        let r = &json_file(&json)[0];
        assert_eq!(r["scenario"], *scenario);
        assert_eq!(r["complete"], true, "{name} {scenario}: {r:#}");
        assert_eq!(r["delivered"], r["expected"], "{name} {scenario}");
        assert!(number(&r["msgs_per_s"]) > 0.0, "{name} {scenario}");
        match *scenario {
            "js-pub-async" => assert_eq!(r["params"]["pubs"], 2, "one publisher per stream"),
            "js-pub-sync" => {
                let l = &r["latency_us"];
                let (p50, p99) = (number(&l["p50"]), number(&l["p99"]));
                assert!(0.0 < p50 && p50 <= p99, "{name}: {l:#}");
            }
            _ => {}
        }
    }
}

#[test]
fn jetstream_scenarios_briefly_against_both_servers() {
    let dir = tmp("jetstream");
    let mut ran = 0;
    if let Some(r) = reference() {
        jetstream_scenarios_against("reference", &r, &dir);
        ran += 1;
    }
    if let Some(r) = rnats() {
        jetstream_scenarios_against("rnats", &r, &dir);
        ran += 1;
    }
    if ran == 0 {
        eprintln!("SKIPPED: no server binary (set NATS_REFERENCE_SERVER or RNATS_BIN)");
    }
    let _ = std::fs::remove_dir_all(dir);
}
