//! The claims services through the sans-IO core: two shards wired by a mesh, a system
//! account user on shard 1, the services on shard 0. Replies are compared byte for byte
//! with what nats-server 2.14.0 answered to the same requests (recorded against the
//! reference binary; only the `server` object, which names the server, is left out).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::config::DirResolver as DirConfig;
use crate::auth::resolver::dir::DirectoryResolver;
use crate::auth::resolver::memory::MemoryResolver;
use crate::auth::resolver::testkit::{account_jwt, generic_jwt, user_jwt, Keys, TempDir};
use crate::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use crate::core::client::ConnKey;
use crate::core::config::CoreConfig;
use crate::core::stats::Shared;
use crate::driver::MeshAdapter;
use crate::system::envelope::ServerIdentity;
use serde_json::json;
use shards::mesh::Notify;
use std::sync::Mutex;
use std::time::Duration;

struct Nop;
impl Notify for Nop {
    fn notify(&self) {}
}

type Calls = Arc<Mutex<Vec<String>>>;

struct World {
    shards: Vec<ShardCore>,
    now: Instant,
    client: ConnKey,
    next: u64,
    /// `update <acc>` and `delete <acc>` as the hooks ran.
    calls: Calls,
}

const CLIENT_SHARD: usize = 1;

/// Accounts named by their public keys: the system account and `registered`.
fn world(
    k: &Keys,
    resolver: Arc<dyn AccountResolver>,
    registered: &[String],
    edit: impl FnOnce(&mut ClaimsContext),
) -> World {
    let shared = Arc::new(Shared::new(2));
    let mut sys = 0;
    shared.accounts.install(|b| {
        let d = b.plain(&k.system_pub());
        sys = d.id;
        b.add(d);
        for name in registered {
            let d = b.plain(name);
            b.add(d);
        }
        b.set_system(Some(sys));
    });
    let mut dir = UserDirectory::default();
    dir.users.insert(
        "admin".into(),
        PasswordUser {
            name: "admin".into(),
            password: "p".into(),
            account: sys,
            permissions: None,
            conn_types: Vec::new(),
            proxy_required: false,
        },
    );
    let cfg = Arc::new(CoreConfig {
        authenticator: Arc::new(ConfigAuthenticator::new(dir)),
        ..CoreConfig::default()
    });
    let eps =
        shards::mesh::build::<crate::driver::Batch>((0..2).map(|_| Box::new(Nop) as Box<dyn Notify>).collect(), 64);
    let mut shards: Vec<ShardCore> = eps
        .into_iter()
        .enumerate()
        .map(|(i, ep)| ShardCore::new(i, 2, cfg.clone(), shared.clone(), Box::new(MeshAdapter(ep))))
        .collect();
    let now = Instant::now();
    let system = Arc::new(SystemContext {
        server: ServerIdentity {
            name: "rnats-test".into(),
            id: "NTEST".into(),
            version: "2.14.0".into(),
            ..ServerIdentity::default()
        },
    });
    let (op, sk) = (k.operator.public_key(), k.signing.public_key());
    let operator = OperatorKeys {
        operator: op.clone(),
        signing_keys: vec![sk.clone()],
        strict: false,
    };
    let trusted: TrustFn = Arc::new(move |key: &str| key == op || key == sk);
    let mut ctx = ClaimsContext::new(system, resolver, operator, k.system_pub(), trusted);
    let calls: Calls = Arc::default();
    let c = calls.clone();
    ctx.on_update = Arc::new(move |_: &mut ShardCore, acc: &str, _: &str, _: Instant| {
        c.lock().unwrap().push(format!("update {acc}"))
    });
    let c = calls.clone();
    ctx.on_delete =
        Arc::new(move |_: &mut ShardCore, acc: &str, _: Instant| c.lock().unwrap().push(format!("delete {acc}")));
    edit(&mut ctx);
    for s in &mut shards {
        s.tick(now);
    }
    let subs = subscribe(&mut shards[0], sys, Arc::new(ctx), now);
    assert!(!subs.is_empty());
    let mut w = World {
        shards,
        now,
        client: ConnKey { idx: 0, gen: 0 },
        next: 0,
        calls,
    };
    w.settle();
    let c = w.shards[CLIENT_SHARD].accept("127.0.0.1:40000".parse().unwrap(), now);
    w.client = c;
    w.take();
    w.input(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"user\":\"admin\",\"pass\":\"p\"}\r\nSUB _R.> 1\r\nPING\r\n");
    assert_eq!(w.take(), "PONG\r\n");
    w
}

