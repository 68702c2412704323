//! `subjects`: subscription matching under load. N distinct subscriptions (default 100,000)
//! over the subject space `s.<a>.<b>.<c>`, mixing literals (70%), `s.<a>.*.<c>` (15%),
//! `s.*.<b>.<c>` (5%), `s.<a>.<b>.*` (5%) and `s.<a>.<b>.>` (5%), spread over S connections;
//! then publishers send to random subjects (half picked from the literal subscriptions, half
//! uniform). The generator computes how many deliveries each subject must produce, so lost or
//! extra messages are detected exactly.

use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{PerfError, Result};
use crate::proto::encode_sub;
use crate::report::{RunResult, SubjectsStats};
use crate::scenarios::flow::{self, Batch, FlowSpec};
use crate::scenarios::{set_rate, Ctx, Params, Scenario};

const A: u32 = 50;
const B: u32 = 200;
const C: u32 = 1000;
/// Distinct subjects the publishers cycle through, unless `--pool` says otherwise.
pub const POOL: usize = 8192;
/// Fixed seed: both servers of a comparison get the same subscriptions and subjects.
const SEED: u64 = 0x5EED_2140;

/// The generated subscription set.
pub struct SubjectSet {
    pub patterns: Vec<String>,
    /// How many of each kind: literal, `*`, `>`.
    pub kinds: [usize; 3],
    set: HashSet<String>,
    literals: Vec<(u32, u32, u32)>,
}

impl SubjectSet {
    /// Generates `n` distinct patterns deterministically from `seed`.
    pub fn generate(n: usize, seed: u64) -> Result<SubjectSet> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut s = SubjectSet {
            patterns: Vec::with_capacity(n),
            kinds: [0; 3],
            set: HashSet::new(),
            literals: vec![],
        };
        let max_attempts = n.saturating_mul(20).max(1000);
        let mut attempts = 0;
        while s.patterns.len() < n {
            attempts += 1;
            if attempts > max_attempts {
                return Err(PerfError::Param(format!("cannot generate {n} distinct subscriptions")));
            }
            let (a, b, c) = (rng.gen_range(0..A), rng.gen_range(0..B), rng.gen_range(0..C));
            let roll = rng.gen_range(0..100);
            // The wildcard spaces are small: once one is used up its draws repeat and are
            // skipped, and literals (10M of them) fill the rest.
            let (pat, kind) = match roll {
                0..70 => (format!("s.{a}.{b}.{c}"), 0),
                70..85 => (format!("s.{a}.*.{c}"), 1),
                85..90 => (format!("s.*.{b}.{c}"), 1),
                90..95 => (format!("s.{a}.{b}.*"), 1),
                _ => (format!("s.{a}.{b}.>"), 2),
            };
            if s.set.insert(pat.clone()) {
                if kind == 0 {
                    s.literals.push((a, b, c));
                }
                s.kinds[kind] += 1;
                s.patterns.push(pat);
            }
        }
        Ok(s)
    }

    /// How many of the patterns match `subject` (one delivery each).
    pub fn matches(&self, subject: &str) -> u64 {
        count_matches(&self.set, subject)
    }

    /// `count` publish subjects with their expected deliveries.
    fn pool(&self, count: usize, rng: &mut StdRng) -> Vec<(String, u64)> {
        (0..count)
            .map(|i| {
                let (a, b, c) = match self.literals.len() {
                    n if n > 0 && i % 2 == 0 => self.literals[rng.gen_range(0..n)],
                    _ => (rng.gen_range(0..A), rng.gen_range(0..B), rng.gen_range(0..C)),
                };
                let subject = format!("s.{a}.{b}.{c}");
                let n = self.matches(&subject);
                (subject, n)
            })
            .collect()
    }
}

