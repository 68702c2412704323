//! The account resolvers and the system account's claims services against the reference
//! Go nats-server 2.14:
//!
//! - the same `$SYS` claims requests go to the reference server (over raw TCP, as a user of
//!   the system account) and to rnats' services (a one-shard sans-IO core); the replies
//!   must be the same bytes once the `server` object (which names the server) is taken out;
//! - a resolver directory the reference wrote serves rnats, and one rnats wrote serves the
//!   reference (lookups, lists, users of a stored account connecting).
//!
//! The server binary is `$NATS_REFERENCE_SERVER`, else
//! `/root/.cache/nats-reference/2.14.0/nats-server`; without either the test prints a note
//! and passes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nkeys::KeyPair;
use rnats::auth::config::{DeleteMode, DirResolver, ResolverConfig};
use rnats::auth::jwt::codec::b64_encode;
use rnats::auth::jwt::{AccountClaims, Encode, ExportType, Import, OperatorClaims, UserClaims};
use rnats::auth::resolver::{from_config, AccountResolver};
use rnats::auth::users::{ConfigAuthenticator, PasswordUser, UserDirectory};
use rnats::core::client::ConnKey;
use rnats::core::config::CoreConfig;
use rnats::core::shard::{NoMesh, ShardCore};
use rnats::core::stats::Shared;
use rnats::system::claims::{self, ClaimsContext, OperatorKeys, TrustFn};
use rnats::system::envelope::ServerIdentity;
use rnats::system::SystemContext;

fn reference_server() -> Option<PathBuf> {
    let path = std::env::var_os("NATS_REFERENCE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.cache/nats-reference/2.14.0/nats-server"));
    path.exists().then_some(path)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Operator (with a signing key), system account, accounts, an untrusted operator.
struct Keys {
    op: KeyPair,
    sk: KeyPair,
    sys: KeyPair,
    a: KeyPair,
    b: KeyPair,
    c: KeyPair,
    sys_user: KeyPair,
}

impl Keys {
    fn new() -> Self {
        Keys {
            op: KeyPair::new_operator(),
            sk: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
            a: KeyPair::new_account(),
            b: KeyPair::new_account(),
            c: KeyPair::new_account(),
            sys_user: KeyPair::new_user(),
        }
    }

    fn operator_jwt(&self) -> String {
        let mut c = OperatorClaims::new(self.op.public_key());
        c.claims.name = "OP".into();
        c.nats.system_account = self.sys.public_key();
        c.nats.signing_keys = vec![self.sk.public_key()];
        c.encode(&self.op, now()).expect("operator")
    }
}

fn account(signer: &KeyPair, acc: &KeyPair, iat: u64, edit: impl FnOnce(&mut AccountClaims)) -> String {
    let mut c = AccountClaims::new(acc.public_key());
    c.claims.name = "acc".into();
    edit(&mut c);
    c.encode(signer, iat).expect("account")
}

fn user(acc: &KeyPair, u: &KeyPair) -> String {
    UserClaims::new(u.public_key()).encode(acc, now()).expect("user")
}

/// A generic JWT (a delete request), signed by `signer`, about `subject`.
fn generic(signer: &KeyPair, subject: &str, nats: serde_json::Value) -> String {
    let header = b64_encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = serde_json::json!({
        "jti": format!("J{}", free_port()),
        "iat": now(),
        "iss": signer.public_key(),
        "sub": subject,
        "nats": nats,
    });
    let payload = b64_encode(claims.to_string().as_bytes());
    let signed = format!("{header}.{payload}");
    let sig = b64_encode(&signer.sign(signed.as_bytes()).expect("sign"));
    format!("{signed}.{sig}")
}

// ---- the reference server ----

