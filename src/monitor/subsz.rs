//! `/subsz` and `/subscriptionsz` (monitoring.md §7): sublist statistics summed over
//! accounts and shards, and optionally the subscriptions themselves (paged; listed shard
//! by shard, each shard in its own stable order).

use super::connz::SubDetail;
use super::gather::{Done, Plan};
use super::optjson::{self, f, EventFilter, Field, Kind, Val};
use super::query::Query;
use super::{json_time, Context, MonitorError};
use crate::core::accounts::AccountTable;
use crate::core::report::{SubPart, SubQuery, SubReport, SublistStats};
use crate::core::shard::ShardCore;
use crate::core::subject::is_valid_literal_subject;
use crate::core::subject::matches;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Default page size (nats-server's `DefaultSubListSize`).
pub const DEFAULT_LIMIT: i64 = 1024;

/// nats-server's `SubszOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubszOptions {
    pub offset: i64,
    pub limit: i64,
    pub subscriptions: bool,
    pub account: String,
    pub test: String,
}

const FIELDS: [Field; 5] = [
    f("offset", "SubszOptions", Kind::Int),
    f("limit", "SubszOptions", Kind::Int),
    f("subscriptions", "SubszOptions", Kind::Bool),
    f("account", "SubszOptions", Kind::Str),
    f("test", "SubszOptions", Kind::Str),
];

impl SubszOptions {
    /// From a `/subsz` query string.
    pub fn from_query(q: &Query) -> Result<SubszOptions, MonitorError> {
        Ok(SubszOptions {
            subscriptions: q.bool("subs")?,
            offset: q.int("offset")?,
            limit: q.int("limit")?,
            test: q.get("test").to_string(),
            account: q.get("acc").to_string(),
        })
    }

    /// From the JSON body of a `$SYS` request (`SubszEventOptions`).
    pub fn from_json(body: &[u8]) -> Result<(SubszOptions, EventFilter), String> {
        let mut o = SubszOptions::default();
        let mut filter = EventFilter::default();
        if body.is_empty() {
            return Ok((o, filter));
        }
        let fields: Vec<Field> = FIELDS.iter().chain(EventFilter::FIELDS.iter()).copied().collect();
        for (name, v) in optjson::decode(body, "SubszEventOptions", &fields)? {
            if filter.take(name, &v) {
                continue;
            }
            match (name, v) {
                ("offset", Val::Int(n)) => o.offset = n,
                ("limit", Val::Int(n)) => o.limit = n,
                ("subscriptions", Val::Bool(b)) => o.subscriptions = b,
                ("account", Val::Str(s)) => o.account = s,
                ("test", Val::Str(s)) => o.test = s,
                _ => {}
            }
        }
        Ok((o, filter))
    }
}

/// nats-server's `SublistStats` as JSON.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct SublistStatsJson {
    pub num_subscriptions: u64,
    pub num_cache: u64,
    pub num_inserts: u64,
    pub num_removes: u64,
    pub num_matches: u64,
    pub cache_hit_rate: f64,
    pub max_fanout: u64,
    pub avg_fanout: f64,
}

impl From<&SublistStats> for SublistStatsJson {
    fn from(s: &SublistStats) -> Self {
        SublistStatsJson {
            num_subscriptions: s.num_subs,
            num_cache: s.num_cache,
            num_inserts: s.inserts,
            num_removes: s.removes,
            num_matches: s.matches,
            cache_hit_rate: s.cache_hit_rate(),
            max_fanout: s.max_fanout,
            avg_fanout: s.avg_fanout(),
        }
    }
}

/// nats-server's `Subsz`.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Subsz {
    pub server_id: String,
    pub now: String,
    #[serde(flatten)]
    pub stats: SublistStatsJson,
    pub total: usize,
    pub offset: i64,
    pub limit: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list: Vec<SubDetail>,
}

