//! The system account's claims services in operator mode (nats-server's resolver `Start`
//! subscriptions and its `accountClaimUpdate`): account JWT updates pushed by `nsc push`
//! and friends, lookups, lists, packs and deletes, as internal subscriptions of the system
//! account on shard 0 (server-wide services, interest replicated to every shard).
//!
//! Which subjects exist depends on the resolver, as in the reference:
//!
//! | subject                               | MEMORY, URL | full | cache |
//! |---------------------------------------|:-----------:|:----:|:-----:|
//! | `$SYS.ACCOUNT.<acc>.CLAIMS.UPDATE`    | yes         | yes  | yes   |
//! | `$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE`| yes         | yes  | yes   |
//! | `$SYS.REQ.CLAIMS.UPDATE`              |             | yes  | yes   |
//! | `$SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP`|             | yes  |       |
//! | `$SYS.REQ.CLAIMS.PACK` (queue `responder`) |        | yes  |       |
//! | `$SYS.REQ.CLAIMS.LIST`                |             | yes  | yes   |
//! | `$SYS.REQ.CLAIMS.DELETE`              |             | yes  | yes   |
//!
//! With MEMORY and URL an update only reaches an account already registered (the resolver
//! is left as it was); `full` stores every update; `cache` stores updates of registered
//! accounts only. Replies carry the reference's texts and JSON, e.g.
//! `{"server":{...},"data":{"account":"A...","code":200,"message":"jwt updated"}}` or
//! `{"server":{...},"error":{"account":"A...","code":500,"description":"jwt update resulted
//! in error - subject does not match jwt content"}}`; a list is `{"data":[...],"server":{...}}`
//! (Go marshals that one from a map); lookups and packs answer raw JWTs.
//!
//! Checks before a store, in the reference's order per subject: the JWT decodes as account
//! claims, its blocking validation issues (`validation errors: [...]`), its subject is the
//! account of the subject, the operator's strict signing key usage. rnats adds two the
//! reference leaves to later use of the JWT: the issuer must be trusted (else `account
//! validation failed`, the reference's text for such a JWT), and a JWT older (`iat`) than the
//! stored one is not stored (the reference's `Store` semantics; the reply is still the
//! reference's `jwt updated`). After a store that changed the JWT of a registered account
//! the lead's [`ClaimsContext::on_update`] runs; after a delete, [`ClaimsContext::on_delete`].

use super::envelope::ServerInfo;
use super::SystemContext;
use crate::auth::config::DeleteMode;
use crate::auth::jwt::{decode_account, decode_generic, AccountClaims, OperatorClaims};
use crate::auth::resolver::dirstore::{is_account, DirStore, StoreError};
use crate::auth::resolver::{AccountResolver, ResolverKind};
use crate::core::accounts::AccountId;
use crate::core::client::SubId;
use crate::core::post::{Job, Post};
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub const ACCOUNT_UPDATE_OLD: &str = "$SYS.ACCOUNT.*.CLAIMS.UPDATE";
pub const ACCOUNT_UPDATE: &str = "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE";
pub const CLAIMS_UPDATE: &str = "$SYS.REQ.CLAIMS.UPDATE";
pub const ACCOUNT_LOOKUP: &str = "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP";
pub const CLAIMS_PACK: &str = "$SYS.REQ.CLAIMS.PACK";
pub const CLAIMS_LIST: &str = "$SYS.REQ.CLAIMS.LIST";
pub const CLAIMS_DELETE: &str = "$SYS.REQ.CLAIMS.DELETE";
/// The queue group of the pack responders.
pub const PACK_QUEUE: &str = "responder";