struct Reference {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_reference(bin: &Path, work: &Path, k: &Keys, resolver: &str) -> Reference {
    // Another port when a parallel test's server took the first between its choice and the bind.
    for _ in 0..5 {
        let port = free_port();
        let op_path = work.join("op.jwt");
        std::fs::write(&op_path, k.operator_jwt()).expect("op.jwt");
        let sys_jwt = account(&k.op, &k.sys, 1_000, |_| {});
        let conf = format!(
            "listen: 127.0.0.1:{port}\noperator: \"{}\"\nsystem_account: {}\n{resolver}\nresolver_preload: {{ {}: \"{sys_jwt}\" }}\n",
            op_path.display(),
            k.sys.public_key(),
            k.sys.public_key()
        );
        let conf_path = work.join(format!("server-{port}.conf"));
        std::fs::write(&conf_path, conf).expect("conf");
        let log = work.join(format!("server-{port}.log"));
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("start reference");
        let mut r = Reference { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        let listening = format!("Listening for client connections on 127.0.0.1:{port}");
        loop {
            let text = std::fs::read_to_string(&r.log).unwrap_or_default();
            if text.contains(&listening) && text.contains("Server is ready") {
                return r;
            }
            if let Ok(Some(status)) = r.child.try_wait() {
                eprintln!("reference exited ({status}), again on another port:\n{text}");
                break;
            }
            assert!(Instant::now() < deadline, "reference did not start:\n{text}");
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    panic!("the reference would not start in five attempts");
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    next: u64,
}

impl Conn {
    /// Connect with a user JWT, signing the nonce; `None` if refused.
    fn open(port: u16, jwt: &str, key: &KeyPair) -> Option<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let mut c = Conn {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
            next: 0,
        };
        c.w.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let info = c.line().expect("INFO");
        let info: serde_json::Value = serde_json::from_str(info.strip_prefix("INFO ").expect("INFO")).expect("json");
        let nonce = info["nonce"].as_str().expect("nonce");
        let sig = b64_encode(&key.sign(nonce.as_bytes()).expect("sign"));
        let connect = serde_json::json!({"jwt": jwt, "sig": sig, "verbose": false, "pedantic": false, "headers": true, "protocol": 1});
        c.w.write_all(format!("CONNECT {connect}\r\nSUB _R.> 1\r\nPING\r\n").as_bytes())
            .expect("write");
        loop {
            match c.line()?.as_str() {
                "PONG" => return Some(c),
                l if l.starts_with("-ERR") => return None,
                _ => {}
            }
        }
    }

    fn line(&mut self) -> Option<String> {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(l.trim_end_matches(['\r', '\n']).to_string()),
        }
    }

    /// Send a request; collect `want` replies (waiting up to 3 s), then anything arriving
    /// in a short quiet period.
    fn request(&mut self, subject: &str, header: &str, payload: &[u8], want: usize) -> Vec<Vec<u8>> {
        self.next += 1;
        let reply = format!("_R.{}", self.next);
        let mut op = if header.is_empty() {
            format!("PUB {subject} {reply} {}\r\n", payload.len()).into_bytes()
        } else {
            let total = header.len() + payload.len();
            format!("HPUB {subject} {reply} {} {total}\r\n{header}", header.len()).into_bytes()
        };
        op.extend_from_slice(payload);
        op.extend_from_slice(b"\r\n");
        self.w.write_all(&op).expect("write");
        let mut got = Vec::new();
        let start = Instant::now();
        loop {
            let wait = if got.len() < want {
                Duration::from_secs(3).saturating_sub(start.elapsed())
            } else {
                Duration::from_millis(if want == 0 { 400 } else { 100 })
            };
            if wait.is_zero() {
                return got;
            }
            self.w.set_read_timeout(Some(wait)).expect("timeout");
            let Some(line) = self.line() else { return got };
            if line == "PING" {
                self.w.write_all(b"PONG\r\n").expect("pong");
                continue;
            }
            let Some(rest) = line.strip_prefix("MSG ") else {
                continue;
            };
            let len: usize = rest.rsplit(' ').next().and_then(|n| n.parse().ok()).expect("len");
            let mut body = vec![0u8; len + 2];
            self.r.read_exact(&mut body).expect("body");
            body.truncate(len);
            got.push(body);
        }
    }
}

// ---- rnats' services on a one-shard core ----

struct Rnats {
    core: ShardCore,
    client: ConnKey,
    now: Instant,
    next: u64,
}

impl Rnats {
    fn new(k: &Keys, resolver: Arc<dyn AccountResolver>) -> Rnats {
        let shared = Arc::new(Shared::new(1));
        let mut sys = 0;
        shared.accounts.install(|b| {
            let d = b.plain(&k.sys.public_key());
            sys = d.id;
            b.add(d);
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
        let now = Instant::now();
        let mut core = ShardCore::new(0, 1, cfg, shared, Box::new(NoMesh));
        core.tick(now);
        let system = Arc::new(SystemContext {
            server: ServerIdentity::default(),
        });
        let (op, sk) = (k.op.public_key(), k.sk.public_key());
        let keys = OperatorKeys {
            operator: op.clone(),
            signing_keys: vec![sk.clone()],
            strict: false,
        };
        let trusted: TrustFn = Arc::new(move |key: &str| key == op || key == sk);
        let ctx = ClaimsContext::new(system, resolver, keys, k.sys.public_key(), trusted);
        claims::subscribe(&mut core, sys, Arc::new(ctx), now);
        let client = core.accept("127.0.0.1:40000".parse().expect("addr"), now);
        let mut r = Rnats {
            core,
            client,
            now,
            next: 0,
        };
        r.take();
        r.core.input(
            client,
            b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"user\":\"admin\",\"pass\":\"p\"}\r\nSUB _R.> 1\r\nPING\r\n",
            now,
        );
        assert_eq!(r.take(), b"PONG\r\n");
        r
    }

    fn take(&mut self) -> Vec<u8> {
        let out = self.core.output(self.client).to_vec();
        self.core.written(self.client, out.len(), self.now);
        out
    }

    fn request(&mut self, subject: &str, header: &str, payload: &[u8]) -> Vec<Vec<u8>> {
        self.next += 1;
        let mut op = if header.is_empty() {
            format!("PUB {subject} _R.{} {}\r\n", self.next, payload.len()).into_bytes()
        } else {
            let total = header.len() + payload.len();
            format!("HPUB {subject} _R.{} {} {total}\r\n{header}", self.next, header.len()).into_bytes()
        };
        op.extend_from_slice(payload);
        op.extend_from_slice(b"\r\n");
        self.core.input(self.client, &op, self.now);
        self.core.tick(self.now);
        let out = self.take();
        let mut msgs = Vec::new();
        let mut rest: &[u8] = &out;
        while rest.starts_with(b"MSG ") {
            let eol = rest.windows(2).position(|w| w == b"\r\n").expect("eol");
            let line = String::from_utf8_lossy(&rest[..eol]).into_owned();
            let len: usize = line.rsplit(' ').next().and_then(|n| n.parse().ok()).expect("len");
            msgs.push(rest[eol + 2..eol + 2 + len].to_vec());
            rest = &rest[eol + 2 + len + 2..];
        }
        msgs
    }
}

/// A reply without its `"server":{...}` member (nested objects included).
fn without_server(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body).into_owned();
    let Some(start) = s.find("\"server\":{") else { return s };
    let mut depth = 0;
    let mut end = start;
    for (i, ch) in s[start..].char_indices() {
        match ch {
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
    let mut out = format!("{}{}", &s[..start], &s[end..]);
    out = out.replace("{,", "{").replace(",}", "}");
    out
}

/// One request to both; the normalized replies must be equal (and are returned).
fn both(reference: &mut Conn, rnats: &mut Rnats, subject: &str, header: &str, payload: &[u8]) -> Vec<String> {
    let ours: Vec<String> = rnats
        .request(subject, header, payload)
        .iter()
        .map(|b| without_server(b))
        .collect();
    let theirs: Vec<String> = reference
        .request(subject, header, payload, ours.len())
        .iter()
        .map(|b| without_server(b))
        .collect();
    assert_eq!(ours, theirs, "{subject} {}", String::from_utf8_lossy(payload));
    ours
}

fn dir_config(dir: &Path, delete: DeleteMode) -> DirResolver {
    DirResolver {
        dir: dir.display().to_string(),
        delete,
        ..DirResolver::default()
    }
}

fn upd(acc: &KeyPair) -> String {
    format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE", acc.public_key())
}

const HDR: &str = "NATS/1.0\r\nX: y\r\n\r\n";

/// The requests every nats-based resolver answers the same way (no account but the
/// system account is registered on either side).
fn update_cases(k: &Keys) -> Vec<(String, &'static str, String)> {
    let a = account(&k.op, &k.a, 1_000_000, |_| {});
    let bad_import = account(&k.op, &k.b, 1_000_001, |c| {
        c.nats.imports.push(Import {
            subject: "x".into(),
            import_type: ExportType::Stream,
            ..Default::default()
        })
    });
    let sys2 = account(&k.sk, &k.sys, 1_000_002, |c| c.claims.name = "SYS2".into());
    vec![
        (upd(&k.a), "", a.clone()),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), "", a.clone()),
        (upd(&k.b), "", a.clone()),
        (upd(&k.a), "", "garbage".into()),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), "", "garbage".into()),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), "", String::new()),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), "", user(&k.a, &KeyPair::new_user())),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), "", bad_import.clone()),
        (upd(&k.b), "", bad_import),
        (
            format!("$SYS.ACCOUNT.{}.CLAIMS.UPDATE", k.sys.public_key()),
            "",
            sys2.clone(),
        ),
        (upd(&k.sys), HDR, sys2.clone()),
        ("$SYS.REQ.CLAIMS.UPDATE".into(), HDR, sys2),
    ]
}

