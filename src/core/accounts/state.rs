//! One shard's routing state of one account: its local sublist, what other shards are
//! interested in, the matchers built from the account's imports and exports, and the
//! response mappings of service requests this shard routed.
//!
//! Ownership: a `ShardAccount` belongs to one shard (the `accts` vector of its
//! `ShardCore`) and is touched by nothing else. Other shards reach it only through mesh
//! records carrying the account id.

use super::links::ResponseType;
use super::{AccountDef, AccountId};
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
            responses: FastMap::default(),
            conns: 0,
            has_mappings: false,
        }
    }

    /// Take a new definition: rebuild the import and export matchers from it.
    pub fn set_def(&mut self, def: Option<Arc<AccountDef>>, cache: bool) {
        self.stream_out = Sublist::new(cache);
        self.service_in = Sublist::new(cache);
        if let Some(d) = &def {
            for (i, l) in d.stream_links.iter().enumerate() {
                let _ = self.stream_out.insert(&l.from, None, i as u32);
            }
            for (i, s) in d.service_imports.iter().enumerate() {
                let _ = self.service_in.insert(&s.local, None, i as u32);
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
