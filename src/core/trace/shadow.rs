//! The subscription a stream-import delivery is reported on.
//!
//! nats-server delivers stream imports through "shadow" subscriptions that it adds to the
//! exporting account for every importer subscription the import covers, and an `eg`
//! event of such a delivery names the shadow's subject: the importer's subscription taken
//! back into the exporter's subjects (`a.feed.>` importing `feed.>` with prefix `a` is
//! reported as `feed.>`). rnats routes a stream import by rewriting the message into the
//! importer's account instead, so it works out the same subject from the importer's
//! subscription and the import, with the reference's rules.

use crate::core::accounts::links::Rewrite;
use crate::core::subject::has_wildcard;

fn tokens(s: &[u8]) -> Vec<&[u8]> {
    s.split(|&b| b == b'.').collect()
}

/// nats-server's `isSubsetMatchTokenized`: is every subject `tokens` matches also matched
/// by `test`? Both may hold wildcards.
fn subset(tokens: &[&[u8]], test: &[&[u8]]) -> bool {
    for (i, t2) in test.iter().enumerate() {
        let Some(t1) = tokens.get(i) else { return false };
        if t2.is_empty() {
            return false;
        }
        if *t2 == b">" {
            return true;
        }
        if t1.is_empty() || *t1 == b">" {
            return false;
        }
        if *t1 == b"*" {
            if *t2 != b"*" {
                return false;
            }
            continue;
        }
        if *t2 != b"*" && t1 != t2 {
            return false;
        }
    }
    tokens.len() == test.len()
}

/// The importer-side pattern of an import from `from` rewritten by `rewrite`.
fn import_to(from: &[u8], rewrite: &Rewrite) -> Vec<u8> {
    match rewrite {
        Rewrite::Same => from.to_vec(),
        Rewrite::Prefix(p) => [&p[..], from].concat(),
        Rewrite::Literal(l) => l.to_vec(),
        Rewrite::Transform(t) => crate::core::transform::untokenize(t.destination()).0.into_bytes(),
    }
}

/// `s` (importer side) taken back to the exporter's side.
fn reverse(rewrite: &Rewrite, s: &[u8]) -> Vec<u8> {
    match rewrite {
        Rewrite::Prefix(p) => s.strip_prefix(&p[..]).unwrap_or(s).to_vec(),
        Rewrite::Transform(t) => match t.reverse() {
            Some(r) => r.transform_subject(s, &mut || 0),
            None => s.to_vec(),
        },
        Rewrite::Same | Rewrite::Literal(_) => s.to_vec(),
    }
}

/// The shadow subject of importer subscription `sub` for the stream import of `from`
/// (exporter side) rewritten by `rewrite`. `None` if the import does not cover `sub`.
pub fn shadow_subject(from: &[u8], rewrite: &Rewrite, sub: &[u8]) -> Option<Vec<u8>> {
    let to = import_to(from, rewrite);
    if sub == to.as_slice() {
        return Some(from.to_vec());
    }
    let st = tokens(sub);
    let tt = tokens(&to);
    // (dynamic, overlap): nats-server's `ime` fields.
    let (dynamic, overlap) = if subset(&st, &tt) {
        (true, None)
    } else if has_wildcard(sub) {
        if subset(&tt, &st) {
            (false, None)
        } else {
            let mut narrowed: Vec<&[u8]> = st.clone();
            for (i, t) in st.iter().enumerate() {
                let Some(it) = tt.get(i) else { break };
                if *t == b"*" && *it != b">" {
                    if let Some(n) = narrowed.get_mut(i) {
                        *n = it;
                    }
                }
            }
            if narrowed.last() == Some(&&b">"[..]) && tt.len() >= st.len() {
                let last = narrowed.len() - 1;
                if let (Some(n), Some(it)) = (narrowed.get_mut(last), tt.get(last)) {
                    *n = it;
                }
                narrowed.extend_from_slice(tt.get(st.len()..).unwrap_or_default());
            }
            if !subset(&narrowed, &tt) {
                return None;
            }
            (true, Some(narrowed.join(&b'.')))
        }
    } else {
        return None;
    };
    let has_transform = match rewrite {
        Rewrite::Prefix(_) | Rewrite::Transform(_) => has_wildcard(from),
        Rewrite::Same | Rewrite::Literal(_) => false,
    };
    let use_pub = matches!(rewrite, Rewrite::Same) && has_wildcard(from);
    if !use_pub && dynamic && has_transform {
        return Some(reverse(rewrite, overlap.as_deref().unwrap_or(sub)));
    }
    if !use_pub || overlap.is_some() || !dynamic {
        return Some(overlap.unwrap_or_else(|| from.to_vec()));
    }
    Some(sub.to_vec())
}