#[test]
fn claims_services_answer_as_the_reference() {
    let Some(bin) = reference_server() else {
        eprintln!("note: no reference nats-server (set NATS_REFERENCE_SERVER); skipping");
        return;
    };
    let k = Keys::new();
    let work = std::env::temp_dir().join(format!("rnats-resolver-ref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let sys_jwt = account(&k.op, &k.sys, 1_000, |_| {});
    let preload = [(k.sys.public_key(), sys_jwt.clone())];
    let sys_user = user(&k.sys, &k.sys_user);
    let op = k.op.public_key();

    for (name, resolver) in [
        ("full", "resolver { type: full, dir: \"DIR\", allow_delete: true }"),
        (
            "hard",
            "resolver { type: full, dir: \"DIR\", allow_delete: true, hard_delete: true }",
        ),
        ("nodelete", "resolver { type: full, dir: \"DIR\" }"),
        ("cache", "resolver { type: cache, dir: \"DIR\", limit: 10 }"),
        ("memory", "resolver: MEMORY"),
    ] {
        let ref_dir = work.join(format!("{name}-ref"));
        let our_dir = work.join(format!("{name}-ours"));
        let resolver_line = resolver.replace("DIR", &ref_dir.display().to_string());
        let reference = start_reference(&bin, &work, &k, &resolver_line);
        let mut rc = Conn::open(reference.port, &sys_user, &k.sys_user).expect("system user connects");
        let cfg = match name {
            "full" => ResolverConfig::Full(dir_config(&our_dir, DeleteMode::Rename)),
            "hard" => ResolverConfig::Full(dir_config(&our_dir, DeleteMode::Hard)),
            "nodelete" => ResolverConfig::Full(dir_config(&our_dir, DeleteMode::NoDelete)),
            "cache" => ResolverConfig::Cache(DirResolver {
                limit: 10,
                ..dir_config(&our_dir, DeleteMode::NoDelete)
            }),
            _ => ResolverConfig::Memory,
        };
        let resolver = from_config(&cfg, &preload).expect("resolver");
        let mut ours = Rnats::new(&k, resolver);
        for (subject, header, payload) in update_cases(&k) {
            both(&mut rc, &mut ours, &subject, header, payload.as_bytes());
        }
        let list = both(&mut rc, &mut ours, "$SYS.REQ.CLAIMS.LIST", "", b"");
        both(
            &mut rc,
            &mut ours,
            &format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.LOOKUP", k.a.public_key()),
            "",
            b"",
        );
        both(
            &mut rc,
            &mut ours,
            &format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.LOOKUP", k.c.public_key()),
            "",
            b"",
        );
        both(&mut rc, &mut ours, "$SYS.REQ.ACCOUNT.foo.CLAIMS.LOOKUP", "", b"");
        let pack = both(&mut rc, &mut ours, "$SYS.REQ.CLAIMS.PACK", "", b"");
        if name == "full" {
            assert!(list[0].contains(&k.a.public_key()), "{list:?}");
            assert_eq!(pack.len(), 3, "two JWTs and the end: {pack:?}");
        }
        let stranger = KeyPair::new_operator();
        let deletes = [
            generic(&k.op, &op, serde_json::json!({"accounts": [k.a.public_key()]})),
            generic(&k.op, &op, serde_json::json!({"accounts": [k.a.public_key()]})),
            generic(
                &stranger,
                &stranger.public_key(),
                serde_json::json!({"accounts": [k.a.public_key()]}),
            ),
            generic(
                &KeyPair::new_operator(),
                &op,
                serde_json::json!({"accounts": [k.a.public_key()]}),
            ),
            generic(
                &k.op,
                &k.b.public_key(),
                serde_json::json!({"accounts": [k.b.public_key()]}),
            ),
            generic(&k.op, &op, serde_json::json!({"accountz": []})),
            generic(&k.op, &op, serde_json::json!({"accounts": ["foo"]})),
            generic(&k.op, &op, serde_json::json!({"accounts": [k.sys.public_key()]})),
            generic(&k.op, &op, serde_json::json!({"accounts": []})),
            "garbage".to_string(),
        ];
        for d in &deletes {
            both(&mut rc, &mut ours, "$SYS.REQ.CLAIMS.DELETE", "", d.as_bytes());
        }
        both(&mut rc, &mut ours, "$SYS.REQ.CLAIMS.DELETE", HDR, deletes[0].as_bytes());
        both(&mut rc, &mut ours, "$SYS.REQ.CLAIMS.LIST", "", b"");
        drop(rc);
        drop(reference);
        if name == "full" || name == "hard" {
            let mut a: Vec<String> = std::fs::read_dir(&ref_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            let mut b: Vec<String> = std::fs::read_dir(&our_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{name}: the same files");
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn directories_move_between_the_reference_and_rnats() {
    let Some(bin) = reference_server() else {
        eprintln!("note: no reference nats-server (set NATS_REFERENCE_SERVER); skipping");
        return;
    };
    let k = Keys::new();
    let work = std::env::temp_dir().join(format!("rnats-resolver-dirs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let dir = work.join("jwt");
    let resolver = format!(
        "resolver {{ type: full, dir: \"{}\", allow_delete: true }}",
        dir.display()
    );
    let sys_user = user(&k.sys, &k.sys_user);
    let a = account(&k.op, &k.a, now(), |c| c.claims.name = "A".into());
    let b = account(&k.sk, &k.b, now(), |c| c.claims.name = "B".into());

    // The reference writes.
    {
        let reference = start_reference(&bin, &work, &k, &resolver);
        let mut rc = Conn::open(reference.port, &sys_user, &k.sys_user).expect("system user");
        for j in [&a, &b] {
            let r = rc.request("$SYS.REQ.CLAIMS.UPDATE", "", j.as_bytes(), 1);
            assert!(String::from_utf8_lossy(&r[0]).contains("jwt updated"));
        }
        let del = generic(
            &k.op,
            &k.op.public_key(),
            serde_json::json!({"accounts": [k.b.public_key()]}),
        );
        rc.request("$SYS.REQ.CLAIMS.DELETE", "", del.as_bytes(), 1);
    }
    // rnats reads: the same accounts, the deleted one renamed away.
    let cfg = ResolverConfig::Full(dir_config(&dir, DeleteMode::Rename));
    {
        let ours = from_config(&cfg, &[]).expect("resolver");
        let mut want = vec![k.sys.public_key(), k.a.public_key()];
        want.sort();
        assert_eq!(ours.list(), want);
        assert_eq!(ours.lookup(&k.a.public_key()).as_deref(), Some(a.as_str()));
        assert_eq!(ours.lookup(&k.b.public_key()), None);
        // rnats writes: an account of its own, and a newer B.
        let c = account(&k.op, &k.c, now(), |c| c.claims.name = "C".into());
        ours.store(&k.c.public_key(), &c).expect("store C");
        let b2 = account(&k.op, &k.b, now() + 1, |c| c.claims.name = "B2".into());
        ours.store(&k.b.public_key(), &b2).expect("store B2");
    }
    // The reference reads what rnats wrote: lookups, the list, and users connecting.
    let reference = start_reference(&bin, &work, &k, &resolver);
    let mut rc = Conn::open(reference.port, &sys_user, &k.sys_user).expect("system user");
    let ours = from_config(&cfg, &[]).expect("resolver");
    for acc in [&k.a, &k.b, &k.c] {
        let key = acc.public_key();
        let r = rc.request(&format!("$SYS.REQ.ACCOUNT.{key}.CLAIMS.LOOKUP"), "", b"", 1);
        assert_eq!(
            r.first().map(|j| String::from_utf8_lossy(j).into_owned()),
            ours.lookup(&key)
        );
        let u = KeyPair::new_user();
        assert!(
            Conn::open(reference.port, &user(acc, &u), &u).is_some(),
            "a user of {key} connects"
        );
    }
    let list = rc.request("$SYS.REQ.CLAIMS.LIST", "", b"", 1);
    let mut want = ours.list();
    want.sort();
    let list = without_server(&list[0]);
    assert_eq!(list, format!("{{\"data\":{}}}", serde_json::to_string(&want).unwrap()));
    drop(rc);
    drop(reference);
    let _ = std::fs::remove_dir_all(&work);
}
