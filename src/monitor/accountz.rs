//! `/accountz` (monitoring.md §8) and `/accstatz` (§9): the accounts of the account
//! table, one account in detail (connections and subscriptions summed over shards,
//! imports as the table resolved them, exports and mappings as configured), and the
//! per-account message counters.

use super::gather::{Done, Plan};
use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::query::Query;
use super::subsz::SublistStatsJson;
use super::{json_time, Context, MonitorError};
use crate::auth::config::{self as cfg, AccountConfig};
use crate::core::accounts::links::Rewrite;
use crate::core::accounts::{AccountDef, AccountTable};
use crate::core::report::{AccountPart, MsgTotals, SublistStats};
use crate::core::shard::ShardCore;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// nats-server's `AccountzOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountzOptions {
    pub account: String,
}

impl AccountzOptions {
    pub fn from_query(q: &Query) -> AccountzOptions {
        AccountzOptions {
            account: q.get("acc").to_string(),
        }
    }

    /// From the JSON body of a `$SYS` request (`AccountzEventOptions`).
    pub fn from_json(body: &[u8]) -> Result<(AccountzOptions, EventFilter), String> {
        let mut o = AccountzOptions::default();
        let mut filter = EventFilter::default();
        if body.is_empty() {
            return Ok((o, filter));
        }
        let fields: Vec<Field> = std::iter::once(f("account", "AccountzOptions", Kind::Str))
            .chain(EventFilter::FIELDS.iter().copied())
            .collect();
        for (name, v) in optjson::decode(body, "AccountzEventOptions", &fields)? {
            if !filter.take(name, &v) {
                if let ("account", Val::Str(s)) = (name, v) {
                    o.account = s;
                }
            }
        }
        Ok((o, filter))
    }
}

/// nats-server's `AccountStatzOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountStatzOptions {
    pub accounts: Vec<String>,
    pub include_unused: bool,
}

impl AccountStatzOptions {
    pub fn from_query(q: &Query) -> Result<AccountStatzOptions, MonitorError> {
        Ok(AccountStatzOptions {
            accounts: Vec::new(),
            include_unused: q.bool("unused")?,
        })
    }

    /// From the JSON body of a `$SYS` request (`AccountStatzEventOptions`).
    pub fn from_json(body: &[u8]) -> Result<(AccountStatzOptions, EventFilter), String> {
        let mut o = AccountStatzOptions::default();
        let mut filter = EventFilter::default();
        if body.is_empty() {
            return Ok((o, filter));
        }
        let fields: Vec<Field> = [
            f("accounts", "AccountStatzOptions", Kind::Strs),
            f("include_unused", "AccountStatzOptions", Kind::Bool),
        ]
        .into_iter()
        .chain(EventFilter::FIELDS.iter().copied())
        .collect();
        for (name, v) in optjson::decode(body, "AccountStatzEventOptions", &fields)? {
            if filter.take(name, &v) {
                continue;
            }
            match (name, v) {
                ("accounts", Val::Strs(a)) => o.accounts = a,
                ("include_unused", Val::Bool(b)) => o.include_unused = b,
                _ => {}
            }
        }
        Ok((o, filter))
    }
}

/// jwt `ServiceLatency`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ServiceLatency {
    /// A percentage, or `"headers"`.
    pub sampling: serde_json::Value,
    pub results: String,
}

/// nats-server's `ExtImport` (a jwt `Import` and its state).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtImport {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub to: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub local_subject: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_trace: bool,
    pub invalid: bool,
    pub share: bool,
    pub tracking: bool,
}

/// nats-server's `ExtExport` (a jwt `Export` and who may import it).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtExport {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub token_req: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub response_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_latency: Option<ServiceLatency>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approved_accounts: Vec<String>,
}

/// nats-server's `MapDest`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct MapDest {
    pub subject: String,
    pub weight: u8,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

/// nats-server's `AccountInfo`.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct AccountInfo {
    pub account_name: String,
    pub update_time: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_system: bool,
    pub expired: bool,
    pub complete: bool,
    pub jetstream_enabled: bool,
    pub leafnode_connections: u64,
    pub client_connections: u64,
    pub subscriptions: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mappings: BTreeMap<String, Vec<MapDest>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<ExtExport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ExtImport>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    pub sublist_stats: SublistStatsJson,
}

/// nats-server's `Accountz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Accountz {
    pub server_id: String,
    pub now: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_detail: Option<AccountInfo>,
}

/// `{msgs, bytes}`.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgBytes {
    pub msgs: u64,
    pub bytes: u64,
}

