//! Operator mode put in place: the trusted operators, the account resolver, the system
//! account, and the authenticator that checks user JWTs against them.

use super::security::SecurityError;
use crate::auth::config::SecurityConfig;
use crate::auth::jwt;
use crate::auth::operator::accounts::{OperatorAccounts, Trust};
use crate::auth::operator::OperatorAuthenticator;
use crate::auth::resolver::AccountResolver;
use crate::core::post::{Job, Post};
use crate::core::shard::ShardCore;
use crate::core::stats::Shared;
use crate::system::claims::{ClaimsContext, OperatorKeys};
use crate::system::SystemContext;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

/// Operator mode is on: operators or trusted keys are configured.
pub fn enabled(sec: &SecurityConfig) -> bool {
    !sec.operators.is_empty() || !sec.trusted_keys.is_empty()
}

fn resolver(sec: &SecurityConfig) -> Result<Arc<dyn AccountResolver>, SecurityError> {
    let cfg = sec
        .resolver
        .clone()
        .unwrap_or(crate::auth::config::ResolverConfig::Memory);
    crate::auth::resolver::from_config_with_tls(&cfg, &sec.resolver_preload, sec.resolver_tls.as_ref())
        .map_err(|e| SecurityError::Build(e.to_string()))
}

/// Build operator mode for `sec`: the accounts (the system account installed at once)
/// and the authenticator.
pub fn apply(
    shared: &Arc<Shared>,
    sec: &SecurityConfig,
    keys: &Arc<crate::auth::callout::ServerKeys>,
    timeout: std::time::Duration,
) -> Result<(Arc<OperatorAccounts>, crate::auth::callout::OperatorCallout), SecurityError> {
    let mut trust = Trust {
        keys: sec.trusted_keys.clone(),
        ..Default::default()
    };
    for op in &sec.operators {
        let claims = jwt::decode_operator(&op.jwt).map_err(|e| SecurityError::Build(e.to_string()))?;
        trust.operators.push(claims);
    }
    let system = if !sec.system_account.is_empty() {
        Some(sec.system_account.clone())
    } else {
        trust
            .operators
            .iter()
            .map(|o| o.nats.system_account.clone())
            .find(|s| !s.is_empty())
    };
    let system = system.filter(|_| !sec.no_system_account);
    let accounts = Arc::new(OperatorAccounts::new(
        trust,
        resolver(sec)?,
        system.clone(),
        shared.clone(),
    ));
    match system.as_deref() {
        Some(sys) => {
            if let Err(e) = accounts.ensure(sys) {
                tracing::debug!("System account {sys} not resolved: {e}");
                accounts.install();
            }
        }
        None => {
            accounts.install();
        }
    }
    let auth = OperatorAuthenticator {
        accounts: accounts.clone(),
        pinned: sec.resolver_pinned_accounts.iter().cloned().collect::<HashSet<_>>(),
        default_sentinel: (!sec.default_sentinel.is_empty()).then(|| sec.default_sentinel.clone()),
    };
    let auth = crate::auth::callout::OperatorCallout {
        inner: Arc::new(auth),
        keys: keys.clone(),
        timeout,
    };
    Ok((accounts, auth))
}

/// Ask every shard to check its clients again (after an account JWT changed).
fn recheck_everywhere(post: &Arc<dyn Post>) {
    for shard in 0..post.shards() {
        let job: Job = Box::new(|core: &mut ShardCore, now: Instant| core.recheck_clients(now));
        post.post(shard, job);
    }
}

/// The system account's claims services for operator mode, wired to `accounts`: an
/// update re-registers the account and re-checks connected clients on every shard.
pub fn claims_context(
    accounts: &Arc<OperatorAccounts>,
    system: Arc<SystemContext>,
    post: Arc<dyn Post>,
) -> Result<Arc<ClaimsContext>, SecurityError> {
    let operator = accounts
        .trust
        .operators
        .first()
        .map(OperatorKeys::from_claims)
        .unwrap_or_default();
    let trust = accounts.trust.clone();
    let mut ctx = ClaimsContext::new(
        system,
        accounts.resolver.clone(),
        operator,
        accounts.system_account.clone().unwrap_or_default(),
        Arc::new(move |issuer: &str| trust.trusts(issuer, "")),
    );
    if let Some(e) = ctx.start_error() {
        return Err(SecurityError::Build(format!("Could not start resolver: {e}")));
    }
    let known = accounts.clone();
    ctx.loaded = Arc::new(move |_core: &ShardCore, acc: &str| known.known(acc).is_some());
    let (upd, p1) = (accounts.clone(), post.clone());
    ctx.on_update = Arc::new(move |_core: &mut ShardCore, acc: &str, token: &str, _now: Instant| {
        if let Ok(claims) = upd.verify(acc, token) {
            upd.update(acc, claims, token);
            recheck_everywhere(&p1);
        }
    });
    let (del, p2) = (accounts.clone(), post);
    ctx.on_delete = Arc::new(move |_core: &mut ShardCore, acc: &str, _now: Instant| {
        del.forget(acc);
        recheck_everywhere(&p2);
    });
    Ok(Arc::new(ctx))
}
