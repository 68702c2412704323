//! The checks nats-server makes once every account of `accounts { }` is known: exports
//! (account token positions, latency tracking), and imports (known accounts, export
//! authorization, prefixes, cycles, duplicates). Errors are placed at the `accounts` key,
//! as the reference places them.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::exports::{PendingExport, PendingImport};
use super::subjects::{
    check_import_rewrite, has_wildcard, is_subset_match, is_valid_publish_subject, is_valid_subject, subjects_collide,
};
use super::Cx;
use crate::auth::config::{Export, ExportKind, Import, ResponseType, GLOBAL_ACCOUNT};
use crate::server::options::Options;
use conf::Position;
use std::collections::{HashMap, HashSet};

/// The reference's `MaxAccountCycleSearchDepth`.
const MAX_CYCLE_DEPTH: usize = 1024;

#[derive(Default, Clone)]
struct Auth {
    approved: HashSet<String>,
    token_pos: u32,
}

impl Auth {
    fn allows(&self, importer: &str, tokens: Option<&[&str]>) -> bool {
        if self.approved.is_empty() && self.token_pos == 0 {
            return true;
        }
        if self.token_pos > 0 {
            let Some(tokens) = tokens else { return false };
            return tokens.get(self.token_pos as usize - 1) == Some(&importer);
        }
        self.approved.contains(importer)
    }
}

#[derive(Default)]
struct Acc {
    /// Subject to its authorization (`None`: public), in insertion order.
    streams: Vec<(String, Option<Auth>)>,
    services: Vec<(String, Option<Auth>, ResponseType)>,
    /// (exporting account, from, to).
    stream_imports: Vec<(String, String, String)>,
    /// (exporting account, from = local subject, to = exported subject).
    service_imports: Vec<(String, String, String)>,
}

fn set_auth(auth: &mut Option<Auth>, subject: &str, accounts: &[String], pos: u32, listed: bool) -> Result<(), String> {
    if !listed && pos == 0 {
        return Ok(());
    }
    if pos > 0 {
        let tokens: Vec<&str> = subject.split('.').collect();
        if tokens.get(pos as usize - 1) != Some(&"*") {
            return Err("sublist: invalid subject".into());
        }
    }
    let a = auth.get_or_insert_with(Auth::default);
    a.token_pos = pos;
    a.approved.extend(accounts.iter().cloned());
    Ok(())
}

fn approved<'a, I>(exports: I, importer: &str, subject: &str) -> bool
where
    I: Iterator<Item = (&'a str, &'a Option<Auth>)> + Clone,
{
    if let Some((_, auth)) = exports.clone().find(|(s, _)| *s == subject) {
        return auth.as_ref().is_none_or(|a| a.allows(importer, None));
    }
    let tokens: Vec<&str> = subject.split('.').collect();
    for (s, auth) in exports {
        if is_subset_match(subject, s) {
            return auth.as_ref().is_none_or(|a| a.allows(importer, Some(&tokens)));
        }
    }
    false
}

struct Model {
    accs: HashMap<String, Acc>,
}

impl Model {
    fn stream_authorized(&self, exporter: &str, importer: &str, subject: &str) -> bool {
        let Some(acc) = self.accs.get(exporter) else {
            return false;
        };
        if acc.streams.is_empty() || !is_valid_subject(subject) {
            return false;
        }
        approved(acc.streams.iter().map(|(s, a)| (s.as_str(), a)), importer, subject)
    }

    fn service_authorized(&self, exporter: &str, importer: &str, subject: &str) -> bool {
        let Some(acc) = self.accs.get(exporter) else {
            return false;
        };
        if acc.services.is_empty() {
            return false;
        }
        approved(acc.services.iter().map(|(s, a, _)| (s.as_str(), a)), importer, subject)
    }

    fn stream_cycle(&self, acc: &str, to: &str, visited: &mut HashSet<String>) -> Result<(), String> {
        if visited.len() >= MAX_CYCLE_DEPTH {
            return Err("search cycle depth exhausted".into());
        }
        let Some(a) = self.accs.get(acc) else { return Ok(()) };
        if !a.streams.iter().any(|(s, _)| is_subset_match(to, s)) {
            return Ok(());
        }
        for (src, _, sto) in &a.stream_imports {
            if subjects_collide(to, sto) {
                if visited.contains(src) {
                    return Err("import forms a cycle".into());
                }
                visited.insert(acc.to_string());
                let t = if is_subset_match(sto, to) { sto.as_str() } else { to };
                self.stream_cycle(src, t, visited)?;
            }
        }
        Ok(())
    }

