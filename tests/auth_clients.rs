//! Authentication and account isolation with a real client (`async-nats`): user and
//! password, token, nkeys, creds files and JWT callbacks in operator mode, positive and
//! negative, and cross-account leak attempts from every shard (FEATURES.md §7, §8).
//! Every test runs on both reactors with 4 shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::ConnectOptions;
use common::{rt, scratch_dir, Reactor, Server};
use futures::StreamExt;
use nkeys::KeyPair;
use rnats::auth::jwt::{decorate_jwt, decorate_seed, AccountClaims, Encode, OperatorClaims, UserClaims};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn start(r: Reactor, dir: &Path, conf: &str) -> Server {
    let p = dir.join("server.conf");
    std::fs::write(&p, conf).unwrap();
    Server::start(r, &["-c", p.to_str().unwrap(), "--shards", "4"])
}

async fn refused_once(opts: ConnectOptions, url: &str) -> String {
    match opts.connection_timeout(Duration::from_secs(2)).connect(url).await {
        Ok(_) => panic!("connected although refused"),
        Err(e) => e.to_string(),
    }
}

async fn sync(c: &async_nats::Client) {
    let _ = c.request("_sync.nobody", "".into()).await;
}

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("message within 5s")
        .expect("subscription open")
}

async fn nothing(sub: &mut async_nats::Subscriber) {
    if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), sub.next()).await {
        panic!("unexpected message on {}: {:?}", m.subject, m.payload);
    }
}

both_reactors!(users_tokens_and_nkeys, |r| {
    let dir = scratch_dir();
    let nk = KeyPair::new_user();
    let conf = format!(
        "accounts {{\n  A {{ users = [ {{user: alice, password: s3cret}}, {{nkey: {}}} ] }}\n}}\n",
        nk.public_key()
    );
    let s = start(r, &dir, &conf);
    let url = s.url();
    rt().block_on(async {
        let good = ConnectOptions::with_user_and_password("alice".into(), "s3cret".into())
            .connect(&url)
            .await
            .unwrap();
        sync(&good).await;
        let e = refused_once(
            ConnectOptions::with_user_and_password("alice".into(), "nope".into()),
            &url,
        )
        .await;
        assert!(e.to_lowercase().contains("authorization"), "{e}");
        let nkc = ConnectOptions::with_nkey(nk.seed().unwrap())
            .connect(&url)
            .await
            .unwrap();
        sync(&nkc).await;
        // Both are in account A: they see each other.
        let mut sub = good.subscribe("greet").await.unwrap();
        sync(&good).await;
        nkc.publish("greet", "hi".into()).await.unwrap();
        nkc.flush().await.unwrap();
        assert_eq!(&next(&mut sub).await.payload[..], b"hi");
        let other = KeyPair::new_user();
        let e = refused_once(ConnectOptions::with_nkey(other.seed().unwrap()), &url).await;
        assert!(e.to_lowercase().contains("authorization"), "{e}");
    });
    drop(s);
    let s = Server::start(r, &["--auth", "t0ken", "--shards", "4"]);
    let url = s.url();
    rt().block_on(async {
        let c = ConnectOptions::with_token("t0ken".into()).connect(&url).await.unwrap();
        sync(&c).await;
        let e = refused_once(ConnectOptions::with_token("wrong".into()), &url).await;
        assert!(e.to_lowercase().contains("authorization"), "{e}");
    });
    let _ = std::fs::remove_dir_all(&dir);
});