/// Runs after an account JWT was stored (account public key, the JWT).
pub type UpdateHook = Arc<dyn Fn(&mut ShardCore, &str, &str, Instant) + Send + Sync>;
/// Runs after an account JWT was deleted (account public key).
pub type DeleteHook = Arc<dyn Fn(&mut ShardCore, &str, Instant) + Send + Sync>;
/// Is this key a trusted issuer of account JWTs (a trusted operator or one of its signing keys)?
pub type TrustFn = Arc<dyn Fn(&str) -> bool + Send + Sync>;
/// Is this account registered on the server now?
pub type LoadedFn = Arc<dyn Fn(&ShardCore, &str) -> bool + Send + Sync>;

/// What the services need of the (first) trusted operator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorKeys {
    pub operator: String,
    pub signing_keys: Vec<String>,
    /// `strict_signing_key_usage`: accounts must be signed by a signing key.
    pub strict: bool,
}

impl OperatorKeys {
    pub fn from_claims(op: &OperatorClaims) -> Self {
        OperatorKeys {
            operator: op.claims.subject.clone(),
            signing_keys: op.nats.signing_keys.clone(),
            strict: op.nats.strict_signing_key_usage,
        }
    }

    /// The keys that may sign a delete request: the operator (unless strict) and its
    /// signing keys (the reference's `getOperatorKeys`).
    pub fn delete_signers(&self) -> impl Iterator<Item = &str> {
        let op = (!self.strict && !self.operator.is_empty()).then_some(self.operator.as_str());
        op.into_iter().chain(self.signing_keys.iter().map(String::as_str))
    }
}

/// Everything the claims services use; the lead fills it and wires the hooks.
pub struct ClaimsContext {
    pub system: Arc<SystemContext>,
    pub resolver: Arc<dyn AccountResolver>,
    pub operator: OperatorKeys,
    /// The system account's public key (it cannot be deleted).
    pub system_account: String,
    pub trusted: TrustFn,
    /// Default: the account is in the shard's account table under its public key.
    pub loaded: LoadedFn,
    /// Default: nothing.
    pub on_update: UpdateHook,
    /// Default: nothing.
    pub on_delete: DeleteHook,
}

impl ClaimsContext {
    pub fn new(
        system: Arc<SystemContext>,
        resolver: Arc<dyn AccountResolver>,
        operator: OperatorKeys,
        system_account: impl Into<String>,
        trusted: TrustFn,
    ) -> Self {
        ClaimsContext {
            system,
            resolver,
            operator,
            system_account: system_account.into(),
            trusted,
            loaded: Arc::new(|core: &ShardCore, acc: &str| core.account_table().by_name(acc).is_some()),
            on_update: Arc::new(|_: &mut ShardCore, _: &str, _: &str, _: Instant| {}),
            on_delete: Arc::new(|_: &mut ShardCore, _: &str, _: Instant| {}),
        }
    }

    /// Why the reference would not start this resolver (`Could not start resolver: ...`):
    /// the nats-based ones need an operator key to check deletes against.
    pub fn start_error(&self) -> Option<String> {
        let dir = matches!(self.resolver.kind(), ResolverKind::Full | ResolverKind::Cache);
        (dir && self.operator.delete_signers().next().is_none()).then(|| "no operator key found".to_string())
    }
}

/// The subjects (and queue groups) served for a resolver kind.
pub fn subjects(kind: ResolverKind) -> &'static [(&'static str, Option<&'static str>)] {
    match kind {
        ResolverKind::Memory | ResolverKind::Url => &[(ACCOUNT_UPDATE_OLD, None), (ACCOUNT_UPDATE, None)],
        ResolverKind::Full => &[
            (ACCOUNT_UPDATE_OLD, None),
            (ACCOUNT_UPDATE, None),
            (CLAIMS_UPDATE, None),
            (ACCOUNT_LOOKUP, None),
            (CLAIMS_PACK, Some(PACK_QUEUE)),
            (CLAIMS_LIST, None),
            (CLAIMS_DELETE, None),
        ],
        ResolverKind::Cache => &[
            (ACCOUNT_UPDATE_OLD, None),
            (ACCOUNT_UPDATE, None),
            (CLAIMS_UPDATE, None),
            (CLAIMS_LIST, None),
            (CLAIMS_DELETE, None),
        ],
    }
}

