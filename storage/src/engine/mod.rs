//! The logical stream state that both stores share: sequences, per-subject state, limits
//! (max msgs, bytes, age, per subject, discard old/new), per-message TTLs, purge, compact
//! and truncate, and every query of the store API. It holds no message bodies: each live
//! message is an [`Entry`] (timestamp, subject id, accounted size, and a location `L` that
//! the store gives it: the body itself for the memory store, a block and offset for the
//! file store). Everything the engine removes is handed to the store's [`Sink`], which
//! frees or records it (the file store writes tombstones, updates its blocks).
//!
//! One implementation of the semantics for both stores means the memory store is an exact
//! model of the file store, which is what the op-sequence fuzzing checks.

mod purge;
mod query;
pub mod seqindex;
pub mod subjects;
pub mod ttl;

use crate::error::{Result, StoreError};
use crate::types::{Discard, StoreConfig, StreamState};
use seqindex::SeqIndex;
use subjects::{SubjectId, SubjectTable};
use ttl::TtlWheel;

/// Set in `Entry::size_flags` for a message that never expires by age (TTL "never").
const NO_AGE: u32 = 1 << 31;

/// One live message.
#[derive(Clone, Debug)]
pub struct Entry<L> {
    pub ts: i64,
    pub subj: SubjectId,
    size_flags: u32,
    pub loc: L,
}

impl<L> Entry<L> {
    pub fn size(&self) -> u64 {
        u64::from(self.size_flags & !NO_AGE)
    }
    pub fn ages_out(&self) -> bool {
        self.size_flags & NO_AGE == 0
    }
}

/// Why the engine removed a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A remove request (user, interest/work-queue acks, purge by subject).
    User,
    /// A secure remove: the body must be overwritten.
    Erase,
    /// A limit (max msgs, bytes, per subject) with discard old: oldest first.
    Limit,
    /// Max age or the message's TTL.
    Expired,
    /// Purge, compact, truncate: a whole range at once.
    Bulk,
    /// Replaying stored records on recovery.
    Replay,
}

/// Receives what the engine removes.
pub trait Sink<L> {
    fn removed(&mut self, seq: u64, entry: Entry<L>, why: Why);
}

/// A sink that drops what it gets.
pub struct Drop;

impl<L> Sink<L> for Drop {
    fn removed(&mut self, _: u64, _: Entry<L>, _: Why) {}
}

/// The shared stream state.
pub struct Engine<L> {
    pub cfg: StoreConfig,
    size_fn: fn(usize, usize, usize) -> u64,
    pub first_seq: u64,
    pub first_ts: i64,
    pub last_seq: u64,
    pub last_ts: i64,
    pub msgs: u64,
    pub bytes: u64,
    pub index: SeqIndex<Entry<L>>,
    pub subjects: SubjectTable,
    pub ttl: TtlWheel,
}

impl<L> Engine<L> {
    pub fn new(cfg: StoreConfig, size_fn: fn(usize, usize, usize) -> u64) -> Engine<L> {
        let mut e = Engine {
            cfg,
            size_fn,
            first_seq: 0,
            first_ts: 0,
            last_seq: 0,
            last_ts: 0,
            msgs: 0,
            bytes: 0,
            index: SeqIndex::default(),
            subjects: SubjectTable::default(),
            ttl: TtlWheel::default(),
        };
        if e.cfg.first_seq > 0 {
            e.first_seq = e.cfg.first_seq;
            e.last_seq = e.cfg.first_seq - 1;
        }
        e
    }

    pub fn msg_size(&self, subject: &str, headers: &[u8], payload: &[u8]) -> u64 {
        (self.size_fn)(subject.len(), headers.len(), payload.len())
    }

    /// The sequence a store of `seq` (0: next) gets, or the mismatch error.
    pub fn next_seq(&self, seq: u64) -> Result<u64> {
        if seq != self.last_seq + 1 {
            if seq > 0 {
                return Err(StoreError::SequenceMismatch);
            }
            return Ok(self.last_seq + 1);
        }
        Ok(seq)
    }