    fn service_cycle(&self, acc: &str, from: &str, visited: &mut HashSet<String>) -> Result<(), String> {
        if visited.len() >= MAX_CYCLE_DEPTH {
            return Err("search cycle depth exhausted".into());
        }
        let Some(a) = self.accs.get(acc) else { return Ok(()) };
        for (dst, sfrom, sto) in &a.service_imports {
            if subjects_collide(from, sto) {
                if visited.contains(dst) {
                    return Err("import forms a cycle".into());
                }
                visited.insert(acc.to_string());
                let f = if is_subset_match(sfrom, from) {
                    sfrom.as_str()
                } else {
                    from
                };
                self.service_cycle(dst, f, visited)?;
            }
        }
        Ok(())
    }

    fn add_stream_import(&mut self, importer: &str, exporter: &str, from: &str, to: &str) -> Result<(), String> {
        if !self.stream_authorized(exporter, importer, from) {
            return Err("stream import not authorized".into());
        }
        let to = if to.is_empty() { from } else { to };
        let visited = || HashSet::from([importer.to_string()]);
        self.stream_cycle(exporter, to, &mut visited())?;
        self.stream_cycle(exporter, from, &mut visited())?;
        let mut stored_to = to.to_string();
        if has_wildcard(from) && to != from {
            let dest = tokenize(to);
            check_import_rewrite(from, &dest).map_err(|err| {
                format!("failed to create mapping transform for stream import subject from {from:?} to {to:?}: {err}")
            })?;
            stored_to = untokenize(to);
        }
        let acc = self.accs.entry(importer.to_string()).or_default();
        if acc.stream_imports.iter().any(|(e, f, _)| e == exporter && f == from) {
            return Err("stream import already exists".into());
        }
        acc.stream_imports
            .push((exporter.to_string(), from.to_string(), stored_to));
        Ok(())
    }

    fn add_service_import(&mut self, importer: &str, exporter: &str, from: &str, to: &str) -> Result<(), String> {
        let to = if to.is_empty() { from } else { to };
        if !is_valid_subject(from) || !is_valid_subject(to) {
            return Err("sublist: invalid subject".into());
        }
        if !self.service_authorized(exporter, importer, to) {
            return Err("service import not authorized".into());
        }
        let from_t = if has_wildcard(to) {
            untokenize(from)
        } else {
            from.to_string()
        };
        self.service_cycle(exporter, &from_t, &mut HashSet::from([importer.to_string()]))?;
        let acc = self.accs.entry(importer.to_string()).or_default();
        if let Some((e, _, t)) = acc.service_imports.iter().find(|(e, f, _)| e == exporter && f == from) {
            return Err(format!(
                "duplicate service import subject {from:?}, previously used in import for account {e:?}, subject {t:?}"
            ));
        }
        let (mut from_s, mut to_s) = (from.to_string(), to.to_string());
        if has_wildcard(to) && to != from {
            to_s = untokenize(to);
            check_import_rewrite(&to_s, &tokenize(from)).map_err(|err| {
                format!(
                    "failed to create mapping transform for service import subject from {from:?} to {to_s:?}: {err}"
                )
            })?;
            from_s = untokenize(from);
        }
        acc.service_imports.push((exporter.to_string(), from_s, to_s));
        Ok(())
    }
}

