//! The mirror and sources part of the stream config checks (the reference's order and
//! errors): what a mirror excludes, durable sourcing consumers, subject transforms of
//! origins, duplicate sources, external prefixes and sourcing cycles.

use super::config::{StreamConfig, StreamSource};
use super::errors::ApiError;
use super::errors_table as t;
use super::stream_check::{invalid_cfg, is_publish_subject, pedantic_err, subject_subset, valid_name, StreamLimitsCtx};
use crate::core::subject::{is_valid_literal_subject, is_valid_subject, subjects_collide};
use crate::core::transform::validate_mapping;
use std::collections::HashSet;

const JS_API_PREFIX: &str = "$JS.API";

fn consumer_ok(src: &StreamSource) -> bool {
    let Some(c) = &src.consumer else {
        return true;
    };
    valid_name(&c.name)
        && is_valid_literal_subject(c.deliver_subject.as_bytes())
        && is_valid_subject(c.deliver_subject.as_bytes())
        && src.opt_start_seq == 0
        && src.opt_start_time.is_none()
        && src.filter_subject.is_empty()
}

/// The identity of a source for duplicate detection (the reference hashes the parts; the
/// parts themselves compare the same).
fn index_name(src: &StreamSource) -> String {
    let mut name = src.name.clone();
    if let Some(e) = &src.external {
        name = format!("{name}:{}", e.api);
    }
    if let Some(c) = &src.consumer {
        name = format!("{name}:C={}", c.name);
    }
    let or_all = |s: &str| if s.is_empty() { ">".to_string() } else { s.to_string() };
    let (source, dest) = if src.subject_transforms.is_empty() {
        (or_all(&src.filter_subject), ">".to_string())
    } else {
        let s: Vec<String> = src.subject_transforms.iter().map(|t| or_all(&t.src)).collect();
        let d: Vec<String> = src.subject_transforms.iter().map(|t| or_all(&t.dest)).collect();
        (s.join("\x0c"), d.join("\x0c"))
    };
    format!("{name} {source} {dest}")
}