fn plan(ctx: &Arc<Context>, opts: &SubszOptions) -> Result<Plan<SubPart, Subsz>, MonitorError> {
    let offset = opts.offset.max(0);
    let limit = if opts.limit <= 0 { DEFAULT_LIMIT } else { opts.limit };
    if !opts.test.is_empty() && !is_valid_literal_subject(opts.test.as_bytes()) {
        return Err(MonitorError::BadRequest(format!(
            "invalid test subject, must be valid publish subject: {}",
            opts.test
        )));
    }
    let q = SubQuery {
        account: (!opts.account.is_empty()).then(|| opts.account.clone()),
        test: (!opts.test.is_empty()).then(|| opts.test.clone()),
        list: opts.subscriptions,
        keep: usize::try_from(offset.saturating_add(limit)).unwrap_or(usize::MAX),
    };
    let server_id = ctx.server_id();
    let list = opts.subscriptions;
    let imports = import_subs(&ctx.state().shared.accounts.snapshot(), &q);
    Ok(Plan::new(
        move |core: &mut ShardCore, _| core.report_subs(&q),
        move |parts: Vec<SubPart>| {
            let mut stats = SublistStats::default();
            let mut total = 0;
            let mut subs = Vec::new();
            for p in parts {
                stats.add(&p.stats);
                total += p.total;
                subs.extend(p.subs);
            }
            stats.num_subs += imports.count;
            stats.inserts += imports.count;
            total += imports.subs.len();
            subs.extend(imports.subs);
            let from = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
            let to = usize::try_from(offset.saturating_add(limit))
                .unwrap_or(usize::MAX)
                .min(total);
            let page: Vec<SubDetail> = subs
                .get(from..to.min(subs.len()))
                .unwrap_or_default()
                .iter()
                .map(SubDetail::from)
                .collect();
            Ok(Subsz {
                server_id,
                now: json_time(SystemTime::now()),
                stats: SublistStatsJson::from(&stats),
                total: if list { total } else { 0 },
                offset,
                limit,
                subscriptions_list: page,
            })
        },
    ))
}

/// The subscriptions nats-server makes for service imports (see `import_subs`): how many
/// the filtered accounts have, and those matching the test subject.
struct ImportSubs {
    count: u64,
    subs: Vec<SubReport>,
}

fn import_subs(table: &AccountTable, q: &SubQuery) -> ImportSubs {
    let mut out = ImportSubs {
        count: 0,
        subs: Vec::new(),
    };
    for def in table.iter() {
        if q.account.as_deref().is_some_and(|a| a != def.name) {
            continue;
        }
        out.count += super::import_subs(def);
        if !q.list {
            continue;
        }
        for (i, imp) in def.service_imports.iter().enumerate() {
            if q.test.as_deref().is_some_and(|t| !matches(&imp.local, t.as_bytes())) {
                continue;
            }
            out.subs.push(SubReport {
                account: def.name.clone(),
                account_tag: def.name_tag().to_string(),
                subject: String::from_utf8_lossy(&imp.local).into_owned(),
                queue: None,
                sid: (i + 1).to_string(),
                msgs: 0,
                max: 0,
                cid: 0,
            });
        }
    }
    out
}

/// `/subsz` for `opts`, from a thread that may block.
pub fn subsz(ctx: &Arc<Context>, opts: &SubszOptions) -> Result<Subsz, MonitorError> {
    plan(ctx, opts)?.run_blocking(ctx)
}

/// `/subsz` for `opts`, from async code.
pub async fn subsz_async(ctx: &Arc<Context>, opts: &SubszOptions) -> Result<Subsz, MonitorError> {
    plan(ctx, opts)?.run_async(ctx).await
}

/// `/subsz` for `opts`, from a shard: `done` runs on this shard.
pub fn subsz_on_shard(core: &mut ShardCore, ctx: &Arc<Context>, opts: &SubszOptions, done: Done<Subsz>, now: Instant) {
    match plan(ctx, opts) {
        Ok(p) => p.run_on_shard(core, done, now),
        Err(e) => done(core, Err(e), now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_json_options() {
        let o = SubszOptions::from_query(&Query::parse("subs=1&offset=1&limit=2&test=a.b&acc=A"));
        assert_eq!(
            o,
            Ok(SubszOptions {
                offset: 1,
                limit: 2,
                subscriptions: true,
                account: "A".into(),
                test: "a.b".into(),
            })
        );
        let (o, _) = SubszOptions::from_json(br#"{"subscriptions":true,"account":"B","test":"x"}"#).unwrap_or_default();
        assert!(o.subscriptions);
        assert_eq!((o.account.as_str(), o.test.as_str()), ("B", "x"));
        assert_eq!(
            SubszOptions::from_json(br#"{"limit":true}"#).err(),
            Some(
                "json: cannot unmarshal bool into Go struct field SubszEventOptions.SubszOptions.limit of type int"
                    .to_string()
            )
        );
    }
}
