//! What a sourcing stream reports and serves beside its messages: the `mirror` and
//! `sources` of its info (`StreamSourceInfo`, sources in configuration order), and
//! `mirror_direct`: once caught up, a mirror answers direct gets of its origin
//! (`$JS.API.DIRECT.GET.<origin>`, queue group `_sys_`) from its own copy.

use super::Link;
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use crate::jetstream::api::config::SubjectTransform;
use crate::jetstream::api::info::StreamSourceInfo;
use crate::jetstream::shard::{wall_ns, with_js, ShardJs, StreamKey};
use crate::jetstream::stream::Stream;
use std::time::Instant;

/// A link's info. A mirror shows its filter and transforms once a consumer was asked
/// for (as the reference, which records them there); a source from the start.
fn link_info(l: &Link, mirror: bool) -> StreamSourceInfo {
    let shown = !mirror || l.lreq.is_some();
    StreamSourceInfo {
        name: l.cfg.name.clone(),
        external: l.cfg.external.clone(),
        lag: l.lag,
        active: if l.last == 0 {
            -1
        } else {
            wall_ns().saturating_sub(l.last).max(0)
        },
        error: l.err.clone(),
        filter_subject: if shown {
            l.cfg.filter_subject.clone()
        } else {
            String::new()
        },
        subject_transforms: l
            .cfg
            .subject_transforms
            .iter()
            .filter(|_| shown)
            .map(|t| SubjectTransform {
                src: t.src.clone(),
                dest: t.dest.clone(),
            })
            .collect(),
    }
}

/// The `mirror` info of a stream, if it mirrors.
pub fn mirror_info(st: &Stream) -> Option<StreamSourceInfo> {
    st.sourcing.as_ref()?.mirror.as_ref().map(|l| link_info(l, true))
}

/// The `sources` info of a stream, in configuration order.
pub fn sources_info(st: &Stream) -> Vec<StreamSourceInfo> {
    let Some(sc) = st.sourcing.as_ref() else {
        return Vec::new();
    };
    sc.order
        .iter()
        .filter_map(|n| sc.sources.get(n))
        .map(|l| link_info(l, false))
        .collect()
}

/// Add `mirror` and `sources` to a stream info object (before its `ts`).
pub fn add_to_info(m: &mut serde_json::Map<String, serde_json::Value>, st: &Stream) {
    if let Some(mi) = mirror_info(st) {
        m.insert("mirror".into(), serde_json::to_value(&mi).unwrap_or_default());
    }
    let sources = sources_info(st);
    if !sources.is_empty() {
        m.insert("sources".into(), serde_json::to_value(&sources).unwrap_or_default());
    }
}

/// Subscribe the origin's direct get subjects for a caught-up mirror with
/// `mirror_direct` (once).
pub fn mirror_direct(sjs: &mut ShardJs, core: &mut ShardCore, key: &StreamKey, now: Instant) {
    let Some(st) = sjs.streams.get_mut(key) else { return };
    if !st.cfg.mirror_direct {
        return;
    }
    let Some(origin) = st.cfg.mirror.as_ref().map(|m| m.name.clone()) else {
        return;
    };
    let Some(sc) = st.sourcing.as_mut() else { return };
    if !sc.direct_subs.is_empty() || sc.mirror.is_none() {
        return;
    }
    let acc = key.0;
    let mut subs = Vec::new();
    for subject in [
        format!("$JS.API.DIRECT.GET.{origin}"),
        format!("$JS.API.DIRECT.GET.{origin}.>"),
    ] {
        let k = key.clone();
        let from = format!("$JS.API.DIRECT.GET.{origin}");
        let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
            let m = m.take();
            if m.reply.is_empty() {
                return;
            }
            let replies = with_js(core, |sjs, _core| {
                let st = sjs.streams.get_mut(&k)?;
                // Served as a direct get of the mirror itself.
                let subject = String::from_utf8_lossy(&m.subject).to_string();
                let own = format!("$JS.API.DIRECT.GET.{}", st.name);
                let subject = subject.replacen(&from, &own, 1);
                Some(st.direct_get(&subject, &m.payload))
            })
            .flatten()
            .unwrap_or_default();
            for r in replies {
                core.publish_jetstream(acc, &m.reply, b"", Some(&r.header), &r.payload, now);
            }
        });
        if let Some(id) = core.subscribe_internal(acc, &subject, Some("_sys_"), false, h, now) {
            subs.push(id);
        }
    }
    sc.direct_subs = subs;
}

/// Does a mirror in the account answer direct gets of `origin` (`mirror_direct`)?
pub fn mirrors_direct(
    reg: &crate::jetstream::registry::Registry,
    acc: crate::core::accounts::AccountId,
    origin: &str,
) -> bool {
    reg.streams(acc)
        .any(|(_, e)| e.cfg.mirror_direct && e.cfg.mirror.as_ref().is_some_and(|m| m.name == origin))
}