pub(crate) fn check_mirror_and_sources(cfg: &mut StreamConfig, ctx: &StreamLimitsCtx<'_>) -> Result<(), ApiError> {
    let mut stream_subs: Vec<String> = Vec::new();
    let mut deliver_prefixes: Vec<String> = Vec::new();
    let mut api_prefixes: Vec<String> = Vec::new();

    if let Some(m) = cfg.mirror.clone() {
        if cfg.first_seq > 0 {
            return Err(t::JS_MIRROR_WITH_FIRST_SEQ_ERR.err());
        }
        if !cfg.subjects.is_empty() {
            return Err(t::JS_MIRROR_WITH_SUBJECTS_ERR.err());
        }
        if !cfg.sources.is_empty() {
            return Err(t::JS_MIRROR_WITH_SOURCES_ERR.err());
        }
        if cfg.allow_msg_counter {
            return Err(t::JS_MIRROR_WITH_COUNTERS_ERR.err());
        }
        if cfg.allow_atomic {
            return Err(t::JS_MIRROR_WITH_ATOMIC_PUBLISH_ERR.err());
        }
        if cfg.allow_batched {
            return Err(t::JS_MIRROR_WITH_BATCH_PUBLISH_ERR.err());
        }
        if cfg.allow_msg_schedules {
            return Err(t::JS_MIRROR_WITH_MSG_SCHEDULES_ERR.err());
        }
        if !consumer_ok(&m) {
            return Err(t::JS_MIRROR_DURABLE_CONSUMER_CFG_INVALID.err());
        }
        if !m.filter_subject.is_empty() && !m.subject_transforms.is_empty() {
            return Err(t::JS_MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED.err());
        }
        if cfg.subject_delete_marker_ttl > 0 {
            return Err(invalid_cfg("subject delete markers forbidden on mirrors"));
        }
        for (i, tr) in m.subject_transforms.iter().enumerate() {
            if !tr.src.is_empty() && !is_valid_subject(tr.src.as_bytes()) {
                return Err(t::JS_MIRROR_INVALID_SUBJECT_FILTER.err_with(format!("invalid subject {}", tr.src)));
            }
            if let Err(e) = validate_mapping(&tr.src, &tr.dest) {
                return Err(t::JS_MIRROR_INVALID_TRANSFORM_DESTINATION.err_with(e));
            }
            for (j, other) in m.subject_transforms.iter().enumerate() {
                if i != j && subjects_collide(&tr.src, &other.src) {
                    return Err(t::JS_MIRROR_OVERLAPPING_SUBJECT_FILTERS.err());
                }
            }
        }
        match &m.external {
            None => {
                if !valid_name(&m.name) {
                    return Err(t::JS_MIRROR_INVALID_STREAM_NAME.err());
                }
                if let Some(origin) = (ctx.lookup)(&m.name) {
                    stream_subs.extend(origin.subjects.iter().cloned());
                    if cfg.max_msg_size > 0 && origin.max_msg_size > 0 && cfg.max_msg_size < origin.max_msg_size {
                        return Err(t::JS_MIRROR_MAX_MESSAGE_SIZE_TOO_BIG_ERR.err());
                    }
                    if ctx.pedantic && cfg.mirror_direct != origin.allow_direct {
                        return Err(pedantic_err("origin stream has direct get set, mirror has it disabled"));
                    }
                    cfg.mirror_direct = origin.allow_direct;
                }
            }
            Some(e) => {
                if !e.deliver.is_empty() {
                    deliver_prefixes.push(e.deliver.clone());
                }
                if !e.api.is_empty() {
                    api_prefixes.push(e.api.clone());
                }
            }
        }
    }

    if !cfg.sources.is_empty() && cfg.allow_msg_schedules {
        return Err(t::JS_SOURCE_WITH_MSG_SCHEDULES_ERR.err());
    }
    let mut inames = HashSet::new();
    let mut cnames = HashSet::new();
    for src in &cfg.sources {
        if !valid_name(&src.name) {
            return Err(t::JS_SOURCE_INVALID_STREAM_NAME.err());
        }
        if !inames.insert(index_name(src)) {
            return Err(t::JS_SOURCE_DUPLICATE_DETECTED.err());
        }
        if !src.filter_subject.is_empty() && !src.subject_transforms.is_empty() {
            return Err(t::JS_SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED.err());
        }
        for tr in &src.subject_transforms {
            if !tr.src.is_empty() && !is_valid_subject(tr.src.as_bytes()) {
                return Err(t::JS_SOURCE_INVALID_SUBJECT_FILTER.err_with(format!("invalid subject {}", tr.src)));
            }
            if let Err(e) = validate_mapping(&tr.src, &tr.dest) {
                return Err(t::JS_SOURCE_INVALID_TRANSFORM_DESTINATION.err_with(e));
            }
        }
        for (i, tr) in src.subject_transforms.iter().enumerate() {
            for (j, other) in src.subject_transforms.iter().enumerate() {
                if i != j && subject_subset(&tr.src, &other.src) {
                    return Err(t::JS_SOURCE_OVERLAPPING_SUBJECT_FILTERS.err());
                }
            }
        }
        if let Some(c) = &src.consumer {
            if !consumer_ok(src) {
                return Err(t::JS_SOURCE_DURABLE_CONSUMER_CFG_INVALID.err());
            }
            let api = src.external.as_ref().map(|e| e.api.as_str()).unwrap_or("");
            if !cnames.insert((src.name.clone(), api.to_string(), c.name.clone())) {
                return Err(t::JS_SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED.err());
            }
        }
        match &src.external {
            None => {
                if let Some(origin) = (ctx.lookup)(&src.name) {
                    stream_subs.extend(origin.subjects.iter().cloned());
                    if cfg.max_msg_size > 0 && origin.max_msg_size > 0 && cfg.max_msg_size < origin.max_msg_size {
                        return Err(t::JS_SOURCE_MAX_MESSAGE_SIZE_TOO_BIG_ERR.err());
                    }
                }
            }
            Some(e) => {
                if !e.deliver.is_empty() {
                    deliver_prefixes.push(e.deliver.clone());
                }
                if !e.api.is_empty() {
                    api_prefixes.push(e.api.clone());
                }
            }
        }
    }

    for pfx in &deliver_prefixes {
        if !is_publish_subject(pfx) {
            return Err(t::JS_STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ_ERR_F.with(&[("prefix", pfx)]));
        }
        for sub in &stream_subs {
            if subjects_collide(sub, &format!("{pfx}.{sub}")) {
                return Err(t::JS_STREAM_EXTERNAL_DEL_PREFIX_OVERLAPS_ERR_F.with(&[("prefix", pfx), ("subject", sub)]));
            }
        }
    }
    for pfx in &api_prefixes {
        if !is_publish_subject(pfx) {
            return Err(invalid_cfg(format!(
                "stream external api prefix {} must be a valid subject without wildcards",
                super::decode::go_quote(pfx)
            )));
        }
        if subjects_collide(pfx, JS_API_PREFIX) {
            return Err(t::JS_STREAM_EXTERNAL_API_OVERLAP_ERR_F.with(&[("prefix", pfx), ("subject", JS_API_PREFIX)]));
        }
    }
    check_cycles(cfg, ctx)
}

/// A stream reaching itself through sources (with overlapping subjects) or mirrors.
fn check_cycles(cfg: &StreamConfig, ctx: &StreamLimitsCtx<'_>) -> Result<(), ApiError> {
    let overlaps =
        |subjects: &[String], filter: &str| filter.is_empty() || subjects.iter().any(|s| subjects_collide(s, filter));
    let mut to_visit: Vec<StreamConfig> = vec![cfg.clone()];
    let mut visited: HashSet<String> = HashSet::new();
    // Bounded: each stream is expanded at most once per name it is reached by.
    let mut steps = 0usize;
    while let Some(c) = (!to_visit.is_empty()).then(|| to_visit.remove(0)) {
        steps += 1;
        if steps > 10_000 {
            break;
        }
        visited.insert(c.name.clone());
        for src in &c.sources {
            if src.external.is_some() {
                continue;
            }
            if visited.contains(&src.name) {
                if overlaps(&c.subjects, &src.filter_subject) {
                    return Err(invalid_cfg("detected cycle"));
                }
            } else if let Some(o) = (ctx.lookup)(&src.name) {
                to_visit.push(o);
            }
        }
        if let Some(m) = &c.mirror {
            if m.external.is_none() {
                if visited.contains(&m.name) {
                    return Err(invalid_cfg("detected cycle"));
                }
                if let Some(o) = (ctx.lookup)(&m.name) {
                    to_visit.push(o);
                }
            }
        }
    }
    Ok(())
}
