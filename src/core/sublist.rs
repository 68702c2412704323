//! The interest tree: subject patterns (literal, `*`, `>`) with plain and queue
//! subscribers, matched against literal subjects, with a bounded match cache.
//!
//! Ownership: a `Sublist` belongs to one shard and is only touched by it. Values are
//! small copyable handles (a local subscription id, or a remote-interest entry id).
//!
//! Results are shared as `Rc<Matches>` so a publisher can keep delivering while the list
//! changes under it (auto-unsubscribe removes subscriptions in the middle of a fan-out).
//!
//! Modules: [`tokens`] holds each level's literal children (tokens packed in place, hashed
//! once per match). The cache keeps up to [`CACHE_MAX`] results; how a change reaches
//! them is told at [`SCAN_MAX`].

mod tokens;

use super::subject::{has_wildcard, is_valid_sub_pattern, matches, FWC, PWC, TSEP};
use super::FastMap;
use std::cell::Cell;
use std::rc::Rc;
use tokens::{Tok, TokenMap};

thread_local! {
    /// Moved by every change to any sublist on this thread (a shard's), and by every new
    /// account definition ([`bump_epoch`]): a memo of match results taken at one epoch
    /// holds while it is current (`core::shard::memo`).
    static EPOCH: Cell<u64> = const { Cell::new(1) };
}

/// The current epoch of this thread's sublists.
#[inline]
pub fn epoch() -> u64 {
    EPOCH.with(Cell::get)
}

/// Invalidate every memo of this thread's match results.
pub fn bump_epoch() {
    EPOCH.with(|e| e.set(e.get().wrapping_add(1).max(1)));
}

/// Cached results kept per sublist; past this, a quarter is evicted. Large enough for a
/// working set of thousands of subjects; a wildcard change costs no scan of it (see
/// [`SCAN_MAX`]).
const CACHE_MAX: usize = 8192;
/// The bound while caching is bypassed (it hits too seldom to be worth its memory): what
/// the reference keeps. An account whose subjects never repeat holds this many results,
/// not `CACHE_MAX`.
const BYPASSED_MAX: usize = 1024;
/// Up to this many cached results, a wildcard subscribe or unsubscribe drops exactly the
/// results it matches (a scan). Past it, the scan would cost too much per change, so the
/// change marks stale every result whose subject starts with the pattern's first token
/// (every result, for a pattern that starts with a wildcard): one counter per first token,
/// which each result checks on use.
const SCAN_MAX: usize = 1024;
/// Lookups per measurement of the cache's hit rate: several times the cache, so that
/// a run of cached neighbours (keys cycling in order) cannot fill a window with hits.
const HIT_WINDOW: u32 = 4 * CACHE_MAX as u32;
/// While the cache is full and fewer than one lookup in this many hits it (subjects that
/// seldom repeat, such as a KV bucket's many keys), results are not cached: caching them
/// costs an allocation, an insertion and an eviction each and helps nobody. One miss in
/// [`SAMPLE_EVERY`] is still cached, so subjects that start repeating get back in.
const LOW_HIT_RATE: u32 = 8;
/// While bypassed, caching resumes once more than one lookup in this many hits.
const RESUME_HIT_RATE: u32 = 3;
const SAMPLE_EVERY: u32 = 16;

/// A subscription pattern that no tree accepts (empty token, `>` not last).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid subject")]
pub struct InvalidSubject;

/// Members of one queue group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueGroup<T> {
    /// Shared with every cached result that holds the group (a result copies it).
    pub name: Rc<[u8]>,
    pub members: Vec<T>,
}

/// Everything interested in one subject: plain subscribers, and queue groups merged by
/// name across all matching patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matches<T> {
    pub psubs: Vec<T>,
    pub qsubs: Vec<QueueGroup<T>>,
    /// How many leading tokens of its subject this result was decided by, when that is
    /// fewer than the subject has (`None` otherwise): every walk through the tree stopped
    /// before the last token because nothing is subscribed deeper. The result then holds
    /// for every valid subject that starts with the same `prefix` tokens and has more than
    /// `prefix` (`$JS.ACK.S.C` for every ack of consumer `C` when only `$JS.ACK.S.C.>` is
    /// subscribed): what a route memo keys on (`core::shard::memo`).
    pub prefix: Option<u16>,
    /// The [`epoch`] the result was computed at. `prefix` speaks for longer subjects only
    /// while it is current: a cached result outlives changes that leave its own subject's
    /// interest alone but not its neighbours' (see [`Matches::prefix_at`]).
    computed: u64,
}

impl<T> Matches<T> {
    fn empty() -> Self {
        Matches {
            psubs: Vec::new(),
            qsubs: Vec::new(),
            prefix: None,
            computed: 0,
        }
    }

    /// [`Matches::prefix`] if this result was computed at `epoch`.
    #[inline]
    pub fn prefix_at(&self, epoch: u64) -> Option<u16> {
        self.prefix.filter(|_| self.computed == epoch)
    }

    /// True if nobody is interested.
    pub fn is_empty(&self) -> bool {
        self.psubs.is_empty() && self.qsubs.is_empty()
    }
}

