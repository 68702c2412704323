//! `/connz` (monitoring.md §3): open and recently closed connections, filtered, sorted
//! and paged as nats-server does it, with the same quirks in `total` (open connections
//! are counted before the user and subject filters). Every shard pre-sorts and returns
//! only the first `offset + limit` of its matching connections; the merge sorts those.

use super::gather::{Done, Plan};
use super::gofmt::{rtt, uptime};
use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::query::Query;
use super::{json_time, Context, MonitorError};
use crate::core::accounts::GLOBAL_NAME;
use crate::core::report::{closed_account, ConnPart, ConnQuery, ConnReport, ConnSort, ConnState, SubReport};
use crate::core::shard::ShardCore;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Default page size (nats-server's `DefaultConnListSize`).
pub const DEFAULT_LIMIT: i64 = 1024;

/// nats-server's `ConnzOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnzOptions {
    /// A sort option name; checked when the answer is built.
    pub sort: String,
    /// Include credentials (`auth`).
    pub username: bool,
    pub subscriptions: bool,
    pub subscriptions_detail: bool,
    pub offset: i64,
    pub limit: i64,
    pub cid: u64,
    pub mqtt_client: String,
    pub state: ConnState,
    pub user: String,
    /// `acc`.
    pub account: String,
    pub filter_subject: String,
}

const FIELDS: [Field; 12] = [
    f("sort", "ConnzOptions", Kind::Str),
    f("auth", "ConnzOptions", Kind::Bool),
    f("subscriptions", "ConnzOptions", Kind::Bool),
    f("subscriptions_detail", "ConnzOptions", Kind::Bool),
    f("offset", "ConnzOptions", Kind::Int),
    f("limit", "ConnzOptions", Kind::Int),
    f("cid", "ConnzOptions", Kind::Uint),
    f("mqtt_client", "ConnzOptions", Kind::Str),
    f("state", "ConnzOptions", Kind::State),
    f("user", "ConnzOptions", Kind::Str),
    f("acc", "ConnzOptions", Kind::Str),
    f("filter_subject", "ConnzOptions", Kind::Str),
];

impl ConnzOptions {
    /// From a `/connz` query string, with nats-server's 400 texts (the subject filter is
    /// not an HTTP option in nats-server).
    pub fn from_query(q: &Query) -> Result<ConnzOptions, MonitorError> {
        let sort = q.get("sort").to_string();
        let username = q.bool("auth")?;
        let (subscriptions, subscriptions_detail) = q.subs()?;
        let offset = q.int("offset")?;
        let limit = q.int("limit")?;
        let cid = q.uint("cid")?;
        let state = match q.get("state").to_ascii_lowercase().as_str() {
            "" | "open" => ConnState::Open,
            "closed" => ConnState::Closed,
            "any" | "all" => ConnState::All,
            _ => {
                return Err(MonitorError::BadRequest(format!(
                    "Error decoding state for {}",
                    q.get("state")
                )))
            }
        };
        Ok(ConnzOptions {
            sort,
            username,
            subscriptions,
            subscriptions_detail,
            offset,
            limit,
            cid,
            mqtt_client: q.get("mqtt_client").to_string(),
            state,
            user: q.get("user").to_string(),
            account: q.get("acc").to_string(),
            filter_subject: String::new(),
        })
    }

