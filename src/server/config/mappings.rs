//! `mappings { src: dest, src: [ {destination, weight, cluster}, ... ] }` of accounts and
//! of the top level (nats-server's `parseAccountMappings`, `parseAccountMapDest` and the
//! checks of `AddWeightedMappings`).

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use super::accounts::atoi;
use super::subjects::{check_mapping, is_valid_subject};
use super::Cx;
use crate::auth::config::{MapDest, Mapping};
use conf::{Entry, Position, Value, ValueKind};
use std::collections::HashMap;

/// The mappings of a `mappings` entry, in file order; `None` when the reference gives up
/// on the block (a failed type assertion, recorded in `cx`).
pub(super) fn mappings(cx: &mut Cx, e: &Entry) -> Option<Vec<Mapping>> {
    let map = cx.map(e)?;
    let mut out = Vec::new();
    for (source, entry) in map.iter() {
        if !is_valid_subject(source) {
            cx.error(&e.key_pos, format!("Subject {source:?} is not a valid subject"));
            continue;
        }
        let pos = &entry.key_pos;
        let dests = match &entry.value.kind {
            ValueKind::String(dest) => {
                let d = vec![MapDest {
                    subject: dest.clone(),
                    weight: 100,
                    cluster: String::new(),
                }];
                if let Err(err) = check_weighted(source, &d) {
                    cx.error(pos, format!("Error adding mapping for {source:?} to {dest:?} : {err}"));
                    continue;
                }
                d
            }
            ValueKind::Array(items) => {
                let mut d = Vec::new();
                for item in items {
                    match destination(cx, &item.pos, item)? {
                        Some(x) => d.push(x),
                        None => continue,
                    }
                }
                if let Err(err) = check_weighted(source, &d) {
                    cx.error(pos, format!("Error adding mapping for {source:?} : {err}"));
                    continue;
                }
                d
            }
            _ => {
                let Some(x) = destination(cx, pos, &entry.value)? else {
                    continue;
                };
                let d = vec![x];
                if let Err(err) = check_weighted(source, &d) {
                    cx.error(pos, format!("Error adding mapping for {source:?} : {err}"));
                    continue;
                }
                d
            }
        };
        out.push(Mapping {
            source: source.to_string(),
            destinations: dests,
        });
    }
    Some(out)
}

/// One `{destination, weight, cluster}`. `Ok(None)` (outer `Some`) after an error;
/// outer `None` when the reference gives up on the whole block.
fn destination(cx: &mut Cx, pos: &Position, v: &Value) -> Option<Option<MapDest>> {
    let Some(map) = v.as_map() else {
        cx.error(pos, "Expected an entry for the mapping destination");
        return Some(None);
    };
    let mut d = MapDest::default();
    let mut weighted = false;
    for (key, entry) in map.iter() {
        let p = &entry.key_pos;
        match key.to_ascii_lowercase().as_str() {
            "dest" | "destination" => match entry.value.as_str() {
                Some(s) => d.subject = s.to_string(),
                None => {
                    cx.conversion_at(pos, &entry.value, "string");
                    return None;
                }
            },
            "weight" => {
                let w = match &entry.value.kind {
                    ValueKind::String(s) => {
                        let trimmed = s.strip_suffix('%').unwrap_or(s);
                        match atoi(trimmed) {
                            Ok(n) => n,
                            Err(_) => {
                                cx.error(p, format!("Invalid weight {trimmed:?} for mapping destination"));
                                return Some(None);
                            }
                        }
                    }
                    ValueKind::Integer(n) => *n,
                    _ => {
                        cx.error(
                            p,
                            format!("Unknown entry type for weight of {}\n", super::go_value(&entry.value)),
                        );
                        return Some(None);
                    }
                };
                if !(0..=100).contains(&w) {
                    cx.error(p, format!("Invalid weight {w} for mapping destination"));
                    return Some(None);
                }
                d.weight = w as u8;
                weighted = true;
            }
            "cluster" => match entry.value.as_str() {
                Some(s) => d.cluster = s.to_string(),
                None => {
                    cx.conversion_at(pos, &entry.value, "string");
                    return None;
                }
            },
            _ => {
                cx.error(p, format!("Unknown field {key:?} for mapping destination"));
                return Some(None);
            }
        }
    }
    if !weighted {
        cx.error(pos, format!("Missing weight for mapping destination {:?}", d.subject));
        return Some(None);
    }
    Some(Some(d))
}

/// The checks `AddWeightedMappings` makes on a set of destinations.
fn check_weighted(source: &str, dests: &[MapDest]) -> Result<(), String> {
    if !is_valid_subject(source) {
        return Err("invalid subject".into());
    }
    let mut seen = std::collections::HashSet::new();
    let mut total: HashMap<&str, u32> = HashMap::new();
    for d in dests {
        if !seen.insert(d.subject.as_str()) {
            return Err(format!("duplicate entry for {:?}", d.subject));
        }
        if d.weight > 100 {
            return Err("individual weights need to be <= 100".into());
        }
        let t = total.entry(d.cluster.as_str()).or_default();
        *t += u32::from(d.weight);
        if *t > 100 {
            return Err("total weight needs to be <= 100".into());
        }
        check_mapping(source, &d.subject)?;
    }
    Ok(())
}
