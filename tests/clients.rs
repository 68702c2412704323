//! Real-client tests with the `async-nats` crate, on both reactors and with several shards
//! (more shards than this machine's cores, so cross-shard paths are exercised).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::ConnectOptions;
use common::{rt, Server};
use futures::StreamExt;
use std::time::Duration;

const SHARDS: &[&str] = &["--shards", "4"];

async fn connect(s: &Server) -> async_nats::Client {
    async_nats::connect(s.url()).await.unwrap()
}

/// A round trip that guarantees the server processed everything this client sent
/// before (async-nats' `flush` only empties the client's buffer): a request nobody
/// answers comes back as a 503 after all earlier operations of the connection.
async fn sync(c: &async_nats::Client) {
    let err = c.request("_sync.nobody", "".into()).await.unwrap_err();
    assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
}

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("message within 5s")
        .expect("subscription open")
}

both_reactors!(pub_sub_across_shards, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        // Four connections land on four different shards (round-robin acceptor).
        let clients: Vec<_> = futures::future::join_all((0..4).map(|_| connect(&s))).await;
        let mut subs = Vec::new();
        for c in &clients {
            subs.push(c.subscribe("greet.*").await.unwrap());
            sync(c).await;
        }
        clients[3].publish("greet.joe", "hello".into()).await.unwrap();
        clients[3].flush().await.unwrap();
        for sub in &mut subs {
            let m = next(sub).await;
            assert_eq!(m.subject.as_str(), "greet.joe");
            assert_eq!(&m.payload[..], b"hello");
        }
    });
});

both_reactors!(wildcards, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let a = connect(&s).await;
        let b = connect(&s).await;
        let mut star = a.subscribe("a.*.c").await.unwrap();
        let mut gt = a.subscribe("a.>").await.unwrap();
        let mut lit = a.subscribe("a.b.c").await.unwrap();
        sync(&a).await;
        for subj in ["a.b.c", "a.x.c", "a.b", "a.b.c.d"] {
            b.publish(subj, subj.into()).await.unwrap();
        }
        sync(&b).await;
        assert_eq!(next(&mut star).await.subject.as_str(), "a.b.c");
        assert_eq!(next(&mut star).await.subject.as_str(), "a.x.c");
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(next(&mut gt).await.subject.to_string());
        }
        assert_eq!(got, vec!["a.b.c", "a.x.c", "a.b", "a.b.c.d"]);
        assert_eq!(next(&mut lit).await.subject.as_str(), "a.b.c");
        // Nothing else arrives on the narrower subscriptions.
        assert!(tokio::time::timeout(Duration::from_millis(200), star.next())
            .await
            .is_err());
    });
});

both_reactors!(request_reply_across_shards, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let svc = connect(&s).await;
        let mut reqs = svc.subscribe("svc.echo").await.unwrap();
        sync(&svc).await;
        let responder = tokio::spawn({
            let svc = svc.clone();
            async move {
                while let Some(m) = reqs.next().await {
                    if let Some(reply) = m.reply {
                        svc.publish(reply, m.payload).await.unwrap();
                    }
                }
            }
        });
        for _ in 0..3 {
            let c = connect(&s).await;
            for i in 0..50 {
                let body = format!("req-{i}");
                let resp = c.request("svc.echo", body.clone().into()).await.unwrap();
                assert_eq!(&resp.payload[..], body.as_bytes());
            }
        }
        responder.abort();
    });
});

both_reactors!(no_responders_fails_fast, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let c = connect(&s).await;
        let t = std::time::Instant::now();
        let err = c.request("nobody.home", "x".into()).await.unwrap_err();
        assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
        assert!(t.elapsed() < Duration::from_secs(2), "a 503 comes back, not a timeout");
    });
});

both_reactors!(queue_group_balance_across_shards, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let members: Vec<_> = futures::future::join_all((0..4).map(|_| connect(&s))).await;
        let mut subs = Vec::new();
        for m in &members {
            subs.push(m.queue_subscribe("jobs", "workers".into()).await.unwrap());
            sync(m).await;
        }
        let p = connect(&s).await;
        let n = 4000usize;
        for i in 0..n {
            p.publish("jobs", i.to_string().into()).await.unwrap();
        }
        sync(&p).await;
        let mut counts = vec![0usize; subs.len()];
        let mut seen = std::collections::HashSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while seen.len() < n && tokio::time::Instant::now() < deadline {
            for (i, sub) in subs.iter_mut().enumerate() {
                while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(20), sub.next()).await {
                    assert!(
                        seen.insert(m.payload.clone()),
                        "message delivered twice: {:?}",
                        m.payload
                    );
                    counts[i] += 1;
                }
            }
        }
        assert_eq!(seen.len(), n, "every message exactly once: {counts:?}");
        for c in &counts {
            assert!(*c > n / 10, "each member gets a fair share: {counts:?}");
        }
    });
});

