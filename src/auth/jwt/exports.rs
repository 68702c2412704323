//! Account exports (streams and services other accounts may import) and imports (with
//! their optional activation tokens), and the checks jwt v2 applies to both lists.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use super::json::{go_quote, is_default, is_false};
use super::revocation::RevocationList;
use super::types::{ExportType, Info};
use super::validation::{has_wildcards, is_contained_in, validate_subject, ValidationResults};

/// Service response types.
pub const RESPONSE_TYPE_SINGLETON: &str = "Singleton";
pub const RESPONSE_TYPE_STREAM: &str = "Stream";
pub const RESPONSE_TYPE_CHUNKED: &str = "Chunked";

/// Latency sampling: `0` is "headers" (sample when the request says so), else 1..=100 %.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplingRate(pub i64);

impl Serialize for SamplingRate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            0 => s.serialize_str("headers"),
            1..=100 => s.serialize_i64(self.0),
            _ => Err(serde::ser::Error::custom("unknown sampling rate")),
        }
    }
}

impl<'de> Deserialize<'de> for SamplingRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(i64),
            Text(String),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Num(n)) => Ok(SamplingRate(n)),
            Ok(Raw::Text(t)) if t.eq_ignore_ascii_case("headers") => Ok(SamplingRate(0)),
            _ => Err(de::Error::custom("sampling must be \"headers\" or a number")),
        }
    }
}

/// Latency tracking of a service export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceLatency {
    pub sampling: SamplingRate,
    pub results: String,
}

/// One export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Export {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(rename = "type", skip_serializing_if = "is_default")]
    pub export_type: ExportType,
    /// Importers need an activation token.
    #[serde(skip_serializing_if = "is_false")]
    pub token_req: bool,
    #[serde(skip_serializing_if = "RevocationList::is_empty")]
    pub revocations: RevocationList,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub response_type: String,
    /// Nanoseconds.
    #[serde(skip_serializing_if = "is_default")]
    pub response_threshold: i64,
    #[serde(rename = "service_latency", skip_serializing_if = "Option::is_none")]
    pub latency: Option<ServiceLatency>,
    #[serde(skip_serializing_if = "is_default")]
    pub account_token_position: u64,
    #[serde(skip_serializing_if = "is_false")]
    pub advertise: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub allow_trace: bool,
    #[serde(flatten)]
    pub info: Info,
}

impl Export {
    pub fn is_service(&self) -> bool {
        self.export_type == ExportType::Service
    }

    pub fn is_stream(&self) -> bool {
        self.export_type == ExportType::Stream
    }

    /// A service with a single response (the default response type).
    pub fn is_single_response(&self) -> bool {
        self.is_service() && (self.response_type == RESPONSE_TYPE_SINGLETON || self.response_type.is_empty())
    }

    fn validate(&self, vr: &mut ValidationResults) {
        let q = go_quote;
        if !self.is_service() && !self.is_stream() {
            vr.add_error(format!("invalid export type: {}", q(self.export_type.as_str())));
        }
        let rt = self.response_type.as_str();
        if self.is_service()
            && !matches!(
                rt,
                "" | RESPONSE_TYPE_SINGLETON | RESPONSE_TYPE_CHUNKED | RESPONSE_TYPE_STREAM
            )
        {
            vr.add_error(format!("invalid response type for service: {}", q(rt)));
        }
        if self.is_stream() {
            if !rt.is_empty() {
                vr.add_error(format!("invalid response type for stream: {}", q(rt)));
            }
            if self.allow_trace {
                vr.add_error("AllowTrace only valid for service export");
            }
        }
        if let Some(l) = &self.latency {
            if !self.is_service() {
                vr.add_error("latency tracking only permitted for services");
            }
            if l.sampling.0 != 0 && !(1..=100).contains(&l.sampling.0) {
                vr.add_error("sampling percentage needs to be between 1-100");
            }
            validate_subject(&l.results, vr);
            if has_wildcards(&l.results) {
                vr.add_error("results subject can not contain wildcards");
            }
        }
        if self.response_threshold < 0 {
            vr.add_error("negative response threshold is invalid");
        }
        if self.response_threshold > 0 && !self.is_service() {
            vr.add_error("response threshold only valid for services");
        }
        validate_subject(&self.subject, vr);
        let pos = self.account_token_position;
        if pos > 0 {
            let subj = &self.subject;
            if !has_wildcards(subj) {
                vr.add_error(format!(
                    "Account Token Position can only be used with wildcard subjects: {subj}"
                ));
            } else {
                let tokens: Vec<&str> = subj.split('.').collect();
                match usize::try_from(pos - 1).ok().and_then(|i| tokens.get(i)) {
                    None => vr.add_error(format!(
                        "Account Token Position {pos} exceeds length of subject '{subj}'"
                    )),
                    Some(&tk) if tk != "*" => vr.add_error(format!(
                        "Account Token Position {pos} matches '{tk}' but must match a * in: {subj}"
                    )),
                    Some(_) => {}
                }
            }
        }
        self.info.validate(vr);
    }
}

