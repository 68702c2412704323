//! Publish and subscribe permissions of one connection (protocol.md §5; FEATURES.md §9),
//! compiled from a [`PermSpec`] into interest trees, with nats-server's rules:
//!
//! - publish: allowed if the allow list is absent or matches, and no deny entry matches;
//!   an empty (present) allow list allows nothing; decisions are cached per subject;
//! - `allow_responses`: a connection may publish to the reply subject of a message it
//!   received, `max` times within `expires`, even where publish permissions say no;
//! - subscribe: a subscription pattern is matched against the lists as a subject
//!   (`foo.*` is allowed by `foo.*` or `foo.>`), queue entries (`"foo.* q"`) allow or deny
//!   one group; deny wins;
//! - a wildcard subscription that a deny entry overlaps is allowed, but messages on
//!   denied subjects are not delivered through it (the delivery filter).
//!
//! Ownership: a `Perms` belongs to its connection's shard; the caches are plain maps.

use super::subject::{has_wildcard, is_valid_subject, subjects_collide};
use super::sublist::{Matches, Sublist};
use super::FastMap;
use std::time::{Duration, Instant};

/// Cached publish decisions per connection before a prune.
const MAX_PUB_CACHE: usize = 128;
/// Cached delivery-filter decisions per connection before a prune.
const MAX_DENY_CACHE: usize = 256;
/// Entries removed per prune.
const PRUNE: usize = 32;
/// Reply subjects tracked for `allow_responses` between prunes.
const REPLY_PRUNE_EVERY: usize = 4096;
const REPLY_PRUNE_TIME: Duration = Duration::from_secs(1);
/// Hard bound on tracked reply subjects (nats-server has none; a responder flooded with
/// requests whose replies it never sends would otherwise grow without limit).
const MAX_TRACKED_REPLIES: usize = 65_536;

/// nats-server's `allow_responses` defaults.
pub const DEFAULT_RESPONSE_MAX: i64 = 1;
pub const DEFAULT_RESPONSE_EXPIRES: Duration = Duration::from_secs(120);

/// Allow and deny lists. `allow: None` means "everything", `Some(vec![])` means nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectPerm {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

/// `allow_responses`: `max` responses (<= 0: unlimited) within `expires` (zero: forever).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponsePerm {
    pub max: i64,
    pub expires: Duration,
}

/// Permissions as configured (config file, JWT claims, auth callout).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermSpec {
    pub publish: Option<SubjectPerm>,
    pub subscribe: Option<SubjectPerm>,
    pub response: Option<ResponsePerm>,
}

impl PermSpec {
    /// nats-server's normalisation of a response permission: zero values take the
    /// defaults, and without an explicit publish allow list, publishing is limited to
    /// replies.
    pub fn normalized(mut self) -> PermSpec {
        if let Some(r) = &mut self.response {
            if r.max == 0 {
                r.max = DEFAULT_RESPONSE_MAX;
            }
            if r.expires.is_zero() {
                r.expires = DEFAULT_RESPONSE_EXPIRES;
            }
            let p = self.publish.get_or_insert_with(SubjectPerm::default);
            if p.allow.is_none() {
                p.allow = Some(Vec::new());
            }
        }
        self
    }

    /// Deny publishing to `subjects` in addition (auth callout, system imports).
    pub fn add_publish_deny(&mut self, subjects: &[&str]) {
        let p = self.publish.get_or_insert_with(SubjectPerm::default);
        for s in subjects {
            if !p.deny.iter().any(|d| d == s) {
                p.deny.push((*s).to_string());
            }
        }
    }
}

/// Split `"subject queue"` as nats-server does; `None` for a malformed entry.
fn split_subject_queue(entry: &str) -> Option<(&str, Option<&str>)> {
    let mut parts = entry.split_whitespace();
    let subject = parts.next()?;
    let queue = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let ok = is_valid_subject(subject.as_bytes()) && queue.is_none_or(|q| is_valid_subject(q.as_bytes()));
    ok.then_some((subject, queue))
}

fn tree(entries: &[String], queues: bool) -> Sublist<()> {
    let mut t = Sublist::new(false);
    for e in entries {
        if queues {
            if let Some((s, q)) = split_subject_queue(e) {
                let _ = t.insert(s.as_bytes(), q.map(str::as_bytes), ());
            }
        } else if is_valid_subject(e.as_bytes()) {
            let _ = t.insert(e.as_bytes(), None, ());
        } else if let Some((s, _)) = split_subject_queue(e) {
            // A queue qualifier means nothing for publishing: keep the subject's scope.
            let _ = t.insert(s.as_bytes(), None, ());
        }
    }
    t
}

