//! TPM-sealed encryption keys (`jetstream { tpm { keys_file, encryption_password,
//! srk_password, pcr, cipher } }`).
//!
//! The options are parsed and checked exactly as the reference does (the key and the TPM
//! options are mutually exclusive, `pcr` defaults to 22). What happens then depends on the
//! build:
//!
//! - Without the `tpm` cargo feature (the default), [`TpmOptions::load_key`] refuses with
//!   the reference's own words on Linux, "TPM functionality is not supported on this
//!   platform": nats-server 2.14 implements TPM sealing on Windows only, so this is what
//!   the reference does here.
//! - With the `tpm` feature, the key is sealed and unsealed through tss-esapi as the
//!   reference does it on Windows (see `tpm_esapi`): an RSA-2048 storage root key
//!   (AES-128-CFB, SHA-256 name) regenerated under the owner hierarchy with
//!   `srk_password`, a random key sealed to it under a policy of the SHA-256 bank of PCR
//!   `pcr` plus `encryption_password`, and the sealed blobs kept in `keys_file` as JSON
//!   `{"version":1,"private_key":…,"public_key":…}`. The unsealed string is then used as
//!   `key`. It needs the tpm2-tss libraries (`libtss2-dev`) to build and a TPM (or
//!   `swtpm`, named by the `TPM2TOOLS_TCTI`/`TCTI`/`TEST_TCTI` variable) to run; its tests
//!   start `swtpm` and are skipped where it is not installed.

use crate::error::{Result, StoreError};

/// The PCR the reference uses when `pcr` is 0 or unset.
pub const DEFAULT_PCR: u32 = 22;

/// The error the reference gives on platforms without TPM support (and rnats without the
/// `tpm` feature).
pub const UNSUPPORTED: &str = "TPM functionality is not supported on this platform";

/// The reference's `JSTpmOpts`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TpmOptions {
    pub keys_file: String,
    pub encryption_password: String,
    pub srk_password: String,
    pub pcr: u32,
}

impl TpmOptions {
    /// Set one field from the `tpm` block by its config name (case-insensitive). `cipher`
    /// belongs to the enclosing settings and is not handled here. Unknown names are an
    /// error, as in the reference.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        match name.to_ascii_lowercase().as_str() {
            "keys_file" => self.keys_file = value.to_string(),
            "encryption_password" => self.encryption_password = value.to_string(),
            "srk_password" => self.srk_password = value.to_string(),
            "pcr" => {
                self.pcr = value
                    .parse()
                    .map_err(|_| StoreError::Config(format!("tpm pcr must be a number, got {value:?}")))?
            }
            _ => return Err(StoreError::Config(format!("unknown field {name:?}"))),
        }
        Ok(())
    }

    /// The PCR in effect (22 when unset).
    pub fn effective_pcr(&self) -> u32 {
        if self.pcr == 0 {
            DEFAULT_PCR
        } else {
            self.pcr
        }
    }

    /// Check the options against the plain `key` setting, as the reference does at start.
    pub fn check(&self, key: &str) -> Result<()> {
        if !key.is_empty() && !self.keys_file.is_empty() {
            return Err(StoreError::Config(
                "JetStream encryption key may not be used with TPM options".to_string(),
            ));
        }
        Ok(())
    }

    /// The encryption key the TPM unseals: refused on this platform, as the reference
    /// refuses it (see the module docs). `Ok(None)` when no TPM options are set.
    pub fn load_key(&self, key: &str) -> Result<Option<String>> {
        self.check(key)?;
        if !key.is_empty() || self.keys_file.is_empty() {
            return Ok(None);
        }
        #[cfg(feature = "tpm")]
        {
            super::tpm_esapi::load_or_create(self).map(Some)
        }
        #[cfg(not(feature = "tpm"))]
        {
            Err(StoreError::Encryption(UNSUPPORTED.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_refusal() {
        let mut o = TpmOptions::default();
        o.set("Keys_File", "/tmp/k").unwrap();
        o.set("pcr", "0").unwrap();
        assert!(o.set("bogus", "1").is_err());
        assert!(o.set("pcr", "x").is_err());
        assert_eq!(o.effective_pcr(), 22);
        #[cfg(not(feature = "tpm"))]
        assert!(matches!(o.load_key(""), Err(StoreError::Encryption(m)) if m == UNSUPPORTED));
        assert!(matches!(o.load_key("k"), Err(StoreError::Config(_))));
        assert_eq!(TpmOptions::default().load_key("").unwrap(), None);
        assert_eq!(TpmOptions::default().load_key("k").unwrap(), None);
    }
}