    /// From the JSON body of a `$SYS` request (`ConnzEventOptions`); an empty body is the
    /// defaults. Errors are Go's texts (answered with code 400).
    pub fn from_json(body: &[u8]) -> Result<(ConnzOptions, EventFilter), String> {
        let mut o = ConnzOptions::default();
        let mut filter = EventFilter::default();
        if body.is_empty() {
            return Ok((o, filter));
        }
        let fields: Vec<Field> = FIELDS.iter().chain(EventFilter::FIELDS.iter()).copied().collect();
        for (name, v) in optjson::decode(body, "ConnzEventOptions", &fields)? {
            if filter.take(name, &v) {
                continue;
            }
            match (name, v) {
                ("sort", Val::Str(s)) => o.sort = s,
                ("auth", Val::Bool(b)) => o.username = b,
                ("subscriptions", Val::Bool(b)) => o.subscriptions = b,
                ("subscriptions_detail", Val::Bool(b)) => o.subscriptions_detail = b,
                ("offset", Val::Int(n)) => o.offset = n,
                ("limit", Val::Int(n)) => o.limit = n,
                ("cid", Val::Uint(n)) => o.cid = n,
                ("mqtt_client", Val::Str(s)) => o.mqtt_client = s,
                ("state", Val::Int(n)) => {
                    o.state = match n {
                        0 => ConnState::Open,
                        1 => ConnState::Closed,
                        2 => ConnState::All,
                        _ => ConnState::Nothing,
                    }
                }
                ("user", Val::Str(s)) => o.user = s,
                ("acc", Val::Str(s)) => o.account = s,
                ("filter_subject", Val::Str(s)) => o.filter_subject = s,
                _ => {}
            }
        }
        Ok((o, filter))
    }
}

/// nats-server's `SubDetail`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct SubDetail {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account_tag: String,
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub qgroup: String,
    pub sid: String,
    pub msgs: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: u64,
    pub cid: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl From<&SubReport> for SubDetail {
    fn from(s: &SubReport) -> Self {
        SubDetail {
            account: s.account.clone(),
            account_tag: s.account_tag.clone(),
            subject: s.subject.clone(),
            qgroup: s.queue.clone().unwrap_or_default(),
            sid: s.sid.clone(),
            msgs: s.msgs,
            max: s.max,
            cid: s.cid,
        }
    }
}

/// nats-server's `ConnInfo`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo {
    pub cid: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub conn_type: String,
    pub ip: String,
    pub port: u16,
    pub start: String,
    pub last_activity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rtt: String,
    pub uptime: String,
    pub idle: String,
    pub pending_bytes: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stalls: u64,
    pub subscriptions: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lang: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tls_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tls_cipher_suite: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_peer_certs: Vec<TlsPeerCert>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_first: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authorized_user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list_detail: Vec<SubDetail>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mqtt_client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyInfo>,
}

/// nats-server's `TLSPeerCert`: one certificate the client presented.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsPeerCert {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub spki_sha256: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cert_sha256: String,
}

/// nats-server's `ProxyInfo`: the trusted proxy a connection came through.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyInfo {
    pub key: String,
}

/// nats-server's `Connz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Connz {
    pub server_id: String,
    pub now: String,
    pub num_connections: usize,
    pub total: usize,
    pub offset: i64,
    pub limit: i64,
    /// `null` only in nats-server's answer for an unknown account.
    pub connections: Option<Vec<ConnInfo>>,
}

/// A user JWT that is a bearer token is not shown.
fn redact_bearer(jwt: &str) -> String {
    use base64::Engine;
    let Some(claims) = jwt.split('.').nth(1) else {
        return jwt.to_string();
    };
    let bearer = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("nats")?.get("bearer_token")?.as_bool())
        .unwrap_or(false);
    if bearer {
        String::new()
    } else {
        jwt.to_string()
    }
}

/// What to show of a connection.
#[derive(Clone, Copy)]
struct Show {
    auth: bool,
    subs: bool,
    detail: bool,
}

