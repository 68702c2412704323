//! The startup checks of the security settings that nats-server makes in
//! `validateOptions` (not with `-t`): operators against accounts, users, trusted keys,
//! the system account and the asserted server version; `no_auth_user` against the users.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::accounts::atoi;
use super::users::is_public_key;
use crate::auth::config::{ResolverConfig, SecurityConfig};
use nkeys::KeyPairType;

/// The server version operators' `assert_server_version` is compared with.
const SERVER_VERSION: (i64, i64, i64) = (2, 14, 0);

fn parse_version(v: &str) -> Result<(i64, i64, i64), String> {
    if v.is_empty() {
        return Ok((0, 0, 0));
    }
    let parts: Vec<&str> = v.split('.').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err("asserted server version must be of the form <major>.<minor>.<update>".into());
    };
    let n = |s: &str| atoi(s).map_err(|_| format!("asserted server version cant parse {s} to int"));
    let (a, b, c) = (n(a)?, n(b)?, n(c)?);
    if a < 0 || b < 0 || c < 0 {
        return Err(format!("asserted server version can'b contain negative values: {v}"));
    }
    Ok((a, b, c))
}

fn trusted_operators(s: &SecurityConfig) -> Result<(), String> {
    if s.operators.is_empty() {
        if !s.default_sentinel.is_empty() {
            return Err("default sentinel requires operators and accounts".into());
        }
        return Ok(());
    }
    if !s.default_sentinel.is_empty() {
        default_sentinel(&s.default_sentinel)?;
    }
    let Some(resolver) = &s.resolver else {
        return Err("operators require an account resolver to be configured".into());
    };
    if !s.accounts.is_empty() || !s.global_mappings.is_empty() {
        return Err("operators do not allow Accounts to be configured directly".into());
    }
    if !s.users.is_empty() || !s.nkeys.is_empty() {
        return Err("operators do not allow users to be configured directly".into());
    }
    if !s.trusted_keys.is_empty() {
        return Err("conflicting options for 'TrustedKeys' and 'TrustedOperators'".into());
    }
    if !s.system_account.is_empty() {
        let non_empty = s.operators.iter().any(|o| !o.system_account.is_empty());
        let found = s.operators.iter().any(|o| o.system_account == s.system_account);
        if non_empty && !found {
            return Err("system_account in config and operator JWT must be identical".into());
        }
    } else if s.operators.first().is_some_and(|o| o.system_account.is_empty())
        && matches!(resolver, ResolverConfig::Full(_) | ResolverConfig::Cache(_))
    {
        return Err(
            "using nats based account resolver - the system account needs to be specified in configuration or the operator jwt"
                .into(),
        );
    }
    let (smaj, smin, supd) = SERVER_VERSION;
    for op in &s.operators {
        let (maj, min, upd) = parse_version(&op.assert_server_version).map_err(|err| {
            format!(
                "operator {} expects version {} got error instead: {err}",
                op.subject, op.assert_server_version
            )
        })?;
        if maj > smaj {
            return Err(format!(
                "operator {} expected major version {maj} > server major version {smaj}",
                op.subject
            ));
        }
        if smaj > maj {
            continue;
        }
        if min > smin {
            return Err(format!(
                "operator {} expected minor version {min} > server minor version {smin}",
                op.subject
            ));
        }
        if smin > min {
            continue;
        }
        if upd > supd {
            return Err(format!(
                "operator {} expected update version {upd} > server update version {supd}",
                op.subject
            ));
        }
    }
    let keys = s.operators.iter().flat_map(|op| {
        (!op.strict_signing_key_usage)
            .then_some(&op.subject)
            .into_iter()
            .chain(&op.signing_keys)
    });
    for key in keys {
        if !is_public_key(key, KeyPairType::Operator) {
            return Err(format!(
                "trusted Keys {key:?} are required to be a valid public operator nkey"
            ));
        }
    }
    Ok(())
}