struct Node<T> {
    next: Option<Box<Level<T>>>,
    psubs: Vec<T>,
    qsubs: Vec<QueueGroup<T>>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node {
            next: None,
            psubs: Vec::new(),
            qsubs: Vec::new(),
        }
    }
}

impl<T> Node<T> {
    fn is_empty(&self) -> bool {
        self.psubs.is_empty() && self.qsubs.is_empty() && self.next.as_ref().is_none_or(|l| l.is_empty())
    }
}

struct Level<T> {
    nodes: TokenMap<Node<T>>,
    pwc: Option<Box<Node<T>>>,
    fwc: Option<Box<Node<T>>>,
}

impl<T> Default for Level<T> {
    fn default() -> Self {
        Level {
            nodes: TokenMap::default(),
            pwc: None,
            fwc: None,
        }
    }
}

impl<T> Level<T> {
    fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.pwc.is_none() && self.fwc.is_none()
    }
}

/// A subject and what it matched.
type LastLookup<T> = (Box<[u8]>, Rc<Matches<T>>);

/// A cached result and the wildcard-change counter of its subject's first token, as it
/// was when the result was computed: stale once the counter moved.
struct Cached<T> {
    result: Rc<Matches<T>>,
    changes: Rc<Cell<u64>>,
    seen: u64,
}

impl<T> Cached<T> {
    #[inline(always)]
    fn fresh(&self) -> bool {
        self.changes.get() == self.seen
    }
}

/// A subject interest tree with a match cache.
pub struct Sublist<T> {
    root: Level<T>,
    cache: FastMap<Box<[u8]>, Cached<T>>,
    /// Wildcard-change counters by first token, shared with the cached results under it.
    first_tokens: FastMap<Box<[u8]>, Rc<Cell<u64>>>,
    /// [`SCAN_MAX`], lowered by tests to reach the counters with a few results.
    scan_max: usize,
    cache_enabled: bool,
    /// The most recent lookup, checked before the cache: publishers tend to repeat a
    /// subject, and one compare is cheaper than hashing it. Cleared by every change.
    last: Option<LastLookup<T>>,
    /// The cache's hit rate over the current window, and whether results go uncached.
    window: (u32, u32),
    bypass: bool,
    misses: u32,
    /// The last uncached result, whose allocation is reused once nobody holds it.
    scratch: Option<Rc<Matches<T>>>,
    count: usize,
    /// Monitoring counters (`/subsz`): inserts, removes, lookups and cache hits.
    stats: Counts,
}

#[derive(Clone, Copy, Default)]
struct Counts {
    inserts: u64,
    removes: u64,
    matches: u64,
    hits: u64,
}

impl<T: Copy + Eq> Default for Sublist<T> {
    fn default() -> Self {
        Self::new(true)
    }
}

impl<T: Copy + Eq> Sublist<T> {
    /// A new empty tree; `cache` turns the match cache on (nats-server's default).
    pub fn new(cache: bool) -> Self {
        Sublist {
            root: Level::default(),
            cache: FastMap::default(),
            first_tokens: FastMap::default(),
            scan_max: SCAN_MAX,
            cache_enabled: cache,
            last: None,
            window: (0, 0),
            bypass: false,
            misses: 0,
            scratch: None,
            count: 0,
            stats: Counts::default(),
        }
    }

    /// nats-server's `SublistStats` of this tree (fanouts from the cached results).
    pub fn stats(&self) -> crate::core::report::SublistStats {
        let mut st = crate::core::report::SublistStats {
            num_subs: self.count as u64,
            num_cache: self.cache.len() as u64,
            inserts: self.stats.inserts,
            removes: self.stats.removes,
            matches: self.stats.matches,
            cache_hits: self.stats.hits,
            ..Default::default()
        };
        for r in self.cache.values().map(|c| &c.result) {
            let fanout = (r.psubs.len() + r.qsubs.len()) as u64;
            st.total_fanout += fanout;
            st.cached += 1;
            st.max_fanout = st.max_fanout.max(fanout);
        }
        st
    }

    /// Number of entries (plain and queue).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Number of cached match results.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Add `value` under `pattern`, in queue group `queue` if given.
    pub fn insert(&mut self, pattern: &[u8], queue: Option<&[u8]>, value: T) -> Result<(), InvalidSubject> {
        // Validate fully before touching the tree, so a bad pattern leaves no trace.
        if !is_valid_sub_pattern(pattern) {
            return Err(InvalidSubject);
        }
        let mut level = &mut self.root;
        let mut tokens = pattern.split(|&b| b == TSEP).peekable();
        let node = loop {
            let Some(t) = tokens.next() else {
                return Err(InvalidSubject);
            };
            let node: &mut Node<T> = if t == [PWC] {
                level.pwc.get_or_insert_with(Default::default)
            } else if t == [FWC] {
                level.fwc.get_or_insert_with(Default::default)
            } else {
                level.nodes.get_or_default(&Tok::new(t))
            };
            if tokens.peek().is_none() {
                break node;
            }
            level = node.next.get_or_insert_with(Default::default);
        };
        match queue {
            None => node.psubs.push(value),
            Some(q) => match node.qsubs.iter_mut().find(|g| &*g.name == q) {
                Some(g) => g.members.push(value),
                None => node.qsubs.push(QueueGroup {
                    name: q.into(),
                    members: vec![value],
                }),
            },
        }
        self.count += 1;
        self.stats.inserts += 1;
        self.invalidate(pattern);
        Ok(())
    }