/// A queue name against the queue entries that matched (literal first, then as a
/// wildcard pattern, as nats-server compares them).
fn queue_matches(queue: &[u8], groups: &[super::sublist::QueueGroup<()>]) -> bool {
    groups.is_empty()
        || groups
            .iter()
            .any(|g| *g.name == *queue || (has_wildcard(&g.name) && super::subject::matches(&g.name, queue)))
}

/// (subject, queue) of a delivery-filter decision.
type DenyKey = (Box<[u8]>, Box<[u8]>);

struct ReplyGrant {
    at: Instant,
    used: i64,
}

/// A connection's compiled permissions and their caches.
pub struct Perms {
    pub_allow: Option<Sublist<()>>,
    pub_deny: Option<Sublist<()>>,
    sub_allow: Option<Sublist<()>>,
    sub_deny: Option<Sublist<()>>,
    /// The deny entries, for deciding whether a wildcard subscription needs the filter.
    sub_deny_entries: Vec<(String, Option<String>)>,
    response: Option<ResponsePerm>,
    pub_cache: FastMap<Box<[u8]>, bool>,
    /// The last cached decision (checked before the cache).
    last_pub: Option<(Box<[u8]>, bool)>,
    /// Delivery filter: on once a subscription overlaps a deny entry.
    deny_filter: bool,
    deny_cache: FastMap<DenyKey, bool>,
    replies: FastMap<Box<[u8]>, ReplyGrant>,
    replies_since_prune: usize,
    last_prune: Option<Instant>,
    spec: PermSpec,
}

impl Perms {
    pub fn new(spec: PermSpec) -> Perms {
        let (mut pub_allow, mut pub_deny) = (None, None);
        if let Some(p) = &spec.publish {
            pub_allow = p.allow.as_ref().map(|a| tree(a, false));
            if !p.deny.is_empty() {
                pub_deny = Some(tree(&p.deny, false));
            }
        }
        let (mut sub_allow, mut sub_deny, mut entries) = (None, None, Vec::new());
        if let Some(s) = &spec.subscribe {
            if let Some(a) = s.allow.as_ref().filter(|a| !a.is_empty()) {
                sub_allow = Some(tree(a, true));
            }
            if !s.deny.is_empty() {
                sub_deny = Some(tree(&s.deny, true));
                entries = s
                    .deny
                    .iter()
                    .filter_map(|e| split_subject_queue(e))
                    .map(|(s, q)| (s.to_string(), q.map(str::to_string)))
                    .collect();
            }
        }
        Perms {
            pub_allow,
            pub_deny,
            sub_allow,
            sub_deny,
            sub_deny_entries: entries,
            response: spec.response,
            pub_cache: FastMap::default(),
            last_pub: None,
            deny_filter: false,
            deny_cache: FastMap::default(),
            replies: FastMap::default(),
            replies_since_prune: 0,
            last_prune: None,
            spec,
        }
    }

    /// What the permissions were built from (`$SYS.REQ.USER.INFO`, `/connz?auth=1`).
    pub fn spec(&self) -> &PermSpec {
        &self.spec
    }

    /// Publish permissions restrict anything.
    pub fn checks_publish(&self) -> bool {
        self.pub_allow.is_some() || self.pub_deny.is_some()
    }

    /// May the connection publish to the literal `subject`?
    pub fn can_publish(&mut self, subject: &[u8], now: Instant) -> bool {
        if !self.checks_publish() {
            return true;
        }
        // Publishers tend to repeat a subject: one compare instead of hashing it.
        if let Some((s, v)) = &self.last_pub {
            if **s == *subject {
                return *v;
            }
        }
        if let Some(&v) = self.pub_cache.get(subject) {
            self.last_pub = Some((subject.into(), v));
            return v;
        }
        let mut allowed = match &mut self.pub_allow {
            Some(t) => !t.matches(subject).psubs.is_empty(),
            None => true,
        };
        if allowed {
            if let Some(t) = &mut self.pub_deny {
                allowed = t.matches(subject).psubs.is_empty();
            }
        }
        if !allowed && self.response.is_some() {
            // Reply grants are not cached: they are used up.
            return self.use_reply_grant(subject, now);
        }
        if self.pub_cache.len() >= MAX_PUB_CACHE {
            prune(&mut self.pub_cache);
        }
        self.pub_cache.insert(subject.into(), allowed);
        self.last_pub = Some((subject.into(), allowed));
        allowed
    }

    fn use_reply_grant(&mut self, subject: &[u8], now: Instant) -> bool {
        let Some(r) = self.response else { return false };
        let Some(g) = self.replies.get_mut(subject) else {
            return false;
        };
        g.used += 1;
        let over = r.max > 0 && g.used > r.max;
        let stale = !r.expires.is_zero() && now.saturating_duration_since(g.at) > r.expires;
        if over || stale {
            self.replies.remove(subject);
            return false;
        }
        true
    }

