//! Bulk removals and expiry: purge (all, by subject, up to a sequence, keep N), compact,
//! truncate, and max-age / TTL expiry on the clock the store is given.

use super::query::purge_match;
use super::{Engine, Sink, Why};
use crate::error::Result;
use crate::subject::Filter;

impl<L> Engine<L> {
    /// Remove everything; the next message gets `last + 1`.
    pub fn purge_all(&mut self, sink: &mut dyn Sink<L>) -> u64 {
        let n = self.msgs;
        self.index.remove_below(u64::MAX, |s, e| sink.removed(s, e, Why::Bulk));
        self.subjects.clear();
        self.ttl.clear();
        self.msgs = 0;
        self.bytes = 0;
        self.first_seq = self.last_seq + 1;
        self.first_ts = 0;
        n
    }

    /// The reference's `PurgeEx`.
    pub fn purge_ex(&mut self, subject: &str, seq: u64, keep: u64, sink: &mut dyn Sink<L>) -> u64 {
        if subject.is_empty() || subject == ">" {
            if keep == 0 && seq == 0 {
                return self.purge_all(sink);
            }
            if seq > 1 {
                return self.compact(seq, sink);
            }
            if keep > 0 {
                if keep >= self.msgs {
                    return 0;
                }
                let upto = self.last_seq - keep + 1;
                return self.compact(upto, sink);
            }
            return 0;
        }
        let ss = self.filtered_state(1, &Filter::new(subject));
        if ss.msgs == 0 {
            return 0;
        }
        let mut target = ss.msgs;
        if keep > 0 {
            if keep >= ss.msgs {
                return 0;
            }
            target -= keep;
        }
        let last = if seq > 1 { seq - 1 } else { ss.last };
        let victims: Vec<u64> = self
            .index
            .iter_from(ss.first)
            .take_while(|(s, _)| *s <= last)
            .filter(|(_, e)| purge_match(subject, self.subjects.name(e.subj)))
            .map(|(s, _)| s)
            .take(target as usize)
            .collect();
        let mut purged = 0;
        for s in victims {
            if self.remove(s, Why::User, sink) {
                purged += 1;
            }
        }
        purged
    }

    /// Remove every message below `seq`.
    pub fn compact(&mut self, seq: u64, sink: &mut dyn Sink<L>) -> u64 {
        if seq == 0 {
            return self.purge_all(sink);
        }
        if self.first_seq > seq {
            return 0;
        }
        if seq > self.last_seq {
            let n = self.purge_all(sink);
            self.first_seq = seq;
            self.last_seq = seq - 1;
            return n;
        }
        let before = self.msgs;
        let mut gone = Vec::new();
        self.index.remove_below(seq, |s, e| gone.push((s, e)));
        for (s, e) in gone {
            self.account_gone(s, &e);
            sink.removed(s, e, Why::Bulk);
        }
        self.first_seq = seq;
        self.refresh_first();
        before - self.msgs
    }

    /// Remove every message above `seq` (0: reset everything to sequence 0).
    pub fn truncate(&mut self, seq: u64, now: i64, sink: &mut dyn Sink<L>) -> Result<()> {
        if seq == 0 {
            self.purge_all(sink);
            self.first_seq = 0;
            self.last_seq = 0;
            self.last_ts = now;
            return Ok(());
        }
        if seq >= self.last_seq {
            // Nothing above `seq`; the reference's memory store moves its last sequence.
            if seq > self.last_seq {
                self.last_seq = seq;
                if self.msgs == 0 {
                    self.first_seq = seq + 1;
                }
            }
            return Ok(());
        }
        let last_ts = self.index.get(seq).map(|e| e.ts);
        let mut gone = Vec::new();
        self.index.remove_above(seq, |s, e| gone.push((s, e)));
        for (s, e) in gone {
            self.account_gone(s, &e);
            sink.removed(s, e, Why::Bulk);
        }
        self.ttl.remove_above(seq);
        self.last_seq = seq;
        if let Some(ts) = last_ts {
            self.last_ts = ts;
        }
        if self.msgs == 0 {
            self.first_seq = seq + 1;
            self.first_ts = 0;
        }
        Ok(())
    }

    /// Accounting of a message taken out of the index in bulk.
    fn account_gone(&mut self, seq: u64, e: &super::Entry<L>) {
        self.msgs = self.msgs.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(e.size());
        let mut release = false;
        if let Some(st) = self.subjects.state_mut(e.subj) {
            st.msgs = st.msgs.saturating_sub(1);
            if st.msgs == 0 {
                release = true;
            } else {
                if seq == st.first {
                    st.first_stale = true;
                    st.first = seq + 1;
                }
                if seq >= st.last {
                    st.last_stale = true;
                    st.last = seq.saturating_sub(1);
                }
            }
        }
        if release {
            self.subjects.release(e.subj);
        }
    }

    /// When [`Engine::expire`] next has work (Unix nanoseconds).
    pub fn next_expiry(&self) -> Option<i64> {
        let mut next = self.ttl.next_expiry();
        if !self.cfg.max_age.is_zero() && self.msgs > 0 {
            let age = i64::try_from(self.cfg.max_age.as_nanos()).unwrap_or(i64::MAX);
            if let Some((_, e)) = self.index.iter().find(|(_, e)| e.ages_out()) {
                let at = e.ts.saturating_add(age);
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next
    }

    /// What max age and TTLs expire at `now`, in sequence order, left in place for the
    /// caller to remove or replace (subject delete markers). The TTL entries found are
    /// taken from the wheel: a sequence returned here is not returned again.
    pub fn due(&mut self, now: i64) -> Vec<u64> {
        let mut due = Vec::new();
        if !self.cfg.max_age.is_zero() {
            let age = i64::try_from(self.cfg.max_age.as_nanos()).unwrap_or(i64::MAX);
            let cutoff = now.saturating_sub(age);
            due.extend(
                self.index
                    .iter()
                    .filter(|(_, e)| e.ages_out())
                    .take_while(|(_, e)| e.ts <= cutoff)
                    .map(|(s, _)| s),
            );
        }
        let mut fired = Vec::new();
        self.ttl.expire(now, &mut fired);
        due.extend(fired.into_iter().map(|t| t.seq).filter(|s| self.index.contains(*s)));
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Remove what max age and TTLs expire at `now`. Returns how many went.
    pub fn expire(&mut self, now: i64, sink: &mut dyn Sink<L>) -> u64 {
        let mut n = 0;
        if !self.cfg.max_age.is_zero() {
            let age = i64::try_from(self.cfg.max_age.as_nanos()).unwrap_or(i64::MAX);
            let cutoff = now.saturating_sub(age);
            let due: Vec<u64> = self
                .index
                .iter()
                .filter(|(_, e)| e.ages_out())
                .take_while(|(_, e)| e.ts <= cutoff)
                .map(|(s, _)| s)
                .collect();
            for s in due {
                if self.remove(s, Why::Expired, sink) {
                    n += 1;
                }
            }
        }
        let mut fired = Vec::new();
        self.ttl.expire(now, &mut fired);
        fired.sort_unstable_by_key(|e| e.seq);
        for t in fired {
            if self.remove(t.seq, Why::Expired, sink) {
                n += 1;
            }
        }
        n
    }
}
