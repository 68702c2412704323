//! Operator mode put in place: the trusted operators, the account resolver, the system
//! account, and the authenticator that checks user JWTs against them.

use super::security::SecurityError;
use crate::auth::config::SecurityConfig;
use crate::auth::jwt;
use crate::auth::operator::accounts::{OperatorAccounts, Trust};
use crate::auth::operator::OperatorAuthenticator;
use crate::auth::resolver::{AccountResolver, ResolverError, ResolverKind};
use crate::core::stats::Shared;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Operator mode is on: operators or trusted keys are configured.
pub fn enabled(sec: &SecurityConfig) -> bool {
    !sec.operators.is_empty() || !sec.trusted_keys.is_empty()
}

/// A `resolver: MEMORY` with its preloads (stand-in until the resolver module's own
/// builder is wired).
#[derive(Debug, Default)]
struct Preloaded(Mutex<HashMap<String, String>>);

impl AccountResolver for Preloaded {
    fn kind(&self) -> ResolverKind {
        ResolverKind::Memory
    }
    fn lookup(&self, account: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(account).cloned()
    }
    fn store(&self, account: &str, jwt: &str) -> Result<(), ResolverError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(account.to_string(), jwt.to_string());
        Ok(())
    }
    fn list(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}

fn resolver(sec: &SecurityConfig) -> Arc<dyn AccountResolver> {
    let r = Preloaded::default();
    for (k, v) in &sec.resolver_preload {
        let _ = r.store(k, v);
    }
    Arc::new(r)
}

/// Build operator mode for `sec`: the accounts (the system account installed at once)
/// and the authenticator.
pub fn apply(
    shared: &Arc<Shared>,
    sec: &SecurityConfig,
) -> Result<(Arc<OperatorAccounts>, OperatorAuthenticator), SecurityError> {
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
        resolver(sec),
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
    Ok((accounts, auth))
}
