//! Account subject mappings (`mappings { ... }` in the config, `mappings` in account JWTs):
//! a source with weighted, optionally cluster-scoped destinations, as nats-server 2.14's
//! `AddWeightedMappings` builds them and `selectMappedSubject` applies them.
//!
//! Building: each destination is checked in order (duplicate subject, weight <= 100, the
//! cluster's running total <= 100, `validate_mapping`); every group of destinations (the
//! cluster-less one and one per cluster) whose weights do not reach 100 gets the source
//! itself for the rest — unless the source is listed as a destination, which means "drop
//! the rest". Weights are then made cumulative in ascending order.
//!
//! Applying: the first mapping (in insertion order) whose source matches wins; there is no
//! "most specific" rule. A literal source equal to the subject is taken without
//! tokenizing, and the reference then hands its transform no tokens at all, so a
//! whole-subject `{{partition(n)}}` hashes the empty string — unless an earlier mapping
//! in the list already caused tokenization. That is reproduced.
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::error::{DestErrorKind, MappingError, TransformError};
use super::placeholder::{call_args, MAPPING_FUNCS};
use super::render::{Pattern, SubjectTokens};
use super::subject_transform::{tokenize, SubjectTransform};
use crate::core::subject::{has_wildcard, is_valid_subject};

/// One weighted destination as configured (`MapDest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDest {
    pub subject: String,
    /// Percent, 0..=100.
    pub weight: u8,
    /// Only used in this cluster; `None` (or empty) for every cluster.
    pub cluster: Option<String>,
}

impl MapDest {
    pub fn new(subject: impl Into<String>, weight: u8) -> Self {
        MapDest {
            subject: subject.into(),
            weight,
            cluster: None,
        }
    }

    pub fn in_cluster(subject: impl Into<String>, weight: u8, cluster: impl Into<String>) -> Self {
        MapDest {
            subject: subject.into(),
            weight,
            cluster: Some(cluster.into()),
        }
    }

    fn cluster(&self) -> &str {
        self.cluster.as_deref().unwrap_or("")
    }
}

/// A destination with its cumulative weight.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    tr: SubjectTransform,
    upto: u8,
}

/// One mapping: a source and its destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    src: String,
    wildcard: bool,
    pattern: Pattern,
    dests: Vec<Destination>,
    cluster_dests: Vec<(String, Vec<Destination>)>,
}

/// `ValidateMapping`: is `dest` an acceptable account-mapping destination for `src`?
/// Stricter than `SubjectTransform::new` on the destination's shape (no whitespace, and
/// only the functions account mappings know: not `left`/`right`).
pub fn validate_mapping(src: &str, dest: &str) -> Result<(), TransformError> {
    if dest.is_empty() {
        return Ok(());
    }
    let mut after_fwc = false;
    for t in dest.split('.') {
        let b = t.as_bytes();
        if b.is_empty() || after_fwc {
            return Err(TransformError::dest(DestErrorKind::InvalidTransform, t));
        }
        if b.len() > 4 && b.starts_with(b"{{") && b.ends_with(b"}}") {
            if !MAPPING_FUNCS.iter().any(|&f| call_args(t, f).is_some()) {
                return Err(TransformError::dest(DestErrorKind::UnknownFunction, t));
            }
            continue;
        }
        if t == ">" {
            after_fwc = true;
        } else if b.iter().any(|c| matches!(c, b'\t' | b'\n' | 0x0c | b'\r' | b' ')) {
            return Err(TransformError::dest(DestErrorKind::InvalidTransform, ""));
        }
    }
    SubjectTransform::new(src, dest).map(drop)
}

impl Mapping {
    /// `AddMapping`: one destination with weight 100.
    pub fn simple(src: &str, dest: &str) -> Result<Self, MappingError> {
        Self::new(src, &[MapDest::new(dest, 100)])
    }

