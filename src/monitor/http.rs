//! The monitoring HTTP server: hyper (HTTP/1.1) on a tokio runtime with two threads of its
//! own, so requests are served concurrently and never on a shard thread. Answers that
//! need the shards await their jobs; nothing here blocks a shard.
//!
//! Routing follows nats-server's mux: every endpoint sits under `http_base_path`
//! (normalized as nats-server does), `/subscriptionsz` is `/subsz`, the index answers only
//! on the base path itself, and anything else is Go's `404 page not found`. JSON answers
//! carry `Access-Control-Allow-Origin: *`; with `?callback=fn` they are JSONP
//! (`application/javascript`, `fn(<json>)`). Bad options are 400 with a plain text.
//! HTTPS monitoring is the same server with TLS in front of each connection
//! ([`super::https`]).

use super::query::Query;
use super::{accountz, connz, disabled, healthz, index, jsz, metrics, shardz, subsz, varz, Context, MonitorError};
use crate::proto::gojson;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// nats-server's `ReadHeaderTimeout`.
const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// nats-server's `MaxHeaderBytes` (1 MiB), plus room for the request line.
const MAX_HEADER_BUF: usize = (1 << 20) + 4096;
/// Threads of the monitoring runtime.
const THREADS: usize = 2;

/// A running monitoring server; stopped when dropped.
pub struct HttpServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// nats-server's `normalizeBasePath`: a leading `/`, cleaned, no trailing `/`.
pub fn normalize_base_path(p: &str) -> String {
    if p.is_empty() {
        return "/".into();
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

impl HttpServer {
    /// Bind `addr` and serve `ctx` under `base_path` until dropped.
    pub fn start(addr: SocketAddr, ctx: Arc<Context>, base_path: &str) -> io::Result<HttpServer> {
        Self::start_with(addr, ctx, base_path, None)
    }

    /// The same over TLS (HTTPS monitoring).
    pub fn start_https(
        addr: SocketAddr,
        ctx: Arc<Context>,
        base_path: &str,
        tls: Arc<super::https::HttpsConfig>,
    ) -> io::Result<HttpServer> {
        Self::start_with(addr, ctx, base_path, Some(tls))
    }

    fn start_with(
        addr: SocketAddr,
        ctx: Arc<Context>,
        base_path: &str,
        tls: Option<Arc<super::https::HttpsConfig>>,
    ) -> io::Result<HttpServer> {
        let listener = shards::listener::bind_exclusive(addr, 128)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let base: Arc<str> = normalize_base_path(base_path).into();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(THREADS)
            .thread_name("rnats-monitor")
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rnats-monitor-accept".into())
            .spawn(move || {
                runtime.block_on(serve(listener, ctx, base, tls, rx));
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(HttpServer {
            addr: bound,
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    ctx: Arc<Context>,
    base: Arc<str>,
    tls: Option<Arc<super::https::HttpsConfig>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let Ok((stream, from)) = accepted else {
            // Out of descriptors and the like: do not spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let base = base.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, ctx, base).await,
                Some(t) => {
                    if let Some(s) = t.accept(stream, from).await {
                        serve_connection(s, ctx, base).await;
                    }
                }
            }
        });
    }
}

/// HTTP/1.1 over one connection (plain or TLS).
async fn serve_connection<S>(stream: S, ctx: Arc<Context>, base: Arc<str>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let ctx = ctx.clone();
        let base = base.clone();
        // Only the URI is needed; the request (and its body) is not held across awaits.
        let uri = req.uri().clone();
        drop(req);
        async move { Ok::<_, Infallible>(handle(&ctx, &base, &uri).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        // Go writes canonical header names; some scripts look them up that way.
        .title_case_headers(true)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(READ_HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BUF)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
        .await;
}

type Resp = Response<Full<Bytes>>;

fn response(status: u16, ctype: &str, body: Vec<u8>) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(ctype) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

/// Go's `http.NotFound`.
fn not_found() -> Resp {
    let mut r = response(404, "text/plain; charset=utf-8", b"404 page not found\n".to_vec());
    r.headers_mut()
        .insert("X-Content-Type-Options", HeaderValue::from_static("nosniff"));
    r
}

/// A plain-text error (nats-server writes the status, then the text).
fn error(e: &MonitorError) -> Resp {
    response(e.http_status(), "text/plain; charset=utf-8", e.to_string().into_bytes())
}

/// nats-server's `handleResponse`: JSON with CORS, or JSONP.
fn json_bytes(status: u16, q: &Query, body: Vec<u8>) -> Resp {
    let cb = q.get("callback");
    if !cb.is_empty() {
        let mut b = Vec::with_capacity(body.len() + cb.len() + 2);
        b.extend_from_slice(cb.as_bytes());
        b.push(b'(');
        b.extend_from_slice(&body);
        b.push(b')');
        return response(status, "application/javascript", b);
    }
    let mut r = response(status, "application/json", body);
    r.headers_mut()
        .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    r
}

/// Indented JSON (two spaces), as most endpoints answer.
fn json<T: Serialize>(q: &Query, v: &T) -> Resp {
    json_bytes(200, q, gojson::to_vec_pretty(v))
}

fn json_or_error<T: Serialize>(q: &Query, v: Result<T, MonitorError>) -> Resp {
    match v {
        Ok(v) => json(q, &v),
        Err(e) => error(&e),
    }
}

/// The endpoint a request path names under the base path (`""` for the index).
fn route<'a>(base: &str, path: &'a str) -> Option<&'a str> {
    if base == "/" {
        return Some(if path == "/" { "" } else { path });
    }
    if path == base {
        return Some("");
    }
    path.strip_prefix(base).filter(|rest| rest.starts_with('/'))
}

async fn handle(ctx: &Arc<Context>, base: &str, uri: &hyper::Uri) -> Resp {
    let q = Query::parse(uri.query().unwrap_or(""));
    let Some(endpoint) = route(base, uri.path()) else {
        return not_found();
    };
    match endpoint {
        "" => {
            ctx.count_hit("/");
            response(200, "text/html; charset=utf-8", index::page(ctx, base).into_bytes())
        }
        "/varz" => {
            ctx.count_hit("/varz");
            json(&q, &varz::varz_async(ctx).await)
        }
        "/connz" => match connz::ConnzOptions::from_query(&q) {
            Err(e) => error(&e),
            Ok(o) => {
                ctx.count_hit("/connz");
                json_or_error(&q, connz::connz_async(ctx, &o).await)
            }
        },
        "/routez" => match q.subs() {
            Err(e) => error(&e),
            Ok(_) => {
                ctx.count_hit("/routez");
                json(&q, &disabled::routez(ctx))
            }
        },
        "/gatewayz" => {
            ctx.count_hit("/gatewayz");
            match q.subs().and_then(|_| q.bool("accs")) {
                Err(e) => error(&e),
                Ok(_) => json(&q, &disabled::gatewayz(ctx)),
            }
        }
        "/leafz" => {
            ctx.count_hit("/leafz");
            match q.bool("subs") {
                Err(e) => error(&e),
                Ok(_) => json(&q, &disabled::leafz(ctx)),
            }
        }
        "/subsz" | "/subscriptionsz" => {
            ctx.count_hit("/subsz");
            match subsz::SubszOptions::from_query(&q) {
                Err(e) => error(&e),
                Ok(o) => json_or_error(&q, subsz::subsz_async(ctx, &o).await),
            }
        }
        "/accountz" => {
            ctx.count_hit("/accountz");
            let o = accountz::AccountzOptions::from_query(&q);
            json_or_error(&q, accountz::accountz_async(ctx, &o).await)
        }
        "/accstatz" => {
            ctx.count_hit("/accstatz");
            match accountz::AccountStatzOptions::from_query(&q) {
                Err(e) => error(&e),
                Ok(o) => json_or_error(&q, accountz::accstatz_async(ctx, &o).await),
            }
        }
        "/jsz" => {
            ctx.count_hit("/jsz");
            match jsz::JszOptions::from_query(&q) {
                Err(e) => error(&e),
                Ok(o) => json_or_error(&q, jsz::jsz_async(ctx, o).await),
            }
        }
        "/healthz" => {
            ctx.count_hit("/healthz");
            match healthz::HealthzOptions::from_query(&q) {
                Err(e) => error(&e),
                Ok(o) => {
                    let mut h = healthz::healthz_async(ctx, &o).await;
                    if !h.error.is_empty() {
                        tracing::warn!(
                            "Healthcheck failed: {}",
                            crate::proto::reply::go_quote(h.error.as_bytes())
                        );
                    } else if !h.errors.is_empty() {
                        tracing::warn!("Healthcheck failed: {} errors", h.errors.len());
                    }
                    let code = h.status_code;
                    h.status_code = 0;
                    json_bytes(code, &q, gojson::to_vec(&h))
                }
            }
        }
        "/ipqueuesz" => match q.bool("all") {
            Err(e) => error(&e),
            Ok(all) => {
                let filter = q.get("queues").to_string();
                match disabled::ipqueuesz_plan(all, filter).run_async(ctx).await {
                    Err(e) => error(&e),
                    Ok(v) => json_bytes(200, &q, pretty3(&v)),
                }
            }
        },
        "/raftz" => error(&disabled::raftz()),
        "/stacksz" => {
            let z = shardz::shardz_async(ctx).await;
            response(200, "text/plain; charset=utf-8", shardz::stacksz_text(&z).into_bytes())
        }
        "/shardz" => json(&q, &shardz::shardz_async(ctx).await),
        "/metrics" => response(
            200,
            metrics::CONTENT_TYPE,
            metrics::metrics_async(ctx).await.into_bytes(),
        ),
        "/debug/vars" => {
            let v = serde_json::json!({
                "cmdline": std::env::args().collect::<Vec<String>>(),
                "memstats": { "Sys": varz::rss_bytes() },
            });
            response(200, "application/json; charset=utf-8", gojson::to_vec(&v))
        }
        _ => not_found(),
    }
}

/// Indented with three spaces, as nats-server writes `/ipqueuesz` and `/raftz`.
fn pretty3<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b"   "));
    let _ = v.serialize(&mut ser);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_paths_normalize_like_the_reference() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("nats", "/nats"),
            ("/a/b/", "/a/b"),
            ("/a//b/../c", "/a/c"),
        ];
        for (raw, want) in cases {
            assert_eq!(normalize_base_path(raw), want, "{raw}");
        }
    }

    #[test]
    fn routes_under_the_base_path() {
        assert_eq!(route("/", "/"), Some(""));
        assert_eq!(route("/", "/varz"), Some("/varz"));
        assert_eq!(route("/nats", "/nats"), Some(""));
        assert_eq!(route("/nats", "/nats/varz"), Some("/varz"));
        assert_eq!(route("/nats", "/natsvarz"), None);
        assert_eq!(route("/nats", "/varz"), None);
    }
}