/// Subscribe the services on shard 0 (nothing without a system account).
pub fn install(post: &dyn Post, ctx: Arc<ClaimsContext>) {
    let job: Job = Box::new(move |core: &mut ShardCore, now: Instant| {
        if let Some(sys) = core.account_table().system() {
            subscribe(core, sys, ctx, now);
        }
    });
    post.post(0, job);
}

type Service = fn(&mut ShardCore, &ClaimsContext, &InternalMsg, Instant);

/// Subscribe the services for the resolver's kind in the system account `sys` of this
/// shard (the update subjects only if the resolver [accepts updates]). Returns the
/// subscriptions.
///
/// [accepts updates]: AccountResolver::accepts_updates
pub fn subscribe(core: &mut ShardCore, sys: AccountId, ctx: Arc<ClaimsContext>, now: Instant) -> Vec<SubId> {
    let kind = ctx.resolver.kind();
    let has_store = ctx.resolver.dir_store().is_some();
    let mut subs = Vec::new();
    for &(subject, queue) in subjects(kind) {
        let service: Service = match (kind, subject) {
            (_, ACCOUNT_UPDATE_OLD | ACCOUNT_UPDATE) if !ctx.resolver.accepts_updates() => continue,
            (ResolverKind::Memory | ResolverKind::Url, _) => live_update,
            _ if !has_store => continue,
            (_, ACCOUNT_UPDATE_OLD | ACCOUNT_UPDATE) => dir_account_update,
            (_, CLAIMS_UPDATE) => dir_claims_update,
            (_, ACCOUNT_LOOKUP) => lookup,
            (_, CLAIMS_PACK) => pack,
            (_, CLAIMS_LIST) => list,
            _ => delete,
        };
        let c = ctx.clone();
        let h: Handler =
            Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| service(core, &c, m, now));
        match core.subscribe_internal(sys, subject, queue, false, h, now) {
            Some(id) => subs.push(id),
            None => tracing::error!("Error setting up claims handling on {subject}"),
        }
    }
    subs
}

// ---- replies ----

#[derive(Serialize)]
struct Status<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    account: &'a str,
    code: u16,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
}

#[derive(Serialize)]
struct Failure<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    account: &'a str,
    code: u16,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
}

#[derive(Serialize)]
struct UpdateResponse<'a> {
    server: ServerInfo<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failure<'a>>,
}

/// Go marshals the list response from a map: keys sorted.
#[derive(Serialize)]
struct ListResponse<'a> {
    data: Vec<String>,
    server: ServerInfo<'a>,
}

/// Log the outcome and answer `{"server":...,"data":...}` or `{"server":...,"error":...}`
/// (the reference's `respondToUpdate`).
fn respond(
    core: &mut ShardCore,
    ctx: &ClaimsContext,
    m: &InternalMsg,
    acc: &str,
    msg: &str,
    err: Option<&str>,
    now: Instant,
) {
    match (err, acc.is_empty()) {
        (None, true) => tracing::debug!("{msg}"),
        (None, false) => tracing::debug!("{msg} - {acc}"),
        (Some(e), true) => tracing::error!("{msg} - {e}"),
        (Some(e), false) => tracing::error!("{msg} - {acc} - {e}"),
    }
    if m.reply.is_empty() {
        return;
    }
    let server = ctx.system.server.info();
    let body = match err {
        None => UpdateResponse {
            server,
            data: Some(Status {
                account: acc,
                code: 200,
                message: msg,
            }),
            error: None,
        },
        Some(e) => UpdateResponse {
            server,
            data: None,
            error: Some(Failure {
                account: acc,
                code: 500,
                description: format!("{msg} - {e}"),
            }),
        },
    };
    let body = crate::proto::gojson::to_vec(&body);
    core.publish_internal(m.account, &m.reply, b"", None, &body, now);
}