fn conn_info(c: &ConnReport, now: SystemTime, show: Show) -> ConnInfo {
    let closed = c.stop.is_some();
    // A closed connection was described when it closed.
    let at = c.stop.unwrap_or(now);
    let mut ci = ConnInfo {
        cid: c.cid,
        kind: c.kind.to_string(),
        conn_type: c.conn_type.to_string(),
        ip: if c.port != 0 { c.ip.clone() } else { String::new() },
        port: c.port,
        start: json_time(c.start),
        last_activity: json_time(c.last_activity),
        stop: c.stop.map(json_time),
        reason: c.reason.map(|r| r.as_str().to_string()).unwrap_or_default(),
        rtt: rtt(c.rtt),
        uptime: uptime(at.duration_since(c.start).unwrap_or_default()),
        idle: uptime(at.duration_since(c.last_activity).unwrap_or_default()),
        pending_bytes: c.pending,
        in_msgs: c.in_msgs,
        out_msgs: c.out_msgs,
        in_bytes: c.in_bytes,
        out_bytes: c.out_bytes,
        stalls: c.stalls,
        subscriptions: c.num_subs,
        name: c.name.clone(),
        lang: c.lang.clone(),
        version: c.version.clone(),
        mqtt_client: c.mqtt_client.clone(),
        proxy: (!c.proxy_key.is_empty()).then(|| ProxyInfo {
            key: c.proxy_key.clone(),
        }),
        ..Default::default()
    };
    if let Some(t) = &c.tls {
        ci.tls_version = t.version.clone();
        ci.tls_cipher_suite = t.cipher_suite.clone();
        ci.tls_first = t.first;
        // The client's certificates with `auth`, for open connections (closed ones were
        // described without them, as in nats-server).
        if show.auth && !closed {
            ci.tls_peer_certs = t
                .peer_certs
                .iter()
                .map(|p| TlsPeerCert {
                    subject: p.subject.clone(),
                    spki_sha256: p.spki_sha256.clone(),
                    cert_sha256: p.cert_sha256.clone(),
                })
                .collect();
        }
    }
    if show.detail {
        ci.subscriptions_list_detail = c.subs.iter().map(SubDetail::from).collect();
    } else if show.subs {
        ci.subscriptions_list = c.subs.iter().map(|s| s.subject.clone()).collect();
    }
    let non_global = if c.account == GLOBAL_NAME {
        String::new()
    } else {
        c.account.clone()
    };
    if closed {
        // nats-server keeps these with every closed connection.
        ci.jwt = redact_bearer(&c.jwt);
        ci.issuer_key = c.issuer_key.clone();
        ci.tags = c.tags.clone();
        if show.auth {
            ci.authorized_user = c.user.clone();
            if !non_global.is_empty() {
                ci.name_tag = c.account_tag.clone();
            }
            ci.account = non_global;
        }
    } else if show.auth {
        ci.authorized_user = c.user.clone();
        ci.account = non_global;
        ci.jwt = redact_bearer(&c.jwt);
        ci.issuer_key = c.issuer_key.clone();
        ci.tags = c.tags.clone();
        ci.name_tag = c.account_tag.clone();
    }
    ci
}

/// The shards' question and the merge for `opts`, or the answer itself when nothing
/// needs asking (an unknown account).
fn plan(ctx: &Arc<Context>, opts: &ConnzOptions) -> Result<Result<Plan<ConnPart, Connz>, Connz>, MonitorError> {
    let sort = if opts.sort.is_empty() {
        ConnSort::Cid
    } else {
        ConnSort::parse(&opts.sort)
            .ok_or_else(|| MonitorError::BadRequest(format!("invalid sorting option: {}", opts.sort)))?
    };
    let offset = opts.offset.max(0);
    let mut limit = if opts.limit <= 0 { DEFAULT_LIMIT } else { opts.limit };
    let state = opts.state;
    if sort == ConnSort::Stop && state != ConnState::Closed {
        return Err(MonitorError::BadRequest(
            "sort by stop only valid on closed connections".into(),
        ));
    }
    if sort == ConnSort::Reason && state != ConnState::Closed {
        return Err(MonitorError::BadRequest(
            "sort by reason only valid on closed connections".into(),
        ));
    }
    if opts.cid > 0 {
        limit = 1;
    }
    let filter_subject =
        (!opts.filter_subject.is_empty() && opts.filter_subject != ">").then(|| opts.filter_subject.clone());
    if filter_subject.is_some() && opts.account.is_empty() {
        return Err(MonitorError::BadRequest(
            "filter by subject only valid with account filtering".into(),
        ));
    }
    let now = SystemTime::now();
    let account = (!opts.account.is_empty()).then(|| opts.account.clone());
    if let Some(a) = &account {
        if ctx.state().shared.accounts.snapshot().by_name(a).is_none() {
            // nats-server answers before it even fills in its id.
            return Ok(Err(Connz {
                now: json_time(now),
                offset,
                limit,
                ..Default::default()
            }));
        }
    }
    let q = ConnQuery {
        state,
        cid: opts.cid,
        account,
        user: (!opts.user.is_empty()).then(|| opts.user.clone()),
        mqtt_client: (!opts.mqtt_client.is_empty()).then(|| opts.mqtt_client.clone()),
        filter_subject,
        sort,
        keep: usize::try_from(offset.saturating_add(limit)).unwrap_or(usize::MAX),
        subs: opts.subscriptions || opts.subscriptions_detail,
        now,
    };
    let show = Show {
        auth: opts.username,
        subs: opts.subscriptions,
        detail: opts.subscriptions_detail,
    };
    let server_id = ctx.server_id();
    let max_closed = usize::try_from(ctx.state().live().opts.max_closed_clients.max(0)).unwrap_or(0);
    let cid = opts.cid;
    let q2 = q.clone();
    Ok(Ok(Plan::new(
        move |core: &mut ShardCore, _| core.report_conns(&q2),
        move |parts: Vec<ConnPart>| Ok(merge(server_id, max_closed, &q, cid, offset, limit, show, parts)),
    )))
}