impl World {
    fn settle(&mut self) {
        for _ in 0..20 {
            for s in &mut self.shards {
                s.tick(self.now);
                s.flush_mesh(self.now);
            }
            let mut moved = 0;
            for s in &mut self.shards {
                moved += s.poll_mesh(self.now);
            }
            if moved == 0 {
                return;
            }
        }
    }

    fn input(&mut self, data: &[u8]) {
        self.shards[CLIENT_SHARD].input(self.client, data, self.now);
        self.settle();
    }

    fn take(&mut self) -> String {
        let out = String::from_utf8_lossy(self.shards[CLIENT_SHARD].output(self.client)).into_owned();
        let n = self.shards[CLIENT_SHARD].output(self.client).len();
        self.shards[CLIENT_SHARD].written(self.client, n, self.now);
        out
    }

    /// Publish a request (with a header block if given); the payloads of the replies.
    fn request(&mut self, subject: &str, payload: &str, header: Option<&str>) -> Vec<String> {
        self.next += 1;
        let reply = format!("_R.{}", self.next);
        let op = match header {
            None => format!("PUB {subject} {reply} {}\r\n{payload}\r\n", payload.len()),
            Some(h) => format!(
                "HPUB {subject} {reply} {} {}\r\n{h}{payload}\r\n",
                h.len(),
                h.len() + payload.len()
            ),
        };
        self.input(op.as_bytes());
        self.input(b"PING\r\n");
        let out = self.take();
        assert!(out.ends_with("PONG\r\n"), "{out}");
        messages(&out)
    }