/// nats-server's `DataStats` (routes, gateways and leafs always present).
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataStats {
    pub msgs: u64,
    pub bytes: u64,
    pub gateways: MsgBytes,
    pub routes: MsgBytes,
    pub leafs: MsgBytes,
}

/// nats-server's `AccountStat`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountStat {
    pub acc: String,
    pub name: String,
    pub conns: u64,
    pub leafnodes: u64,
    pub total_conns: u64,
    pub num_subscriptions: u64,
    pub sent: DataStats,
    pub received: DataStats,
    pub slow_consumers: u64,
}

/// nats-server's `AccountStatz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountStatz {
    pub server_id: String,
    pub now: String,
    pub account_statz: Vec<AccountStat>,
}

/// One account's parts summed over shards.
#[derive(Default)]
struct Summed {
    conns: u64,
    leafnodes: u64,
    subs: u64,
    sublist: SublistStats,
    totals: MsgTotals,
}

fn sum_by_account(parts: Vec<Vec<AccountPart>>) -> BTreeMap<u32, (String, Summed)> {
    let mut out: BTreeMap<u32, (String, Summed)> = BTreeMap::new();
    for p in parts.into_iter().flatten() {
        let e = out.entry(p.id).or_insert_with(|| (p.name.clone(), Summed::default()));
        e.1.conns += p.conns;
        e.1.leafnodes += p.leafnodes;
        e.1.subs += p.subs;
        e.1.sublist.add(&p.sublist);
        e.1.totals += p.totals;
    }
    out
}

fn service_import(table: &AccountTable, s: &crate::core::accounts::links::ServiceImport) -> ExtImport {
    let local = String::from_utf8_lossy(&s.local).into_owned();
    let subject = match &s.rewrite {
        Rewrite::Literal(l) => String::from_utf8_lossy(l).into_owned(),
        Rewrite::Prefix(p) => format!("{}{local}", String::from_utf8_lossy(p)),
        Rewrite::Same => local.clone(),
        Rewrite::Transform(t) => t.destination().to_string(),
    };
    ExtImport {
        subject,
        account: table.name(s.exporter).to_string(),
        to: local.clone(),
        local_subject: local,
        kind: "service".into(),
        allow_trace: false,
        invalid: false,
        share: s.share,
        tracking: s.latency.is_some(),
    }
}

/// The stream imports of `me`: the links other accounts hold toward it.
fn stream_imports(table: &AccountTable, me: &AccountDef) -> Vec<ExtImport> {
    let mut out = Vec::new();
    for exporter in table.iter() {
        for l in exporter.stream_links.iter().filter(|l| l.importer == me.id) {
            let from = String::from_utf8_lossy(&l.from).into_owned();
            let local = match &l.rewrite {
                Rewrite::Same => from.clone(),
                Rewrite::Prefix(p) => format!("{}{from}", String::from_utf8_lossy(p)),
                Rewrite::Literal(s) => String::from_utf8_lossy(s).into_owned(),
                Rewrite::Transform(t) => t.destination().to_string(),
            };
            out.push(ExtImport {
                subject: from,
                account: exporter.name.clone(),
                local_subject: local,
                kind: "stream".into(),
                allow_trace: false,
                ..Default::default()
            });
        }
    }
    out
}

fn export(e: &cfg::Export) -> ExtExport {
    let mut x = ExtExport {
        subject: e.subject.clone(),
        token_req: e.accounts.as_ref().is_some_and(Vec::is_empty),
        approved_accounts: e.accounts.clone().unwrap_or_default(),
        ..Default::default()
    };
    match &e.kind {
        cfg::ExportKind::Stream => x.kind = "stream".into(),
        cfg::ExportKind::Service(s) => {
            x.kind = "service".into();
            x.response_type = match s.response_type {
                cfg::ResponseType::Singleton => "Singleton",
                cfg::ResponseType::Streamed => "Streamed",
                cfg::ResponseType::Chunked => "Chunked",
            }
            .into();
            x.service_latency = s.latency.as_ref().map(|l| ServiceLatency {
                sampling: match l.sampling {
                    cfg::LatencySampling::Percent(p) => serde_json::Value::from(p),
                    cfg::LatencySampling::Headers => serde_json::Value::from("headers"),
                },
                results: l.subject.clone(),
            });
        }
    }
    x
}