#[allow(clippy::too_many_arguments)]
fn merge(
    server_id: String,
    max_closed: usize,
    q: &ConnQuery,
    cid: u64,
    offset: i64,
    limit: i64,
    show: Show,
    parts: Vec<ConnPart>,
) -> Connz {
    let open_total: usize = parts.iter().map(|p| p.open_total).sum();
    let mut open: Vec<ConnReport> = Vec::new();
    let mut closed: Vec<Arc<ConnReport>> = Vec::new();
    for p in parts {
        open.extend(p.open);
        closed.extend(p.closed);
    }
    // One ring for the server: the newest `max_closed_clients`.
    if closed.len() > max_closed {
        closed.sort_by(|a, b| b.stop.cmp(&a.stop).then(b.cid.cmp(&a.cid)));
        closed.truncate(max_closed);
    }
    if let Some(a) = q.account.as_deref() {
        closed.retain(|c| closed_account(c) == a);
    }
    let closed_total = closed.len();
    let total = match q.state {
        ConnState::Open => open_total,
        ConnState::Closed => closed_total,
        ConnState::All => open_total + closed_total,
        ConnState::Nothing => 0,
    };
    // An open connection asked for by id hides a closed one with that id.
    if cid > 0 && !open.is_empty() {
        closed.clear();
    }
    closed.retain(|c| {
        (cid == 0 || c.cid == cid)
            && q.user.as_deref().is_none_or(|u| c.user == u)
            && q.mqtt_client.as_deref().is_none_or(|m| c.mqtt_client == m)
    });
    let now = q.now;
    let mut all: Vec<&ConnReport> = open.iter().chain(closed.iter().map(|c| &**c)).collect();
    all.sort_by(|a, b| q.sort.order(a, b, now));
    let from = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
    let to = usize::try_from(offset.saturating_add(limit))
        .unwrap_or(usize::MAX)
        .min(all.len());
    let conns: Vec<ConnInfo> = all
        .get(from..to)
        .unwrap_or_default()
        .iter()
        .map(|c| conn_info(c, now, show))
        .collect();
    Connz {
        server_id,
        now: json_time(now),
        num_connections: conns.len(),
        total,
        offset,
        limit,
        connections: Some(conns),
    }
}

/// `/connz` for `opts`, from a thread that may block (never a shard thread).
pub fn connz(ctx: &Arc<Context>, opts: &ConnzOptions) -> Result<Connz, MonitorError> {
    match plan(ctx, opts)? {
        Ok(p) => p.run_blocking(ctx),
        Err(done) => Ok(done),
    }
}

/// `/connz` for `opts`, from async code.
pub async fn connz_async(ctx: &Arc<Context>, opts: &ConnzOptions) -> Result<Connz, MonitorError> {
    match plan(ctx, opts)? {
        Ok(p) => p.run_async(ctx).await,
        Err(done) => Ok(done),
    }
}

