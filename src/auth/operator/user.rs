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

/// The zone the claims name, as Go's `time.LoadLocation` finds it: empty or `Local` is
/// the server's local zone (`TZ`, `/etc/localtime`), `UTC` is UTC, anything else comes
/// from the system's zoneinfo. `None` when there is no such zone.
fn zone(locale: &str) -> Option<jiff::tz::TimeZone> {
    match locale {
        "" | "Local" => Some(jiff::tz::TimeZone::system()),
        "UTC" => Some(jiff::tz::TimeZone::UTC),
        name if jwt::validation::known_time_zone(name) => jiff::tz::db().get(name).ok(),
        _ => None,
    }
}

/// Within one of the connect-time windows? Returns how long until the window closes.
fn times_allow(times: &[jwt::types::TimeRange], locale: &str) -> Result<Option<Duration>, &'static str> {
    times_allow_at(times, locale, jiff::Timestamp::now())
}

/// [`times_allow`] at `now` (nats-server's `validateTimesAt`): each window is placed on
/// today's date in the zone; one whose start is after its end crosses midnight.
fn times_allow_at(
    times: &[jwt::types::TimeRange],
    locale: &str,
    now: jiff::Timestamp,
) -> Result<Option<Duration>, &'static str> {
    const OUTSIDE: &str = "Outside connect times";
    if times.is_empty() {
        return Ok(None);
    }
    let tz = zone(locale).ok_or(OUTSIDE)?;
    let today = now.to_zoned(tz.clone()).date();
    let at = |clock: u32, date: jiff::civil::Date| -> Option<jiff::Timestamp> {
        let (h, m, s) = (clock / 3600, clock / 60 % 60, clock % 60);
        let t = jiff::civil::Time::new(h as i8, m as i8, s as i8, 0).ok()?;
        date.to_datetime(t).to_zoned(tz.clone()).ok().map(|z| z.timestamp())
    };
    let mut best: Option<jiff::SignedDuration> = None;
    for r in times {
        let (Some(s), Some(e)) = (
            jwt::validation::parse_clock(&r.start),
            jwt::validation::parse_clock(&r.end),
        ) else {
            return Err(OUTSIDE);
        };
        let (Some(start), Some(end)) = (at(s, today), at(e, today)) else {
            return Err(OUTSIDE);
        };
        let left = if start < now && now < end {
            Some(end.duration_since(now))
        } else if start > end {
            // Crosses midnight: after it (22:00-06:00 at 05:00), or before it (at 23:30).
            if now < end {
                Some(end.duration_since(now))
            } else {
                let tomorrow = today.tomorrow().ok().and_then(|d| at(e, d));
                tomorrow
                    .filter(|t| start < now && now < *t)
                    .map(|t| t.duration_since(now))
            }
        } else {
            None
        };
        if let Some(l) = left {
            best = Some(best.map_or(l, |b| b.max(l)));
        }
    }
    best.map(|l| Some(l.unsigned_abs())).ok_or(OUTSIDE)
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
        proxy_key: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use jwt::types::TimeRange;

    fn window(start: &str, end: &str) -> Vec<TimeRange> {
        vec![TimeRange {
            start: start.into(),
            end: end.into(),
        }]
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn hours(h: f64) -> Option<Duration> {
        Some(Duration::from_secs_f64(h * 3600.0))
    }

    #[test]
    fn connect_times_in_utc_and_across_midnight() {
        let day = window("09:00:00", "17:00:00");
        assert_eq!(times_allow_at(&day, "UTC", at("2026-12-01T12:00:00Z")), Ok(hours(5.0)));
        assert!(times_allow_at(&day, "UTC", at("2026-12-01T18:00:00Z")).is_err());
        let night = window("22:00:00", "06:00:00");
        assert_eq!(
            times_allow_at(&night, "UTC", at("2026-12-01T23:30:00Z")),
            Ok(hours(6.5))
        );
        assert_eq!(
            times_allow_at(&night, "UTC", at("2026-12-01T05:00:00Z")),
            Ok(hours(1.0))
        );
        assert!(times_allow_at(&night, "UTC", at("2026-12-01T12:00:00Z")).is_err());
        assert_eq!(
            times_allow_at(&[], "Nowhere/Land", at("2026-12-01T12:00:00Z")),
            Ok(None)
        );
    }

    #[test]
    fn connect_times_in_named_zones() {
        let day = window("09:00:00", "17:00:00");
        // 15:00 UTC is 10:00 in New York in December.
        assert_eq!(
            times_allow_at(&day, "America/New_York", at("2026-12-01T15:00:00Z")),
            Ok(hours(7.0))
        );
        assert!(times_allow_at(&day, "America/New_York", at("2026-12-01T13:00:00Z")).is_err());
        // The night Berlin moves its clocks forward: 01:30 CET to 04:00 CEST is 1.5 h.
        let dst = window("01:00:00", "04:00:00");
        assert_eq!(
            times_allow_at(&dst, "Europe/Berlin", at("2026-03-29T00:30:00Z")),
            Ok(hours(1.5))
        );
        for bad in ["Mars/Olympus_Mons", "../../etc/passwd", "/etc/localtime"] {
            assert!(times_allow_at(&day, bad, at("2026-12-01T15:00:00Z")).is_err(), "{bad}");
        }
    }
}
