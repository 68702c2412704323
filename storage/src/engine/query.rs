//! Queries over the engine: next/previous message by filter, last by subject, filtered and
//! per-subject state, pending counts, last sequences, time lookups and deleted ranges.
//! A literal filter goes straight to its subject's state; wildcard filters are matched once
//! per subject id (memoised during a scan), never once per message.

use super::subjects::SubjectId;
use super::{Engine, Entry};
use crate::error::{Result, StoreError};
use crate::subject::{has_wildcard, matches, Filter};
use crate::types::{DeleteRange, SimpleState};
use std::collections::{BTreeMap, HashMap};

/// Matches subject ids against a filter, remembering each answer.
struct Memo<'f> {
    filter: &'f Filter,
    seen: HashMap<SubjectId, bool>,
}

impl<'f> Memo<'f> {
    fn new(filter: &'f Filter) -> Memo<'f> {
        Memo {
            filter,
            seen: HashMap::new(),
        }
    }

    fn test<L>(&mut self, eng: &Engine<L>, id: SubjectId) -> bool {
        if self.filter.is_all() {
            return true;
        }
        *self
            .seen
            .entry(id)
            .or_insert_with(|| self.filter.matches(eng.subjects.name(id)))
    }
}

impl<L> Engine<L> {
    /// Subject ids matching `filter` (a scan of the subject table).
    pub fn matching_subjects(&self, filter: &Filter) -> Vec<SubjectId> {
        if let Some(lit) = filter.as_literal() {
            return self.subjects.find(lit).into_iter().collect();
        }
        self.subjects
            .ids()
            .filter(|&id| filter.matches(self.subjects.name(id)))
            .collect()
    }

    /// The first message at or after `start` matching `filter`.
    pub fn next_matching(&mut self, filter: &Filter, start: u64) -> Option<u64> {
        let start = start.max(self.first_seq);
        if filter.is_all() {
            return self.index.next_at_or_after(start).map(|(s, _)| s);
        }
        if let Some(lit) = filter.as_literal() {
            let id = self.subjects.find(lit)?;
            self.fix_subject(id);
            let st = *self.subjects.state(id)?;
            if start <= st.first {
                return Some(st.first);
            }
            if start > st.last {
                return None;
            }
            return self
                .index
                .iter_from(start)
                .take_while(|(s, _)| *s <= st.last)
                .find(|(_, e)| e.subj == id)
                .map(|(s, _)| s);
        }
        // Few matching subjects: take the best of their firsts when they are all ahead.
        let ids = self.matching_subjects(filter);
        if ids.is_empty() {
            return None;
        }
        let mut best: Option<u64> = None;
        let mut behind = false;
        for &id in &ids {
            self.fix_subject(id);
            if let Some(st) = self.subjects.state(id) {
                if st.last < start {
                    continue;
                }
                if st.first >= start {
                    best = Some(best.map_or(st.first, |b| b.min(st.first)));
                } else {
                    behind = true;
                }
            }
        }
        if !behind {
            return best;
        }
        let mut memo = Memo::new(filter);
        let mut it = self.index.iter_from(start);
        let eng: &Engine<L> = self;
        it.find(|(s, e)| best.is_none_or(|b| *s < b) && memo.test(eng, e.subj))
            .map(|(s, _)| s)
            .or(best)
    }

    /// The last message at or before `start` matching `filter`.
    pub fn prev_matching(&mut self, filter: &Filter, start: u64) -> Option<u64> {
        let mut cur = start.min(self.last_seq);
        let mut memo = Memo::new(filter);
        loop {
            let (s, e) = self.index.prev_at_or_before(cur)?;
            if memo.test(self, e.subj) {
                return Some(s);
            }
            if s == 0 {
                return None;
            }
            cur = s - 1;
        }
    }

    /// The last message of `subject` (wildcards allowed; `""`/`">"`: the stream's last).
    pub fn last_matching(&mut self, subject: &str) -> Option<u64> {
        // One literal subject (a KV get): straight to its state, no filter built.
        if !subject.is_empty() && !crate::subject::has_wildcard(subject) {
            let id = self.subjects.find(subject)?;
            self.fix_subject(id);
            return self.subjects.state(id).map(|st| st.last);
        }
        let filter = Filter::new(subject);
        if filter.is_all() {
            return self.index.last();
        }
        let mut best = None;
        for id in self.matching_subjects(&filter) {
            self.fix_subject(id);
            if let Some(st) = self.subjects.state(id) {
                best = best.max(Some(st.last));
            }
        }
        best
    }

    /// Messages at or after `start` matching `filter`: count, first and last.
    pub fn filtered_state(&mut self, start: u64, filter: &Filter) -> SimpleState {
        let start = start.max(self.first_seq);
        let mut out = SimpleState::default();
        if filter.is_all() {
            if start <= self.first_seq {
                if self.msgs > 0 {
                    out = SimpleState {
                        msgs: self.msgs,
                        first: self.first_seq,
                        last: self.index.last().unwrap_or(self.last_seq),
                    };
                }
                return out;
            }
            let msgs = self.index.count_from(start) as u64;
            if msgs > 0 {
                out = SimpleState {
                    msgs,
                    first: self.index.next_at_or_after(start).map_or(0, |(s, _)| s),
                    last: self.index.last().unwrap_or(self.last_seq),
                };
            }
            return out;
        }
        let ids = self.matching_subjects(filter);
        let mut partial = false;
        for &id in &ids {
            self.fix_subject(id);
            if let Some(st) = self.subjects.state(id) {
                if st.first >= start {
                    out.msgs += st.msgs;
                    out.first = if out.first == 0 {
                        st.first
                    } else {
                        out.first.min(st.first)
                    };
                    out.last = out.last.max(st.last);
                } else if st.last >= start {
                    partial = true;
                }
            }
        }
        if !partial {
            return out;
        }
        let mut out = SimpleState::default();
        let mut memo = Memo::new(filter);
        let eng: &Engine<L> = self;
        for (s, e) in eng.index.iter_from(start) {
            if memo.test(eng, e.subj) {
                add(&mut out, s);
            }
        }
        out
    }

