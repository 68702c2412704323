//! From the security configuration (`auth::config::SecurityConfig`) to what runs: the
//! account table (installed in the registry every shard reads) and the authenticator the
//! shards ask on CONNECT. Called at startup and on every reload.
//!
//! The system account (`$SYS`, or `system_account`, unless `no_system_account`) gets the
//! exports nats-server gives it, and every other account imports from it what
//! nats-server imports (`$SYS.REQ.USER.INFO`, the account-scoped CONNZ and STATZ).

use crate::auth::config::{self as cfg, SecurityConfig};
use crate::auth::users::{ConfigAuthenticator, NkeyUser, PasswordUser, UserDirectory};
use crate::core::accounts::build::{self, AccountSpec, ExportKind, ExportSpec, ImportSpec};
use crate::core::accounts::links::{LatencyTracking, ResponseType};
use crate::core::accounts::{AccountLimits, AccountRegistry, AccountTable, DEFAULT_SYSTEM_ACCOUNT, GLOBAL_NAME};
use crate::core::auth::{Authenticator, ConnType};
use crate::core::perms::{PermSpec, ResponsePerm, SubjectPerm, DEFAULT_RESPONSE_EXPIRES, DEFAULT_RESPONSE_MAX};
use crate::core::transform::{MapDest, MappingSet};
use std::sync::Arc;
use std::time::Duration;

/// Why the security configuration cannot be put in place.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("{0}")]
    Build(String),
}

/// What [`apply`] put in place.
pub struct Applied {
    pub table: Arc<AccountTable>,
    pub authenticator: Arc<dyn Authenticator>,
    /// The users behind `authenticator` (WebSocket clients get a variant of it).
    pub directory: UserDirectory,
}

/// The `username`/`password` or token options given on the command line or in a simple
/// `authorization` block (not users lists).
pub struct SimpleAuth<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub token: &'a str,
    /// `tls { verify_and_map }`: the client certificate names the user.
    pub tls_map: bool,
}

fn perm_side(p: &Option<cfg::SubjectPermission>) -> Option<SubjectPerm> {
    p.as_ref().map(|p| SubjectPerm {
        allow: p.allow.clone(),
        deny: p.deny.clone().unwrap_or_default(),
    })
}

/// Configured permissions in the core's form, with nats-server's response defaults.
pub fn perm_spec(p: &cfg::Permissions) -> PermSpec {
    let response = p.response.as_ref().map(|r| ResponsePerm {
        max: match r.max_msgs {
            0 => DEFAULT_RESPONSE_MAX,
            n if n < 0 => -1,
            n => n,
        },
        expires: match r.expires_nanos {
            0 => DEFAULT_RESPONSE_EXPIRES,
            n if n < 0 => Duration::ZERO,
            n => Duration::from_nanos(n as u64),
        },
    });
    PermSpec {
        publish: perm_side(&p.publish),
        subscribe: perm_side(&p.subscribe),
        response,
    }
    .normalized()
}

fn conn_types(list: &Option<Vec<String>>) -> Vec<ConnType> {
    let Some(list) = list else { return Vec::new() };
    let mut out: Vec<ConnType> = list
        .iter()
        .filter_map(|t| match t.as_str() {
            "STANDARD" => Some(ConnType::Standard),
            "WEBSOCKET" => Some(ConnType::Websocket),
            "MQTT" => Some(ConnType::Mqtt),
            "MQTT_WS" => Some(ConnType::MqttWs),
            "LEAFNODE" => Some(ConnType::Leafnode),
            "LEAFNODE_WS" => Some(ConnType::LeafnodeWs),
            "IN_PROCESS" => Some(ConnType::InProcess),
            _ => None,
        })
        .collect();
    if out.is_empty() {
        // Only unknown types: nobody may connect (an empty list would allow everybody).
        out.push(ConnType::InProcess);
    }
    out
}

fn response_type(r: cfg::ResponseType) -> ResponseType {
    match r {
        cfg::ResponseType::Singleton => ResponseType::Singleton,
        cfg::ResponseType::Streamed => ResponseType::Stream,
        cfg::ResponseType::Chunked => ResponseType::Chunked,
    }
}

fn export_spec(e: &cfg::Export) -> ExportSpec {
    let kind = match e.kind {
        cfg::ExportKind::Stream => ExportKind::Stream,
        cfg::ExportKind::Service(_) => ExportKind::Service,
    };
    let mut spec = ExportSpec::new(kind, &e.subject);
    spec.accounts = e.accounts.clone();
    spec.token_required = e.accounts.as_ref().is_some_and(|a| a.is_empty());
    spec.account_token_position = e.account_token_position as usize;
    if let cfg::ExportKind::Service(s) = &e.kind {
        spec.response = response_type(s.response_type);
        spec.threshold = s.response_threshold;
        spec.latency = s.latency.as_ref().map(|l| LatencyTracking {
            sampling: match l.sampling {
                cfg::LatencySampling::Percent(p) => p,
                cfg::LatencySampling::Headers => 0,
            },
            subject: l.subject.clone(),
        });
        spec.allow_trace = s.allow_trace;
    }
    spec
}