    fn one(&mut self, subject: &str, payload: &str) -> String {
        let r = self.request(subject, payload, None);
        assert_eq!(r.len(), 1, "{r:?}");
        r.into_iter().next().unwrap()
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

/// The payloads of the `MSG` frames in `out`.
fn messages(mut out: &str) -> Vec<String> {
    let mut v = Vec::new();
    while let Some(rest) = out.strip_prefix("MSG ") {
        let (line, after) = rest.split_once("\r\n").unwrap();
        let len: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        v.push(after[..len].to_string());
        out = &after[len + 2..];
    }
    v
}

/// The reply without its `"server":{...}` member (checked to be there, naming this
/// server).
fn strip_server(body: &str) -> String {
    let start = body
        .find("\"server\":{")
        .unwrap_or_else(|| panic!("no server in {body}"));
    // The server object holds one nested object (`feature_flags`): skip to the brace
    // that closes the server object itself.
    let mut depth = 0;
    let mut end = start;
    for (i, c) in body[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    assert!(body[start..].starts_with(r#""server":{"name":"rnats-test","host":"","id":"NTEST","ver":"2.14.0""#));
    let mut s = format!("{}{}", &body[..start], &body[end..]);
    s = s.replace("{,", "{").replace(",}", "}");
    s
}

fn ok(acc: &str, msg: &str) -> String {
    format!(r#"{{"data":{{"account":"{acc}","code":200,"message":"{msg}"}}}}"#)
}

fn err(acc: &str, desc: &str) -> String {
    if acc.is_empty() {
        format!(r#"{{"error":{{"code":500,"description":"{desc}"}}}}"#)
    } else {
        format!(r#"{{"error":{{"account":"{acc}","code":500,"description":"{desc}"}}}}"#)
    }
}

fn full_resolver(dir: &TempDir, delete: DeleteMode) -> Arc<DirectoryResolver> {
    Arc::new(
        DirectoryResolver::full(&DirConfig {
            dir: dir.path().display().to_string(),
            delete,
            ..DirConfig::default()
        })
        .unwrap(),
    )
}

fn upd(acc: &str) -> String {
    format!("$SYS.REQ.ACCOUNT.{acc}.CLAIMS.UPDATE")
}

const HDR: &str = "NATS/1.0\r\nX: y\r\n\r\n";

#[test]
fn full_resolver_updates_as_the_reference() {
    let k = Keys::new();
    let tmp = TempDir::new("claims-full");
    let r = full_resolver(&tmp, DeleteMode::NoDelete);
    let (a, b) = (k.account_pub(), k.other_pub());
    let mut w = world(&k, r.clone(), std::slice::from_ref(&a), |_| {});
    let ajwt = account_jwt(&k.operator, &k.account, 1_000_000, |_| {});
    let s = |w: &mut World, subj: &str, body: &str| strip_server(&w.one(subj, body));

    assert_eq!(s(&mut w, &upd(&a), &ajwt), ok(&a, "jwt updated"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join(format!("{a}.jwt"))).unwrap(),
        ajwt
    );
    assert_eq!(w.calls(), [format!("update {a}")], "A is registered");
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &ajwt), ok(&a, "jwt updated"));
    assert!(w.calls().is_empty(), "nothing changed");
    let mismatch = "jwt update resulted in error - subject does not match jwt content";
    assert_eq!(s(&mut w, &upd(&b), &ajwt), err(&b, mismatch));
    let chunks = "jwt update resulted in error - expected 3 chunks";
    assert_eq!(s(&mut w, &upd(&a), "garbage"), err("n/a", chunks));
    assert_eq!(s(&mut w, CLAIMS_UPDATE, "garbage"), err("n/a", chunks));
    assert_eq!(s(&mut w, CLAIMS_UPDATE, ""), err("n/a", chunks));
    assert_eq!(s(&mut w, &upd(&a), ""), err("n/a", chunks));
    let user = user_jwt(&k.account, 1);
    assert_eq!(
        s(&mut w, CLAIMS_UPDATE, &user),
        err("n/a", "jwt update resulted in error - not account claim")
    );
    let bad = account_jwt(&k.operator, &k.other, 1, |c| {
        c.nats.imports.push(crate::auth::jwt::Import {
            subject: "x".into(),
            import_type: crate::auth::jwt::ExportType::Stream,
            ..Default::default()
        })
    });
    assert_eq!(
        s(&mut w, CLAIMS_UPDATE, &bad),
        err(
            &b,
            "jwt validation failed - validation errors: [account to import from is not specified]"
        )
    );
    // Not registered: stored, no hook.
    let bsk = account_jwt(&k.signing, &k.other, 1, |_| {});
    assert_eq!(
        s(&mut w, &format!("$SYS.ACCOUNT.{b}.CLAIMS.UPDATE"), &bsk),
        ok(&b, "jwt updated")
    );
    assert_eq!(r.lookup(&b), Some(bsk));
    assert!(w.calls().is_empty());
    // A header block is part of the JWT on the per-account subjects, not on CLAIMS.UPDATE.
    let a2 = account_jwt(&k.operator, &k.account, 2_000_000, |_| {});
    let with_hdr = w.request(&upd(&a), &a2, Some(HDR));
    assert_eq!(strip_server(&with_hdr[0]), err("n/a", chunks));
    let with_hdr = w.request(CLAIMS_UPDATE, &a2, Some(HDR));
    assert_eq!(strip_server(&with_hdr[0]), ok(&a, "jwt updated"));
    assert_eq!(w.calls(), [format!("update {a}")]);
}

#[test]
fn full_resolver_checks_rnats_adds() {
    let k = Keys::new();
    let tmp = TempDir::new("claims-full-strict");
    let r = full_resolver(&tmp, DeleteMode::NoDelete);
    let a = k.account_pub();
    let mut w = world(&k, r.clone(), &[], |_| {});
    let s = |w: &mut World, subj: &str, body: &str| strip_server(&w.one(subj, body));
    // An issuer nobody trusts: refused (the reference stores it and fails later).
    let untrusted = account_jwt(&k.stranger, &k.account, 5, |_| {});
    assert_eq!(
        s(&mut w, CLAIMS_UPDATE, &untrusted),
        err(&a, "jwt update resulted in error - account validation failed")
    );
    assert_eq!(r.lookup(&a), None);
    // An older JWT is answered as the reference does but not stored.
    let newer = account_jwt(&k.operator, &k.account, 200, |c| c.claims.name = "new".into());
    let older = account_jwt(&k.operator, &k.account, 100, |c| c.claims.name = "old".into());
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &newer), ok(&a, "jwt updated"));
    assert_eq!(s(&mut w, &upd(&a), &older), ok(&a, "jwt updated"));
    assert_eq!(r.lookup(&a), Some(newer));
    // Strict signing key usage.
    let tmp2 = TempDir::new("claims-strict");
    let mut w = world(&k, full_resolver(&tmp2, DeleteMode::NoDelete), &[], |c| {
        c.operator.strict = true
    });
    let strict = "jwt update resulted in error - operator requires issuer to be a signing key";
    let by_op = account_jwt(&k.operator, &k.account, 1, |_| {});
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &by_op), err(&a, strict));
    assert_eq!(s(&mut w, &upd(&a), &by_op), err(&a, strict));
    let by_sk = account_jwt(&k.signing, &k.account, 1, |_| {});
    assert_eq!(s(&mut w, &upd(&a), &by_sk), ok(&a, "jwt updated"));
}

#[test]
fn lookup_list_and_pack() {
    let k = Keys::new();
    let tmp = TempDir::new("claims-lookup");
    let r = full_resolver(&tmp, DeleteMode::NoDelete);
    let (a, sys) = (k.account_pub(), k.system_pub());
    let ajwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    let sjwt = account_jwt(&k.operator, &k.system, 1, |_| {});
    r.store(&a, &ajwt).unwrap();
    r.store(&sys, &sjwt).unwrap();
    std::fs::write(tmp.path().join(format!("{}.jwt", k.other_pub())), "garbage").unwrap();
    let mut w = world(&k, r.clone(), &[], |_| {});
    assert_eq!(
        w.request(&format!("$SYS.REQ.ACCOUNT.{a}.CLAIMS.LOOKUP"), "", None),
        std::slice::from_ref(&ajwt)
    );
    let unknown = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.LOOKUP", k.stranger.public_key());
    assert_eq!(w.request(&unknown, "", None), [""], "empty: not here");
    let garbage = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.LOOKUP", k.other_pub());
    assert_eq!(w.request(&garbage, "", None), [""], "a garbage file is never served");
    assert!(
        w.request("$SYS.REQ.ACCOUNT.foo.CLAIMS.LOOKUP", "", None).is_empty(),
        "no reply to an invalid key"
    );
    let mut keys = [a.clone(), sys.clone()];
    keys.sort();
    let list = w.one(CLAIMS_LIST, "");
    assert!(
        list.starts_with(&format!(
            r#"{{"data":["{}","{}"],"server":{{"name":"rnats-test""#,
            keys[0], keys[1]
        )),
        "{list}"
    );
    assert_eq!(
        strip_server(&list),
        format!(r#"{{"data":["{}","{}"]}}"#, keys[0], keys[1])
    );
    let mut want: Vec<String> = [(a.clone(), ajwt), (sys, sjwt)]
        .into_iter()
        .map(|(k, j)| format!("{k}|{j}"))
        .collect();
    want.sort();
    want.push(String::new());
    assert_eq!(w.request(CLAIMS_PACK, "", None), want);
    // The asker's hash (raw bytes) matching ours: just the end marker.
    let hash = r.dir_store().unwrap().hash();
    assert_eq!(w.request_bytes(CLAIMS_PACK, &hash), [""]);
}

impl World {
    fn request_bytes(&mut self, subject: &str, payload: &[u8]) -> Vec<String> {
        self.next += 1;
        let mut op = format!("PUB {subject} _R.{} {}\r\n", self.next, payload.len()).into_bytes();
        op.extend_from_slice(payload);
        op.extend_from_slice(b"\r\n");
        self.input(&op);
        self.input(b"PING\r\n");
        let out = self.take();
        assert!(out.ends_with("PONG\r\n"), "{out:?}");
        messages(&out)
    }
}

#[test]
fn deletes_as_the_reference() {
    let k = Keys::new();
    let (a, b, sys) = (k.account_pub(), k.other_pub(), k.system_pub());
    let op = k.operator.public_key();
    let s = |w: &mut World, body: &str| strip_server(&w.one(CLAIMS_DELETE, body));
    let by = |who: &str, why: &str| err("", &format!("delete accounts request by {who} failed - {why}"));

    let tmp = TempDir::new("claims-del-none");
    let mut w = world(&k, full_resolver(&tmp, DeleteMode::NoDelete), &[], |_| {});
    let req = generic_jwt(&k.operator, &op, json!({"accounts": [a]}));
    assert_eq!(s(&mut w, &req), by(&op, "delete must be enabled in server config"));

    for mode in [DeleteMode::Rename, DeleteMode::Hard] {
        let tmp = TempDir::new("claims-del");
        let r = full_resolver(&tmp, mode);
        r.store(&a, &account_jwt(&k.operator, &k.account, 1, |_| {})).unwrap();
        r.store(&b, &account_jwt(&k.operator, &k.other, 1, |_| {})).unwrap();
        let mut w = world(&k, r.clone(), std::slice::from_ref(&a), |_| {});
        assert_eq!(s(&mut w, &req), ok_plain("deleted 1 accounts"));
        assert_eq!(w.calls(), [format!("delete {a}")]);
        let renamed = tmp.path().join(format!("{a}.jwt.deleted")).exists();
        assert_eq!(renamed, mode == DeleteMode::Rename);
        assert_eq!(
            s(&mut w, &req),
            ok_plain("deleted 1 accounts"),
            "gone already: still a pass"
        );
        assert!(w.calls().is_empty(), "but no hook");
        let stranger = k.stranger.public_key();
        let cases = [
            (
                generic_jwt(&k.stranger, &stranger, json!({"accounts": [b]})),
                by(&stranger, "not trusted"),
            ),
            (
                generic_jwt(&k.operator, &b, json!({"accounts": [b]})),
                by(&b, "not self signed"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accountz": [b]})),
                by(&op, "malformed request"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accounts": b})),
                by(&op, "malformed request"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accounts": ["foo"]})),
                by(&op, "malformed request"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accounts": [b, 3]})),
                by(&op, "malformed request"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accounts": [sys]})),
                by(&op, "not allowed to delete system account"),
            ),
            (
                generic_jwt(&k.operator, &op, json!({"accounts": []})),
                ok_plain("deleted 0 accounts"),
            ),
            ("garbage".to_string(), by("", "expected 3 chunks")),
        ];
        for (body, want) in cases {
            assert_eq!(s(&mut w, &body), want, "{mode:?}");
        }
        assert!(r.lookup(&b).is_some(), "none of those deleted B");
        let sk = k.signing.public_key();
        let by_sk = generic_jwt(&k.signing, &sk, json!({"accounts": [b]}));
        let with_hdr = w.request(CLAIMS_DELETE, &by_sk, Some(HDR));
        assert_eq!(strip_server(&with_hdr[0]), ok_plain("deleted 1 accounts"));
        assert_eq!(r.lookup(&b), None);
        assert!(w.calls().is_empty(), "B was not registered");
        assert_eq!(strip_server(&w.one(CLAIMS_LIST, "")), "{\"data\":[]}");
    }
}

fn ok_plain(msg: &str) -> String {
    format!(r#"{{"data":{{"code":200,"message":"{msg}"}}}}"#)
}

#[test]
fn cache_resolver_as_the_reference() {
    let k = Keys::new();
    let tmp = TempDir::new("claims-cache");
    let r = Arc::new(
        DirectoryResolver::cache(&DirConfig {
            dir: tmp.path().display().to_string(),
            limit: 3,
            ttl: Duration::from_secs(3600),
            ..DirConfig::default()
        })
        .unwrap(),
    );
    let (a, b, sys) = (k.account_pub(), k.other_pub(), k.system_pub());
    let mut w = world(&k, r.clone(), &[sys.clone(), a.clone()], |_| {});
    let s = |w: &mut World, subj: &str, body: &str| strip_server(&w.one(subj, body));
    let bjwt = account_jwt(&k.operator, &k.other, 1, |_| {});
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &bjwt), ok(&b, "jwt update cache skipped"));
    assert_eq!(s(&mut w, &upd(&b), &bjwt), ok(&b, "jwt update cache skipped"));
    assert_eq!(r.lookup(&b), None, "not registered: not cached");
    assert_eq!(
        s(&mut w, &upd(&b), "garbage"),
        err(&b, "jwt update cache resulted in error - expected 3 chunks")
    );
    assert_eq!(
        s(&mut w, CLAIMS_UPDATE, "garbage"),
        err("n/a", "jwt update cache resulted in error - expected 3 chunks")
    );
    let ajwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    assert_eq!(
        s(&mut w, &upd(&b), &ajwt),
        err(
            &b,
            "jwt update cache resulted in error - subject does not match jwt content"
        )
    );
    let sjwt = account_jwt(&k.operator, &k.system, 1, |_| {});
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &sjwt), ok(&sys, "jwt updated cache"));
    let bad = account_jwt(&k.operator, &k.system, 2, |c| {
        c.nats.imports.push(crate::auth::jwt::Import {
            subject: "x".into(),
            import_type: crate::auth::jwt::ExportType::Stream,
            ..Default::default()
        })
    });
    let invalid = "jwt update cache validation failed - validation errors: [account to import from is not specified]";
    assert_eq!(s(&mut w, CLAIMS_UPDATE, &bad), err(&sys, invalid));
    assert_eq!(s(&mut w, &upd(&sys), &bad), err(&sys, invalid));
    assert_eq!(s(&mut w, &upd(&a), &ajwt), ok(&a, "jwt updated cache"));
    assert_eq!(w.calls(), [format!("update {sys}"), format!("update {a}")]);
    // No lookup or pack service on a cache.
    assert!(w
        .request(&format!("$SYS.REQ.ACCOUNT.{a}.CLAIMS.LOOKUP"), "", None)
        .is_empty());
    assert!(w.request(CLAIMS_PACK, "", None).is_empty());
    let mut keys = [a.clone(), sys.clone()];
    keys.sort();
    assert_eq!(
        strip_server(&w.one(CLAIMS_LIST, "")),
        format!(r#"{{"data":["{}","{}"]}}"#, keys[0], keys[1])
    );
    let op = k.operator.public_key();
    let del = generic_jwt(&k.operator, &op, json!({"accounts": [a]}));
    assert_eq!(
        strip_server(&w.one(CLAIMS_DELETE, &del)),
        ok_plain("deleted 1 accounts")
    );
    assert!(
        !tmp.path().join(format!("{a}.jwt")).exists(),
        "a cache deletes the file"
    );
    assert_eq!(w.calls(), [format!("delete {a}")]);
}

#[test]
fn memory_resolver_updates_registered_accounts_only() {
    let k = Keys::new();
    let r = Arc::new(MemoryResolver::new());
    let (a, sys) = (k.account_pub(), k.system_pub());
    let preload = account_jwt(&k.operator, &k.system, 1, |_| {});
    r.store(&sys, &preload).unwrap();
    let mut w = world(&k, r.clone(), std::slice::from_ref(&sys), |_| {});
    let s = |w: &mut World, subj: &str, body: &str| strip_server(&w.one(subj, body));
    let s2 = account_jwt(&k.operator, &k.system, 2, |_| {});
    assert_eq!(s(&mut w, &upd(&sys), &s2), ok(&sys, "jwt updated"));
    assert_eq!(
        s(&mut w, &format!("$SYS.ACCOUNT.{sys}.CLAIMS.UPDATE"), &s2),
        ok(&sys, "jwt updated")
    );
    assert_eq!(w.calls(), [format!("update {sys}"), format!("update {sys}")]);
    assert_eq!(r.lookup(&sys), Some(preload), "the resolver is left as it was");
    let ajwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    assert_eq!(s(&mut w, &upd(&a), &ajwt), ok(&a, "jwt update skipped"));
    assert_eq!(
        s(&mut w, &upd(&a), ""),
        err(&a, "jwt update error - request body is empty")
    );
    assert_eq!(
        s(&mut w, &upd(&a), "garbage"),
        err(&a, "jwt update resulted in error - expected 3 chunks")
    );
    assert_eq!(
        s(&mut w, &upd(&a), &s2),
        err(&a, "jwt update resulted in error - subject does not match jwt content")
    );
    let validation = "jwt update resulted in error - account validation failed";
    let untrusted = account_jwt(&k.stranger, &k.system, 3, |_| {});
    assert_eq!(s(&mut w, &upd(&sys), &untrusted), err(&sys, validation));
    let expired = account_jwt(&k.operator, &k.system, 3, |c| c.claims.expires = 1000);
    assert_eq!(s(&mut w, &upd(&sys), &expired), err(&sys, validation));
    let user = user_jwt(&k.system, 1);
    assert_eq!(
        s(&mut w, &upd(&sys), &user),
        err(&sys, "jwt update resulted in error - not account claim")
    );
    // Headers are not part of the JWT here.
    let with_hdr = w.request(&upd(&sys), &s2, Some(HDR));
    assert_eq!(strip_server(&with_hdr[0]), ok(&sys, "jwt updated"));
    assert_eq!(w.calls(), [format!("update {sys}")]);
    // No other claims service.
    for subj in [CLAIMS_UPDATE, CLAIMS_LIST, CLAIMS_DELETE, CLAIMS_PACK] {
        assert!(w.request(subj, &s2, None).is_empty(), "{subj}");
    }
}

#[test]
fn subjects_per_kind_and_start_errors() {
    assert_eq!(subjects(ResolverKind::Memory), subjects(ResolverKind::Url));
    assert_eq!(subjects(ResolverKind::Full).len(), 7);
    assert!(subjects(ResolverKind::Full).contains(&(CLAIMS_PACK, Some("responder"))));
    assert!(!subjects(ResolverKind::Cache).iter().any(|(s, _)| *s == ACCOUNT_LOOKUP));
    let k = Keys::new();
    let tmp = TempDir::new("claims-start");
    let system = Arc::new(SystemContext {
        server: ServerIdentity::default(),
    });
    let trusted: TrustFn = Arc::new(|_: &str| true);
    let strict_no_keys = OperatorKeys {
        operator: k.operator.public_key(),
        signing_keys: Vec::new(),
        strict: true,
    };
    let full: Arc<dyn AccountResolver> = full_resolver(&tmp, DeleteMode::NoDelete);
    let ctx = ClaimsContext::new(
        system.clone(),
        full.clone(),
        strict_no_keys.clone(),
        "",
        trusted.clone(),
    );
    assert_eq!(ctx.start_error().as_deref(), Some("no operator key found"));
    let mem = ClaimsContext::new(
        system.clone(),
        Arc::new(MemoryResolver::new()),
        strict_no_keys,
        "",
        trusted.clone(),
    );
    assert_eq!(mem.start_error(), None);
    let ok = ClaimsContext::new(system, full, OperatorKeys::default(), "", trusted);
    assert_eq!(
        ok.start_error().as_deref(),
        Some("no operator key found"),
        "no operator at all"
    );
    let op = OperatorKeys {
        operator: "O".into(),
        signing_keys: vec!["S".into()],
        strict: false,
    };
    assert_eq!(op.delete_signers().collect::<Vec<_>>(), ["O", "S"]);
}