fn reply_raw(core: &mut ShardCore, m: &InternalMsg, body: &[u8], now: Instant) {
    core.publish_internal(m.account, &m.reply, b"", None, body, now);
}

// ---- shared checks ----

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The account named by an update subject: `$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE` or
/// `$SYS.ACCOUNT.<acc>.CLAIMS.UPDATE`.
fn update_account(subject: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(subject).ok()?;
    let tokens: Vec<&str> = s.split('.').collect();
    let idx = match tokens.len() {
        6 => 3,
        5 => 2,
        _ => return None,
    };
    tokens.get(idx).map(|t| t.to_string())
}

/// The blocking validation issues without time checks (the reference's `claimValidate`).
fn blocking_issues(claim: &AccountClaims) -> Option<String> {
    let vr = claim.validation(unix_now());
    vr.is_blocking(false)
        .then(|| format!("validation errors: [{}]", vr.errors().join(" ")))
}

/// The strict signing key check.
fn strict_violation(ctx: &ClaimsContext, claim: &AccountClaims) -> bool {
    ctx.operator.strict && claim.claims.issuer == ctx.operator.operator
}

const STRICT: &str = "operator requires issuer to be a signing key";
const MISMATCH: &str = "subject does not match jwt content";
const VALIDATION: &str = "account validation failed";

fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

// ---- MEMORY and URL: updates of registered accounts ----

fn live_update(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let Some(acc) = update_account(&m.subject) else {
        tracing::debug!("Received account claims update on bad subject {:?}", text(&m.subject));
        return;
    };
    const FAILED: &str = "jwt update resulted in error";
    if m.payload.is_empty() {
        return respond(
            core,
            ctx,
            m,
            &acc,
            "jwt update error",
            Some("request body is empty"),
            now,
        );
    }
    let jwt = text(&m.payload);
    let claim = match decode_account(&jwt) {
        Ok(c) => c,
        Err(e) => return respond(core, ctx, m, &acc, FAILED, Some(&e.to_string()), now),
    };
    if claim.claims.subject != acc {
        return respond(core, ctx, m, &acc, FAILED, Some(MISMATCH), now);
    }
    if !(ctx.loaded)(core, &acc) {
        return respond(core, ctx, m, &acc, "jwt update skipped", None, now);
    }
    if !(ctx.trusted)(&claim.claims.issuer) || claim.validation(unix_now()).is_blocking(true) {
        return respond(core, ctx, m, &acc, FAILED, Some(VALIDATION), now);
    }
    (ctx.on_update)(core, &acc, &jwt, now);
    respond(core, ctx, m, &acc, "jwt updated", None, now);
}

// ---- full and cache ----

/// The reply texts of the two nats-based resolvers.
struct Texts {
    failed: &'static str,
    invalid: &'static str,
    updated: &'static str,
    skipped: &'static str,
}

const FULL: Texts = Texts {
    failed: "jwt update resulted in error",
    invalid: "jwt validation failed",
    updated: "jwt updated",
    skipped: "",
};

const CACHE: Texts = Texts {
    failed: "jwt update cache resulted in error",
    invalid: "jwt update cache validation failed",
    updated: "jwt updated cache",
    skipped: "jwt update cache skipped",
};

/// The last checks and the store, shared by both update subjects (the account is the
/// JWT's subject by now).
fn store_update(
    core: &mut ShardCore,
    ctx: &ClaimsContext,
    m: &InternalMsg,
    claim: &AccountClaims,
    jwt: &str,
    now: Instant,
) {
    let Some(store) = ctx.resolver.dir_store() else { return };
    let (t, _) = texts(ctx);
    let acc = claim.claims.subject.as_str();
    if !(ctx.trusted)(&claim.claims.issuer) {
        return respond(core, ctx, m, acc, t.failed, Some(VALIDATION), now);
    }
    match store.save_if_newer(acc, jwt) {
        Err(e) => respond(core, ctx, m, acc, t.failed, Some(&e.to_string()), now),
        Ok(changed) => {
            if changed && (ctx.loaded)(core, acc) {
                (ctx.on_update)(core, acc, jwt, now);
            }
            respond(core, ctx, m, acc, t.updated, None, now)
        }
    }
}

