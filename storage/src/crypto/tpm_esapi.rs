//! TPM key sealing through tss-esapi (the `tpm` feature), following what nats-server does
//! on Windows: an RSA-2048 storage root key regenerated under the owner hierarchy from
//! its fixed template with `srk_password`; the JetStream key sealed as a keyed-hash object
//! under a policy of PCR `pcr` (SHA-256 bank) plus `encryption_password`; the blobs kept in
//! `keys_file` as `{"version":1,"private_key":…,"public_key":…}`, each value base64 of the
//! base64 of the blob (the private area, and the marshalled `TPMT_PUBLIC`), as there.
//!
//! The TPM is reached through the TCTI named by `TPM2TOOLS_TCTI`, `TCTI` or `TEST_TCTI`
//! (e.g. `swtpm:host=127.0.0.1,port=2321`), else the kernel's resource manager
//! (`device:/dev/tpmrm0`).

use super::tpm::TpmOptions;
use crate::error::{Result, StoreError};
use rand::RngCore;
use std::str::FromStr;
use tss_esapi::attributes::ObjectAttributesBuilder;
use tss_esapi::constants::SessionType;
use tss_esapi::handles::KeyHandle;
use tss_esapi::interface_types::algorithm::{HashingAlgorithm, PublicAlgorithm};
use tss_esapi::interface_types::key_bits::RsaKeyBits;
use tss_esapi::interface_types::resource_handles::Hierarchy;
use tss_esapi::interface_types::session_handles::{AuthSession, PolicySession};
use tss_esapi::structures::{
    Auth, Digest, KeyedHashScheme, PcrSelectionListBuilder, PcrSlot, Private, Public, PublicBuilder, PublicKeyRsa,
    PublicKeyedHashParameters, PublicRsaParametersBuilder, RsaExponent, SensitiveData, SymmetricDefinition,
    SymmetricDefinitionObject,
};
use tss_esapi::tcti_ldr::TctiNameConf;
use tss_esapi::traits::{Marshall, UnMarshall};
use tss_esapi::Context;

/// The keys file's version (the reference's `JsKeyTPMVersion`).
const KEYS_VERSION: u64 = 1;

fn tpm_err(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Encryption(format!("{what}: {e}"))
}

fn context() -> Result<Context> {
    let tcti = TctiNameConf::from_environment_variable()
        .or_else(|_| TctiNameConf::from_str("device:/dev/tpmrm0"))
        .map_err(|e| tpm_err("could not open the TPM", e))?;
    Context::new(tcti).map_err(|e| tpm_err("could not open the TPM", e))
}

fn auth(s: &str) -> Result<Auth> {
    Auth::try_from(s.as_bytes().to_vec()).map_err(|e| tpm_err("bad password", e))
}

/// The storage root key from the reference's template (deterministic for a TPM).
fn regenerate_srk(ctx: &mut Context, srk_password: &str) -> Result<KeyHandle> {
    let attrs = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_sensitive_data_origin(true)
        .with_user_with_auth(true)
        .with_restricted(true)
        .with_decrypt(true)
        .with_no_da(true)
        .build()
        .map_err(|e| tpm_err("SRK attributes", e))?;
    let params = PublicRsaParametersBuilder::new_restricted_decryption_key(
        SymmetricDefinitionObject::AES_128_CFB,
        RsaKeyBits::Rsa2048,
        RsaExponent::default(),
    )
    .build()
    .map_err(|e| tpm_err("SRK parameters", e))?;
    let public = PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::Rsa)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attrs)
        .with_rsa_parameters(params)
        .with_rsa_unique_identifier(PublicKeyRsa::new_empty_with_size(RsaKeyBits::Rsa2048))
        .build()
        .map_err(|e| tpm_err("SRK template", e))?;
    let srk_auth = auth(srk_password)?;
    let r = ctx
        .execute_with_session(Some(AuthSession::Password), |c| {
            c.create_primary(Hierarchy::Owner, public, Some(srk_auth.clone()), None, None, None)
        })
        .map_err(|e| tpm_err("unable to regenerate SRK from the TPM", e))?;
    ctx.tr_set_auth(r.key_handle.into(), srk_auth)
        .map_err(|e| tpm_err("SRK auth", e))?;
    Ok(r.key_handle)
}