/// Counts the patterns in `set` that match the literal `subject`, by enumerating every pattern
/// that could match it: each token literal or `*`, optionally ending in `>` (protocol.md §9).
pub fn count_matches(set: &HashSet<String>, subject: &str) -> u64 {
    let toks: Vec<&str> = subject.split('.').collect();
    let n = toks.len();
    if n > 16 {
        return set.iter().filter(|p| naive_match(p, subject)).count() as u64;
    }
    let mut count = 0;
    let mut pat = String::with_capacity(subject.len() + 8);
    // Full-length patterns: 2^n choices; then `>` after a prefix of length k (0 ≤ k < n).
    for k in 0..=n {
        let full = k == n;
        for mask in 0u32..(1 << k) {
            pat.clear();
            for (i, t) in toks.iter().take(k).enumerate() {
                if i > 0 {
                    pat.push('.');
                }
                pat.push_str(if mask & (1 << i) != 0 { "*" } else { t });
            }
            if !full {
                if k > 0 {
                    pat.push('.');
                }
                pat.push('>');
            }
            count += u64::from(set.contains(pat.as_str()));
        }
    }
    count
}

/// Reference matcher: does `pattern` match the literal `subject`?
pub fn naive_match(pattern: &str, subject: &str) -> bool {
    let mut p = pattern.split('.');
    let mut s = subject.split('.');
    loop {
        match (p.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Runs the scenario.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    ctx.bar.set_message("generating");
    let set = SubjectSet::generate(p.subjects, SEED)?;
    let mut subscribers = vec![Vec::new(); p.subs];
    for (i, pat) in set.patterns.iter().enumerate() {
        encode_sub(&mut subscribers[i % p.subs], pat, None, i as u64 + 1);
    }
    let mut rng = StdRng::seed_from_u64(SEED ^ 1);
    let pool = set.pool(p.pool, &mut rng);
    let payload = p.payload();
    let per_batch = (p.batch / super::frame_len(16, payload.len())).max(1);
    let batches: Vec<Batch> = pool
        .chunks(per_batch)
        .map(|chunk| Batch::new(chunk.iter().map(|(s, n)| (s.as_str(), *n)), &payload))
        .collect();
    let avg_fanout = pool.iter().map(|(_, n)| *n).sum::<u64>() as f64 / pool.len().max(1) as f64;
    let spec = FlowSpec {
        publishers: p.pubs,
        subscribers,
        batches,
        pinned: false,
        msgs: p.msgs,
        window: p.window_msgs(16),
        duration: p.duration(),
        login: None,
    };
    let mut out = flow::run(ctx, &spec)?;
    let mut r = out.result(Scenario::Subjects, p);
    set_rate(&mut r, out.published, p.size, out.pub_elapsed.max(out.sub_elapsed));
    out.set_cpu(&mut r, out.published);
    let setup = out.setup_elapsed.as_secs_f64();
    r.subjects = Some(SubjectsStats {
        subscriptions: set.patterns.len(),
        literal: set.kinds[0],
        star: set.kinds[1],
        full_wildcard: set.kinds[2],
        subscribe_s: setup,
        subs_per_s: set.patterns.len() as f64 / setup.max(1e-9),
        rss_kb_subscribed: out.before.map(|s| s.rss_kb),
        avg_deliveries_per_msg: avg_fanout,
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    // protocol.md §9: `*` matches one token, `>` one or more at the end.
    #[test]
    fn naive_matcher_rules() {
        assert!(naive_match("a.*.c", "a.b.c"));
        assert!(naive_match("a.>", "a.b.c"));
        assert!(!naive_match("a.>", "a"));
        assert!(naive_match(">", "a"));
        assert!(!naive_match("a.*", "a.b.c"));
        assert!(!naive_match("a.b", "a.b.c"));
    }

    #[test]
    fn enumerated_matching_agrees_with_naive() {
        let set = SubjectSet::generate(3000, 7).unwrap();
        let mut rng = StdRng::seed_from_u64(9);
        for (subject, n) in set.pool(500, &mut rng).into_iter() {
            let naive = set.patterns.iter().filter(|p| naive_match(p, &subject)).count() as u64;
            assert_eq!(n, naive, "{subject}");
        }
        let extra: HashSet<String> = [">", "*.*", "a.>", "*.b", "a.b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(count_matches(&extra, "a.b"), 5);
    }

    #[test]
    fn generation_is_distinct_deterministic_and_mixed() {
        let a = SubjectSet::generate(10_000, 1).unwrap();
        let b = SubjectSet::generate(10_000, 1).unwrap();
        assert_eq!(a.patterns, b.patterns);
        assert_eq!(a.set.len(), 10_000);
        assert!(a.kinds.iter().all(|&k| k > 0), "{:?}", a.kinds);
        assert_eq!(a.kinds.iter().sum::<usize>(), 10_000);
    }
}