both_reactors!(ordering_under_fanout_from_several_publishers, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let subs_clients: Vec<_> = futures::future::join_all((0..4).map(|_| connect(&s))).await;
        let mut subs = Vec::new();
        for c in &subs_clients {
            subs.push(c.subscribe("ord.>").await.unwrap());
            sync(c).await;
        }
        let pubs: Vec<_> = futures::future::join_all((0..4).map(|_| connect(&s))).await;
        let per = 2000usize;
        let tasks: Vec<_> = pubs
            .into_iter()
            .enumerate()
            .map(|(j, p)| {
                tokio::spawn(async move {
                    for i in 0..per {
                        p.publish(format!("ord.{j}"), format!("{i}").into()).await.unwrap();
                    }
                    sync(&p).await;
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        for sub in &mut subs {
            let mut last = [-1i64; 4];
            for _ in 0..per * 4 {
                let m = next(sub).await;
                let j: usize = m.subject.as_str()[4..].parse().unwrap();
                let i: i64 = std::str::from_utf8(&m.payload).unwrap().parse().unwrap();
                assert!(i > last[j], "publisher {j}: {i} after {}", last[j]);
                last[j] = i;
            }
            assert!(last.iter().all(|&l| l == per as i64 - 1));
        }
    });
});

both_reactors!(subscribe_flush_is_visible_on_every_shard, |r| {
    // ARCHITECTURE.md invariant 4: subscribe + flush, then another connection publishes.
    let s = Server::start(r, SHARDS);
    // Subscribe, round trip, then another connection (on another shard) publishes.
    rt().block_on(async {
        let a = connect(&s).await;
        let b = connect(&s).await;
        for i in 0..200 {
            let subj = format!("barrier.{i}");
            let mut sub = a.subscribe(subj.clone()).await.unwrap();
            sync(&a).await;
            b.publish(subj, "x".into()).await.unwrap();
            sync(&b).await;
            next(&mut sub).await;
            sub.unsubscribe().await.unwrap();
        }
    });
});

both_reactors!(ten_thousand_subscriptions, |r| {
    let s = Server::start(r, &["--shards", "4", "-m", "-1"]);
    rt().block_on(async {
        let a = connect(&s).await;
        let mut subs = Vec::new();
        for i in 0..10_000 {
            subs.push(a.subscribe(format!("many.{i}")).await.unwrap());
        }
        sync(&a).await;
        let p = connect(&s).await;
        for i in (0..10_000).step_by(97) {
            p.publish(format!("many.{i}"), "x".into()).await.unwrap();
        }
        sync(&p).await;
        for i in (0..10_000).step_by(97) {
            assert_eq!(next(&mut subs[i]).await.subject.as_str(), format!("many.{i}"));
        }
        let (code, body) = s.http_get("/varz");
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        // The 10,000 plus the clients' request inboxes and the server's own subscriptions
        // (system services on every shard, service imports), as nats-server counts them.
        let n = v["subscriptions"].as_u64().unwrap();
        assert!((10_000..10_100).contains(&n), "varz counts them: {n}");
    });
});

both_reactors!(one_mib_payloads, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let a = connect(&s).await;
        let b = connect(&s).await;
        let mut sub = a.subscribe("big").await.unwrap();
        sync(&a).await;
        let payload: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        for _ in 0..3 {
            b.publish("big", payload.clone().into()).await.unwrap();
        }
        sync(&b).await;
        for _ in 0..3 {
            assert_eq!(&next(&mut sub).await.payload[..], &payload[..]);
        }
        // One byte over max_payload is refused by the client library itself, so check the
        // server advertises the limit.
        assert_eq!(b.server_info().max_payload, 1024 * 1024);
    });
});

both_reactors!(headers_round_trip, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let a = connect(&s).await;
        let b = connect(&s).await;
        let mut sub = a.subscribe("h").await.unwrap();
        sync(&a).await;
        let mut h = async_nats::HeaderMap::new();
        h.insert("X-Trace", "abc");
        h.append("X-Multi", "1");
        h.append("X-Multi", "2");
        b.publish_with_headers("h", h, "body".into()).await.unwrap();
        sync(&b).await;
        let m = next(&mut sub).await;
        let hh = m.headers.expect("headers delivered");
        assert_eq!(hh.get("X-Trace").unwrap().as_str(), "abc");
        assert_eq!(
            hh.get_all("X-Multi")
                .map(|v| v.as_str().to_string())
                .collect::<Vec<_>>(),
            vec!["1", "2"]
        );
        assert_eq!(&m.payload[..], b"body");
    });
});

both_reactors!(echo_off, |r| {
    let s = Server::start(r, SHARDS);
    rt().block_on(async {
        let quiet = ConnectOptions::new().no_echo().connect(s.url()).await.unwrap();
        let other = connect(&s).await;
        let mut mine = quiet.subscribe("echo").await.unwrap();
        sync(&quiet).await;
        quiet.publish("echo", "self".into()).await.unwrap();
        sync(&quiet).await;
        other.publish("echo", "other".into()).await.unwrap();
        sync(&other).await;
        assert_eq!(&next(&mut mine).await.payload[..], b"other");
    });
});

