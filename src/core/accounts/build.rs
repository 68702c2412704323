//! From account descriptions (config file or account JWTs) to the routing entries of
//! [`AccountDef`]s: each import is checked against the exporter's exports (public,
//! listed accounts, activation token, account token position) as nats-server checks it,
//! and becomes a [`StreamLink`] on the exporter or a [`ServiceImport`] on the importer.
//!
//! The builder rebuilds every account at once; tables are small and change rarely
//! (reload, a JWT update), and a full rebuild keeps links in both directions consistent.

use super::links::{LatencyTracking, ResponseType, Rewrite, ServiceImport, StreamLink, DEFAULT_RESPONSE_THRESHOLD};
use super::registry::TableBuilder;
use super::{AccountDef, AccountLimits};
use crate::core::subject::{has_wildcard, is_valid_subject, matches};
use crate::core::transform::MappingSet;
use std::collections::HashMap;
use std::time::Duration;

/// Stream or service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportKind {
    Stream,
    Service,
}

/// One export of an account.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportSpec {
    pub kind: ExportKind,
    pub subject: String,
    /// Accounts allowed to import; `None` is public.
    pub accounts: Option<Vec<String>>,
    /// An activation token is required (JWT `token_req`).
    pub token_required: bool,
    /// This 1-based token of the subject must be the importer's name (0: none).
    pub account_token_position: usize,
    pub response: ResponseType,
    pub threshold: Option<Duration>,
    pub latency: Option<LatencyTracking>,
    pub allow_trace: bool,
}

impl ExportSpec {
    pub fn new(kind: ExportKind, subject: &str) -> ExportSpec {
        ExportSpec {
            kind,
            subject: subject.to_string(),
            accounts: None,
            token_required: false,
            account_token_position: 0,
            response: ResponseType::Singleton,
            threshold: None,
            latency: None,
            allow_trace: false,
        }
    }
}

/// One import of an account.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportSpec {
    pub kind: ExportKind,
    /// The exporting account's name.
    pub account: String,
    /// The subject in the exporter's space.
    pub subject: String,
    /// Streams: where the subject lands here (`to`; a `prefix` is already applied);
    /// services: the local subject requesters publish to. Empty: the same subject.
    pub local: String,
    pub share: bool,
    pub allow_trace: bool,
    /// The activation token checked valid for this importer (JWT mode).
    pub token_valid: bool,
}

/// One account to build.
#[derive(Clone, Debug, Default)]
pub struct AccountSpec {
    pub name: String,
    pub nkey: Option<String>,
    pub limits: AccountLimits,
    pub exports: Vec<ExportSpec>,
    pub imports: Vec<ImportSpec>,
    pub mappings: MappingSet,
    pub disabled: bool,
    /// The account is the system account.
    pub system: bool,
    /// `msg_trace`: where sampled `traceparent` messages are traced.
    pub msg_trace: Option<super::MsgTrace>,
    /// The account JWT's `name` (operator mode).
    pub jwt_name: String,
}

/// An import the builder refused, with nats-server's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportProblem {
    pub account: String,
    pub subject: String,
    pub reason: String,
}

/// Does the export pattern `export` cover the import subject `import` (every subject
/// the import can see is exported)? nats-server's `isSubsetMatch`.
pub fn export_covers(export: &str, import: &str) -> bool {
    if export == import {
        return true;
    }
    // A literal import: plain matching. A wildcard import: compare token by token, where
    // an import wildcard needs an export wildcard at least as wide.
    let (et, it): (Vec<&str>, Vec<&str>) = (export.split('.').collect(), import.split('.').collect());
    for (i, t) in it.iter().enumerate() {
        let Some(e) = et.get(i) else { return false };
        match *e {
            ">" => return true,
            "*" => {
                if *t == ">" {
                    return false;
                }
            }
            lit => {
                if lit != *t {
                    return false;
                }
            }
        }
    }
    et.len() == it.len()
}

