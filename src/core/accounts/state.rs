//! One shard's routing state of one account: its local sublist, what other shards are
//! interested in, the matchers built from the account's imports and exports, and the
//! response mappings of service requests this shard routed.
//!
//! Ownership: a `ShardAccount` belongs to one shard (the `accts` vector of its
//! `ShardCore`) and is touched by nothing else. Other shards reach it only through mesh
//! records carrying the account id.

use super::links::ResponseType;
use super::{AccountDef, AccountId};
use crate::core::bits::Set256;
use crate::core::client::SubId;
use crate::core::remote::RemoteInterest;
use crate::core::sublist::Sublist;
use crate::core::FastMap;
use std::sync::Arc;
use std::time::Instant;

/// A pending response of a service request that crossed into this account: a publish
/// here on the `_R_.` subject it is keyed by goes back to `requester` on `reply`.
#[derive(Debug, Clone)]
pub struct ResponseMap {
    pub requester: AccountId,
    pub reply: Box<[u8]>,
    pub kind: ResponseType,
    /// Dropped when no response came by then (the export's `response_threshold`).
    pub expires: Instant,
    /// The service import that created it (index into the requester's imports), for
    /// latency tracking.
    pub import: u32,
    /// When the request was routed (latency tracking).
    pub started: Instant,
    /// Latency is being measured for this request (until its first response).
    pub tracking: Option<Box<Tracking>>,
}

/// A sampled service request whose latency is reported to the exporter.
#[derive(Debug, Clone)]
pub struct Tracking {
    /// The requesting connection (on the shard owning the mapping).
    pub requester: crate::core::client::ConnKey,
    /// The import shares the requester's details.
    pub share: bool,
    /// Where results go, in the exporting account.
    pub subject: String,
    pub exporter: AccountId,
    /// The headers that triggered a header-based sample.
    pub header: Vec<(String, String)>,
    /// When the request was routed, by the wall clock.
    pub wall_start: std::time::SystemTime,
}

/// Per-shard state of one account.
pub struct ShardAccount {
    /// The definition in force on this shard (`None` until the shard's table has it).
    pub def: Option<Arc<AccountDef>>,
    pub sublist: Sublist<SubId>,
    pub remote: RemoteInterest,
    /// `def.stream_links` by their `from` pattern (value: index).
    pub stream_out: Sublist<u32>,
    /// `def.service_imports` by their local subject (value: index).
    pub service_in: Sublist<u32>,
    /// First tokens of the import and export patterns: most publishes match none, and
    /// are told so without a sublist lookup (every account imports `$SYS.REQ.USER.INFO`).
    pub service_gate: FirstTokens,
    pub stream_gate: FirstTokens,
    /// Response mappings this shard owns, by `_R_.` subject.
    pub responses: FastMap<Box<[u8]>, ResponseMap>,
    /// Local connections of this account on this shard.
    pub conns: u32,
    /// The definition has subject mappings (checked per publish without touching it).
    pub has_mappings: bool,
}

impl ShardAccount {
    pub fn new(cache: bool) -> Self {
        ShardAccount {
            def: None,
            sublist: Sublist::new(cache),
            remote: RemoteInterest::default(),
            stream_out: Sublist::new(cache),
            service_in: Sublist::new(cache),
            service_gate: FirstTokens::default(),
            stream_gate: FirstTokens::default(),
            responses: FastMap::default(),
            conns: 0,
            has_mappings: false,
        }
    }

    /// Take a new definition: rebuild the import and export matchers from it.
    pub fn set_def(&mut self, def: Option<Arc<AccountDef>>, cache: bool) {
        // Imports and mappings change what a publish is routed by.
        crate::core::sublist::bump_epoch();
        self.stream_out = Sublist::new(cache);
        self.service_in = Sublist::new(cache);
        self.service_gate = FirstTokens::default();
        self.stream_gate = FirstTokens::default();
        if let Some(d) = &def {
            for (i, l) in d.stream_links.iter().enumerate() {
                let _ = self.stream_out.insert(&l.from, None, i as u32);
                self.stream_gate.add(&l.from);
            }
            for (i, s) in d.service_imports.iter().enumerate() {
                let _ = self.service_in.insert(&s.local, None, i as u32);
                self.service_gate.add(&s.local);
            }
        }
        self.has_mappings = def.as_ref().is_some_and(|d| !d.mappings.is_empty());
        self.def = def;
    }

    /// Some other account imports a stream from this one.
    pub fn has_stream_links(&self) -> bool {
        self.stream_out.count() > 0
    }

    /// This account imports services.
    pub fn has_service_imports(&self) -> bool {
        self.service_in.count() > 0
    }
}

/// The distinct first tokens of a set of subject patterns, to rule subjects out cheaply.
#[derive(Debug, Default, Clone)]
pub struct FirstTokens {
    /// Some pattern starts with a wildcard: anything may match.
    any: bool,
    firsts: Vec<Box<[u8]>>,
    /// The first bytes of `firsts`: most subjects are ruled out by theirs.
    first_bytes: Set256,
}

fn first_token(s: &[u8]) -> &[u8] {
    match s.iter().position(|&b| b == b'.') {
        Some(i) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

impl FirstTokens {
    pub fn add(&mut self, pattern: &[u8]) {
        let t = first_token(pattern);
        // (An empty first token is no valid pattern; it makes the gate let all through.)
        if t == b"*" || t == b">" || t.is_empty() {
            self.any = true;
        } else if !self.firsts.iter().any(|f| &f[..] == t) {
            if let Some(&b) = t.first() {
                self.first_bytes.insert(usize::from(b));
            }
            self.firsts.push(t.into());
        }
    }

    /// False when no pattern can match `subject`.
    #[inline]
    pub fn may_match(&self, subject: &[u8]) -> bool {
        if self.any {
            return true;
        }
        if !subject
            .first()
            .is_some_and(|&b| self.first_bytes.contains(usize::from(b)))
        {
            return false;
        }
        let t = first_token(subject);
        self.firsts.iter().any(|f| crate::core::subject::same(f, t))
    }
}

#[cfg(test)]
mod gate_tests {
    use super::FirstTokens;

    #[test]
    fn first_tokens_rule_out_only_what_cannot_match() {
        let mut g = FirstTokens::default();
        assert!(!g.may_match(b"foo"));
        g.add(b"$SYS.REQ.USER.INFO");
        g.add(b"svc.>");
        g.add(b"svc.x");
        assert!(g.may_match(b"$SYS.REQ.USER.INFO"));
        assert!(g.may_match(b"svc.a.b"));
        assert!(g.may_match(b"svc"));
        assert!(!g.may_match(b"foo.bar"));
        assert!(!g.may_match(b"$SYSX.REQ"));
        assert!(!g.may_match(b"sv"));
        assert!(!g.may_match(b"svd.a"), "same first byte, other token");
        assert!(!g.may_match(b""));
        g.add(b"\xff\x80.y");
        assert!(g.may_match(b"\xff\x80.y") && !g.may_match(b"\xfe\x80.y"));
        g.add(b"*.x");
        assert!(g.may_match(b"foo.bar"));
        let mut all = FirstTokens::default();
        all.add(b">");
        assert!(all.may_match(b"anything.at.all"));
    }
}