fn import_spec(i: &cfg::Import) -> ImportSpec {
    match i {
        cfg::Import::Stream(s) => {
            let local = if !s.prefix.is_empty() {
                let p = s.prefix.trim_end_matches('.');
                format!("{p}.{}", s.subject)
            } else {
                s.to.clone()
            };
            ImportSpec {
                kind: ExportKind::Stream,
                account: s.account.clone(),
                subject: s.subject.clone(),
                local,
                share: false,
                allow_trace: s.allow_trace,
                token_valid: false,
            }
        }
        cfg::Import::Service(s) => ImportSpec {
            kind: ExportKind::Service,
            account: s.account.clone(),
            subject: s.subject.clone(),
            local: s.to.clone(),
            share: s.share,
            allow_trace: false,
            token_valid: false,
        },
    }
}

/// Configured mappings as the transform module holds them (validated when the file was
/// read, so a failure here is not expected; such a mapping is left out).
fn mappings(list: &[cfg::Mapping]) -> MappingSet {
    let mut set = MappingSet::new();
    for m in list {
        let dests: Vec<MapDest> = m
            .destinations
            .iter()
            .map(|d| {
                if d.cluster.is_empty() {
                    MapDest::new(d.subject.clone(), d.weight)
                } else {
                    MapDest::in_cluster(d.subject.clone(), d.weight, d.cluster.clone())
                }
            })
            .collect();
        if let Err(e) = set.add(&m.source, &dests) {
            tracing::error!("Error adding mapping for {:?}: {e}", m.source);
        }
    }
    set
}

fn limits(l: &cfg::AccountLimits) -> AccountLimits {
    AccountLimits {
        max_connections: i64::from(l.max_connections),
        max_subscriptions: i64::from(l.max_subscriptions),
        max_payload: i64::from(l.max_payload),
        max_leafnodes: i64::from(l.max_leafnodes),
    }
}

/// The accounts of the configuration, `$G` and the system account included.
fn account_specs(sec: &SecurityConfig) -> (Vec<AccountSpec>, Option<String>) {
    let mut specs = vec![AccountSpec {
        name: GLOBAL_NAME.to_string(),
        mappings: mappings(&sec.global_mappings),
        ..Default::default()
    }];
    for a in &sec.accounts {
        if a.name == GLOBAL_NAME {
            continue;
        }
        specs.push(AccountSpec {
            name: a.name.clone(),
            nkey: a.nkey.clone(),
            limits: limits(&a.limits),
            exports: a.exports.iter().map(export_spec).collect(),
            imports: a.imports.iter().map(import_spec).collect(),
            mappings: mappings(&a.mappings),
            msg_trace: a
                .msg_trace
                .as_ref()
                .filter(|t| !t.dest.is_empty())
                .map(|t| crate::core::accounts::MsgTrace {
                    dest: t.dest.clone(),
                    sampling: t.sampling,
                }),
            ..Default::default()
        });
    }
    let system = if sec.no_system_account {
        None
    } else if !sec.system_account.is_empty() {
        Some(sec.system_account.clone())
    } else {
        if !specs.iter().any(|s| s.name == DEFAULT_SYSTEM_ACCOUNT) {
            specs.push(AccountSpec {
                name: DEFAULT_SYSTEM_ACCOUNT.to_string(),
                ..Default::default()
            });
        }
        Some(DEFAULT_SYSTEM_ACCOUNT.to_string())
    };
    if let Some(sys) = &system {
        if let Some(s) = specs.iter_mut().find(|s| s.name == *sys) {
            s.system = true;
        }
        crate::system::accounts::add_system_links(&mut specs, sys);
    }
    (specs, system)
}