/// One import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Import {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// From the exporter's point of view for streams, the importer's for services.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// The exporting account.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    /// Activation token (an activation JWT).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// Deprecated: use `local_subject`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub to: String,
    /// Local subject, may reference wildcards of `subject` as `$1`, `$2`...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub local_subject: String,
    #[serde(rename = "type", skip_serializing_if = "is_default")]
    pub import_type: ExportType,
    #[serde(skip_serializing_if = "is_false")]
    pub share: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub allow_trace: bool,
}

impl Import {
    pub fn is_service(&self) -> bool {
        self.import_type == ExportType::Service
    }

    pub fn is_stream(&self) -> bool {
        self.import_type == ExportType::Stream
    }

    /// Checks this import of the account `account` (its public key).
    pub fn validate(&self, account: &str, vr: &mut ValidationResults) {
        let q = go_quote;
        if !self.is_service() && !self.is_stream() {
            vr.add_error(format!("invalid import type: {}", q(self.import_type.as_str())));
        }
        if self.is_service() && self.allow_trace {
            vr.add_error("AllowTrace only valid for stream import");
        }
        if self.account.is_empty() {
            vr.add_error("account to import from is not specified");
        }
        if !self.to.is_empty() {
            vr.add_warning("the field to has been deprecated (use LocalSubject instead)");
        }
        validate_subject(&self.subject, vr);
        if !self.local_subject.is_empty() {
            validate_renaming_subject(&self.local_subject, &self.subject, vr);
            if !self.to.is_empty() {
                vr.add_error("Local Subject replaces To");
            }
        }
        if self.share && !self.is_service() {
            vr.add_error(format!(
                "sharing information (for latency tracking) is only valid for services: {}",
                q(&self.subject)
            ));
        }
        if self.token.is_empty() {
            return;
        }
        let act = match super::decode::decode_activation(&self.token) {
            Ok(a) => a,
            Err(_) => {
                vr.add_error(format!(
                    "import {} contains an invalid activation token",
                    q(&self.subject)
                ));
                return;
            }
        };
        if act.claims.issuer != self.account && act.nats.issuer_account != self.account {
            vr.add_error(format!(
                "activation token doesn't match account for import {}",
                q(&self.subject)
            ));
        }
        if act.claims.subject != account {
            vr.add_error(format!(
                "activation token doesn't match account it is being included in, {}",
                q(&self.subject)
            ));
        }
        if act.nats.import_type != self.import_type {
            vr.add_error(format!(
                "mismatch between token import type {} and type of import {}",
                act.nats.import_type, self.import_type
            ));
        }
        act.validate_content(vr);
        let subj = if self.is_service() && !self.to.is_empty() {
            &self.to
        } else {
            &self.subject
        };
        if !is_contained_in(subj, &act.nats.import_subject) {
            vr.add_error(format!(
                "activation token import subject {} doesn't match import {}",
                q(&act.nats.import_subject),
                q(&self.subject)
            ));
        }
    }
}

