//! Accounts of operator mode: account JWTs from the resolver, checked against the trusted
//! operators, turned into account descriptions (limits, exports, imports with their
//! activation tokens, mappings) and installed in the account registry.
//!
//! Ownership: one [`OperatorAccounts`] per server, shared by the shards' authenticator
//! and the system account's claims services; it locks its own map (connect time and
//! claim updates only).

use crate::auth::jwt::{self, AccountClaims, ClaimsCommon};
use crate::auth::resolver::AccountResolver;
use crate::core::accounts::build::{self, AccountSpec, ExportKind, ExportSpec, ImportSpec};
use crate::core::accounts::links::{LatencyTracking, ResponseType};
use crate::core::accounts::{AccountLimits, AccountRegistry, AccountTable, GLOBAL_NAME};
use crate::core::transform::{MapDest, MappingSet};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Who may issue account JWTs: the trusted operators (and their signing keys), or bare
/// trusted keys.
#[derive(Debug, Default, Clone)]
pub struct Trust {
    pub operators: Vec<jwt::OperatorClaims>,
    /// `trusted_keys`: operator public keys trusted without an operator JWT.
    pub keys: Vec<String>,
}

impl Trust {
    /// Is `issuer` allowed to sign the account JWT of `subject`?
    pub fn trusts(&self, issuer: &str, subject: &str) -> bool {
        self.keys.iter().any(|k| k == issuer) || self.operators.iter().any(|o| o.did_sign(issuer, subject))
    }
}

/// An account known from its JWT.
#[derive(Debug, Clone)]
pub struct KnownAccount {
    pub claims: AccountClaims,
    pub jwt: String,
}

/// The accounts of operator mode.
#[derive(Debug)]
pub struct OperatorAccounts {
    pub trust: Trust,
    pub resolver: Arc<dyn AccountResolver>,
    pub system_account: Option<String>,
    registry: Arc<SharedRegistry>,
    known: Mutex<BTreeMap<String, KnownAccount>>,
}

/// The registry the accounts are installed in (the server's, in `Shared`).
pub struct SharedRegistry(pub Arc<crate::core::stats::Shared>);

impl std::fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedRegistry")
    }
}

impl SharedRegistry {
    fn registry(&self) -> &AccountRegistry {
        &self.0.accounts
    }
}

/// Why an account JWT is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    #[error("account not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    #[error("Account JWT not signed by trusted operator")]
    Untrusted,
}

impl OperatorAccounts {
    pub fn new(
        trust: Trust,
        resolver: Arc<dyn AccountResolver>,
        system_account: Option<String>,
        shared: Arc<crate::core::stats::Shared>,
    ) -> Self {
        OperatorAccounts {
            trust,
            resolver,
            system_account,
            registry: Arc::new(SharedRegistry(shared)),
            known: Mutex::new(BTreeMap::new()),
        }
    }

    /// Decode and check an account JWT (issued by a trusted operator, for `account`).
    pub fn verify(&self, account: &str, token: &str) -> Result<AccountClaims, AccountError> {
        let claims = jwt::decode_account(token).map_err(|e| AccountError::Invalid(e.to_string()))?;
        if claims.claims.subject != account {
            return Err(AccountError::Invalid("subject does not match".into()));
        }
        if !self.trust.trusts(&claims.claims.issuer, &claims.claims.subject) {
            return Err(AccountError::Untrusted);
        }
        Ok(claims)
    }