fn texts(ctx: &ClaimsContext) -> (&'static Texts, bool) {
    match ctx.resolver.kind() {
        ResolverKind::Cache => (&CACHE, true),
        _ => (&FULL, false),
    }
}

/// `$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE` and the old form. The reference decodes the
/// message with its header block here (a request with headers does not decode).
fn dir_account_update(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let (t, cache) = texts(ctx);
    let Some(acc) = update_account(&m.subject) else {
        tracing::debug!(
            "DirResolver - jwt update skipped due to bad subject {:?}",
            text(&m.subject)
        );
        return;
    };
    let mut raw = m.header.clone().unwrap_or_default();
    raw.extend_from_slice(&m.payload);
    let jwt = text(&raw);
    let claim = match decode_account(&jwt) {
        Ok(c) => c,
        Err(e) => {
            let who = if cache { acc.as_str() } else { "n/a" };
            return respond(core, ctx, m, who, t.failed, Some(&e.to_string()), now);
        }
    };
    if !cache {
        if let Some(issues) = blocking_issues(&claim) {
            return respond(core, ctx, m, &claim.claims.subject, t.invalid, Some(&issues), now);
        }
    }
    if claim.claims.subject != acc {
        return respond(core, ctx, m, &acc, t.failed, Some(MISMATCH), now);
    }
    if strict_violation(ctx, &claim) {
        return respond(core, ctx, m, &acc, t.failed, Some(STRICT), now);
    }
    if cache {
        if !(ctx.loaded)(core, &acc) {
            return respond(core, ctx, m, &acc, t.skipped, None, now);
        }
        if let Some(issues) = blocking_issues(&claim) {
            return respond(core, ctx, m, &claim.claims.subject, t.invalid, Some(&issues), now);
        }
    }
    store_update(core, ctx, m, &claim, &jwt, now);
}

/// `$SYS.REQ.CLAIMS.UPDATE`: the account is the JWT's subject.
fn dir_claims_update(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let (t, cache) = texts(ctx);
    let jwt = text(&m.payload);
    let claim = match decode_account(&jwt) {
        Ok(c) => c,
        Err(e) => return respond(core, ctx, m, "n/a", t.failed, Some(&e.to_string()), now),
    };
    let acc = claim.claims.subject.clone();
    if strict_violation(ctx, &claim) {
        return respond(core, ctx, m, &acc, t.failed, Some(STRICT), now);
    }
    if cache && !(ctx.loaded)(core, &acc) {
        return respond(core, ctx, m, &acc, t.skipped, None, now);
    }
    if let Some(issues) = blocking_issues(&claim) {
        return respond(core, ctx, m, &acc, t.invalid, Some(&issues), now);
    }
    store_update(core, ctx, m, &claim, &jwt, now);
}

/// `$SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP` (full): the stored JWT, or an empty message if
/// there is none; nothing for an invalid key.
fn lookup(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let Some(store) = ctx.resolver.dir_store() else { return };
    if m.reply.is_empty() {
        return;
    }
    let subject = text(&m.subject);
    let tokens: Vec<&str> = subject.split('.').collect();
    let (6, Some(acc)) = (tokens.len(), tokens.get(3)) else {
        return;
    };
    match store.load(acc) {
        Ok(jwt) => reply_raw(core, m, jwt.as_bytes(), now),
        Err(StoreError::NotFound) => {
            tracing::debug!("DirResolver - Could not find account {acc:?}");
            reply_raw(core, m, b"", now);
        }
        Err(e) => tracing::error!("DirResolver - Error looking up account {acc:?}: {e}"),
    }
}