/// Is `importer` allowed to import `subject` from `exp`?
fn authorized(exp: &ExportSpec, importer: &str, subject: &str, token_valid: bool) -> bool {
    let public =
        exp.accounts.as_ref().is_none_or(|a| a.is_empty()) && !exp.token_required && exp.account_token_position == 0;
    if public {
        return true;
    }
    if exp.account_token_position > 0 {
        return subject.split('.').nth(exp.account_token_position - 1) == Some(importer);
    }
    if exp.token_required {
        return token_valid;
    }
    exp.accounts.as_ref().is_some_and(|a| a.iter().any(|n| n == importer))
}

/// The export of `exporter` that an import of `subject` uses.
fn find_export<'a>(exporter: &'a AccountSpec, kind: ExportKind, subject: &str) -> Option<&'a ExportSpec> {
    let mut of_kind = exporter.exports.iter().filter(|e| e.kind == kind);
    of_kind
        .clone()
        .find(|e| e.subject == subject)
        .or_else(|| of_kind.find(|e| export_covers(&e.subject, subject)))
}

/// Build every account of `specs` into `b` (ids from the registry). Returns the imports
/// that were refused (config mode reports them as errors, JWT mode logs them).
pub fn build_accounts(b: &mut TableBuilder<'_>, specs: &[AccountSpec]) -> Vec<ImportProblem> {
    let by_name: HashMap<&str, &AccountSpec> = specs.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut defs: HashMap<String, AccountDef> = HashMap::new();
    for s in specs {
        let mut d = b.plain(&s.name);
        d.nkey = s.nkey.clone();
        d.limits = s.limits;
        d.disabled = s.disabled;
        d.mappings = s.mappings.clone();
        d.msg_trace = s.msg_trace.clone();
        d.jwt_name = s.jwt_name.clone();
        defs.insert(s.name.clone(), d);
    }
    let mut problems = Vec::new();
    for s in specs {
        for imp in &s.imports {
            let problem = |reason: &str| ImportProblem {
                account: s.name.clone(),
                subject: imp.subject.clone(),
                reason: reason.to_string(),
            };
            let Some(exporter) = by_name.get(imp.account.as_str()) else {
                problems.push(problem("account not found"));
                continue;
            };
            if !is_valid_subject(imp.subject.as_bytes()) {
                problems.push(problem("invalid subject"));
                continue;
            }
            let Some(exp) = find_export(exporter, imp.kind, &imp.subject) else {
                problems.push(problem(match imp.kind {
                    ExportKind::Stream => "stream import not authorized",
                    ExportKind::Service => "service import not authorized",
                }));
                continue;
            };
            if !authorized(exp, &s.name, &imp.subject, imp.token_valid) {
                problems.push(problem(match imp.kind {
                    ExportKind::Stream => "stream import not authorized",
                    ExportKind::Service => "service import not authorized",
                }));
                continue;
            }
            let importer_id = defs.get(&s.name).map(|d| d.id).unwrap_or_default();
            let exporter_id = defs.get(&imp.account).map(|d| d.id).unwrap_or_default();
            let local = if imp.local.is_empty() {
                imp.subject.as_str()
            } else {
                imp.local.as_str()
            };
            match imp.kind {
                ExportKind::Stream => {
                    let rewrite = match rewrite(&imp.subject, local) {
                        Ok(r) => r,
                        Err(e) => {
                            problems.push(problem(&e));
                            continue;
                        }
                    };
                    if let Some(d) = defs.get_mut(&imp.account) {
                        d.stream_links.push(StreamLink {
                            from: imp.subject.as_bytes().into(),
                            importer: importer_id,
                            rewrite,
                            allow_trace: imp.allow_trace,
                        });
                    }
                }
                ExportKind::Service => {
                    let rewrite = match rewrite(local, &imp.subject) {
                        Ok(r) => r,
                        Err(e) => {
                            problems.push(problem(&e));
                            continue;
                        }
                    };
                    if let Some(d) = defs.get_mut(&s.name) {
                        d.service_imports.push(ServiceImport {
                            local: local.as_bytes().into(),
                            exporter: exporter_id,
                            rewrite,
                            export_subject: exp.subject.as_bytes().into(),
                            response: exp.response,
                            threshold: exp.threshold.unwrap_or(DEFAULT_RESPONSE_THRESHOLD),
                            share: imp.share,
                            latency: exp.latency.clone(),
                            allow_trace: imp.allow_trace || exp.allow_trace,
                        });
                    }
                }
            }
        }
    }
    for s in specs {
        if let Some(d) = defs.remove(&s.name) {
            b.add(d);
        }
    }
    problems
}