    /// `AddWeightedMappings`.
    pub fn new(src: &str, dests: &[MapDest]) -> Result<Self, MappingError> {
        if !is_valid_subject(src.as_bytes()) {
            return Err(TransformError::BadSubject.into());
        }
        let mut seen: Vec<&str> = Vec::with_capacity(dests.len());
        let mut plain = Vec::new();
        let mut scoped: Vec<(String, Vec<Destination>)> = Vec::new();
        for (k, d) in dests.iter().enumerate() {
            if seen.contains(&d.subject.as_str()) {
                return Err(MappingError::Duplicate(d.subject.clone()));
            }
            seen.push(&d.subject);
            if d.weight > 100 {
                return Err(MappingError::WeightOver100);
            }
            let cluster = d.cluster();
            let total: u16 = dests
                .iter()
                .take(k + 1)
                .filter(|e| e.cluster() == cluster)
                .map(|e| u16::from(e.weight))
                .sum();
            if total > 100 {
                return Err(MappingError::TotalWeightOver100);
            }
            validate_mapping(src, &d.subject)?;
            let dest = Destination {
                tr: SubjectTransform::new(src, &d.subject)?,
                upto: d.weight,
            };
            if cluster.is_empty() {
                plain.push(dest);
            } else if let Some((_, group)) = scoped.iter_mut().find(|(c, _)| c == cluster) {
                group.push(dest);
            } else {
                scoped.push((cluster.to_owned(), vec![dest]));
            }
        }
        let src_listed = seen.contains(&src);
        let complete = |mut group: Vec<Destination>| -> Result<Vec<Destination>, MappingError> {
            let total: u16 = group.iter().map(|d| u16::from(d.upto)).sum();
            if total != 100 && !src_listed {
                let rest = 100 - total.min(100) as u8;
                group.push(Destination {
                    tr: SubjectTransform::new(src, &tokenize(src))?,
                    upto: rest,
                });
            }
            group.sort_by_key(|d| d.upto);
            let mut acc = 0u8;
            for d in &mut group {
                acc = acc.saturating_add(d.upto);
                d.upto = acc;
            }
            Ok(group)
        };
        let dests = complete(plain)?;
        let cluster_dests = scoped
            .into_iter()
            .map(|(c, g)| Ok((c, complete(g)?)))
            .collect::<Result<Vec<_>, MappingError>>()?;
        Ok(Mapping {
            src: src.to_owned(),
            wildcard: has_wildcard(src.as_bytes()),
            pattern: Pattern::new(src),
            dests,
            cluster_dests,
        })
    }

    /// The source subject.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// The destination for a draw of `rand_u64`, or `None` when the draw falls in the
    /// dropped share.
    fn select(&self, rand_u64: u64, cluster: Option<&str>) -> Option<&SubjectTransform> {
        let group = cluster
            .filter(|_| !self.cluster_dests.is_empty())
            .and_then(|c| self.cluster_dests.iter().find(|(name, _)| name == c))
            .map_or(&self.dests, |(_, g)| g);
        // fastrand.Uint32n(100) on the high half of the draw.
        let w = (((rand_u64 >> 32) * 100) >> 32) as u8;
        group.iter().find(|d| w < d.upto).map(|d| &d.tr)
    }
}

/// splitmix64: spreads one caller-supplied draw over `{{random(n)}}` tokens.
fn splitmix(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The mappings of one account, in precedence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappingSet {
    mappings: Vec<Mapping>,
}

impl MappingSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.mappings.is_empty()
    }

    pub fn len(&self) -> usize {
        self.mappings.len()
    }

    /// The mappings in precedence order.
    pub fn iter(&self) -> impl Iterator<Item = &Mapping> {
        self.mappings.iter()
    }

    /// Add a mapping; one with the same source is replaced in place (keeping its rank).
    pub fn insert(&mut self, m: Mapping) {
        match self.mappings.iter_mut().find(|e| e.src == m.src) {
            Some(e) => *e = m,
            None => self.mappings.push(m),
        }
    }

    /// `AddWeightedMappings` on the account: build and insert.
    pub fn add(&mut self, src: &str, dests: &[MapDest]) -> Result<(), MappingError> {
        self.insert(Mapping::new(src, dests)?);
        Ok(())
    }

    /// `RemoveMapping`: the last mapping takes the removed one's place (as in the reference).
    pub fn remove(&mut self, src: &str) -> bool {
        match self.mappings.iter().position(|m| m.src == src) {
            Some(i) => {
                self.mappings.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Map a published subject (`selectMappedSubject`). `None`: no mapping applies and the
    /// subject is unchanged. `Some(subject)`: the mapped subject — possibly equal to the
    /// input (the unassigned share of the weights), or empty when the draw falls in a share
    /// the mapping drops (the reference then routes to the empty subject, reaching nobody).
    /// `rand_u64` is one uniform draw; `cluster` the local cluster name, if any.
    pub fn apply(&self, subject: &[u8], rand_u64: u64, cluster: Option<&str>) -> Option<Vec<u8>> {
        // Tokenized at the first mapping that is not a literal equal to the subject.
        let mut tokens: Option<SubjectTokens<'_>> = None;
        for m in &self.mappings {
            if !m.wildcard && m.src.as_bytes() == subject {
                let Some(tr) = m.select(rand_u64, cluster) else {
                    return Some(Vec::new());
                };
                let mut rand = splitmix(rand_u64);
                return Some(if tokens.is_some() {
                    tr.transform_subject(subject, &mut rand)
                } else {
                    tr.transform(&[], &mut rand)
                });
            }
            let toks = tokens.get_or_insert_with(|| SubjectTokens::new(subject));
            if m.pattern.match_into(toks) {
                let Some(tr) = m.select(rand_u64, cluster) else {
                    return Some(Vec::new());
                };
                return Some(tr.render(&*toks, &mut splitmix(rand_u64)));
            }
        }
        None
    }
}