/// Install the accounts of `sec` in `registry` and build the authenticator for them.
/// Nothing is installed when the configuration cannot be built.
pub fn apply(
    registry: &AccountRegistry,
    sec: &SecurityConfig,
    simple: &SimpleAuth<'_>,
) -> Result<Applied, SecurityError> {
    let (specs, system) = account_specs(sec);
    // Build once on a scratch registry: a refused import must leave the running table
    // untouched (a reload that fails changes nothing).
    let mut problems = Vec::new();
    AccountRegistry::new().install(|b| problems = build::build_accounts(b, &specs));
    if let Some(p) = problems.first() {
        return Err(SecurityError::Build(format!(
            "Error adding import {:?} to account {:?}: {}",
            p.subject, p.account, p.reason
        )));
    }
    let table = registry.install(|b| {
        build::build_accounts(b, &specs);
        let sys = system.as_deref().and_then(|n| b.table().by_name(n)).map(|d| d.id);
        b.set_system(sys);
    });
    let id_of = |name: &Option<String>| {
        let n = name.as_deref().unwrap_or(GLOBAL_NAME);
        table.by_name(n).map(|d| d.id)
    };
    let mut dir = UserDirectory {
        listed: !sec.users.is_empty() || !sec.nkeys.is_empty(),
        default_permissions: sec.default_permissions.as_ref().map(perm_spec),
        proxy_required: sec.proxy_required,
        tls_map: simple.tls_map,
        ..Default::default()
    };
    if !simple.token.is_empty() {
        dir.token = Some(simple.token.to_string());
    } else if !simple.username.is_empty() {
        dir.single = Some((simple.username.to_string(), simple.password.to_string()));
    }
    for u in &sec.users {
        let Some(account) = id_of(&u.account) else {
            return Err(SecurityError::Build(format!("account {:?} not found", u.account)));
        };
        dir.users.insert(
            u.username.clone(),
            PasswordUser {
                name: u.username.clone(),
                password: u.password.clone(),
                account,
                permissions: u.permissions.as_ref().map(perm_spec),
                conn_types: conn_types(&u.allowed_connection_types),
                proxy_required: u.proxy_required,
            },
        );
    }
    for u in &sec.nkeys {
        let Some(account) = id_of(&u.account) else {
            return Err(SecurityError::Build(format!("account {:?} not found", u.account)));
        };
        dir.nkeys.insert(
            u.nkey.clone(),
            NkeyUser {
                nkey: u.nkey.clone(),
                account,
                permissions: u.permissions.as_ref().map(perm_spec),
                conn_types: conn_types(&u.allowed_connection_types),
                proxy_required: u.proxy_required,
            },
        );
    }
    if !sec.no_auth_user.is_empty() {
        dir.no_auth_user = Some(sec.no_auth_user.clone());
    } else if let Some(sys) = system.as_deref().filter(|_| {
        // nats-server's convenience: with only `$G` and a configured system account that
        // has users, and no authorization block, clients without credentials still land
        // in `$G` through a hidden user (INFO keeps saying auth is required).
        !sec.system_account.is_empty() && sec.accounts.len() == 1 && !sec.authorization_block
    }) {
        let _ = sys;
        let hidden = format!("nats-{:08}", rand::random::<u32>() % 100_000_000);
        let global = table.by_name(GLOBAL_NAME).map(|d| d.id).unwrap_or_default();
        dir.users.insert(
            hidden.clone(),
            PasswordUser {
                name: hidden.clone(),
                password: hidden.get(5..).unwrap_or_default().to_string(),
                account: global,
                permissions: None,
                conn_types: Vec::new(),
                proxy_required: false,
            },
        );
        dir.no_auth_user = Some(hidden.clone());
        dir.hidden_no_auth_user = true;
    }
    Ok(Applied {
        table,
        authenticator: Arc::new(ConfigAuthenticator::new(dir.clone())),
        directory: dir,
    })
}

/// Put an auth callout in front of the configured users.
pub fn with_callout(
    applied: Applied,
    c: &cfg::AuthCallout,
    shared: &Arc<crate::core::stats::Shared>,
    keys: &Arc<crate::auth::callout::ServerKeys>,
    timeout: Duration,
) -> Result<Arc<dyn Authenticator>, SecurityError> {
    use crate::auth::callout::{Callout, CalloutAuthenticator, CalloutConfig};
    let name = if c.account.is_empty() {
        GLOBAL_NAME
    } else {
        c.account.as_str()
    };
    let Some(account) = applied.table.by_name(name).map(|d| d.id) else {
        tracing::error!("Authorization callout account {name:?} not valid");
        return Err(SecurityError::Build(format!(
            "Authorization callout account {name:?} not valid"
        )));
    };
    let cfg = CalloutConfig {
        issuer: c.issuer.clone(),
        account,
        account_name: name.to_string(),
        auth_users: c.auth_users.iter().cloned().collect(),
        xkey: (!c.xkey.is_empty()).then(|| c.xkey.clone()),
        allowed_accounts: c.allowed_accounts.clone(),
    };
    Ok(Arc::new(Callout(Arc::new(CalloutAuthenticator {
        inner: applied.authenticator,
        shared: shared.clone(),
        cfg,
        keys: keys.clone(),
        timeout,
    }))))
}