    /// The claims of a known account.
    pub fn known(&self, account: &str) -> Option<KnownAccount> {
        self.lock().get(account).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, KnownAccount>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make sure `account` (and the accounts it imports from, transitively) is known,
    /// fetching from the resolver synchronously. Use only where a lookup cannot wait on
    /// the network, or on a resolver thread.
    pub fn ensure(&self, account: &str) -> Result<Arc<AccountTable>, AccountError> {
        let mut added = false;
        let mut todo = vec![account.to_string()];
        let mut depth = 0;
        while let Some(a) = todo.pop() {
            depth += 1;
            if depth > 1024 {
                break;
            }
            if self.lock().contains_key(&a) {
                continue;
            }
            let Some(token) = self.resolver.lookup(&a) else {
                if a == account {
                    return Err(AccountError::NotFound);
                }
                continue;
            };
            let claims = match self.verify(&a, &token) {
                Ok(c) => c,
                Err(e) if a == account => return Err(e),
                Err(_) => continue,
            };
            for i in &claims.nats.imports {
                todo.push(i.account.clone());
            }
            self.lock().insert(a, KnownAccount { claims, jwt: token });
            added = true;
        }
        if added || self.registry.registry().snapshot().by_name(account).is_none() {
            return Ok(self.install());
        }
        Ok(self.registry.registry().snapshot())
    }

    /// Take an account JWT that was verified elsewhere (a claims update, a fetch that
    /// ended on another thread) and install the table again.
    pub fn update(&self, account: &str, claims: AccountClaims, token: &str) -> Arc<AccountTable> {
        self.lock().insert(
            account.to_string(),
            KnownAccount {
                claims,
                jwt: token.to_string(),
            },
        );
        self.install()
    }

    /// Forget an account (a delete through `$SYS`).
    pub fn forget(&self, account: &str) -> Arc<AccountTable> {
        self.lock().remove(account);
        self.install()
    }

    /// Install every known account (plus `$G` and the system account) in the registry.
    pub fn install(&self) -> Arc<AccountTable> {
        let now = unix_now();
        let known = self.lock().clone();
        let mut specs = vec![AccountSpec {
            name: GLOBAL_NAME.to_string(),
            ..Default::default()
        }];
        for (name, k) in &known {
            specs.push(spec_from_claims(name, &k.claims, &known, now));
        }
        if let Some(sys) = &self.system_account {
            if !specs.iter().any(|s| s.name == *sys) {
                specs.push(AccountSpec {
                    name: sys.clone(),
                    nkey: Some(sys.clone()),
                    ..Default::default()
                });
            }
            if let Some(s) = specs.iter_mut().find(|s| s.name == *sys) {
                s.system = true;
            }
            crate::system::accounts::add_system_links(&mut specs, sys);
        }
        let sys = self.system_account.clone();
        self.registry.registry().install(|b| {
            for p in build::build_accounts(b, &specs) {
                tracing::debug!(
                    "Error adding import {:?} to account {:?}: {}",
                    p.subject,
                    p.account,
                    p.reason
                );
            }
            let id = sys.as_deref().and_then(|n| b.table().by_name(n)).map(|d| d.id);
            b.set_system(id);
        })
    }
}

fn response_type(s: &str) -> ResponseType {
    match s {
        "Stream" => ResponseType::Stream,
        "Chunked" => ResponseType::Chunked,
        _ => ResponseType::Singleton,
    }
}

/// Is the activation token of `imp` (an import of `importer`) valid now for the export
/// `exp` of `exporter`?
fn activation_ok(
    importer: &str,
    imp: &jwt::Import,
    exporter: Option<&AccountClaims>,
    exp: Option<&jwt::Export>,
    now: u64,
) -> bool {
    if imp.token.is_empty() {
        return false;
    }
    let mut vr = jwt::validation::ValidationResults::new();
    imp.validate(importer, &mut vr);
    if vr.is_blocking(true) {
        return false;
    }
    let Ok(act) = jwt::decode_activation(&imp.token) else {
        return false;
    };
    if act.validate(now).is_err() {
        return false;
    }
    // Issued by the exporter itself, or by one of its signing keys on its behalf.
    if !act.nats.issuer_account.is_empty() {
        let Some(e) = exporter else { return false };
        if act.nats.issuer_account != e.claims.subject || !e.nats.signing_keys.contains(&act.claims.issuer) {
            return false;
        }
    }
    if act.claims.expires != 0 && act.claims.expires <= now as i64 {
        return false;
    }
    exp.is_none_or(|x| !x.revocations.is_revoked(&act.claims.subject, act.claims.issued_at))
}

/// The account description nats-server builds from an account JWT.
pub fn spec_from_claims(
    name: &str,
    c: &AccountClaims,
    known: &BTreeMap<String, KnownAccount>,
    now: u64,
) -> AccountSpec {
    let n = &c.nats;
    let limits = AccountLimits {
        max_connections: n.limits.account.conn,
        max_subscriptions: n.limits.nats.subs,
        max_payload: n.limits.nats.payload,
        max_leafnodes: n.limits.account.leaf_node_conn,
    };
    let exports = n
        .exports
        .iter()
        .map(|e| {
            let kind = if e.is_service() {
                ExportKind::Service
            } else {
                ExportKind::Stream
            };
            let mut spec = ExportSpec::new(kind, &e.subject);
            spec.token_required = e.token_req;
            spec.account_token_position = e.account_token_position as usize;
            spec.response = response_type(&e.response_type);
            spec.threshold = (e.response_threshold > 0).then(|| Duration::from_nanos(e.response_threshold as u64));
            spec.latency = e.latency.as_ref().map(|l| LatencyTracking {
                sampling: u8::try_from(l.sampling.0.clamp(0, 100)).unwrap_or(100),
                subject: l.results.clone(),
            });
            spec.allow_trace = e.allow_trace;
            spec
        })
        .collect();
    let imports = n
        .imports
        .iter()
        .filter(|i| i.is_service() || i.is_stream())
        .map(|i| {
            let exporter = known.get(&i.account).map(|k| &k.claims);
            let exp = exporter.and_then(|e| {
                e.nats
                    .exports
                    .iter()
                    .find(|x| x.export_type == i.import_type && build::export_covers(&x.subject, &i.subject))
            });
            let token_valid = activation_ok(name, i, exporter, exp, now);
            let mut subject = i.subject.clone();
            let (kind, local) = if i.is_service() {
                let local = if !i.local_subject.is_empty() {
                    i.local_subject.clone()
                } else if !i.to.is_empty() {
                    // The deprecated `to` of a service import names the exporter's
                    // subject; `subject` is then the local one.
                    subject = i.to.clone();
                    i.subject.clone()
                } else {
                    String::new()
                };
                (ExportKind::Service, local)
            } else {
                let local = if !i.local_subject.is_empty() {
                    i.local_subject.clone()
                } else if !i.to.is_empty() {
                    // Stream `to` is a prefix (jwt v2 keeps the old meaning).
                    format!("{}.{}", i.to.trim_end_matches('.'), i.subject)
                } else {
                    String::new()
                };
                (ExportKind::Stream, local)
            };
            ImportSpec {
                kind,
                account: i.account.clone(),
                subject,
                local,
                share: i.share,
                allow_trace: i.allow_trace,
                token_valid,
            }
        })
        .collect();
    let mut mappings = MappingSet::new();
    for (src, dests) in &n.mappings {
        let d: Vec<MapDest> = dests
            .iter()
            .map(|w| {
                if w.cluster.is_empty() {
                    MapDest::new(w.subject.clone(), w.weight())
                } else {
                    MapDest::in_cluster(w.subject.clone(), w.weight(), w.cluster.clone())
                }
            })
            .collect();
        if let Err(e) = mappings.add(src, &d) {
            tracing::debug!("Error adding mapping for {src:?} to account {name:?}: {e}");
        }
    }
    AccountSpec {
        name: name.to_string(),
        nkey: Some(c.subject().to_string()),
        limits,
        exports,
        imports,
        mappings,
        disabled: c.claims.expires != 0 && c.claims.expires <= now as i64,
        system: false,
        jwt_name: c.claims.name.clone(),
        msg_trace: n
            .trace
            .as_ref()
            .filter(|t| crate::core::trace::is_valid_publish_subject(t.destination.as_bytes()))
            .map(|t| crate::core::accounts::MsgTrace {
                dest: t.destination.clone(),
                sampling: t.sampling.clamp(0, 100) as u8,
            }),
    }
}
