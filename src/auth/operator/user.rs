//! One user JWT against its account's JWT: the issuer (the account or one of its signing
//! keys, with a scoped key's template applied), bearer tokens, the nonce signature,
//! revocations, source networks and connect times; the identity the connection gets
//! (permissions, limits, expiry), in nats-server's order and with its log texts.

use crate::auth::jwt::{self, AccountClaims, TemplateAccount, UserClaims};
use crate::auth::users::verify_nonce_signature;
use crate::core::accounts::AccountId;
use crate::core::auth::{ConnType, Denied, Identity, UserLimits};
use crate::core::perms::{PermSpec, ResponsePerm, SubjectPerm};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

fn list(v: &[String]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| v.to_vec())
}

/// nats-server's `buildPermissionsFromJwt`: nothing when nothing is set.
pub fn perm_spec(p: &jwt::types::Permissions) -> Option<PermSpec> {
    let side = |x: &jwt::types::Permission| {
        (!x.allow.is_empty() || !x.deny.is_empty()).then(|| SubjectPerm {
            allow: list(&x.allow),
            deny: x.deny.clone(),
        })
    };
    let publish = side(&p.publish);
    let subscribe = side(&p.subscribe);
    let response = p.response.as_ref().map(|r| ResponsePerm {
        max: r.max_msgs,
        expires: Duration::from_nanos(r.expires.max(0) as u64),
    });
    if publish.is_none() && subscribe.is_none() && response.is_none() {
        return None;
    }
    Some(
        PermSpec {
            publish,
            subscribe,
            response,
        }
        .normalized(),
    )
}

fn conn_type_name(t: ConnType) -> &'static str {
    t.as_str()
}

/// Allowed connection types of the claims: unknown names are ignored, but a list of
/// only unknown names allows nothing.
fn type_allowed(list: &[String], t: ConnType) -> bool {
    if list.is_empty() {
        return true;
    }
    const KNOWN: [&str; 7] = [
        "STANDARD",
        "WEBSOCKET",
        "MQTT",
        "MQTT_WS",
        "LEAFNODE",
        "LEAFNODE_WS",
        "IN_PROCESS",
    ];
    let upper: Vec<String> = list.iter().map(|s| s.to_ascii_uppercase()).collect();
    if !upper.iter().any(|u| KNOWN.contains(&u.as_str())) {
        return false;
    }
    upper.iter().any(|u| u == conn_type_name(t))
}

/// Is `ip` inside one of the user's source networks?
fn source_allowed(src: &[String], peer: SocketAddr) -> bool {
    if src.is_empty() {
        return true;
    }
    let ip = peer.ip();
    src.iter()
        .any(|c| jwt::validation::parse_cidr(c).is_some_and(|net| jwt::validation::cidr_contains(net, ip)))
}

/// Seconds of the day now, in the zone the claims name (empty: the server's local time).
fn clock_now(locale: &str) -> Option<u32> {
    let now = SystemTime::now();
    let utc = match locale {
        "" | "Local" => false,
        "UTC" | "Etc/UTC" | "GMT" => true,
        _ => return None,
    };
    let p = crate::proto::gotime::day_seconds(now, utc);
    Some(p)
}

/// Within one of the connect-time windows? Returns how long until the window closes.
fn times_allow(times: &[jwt::types::TimeRange], locale: &str) -> Result<Option<Duration>, &'static str> {
    if times.is_empty() {
        return Ok(None);
    }
    let Some(now) = clock_now(locale) else {
        return Err("Outside connect times");
    };
    let mut best: Option<u32> = None;
    for r in times {
        let (Some(start), Some(end)) = (
            jwt::validation::parse_clock(&r.start),
            jwt::validation::parse_clock(&r.end),
        ) else {
            return Err("Outside connect times");
        };
        let left = if start < end {
            (start < now && now < end).then(|| end - now)
        } else if start > end {
            // Crosses midnight.
            if now < end {
                Some(end - now)
            } else if start < now {
                Some(86_400 - now + end)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(l) = left {
            best = Some(best.map_or(l, |b| b.max(l)));
        }
    }
    match best {
        Some(l) => Ok(Some(Duration::from_secs(u64::from(l)))),
        None => Err("Outside connect times"),
    }
}

/// The identity of `user` in `account` (id `id`), or why not.
#[allow(clippy::too_many_arguments)]
pub fn check(
    user: &UserClaims,
    token: &str,
    account: &AccountClaims,
    id: AccountId,
    nonce: &str,
    sig: &str,
    peer: SocketAddr,
    conn_type: ConnType,
) -> Result<Identity, Denied> {
    let now = super::accounts::unix_now();
    let mut limits = user.nats.limits.clone();
    // The issuer: the account itself or one of its signing keys.
    match account.nats.signing_keys.get(&user.claims.issuer) {
        None if user.claims.issuer != account.claims.subject => {
            return Err(Denied::because("User JWT issuer is not known"));
        }
        Some(Some(scope)) => {
            scope
                .validate_scoped_signer(user)
                .map_err(|e| Denied::because(format!("User JWT is not valid: {e}")))?;
            limits = jwt::apply_user_template(
                &scope.template,
                user,
                TemplateAccount {
                    name: &account.claims.name,
                    tags: &account.nats.generic.tags,
                },
            )
            .map_err(|_| Denied::because("User JWT generated invalid permissions"))?;
        }
        _ => {}
    }
    if account.claims.expires != 0 && account.claims.expires <= now as i64 {
        return Err(Denied::because("Account JWT has expired"));
    }
    if limits.bearer_token && account.nats.limits.account.disallow_bearer {
        return Err(Denied::because("Account does not allow bearer tokens"));
    }
    if !type_allowed(&limits.allowed_connection_types, conn_type) {
        return Err(Denied::because("Connection type not allowed"));
    }
    if !limits.bearer_token {
        verify_nonce_signature(&user.claims.subject, nonce, sig).map_err(Denied::because)?;
    }
    if account.is_user_revoked(user) {
        return Err(Denied::because("User authentication revoked"));
    }
    if !source_allowed(&limits.limits.user.src, peer) {
        return Err(Denied::because(format!("Bad src Ip {}", peer.ip())));
    }
    let window = times_allow(&limits.limits.user.times, &limits.limits.user.locale).map_err(Denied::because)?;
    let mut permissions = perm_spec(&limits.permissions);
    if permissions.is_none() {
        permissions = perm_spec(&account.nats.default_permissions);
    }
    let mut expires =
        (user.claims.expires > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs(user.claims.expires as u64));
    if let Some(w) = window {
        let end = SystemTime::now() + w;
        expires = Some(expires.map_or(end, |e| e.min(end)));
    }
    Ok(Identity {
        account: id,
        user: user.claims.subject.clone(),
        permissions,
        limits: UserLimits {
            max_subscriptions: limits.limits.nats.subs,
            max_payload: limits.limits.nats.payload,
            max_data: limits.limits.nats.data,
        },
        expires,
        name_tag: user.claims.name.clone(),
        tags: user.nats.generic.tags.clone(),
        issuer_key: if user.nats.issuer_account.is_empty() {
            String::new()
        } else {
            user.claims.issuer.clone()
        },
        jwt: Some(token.to_string()),
    })
}