    /// Remove one `value` previously inserted under `pattern`/`queue`. Returns false if absent.
    pub fn remove(&mut self, pattern: &[u8], queue: Option<&[u8]>, value: T) -> bool {
        let tokens: Vec<&[u8]> = pattern.split(|&b| b == TSEP).collect();
        let removed = remove_from(&mut self.root, &tokens, queue, value);
        if removed {
            self.count -= 1;
            self.stats.removes += 1;
            self.invalidate(pattern);
        }
        removed
    }

    /// Drop cached results that `pattern` affects. A literal pattern affects only its own
    /// subject (one lookup). A wildcard pattern drops the results it matches while the
    /// cache is small, and past [`SCAN_MAX`] marks its first token's results stale.
    fn invalidate(&mut self, pattern: &[u8]) {
        bump_epoch();
        self.last = None;
        if self.cache.is_empty() {
            return;
        }
        if !has_wildcard(pattern) {
            self.cache.remove(pattern);
        } else if self.cache.len() <= self.scan_max {
            self.cache.retain(|subject, _| !matches(pattern, subject));
        } else {
            let first = first_token(pattern);
            if first == [PWC] || first == [FWC] {
                for c in self.first_tokens.values() {
                    c.set(c.get().wrapping_add(1));
                }
            } else if let Some(c) = self.first_tokens.get(first) {
                c.set(c.get().wrapping_add(1));
            }
        }
    }

    /// The values stored under exactly `pattern` (and `queue`), without matching
    /// wildcards: how many subscriptions share this exact interest.
    pub fn exact(&self, pattern: &[u8], queue: Option<&[u8]>) -> &[T] {
        let mut level = &self.root;
        let mut tokens = pattern.split(|&b| b == TSEP).peekable();
        while let Some(t) = tokens.next() {
            let node = if t == [PWC] {
                level.pwc.as_deref()
            } else if t == [FWC] {
                level.fwc.as_deref()
            } else {
                level.nodes.get(&Tok::new(t))
            };
            let Some(node) = node else { return &[] };
            if tokens.peek().is_none() {
                return match queue {
                    None => &node.psubs,
                    Some(q) => node.qsubs.iter().find(|g| &*g.name == q).map_or(&[], |g| &g.members),
                };
            }
            match node.next.as_deref() {
                Some(next) => level = next,
                None => return &[],
            }
        }
        &[]
    }

    /// Count a lookup answered from a memo of this tree's results (a hit).
    #[inline]
    pub fn count_memo_hit(&mut self) {
        self.stats.matches += 1;
        self.stats.hits += 1;
    }

    /// Everything interested in the literal `subject`.
    pub fn matches(&mut self, subject: &[u8]) -> Rc<Matches<T>> {
        self.stats.matches += 1;
        if let Some((s, r)) = &self.last {
            if crate::core::subject::same(s, subject) {
                self.stats.hits += 1;
                return r.clone();
            }
        }
        let r = match self.cache.get(subject) {
            Some(c) if c.fresh() => {
                self.stats.hits += 1;
                self.window.1 += 1;
                c.result.clone()
            }
            _ => self.match_and_cache(subject),
        };
        self.window.0 += 1;
        if self.window.0 >= HIT_WINDOW {
            let (lookups, hits) = std::mem::take(&mut self.window);
            // Full: once it has filled, eviction keeps it between these bounds (a test
            // for exactly `CACHE_MAX` almost never caught it there).
            let full = self.cache.len() > self.cache_max() / 4 * 3;
            // Hysteresis: subjects that cycle in order leave a run of neighbours cached,
            // and a window over that run must not turn caching back on.
            self.bypass = full
                && if self.bypass {
                    hits * RESUME_HIT_RATE < lookups
                } else {
                    hits * LOW_HIT_RATE < lookups
                };
        }
        if self.cache_enabled && !self.bypass {
            match &mut self.last {
                // Reuse the key's allocation when the length fits.
                Some((s, m)) if s.len() == subject.len() => {
                    s.copy_from_slice(subject);
                    *m = r.clone();
                }
                last => *last = Some((subject.into(), r.clone())),
            }
        }
        r
    }

    /// [`Self::matches`] for a subject that is used once (a service import's `_R_.`
    /// response subject): computed and not cached, so one-shot subjects neither churn the
    /// cache nor evict the subjects that repeat (they are never in it to be found).
    pub fn matches_once(&mut self, subject: &[u8]) -> Rc<Matches<T>> {
        self.stats.matches += 1;
        self.match_scratch(subject)
    }

