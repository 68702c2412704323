//! TPM-sealed JetStream keys (`--features tpm`) against the swtpm simulator: a key is
//! created and sealed on first use, unsealed to the same key afterwards (also after the
//! TPM restarts), and refused with the wrong password or once the PCR it is bound to
//! changes. Skipped (with a note) where swtpm is not installed.
#![cfg(feature = "tpm")]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use storage::crypto::tpm::TpmOptions;
use tss_esapi::handles::PcrHandle;
use tss_esapi::interface_types::algorithm::HashingAlgorithm;
use tss_esapi::interface_types::session_handles::AuthSession;
use tss_esapi::structures::{Digest, DigestValues};
use tss_esapi::tcti_ldr::TctiNameConf;

struct Swtpm {
    child: Child,
}

impl Drop for Swtpm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port_pair() -> u16 {
    loop {
        let p = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if p < 65000 && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

fn start_swtpm(state: &std::path::Path, port: u16) -> Swtpm {
    let child = Command::new("swtpm")
        .args(["socket", "--tpm2", "--tpmstate"])
        .arg(format!("dir={}", state.display()))
        .args(["--server", &format!("type=tcp,port={port},bindaddr=127.0.0.1")])
        .args(["--ctrl", &format!("type=tcp,port={},bindaddr=127.0.0.1", port + 1)])
        .args(["--flags", "not-need-init,startup-clear"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start swtpm");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "swtpm did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Swtpm { child }
}

fn extend_pcr16(tcti: &str) {
    let mut ctx = tss_esapi::Context::new(tcti.parse::<TctiNameConf>().unwrap()).unwrap();
    let mut vals = DigestValues::new();
    vals.set(HashingAlgorithm::Sha256, Digest::try_from(vec![0x42; 32]).unwrap());
    ctx.execute_with_session(Some(AuthSession::Password), |c| c.pcr_extend(PcrHandle::Pcr16, vals))
        .unwrap();
}

#[test]
fn sealed_key_life_cycle() {
    if Command::new("swtpm").arg("--version").output().is_err() {
        eprintln!("swtpm is not installed: TPM tests skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rnats-tpm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let port = free_port_pair();
    let tcti = format!("swtpm:host=127.0.0.1,port={port}");
    // The only test in this binary: setting the variable cannot race another test.
    std::env::set_var("TEST_TCTI", &tcti);
    let mut tpm = start_swtpm(&state, port);

    let keys_file = dir.join("keys").join("js.json");
    let mut o = TpmOptions::default();
    o.set("keys_file", &keys_file.to_string_lossy()).unwrap();
    o.set("encryption_password", "pw").unwrap();
    o.set("srk_password", "srk").unwrap();
    o.set("pcr", "16").unwrap();

    let k1 = o.load_key("").unwrap().expect("a key");
    assert!(k1.len() >= 32, "{k1}");
    let text = std::fs::read_to_string(&keys_file).unwrap();
    assert!(text.starts_with("{\"version\":1,\"private_key\":\""), "{text}");
    // Unsealed again: the same key.
    assert_eq!(o.load_key("").unwrap().as_deref(), Some(k1.as_str()));
    // The TPM restarts with its state: still the same key.
    drop(tpm);
    tpm = start_swtpm(&state, port);
    assert_eq!(o.load_key("").unwrap().as_deref(), Some(k1.as_str()));
    // Wrong object password: refused.
    let mut wrong = o.clone();
    wrong.encryption_password = "nope".to_string();
    let e = wrong.load_key("").unwrap_err();
    assert!(e.to_string().contains("unable to unseal"), "{e}");
    // A key and TPM options together: refused before touching the TPM.
    assert!(o.load_key("plain").is_err());
    // The PCR moves: the policy no longer holds.
    extend_pcr16(&tcti);
    let e = o.load_key("").unwrap_err();
    assert!(e.to_string().contains("unable to unseal"), "{e}");
    // A damaged keys file: a clear error.
    std::fs::write(&keys_file, "{\"version\":1}").unwrap();
    assert!(o.load_key("").is_err());
    drop(tpm);
    let _ = std::fs::remove_dir_all(&dir);
}