/// `/connz` for `opts`, from a shard (system services): `done` runs on this shard.
pub fn connz_on_shard(core: &mut ShardCore, ctx: &Arc<Context>, opts: &ConnzOptions, done: Done<Connz>, now: Instant) {
    match plan(ctx, opts) {
        Ok(Ok(p)) => p.run_on_shard(core, done, now),
        Ok(Err(answer)) => done(core, Ok(answer), now),
        Err(e) => done(core, Err(e), now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_options_and_their_errors() {
        let o = ConnzOptions::from_query(&Query::parse(
            "sort=msgs_to&auth=1&subs=detail&offset=2&limit=5&cid=9&state=ANY&user=u&acc=A&mqtt_client=m&filter_subject=x",
        ));
        let want = ConnzOptions {
            sort: "msgs_to".into(),
            username: true,
            subscriptions: false,
            subscriptions_detail: true,
            offset: 2,
            limit: 5,
            cid: 9,
            mqtt_client: "m".into(),
            state: ConnState::All,
            user: "u".into(),
            account: "A".into(),
            filter_subject: String::new(),
        };
        assert_eq!(o, Ok(want));
        let bad = |q: &str| ConnzOptions::from_query(&Query::parse(q)).err().map(|e| e.to_string());
        assert_eq!(bad("state=xyz"), Some("Error decoding state for xyz".into()));
        assert_eq!(
            bad("cid=-1"),
            Some("Error decoding uint64 for 'cid': strconv.ParseUint: parsing \"-1\": invalid syntax".into())
        );
        assert_eq!(
            bad("auth=2"),
            Some("Error decoding boolean for 'auth': strconv.ParseBool: parsing \"2\": invalid syntax".into())
        );
    }

    #[test]
    fn json_options() {
        let (o, fl) = ConnzOptions::from_json(
            br#"{"sort":"cid","auth":true,"subscriptions_detail":true,"state":1,"acc":"A","filter_subject":"f.>","server_name":"s"}"#,
        )
        .unwrap_or_default();
        assert!(o.username && o.subscriptions_detail);
        assert_eq!(o.state, ConnState::Closed);
        assert_eq!((o.account.as_str(), o.filter_subject.as_str()), ("A", "f.>"));
        assert_eq!(fl.server_name, "s");
        assert_eq!(
            ConnzOptions::from_json(b""),
            Ok((ConnzOptions::default(), EventFilter::default()))
        );
    }

    #[test]
    fn bearer_jwts_are_redacted() {
        use base64::Engine;
        let enc = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let bearer = format!("{}.{}.sig", enc("{}"), enc(r#"{"nats":{"bearer_token":true}}"#));
        let plain = format!("{}.{}.sig", enc("{}"), enc(r#"{"nats":{}}"#));
        assert_eq!(redact_bearer(&bearer), "");
        assert_eq!(redact_bearer(&plain), plain);
        assert_eq!(redact_bearer(""), "");
    }

    #[test]
    fn merge_counts_totals_like_the_reference_and_pages() {
        let now = SystemTime::now();
        let mk = |cid: u64| ConnReport {
            cid,
            start: now,
            last_activity: now,
            port: 1000 + cid as u16,
            ip: "127.0.0.1".into(),
            account: "$G".into(),
            ..Default::default()
        };
        let q = ConnQuery {
            state: ConnState::Open,
            cid: 0,
            account: None,
            user: Some("u".into()),
            mqtt_client: None,
            filter_subject: None,
            sort: ConnSort::Cid,
            keep: 3,
            subs: false,
            now,
        };
        let parts = vec![
            ConnPart {
                open_total: 4,
                open: vec![mk(1), mk(5)],
                ..Default::default()
            },
            ConnPart {
                open_total: 3,
                open: vec![mk(2)],
                ..Default::default()
            },
        ];
        let show = Show {
            auth: false,
            subs: false,
            detail: false,
        };
        let c = merge("ID".into(), 10, &q, 0, 1, 2, show, parts);
        // `total` counts every open connection, the page the filtered ones.
        assert_eq!(c.total, 7);
        let cids: Vec<u64> = c.connections.unwrap_or_default().iter().map(|c| c.cid).collect();
        assert_eq!(cids, vec![2, 5]);
        assert_eq!(c.num_connections, 2);
    }
}