    fn match_and_cache(&mut self, subject: &[u8]) -> Rc<Matches<T>> {
        self.misses = self.misses.wrapping_add(1);
        if self.bypass && self.misses % SAMPLE_EVERY != 0 {
            return self.match_scratch(subject);
        }
        let r = Rc::new(self.match_uncached(subject));
        if self.cache_enabled {
            let max = self.cache_max();
            if self.cache.len() >= max {
                // Down to three quarters of the bound (a bypass that just began drops more).
                let drop = self.cache.len() - max / 4 * 3;
                let mut n = 0;
                self.cache.retain(|_, _| {
                    n += 1;
                    n > drop
                });
            }
            let first = first_token(subject);
            let changes = match self.first_tokens.get(first) {
                Some(c) => c.clone(),
                None => {
                    // Results dropped (by eviction or by changes) leave their counters
                    // behind: forget the unshared ones before they outnumber the results.
                    if self.first_tokens.len() > 2 * self.cache.len() + 64 {
                        self.first_tokens.retain(|_, c| Rc::strong_count(c) > 1);
                    }
                    self.first_tokens.entry(first.into()).or_default().clone()
                }
            };
            let seen = changes.get();
            let cached = Cached {
                result: r.clone(),
                changes,
                seen,
            };
            match self.cache.get_mut(subject) {
                // A stale result: replaced in place, its key kept.
                Some(c) => *c = cached,
                None => {
                    self.cache.insert(subject.into(), cached);
                }
            }
        }
        r
    }

    /// How many results the cache may hold now.
    fn cache_max(&self) -> usize {
        if self.bypass {
            BYPASSED_MAX
        } else {
            CACHE_MAX
        }
    }

    /// An uncached result in the allocation of the previous one when nobody holds that
    /// any more (the usual case: a publish routes and drops its result).
    fn match_scratch(&mut self, subject: &[u8]) -> Rc<Matches<T>> {
        let mut r = self.scratch.take().unwrap_or_else(|| Rc::new(Matches::empty()));
        match Rc::get_mut(&mut r) {
            Some(m) => {
                m.psubs.clear();
                m.qsubs.clear();
                m.prefix = None;
                self.match_into(subject, m);
            }
            None => r = Rc::new(self.match_uncached(subject)),
        }
        self.scratch = Some(r.clone());
        r
    }

    fn match_uncached(&self, subject: &[u8]) -> Matches<T> {
        let mut out = Matches::empty();
        self.match_into(subject, &mut out);
        out
    }

    /// Appends the matches of `subject` to `out`.
    fn match_into(&self, subject: &[u8], out: &mut Matches<T>) {
        if subject.is_empty() {
            return;
        }
        // Each token packed and hashed once: wildcard branches look the same token up at
        // several levels.
        let mut tokens: smallvec::SmallVec<[Tok<'_>; 16]> = smallvec::SmallVec::new();
        for t in subject.split(|&b| b == TSEP) {
            if t.is_empty() {
                return;
            }
            tokens.push(Tok::new(t));
        }
        let n = tokens.len();
        let mut read = 0;
        match_level(&self.root, &tokens, 0, &mut read, out);
        out.prefix = if read < n { u16::try_from(read).ok() } else { None };
        out.computed = epoch();
    }

    /// Visit every (pattern, queue, value) entry. Used to replay interest to a new peer.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Option<&[u8]>, T)) {
        let mut prefix = Vec::new();
        walk(&self.root, &mut prefix, &mut f);
    }
}

/// The first token of a subject or pattern (all of it when it has one token).
fn first_token(s: &[u8]) -> &[u8] {
    s.split(|&b| b == TSEP).next().unwrap_or_default()
}

fn add_node<T: Copy>(n: &Node<T>, out: &mut Matches<T>) {
    out.psubs.extend_from_slice(&n.psubs);
    for g in &n.qsubs {
        match out.qsubs.iter_mut().find(|o| o.name == g.name) {
            Some(o) => o.members.extend_from_slice(&g.members),
            None => out.qsubs.push(g.clone()),
        }
    }
}

/// Appends the matches of `tokens` under `level` to `out`; `base` is the index of
/// `tokens[0]` in the whole subject, and `read` is raised to the number of leading tokens
/// the result depends on: a token counts when a level could tell it apart (it has literal
/// tokens to look it up among, or a `*` whose use depends on whether more tokens follow).
fn match_level<T: Copy>(mut level: &Level<T>, tokens: &[Tok<'_>], base: usize, read: &mut usize, out: &mut Matches<T>) {
    let mut last: Option<&Node<T>> = None;
    let mut pwc: Option<&Node<T>> = None;
    for (i, t) in tokens.iter().enumerate() {
        if let Some(f) = &level.fwc {
            add_node(f, out);
        }
        pwc = level.pwc.as_deref();
        // A level with only `>` decides nothing by this token (nor by whether more follow).
        if pwc.is_some() || !level.nodes.is_empty() {
            *read = (*read).max(base + i + 1);
        }
        if let Some(p) = pwc {
            if let Some(next) = &p.next {
                match_level(next, &tokens[i + 1..], base + i + 1, read, out);
            }
        }
        last = level.nodes.get(t);
        match last.and_then(|n| n.next.as_deref()) {
            Some(next) if i + 1 < tokens.len() => level = next,
            _ => {
                if i + 1 < tokens.len() {
                    // Literal path ends early; the wildcards above were already visited.
                    return;
                }
            }
        }
    }
    if let Some(n) = last {
        add_node(n, out);
    }
    if let Some(p) = pwc {
        add_node(p, out);
    }
}

fn remove_from<T: Copy + Eq>(level: &mut Level<T>, tokens: &[&[u8]], queue: Option<&[u8]>, value: T) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return false;
    };
    let first: &[u8] = first;
    let (removed, empty) = {
        let node: &mut Node<T> = if first == [PWC] {
            match level.pwc.as_deref_mut() {
                Some(n) => n,
                None => return false,
            }
        } else if first == [FWC] {
            match level.fwc.as_deref_mut() {
                Some(n) => n,
                None => return false,
            }
        } else {
            match level.nodes.get_mut(&Tok::new(first)) {
                Some(n) => n,
                None => return false,
            }
        };
        let removed = if rest.is_empty() {
            remove_value(node, queue, value)
        } else {
            match node.next.as_deref_mut() {
                Some(next) => {
                    let r = remove_from(next, rest, queue, value);
                    if next.is_empty() {
                        node.next = None;
                    }
                    r
                }
                None => false,
            }
        };
        (removed, node.is_empty())
    };
    if empty {
        if first == [PWC] {
            level.pwc = None;
        } else if first == [FWC] {
            level.fwc = None;
        } else {
            level.nodes.remove(&Tok::new(first));
        }
    }
    removed
}