/// A policy session bound to PCR `pcr` and the object's password; returns it and its digest.
fn pcr_password_session(ctx: &mut Context, pcr: u32) -> Result<(PolicySession, Digest)> {
    let slot = PcrSlot::try_from(1u32 << pcr).map_err(|e| tpm_err("bad pcr", e))?;
    let session = ctx
        .execute_without_session(|c| {
            c.start_auth_session(
                None,
                None,
                None,
                SessionType::Policy,
                SymmetricDefinition::Null,
                HashingAlgorithm::Sha256,
            )
        })
        .map_err(|e| tpm_err("unable to start session", e))?
        .ok_or_else(|| tpm_err("unable to start session", "no session"))?;
    let policy = PolicySession::try_from(session).map_err(|e| tpm_err("policy session", e))?;
    let sel = PcrSelectionListBuilder::new()
        .with_selection(HashingAlgorithm::Sha256, &[slot])
        .build()
        .map_err(|e| tpm_err("pcr selection", e))?;
    ctx.execute_without_session(|c| {
        c.policy_pcr(policy, Digest::default(), sel)?;
        c.policy_password(policy)?;
        c.policy_get_digest(policy)
    })
    .map(|d| (policy, d))
    .map_err(|e| tpm_err("unable to bind PCRs and password to auth policy", e))
}

fn flush(ctx: &mut Context, p: PolicySession) {
    let h = tss_esapi::handles::SessionHandle::from(p);
    let _ = ctx.flush_context(h.into());
}

/// Standard base64 with padding.
fn b64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(c) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unb64(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let body = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.as_bytes().chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c)? << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

/// The string value of `"field":"…"` in a flat JSON object (the keys file).
fn json_str<'a>(json: &'a str, field: &str) -> Option<&'a str> {
    let at = json.find(&format!("\"{field}\""))?;
    let rest = json
        .get(at + field.len() + 2..)?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let rest = rest.strip_prefix('"')?;
    rest.get(..rest.find('"')?)
}

fn json_num(json: &str, field: &str) -> Option<u64> {
    let at = json.find(&format!("\"{field}\""))?;
    let rest = json
        .get(at + field.len() + 2..)?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest.get(..end)?.parse().ok()
}

fn read_keys_file(path: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let bad = |what: &str| tpm_err(&format!("unable to unmarshal TPM file keys JSON from {path}"), what);
    if json_num(&text, "version") != Some(KEYS_VERSION) {
        return Err(bad("unsupported version"));
    }
    let blob = |field: &str| -> Result<Vec<u8>> {
        let outer = json_str(&text, field).ok_or_else(|| bad(field))?;
        let inner = unb64(outer).ok_or_else(|| bad(field))?;
        let inner = String::from_utf8(inner).map_err(|_| bad(field))?;
        unb64(&inner).ok_or_else(|| bad(field))
    };
    Ok(Some((blob("private_key")?, blob("public_key")?)))
}

fn write_keys_file(path: &str, private: &[u8], public: &[u8]) -> Result<()> {
    if let Some(dir) = std::path::Path::new(path).parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let json = format!(
        "{{\"version\":{KEYS_VERSION},\"private_key\":\"{}\",\"public_key\":\"{}\"}}",
        b64(b64(private).as_bytes()),
        b64(b64(public).as_bytes())
    );
    std::fs::write(path, json)?;
    Ok(())
}

/// A new random key in the shape of the reference's (an nkeys-like seed string would do
/// too: only its bytes matter).
fn new_key() -> String {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b64(&b).trim_end_matches('=').replace(['+', '/'], "x")
}