/// jwt v2's `RenamingSubject.Validate`: `local` renames `from`, with `$N` references to the
/// wildcards of `from`.
fn validate_renaming_subject(local: &str, from: &str, vr: &mut ValidationResults) {
    validate_subject(local, vr);
    if from.is_empty() {
        vr.add_error("subject cannot be empty");
    }
    if local.contains(' ') {
        vr.add_error(format!("subject {} cannot have spaces", go_quote(local)));
    }
    let ends_fwc = |s: &str| s == ">" || s.ends_with(".>");
    if ends_fwc(local) != ends_fwc(from) {
        vr.add_error("both, renaming subject and subject, need to end or not end in >");
    }
    let from_cnt = from.split('.').filter(|t| *t == "*").count() as i64;
    let mut ref_cnt = 0i64;
    for tk in local.split('.') {
        if tk == "*" {
            ref_cnt += 1;
        }
        if tk.len() < 2 {
            continue;
        }
        if let Some(idx) = tk.strip_prefix('$').and_then(|n| n.parse::<i64>().ok()) {
            if idx > from_cnt {
                vr.add_error(format!(
                    "Reference ${idx} in {} reference * in {} that do not exist",
                    go_quote(local),
                    go_quote(from)
                ));
            } else {
                ref_cnt += 1;
            }
        }
    }
    if ref_cnt != from_cnt {
        vr.add_error("subject does not contain enough * or reference wildcards $[0-9]");
    }
}

/// `local_subject` with its `$N` references turned into `*` (jwt v2's `ToSubject`).
pub fn renaming_to_subject(local: &str) -> String {
    if !local.contains('$') {
        return local.to_string();
    }
    let is_ref = |tk: &str| tk.len() > 1 && tk.strip_prefix('$').is_some_and(|n| n.parse::<i64>().is_ok());
    local
        .split('.')
        .map(|tk| if is_ref(tk) { "*" } else { tk })
        .collect::<Vec<_>>()
        .join(".")
}

/// Checks the imports of the account `account`.
pub(crate) fn validate_imports(imports: &[Import], account: &str, vr: &mut ValidationResults) {
    let mut by_account: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for imp in imports {
        if imp.is_service() {
            let mut sub = imp.to.clone();
            if sub.is_empty() {
                sub = renaming_to_subject(&imp.local_subject);
            }
            if sub.is_empty() {
                sub = imp.subject.clone();
            }
            let seen = by_account.entry(imp.account.as_str()).or_default();
            for other in seen.iter() {
                if is_contained_in(&sub, other) || is_contained_in(other, &sub) {
                    vr.add_error(format!(
                        "overlapping subject namespace for {} and {} in same account {}",
                        go_quote(&sub),
                        go_quote(other),
                        go_quote(&imp.account)
                    ));
                }
            }
            if seen.contains(&sub) {
                vr.add_error(format!(
                    "overlapping subject namespace for {} in account {}",
                    go_quote(&sub),
                    go_quote(&imp.account)
                ));
            } else {
                seen.push(sub);
            }
        }
        imp.validate(account, vr);
    }
}

/// Checks the exports: each one, and that no export subject of a kind covers another.
pub(crate) fn validate_exports(exports: &[Export], vr: &mut ValidationResults) {
    let mut services = Vec::new();
    let mut streams = Vec::new();
    for e in exports {
        if e.is_service() {
            services.push(e.subject.as_str());
        } else {
            streams.push(e.subject.as_str());
        }
        e.validate(vr);
    }
    for (kind, subjects) in [("service", services), ("stream", streams)] {
        let mut covered: BTreeMap<&str, &str> = BTreeMap::new();
        for (i, ns) in subjects.iter().enumerate() {
            for (j, s) in subjects.iter().enumerate() {
                if i != j && is_contained_in(ns, s) {
                    covered.entry(s).or_insert(ns);
                }
            }
        }
        for (s, ns) in covered {
            vr.add_error(format!(
                "{kind} export subject {} already exports {}",
                go_quote(s),
                go_quote(ns)
            ));
        }
    }
}