    /// Checks done before a message is stored: size and, with `discard_new`, the limits.
    pub fn check_store(&mut self, subject: &str, headers: &[u8], payload: &[u8], discard_new: bool) -> Result<()> {
        let raw = subject.len() + headers.len() + payload.len();
        if self.cfg.max_msg_size > 0 && raw as u64 > self.cfg.max_msg_size as u64 {
            return Err(StoreError::MsgTooLarge);
        }
        if raw as u64 + 64 > u64::from(!NO_AGE) {
            return Err(StoreError::MsgTooLarge);
        }
        if !discard_new || self.cfg.discard != Discard::New {
            return Ok(());
        }
        let maxp = self.cfg.max_msgs_per_subject;
        let sid = self.subjects.find(subject);
        let at_subject_limit = maxp > 0
            && sid
                .and_then(|id| self.subjects.state(id))
                .is_some_and(|s| s.msgs >= maxp as u64);
        // A rollup purges the subject after storing, so it may pass a per-subject limit.
        if at_subject_limit && self.cfg.discard_new_per_subject && !has_header(headers, b"Nats-Rollup") {
            return Err(StoreError::MaxMsgsPerSubject);
        }
        if self.cfg.max_msgs > 0 && self.msgs >= self.cfg.max_msgs as u64 && !at_subject_limit {
            return Err(StoreError::MaxMsgs);
        }
        let size = self.msg_size(subject, headers, payload);
        if self.cfg.max_bytes > 0 && self.bytes + size > self.cfg.max_bytes as u64 {
            if !at_subject_limit {
                return Err(StoreError::MaxBytes);
            }
            // At the subject's limit the oldest of the subject goes: is that enough room?
            let Some(id) = sid else {
                return Err(StoreError::MaxBytes);
            };
            self.fix_subject(id);
            let first = self.subjects.state(id).map_or(0, |s| s.first);
            if self.index.get(first).is_none_or(|e| e.size() < size) {
                return Err(StoreError::MaxBytes);
            }
        }
        Ok(())
    }

