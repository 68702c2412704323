//! The URL resolver against a local HTTP account server thread: answers, status errors,
//! transport errors, timeouts, redirects, body framings, basic authentication, the pool.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::resolver::testkit::{account_jwt, Keys};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Instant;

/// What the test server saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: Vec<String>,
}

type Reply = Arc<dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync>;

/// An HTTP server on a free port answering each request with `reply(path)` (raw bytes;
/// `None`: keep the connection open without answering). Runs until the test ends.
fn serve(reply: Reply) -> (u16, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let reply = reply.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    headers.push(h.trim().to_string());
                }
                log.lock().unwrap().push(Seen {
                    path: path.clone(),
                    headers,
                });
                match reply(&path) {
                    Some(bytes) => {
                        let _ = conn.write_all(&bytes);
                    }
                    None => std::thread::sleep(Duration::from_secs(5)),
                }
            });
        }
    });
    (port, seen)
}

fn ok(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// An account server: `/jwt/v1/accounts/<key>` from `jwts`, 200 at the base, 404 else.
fn account_server(jwts: Vec<(String, String)>) -> (u16, Arc<Mutex<Vec<Seen>>>) {
    serve(Arc::new(move |path: &str| {
        let key = path.strip_prefix("/jwt/v1/accounts/")?;
        if key.is_empty() {
            return Some(ok(""));
        }
        Some(match jwts.iter().find(|(k, _)| k == key) {
            Some((_, j)) => ok(j),
            None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found".to_vec(),
        })
    }))
}

#[test]
fn fetches_account_jwts_from_the_server() {
    let k = Keys::new();
    let jwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    let (port, seen) = account_server(vec![(k.account_pub(), jwt.clone())]);
    let r = UrlResolver::new(&format!("http://127.0.0.1:{port}/jwt/v1/accounts"));
    assert_eq!(
        r.url(),
        format!("http://127.0.0.1:{port}/jwt/v1/accounts/"),
        "a / is added"
    );
    assert_eq!(r.kind(), ResolverKind::Url);
    assert!(r.is_remote());
    assert_eq!(r.lookup(&k.account_pub()), None, "lookups never wait on the network");
    assert_eq!(r.probe(), Ok(()));
    assert_eq!(r.fetch_blocking(&k.account_pub()).unwrap(), jwt);
    let e = r.fetch_blocking(&k.other_pub()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "could not fetch <\"http://127.0.0.1:{port}/jwt/v1/accounts/{}\">: 404 Not Found",
            k.other_pub()
        )
    );
    let paths: Vec<String> = seen.lock().unwrap().iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/jwt/v1/accounts/".to_string(),
            format!("/jwt/v1/accounts/{}", k.account_pub()),
            format!("/jwt/v1/accounts/{}", k.other_pub())
        ]
    );
    let h = &seen.lock().unwrap()[0].headers;
    assert!(h.contains(&format!("Host: 127.0.0.1:{port}")), "{h:?}");
    assert_eq!(
        r.store(&k.account_pub(), &jwt),
        Err(ResolverError::Refused(
            "store operation not supported for URL Resolver".into()
        ))
    );
}

