//! WebSocket clients (FEATURES.md §17): the upgrade and its refusals, masking, fragments
//! and control frames, permessage-deflate, TLS (`wss`), the `websocket { authorization }`
//! override and cookies, the same subjects as TCP clients — with a raw client and
//! async-nats, on both reactors, and against the reference for what clients see.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::pki::{info_json, Pki};
use common::ws::{deflate, frame, WsClient};
use common::{rt, scratch_dir, Reactor, Server};
use futures::StreamExt;
use std::time::Duration;

fn ws_port(srv: &Server) -> u16 {
    srv.log_lines()
        .iter()
        .find_map(|l| l.split("Listening for websocket clients on ").nth(1))
        .and_then(|u| u.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .expect("websocket listener")
}

fn conf_file(text: &str) -> String {
    let dir = scratch_dir();
    let p = dir.join("ws.conf");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn start(r: Reactor, block: &str) -> (Server, u16) {
    let conf = conf_file(&format!(
        "websocket {{\n listen: \"127.0.0.1:-1\"\n no_tls: true\n {block}\n}}\n"
    ));
    let srv = Server::start(r, &["-c", &conf]);
    let port = ws_port(&srv);
    (srv, port)
}

both_reactors!(upgrade_info_and_pub_sub_with_tcp_clients, |r| {
    let (srv, port) = start(r, "");
    assert!(srv
        .log_lines()
        .iter()
        .any(|l| l.contains("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")));
    let mut ws = WsClient::connect(port, "").unwrap();
    assert!(ws
        .response
        .contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    let info = info_json(&ws.handshake_nats("{\"verbose\":false}").unwrap());
    assert_eq!(info["port"], port);
    assert_eq!(info["host"], "127.0.0.1");
    assert!(info.get("tls_required").is_none());
    ws.send("SUB ws.> 1\r\nPING\r\n");
    assert_eq!(ws.line().unwrap(), "PONG");
    let mut tcp = srv.raw();
    tcp.handshake();
    tcp.send_str("SUB tcp 2\r\nPING\r\n");
    tcp.expect("PONG\r\n");
    tcp.send_str("PUB ws.a 5\r\nhello\r\nPING\r\n");
    tcp.expect("PONG\r\n");
    assert_eq!(ws.line().unwrap(), "MSG ws.a 1 5");
    assert_eq!(ws.line().unwrap(), "hello");
    ws.send("PUB tcp 2\r\nhi\r\nPING\r\n");
    assert_eq!(ws.line().unwrap(), "PONG");
    tcp.expect("MSG tcp 2 2\r\nhi\r\n");
    // A big message in one frame both ways.
    let big = "x".repeat(100_000);
    ws.send(&format!("PUB ws.big {}\r\n{big}\r\n", big.len()));
    assert_eq!(ws.line().unwrap(), format!("MSG ws.big 1 {}", big.len()));
    assert_eq!(ws.line().unwrap(), big);
});

both_reactors!(frames_split_fragmented_and_control, |r| {
    let (_srv, port) = start(r, "");
    let mut ws = WsClient::connect(port, "").unwrap();
    ws.handshake_nats("{\"verbose\":false}").unwrap();
    let m = Some([9, 8, 7, 6]);
    // One message in three fragments with a ping in between, sent a byte at a time.
    let mut bytes = frame(2, false, false, b"SUB a 1\r\nPU", m);
    bytes.extend(frame(9, true, false, b"ping!", m));
    bytes.extend(frame(0, false, false, b"B a 2\r\n", m));
    bytes.extend(frame(0, true, false, b"ok\r\nPING\r\n", m));
    for b in &bytes {
        ws.send_raw(std::slice::from_ref(b));
    }
    let pong = ws.next_frame().unwrap();
    assert_eq!((pong.opcode, pong.payload.as_slice()), (10, &b"ping!"[..]));
    assert_eq!(ws.line().unwrap(), "MSG a 1 2");
    assert_eq!(ws.line().unwrap(), "ok");
    assert_eq!(ws.line().unwrap(), "PONG");
    // A close frame is answered with the same status and ends the connection.
    ws.send_raw(&frame(8, true, false, &[0x03, 0xe8, b'b', b'y', b'e'], m));
    let close = ws.next_frame().unwrap();
    assert_eq!(
        (close.opcode, close.payload.as_slice()),
        (8, &[0x03, 0xe8, b'b', b'y', b'e'][..])
    );
    assert!(ws.next_frame().is_none());
});

both_reactors!(protocol_errors_close_with_the_reference_codes, |r| {
    let (srv, port) = start(r, "");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame(2, true, false, b"PING\r\n", None), "mask bit missing"),
        (frame(3, true, false, b"x", Some([1, 2, 3, 4])), "unknown opcode 3"),
        (
            frame(0, true, false, b"x", Some([1, 2, 3, 4])),
            "invalid continuation frame",
        ),
        (
            frame(2, true, true, b"x", Some([1, 2, 3, 4])),
            "compressed frame received without negotiated permessage-deflate",
        ),
        (
            vec![0x89, 0x80 | 126, 0, 200, 1, 2, 3, 4],
            "control frame length bigger than maximum allowed of 125 bytes",
        ),
    ];
    for (bytes, text) in cases {
        let mut ws = WsClient::connect(port, "").unwrap();
        ws.line().unwrap();
        ws.send_raw(&bytes);
        let close = ws.next_frame().unwrap();
        assert_eq!(close.opcode, 8, "{text}");
        assert_eq!(&close.payload[..2], &1002u16.to_be_bytes(), "{text}");
        assert_eq!(String::from_utf8_lossy(&close.payload[2..]), text);
        srv.wait_for_log(&format!("read error: {text}"), Duration::from_secs(3))
            .unwrap();
    }
    // An authorization failure closes with 1008 after the -ERR.
    let (_srv, port) = start(r, "authorization { user: u, password: p }");
    let mut ws = WsClient::connect(port, "").unwrap();
    assert_eq!(
        ws.handshake_nats("{\"verbose\":false,\"user\":\"u\",\"pass\":\"bad\"}")
            .unwrap_err(),
        "-ERR 'Authorization Violation'"
    );
    let close = ws.next_frame().unwrap();
    assert_eq!(close.opcode, 8);
    assert_eq!(&close.payload[..2], &1008u16.to_be_bytes());
    assert_eq!(String::from_utf8_lossy(&close.payload[2..]), "Authentication Failure");
});

both_reactors!(bad_upgrades_are_answered, |r| {
    let (srv, port) = start(r, "");
    let bad = |req: &str| -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let good = common::ws::request("");
    let cases = [
        (
            good.replacen("GET", "POST", 1),
            "HTTP/1.1 405 Method Not Allowed\r\n",
            "request method must be GET",
        ),
        (
            good.replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 12"),
            "HTTP/1.1 400 Bad Request\r\n",
            "invalid version",
        ),
        (
            good.replace("Upgrade: websocket\r\n", ""),
            "HTTP/1.1 400 Bad Request\r\n",
            "invalid value for header 'Upgrade'",
        ),
        (
            good.replace(common::ws::KEY, "c2hvcnQ="),
            "HTTP/1.1 400 Bad Request\r\n",
            "invalid websocket key",
        ),
    ];
    for (req, status, reason) in cases {
        let resp = bad(&req);
        assert!(resp.starts_with(status), "{resp:?}");
        assert!(resp.contains("Sec-Websocket-Version: 13\r\n"));
        srv.wait_for_log(&format!("websocket handshake error: {reason}"), Duration::from_secs(3))
            .unwrap();
    }
    assert!(bad("GARBAGE\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request\r\n"));
    // The leaf node path is upgraded, then closed: this server accepts no leaf nodes.
    let leaf = bad(&good.replacen("GET / ", "GET /leafnode ", 1));
    assert!(leaf.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{leaf:?}");
    assert!(!leaf.contains("INFO"));
    srv.wait_for_log("Not configured to accept leaf node connections", Duration::from_secs(3))
        .unwrap();
    assert!(bad("GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request: missing required Host header"));
    // None of them became a client.
    assert_eq!(srv.open_connections_hint(), 0);
});

both_reactors!(compression_both_ways, |r| {
    let (_srv, port) = start(r, "compression: true");
    let mut ws = WsClient::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n").unwrap();
    assert!(ws.response.contains(
        "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n"
    ));
    ws.handshake_nats("{\"verbose\":false}").unwrap();
    let payload = "compressible ".repeat(50);
    let msg = format!("SUB z 1\r\nPUB z {}\r\n{payload}\r\nPING\r\n", payload.len());
    let m = ws.mask;
    ws.send_raw(&frame(2, true, true, &deflate(msg.as_bytes()), m));
    let f = ws.next_frame().unwrap();
    assert!(f.rsv1, "large messages come compressed");
    ws.data.extend(common::ws::inflate(&f.payload));
    assert_eq!(ws.line().unwrap(), format!("MSG z 1 {}", payload.len()));
    assert_eq!(ws.line().unwrap(), payload);
    assert_eq!(ws.line().unwrap(), "PONG");
    // Without the extension requested, nothing is compressed.
    let mut plain = WsClient::connect(port, "").unwrap();
    assert!(!plain.response.contains("permessage-deflate"));
    let f = plain.next_frame().unwrap();
    assert!(!f.rsv1);
});

both_reactors!(websocket_over_tls_and_async_nats, |r| {
    let pki = Pki::new(&scratch_dir());
    let conf = conf_file(&format!(
        "websocket {{\n listen: \"127.0.0.1:-1\"\n tls {{ cert_file: {:?}, key_file: {:?} }}\n}}\n",
        pki.path("server-cert.pem"),
        pki.path("server-key.pem")
    ));
    let srv = Server::start(r, &["-c", &conf]);
    assert!(srv
        .log_lines()
        .iter()
        .any(|l| l.contains("Listening for websocket clients on wss://127.0.0.1:")));
    let port = ws_port(&srv);
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(pki.client_config(None), "localhost".try_into().unwrap()).unwrap();
    let stream = rustls::StreamOwned::new(conn, tcp);
    let mut ws = WsClient::upgrade(stream, "").unwrap();
    let info = info_json(&ws.handshake_nats("{\"verbose\":false}").unwrap());
    assert_eq!(
        (info["tls_required"].clone(), info["tls_available"].clone()),
        (true.into(), true.into())
    );
    // The raw client learns that the async-nats subscription exists everywhere from a
    // message that client publishes after it (flush alone sends no PING, so it is no
    // barrier; what one connection sends reaches each other shard in order).
    ws.send("SUB ready 9\r\nPING\r\n");
    assert_eq!(ws.line().unwrap(), "PONG");
    rt().block_on(async {
        let nc = pki
            .nats_options(None)
            .connect(format!("wss://localhost:{port}"))
            .await
            .unwrap();
        let mut sub = nc.subscribe("w").await.unwrap();
        nc.publish("ready", "".into()).await.unwrap();
        nc.flush().await.unwrap();
        assert_eq!(ws.line().unwrap(), "MSG ready 9 0");
        assert_eq!(ws.line().unwrap(), "");
        ws.send("PUB w 3\r\nabc\r\nPING\r\n");
        assert_eq!(ws.line().unwrap(), "PONG");
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&m.payload[..], b"abc");
    });
});

both_reactors!(async_nats_over_plain_websocket, |r| {
    let (srv, port) = start(r, "compression: true");
    rt().block_on(async {
        let ws = async_nats::connect(format!("ws://127.0.0.1:{port}")).await.unwrap();
        let tcp = async_nats::connect(srv.url()).await.unwrap();
        let mut sub = ws.subscribe("x.*").await.unwrap();
        ws.flush().await.unwrap();
        for n in [1usize, 1000, 70_000] {
            tcp.publish("x.y", vec![b'q'; n].into()).await.unwrap();
            let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(m.payload.len(), n);
        }
        let reply = tcp.subscribe("svc").await.unwrap();
        tcp.flush().await.unwrap();
        let mut reply = reply;
        let h = tokio::spawn(async move {
            if let Some(m) = reply.next().await {
                if let Some(r) = m.reply {
                    let _ = tcp.publish(r, "pong".into()).await;
                    let _ = tcp.flush().await;
                }
            }
        });
        let resp = ws.request("svc", "ping".into()).await.unwrap();
        assert_eq!(&resp.payload[..], b"pong");
        h.await.unwrap();
    });
});

both_reactors!(authorization_override_and_cookies, |r| {
    let (_srv, port) = start(
        r,
        "authorization { user: wsu, password: wsp }\n user_cookie: u\n pass_cookie: p",
    );
    let mut ws = WsClient::connect(port, "").unwrap();
    let info = ws.line().unwrap();
    assert_eq!(info_json(&info)["auth_required"], true);
    ws.send("CONNECT {\"verbose\":false,\"user\":\"wsu\",\"pass\":\"wsp\"}\r\nPING\r\n");
    assert_eq!(ws.line().unwrap(), "PONG");
    // The credentials as cookies.
    let mut ws = WsClient::connect(port, "Cookie: u=wsu; p=wsp\r\n").unwrap();
    ws.handshake_nats("{\"verbose\":false}").unwrap();
    let mut ws = WsClient::connect(port, "Cookie: u=wsu; p=nope\r\n").unwrap();
    assert_eq!(
        ws.handshake_nats("{\"verbose\":false}").unwrap_err(),
        "-ERR 'Authorization Violation'"
    );
});

both_reactors!(handshake_timeout_closes_silent_clients, |r| {
    let (srv, port) = start(r, "handshake_timeout: \"300ms\"");
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = std::time::Instant::now();
    use std::io::Read;
    let mut b = [0u8; 16];
    assert_eq!(tcp.read(&mut b).unwrap_or(0), 0);
    assert!(t0.elapsed() >= Duration::from_millis(250));
    // Others are not affected.
    let mut ws = WsClient::connect(port, "").unwrap();
    ws.handshake_nats("{\"verbose\":false}").unwrap();
    drop(srv);
});

/// What a WebSocket client sees from rnats is what it sees from the reference: the
/// upgrade answer, the INFO fields, refusals and close frames.
#[test]
fn differential_websocket() {
    let reference = common::reference_server();
    let conf = conf_file("websocket {\n listen: \"127.0.0.1:-1\"\n no_tls: true\n compression: true\n}\n");
    let ours = Server::start(Reactor::Mio, &["-c", &conf]);
    let theirs = Server::start_cmd(&reference, &["-a", "127.0.0.1", "-p", "-1", "-c", &conf]);
    let view = |port: u16| {
        let mut ws = WsClient::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n").unwrap();
        let info = info_json(&ws.line().unwrap());
        let keep: Vec<String> = [
            "host",
            "tls_required",
            "tls_available",
            "headers",
            "proto",
            "max_payload",
        ]
        .iter()
        .map(|k| format!("{k}={}", info[*k]))
        .collect();
        // The reference sends the close frame of a protocol error racing with the
        // close (it skips the flush): try a few times.
        let mut close = None;
        for _ in 0..3 {
            let mut ws2 = WsClient::connect(port, "").unwrap();
            ws2.line().unwrap();
            ws2.send_raw(&frame(2, true, false, b"PING\r\n", None));
            close = ws2.next_frame();
            if close.is_some() {
                break;
            }
        }
        (ws.response, keep, close)
    };
    let (a, b) = (view(ws_port(&ours)), view(ws_port(&theirs)));
    assert_eq!((&a.0, &a.1), (&b.0, &b.1));
    // rnats always sends the protocol error's close frame; when the reference's does get
    // out, it is the same.
    assert!(a.2.is_some());
    if b.2.is_some() {
        assert_eq!(a.2, b.2);
    }
}

trait Hint {
    fn open_connections_hint(&self) -> usize;
}

impl Hint for Server {
    /// Clients the server counts, from a raw connection's cid sequence: every refused
    /// upgrade must not have used one.
    fn open_connections_hint(&self) -> usize {
        let mut raw = self.raw();
        let cid = info_json(&raw.info)["client_id"].as_u64().unwrap();
        raw.handshake();
        // The raw client is the first client this server ever had.
        (cid - 1) as usize
    }
}

// The reference's WebSocket TLS goes through its HTTP server: no client-handshake debug
// lines ("Starting TLS client connection handshake", "TLS handshake complete") for it.
both_reactors!(websocket_tls_logs_no_client_handshake_lines, |r| {
    let pki = Pki::new(&scratch_dir());
    let conf = conf_file(&format!(
        "websocket {{\n listen: \"127.0.0.1:-1\"\n tls {{ cert_file: {:?}, key_file: {:?} }}\n}}\n",
        pki.path("server-cert.pem"),
        pki.path("server-key.pem")
    ));
    let srv = Server::start(r, &["-c", &conf, "-D"]);
    let tcp = std::net::TcpStream::connect(("127.0.0.1", ws_port(&srv))).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(pki.client_config(None), "localhost".try_into().unwrap()).unwrap();
    let mut ws = WsClient::upgrade(rustls::StreamOwned::new(conn, tcp), "").unwrap();
    ws.handshake_nats("{\"verbose\":false}").unwrap();
    ws.send("PING\r\n");
    assert_eq!(ws.line().unwrap(), "PONG");
    srv.wait_for_log("- Client connection created", Duration::from_secs(5))
        .unwrap();
    for needle in [
        "TLS handshake complete",
        "TLS version",
        "Starting TLS client connection handshake",
    ] {
        assert_eq!(srv.count_log(needle), 0, "{needle}: {:#?}", srv.log_lines());
    }
});
