//! Account signing keys: plain account keys, or scoped keys (`kind: "user_scope"`) whose
//! template replaces the permissions and limits of every user they sign.
//!
//! In JSON the set is an array sorted by key, each entry either the key string or the scope
//! object; entries of other JSON types are ignored, like jwt v2 does.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::JwtError;
use super::json::go_quote;
use super::keys::is_account_key;
use super::user::{UserClaims, UserPermissionLimits};
use super::validation::ValidationResults;

/// The only scope kind (`ScopeType`).
pub const USER_SCOPE: &str = "user_scope";

/// A scoped signing key: users it signs get `template` as their permissions and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserScope {
    /// Always `user_scope`.
    #[serde(serialize_with = "write_kind", deserialize_with = "read_kind")]
    pub kind: (),
    pub key: String,
    pub role: String,
    /// Missing `subs`/`data`/`payload` read as `-1`, as `NewUserScope` starts them.
    #[serde(deserialize_with = "read_template")]
    pub template: UserPermissionLimits,
    pub description: String,
}

impl Default for UserScope {
    fn default() -> Self {
        UserScope {
            kind: (),
            key: String::new(),
            role: String::new(),
            template: UserPermissionLimits::unlimited(),
            description: String::new(),
        }
    }
}

fn write_kind<S: Serializer>(_: &(), s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(USER_SCOPE)
}

fn read_kind<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    let s = String::deserialize(d)?;
    if s == USER_SCOPE {
        Ok(())
    } else {
        Err(de::Error::custom(format!("unknown scope type {}", go_quote(&s))))
    }
}

fn read_template<'de, D: Deserializer<'de>>(d: D) -> Result<UserPermissionLimits, D::Error> {
    let mut v = Value::deserialize(d)?;
    if let Value::Object(m) = &mut v {
        for k in ["subs", "data", "payload"] {
            m.entry(k).or_insert(Value::from(-1));
        }
    }
    UserPermissionLimits::deserialize(v).map_err(de::Error::custom)
}

impl UserScope {
    /// A scope for the account signing key `key` with an unlimited, empty template.
    pub fn new(key: impl Into<String>) -> Self {
        UserScope {
            key: key.into(),
            ..Self::default()
        }
    }

    /// jwt v2's `ValidateScopedSigner`: the user must be issued by this key and carry no
    /// permissions or limits of its own.
    pub fn validate_scoped_signer(&self, user: &UserClaims) -> Result<(), JwtError> {
        if user.claims.issuer != self.key {
            return Err(JwtError::Invalid("issuer not the scoped signer".into()));
        }
        if !user.has_empty_permissions() {
            return Err(JwtError::Invalid(
                "scoped users require no permissions or limits set".into(),
            ));
        }
        Ok(())
    }
}

/// Signing keys by public key; `None` for a plain key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SigningKeys(pub BTreeMap<String, Option<UserScope>>);

impl SigningKeys {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// `Some(scope)` for a known key (`None` inside for a plain key), `None` if unknown.
    pub fn get(&self, key: &str) -> Option<Option<&UserScope>> {
        self.0.get(key).map(Option::as_ref)
    }

    /// Adds plain keys.
    pub fn add(&mut self, key: impl Into<String>) {
        self.0.insert(key.into(), None);
    }

    /// Adds a scoped key under its own key.
    pub fn add_scope(&mut self, scope: UserScope) {
        self.0.insert(scope.key.clone(), Some(scope));
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub(crate) fn validate(&self, vr: &mut ValidationResults) {
        for (k, v) in &self.0 {
            match v {
                Some(scope) if !is_account_key(&scope.key) => {
                    vr.add_error(format!("{} is not an account public key", scope.key))
                }
                None if !is_account_key(k) => {
                    vr.add_error(format!("{} is not a valid account signing key", go_quote(k)))
                }
                _ => {}
            }
        }
    }
}

impl Serialize for SigningKeys {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            match v {
                Some(scope) => seq.serialize_element(scope)?,
                None => seq.serialize_element(k)?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for SigningKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<Value>::deserialize(d)?;
        let mut keys = SigningKeys::default();
        for item in items {
            match item {
                Value::String(k) => keys.add(k),
                Value::Object(m) => {
                    if m.get("kind").and_then(Value::as_str) != Some(USER_SCOPE) {
                        let ty = match m.get("type") {
                            Some(Value::String(t)) => go_quote(t),
                            _ => "%!q(<nil>)".to_string(),
                        };
                        return Err(de::Error::custom(format!("unknown signing key scope {ty}")));
                    }
                    let scope = UserScope::deserialize(Value::Object(m)).map_err(de::Error::custom)?;
                    keys.add_scope(scope);
                }
                _ => {}
            }
        }
        Ok(keys)
    }
}