/// The default sentinel must be a bearer user JWT (or look like a scoped user: an
/// issuer account and no permissions of its own).
fn default_sentinel(token: &str) -> Result<(), String> {
    let claims = super::jwt::decode(token)
        .ok()
        .filter(|c| c.kind == "user")
        .ok_or("default sentinel JWT not valid")?;
    let nats = claims.json.get("nats");
    let field = |k: &str| nats.and_then(|n| n.get(k));
    let bearer = field("bearer_token")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let issuer_account = field("issuer_account")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let empty = |k: &str| {
        field(k).is_none_or(|p| {
            ["allow", "deny"].iter().all(|a| {
                p.get(a)
                    .and_then(serde_json::Value::as_array)
                    .is_none_or(|v| v.is_empty())
            })
        })
    };
    let no_perms = empty("pub") && empty("sub") && field("resp").is_none_or(serde_json::Value::is_null);
    // A scoped user is resolved (and checked) at run time.
    let scoped = !issuer_account.is_empty() && no_perms;
    if !bearer && !scoped {
        return Err("default sentinel must be a bearer token".into());
    }
    Ok(())
}

fn no_auth_user(s: &SecurityConfig) -> Result<(), String> {
    let name = &s.no_auth_user;
    if name.is_empty() {
        return Ok(());
    }
    if !s.operators.is_empty() {
        return Err("no_auth_user not compatible with Trusted Operator".into());
    }
    if s.users.is_empty() && s.nkeys.is_empty() {
        return Err(format!(
            "no_auth_user: \"{name}\" present, but users/nkeys are not defined"
        ));
    }
    if s.users.iter().any(|u| &u.username == name) || s.nkeys.iter().any(|u| &u.nkey == name) {
        return Ok(());
    }
    Err(format!(
        "no_auth_user: \"{name}\" not present as user or nkey in authorization block or account configuration"
    ))
}

/// The checks, in the reference's order; the error is its text.
pub fn validate_security(s: &SecurityConfig) -> Result<(), String> {
    trusted_operators(s)?;
    no_auth_user(s)?;
    for k in s.proxies.iter().flatten() {
        if !super::proxies::valid_key(k) {
            return Err(format!(
                "proxy trusted key {} is invalid",
                crate::proto::reply::go_quote(k.as_bytes())
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::auth::config::{OperatorJwt, User};

    #[test]
    fn startup_checks() {
        let mut s = SecurityConfig {
            no_auth_user: "x".into(),
            ..SecurityConfig::default()
        };
        assert_eq!(
            validate_security(&s).unwrap_err(),
            "no_auth_user: \"x\" present, but users/nkeys are not defined"
        );
        s.users.push(User {
            username: "y".into(),
            ..User::default()
        });
        assert!(validate_security(&s)
            .unwrap_err()
            .contains("not present as user or nkey"));
        s.users.push(User {
            username: "x".into(),
            ..User::default()
        });
        assert_eq!(validate_security(&s), Ok(()));
        let op = nkeys::KeyPair::new_operator().public_key();
        let s = SecurityConfig {
            operators: vec![OperatorJwt {
                subject: op.clone(),
                assert_server_version: "2.15.0".into(),
                ..OperatorJwt::default()
            }],
            resolver: Some(ResolverConfig::Memory),
            ..SecurityConfig::default()
        };
        assert_eq!(
            validate_security(&s).unwrap_err(),
            format!("operator {op} expected minor version 15 > server minor version 14")
        );
        let s = SecurityConfig {
            default_sentinel: "x".into(),
            ..SecurityConfig::default()
        };
        assert_eq!(
            validate_security(&s).unwrap_err(),
            "default sentinel requires operators and accounts"
        );
        assert_eq!(
            parse_version("1.2"),
            Err("asserted server version must be of the form <major>.<minor>.<update>".into())
        );
    }
}