/// An account's mappings as nats-server shows them: destinations by weight, with what is
/// left going to the source subject itself, and weights shown cumulatively (as nats-server
/// keeps them for picking a destination).
fn mappings(a: &AccountConfig) -> BTreeMap<String, Vec<MapDest>> {
    let mut out = BTreeMap::new();
    for m in &a.mappings {
        let mut dests: Vec<MapDest> = m
            .destinations
            .iter()
            .map(|d| MapDest {
                subject: d.subject.clone(),
                weight: d.weight,
                cluster: d.cluster.clone(),
            })
            .collect();
        let total: u32 = m
            .destinations
            .iter()
            .filter(|d| d.cluster.is_empty())
            .map(|d| u32::from(d.weight))
            .sum();
        if total < 100 && !m.destinations.is_empty() {
            dests.push(MapDest {
                subject: m.source.clone(),
                weight: (100 - total) as u8,
                cluster: String::new(),
            });
        }
        dests.sort_by_key(|d| d.weight);
        let mut sum: u32 = 0;
        for d in dests.iter_mut().filter(|d| d.cluster.is_empty()) {
            sum += u32::from(d.weight);
            d.weight = sum.min(100) as u8;
        }
        out.insert(m.source.clone(), dests);
    }
    out
}

fn account_info(ctx: &Context, table: &AccountTable, name: &str, s: &Summed) -> AccountInfo {
    let live = ctx.state().live();
    let def = table.by_name(name);
    let extra = def.map_or(0, |d| super::import_subs(d));
    let mut sublist = s.sublist;
    sublist.num_subs += extra;
    sublist.inserts += extra;
    let mut imports: Vec<ExtImport> = Vec::new();
    if let Some(d) = def {
        imports.extend(stream_imports(table, d));
        imports.extend(d.service_imports.iter().map(|i| service_import(table, i)));
    }
    let conf = live.opts.security.account(name);
    AccountInfo {
        account_name: name.to_string(),
        update_time: json_time(live.config_load_time),
        is_system: def.is_some_and(|d| Some(d.id) == table.system()),
        expired: false,
        complete: true,
        jetstream_enabled: false,
        leafnode_connections: s.leafnodes,
        client_connections: s.conns,
        subscriptions: s.subs + extra,
        mappings: conf.map(mappings).unwrap_or_default(),
        // nats-server lists service exports before stream exports.
        exports: conf
            .map(|c| {
                let (svc, streams): (Vec<&cfg::Export>, Vec<&cfg::Export>) = c
                    .exports
                    .iter()
                    .partition(|e| matches!(e.kind, cfg::ExportKind::Service(_)));
                svc.into_iter().chain(streams).map(export).collect()
            })
            .unwrap_or_default(),
        imports,
        name_tag: def.map_or(name, |d| d.name_tag()).to_string(),
        sublist_stats: SublistStatsJson::from(&sublist),
    }
}

/// `/accountz` without an account: no shard needs asking.
fn account_list(ctx: &Context) -> Accountz {
    let table = ctx.state().shared.accounts.snapshot();
    Accountz {
        server_id: ctx.server_id(),
        now: json_time(SystemTime::now()),
        system_account: ctx.system_account().unwrap_or_default(),
        accounts: Some(table.iter().map(|d| d.name.clone()).collect()),
        account_detail: None,
    }
}

fn detail_plan(ctx: &Arc<Context>, name: &str) -> Result<Plan<Vec<AccountPart>, Accountz>, MonitorError> {
    let table = ctx.state().shared.accounts.snapshot();
    if table.by_name(name).is_none() {
        return Err(MonitorError::BadRequest(format!("Account {name} does not exist")));
    }
    let ctx2 = ctx.clone();
    let only = name.to_string();
    let only2 = only.clone();
    Ok(Plan::new(
        move |core: &mut ShardCore, _| core.report_accounts(Some(&only2)),
        move |parts| {
            let summed = sum_by_account(parts);
            let s = summed.into_values().next().map(|(_, s)| s).unwrap_or_default();
            Ok(Accountz {
                server_id: ctx2.server_id(),
                now: json_time(SystemTime::now()),
                system_account: ctx2.system_account().unwrap_or_default(),
                accounts: None,
                account_detail: Some(account_info(&ctx2, &table, &only, &s)),
            })
        },
    ))
}

/// `/accountz` for `opts`, from a thread that may block.
pub fn accountz(ctx: &Arc<Context>, opts: &AccountzOptions) -> Result<Accountz, MonitorError> {
    if opts.account.is_empty() {
        return Ok(account_list(ctx));
    }
    detail_plan(ctx, &opts.account)?.run_blocking(ctx)
}

/// `/accountz` for `opts`, from async code.
pub async fn accountz_async(ctx: &Arc<Context>, opts: &AccountzOptions) -> Result<Accountz, MonitorError> {
    if opts.account.is_empty() {
        return Ok(account_list(ctx));
    }
    detail_plan(ctx, &opts.account)?.run_async(ctx).await
}

