//! Where a stream's sources resume: walking the stream backwards, the last message of
//! each source carries its origin sequence in `Nats-Stream-Source` (the 2.10 form
//! `<name[:hash]> <seq> <filter> <dest> <subject>`; the older forms, a bare
//! `<name> <seq>` or the origin's ack reply, match every source of that stream name).
//! A mirror resumes at its own last sequence (set when its link is made).

use super::inbound::STREAM_SOURCE;
use super::Sourcing;
use crate::jetstream::consumer::wire::parse_ack_subject;
use storage::{Filter, Store};

/// What a `Nats-Stream-Source` value says: (stream name, index name or "", origin seq).
pub fn parse_source_header(v: &str) -> Option<(String, String, u64)> {
    if v.starts_with("$JS.ACK.") {
        let toks: Vec<&str> = v.split('.').collect();
        let off = if toks.len() >= 11 { 4 } else { 2 };
        let name = toks.get(off)?.to_string();
        let seq = parse_ack_subject(v)?.stream_seq;
        return Some((name, String::new(), seq));
    }
    let fields: Vec<&str> = v.split(' ').collect();
    let seq = fields.get(1)?.parse::<u64>().ok()?;
    let name = fields.first()?.to_string();
    match fields.len() {
        2 | 3 => Some((name, String::new(), seq)),
        _ => {
            let iname = format!("{name} {} {}", fields.get(2)?, fields.get(3)?);
            Some((name, iname, seq))
        }
    }
}

/// Set the `sseq` of every source in `sc` from the stream's messages.
pub fn starting_sequences(store: &mut dyn Store, sc: &mut Sourcing) {
    let state = store.fast_state();
    if state.msgs == 0 || sc.sources.is_empty() {
        return;
    }
    let mut missing: std::collections::HashSet<String> = sc.sources.keys().cloned().collect();
    let mut at = state.last_seq;
    let all = Filter::all();
    while !missing.is_empty() && at >= state.first_seq.max(1) {
        let Ok(m) = store.load_prev_msg(&all, at) else { break };
        at = m.seq.saturating_sub(1);
        let Some(v) = crate::proto::headers::get(&m.headers, STREAM_SOURCE).and_then(|v| std::str::from_utf8(v).ok())
        else {
            if m.seq == 0 {
                break;
            }
            continue;
        };
        let Some((name, iname, seq)) = parse_source_header(v) else {
            continue;
        };
        if !iname.is_empty() {
            if missing.remove(&iname) {
                if let Some(l) = sc.sources.get_mut(&iname) {
                    l.sseq = seq;
                }
            }
            continue;
        }
        let hits: Vec<String> = missing
            .iter()
            .filter(|n| {
                sc.sources.get(*n).is_some_and(|l| {
                    l.cfg.name == name
                        || l.cfg.external.as_ref().is_some_and(|e| {
                            name == format!("{}:{}", l.cfg.name, crate::system::server_reqs::server_hash(&e.api))
                        })
                })
            })
            .cloned()
            .collect();
        for n in hits {
            missing.remove(&n);
            if let Some(l) = sc.sources.get_mut(&n) {
                l.sseq = seq;
            }
        }
        if m.seq <= 1 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_forms() {
        assert_eq!(
            parse_source_header("O 12 > > foo"),
            Some(("O".into(), "O > >".into(), 12))
        );
        assert_eq!(parse_source_header("O 7"), Some(("O".into(), String::new(), 7)));
        assert_eq!(
            parse_source_header("$JS.ACK.O.C.1.5.5.0.0"),
            Some(("O".into(), String::new(), 5))
        );
        assert_eq!(parse_source_header("garbage"), None);
        assert_eq!(parse_source_header("O x > > s"), None);
    }

    #[test]
    fn resumes_per_source() {
        let mut store = storage::MemStore::new(storage::StoreConfig::new("S"));
        let h = |v: &str| format!("NATS/1.0\r\n{STREAM_SOURCE}: {v}\r\n\r\n").into_bytes();
        store.store_msg("a", &h("A 3 > > a"), b"", 0).unwrap();
        store.store_msg("b", &h("B 9 > > b"), b"", 0).unwrap();
        store.store_msg("a", &h("A 4 > > a"), b"", 0).unwrap();
        store.store_msg("own", b"", b"", 0).unwrap();
        let mut sc = Sourcing::default();
        for name in ["A", "B", "C"] {
            let src = crate::jetstream::api::config::StreamSource {
                name: name.into(),
                ..Default::default()
            };
            let iname = super::super::index_name(&src);
            sc.sources.insert(iname.clone(), super::super::Link::new(src, iname));
        }
        starting_sequences(&mut store, &mut sc);
        assert_eq!(sc.sources["A > >"].sseq, 4);
        assert_eq!(sc.sources["B > >"].sseq, 9);
        assert_eq!(sc.sources["C > >"].sseq, 0);
    }
}