fn remove_value<T: Copy + Eq>(node: &mut Node<T>, queue: Option<&[u8]>, value: T) -> bool {
    match queue {
        None => match node.psubs.iter().position(|v| *v == value) {
            Some(i) => {
                node.psubs.swap_remove(i);
                true
            }
            None => false,
        },
        Some(q) => {
            let Some(gi) = node.qsubs.iter().position(|g| &*g.name == q) else {
                return false;
            };
            let g = &mut node.qsubs[gi];
            let Some(i) = g.members.iter().position(|v| *v == value) else {
                return false;
            };
            g.members.swap_remove(i);
            if g.members.is_empty() {
                node.qsubs.swap_remove(gi);
            }
            true
        }
    }
}

fn walk<T: Copy>(level: &Level<T>, prefix: &mut Vec<u8>, f: &mut impl FnMut(&[u8], Option<&[u8]>, T)) {
    let mut visit = |tok: &[u8], node: &Node<T>, prefix: &mut Vec<u8>| {
        let keep = prefix.len();
        if !prefix.is_empty() {
            prefix.push(TSEP);
        }
        prefix.extend_from_slice(tok);
        for v in &node.psubs {
            f(prefix, None, *v);
        }
        for g in &node.qsubs {
            for v in &g.members {
                f(prefix, Some(&g.name), *v);
            }
        }
        if let Some(next) = &node.next {
            walk(next, prefix, f);
        }
        prefix.truncate(keep);
    };
    for (tok, node) in level.nodes.iter() {
        visit(tok, node, prefix);
    }
    if let Some(n) = &level.pwc {
        visit(&[PWC], n, prefix);
    }
    if let Some(n) = &level.fwc {
        visit(&[FWC], n, prefix);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort();
        v
    }

    #[test]
    fn literal_and_wildcards() {
        let mut sl = Sublist::new(true);
        sl.insert(b"foo.bar", None, 1).unwrap();
        sl.insert(b"foo.*", None, 2).unwrap();
        sl.insert(b"foo.>", None, 3).unwrap();
        sl.insert(b">", None, 4).unwrap();
        sl.insert(b"*.bar", None, 5).unwrap();
        sl.insert(b"foo", None, 6).unwrap();
        assert_eq!(sorted(sl.matches(b"foo.bar").psubs.clone()), vec![1, 2, 3, 4, 5]);
        assert_eq!(sorted(sl.matches(b"foo.baz").psubs.clone()), vec![2, 3, 4]);
        assert_eq!(sorted(sl.matches(b"foo.bar.baz").psubs.clone()), vec![3, 4]);
        assert_eq!(sorted(sl.matches(b"foo").psubs.clone()), vec![4, 6]);
        assert!(sl.matches(b"foo..bar").is_empty());
        assert!(sl.matches(b"").is_empty());
        assert_eq!(sl.count(), 6);
    }

    #[test]
    fn results_say_how_many_tokens_decided_them() {
        let mut sl = Sublist::new(true);
        sl.insert(b"$JS.ACK.S.C.>", None, 1).unwrap();
        let mut prefix = |s: &[u8]| sl.matches(s).prefix_at(epoch());
        // Below `C` there is only `>`: no token there is looked at.
        assert_eq!(prefix(b"$JS.ACK.S.C.1.2.3.4.5"), Some(4));
        assert_eq!(prefix(b"$JS.ACK.S.C.1"), Some(4));
        assert_eq!(prefix(b"$JS.ACK.T.C.1.2.3.4.5"), Some(3));
        assert_eq!(prefix(b"other.subject"), Some(1));
        // Every token read: a subscription could name any of them.
        assert_eq!(prefix(b"$JS.ACK.S.C"), None);
        assert!(prefix(b"").is_none() && prefix(b"a..b").is_none());
        sl.insert(b"$JS.*.S.C.1", None, 2).unwrap();
        let mut prefix = |s: &[u8]| sl.matches(s).prefix_at(epoch());
        assert_eq!(prefix(b"$JS.ACK.S.C.1.2"), Some(5));
        assert_eq!(prefix(b"$JS.ACK.S.C.2.2"), Some(5));
        let cached = sl.matches(b"$JS.ACK.S.C.1.2");
        sl.insert(b"$JS.*.S.C.1.*.*", None, 3).unwrap();
        // Still cached (the new pattern does not match it), but no longer for its prefix.
        let again = sl.matches(b"$JS.ACK.S.C.1.2");
        assert!(Rc::ptr_eq(&cached, &again));
        assert_eq!(again.prefix_at(epoch()), None);
        assert_eq!(sl.matches(b"$JS.ACK.S.C.1.2.3.4").prefix_at(epoch()), Some(7));
        assert_eq!(sl.matches_once(b"$JS.ACK.S.C.1.2").prefix_at(epoch()), None);
        // An empty tree decides by no token at all.
        assert_eq!(Sublist::<u32>::new(true).matches(b"a.b").prefix_at(epoch()), Some(0));
    }

    #[test]
    fn queue_groups_merge_by_name() {
        let mut sl = Sublist::new(true);
        sl.insert(b"foo.*", Some(b"q"), 1).unwrap();
        sl.insert(b"foo.>", Some(b"q"), 2).unwrap();
        sl.insert(b"foo.bar", Some(b"r"), 3).unwrap();
        let m = sl.matches(b"foo.bar");
        assert!(m.psubs.is_empty());
        assert_eq!(m.qsubs.len(), 2);
        let q = m.qsubs.iter().find(|g| &*g.name == b"q").unwrap();
        assert_eq!(sorted(q.members.clone()), vec![1, 2]);
    }

    #[test]
    fn remove_prunes_and_invalidates_cache() {
        let mut sl = Sublist::new(true);
        sl.insert(b"a.b.c", None, 1).unwrap();
        sl.insert(b"a.*.c", None, 2).unwrap();
        assert_eq!(sl.matches(b"a.b.c").psubs.len(), 2);
        assert!(sl.remove(b"a.b.c", None, 1));
        assert!(!sl.remove(b"a.b.c", None, 1));
        assert_eq!(sl.matches(b"a.b.c").psubs, vec![2]);
        assert!(sl.remove(b"a.*.c", None, 2));
        assert!(sl.matches(b"a.b.c").is_empty());
        assert!(sl.root.is_empty(), "empty levels are pruned");
        assert_eq!(sl.count(), 0);
    }

    #[test]
    fn last_lookup_memo_tells_same_length_subjects_apart() {
        let mut sl = Sublist::new(true);
        sl.insert(b"a.b", None, 1).unwrap();
        sl.insert(b"a.c", None, 2).unwrap();
        for _ in 0..3 {
            assert_eq!(sl.matches(b"a.b").psubs, vec![1]);
            assert_eq!(sl.matches(b"a.b").psubs, vec![1]);
            assert_eq!(sl.matches(b"a.c").psubs, vec![2]);
            assert!(sl.matches(b"a.d").is_empty());
        }
        assert!(sl.remove(b"a.c", None, 2));
        assert!(sl.matches(b"a.c").is_empty());
    }

    #[test]
    fn insert_after_match_updates_cache() {
        let mut sl = Sublist::new(true);
        assert!(sl.matches(b"x.y").is_empty());
        sl.insert(b"x.>", None, 7).unwrap();
        assert_eq!(sl.matches(b"x.y").psubs, vec![7]);
    }

    #[test]
    fn exact_lookups() {
        let mut sl = Sublist::new(true);
        sl.insert(b"a.*.c", None, 1).unwrap();
        sl.insert(b"a.*.c", None, 2).unwrap();
        sl.insert(b"a.*.c", Some(b"q"), 3).unwrap();
        sl.insert(b"a.>", None, 4).unwrap();
        assert_eq!(sorted(sl.exact(b"a.*.c", None).to_vec()), vec![1, 2]);
        assert_eq!(sl.exact(b"a.*.c", Some(b"q")), &[3]);
        assert_eq!(sl.exact(b"a.*.c", Some(b"r")), &[] as &[u32]);
        assert_eq!(sl.exact(b"a.>", None), &[4]);
        assert_eq!(sl.exact(b"a.b.c", None), &[] as &[u32], "no wildcard matching");
        assert_eq!(sl.exact(b"a", None), &[] as &[u32]);
    }

    #[test]
    fn invalid_patterns_leave_no_trace() {
        let mut sl: Sublist<u32> = Sublist::new(true);
        for p in ["", "foo..bar", ".foo", "foo.", "foo.>.bar", ">.a"] {
            assert_eq!(sl.insert(p.as_bytes(), None, 1), Err(InvalidSubject), "{p:?}");
        }
        assert!(sl.root.is_empty());
        assert_eq!(sl.count(), 0);
    }

    #[test]
    fn long_subjects_spill_past_32_tokens() {
        let mut sl = Sublist::new(true);
        let long: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        let subj = long.join(".");
        sl.insert(subj.as_bytes(), None, 1).unwrap();
        sl.insert(b"t0.>", None, 2).unwrap();
        assert_eq!(sorted(sl.matches(subj.as_bytes()).psubs.clone()), vec![1, 2]);
    }

    #[test]
    fn for_each_replays_every_entry() {
        let mut sl = Sublist::new(true);
        sl.insert(b"a.b", None, 1).unwrap();
        sl.insert(b"a.*", Some(b"q"), 2).unwrap();
        sl.insert(b">", None, 3).unwrap();
        let mut seen = Vec::new();
        sl.for_each(|p, q, v| seen.push((String::from_utf8_lossy(p).into_owned(), q.map(|q| q.to_vec()), v)));
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (">".to_string(), None, 3),
                ("a.*".to_string(), Some(b"q".to_vec()), 2),
                ("a.b".to_string(), None, 1)
            ]
        );
    }

    /// Subjects that seldom repeat stop going into the cache (and results stay right,
    /// including one a caller still holds); once a few subjects repeat again, they are
    /// cached again.
    #[test]
    fn a_thrashing_cache_is_bypassed_and_recovers() {
        let mut sl = Sublist::new(true);
        sl.insert(b"kv.*", None, 1u32).unwrap();
        sl.insert(b"kv.>", Some(b"g"), 2u32).unwrap();
        let check = |m: &Matches<u32>| {
            assert_eq!(m.psubs, vec![1]);
            assert_eq!(m.qsubs.len(), 1);
            assert_eq!((&*m.qsubs[0].name, &m.qsubs[0].members[..]), (&b"g"[..], &[2][..]));
        };
        // A few repeats first, so that the window's end does not fall on a lookup that
        // left the cache at exactly its maximum.
        for i in 0..100 {
            check(&sl.matches(if i % 2 == 0 { b"kv.w1" } else { b"kv.w2" }));
        }
        for i in 0..3 * HIT_WINDOW {
            check(&sl.matches(format!("kv.k{i}").as_bytes()));
        }
        assert!(sl.bypass, "the cache is bypassed while it thrashes");
        assert!(
            sl.cache_len() <= BYPASSED_MAX,
            "{} results kept while bypassed",
            sl.cache_len()
        );
        let held = sl.matches(b"kv.held");
        let other = sl.matches(b"kv.other");
        check(&held);
        check(&other);
        assert!(sl.matches(b"nothing.here").is_empty());
        check(&held);
        // A small working set: sampled back into the cache, hits climb, caching resumes.
        for i in 0..3 * HIT_WINDOW {
            check(&sl.matches(format!("kv.hot{}", i % 7).as_bytes()));
            sl.matches(b"nothing.here");
        }
        assert!(!sl.bypass, "caching resumed");
        assert!(sl.cache_len() <= CACHE_MAX);
    }

    /// A KV bucket's puts cycle over its keys in order: the bypass, once on, stays on
    /// (the run of neighbours cached before it must not switch caching back on).
    #[test]
    fn keys_cycling_in_order_stay_bypassed() {
        let mut sl = Sublist::new(true);
        sl.insert(b"$KV.b.>", None, 1u32).unwrap();
        let mut on = 0;
        let warm = 2 * HIT_WINDOW as usize;
        let rounds = 400_000usize;
        for i in 0..rounds {
            let m = sl.matches(format!("$KV.b.k{}", i % (20 * CACHE_MAX)).as_bytes());
            assert_eq!(m.psubs, vec![1]);
            if i >= warm && sl.bypass {
                on += 1;
            }
        }
        assert!(
            on * 100 >= (rounds - warm) * 99,
            "bypassed in {on} of {} lookups",
            rounds - warm
        );
        // Subjects that never come back in time keep only what the reference would.
        assert!(sl.cache_len() <= BYPASSED_MAX, "{} results kept", sl.cache_len());
    }

    #[test]
    fn cache_is_bounded() {
        let mut sl = Sublist::new(true);
        sl.insert(b">", None, 1u32).unwrap();
        for i in 0..3 * CACHE_MAX {
            sl.matches(format!("s.{i}").as_bytes());
        }
        assert!(sl.cache_len() <= CACHE_MAX);
    }

    /// Past `SCAN_MAX` cached results, a wildcard change marks the results under its first
    /// token stale (recomputed on use) and leaves the others cached.
    #[test]
    fn wildcard_changes_past_the_scan_limit_go_by_first_token() {
        let mut sl = Sublist::new(true);
        sl.insert(b"a.>", None, 1u32).unwrap();
        sl.insert(b"b.>", None, 2u32).unwrap();
        let n = SCAN_MAX + 100;
        for i in 0..n {
            sl.matches(format!("a.{i}").as_bytes());
            sl.matches(format!("b.{i}").as_bytes());
        }
        assert_eq!(sl.cache_len(), 2 * n);
        sl.insert(b"a.*", None, 3u32).unwrap();
        assert_eq!(sl.cache_len(), 2 * n, "no scan dropped anything");
        let hits = sl.stats.hits;
        for i in 0..n {
            assert_eq!(sorted(sl.matches(format!("b.{i}").as_bytes()).psubs.clone()), vec![2]);
        }
        assert_eq!(sl.stats.hits - hits, n as u64, "b's results are still cached");
        let hits = sl.stats.hits;
        for i in 0..n {
            assert_eq!(
                sorted(sl.matches(format!("a.{i}").as_bytes()).psubs.clone()),
                vec![1, 3]
            );
        }
        assert_eq!(sl.stats.hits, hits, "a's results were recomputed");
        // Cached again, then a pattern that starts with a wildcard reaches every result.
        for i in 0..n {
            sl.matches(format!("a.{i}").as_bytes());
        }
        assert!(sl.remove(b"a.*", None, 3));
        sl.insert(b"*.7", None, 4u32).unwrap();
        assert_eq!(sorted(sl.matches(b"a.7").psubs.clone()), vec![1, 4]);
        assert_eq!(sorted(sl.matches(b"b.7").psubs.clone()), vec![2, 4]);
        assert_eq!(sorted(sl.matches(b"a.8").psubs.clone()), vec![1]);
        // A literal change still drops just its subject.
        sl.insert(b"b.8", None, 5u32).unwrap();
        assert_eq!(sorted(sl.matches(b"b.8").psubs.clone()), vec![2, 5]);
    }

    /// First tokens whose results were all dropped by changes do not pile up.
    #[test]
    fn first_token_counters_are_forgotten_with_their_results() {
        let mut sl = Sublist::new(true);
        for i in 0..10_000 {
            let subject = format!("u{i}.x");
            sl.matches(subject.as_bytes());
            sl.insert(subject.as_bytes(), None, 1u32).unwrap();
            assert!(sl.remove(subject.as_bytes(), None, 1u32));
        }
        assert_eq!(sl.cache_len(), 0);
        assert!(sl.first_tokens.len() <= 65, "{} counters kept", sl.first_tokens.len());
    }

    #[test]
    fn one_shot_lookups_agree_and_leave_the_cache_alone() {
        let build = || {
            let mut sl = Sublist::new(true);
            sl.insert(b"_R_.>", None, 1u32).unwrap();
            sl.insert(b"_R_.*.x", Some(b"q"), 2u32).unwrap();
            sl.insert(b"foo", None, 3u32).unwrap();
            sl
        };
        let (mut sl, mut other) = (build(), build());
        sl.matches(b"foo");
        let before = sl.cache_len();
        for s in [&b"_R_.a.x"[..], b"_R_.b", b"foo", b"nothing"] {
            let once = sl.matches_once(s);
            let cached = other.matches(s);
            assert_eq!(once.psubs, cached.psubs, "{s:?}");
            assert_eq!(once.qsubs.len(), cached.qsubs.len(), "{s:?}");
        }
        assert_eq!(sl.cache_len(), before, "one-shot subjects are not cached");
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn token() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("a".to_string()),
                Just("b".to_string()),
                Just("c".to_string()),
                Just("*".to_string())
            ]
        }

        fn pattern() -> impl Strategy<Value = String> {
            (proptest::collection::vec(token(), 1..4), any::<bool>()).prop_map(|(mut t, fwc)| {
                if fwc {
                    t.push(">".into());
                }
                t.join(".")
            })
        }

        fn subject() -> impl Strategy<Value = String> {
            proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c")], 1..5).prop_map(|t| t.join("."))
        }

        proptest! {
            // The tree must agree with the plain matcher for every pattern/subject pair,
            // including after removals.
            #[test]
            fn tree_agrees_with_matcher(pats in proptest::collection::vec(pattern(), 1..20),
                                        subs in proptest::collection::vec(subject(), 1..20),
                                        drop_mask in any::<u32>(), scan in any::<bool>()) {
                let mut sl = Sublist::new(true);
                // Without a scan, wildcard changes mark results stale by first token.
                if !scan {
                    sl.scan_max = 0;
                }
                for (i, p) in pats.iter().enumerate() {
                    sl.insert(p.as_bytes(), None, i as u32).unwrap();
                }
                for s in &subs { sl.matches(s.as_bytes()); }
                let mut live = vec![true; pats.len()];
                for (i, p) in pats.iter().enumerate() {
                    if drop_mask & (1 << (i % 32)) != 0 {
                        prop_assert!(sl.remove(p.as_bytes(), None, i as u32));
                        live[i] = false;
                        // Cache between changes, so each change meets cached results.
                        for s in &subs { sl.matches(s.as_bytes()); }
                    }
                }
                for s in &subs {
                    let got = sorted(sl.matches(s.as_bytes()).psubs.clone());
                    let want: Vec<u32> = (0..pats.len() as u32)
                        .filter(|&i| live[i as usize] && matches(pats[i as usize].as_bytes(), s.as_bytes()))
                        .collect();
                    prop_assert_eq!(got, want);
                }
                // A result decided by a prefix holds for every longer subject with it.
                for s in &subs {
                    let m = sl.matches(s.as_bytes());
                    let Some(k) = m.prefix_at(epoch()) else { continue };
                    let toks: Vec<&str> = s.split('.').collect();
                    prop_assert!(usize::from(k) < toks.len());
                    // As the memo uses it: at least the first token.
                    let k = usize::from(k).max(1);
                    if k >= toks.len() {
                        continue;
                    }
                    for tail in ["zz", "zz.a", "a", "a.b.c.d"] {
                        let longer = format!("{}.{tail}", toks[..k].join("."));
                        prop_assert_eq!(
                            sorted(sl.matches(longer.as_bytes()).psubs.clone()),
                            sorted(m.psubs.clone()),
                            "{} and {}", s, longer
                        );
                    }
                }
            }
        }
    }
}