/// `/accountz` for `opts`, from a shard (`$SYS.REQ.ACCOUNT.<acc>.INFO` uses the detail).
pub fn accountz_on_shard(
    core: &mut ShardCore,
    ctx: &Arc<Context>,
    opts: &AccountzOptions,
    done: Done<Accountz>,
    now: Instant,
) {
    if opts.account.is_empty() {
        let a = account_list(ctx);
        done(core, Ok(a), now);
        return;
    }
    match detail_plan(ctx, &opts.account) {
        Ok(p) => p.run_on_shard(core, done, now),
        Err(e) => done(core, Err(e), now),
    }
}

fn data_stats(msgs: u64, bytes: u64) -> DataStats {
    DataStats {
        msgs,
        bytes,
        ..Default::default()
    }
}

fn statz_plan(ctx: &Arc<Context>, opts: &AccountStatzOptions) -> Plan<Vec<AccountPart>, AccountStatz> {
    let server_id = ctx.server_id();
    let table = ctx.state().shared.accounts.snapshot();
    let wanted = opts.accounts.clone();
    let unused = opts.include_unused;
    Plan::new(
        move |core: &mut ShardCore, _| core.report_accounts(None),
        move |parts| {
            let summed = sum_by_account(parts);
            let stat = |name: &str, s: &Summed| AccountStat {
                acc: name.to_string(),
                name: table.by_name(name).map_or(name, |d| d.name_tag()).to_string(),
                conns: s.conns,
                leafnodes: s.leafnodes,
                total_conns: s.conns + s.leafnodes,
                num_subscriptions: s.subs + table.by_name(name).map_or(0, |d| super::import_subs(d)),
                sent: data_stats(s.totals.out_msgs, s.totals.out_bytes),
                received: data_stats(s.totals.in_msgs, s.totals.in_bytes),
                slow_consumers: s.totals.slow_consumers,
            };
            let mut out = Vec::new();
            if wanted.is_empty() {
                for (name, s) in summed.values() {
                    if unused || s.conns != 0 {
                        out.push(stat(name, s));
                    }
                }
            } else {
                for w in &wanted {
                    if let Some((name, s)) = summed.values().find(|(n, _)| n == w) {
                        if unused || s.conns != 0 {
                            out.push(stat(name, s));
                        }
                    }
                }
            }
            Ok(AccountStatz {
                server_id,
                now: json_time(SystemTime::now()),
                account_statz: out,
            })
        },
    )
}

/// `/accstatz` for `opts`, from a thread that may block.
pub fn accstatz(ctx: &Arc<Context>, opts: &AccountStatzOptions) -> Result<AccountStatz, MonitorError> {
    statz_plan(ctx, opts).run_blocking(ctx)
}

/// `/accstatz` for `opts`, from async code.
pub async fn accstatz_async(ctx: &Arc<Context>, opts: &AccountStatzOptions) -> Result<AccountStatz, MonitorError> {
    statz_plan(ctx, opts).run_async(ctx).await
}

/// `/accstatz` for `opts`, from a shard (`$SYS.REQ.ACCOUNT.<acc>.STATZ`, `.PING.STATZ`).
pub fn accstatz_on_shard(
    core: &mut ShardCore,
    ctx: &Arc<Context>,
    opts: &AccountStatzOptions,
    done: Done<AccountStatz>,
    now: Instant,
) {
    statz_plan(ctx, opts).run_on_shard(core, done, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        assert_eq!(
            AccountStatzOptions::from_query(&Query::parse("unused=true")),
            Ok(AccountStatzOptions {
                accounts: vec![],
                include_unused: true
            })
        );
        let (o, _) =
            AccountStatzOptions::from_json(br#"{"accounts":["A","B"],"include_unused":true}"#).unwrap_or_default();
        assert_eq!(o.accounts, vec!["A".to_string(), "B".to_string()]);
        assert_eq!(
            AccountStatzOptions::from_json(br#"{"accounts":[1]}"#).err(),
            Some("json: cannot unmarshal number into Go struct field AccountStatzEventOptions.AccountStatzOptions.accounts of type string".to_string())
        );
        let (o, _) = AccountzOptions::from_json(br#"{"account":"A"}"#).unwrap_or_default();
        assert_eq!(o.account, "A");
    }

    #[test]
    fn mappings_get_the_remaining_weight() {
        let a = AccountConfig {
            mappings: vec![cfg::Mapping {
                source: "src".into(),
                destinations: vec![cfg::MapDest {
                    subject: "dst".into(),
                    weight: 30,
                    cluster: String::new(),
                }],
            }],
            ..Default::default()
        };
        let m = mappings(&a);
        let d = m.get("src").cloned().unwrap_or_default();
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].subject.as_str(), d[0].weight), ("dst", 30));
        assert_eq!((d[1].subject.as_str(), d[1].weight), ("src", 100));
    }
}