/// `$SYS.REQ.CLAIMS.PACK` (full): the request carries the asker's store hash; an empty
/// reply if it is ours, else one `key|jwt` message per JWT and an empty one to end.
fn pack(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let Some(store) = ctx.resolver.dir_store() else { return };
    if m.reply.is_empty() {
        return;
    }
    if m.payload.as_slice() != store.hash().as_slice() {
        for (key, jwt) in store.pack() {
            reply_raw(core, m, format!("{key}|{jwt}").as_bytes(), now);
        }
    }
    reply_raw(core, m, b"", now);
}

/// `$SYS.REQ.CLAIMS.LIST`: every stored account.
fn list(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let Some(store) = ctx.resolver.dir_store() else { return };
    if m.reply.is_empty() {
        return;
    }
    let data = store.list();
    tracing::debug!("list request responded with {} account ids", data.len());
    let body = crate::proto::gojson::to_vec(&ListResponse {
        data,
        server: ctx.system.server.info(),
    });
    reply_raw(core, m, &body, now);
}

/// The accounts a delete request names, or why it is refused.
fn delete_request(ctx: &ClaimsContext, store: &DirStore, payload: &str) -> (String, Result<Vec<String>, String>) {
    let g = match decode_generic(payload) {
        Ok(g) => g,
        Err(e) => return (String::new(), Err(e.to_string())),
    };
    let subject = g.claims.subject.clone();
    let check = || -> Result<Vec<String>, String> {
        if store.options().delete == DeleteMode::NoDelete {
            return Err("delete must be enabled in server config".into());
        }
        if g.claims.subject != g.claims.issuer {
            return Err("not self signed".into());
        }
        if !ctx.operator.delete_signers().any(|k| k == g.claims.issuer) {
            return Err("not trusted".into());
        }
        let Some(Value::Array(list)) = g.nats.get("accounts") else {
            return Err("malformed request".into());
        };
        let mut accounts = Vec::with_capacity(list.len());
        for entry in list {
            match entry.as_str() {
                Some(acc) if !acc.is_empty() && is_account(acc) => {
                    if acc == ctx.system_account {
                        return Err("not allowed to delete system account".into());
                    }
                    accounts.push(acc.to_string());
                }
                _ => return Err("malformed request".into()),
            }
        }
        Ok(accounts)
    };
    let r = check();
    (subject, r)
}

/// `$SYS.REQ.CLAIMS.DELETE`: a JWT self-signed by the operator or one of its signing keys,
/// `nats.accounts` the accounts to delete.
fn delete(core: &mut ShardCore, ctx: &ClaimsContext, m: &InternalMsg, now: Instant) {
    let Some(store) = ctx.resolver.dir_store() else { return };
    let (by, accounts) = delete_request(ctx, store, &text(&m.payload));
    let accounts = match accounts {
        Ok(a) => a,
        Err(e) => {
            let msg = format!("delete accounts request by {by} failed");
            return respond(core, ctx, m, "", &msg, Some(&e), now);
        }
    };
    let mut errs: Vec<String> = Vec::new();
    let mut passed = 0usize;
    for acc in &accounts {
        match store.delete(acc) {
            Ok(existed) => {
                passed += 1;
                if existed && (ctx.loaded)(core, acc) {
                    (ctx.on_delete)(core, acc, now);
                }
            }
            Err(e) => errs.push(e.to_string()),
        }
    }
    if errs.is_empty() {
        respond(core, ctx, m, "", &format!("deleted {passed} accounts"), None, now);
    } else {
        let msg = format!("deleted {passed} accounts, failed for {}", errs.len());
        respond(core, ctx, m, "", &msg, Some(&errs.join("\n")), now);
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