/// `*` tokens become `$1`, `$2`, ... (the reference's `transformTokenize`).
fn tokenize(subject: &str) -> String {
    let mut n = 0;
    subject
        .split('.')
        .map(|t| {
            if t == "*" {
                n += 1;
                format!("${n}")
            } else {
                t.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// `$N` and `{{wildcard(N)}}` tokens become `*` (the reference's `transformUntokenize`).
fn untokenize(subject: &str) -> String {
    subject
        .split('.')
        .map(|t| {
            let b = t.as_bytes();
            let dollar = b.len() > 1 && b.first() == Some(&b'$') && b.get(1).is_some_and(|c| (b'1'..=b'9').contains(c));
            let wildcard = t.starts_with("{{") && t.ends_with("}}") && t.to_ascii_lowercase().contains("wildcard(");
            if dollar || wildcard {
                "*"
            } else {
                t
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Run the checks; `pos` is the `accounts` key.
pub(super) fn check(cx: &mut Cx, o: &Options, pos: &Position, exports: &[PendingExport], imports: &[PendingImport]) {
    let mut known: HashSet<&str> = o.security.accounts.iter().map(|a| a.name.as_str()).collect();
    if cx.global_account_defined {
        known.insert(GLOBAL_ACCOUNT);
    }
    let mut m = Model {
        accs: known.iter().map(|n| (n.to_string(), Acc::default())).collect(),
    };
    let listed = |cx: &mut Cx, x: &Export, what: &str| -> Vec<String> {
        let mut out = Vec::new();
        for a in x.accounts.iter().flatten() {
            if known.contains(a.as_str()) {
                out.push(a.clone());
            } else {
                cx.error(pos, format!("{a:?} account not defined for {what} export"));
            }
        }
        out
    };
    for p in exports.iter().filter(|p| matches!(p.export.kind, ExportKind::Stream)) {
        let x = &p.export;
        let accounts = listed(cx, x, "stream");
        let acc = m.accs.entry(p.account.clone()).or_default();
        let slot = match acc.streams.iter().position(|(s, _)| *s == x.subject) {
            Some(i) => i,
            None => {
                acc.streams.push((x.subject.clone(), None));
                acc.streams.len() - 1
            }
        };
        if let Some((_, auth)) = acc.streams.get_mut(slot) {
            if let Err(err) = set_auth(
                auth,
                &x.subject,
                &accounts,
                x.account_token_position,
                !accounts.is_empty(),
            ) {
                cx.error(pos, format!("Error adding stream export {:?}: {err}", x.subject));
            }
        }
    }
    for p in exports {
        let x = &p.export;
        let ExportKind::Service(svc) = &x.kind else { continue };
        let accounts = listed(cx, x, "service");
        let acc = m.accs.entry(p.account.clone()).or_default();
        let slot = match acc.services.iter().position(|(s, _, _)| *s == x.subject) {
            Some(i) => i,
            None => {
                acc.services.push((x.subject.clone(), None, ResponseType::Singleton));
                acc.services.len() - 1
            }
        };
        let Some((_, auth, rt)) = acc.services.get_mut(slot) else {
            continue;
        };
        if svc.response_type != ResponseType::Singleton {
            *rt = svc.response_type;
        }
        let rt = *rt;
        if let Err(err) = set_auth(
            auth,
            &x.subject,
            &accounts,
            x.account_token_position,
            !accounts.is_empty(),
        ) {
            cx.error(pos, format!("Error adding service export {:?}: {err}", x.subject));
            continue;
        }
        if let Some(lat) = &svc.latency {
            if o.security.no_system_account {
                cx.error(
                    pos,
                    format!(
                        "Error adding service latency sampling for {:?}: system account not setup",
                        x.subject
                    ),
                );
                continue;
            }
            let is_export = acc
                .services
                .iter()
                .any(|(s, _, _)| *s == lat.subject || is_subset_match(&lat.subject, s));
            let err = if !is_valid_publish_subject(&lat.subject) || is_export {
                Some("invalid publish subject")
            } else if rt != ResponseType::Singleton {
                Some("bad service response type")
            } else {
                None
            };
            if let Some(err) = err {
                cx.error(
                    pos,
                    format!(
                        "Error adding service latency sampling for {:?} on subject {:?}: {err}",
                        x.subject, lat.subject
                    ),
                );
                continue;
            }
        }
    }
    for p in imports {
        let Import::Stream(s) = &p.import else { continue };
        if !known.contains(s.account.as_str()) {
            cx.error(pos, format!("{:?} account not defined for stream import", s.account));
            continue;
        }
        let res = if !s.prefix.is_empty() {
            if has_wildcard(&s.prefix) {
                if m.stream_authorized(&s.account, &p.account, &s.subject) {
                    Err("stream import prefix can not contain wildcard tokens".to_string())
                } else {
                    Err("stream import not authorized".to_string())
                }
            } else {
                let sep = if s.prefix.ends_with('.') { "" } else { "." };
                let to = format!("{}{sep}{}", s.prefix, s.subject);
                m.add_stream_import(&p.account, &s.account, &s.subject, &to)
            }
        } else {
            m.add_stream_import(&p.account, &s.account, &s.subject, &s.to)
        };
        if let Err(err) = res {
            cx.error(pos, format!("Error adding stream import {:?}: {err}", s.subject));
        }
    }
    for p in imports {
        let Import::Service(s) = &p.import else { continue };
        if !known.contains(s.account.as_str()) {
            cx.error(pos, format!("{:?} account not defined for service import", s.account));
            continue;
        }
        let to = if s.to.is_empty() { &s.subject } else { &s.to };
        if let Err(err) = m.add_service_import(&p.account, &s.account, to, &s.subject) {
            cx.error(pos, format!("Error adding service import {:?}: {err}", s.subject));
        }
    }
}