    /// Record a stored message at `seq` (from [`Engine::next_seq`]) and enforce the limits.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(&mut self, seq: u64, ts: i64, subject: &str, size: u64, ttl: i64, loc: L, sink: &mut dyn Sink<L>) {
        if let Some(id) = self.insert_id(seq, ts, subject, size, ttl, loc) {
            self.after_insert(id, sink);
        }
    }

    /// Record a message without enforcing limits (replay). False if `seq` is not new.
    pub fn insert_quiet(&mut self, seq: u64, ts: i64, subject: &str, size: u64, ttl: i64, loc: L) -> bool {
        self.insert_id(seq, ts, subject, size, ttl, loc).is_some()
    }

    /// [`Engine::insert_quiet`], returning the subject's id when recorded.
    fn insert_id(&mut self, seq: u64, ts: i64, subject: &str, size: u64, ttl: i64, loc: L) -> Option<SubjectId> {
        if seq <= self.last_seq || seq == 0 {
            return None;
        }
        let id = self.subjects.intern(subject);
        let mut size_flags = (size.min(u64::from(!NO_AGE))) as u32;
        if ttl < 0 && self.cfg.allow_msg_ttl {
            size_flags |= NO_AGE;
        }
        if !self.index.push(
            seq,
            Entry {
                ts,
                subj: id,
                size_flags,
                loc,
            },
        ) {
            return None;
        }
        if self.msgs == 0 {
            self.first_seq = seq;
            self.first_ts = ts;
        }
        self.msgs += 1;
        self.bytes += size;
        self.last_seq = seq;
        self.last_ts = ts;
        if let Some(st) = self.subjects.state_mut(id) {
            if st.msgs == 0 {
                st.first = seq;
                st.first_stale = false;
            }
            st.msgs += 1;
            st.last = seq;
            st.last_stale = false;
        }
        if ttl > 0 && self.cfg.allow_msg_ttl {
            self.ttl.add(seq, ts.saturating_add(ttl.saturating_mul(1_000_000_000)));
        }
        Some(id)
    }

    fn after_insert(&mut self, id: SubjectId, sink: &mut dyn Sink<L>) {
        if self.cfg.max_msgs_per_subject > 0 {
            self.enforce_subject_limit(id, sink);
        }
        self.enforce_msg_and_byte_limits(sink);
    }

    /// Remove oldest messages of subject `id` beyond the per-subject limit.
    pub fn enforce_subject_limit(&mut self, id: SubjectId, sink: &mut dyn Sink<L>) {
        let maxp = self.cfg.max_msgs_per_subject;
        if maxp <= 0 {
            return;
        }
        while self.subjects.state(id).is_some_and(|s| s.msgs > maxp as u64) {
            self.fix_subject(id);
            let Some(first) = self.subjects.state(id).map(|s| s.first) else {
                break;
            };
            if !self.remove(first, Why::Limit, sink) {
                break;
            }
        }
    }

    /// With discard old: drop the oldest messages until max msgs and max bytes hold.
    pub fn enforce_msg_and_byte_limits(&mut self, sink: &mut dyn Sink<L>) {
        if self.cfg.discard != Discard::Old {
            return;
        }
        if self.cfg.max_msgs > 0 {
            while self.msgs > self.cfg.max_msgs as u64 {
                if !self.remove(self.first_seq, Why::Limit, sink) {
                    break;
                }
            }
        }
        if self.cfg.max_bytes > 0 {
            while self.bytes > self.cfg.max_bytes as u64 {
                if !self.remove(self.first_seq, Why::Limit, sink) {
                    break;
                }
            }
        }
    }

    /// Enforce every limit (after recovery or a config change).
    pub fn enforce_all(&mut self, sink: &mut dyn Sink<L>) {
        if self.cfg.max_msgs_per_subject > 0 {
            let over: Vec<SubjectId> = self
                .subjects
                .ids()
                .filter(|&id| {
                    self.subjects
                        .state(id)
                        .is_some_and(|s| s.msgs > self.cfg.max_msgs_per_subject as u64)
                })
                .collect();
            for id in over {
                self.enforce_subject_limit(id, sink);
            }
        }
        self.enforce_msg_and_byte_limits(sink);
    }

    /// Replace the limits; enforces them at once. A stream's `first_seq` is kept.
    pub fn update_config(&mut self, cfg: StoreConfig, sink: &mut dyn Sink<L>) {
        let ttl_off = !cfg.allow_msg_ttl;
        self.cfg = cfg;
        if ttl_off {
            self.ttl.clear();
        }
        self.enforce_all(sink);
    }

    /// Skip `num` sequences from `seq` (0: next): they are taken but hold nothing.
    pub fn skip(&mut self, seq: u64, num: u64, now: i64) -> Result<u64> {
        let seq = self.next_seq(seq)?;
        if num == 0 {
            return Ok(seq);
        }
        let last = seq.saturating_add(num - 1);
        self.last_seq = last;
        self.last_ts = now;
        if self.msgs == 0 {
            self.first_seq = last + 1;
            self.first_ts = 0;
        }
        Ok(seq)
    }

    /// Remove one message. False if it is not there.
    pub fn remove(&mut self, seq: u64, why: Why, sink: &mut dyn Sink<L>) -> bool {
        let Some(entry) = self.index.remove(seq) else {
            return false;
        };
        self.msgs = self.msgs.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(entry.size());
        let id = entry.subj;
        let mut release = false;
        if let Some(st) = self.subjects.state_mut(id) {
            st.msgs = st.msgs.saturating_sub(1);
            if st.msgs == 0 {
                release = true;
            } else {
                if seq == st.first {
                    st.first_stale = true;
                    st.first = seq + 1;
                }
                if seq == st.last {
                    st.last_stale = true;
                    st.last = seq.saturating_sub(1);
                }
            }
        }
        if release {
            self.subjects.release(id);
        }
        if seq == self.first_seq {
            self.refresh_first();
        }
        sink.removed(seq, entry, why);
        true
    }

    /// First sequence and time from the index (after the first message went).
    pub fn refresh_first(&mut self) {
        match self.index.next_at_or_after(self.first_seq) {
            Some((s, e)) => {
                self.first_seq = s;
                self.first_ts = e.ts;
            }
            None => {
                self.first_seq = self.last_seq + 1;
                self.first_ts = 0;
            }
        }
    }

    /// Bring a subject's first/last sequences up to date after removals.
    pub fn fix_subject(&mut self, id: SubjectId) {
        let Some(st) = self.subjects.state(id).copied() else {
            return;
        };
        if !st.first_stale && !st.last_stale {
            return;
        }
        let mut first = st.first;
        let mut last = st.last;
        if st.first_stale {
            first = self
                .index
                .iter_from(st.first)
                .find(|(_, e)| e.subj == id)
                .map_or(st.first, |(s, _)| s);
        }
        if st.last_stale {
            let mut cur = st.last;
            loop {
                match self.index.prev_at_or_before(cur) {
                    Some((s, e)) if e.subj == id => {
                        last = s;
                        break;
                    }
                    Some((s, _)) if s > first && s > 0 => cur = s - 1,
                    _ => {
                        last = first;
                        break;
                    }
                }
            }
        }
        if let Some(m) = self.subjects.state_mut(id) {
            m.first = first;
            m.last = last;
            m.first_stale = false;
            m.last_stale = false;
        }
    }

    /// The stream's state without the deleted list.
    pub fn fast_state(&self) -> StreamState {
        StreamState {
            msgs: self.msgs,
            bytes: self.bytes,
            first_seq: self.first_seq,
            first_ts: self.first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            num_subjects: self.subjects.len(),
            num_deleted: self.num_deleted(),
            deleted: Vec::new(),
        }
    }

    pub fn num_deleted(&self) -> u64 {
        if self.msgs == 0 || self.last_seq < self.first_seq {
            return 0;
        }
        (self.last_seq - self.first_seq + 1).saturating_sub(self.msgs)
    }

    /// Approximate heap bytes of the in-memory index (not counting bodies).
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.subjects.heap_bytes() + self.ttl.len() * 16
    }
}