/// How a subject `from` (one side of an import) becomes `to` (the other side).
fn rewrite(from: &str, to: &str) -> Result<Rewrite, String> {
    if from == to {
        return Ok(Rewrite::Same);
    }
    if !has_wildcard(from.as_bytes()) && !has_wildcard(to.as_bytes()) {
        return Ok(Rewrite::Literal(to.as_bytes().into()));
    }
    // A prefix: `to` ends with `from` after literal tokens (`prefix.` + subject).
    if let Some(p) = to.strip_suffix(from) {
        if p.ends_with('.') && !has_wildcard(p.trim_end_matches('.').as_bytes()) {
            return Ok(Rewrite::Prefix(p.as_bytes().into()));
        }
    }
    // Wildcards of the destination stand for the source's in order (`*` is `$1`, ...).
    let dest = crate::core::transform::tokenize(to);
    crate::core::transform::SubjectTransform::new_strict(from, &dest)
        .map(|t| Rewrite::Transform(Box::new(t)))
        .map_err(|e| e.to_string())
}

/// Would a literal message on `subject` match `pattern`? (Re-exported for callers that
/// check exports by hand.)
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    matches(pattern.as_bytes(), subject.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::accounts::AccountRegistry;

    #[test]
    fn coverage_of_imports_by_exports() {
        assert!(export_covers("foo.>", "foo.bar"));
        assert!(export_covers("foo.>", "foo.*"));
        assert!(export_covers("foo.*", "foo.bar"));
        assert!(!export_covers("foo.*", "foo.>"));
        assert!(!export_covers("foo.bar", "foo.*"));
        assert!(!export_covers("foo.*", "foo.bar.baz"));
        assert!(export_covers(">", "a.b.c"));
    }

    fn spec(name: &str) -> AccountSpec {
        AccountSpec {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn private_public_and_token_position_exports() {
        let mut a = spec("A");
        let mut private = ExportSpec::new(ExportKind::Service, "svc.private");
        private.accounts = Some(vec!["B".into()]);
        a.exports.push(private);
        a.exports.push(ExportSpec::new(ExportKind::Stream, "feed.>"));
        let mut pos = ExportSpec::new(ExportKind::Service, "req.*.x");
        pos.account_token_position = 2;
        a.exports.push(pos);
        let imp = |kind, subject: &str, local: &str| ImportSpec {
            kind,
            account: "A".into(),
            subject: subject.into(),
            local: local.into(),
            share: false,
            allow_trace: false,
            token_valid: false,
        };
        let mut b = spec("B");
        b.imports.push(imp(ExportKind::Service, "svc.private", ""));
        b.imports.push(imp(ExportKind::Stream, "feed.x", "fromA.feed.x"));
        b.imports.push(imp(ExportKind::Service, "req.B.x", "r"));
        let mut c = spec("C");
        c.imports.push(imp(ExportKind::Service, "svc.private", ""));
        c.imports.push(imp(ExportKind::Service, "req.B.x", ""));
        c.imports.push(imp(ExportKind::Stream, "other", ""));
        let r = AccountRegistry::new();
        let mut problems = Vec::new();
        let t = r.install(|tb| problems = build_accounts(tb, &[a, b, c]));
        let reasons: Vec<(String, String)> = problems
            .iter()
            .map(|p| (p.account.clone(), p.subject.clone()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("C".to_string(), "svc.private".to_string()),
                ("C".into(), "req.B.x".into()),
                ("C".into(), "other".into())
            ]
        );
        let bdef = t.by_name("B").unwrap();
        assert_eq!(bdef.service_imports.len(), 2);
        assert_eq!(
            bdef.service_imports[1].rewrite,
            Rewrite::Literal(b"req.B.x".to_vec().into())
        );
        let adef = t.by_name("A").unwrap();
        assert_eq!(adef.stream_links.len(), 1);
        assert_eq!(
            adef.stream_links[0].rewrite,
            Rewrite::Literal(b"fromA.feed.x".to_vec().into())
        );
    }
}