/// Unseal the key in `keys_file`, or create, seal and store one when the file is missing.
pub fn load_or_create(o: &TpmOptions) -> Result<String> {
    let pcr = o.effective_pcr();
    if pcr > 23 {
        return Err(StoreError::Config(format!("tpm pcr {pcr} is out of range (0-23)")));
    }
    let mut ctx = context()?;
    let srk = regenerate_srk(&mut ctx, &o.srk_password)?;
    let result = match read_keys_file(&o.keys_file)? {
        None => create(&mut ctx, srk, o, pcr),
        Some((private, public)) => unseal(&mut ctx, srk, o, pcr, private, public),
    };
    let _ = ctx.flush_context(srk.into());
    result
}

fn create(ctx: &mut Context, srk: KeyHandle, o: &TpmOptions, pcr: u32) -> Result<String> {
    let (session, policy) = pcr_password_session(ctx, pcr)?;
    flush(ctx, session);
    let attrs = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .build()
        .map_err(|e| tpm_err("seal attributes", e))?;
    let public = PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::KeyedHash)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attrs)
        .with_auth_policy(policy)
        .with_keyed_hash_parameters(PublicKeyedHashParameters::new(KeyedHashScheme::Null))
        .with_keyed_hash_unique_identifier(Default::default())
        .build()
        .map_err(|e| tpm_err("seal template", e))?;
    let key = new_key();
    let data = SensitiveData::try_from(key.as_bytes().to_vec()).map_err(|e| tpm_err("seal data", e))?;
    let object_auth = auth(&o.encryption_password)?;
    let r = ctx
        .execute_with_session(Some(AuthSession::Password), |c| {
            c.create(srk, public, Some(object_auth), Some(data), None, None)
        })
        .map_err(|e| tpm_err("unable to seal data", e))?;
    let public = r.out_public.marshall().map_err(|e| tpm_err("public area", e))?;
    write_keys_file(&o.keys_file, r.out_private.value(), &public)?;
    Ok(key)
}

fn unseal(
    ctx: &mut Context,
    srk: KeyHandle,
    o: &TpmOptions,
    pcr: u32,
    private: Vec<u8>,
    public: Vec<u8>,
) -> Result<String> {
    let private = Private::try_from(private).map_err(|e| tpm_err("unable to load data", e))?;
    let public = Public::unmarshall(&public).map_err(|e| tpm_err("unable to load data", e))?;
    let object = ctx
        .execute_with_session(Some(AuthSession::Password), |c| c.load(srk, private, public))
        .map_err(|e| tpm_err("unable to load data", e))?;
    let result = (|| {
        ctx.tr_set_auth(object.into(), auth(&o.encryption_password)?)
            .map_err(|e| tpm_err("object auth", e))?;
        let (session, _) = pcr_password_session(ctx, pcr)?;
        let r = ctx.execute_with_session(Some(session.into()), |c| c.unseal(object.into()));
        flush(ctx, session);
        let data = r.map_err(|e| tpm_err("unable to unseal key from the TPM", e))?;
        String::from_utf8(data.value().to_vec()).map_err(|_| tpm_err("unable to unseal key from the TPM", "not text"))
    })();
    let _ = ctx.flush_context(object.into());
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_file_codec() {
        let dir = std::env::temp_dir().join(format!("rnats-tpm-keys-{}", std::process::id()));
        let path = dir.join("keys.json");
        let p = path.to_string_lossy().into_owned();
        write_keys_file(&p, &[1, 2, 3, 250], &[9; 70]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("{\"version\":1,\"private_key\":\""), "{text}");
        assert_eq!(read_keys_file(&p).unwrap(), Some((vec![1, 2, 3, 250], vec![9; 70])));
        std::fs::write(&path, "{\"version\":2}").unwrap();
        assert!(read_keys_file(&p).is_err());
        std::fs::write(&path, "{\"version\":1,\"private_key\":\"!!\",\"public_key\":\"\"}").unwrap();
        assert!(read_keys_file(&p).is_err());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(read_keys_file(&p).unwrap(), None);
        assert_eq!(unb64(&b64(b"hello world")).unwrap(), b"hello world");
    }
}
