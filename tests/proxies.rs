//! Trusted proxies (`proxies { trusted }`, `proxy_sig`, `proxy_required`), compared with
//! the reference nats-server: the same config, the same CONNECTs (each proxy signature
//! made over the nonce that server sent), the same replies, `/connz` close reasons and
//! proxy keys, `/varz`, and a reload that removes a trusted key and makes a user
//! proxy-only. rnats runs with 2 shards on both reactors.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use base64::Engine;
use common::{bin, reference_server, Reactor, Server};
use std::time::Duration;

struct Keys {
    p1: nkeys::KeyPair,
    p2: nkeys::KeyPair,
    rogue: nkeys::KeyPair,
    nk: nkeys::KeyPair,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            p1: nkeys::KeyPair::new_user(),
            p2: nkeys::KeyPair::new_user(),
            rogue: nkeys::KeyPair::new_user(),
            nk: nkeys::KeyPair::new_user(),
        }
    }

    /// The proxies' names as they appear in outputs.
    fn name(&self, key: &str) -> &'static str {
        match key {
            k if k == self.p1.public_key() => "P1",
            k if k == self.p2.public_key() => "P2",
            _ => "?",
        }
    }
}

fn config(k: &Keys, trusted: &[&nkeys::KeyPair], direct_needs_proxy: bool) -> String {
    let trusted: Vec<String> = trusted.iter().map(|p| format!("{{key: {}}}", p.public_key())).collect();
    format!(
        "proxies {{ trusted: [{}] }}\n\
         authorization {{\n  users: [\n    {{user: direct, password: d, proxy_required: {direct_needs_proxy}}}\n    \
         {{user: proxied, password: p, proxy_required: true}}\n    {{nkey: {}, proxy_required: true}}\n  ]\n}}\n",
        trusted.join(", "),
        k.nk.public_key()
    )
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

fn nonce(info: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(info.trim_start_matches("INFO ").trim()).unwrap();
    v["nonce"].as_str().unwrap_or_default().to_string()
}

/// Who signs what in a CONNECT.
#[derive(Clone, Copy)]
enum Sig<'a> {
    None,
    By(&'a nkeys::KeyPair),
    /// Signed by the key, in standard base64 (padded): not accepted for proxies.
    StdBase64(&'a nkeys::KeyPair),
    Garbage,
}

fn proxy_sig(sig: Sig<'_>, nonce: &str) -> Option<String> {
    match sig {
        Sig::None => None,
        Sig::By(kp) => Some(b64(&kp.sign(nonce.as_bytes()).unwrap())),
        Sig::StdBase64(kp) => {
            Some(base64::engine::general_purpose::STANDARD.encode(kp.sign(nonce.as_bytes()).unwrap()))
        }
        Sig::Garbage => Some("!!not-base64!!".into()),
    }
}

/// A client on `srv` named `label`: CONNECT as `user` (or as the nkey user), with the
/// proxy signature `sig`; what came back within a short quiet time, and whether the server closed.
fn attempt(srv: &Server, k: &Keys, label: &str, user: &str, sig: Sig<'_>) -> (common::Raw, String) {
    let mut c = srv.raw();
    let n = nonce(&c.info);
    let mut o = serde_json::json!({"verbose": false, "pedantic": false, "headers": true, "name": label});
    if user == "nkey" {
        o["nkey"] = k.nk.public_key().into();
        o["sig"] = b64(&k.nk.sign(n.as_bytes()).unwrap()).into();
    } else {
        o["user"] = user.into();
        o["pass"] = (if user == "direct" { "d" } else { "p" }).into();
    }
    if let Some(s) = proxy_sig(sig, &n) {
        o["proxy_sig"] = s.into();
    }
    c.send_str(&format!("CONNECT {o}\r\nPING\r\n"));
    let out = no_pings(c.drain(Duration::from_millis(300)));
    (c, out)
}

/// Without the server's own PINGs (they come on a timer).
fn no_pings(out: String) -> String {
    out.replace("PING\r\n", "")
}

/// `/connz` entries as (name, reason, proxy) — the name is the client's CONNECT name.
fn connz(srv: &Server, k: &Keys, closed: bool) -> Vec<(String, String, String)> {
    let path = if closed {
        "/connz?state=closed&auth=1"
    } else {
        "/connz?auth=1"
    };
    let (_, body) = srv.http_get(path);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut out: Vec<(String, String, String)> = v["connections"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["proxy"]["key"]
                    .as_str()
                    .map(|p| k.name(p).to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Everything one server shows for the scenario.
#[derive(Debug, PartialEq)]
struct Outcome {
    attempts: Vec<(String, String)>,
    nonce_in_info: bool,
    open: Vec<(String, String, String)>,
    closed: Vec<(String, String, String)>,
    varz_proxies: serde_json::Value,
    after_reload: Vec<(String, String)>,
    open_after: Vec<(String, String, String)>,
    closed_after: Vec<(String, String, String)>,
    reload_logged: bool,
}

fn scenario(srv: &Server, k: &Keys, conf: &std::path::Path) -> Outcome {
    let cases: Vec<(&str, &str, Sig<'_>)> = vec![
        ("direct-no-proxy", "direct", Sig::None),
        ("proxied-no-proxy", "proxied", Sig::None),
        ("proxied-via-p1", "proxied", Sig::By(&k.p1)),
        ("proxied-via-p2", "proxied", Sig::By(&k.p2)),
        ("proxied-via-rogue", "proxied", Sig::By(&k.rogue)),
        ("direct-via-rogue", "direct", Sig::By(&k.rogue)),
        ("proxied-std-base64", "proxied", Sig::StdBase64(&k.p1)),
        ("proxied-garbage", "proxied", Sig::Garbage),
        ("nkey-no-proxy", "nkey", Sig::None),
        ("nkey-via-p1", "nkey", Sig::By(&k.p1)),
        ("direct-via-p1", "direct", Sig::By(&k.p1)),
    ];
    let mut kept = Vec::new();
    let mut attempts = Vec::new();
    let mut nonce_in_info = true;
    for (label, user, sig) in cases {
        // The CONNECT name tells the cases apart in /connz.
        let (c, out) = attempt(srv, k, label, user, sig);
        nonce_in_info &= !nonce(&c.info).is_empty();
        attempts.push((label.to_string(), out));
        kept.push((label, c));
    }
    std::thread::sleep(Duration::from_millis(200));
    let open = connz(srv, k, false);
    let closed = connz(srv, k, true);
    let (_, varz) = srv.http_get("/varz");
    let varz: serde_json::Value = serde_json::from_str(&varz).unwrap();
    let varz_proxies = varz["proxies"].clone();
    let varz_proxies = serde_json::json!(varz_proxies["trusted"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|t| k.name(t["key"].as_str().unwrap_or_default()))
        .collect::<Vec<_>>());

    // Reload: P1 is no longer trusted and `direct` must come through a proxy.
    std::fs::write(conf, config(k, &[&k.p2], true)).unwrap();
    srv.signal(libc::SIGHUP);
    let reload_logged = srv
        .wait_for_log("Reloaded: proxies trusted keys", Duration::from_secs(5))
        .is_ok()
        && srv.log_lines().iter().any(|l| {
            l.contains(&format!(
                "Reloaded: proxies trusted keys [\"{}\"] were removed",
                k.p1.public_key()
            ))
        });
    std::thread::sleep(Duration::from_millis(300));
    let mut after_reload = Vec::new();
    for (label, c) in kept.iter_mut() {
        // Writes to a closed connection may fail; what arrived is what counts.
        let _ = std::io::Write::write_all(&mut c.s, b"PING\r\n");
        after_reload.push((label.to_string(), no_pings(c.drain(Duration::from_millis(200)))));
    }
    let open_after = connz(srv, k, false);
    let closed_after = connz(srv, k, true);
    drop(kept);
    Outcome {
        attempts,
        nonce_in_info,
        open,
        closed,
        varz_proxies,
        after_reload,
        open_after,
        closed_after,
        reload_logged,
    }
}

fn run(r: Reactor) {
    let k = Keys::new();
    let dir = common::scratch_dir();
    let start = |program: &str, extra: &[&str], name: &str| {
        let conf = dir.join(name);
        std::fs::write(&conf, config(&k, &[&k.p1, &k.p2], false)).unwrap();
        let c = conf.to_str().unwrap().to_string();
        let mut args = vec!["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-c", &c];
        args.extend_from_slice(extra);
        (Server::start_cmd(program, &args), conf)
    };
    let (reference, ref_conf) = start(&reference_server(), &[], "ref.conf");
    let want = scenario(&reference, &k, &ref_conf);
    drop(reference);
    let (ours, our_conf) = start(bin(), &["--shards", "2", "--reactor", r.flag()], "ours.conf");
    let got = scenario(&ours, &k, &our_conf);
    assert_eq!(got, want);
    // The scenario shows what it should on the reference itself.
    assert!(want.nonce_in_info && want.reload_logged);
    assert!(want.closed.iter().any(|c| c.1 == "Proxy Required"));
    assert!(want.closed.iter().any(|c| c.1 == "Proxy Not Trusted"));
    assert!(want.open.iter().any(|c| c.2 == "P1"));
    assert!(want
        .closed_after
        .iter()
        .any(|c| c.1 == "Proxy Not Trusted" && c.2 == "P1"));
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(trusted_proxies_like_the_reference, |r| run(r));

/// Adding a `proxies` block on reload: the reference 2.14.0 crashes (a nil dereference
/// in its reload diff; COMPATIBILITY.md); rnats applies it like any other change.
fn proxies_added_on_reload(r: Reactor) {
    let k = Keys::new();
    let dir = common::scratch_dir();
    let conf = dir.join("add.conf");
    std::fs::write(
        &conf,
        "authorization { users: [ {user: proxied, password: p, proxy_required: true} ] }\n",
    )
    .unwrap();
    let c = conf.to_str().unwrap().to_string();
    let srv = Server::start(r, &["-m", "-1", "-c", &c, "--shards", "2"]);
    let (_, out) = attempt(&srv, &k, "before", "proxied", Sig::By(&k.p1));
    assert_eq!(out, "-ERR 'Authorization Violation'\r\n", "no proxies trusted yet");
    std::fs::write(&conf, config(&k, &[&k.p1], false)).unwrap();
    srv.signal(libc::SIGHUP);
    srv.wait_for_log(
        &format!("Reloaded: proxies trusted keys [\"{}\"] were added", k.p1.public_key()),
        Duration::from_secs(5),
    )
    .unwrap();
    srv.wait_for_log("Reloaded server configuration", Duration::from_secs(5))
        .unwrap();
    let (_kept, out) = attempt(&srv, &k, "after", "proxied", Sig::By(&k.p1));
    assert_eq!(out, "PONG\r\n");
    assert_eq!(
        connz(&srv, &k, false),
        [("after".to_string(), String::new(), "P1".to_string())]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

both_reactors!(proxies_can_be_added_on_reload, |r| proxies_added_on_reload(r));