#[test]
fn fetch_answers_on_a_resolver_thread() {
    let k = Keys::new();
    let jwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    let (port, seen) = account_server(vec![(k.account_pub(), jwt.clone())]);
    let r = UrlResolver::new(&format!("http://127.0.0.1:{port}/jwt/v1/accounts/"));
    let (tx, rx) = mpsc::channel();
    for key in [k.account_pub(), k.other_pub(), "not-an-account".to_string()] {
        let tx = tx.clone();
        let caller = std::thread::current().id();
        r.fetch(
            &key.clone(),
            Box::new(move |j| tx.send((key, j, std::thread::current().id() != caller)).unwrap()),
        );
    }
    let mut got: Vec<(String, Option<String>, bool)> = (0..3)
        .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
        .collect();
    got.sort();
    let mut want = vec![
        (k.account_pub(), Some(jwt), true),
        (k.other_pub(), None, true),
        ("not-an-account".to_string(), None, false),
    ];
    want.sort();
    assert_eq!(got, want, "an invalid key is answered at once, without a request");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn transport_errors_read_like_go() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let r = UrlResolver::new(&format!("http://127.0.0.1:{port}/a/"));
    assert_eq!(
        r.fetch_blocking("K").unwrap_err().to_string(),
        format!(
            "could not fetch <\"http://127.0.0.1:{port}/a/K\">: Get \"http://127.0.0.1:{port}/a/K\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    // An https URL goes to port 443 unless one is given; a refused port is reported the same.
    let https = UrlResolver::new(&format!("https://127.0.0.1:{port}/a/"));
    assert!(https
        .probe()
        .unwrap_err()
        .to_string()
        .ends_with(&format!("dial tcp 127.0.0.1:{port}: connect: connection refused")));
}

#[test]
fn a_silent_server_times_out() {
    let (port, _) = serve(Arc::new(|_: &str| None));
    let r = UrlResolver::with_timeout(&format!("http://127.0.0.1:{port}/"), Duration::from_millis(200));
    let start = Instant::now();
    let e = r.fetch_blocking("K").unwrap_err().to_string();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(
        e,
        format!(
            "could not fetch <\"http://127.0.0.1:{port}/K\">: Get \"http://127.0.0.1:{port}/K\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )
    );
}

#[test]
fn body_framings_and_redirects() {
    let (port, seen) = serve(Arc::new(|path: &str| {
        Some(match path {
            "/chunked" => {
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
                    .to_vec()
            }
            "/close" => b"HTTP/1.0 200 OK\r\n\r\nuntil the end".to_vec(),
            "/continue" => b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
            "/moved" => b"HTTP/1.1 302 Found\r\nLocation: /close\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "/loop" => b"HTTP/1.1 301 Moved\r\nLocation: loop\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "/short" => b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
            "/huge" => b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n".to_vec(),
            "/weird" => b"SPDY/9 nope\r\n\r\n".to_vec(),
            "/version" => b"SPDY/9 200 OK\r\n\r\n".to_vec(),
            _ => b"HTTP/1.1 500 Internal Oops\r\nContent-Length: 0\r\n\r\n".to_vec(),
        })
    }));
    let base = format!("http://127.0.0.1:{port}/");
    let r = UrlResolver::new(&base);
    assert_eq!(r.fetch_blocking("chunked").unwrap(), "abcde");
    assert_eq!(r.fetch_blocking("close").unwrap(), "until the end");
    assert_eq!(r.fetch_blocking("continue").unwrap(), "ok");
    assert_eq!(r.fetch_blocking("moved").unwrap(), "until the end");
    assert_eq!(
        r.fetch_blocking("other").unwrap_err().to_string(),
        format!("could not fetch <\"{base}other\">: 500 Internal Oops")
    );
    assert_eq!(r.fetch_blocking("short").unwrap_err().to_string(), "unexpected EOF");
    assert!(r
        .fetch_blocking("huge")
        .unwrap_err()
        .to_string()
        .contains("larger than"));
    assert_eq!(
        r.fetch_blocking("weird").unwrap_err().to_string(),
        format!("could not fetch <\"{base}weird\">: Get \"{base}weird\": malformed HTTP status code \"nope\"")
    );
    assert_eq!(
        r.fetch_blocking("version").unwrap_err().to_string(),
        format!("could not fetch <\"{base}version\">: Get \"{base}version\": malformed HTTP version \"SPDY/9\"")
    );
    assert_eq!(
        r.fetch_blocking("loop").unwrap_err().to_string(),
        format!("could not fetch <\"{base}loop\">: Get \"{base}loop\": stopped after 10 redirects")
    );
    let n = seen.lock().unwrap().iter().filter(|s| s.path == "/loop").count();
    assert_eq!(n, 11, "the first request and 10 redirects");
}

#[test]
fn user_info_becomes_basic_auth_and_is_redacted() {
    let (port, seen) = serve(Arc::new(|_: &str| Some(b"HTTP/1.1 403 Forbidden\r\n\r\n".to_vec())));
    let r = UrlResolver::new(&format!("http://me:secret@127.0.0.1:{port}/x/"));
    let e = r.fetch_blocking("K").unwrap_err().to_string();
    assert_eq!(
        e,
        format!("could not fetch <\"http://me:xxxxx@127.0.0.1:{port}/x/K\">: 403 Forbidden")
    );
    assert!(!format!("{r:?}").contains("secret"));
    let h = &seen.lock().unwrap()[0].headers;
    assert!(h.contains(&"Authorization: Basic bWU6c2VjcmV0".to_string()), "{h:?}");
    assert_eq!(redact("http://h/p"), "http://h/p");
    assert_eq!(redact("http://u@h/p"), "http://u@h/p");
}
