//! The Python client (nats-py, installed by `tools/python-clients`) over TLS (after the
//! INFO and handshake first, mutual TLS) and WebSocket (ws and wss, with compression),
//! publishing to and receiving from TCP clients, on both reactors.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::pki::{Pki, Subject};
use common::{scratch_dir, Reactor, Server};
use std::process::Command;

fn python_path() -> String {
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/python-clients");
    let out = Command::new(&tool).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Run an asyncio script with nats-py; it prints `ok` when done.
fn run_py(script: &str, args: &[&str]) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .env("PYTHONPATH", python_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const ROUND_TRIP: &str = r#"
import asyncio, ssl, sys
import nats

async def main():
    url, ca, cert, key, first = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
    ctx = None
    if ca:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False
        if cert:
            ctx.load_cert_chain(cert, key)
    opts = dict(servers=[url], allow_reconnect=False, connect_timeout=3)
    if ctx:
        opts["tls"] = ctx
    if first:
        opts["tls_handshake_first"] = True
    nc = await nats.connect(**opts)
    sub = await nc.subscribe("py.>")
    await nc.flush()
    for size in (1, 1000, 100000):
        await nc.publish("py.x", b"a" * size)
        msg = await sub.next_msg(timeout=5)
        assert len(msg.data) == size, len(msg.data)
    async def responder(m):
        await m.respond(b"pong:" + m.data)
    await nc.subscribe("svc", cb=responder)
    resp = await nc.request("svc", b"ping", timeout=5)
    assert resp.data == b"pong:ping", resp.data
    await nc.close()
    print("ok")

asyncio.run(main())
"#;

fn ws_conf(pki: &Pki, tls: bool) -> String {
    let tls_block = if tls {
        format!(
            "tls {{ cert_file: {:?}, key_file: {:?} }}",
            pki.path("server-cert.pem"),
            pki.path("server-key.pem")
        )
    } else {
        "no_tls: true".to_string()
    };
    let p = pki.dir.join(format!("ws-{tls}.conf"));
    std::fs::write(
        &p,
        format!("websocket {{\n listen: \"127.0.0.1:-1\"\n compression: true\n {tls_block}\n}}\n"),
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

fn ws_port(srv: &Server) -> u16 {
    srv.log_lines()
        .iter()
        .find_map(|l| l.split("Listening for websocket clients on ").nth(1))
        .and_then(|u| u.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap()
}

both_reactors!(nats_py_over_tls, |r: Reactor| {
    let pki = Pki::new(&scratch_dir());
    pki.issue(
        "client",
        &Subject {
            dn: vec![(rcgen::DnType::CommonName, "py")],
            ..Default::default()
        },
    );
    let conf = pki.dir.join("tls.conf");
    std::fs::write(&conf, pki.tls_block("verify: true\n timeout: 2")).unwrap();
    let srv = Server::start(r, &["-c", conf.to_str().unwrap()]);
    let url = format!("tls://localhost:{}", srv.port);
    let (ca, cert, key) = (
        pki.path("ca.pem"),
        pki.path("client-cert.pem"),
        pki.path("client-key.pem"),
    );
    run_py(ROUND_TRIP, &[&url, &ca, &cert, &key, "0"]);
    drop(srv);
    let conf = pki.dir.join("first.conf");
    std::fs::write(&conf, pki.tls_block("handshake_first: true\n timeout: 2")).unwrap();
    let srv = Server::start(r, &["-c", conf.to_str().unwrap()]);
    let url = format!("tls://localhost:{}", srv.port);
    run_py(ROUND_TRIP, &[&url, &ca, "", "", "1"]);
});

both_reactors!(nats_py_over_websocket, |r: Reactor| {
    let pki = Pki::new(&scratch_dir());
    let srv = Server::start(r, &["-c", &ws_conf(&pki, false)]);
    run_py(
        ROUND_TRIP,
        &[&format!("ws://127.0.0.1:{}", ws_port(&srv)), "", "", "", "0"],
    );
    let srv = Server::start(r, &["-c", &ws_conf(&pki, true)]);
    run_py(
        ROUND_TRIP,
        &[
            &format!("wss://localhost:{}", ws_port(&srv)),
            &pki.path("ca.pem"),
            "",
            "",
            "0",
        ],
    );
});