// Operator mode with a creds file and with a JWT callback; an expired user and a
// revoked user are refused.
both_reactors!(creds_and_jwt_callbacks, |r| {
    let dir = scratch_dir();
    let t = now();
    let op = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let acc = KeyPair::new_account();
    let mut oc = OperatorClaims::new(op.public_key());
    oc.nats.system_account = sys.public_key();
    let op_jwt = oc.encode(&op, t).unwrap();
    let sys_jwt = AccountClaims::new(sys.public_key()).encode(&op, t).unwrap();
    let revoked = KeyPair::new_user();
    let mut ac = AccountClaims::new(acc.public_key());
    ac.nats.revocations.revoke(revoked.public_key(), (t + 10) as i64);
    let acc_jwt = ac.encode(&op, t).unwrap();
    std::fs::write(dir.join("op.jwt"), &op_jwt).unwrap();
    let conf = format!(
        "operator: \"{}\"\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{ {}: \"{}\", {}: \"{}\" }}\n",
        dir.join("op.jwt").display(),
        sys.public_key(),
        sys.public_key(),
        sys_jwt,
        acc.public_key(),
        acc_jwt
    );
    let s = start(r, &dir, &conf);
    let url = s.url();
    let user = KeyPair::new_user();
    let user_jwt = UserClaims::new(user.public_key()).encode(&acc, t).unwrap();
    let creds = format!(
        "{}\n{}\n",
        decorate_jwt(&user_jwt).unwrap(),
        decorate_seed(&user.seed().unwrap()).unwrap()
    );
    rt().block_on(async {
        let c = ConnectOptions::with_credentials(&creds)
            .unwrap()
            .connect(&url)
            .await
            .unwrap();
        sync(&c).await;
        // The JWT callback form: the client signs the nonce itself.
        let kp = std::sync::Arc::new(KeyPair::from_seed(&user.seed().unwrap()).unwrap());
        let cb = ConnectOptions::with_jwt(user_jwt.clone(), move |nonce| {
            let kp = kp.clone();
            async move { kp.sign(&nonce).map_err(async_nats::AuthError::new) }
        })
        .connect(&url)
        .await
        .unwrap();
        let mut sub = c.subscribe("x").await.unwrap();
        sync(&c).await;
        cb.publish("x", "via callback".into()).await.unwrap();
        cb.flush().await.unwrap();
        assert_eq!(&next(&mut sub).await.payload[..], b"via callback");

        let ekp = KeyPair::new_user();
        let mut expired = UserClaims::new(ekp.public_key());
        expired.claims.expires = (t - 5) as i64;
        let ejwt = expired.encode(&acc, t - 100).unwrap();
        let ecreds = format!(
            "{}\n{}\n",
            decorate_jwt(&ejwt).unwrap(),
            decorate_seed(&ekp.seed().unwrap()).unwrap()
        );
        let e = refused_once(ConnectOptions::with_credentials(&ecreds).unwrap(), &url).await;
        assert!(e.to_lowercase().contains("authorization"), "expired: {e}");
        let rjwt = UserClaims::new(revoked.public_key()).encode(&acc, t).unwrap();
        let rcreds = format!(
            "{}\n{}\n",
            decorate_jwt(&rjwt).unwrap(),
            decorate_seed(&revoked.seed().unwrap()).unwrap()
        );
        let e = refused_once(ConnectOptions::with_credentials(&rcreds).unwrap(), &url).await;
        assert!(e.to_lowercase().contains("authorization"), "revoked: {e}");
    });
    let _ = std::fs::remove_dir_all(&dir);
});

// Leak attempts across accounts from every shard: the same subjects and queue group
// names in two accounts, publishers and subscribers spread over 4 shards.
both_reactors!(no_leaks_across_accounts_on_any_shard, |r| {
    let dir = scratch_dir();
    let conf =
        "accounts {\n  A { users = [ {user: a, password: a} ] }\n  B { users = [ {user: b, password: b} ] }\n}\n";
    let s = start(r, &dir, conf);
    let url = s.url();
    rt().block_on(async {
        let mut a = Vec::new();
        let mut b = Vec::new();
        // Alternate so that both accounts have clients on every shard.
        for _ in 0..4 {
            a.push(
                ConnectOptions::with_user_and_password("a".into(), "a".into())
                    .connect(&url)
                    .await
                    .unwrap(),
            );
            b.push(
                ConnectOptions::with_user_and_password("b".into(), "b".into())
                    .connect(&url)
                    .await
                    .unwrap(),
            );
        }
        let mut a_plain = Vec::new();
        let mut a_queue = Vec::new();
        let mut b_plain = Vec::new();
        let mut b_queue = Vec::new();
        for c in &a {
            a_plain.push(c.subscribe("shared.>").await.unwrap());
            a_queue.push(c.queue_subscribe("shared.q", "workers".into()).await.unwrap());
            sync(c).await;
        }
        for c in &b {
            b_plain.push(c.subscribe("shared.>").await.unwrap());
            b_queue.push(c.queue_subscribe("shared.q", "workers".into()).await.unwrap());
            sync(c).await;
        }
        for (i, c) in a.iter().enumerate() {
            c.publish(format!("shared.from.a{i}"), "a".into()).await.unwrap();
            c.publish("shared.q", "qa".into()).await.unwrap();
            c.flush().await.unwrap();
        }
        // Every A subscriber sees the 4 plain messages of A and nothing of B.
        for sub in &mut a_plain {
            let mut got = Vec::new();
            for _ in 0..8 {
                got.push(next(sub).await.subject.to_string());
            }
            assert_eq!(
                got.iter().filter(|s| s.starts_with("shared.from.a")).count(),
                4,
                "{got:?}"
            );
        }
        for sub in &mut b_plain {
            nothing(sub).await;
        }
        // Exactly one member of A's group got each of A's 4 queue messages; none in B.
        let mut taken = 0;
        for sub in &mut a_queue {
            while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await {
                taken += 1;
            }
        }
        assert_eq!(taken, 4);
        for sub in &mut b_queue {
            nothing(sub).await;
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
});