both_reactors!(user_password_auth, |r| {
    let s = Server::start(r, &["--user", "derek", "--pass", "s3cr3t", "--shards", "2"]);
    rt().block_on(async {
        let ok = ConnectOptions::new()
            .user_and_password("derek".into(), "s3cr3t".into())
            .connect(s.url())
            .await
            .unwrap();
        sync(&ok).await;
        let bad = ConnectOptions::new()
            .user_and_password("derek".into(), "wrong".into())
            .retry_on_initial_connect()
            .max_reconnects(1)
            .connect(s.url())
            .await;
        if let Ok(c) = bad {
            assert!(tokio::time::timeout(Duration::from_secs(2), c.flush())
                .await
                .map_or(true, |r| r.is_err()));
        }
    });
    let mut raw = s.raw();
    assert!(raw.info.contains("\"auth_required\":true"));
    raw.send_str("CONNECT {\"user\":\"derek\",\"pass\":\"nope\"}\r\n");
    assert_eq!(
        raw.until_closed(Duration::from_secs(5)),
        "-ERR 'Authorization Violation'\r\n"
    );
});

both_reactors!(token_auth, |r| {
    let s = Server::start(r, &["--auth", "tok"]);
    rt().block_on(async {
        let ok = ConnectOptions::new()
            .token("tok".into())
            .connect(s.url())
            .await
            .unwrap();
        sync(&ok).await;
    });
    let mut raw = s.raw();
    raw.send_str("SUB x 1\r\n");
    assert_eq!(
        raw.until_closed(Duration::from_secs(5)),
        "-ERR 'Authorization Violation'\r\n"
    );
});

// Past 1,024 cached results a wildcard subscribe or unsubscribe does not scan the match
// cache; it marks the results under its first token stale. Thousands of cached subjects,
// then a wildcard that covers them, a wildcard under another first token, and the
// wildcard's removal: every publish reaches exactly the subscriptions it matches, on one
// shard and across several. The wildcard subscriber is a raw connection, so what the
// server sends after the unsubscribe is seen (a client library drops it).
both_reactors!(wildcard_changes_reach_a_large_match_cache, |r| {
    const N: usize = 3000;
    for shards in ["1", "4"] {
        let s = Server::start(r, &["--shards", shards]);
        let mut c = s.raw();
        c.handshake();
        rt().block_on(async {
            let a = connect(&s).await;
            let b = connect(&s).await;
            let mut all = a.subscribe("big.>").await.unwrap();
            // A literal beside the `>`: results then depend on the whole subject (no
            // shard memo answers for all of `big.` by its first token), so every publish
            // is looked up in the trees and their caches fill.
            let _none = a.subscribe("big.none").await.unwrap();
            sync(&a).await;
            // Twice, so the second round's lookups come from the cache.
            for tag in ["one", "two"] {
                publish_round(&b, N, tag).await;
                assert_eq!(take(&mut all, N).await, round_of(N, tag));
            }
            c.send_str("SUB big.* 1\r\nSUB other.* 2\r\n");
            c.ping_pong();
            publish_round(&b, N, "three").await;
            assert_eq!(take(&mut all, N).await, round_of(N, "three"));
            let want: String = (0..N).map(|i| format!("MSG big.{i} 1 5\r\nthree\r\n")).collect();
            assert!(
                c.drain(Duration::from_millis(300)) == want,
                "{shards} shards: the wildcard's round"
            );
            c.send_str("UNSUB 1\r\n");
            c.ping_pong();
            publish_round(&b, N, "four").await;
            assert_eq!(take(&mut all, N).await, round_of(N, "four"));
            b.publish("other.x", "o".into()).await.unwrap();
            sync(&b).await;
            assert_eq!(
                c.drain(Duration::from_millis(300)),
                "MSG other.x 2 1\r\no\r\n",
                "{shards} shards: nothing after the unsubscribe"
            );
        });
    }
});

/// Publishes `tag` to `big.0` .. `big.<n-1>`, then waits until the server has them.
async fn publish_round(b: &async_nats::Client, n: usize, tag: &'static str) {
    for i in 0..n {
        b.publish(format!("big.{i}"), tag.into()).await.unwrap();
    }
    sync(b).await;
}

async fn take(sub: &mut async_nats::Subscriber, n: usize) -> Vec<(String, Vec<u8>)> {
    let mut got = Vec::with_capacity(n);
    for _ in 0..n {
        let m = next(sub).await;
        got.push((m.subject.to_string(), m.payload.to_vec()));
    }
    got
}

fn round_of(n: usize, tag: &str) -> Vec<(String, Vec<u8>)> {
    (0..n).map(|i| (format!("big.{i}"), tag.as_bytes().to_vec())).collect()
}