/// Is a header named `name` present in a `NATS/1.0` header block?
pub fn has_header(headers: &[u8], name: &[u8]) -> bool {
    header_value(headers, name).is_some()
}

/// The value of header `name` (case-insensitive name), trimmed.
pub fn header_value<'a>(headers: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    if headers.is_empty() {
        return None;
    }
    for line in headers.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (k, v) = line.split_at(colon);
        if k.eq_ignore_ascii_case(name) {
            let v = v.get(1..).unwrap_or(&[]);
            let start = v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len());
            let end = v
                .iter()
                .rposition(|b| !b.is_ascii_whitespace())
                .map_or(start, |e| e + 1);
            return v.get(start..end.max(start));
        }
    }
    None
}

/// The `Store` queries both stores answer from the engine alone (their field `eng`),
/// written once: expanded inside each `impl Store`.
macro_rules! engine_queries {
    () => {
        fn seq_from_time(&mut self, ts: i64) -> u64 {
            self.eng.seq_from_time(ts)
        }

        fn filtered_state(&mut self, start: u64, subject: &str) -> $crate::types::SimpleState {
            self.eng
                .filtered_state(start, &$crate::subject::Filter::new(subject))
        }

        fn subjects_state(&mut self, filter: &str) -> std::collections::BTreeMap<String, $crate::types::SimpleState> {
            self.eng.subjects_state(filter)
        }

        fn subjects_totals(&mut self, filter: &str) -> std::collections::BTreeMap<String, u64> {
            self.eng.subjects_totals(filter)
        }

        fn num_pending(&mut self, start: u64, filter: &$crate::subject::Filter, last_per_subject: bool) -> u64 {
            self.eng.num_pending(start, filter, last_per_subject)
        }

        fn all_last_seqs(&mut self) -> Vec<u64> {
            self.eng.all_last_seqs()
        }

        fn multi_last_seqs(
            &mut self,
            filter: &$crate::subject::Filter,
            max_seq: u64,
            max_allowed: usize,
        ) -> $crate::error::Result<Vec<u64>> {
            self.eng.multi_last_seqs(filter, max_seq, max_allowed)
        }

        fn state(&mut self) -> $crate::types::StreamState {
            let mut st = self.eng.fast_state();
            st.deleted = self.eng.deleted_list(usize::MAX);
            st
        }

        fn fast_state(&self) -> $crate::types::StreamState {
            self.eng.fast_state()
        }

        fn deleted_ranges(&self) -> Vec<$crate::types::DeleteRange> {
            self.eng.deleted_ranges()
        }
    };
}
pub(crate) use engine_queries;