    /// Per-subject state of every subject matching `filter`.
    pub fn subjects_state(&mut self, filter: &str) -> BTreeMap<String, SimpleState> {
        let f = Filter::new(filter);
        let mut out = BTreeMap::new();
        for id in self.matching_subjects(&f) {
            self.fix_subject(id);
            if let Some(st) = self.subjects.state(id) {
                let ss = SimpleState {
                    msgs: st.msgs,
                    first: st.first,
                    last: st.last,
                };
                out.insert(self.subjects.name(id).to_string(), ss);
            }
        }
        out
    }

    /// Message count of every subject matching `filter`.
    pub fn subjects_totals(&self, filter: &str) -> BTreeMap<String, u64> {
        let f = Filter::new(filter);
        self.matching_subjects(&f)
            .into_iter()
            .filter_map(|id| {
                let st = self.subjects.state(id)?;
                Some((self.subjects.name(id).to_string(), st.msgs))
            })
            .collect()
    }

    /// Messages pending for a consumer starting at `start` with `filter`; with
    /// `last_per_subject`, only the last message of each matching subject counts.
    pub fn num_pending(&mut self, start: u64, filter: &Filter, last_per_subject: bool) -> u64 {
        if !last_per_subject && filter.is_all() {
            return self.index.count_from(start.max(self.first_seq)) as u64;
        }
        if !last_per_subject {
            return self.filtered_state(start, filter).msgs;
        }
        let mut n = 0;
        for id in self.matching_subjects(filter) {
            self.fix_subject(id);
            if self.subjects.state(id).is_some_and(|st| st.last >= start) {
                n += 1;
            }
        }
        n
    }

    /// The last sequence of every subject, ascending.
    pub fn all_last_seqs(&mut self) -> Vec<u64> {
        let ids: Vec<_> = self.subjects.ids().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            self.fix_subject(id);
            if let Some(st) = self.subjects.state(id) {
                out.push(st.last);
            }
        }
        out.sort_unstable();
        out
    }

    /// Per matching subject, its last sequence at or below `max_seq` (0: no bound),
    /// ascending; more than `max_allowed` (when > 0) is an error, as in the reference.
    pub fn multi_last_seqs(&mut self, filter: &Filter, max_seq: u64, max_allowed: usize) -> Result<Vec<u64>> {
        let bound = if max_seq == 0 { u64::MAX } else { max_seq };
        let mut out = Vec::new();
        for id in self.matching_subjects(filter) {
            self.fix_subject(id);
            let Some(st) = self.subjects.state(id).copied() else {
                continue;
            };
            if st.first > bound {
                continue;
            }
            let last = if st.last <= bound {
                Some(st.last)
            } else {
                let mut cur = bound;
                let mut found = None;
                while let Some((s, e)) = self.index.prev_at_or_before(cur) {
                    if s < st.first {
                        break;
                    }
                    if e.subj == id {
                        found = Some(s);
                        break;
                    }
                    if s == 0 {
                        break;
                    }
                    cur = s - 1;
                }
                found
            };
            if let Some(l) = last {
                out.push(l);
                if max_allowed > 0 && out.len() > max_allowed {
                    return Err(StoreError::TooManyResults);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The first sequence whose message is at or after `ts` (last + 1 if none).
    pub fn seq_from_time(&self, ts: i64) -> u64 {
        self.index
            .iter()
            .find(|(_, e)| e.ts >= ts)
            .map_or(self.last_seq + 1, |(s, _)| s)
    }

    /// Runs of deleted sequences between the first and last sequence.
    pub fn deleted_ranges(&self) -> Vec<DeleteRange> {
        let mut out = Vec::new();
        if self.msgs == 0 {
            return out;
        }
        let mut expect = self.first_seq;
        for (s, _) in self.index.iter() {
            if s > expect {
                out.push(DeleteRange {
                    first: expect,
                    num: s - expect,
                });
            }
            expect = s + 1;
        }
        if self.last_seq >= expect {
            out.push(DeleteRange {
                first: expect,
                num: self.last_seq - expect + 1,
            });
        }
        out
    }

    /// Every deleted sequence (bounded by `cap` entries).
    pub fn deleted_list(&self, cap: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for r in self.deleted_ranges() {
            for s in r.first..r.first + r.num {
                if out.len() >= cap {
                    return out;
                }
                out.push(s);
            }
        }
        out
    }

    /// The subject of a live sequence.
    pub fn subject_of(&self, e: &Entry<L>) -> &str {
        self.subjects.name(e.subj)
    }
}

fn add(out: &mut SimpleState, s: u64) {
    if out.msgs == 0 {
        out.first = s;
    }
    out.msgs += 1;
    out.last = s;
}

/// Does `subject` (literal or wildcard) select `candidate` as a purge target?
pub fn purge_match(subject: &str, candidate: &str) -> bool {
    if has_wildcard(subject) {
        matches(subject, candidate)
    } else {
        subject == candidate
    }
}
