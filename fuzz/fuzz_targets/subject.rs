//! Fuzz target `subject`: the interest tree (`rnats::core::sublist::Sublist`) against a
//! plain list of (pattern, queue, value) entries matched with `rnats::core::subject::matches`.
//!
//! The input is a sequence of operations (insert, remove, remove-a-live-entry, match,
//! replay with `for_each`) on patterns and subjects built from a small token alphabet
//! (so they collide: `*`, `>`, empty tokens, tokens merely containing wildcards) plus raw
//! bytes. After every operation the tree must agree with the list:
//! - insert succeeds exactly for `is_valid_sub_pattern` patterns; a rejected one changes nothing;
//! - remove reports true exactly when the entry was live;
//! - `matches` returns the same plain subscribers and the same queue groups (by name, with
//!   the same members) as the list, whether served from the cache or not;
//! - `count()` is the number of live entries and `for_each` replays exactly them.
//!
//! Byte 0 selects the match cache (bit 0: off).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnats::core::subject::{is_valid_sub_pattern, matches};
use rnats::core::sublist::Sublist;

const TOKENS: [&[u8]; 16] = [
    b"a", b"b", b"c", b"*", b">", b"", b"ab", b"a*", b">>", b"*b", b"foo", b"bar", b"a", b"b", b"*", b">",
];
const QUEUES: [Option<&[u8]>; 4] = [None, None, Some(b"q1"), Some(b"q2")];

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    /// A `.`-joined subject: up to 5 tokens, or (rarely) 28 to 43 to pass the
    /// 32-token fast path of the matcher.
    fn subject(&mut self) -> Option<Vec<u8>> {
        let n = match self.byte()? {
            b @ 240.. => 28 + usize::from(b - 240),
            b => usize::from(b % 6),
        };
        let mut s = Vec::new();
        for i in 0..n {
            if i > 0 {
                s.push(b'.');
            }
            match self.byte()? {
                b @ 0xE0.. => {
                    for _ in 0..=(b & 3) {
                        s.push(self.byte()?);
                    }
                }
                b => s.extend_from_slice(TOKENS[usize::from(b & 15)]),
            }
        }
        Some(s)
    }
}

type Entry = (Vec<u8>, Option<&'static [u8]>, u8);
/// A match result in comparable form: sorted plain values, and sorted (queue, sorted values).
type Answer = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// What the tree should answer for `subject`, sorted: plain values, and (queue, values).
fn expected(live: &[Entry], subject: &[u8]) -> Answer {
    let mut psubs = Vec::new();
    let mut groups: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (p, q, v) in live {
        if !matches(p, subject) {
            continue;
        }
        match q {
            None => psubs.push(*v),
            Some(q) => match groups.iter_mut().find(|(name, _)| name == q) {
                Some((_, m)) => m.push(*v),
                None => groups.push((q.to_vec(), vec![*v])),
            },
        }
    }
    psubs.sort_unstable();
    for (_, m) in &mut groups {
        m.sort_unstable();
    }
    groups.sort();
    (psubs, groups)
}

fuzz_target!(|input: &[u8]| {
    let mut r = Reader(input);
    let Some(flags) = r.byte() else { return };
    let mut sl: Sublist<u8> = Sublist::new(flags & 1 == 0);
    let mut live: Vec<Entry> = Vec::new();

    while let Some(op) = r.byte() {
        match op % 5 {
            0 => {
                let (Some(p), Some(q), Some(v)) = (r.subject(), r.byte(), r.byte()) else {
                    break;
                };
                let (q, v) = (QUEUES[usize::from(q & 3)], v & 7);
                let res = sl.insert(&p, q, v);
                assert_eq!(
                    res.is_ok(),
                    is_valid_sub_pattern(&p),
                    "insert {:?}",
                    String::from_utf8_lossy(&p)
                );
                if res.is_ok() {
                    live.push((p, q, v));
                }
            }
            1 => {
                let (Some(p), Some(q), Some(v)) = (r.subject(), r.byte(), r.byte()) else {
                    break;
                };
                let (q, v) = (QUEUES[usize::from(q & 3)], v & 7);
                let at = live.iter().position(|(lp, lq, lv)| *lp == p && *lq == q && *lv == v);
                assert_eq!(
                    sl.remove(&p, q, v),
                    at.is_some(),
                    "remove {:?}",
                    String::from_utf8_lossy(&p)
                );
                if let Some(i) = at {
                    live.swap_remove(i);
                }
            }
            2 => {
                let Some(i) = r.byte() else { break };
                if !live.is_empty() {
                    let (p, q, v) = live.swap_remove(usize::from(i) % live.len());
                    assert!(
                        sl.remove(&p, q, v),
                        "live entry {:?} not removed",
                        String::from_utf8_lossy(&p)
                    );
                }
            }
            3 => {
                let Some(s) = r.subject() else { break };
                let m = sl.matches(&s);
                let mut psubs = m.psubs.clone();
                psubs.sort_unstable();
                let mut groups: Vec<(Vec<u8>, Vec<u8>)> = m
                    .qsubs
                    .iter()
                    .map(|g| {
                        let mut members = g.members.clone();
                        members.sort_unstable();
                        (g.name.to_vec(), members)
                    })
                    .collect();
                groups.sort();
                let subject = String::from_utf8_lossy(&s);
                assert!(
                    groups.windows(2).all(|w| w[0].0 != w[1].0),
                    "queue group listed twice for {subject:?}"
                );
                assert!(
                    groups.iter().all(|(_, m)| !m.is_empty()),
                    "empty queue group for {subject:?}"
                );
                assert_eq!((psubs, groups), expected(&live, &s), "match {subject:?}");
            }
            _ => {
                let mut seen: Vec<Entry> = Vec::new();
                sl.for_each(|p, q, v| {
                    let q = q.map(|q| *QUEUES.iter().flatten().find(|name| **name == q).expect("unknown queue"));
                    seen.push((p.to_vec(), q, v));
                });
                let mut want = live.clone();
                want.sort();
                seen.sort();
                assert_eq!(seen, want, "for_each replay");
            }
        }
        assert_eq!(sl.count(), live.len(), "count");
    }
});