    /// A message with reply subject `reply` was delivered to this connection: with
    /// `allow_responses`, it may now answer there.
    pub fn track_reply(&mut self, reply: &[u8], now: Instant) {
        let Some(r) = self.response else { return };
        if reply.is_empty() || self.base_publish_allowed(reply) {
            return;
        }
        self.replies.insert(reply.into(), ReplyGrant { at: now, used: 0 });
        self.replies_since_prune += 1;
        let due = self
            .last_prune
            .is_none_or(|t| now.saturating_duration_since(t) > REPLY_PRUNE_TIME);
        if self.replies_since_prune > REPLY_PRUNE_EVERY || due || self.replies.len() > MAX_TRACKED_REPLIES {
            self.replies.retain(|_, g| {
                !(r.max > 0 && g.used >= r.max
                    || !r.expires.is_zero() && now.saturating_duration_since(g.at) > r.expires)
            });
            if self.replies.len() > MAX_TRACKED_REPLIES {
                // Still too many live grants: drop the oldest half.
                let mut ages: Vec<Instant> = self.replies.values().map(|g| g.at).collect();
                ages.sort_unstable();
                let cut = ages.get(ages.len() / 2).copied();
                if let Some(cut) = cut {
                    self.replies.retain(|_, g| g.at > cut);
                }
            }
            self.replies_since_prune = 0;
            self.last_prune = Some(now);
        }
    }

    /// Publish allowed by the lists alone, reply grants neither used nor counted (a
    /// message's trace destination: the client does not publish there itself).
    pub fn publish_allowed_static(&mut self, subject: &[u8]) -> bool {
        self.base_publish_allowed(subject)
    }

    /// Publish allowed by the lists alone (no reply grants), cached like `can_publish`.
    fn base_publish_allowed(&mut self, subject: &[u8]) -> bool {
        if let Some(&v) = self.pub_cache.get(subject) {
            return v;
        }
        let mut allowed = match &mut self.pub_allow {
            Some(t) => !t.matches(subject).psubs.is_empty(),
            None => true,
        };
        if allowed {
            if let Some(t) = &mut self.pub_deny {
                allowed = t.matches(subject).psubs.is_empty();
            }
        }
        allowed
    }

    /// May the connection subscribe to `subject` (a pattern) in `queue`? Turns the
    /// delivery filter on when an allowed subscription overlaps a deny entry.
    pub fn can_subscribe(&mut self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        let mut allowed = true;
        if let Some(t) = &mut self.sub_allow {
            let m = t.matches(subject);
            allowed = !m.psubs.is_empty();
            if let Some(q) = queue.filter(|q| !q.is_empty()) {
                if !m.qsubs.is_empty() {
                    allowed = queue_matches(q, &m.qsubs);
                }
            }
        }
        if allowed {
            if let Some(t) = &mut self.sub_deny {
                let m = t.matches(subject);
                allowed = m.psubs.is_empty();
                if allowed {
                    if let Some(q) = queue.filter(|q| !q.is_empty()) {
                        if !m.qsubs.is_empty() {
                            allowed = !queue_matches(q, &m.qsubs);
                        }
                    }
                }
            }
        }
        if allowed && !self.deny_filter && (queue.is_some_and(|q| !q.is_empty()) || has_wildcard(subject)) {
            let s = String::from_utf8_lossy(subject);
            if self.sub_deny_entries.iter().any(|(d, _)| subjects_collide(d, &s)) {
                self.deny_filter = true;
            }
        }
        allowed
    }

    /// Deliveries need checking against the deny list.
    pub fn filters_delivery(&self) -> bool {
        self.deny_filter
    }

    /// The delivery filter: is a message on `subject` (to a subscription in `queue`)
    /// denied?
    pub fn delivery_denied(&mut self, subject: &[u8], queue: &[u8]) -> bool {
        if !self.deny_filter {
            return false;
        }
        let Some(t) = &mut self.sub_deny else { return false };
        let key: DenyKey = (subject.into(), queue.into());
        if let Some(&v) = self.deny_cache.get(&key) {
            return v;
        }
        let m: std::rc::Rc<Matches<()>> = t.matches(subject);
        let mut denied = !m.psubs.is_empty();
        if !denied && !queue.is_empty() && !m.qsubs.is_empty() {
            denied = queue_matches(queue, &m.qsubs);
        }
        if self.deny_cache.len() >= MAX_DENY_CACHE {
            prune(&mut self.deny_cache);
        }
        self.deny_cache.insert(key, denied);
        denied
    }
}

/// Drop up to `PRUNE` entries (any: the caches only save work).
fn prune<K: Clone + Eq + std::hash::Hash, V>(m: &mut FastMap<K, V>) {
    let keys: Vec<K> = m.keys().take(PRUNE).cloned().collect();
    for k in keys {
        m.remove(&k);
    }
}

#[cfg(test)]
#[path = "perms_tests.rs"]
mod tests;
