//! A connection's route memo: the subject of its last publish, the interest that subject
//! matched on this shard and on the others, and the kinds of import it may take. A
//! publisher that repeats its subject (the common case) is routed by one compare instead
//! of two sublist lookups and the import gates, and a publish nobody listens to ends there.
//!
//! A memo is keyed by the whole subject, or by a prefix of it when the sublists decided the
//! interest without reading the subject's last tokens ([`Matches::prefix`]): then every
//! publish that starts with the same tokens and has more is routed alike. That covers
//! subjects that never repeat under a `>` subscription, such as a consumer's acks
//! (`$JS.ACK.<stream>.<consumer>.` then numbers): one memo serves them all.
//!
//! When the interest is plain subscribers and nothing else (no queue group, no import),
//! the memo says where they are (`run_to`, a [`RunPlan`]): a plain publish goes straight
//! into the runs of its subject (`core::mesh_run`) for those other shards, and into the
//! shard's own local run (module `local_run`) for its subscribers here, without the
//! search for targets: the common shapes of a stream between connections.
//!
//! Validity: every sublist change on the shard's thread and every new account definition
//! moves [`sublist::epoch`](crate::core::sublist::epoch); a memo holds only while the epoch
//! it was taken at is current. Its results are the same shared snapshots the sublists hand
//! out, so a memo never sees a half-made change.
//!
//! Ownership: each memo lives in its connection's [`Client`](crate::core::client::Client),
//! on the connection's shard.

use super::imports::Onward;
use crate::core::accounts::AccountId;
use crate::core::client::SubId;
use crate::core::remote::RKey;
use crate::core::sublist::Matches;
use std::rc::Rc;

/// What a connection's last publish was routed by.
pub struct RouteMemo {
    /// The subject, or with `prefix` its leading tokens (without the dot after them).
    subject: Vec<u8>,
    prefix: bool,
    account: AccountId,
    epoch: u64,
    local: Rc<Matches<SubId>>,
    /// Interest on other shards (`None` with one shard).
    remote: Option<Rc<Matches<RKey>>>,
    onward: Onward,
    /// No subscriber anywhere and no import to follow.
    nobody: bool,
    /// The interest is plain subscribers and nothing else (no queue group anywhere, no
    /// import): where a plain publish goes as runs (see `ShardCore::route_published`).
    run_to: Option<RunPlan>,
    /// The interest is one plain subscriber on this shard and nothing else (no queue
    /// group, nobody on another shard, no import): a publish is delivered to it straight.
    one: Option<SubId>,
    /// Taken while the account had subject mappings: the subject is the mapped one, and
    /// a publish must be mapped before it is looked up here.
    mapped: bool,
}

/// Where the plain subscribers of a memoized subject are, when they are all its interest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RunPlan {
    /// The other shards with such subscribers, one bit each (shards 0 to 63).
    pub(super) shards: u64,
    /// Subscribers on this shard as well (enough of them for the local run to pay).
    pub(super) here: bool,
    /// Instead: the interest is one queue group and nothing else; each publish goes to
    /// the run of the shard whose member is picked (this one's: the local run).
    pub(super) queue: bool,
}

impl RunPlan {
    /// The other shards, in order.
    pub(super) fn each_shard(self) -> impl Iterator<Item = usize> {
        let mut bits = self.shards;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let n = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(n)
        })
    }
}

/// The memo's answer for a publish. (Small, and `Copy`: it is handed down the publish
/// path, and a larger one, holding the interest itself, was copied through the stack
/// piecewise written and wholly read, which the CPU could not forward.)
#[derive(Clone, Copy)]
pub(super) enum Hit {
    /// Not memoized (another subject or account, or something changed since).
    Miss,
    /// Memoized, and nobody is interested.
    Nobody,
    /// Memoized: the interest is this one plain subscriber here, and nothing else.
    One(SubId),
    /// Memoized: the rest is in the memo ([`found`]).
    Found,
}

/// What a memo that answered [`Hit::Found`] holds: the interest, the imports to follow,
/// and where a plain publish goes as runs when that is all there is to it.
pub(super) type Found = (Rc<Matches<SubId>>, Option<Rc<Matches<RKey>>>, Onward, Option<RunPlan>);

/// The interest a memo holds (after [`lookup`] answered [`Hit::Found`]).
#[inline]
pub(super) fn found(memo: &Option<RouteMemo>) -> Option<Found> {
    memo.as_ref()
        .map(|m| (m.local.clone(), m.remote.clone(), m.onward, m.run_to))
}

/// The memo's answer for `subject` published in `account`, at the current epoch: with
/// `mapped`, a subject the account's mappings gave; without, a subject as published in
/// an account that had no mappings (a memo holds only while no definition changed, so
/// such a publish needs no look at the mappings).
#[inline(always)]
pub(super) fn lookup(memo: &Option<RouteMemo>, account: AccountId, subject: &[u8], mapped: bool) -> Hit {
    let Some(m) = memo else { return Hit::Miss };
    if m.epoch != crate::core::sublist::epoch() || m.account != account || m.mapped != mapped || !m.covers(subject) {
        return Hit::Miss;
    }
    if m.nobody {
        Hit::Nobody
    } else if let Some(id) = m.one {
        Hit::One(id)
    } else {
        Hit::Found
    }
}

/// Where a memo sends plain publishes as runs (tests).
#[cfg(test)]
pub(super) fn run_to_of(memo: &Option<RouteMemo>) -> Option<RunPlan> {
    memo.as_ref().and_then(|m| m.run_to)
}

#[cfg(test)]
impl RouteMemo {
    /// The one plain subscriber a publish goes straight to (tests).
    pub(super) fn one_of(&self) -> Option<SubId> {
        self.one
    }
}

/// This shard's interest in `subject` published in `account` from another shard, from the
/// shard's memo of such subjects (which only keeps prefixes: see [`store`]).
#[inline]
pub(super) fn lookup_local(memo: &Option<RouteMemo>, account: AccountId, subject: &[u8]) -> Option<Rc<Matches<SubId>>> {
    let m = memo.as_ref()?;
    (m.epoch == crate::core::sublist::epoch() && m.account == account && m.covers(subject)).then(|| m.local.clone())
}

impl RouteMemo {
    /// A whole-subject memo in `account` of another subject than `subject` with the same
    /// first `n` bytes (a prefix of whole tokens).
    fn sibling_of(&self, account: AccountId, subject: &[u8], n: usize) -> bool {
        let same = crate::core::subject::same;
        !self.prefix
            && self.account == account
            && self.subject.get(n) == Some(&b'.')
            && same(&self.subject[..n], &subject[..n])
            && !same(&self.subject, subject)
    }

    #[inline(always)]
    fn covers(&self, subject: &[u8]) -> bool {
        if !self.prefix {
            return crate::core::subject::same(&self.subject, subject);
        }
        self.covers_by_prefix(subject)
    }

    /// Out of line: the repeated-subject check above stays small where it is inlined.
    #[inline(never)]
    fn covers_by_prefix(&self, subject: &[u8]) -> bool {
        let n = self.subject.len();
        subject.len() > n + 1
            && subject.get(n) == Some(&b'.')
            && crate::core::subject::same(&self.subject, &subject[..n])
            // An empty token matches nothing whatever the prefix matched (and a wildcard
            // token is left to a lookup).
            && crate::core::subject::is_valid_literal_subject(&subject[n + 1..])
    }
}

/// The bytes of the first `tokens` tokens of `subject` (at least one: a result decided
/// by none is decided by the first as well), if it has more than that.
fn prefix_len(subject: &[u8], tokens: Option<u16>) -> Option<usize> {
    let tokens = tokens?.max(1);
    memchr::memchr_iter(crate::core::subject::TSEP, subject).nth(usize::from(tokens) - 1)
}

/// How many leading tokens results `a` and `b` (if any) together were decided by (`None`:
/// the whole subject). Both must hold, so the longer prefix.
fn joint_prefix(a: Option<u16>, b: Option<Option<u16>>) -> Option<u16> {
    match b {
        None => a,
        Some(b) => Some(a?.max(b?)),
    }
}

/// Remember what `subject` in `account` matched, as of `epoch` (read before the lookups:
/// a change made while delivering leaves the memo stale, as it must); `mapped` when the
/// account has subject mappings (`subject` is then what they gave). A subject used once
/// (`once`) is remembered only by a prefix: whole, it would not come again. (A shard's memo
/// of messages from other shards is stored with `once`, no remote interest and no imports:
/// a whole subject that repeats there is the sublist's own last-lookup memo's.)
#[allow(clippy::too_many_arguments)]
pub(super) fn store(
    memo: &mut Option<RouteMemo>,
    epoch: u64,
    account: AccountId,
    subject: &[u8],
    local: &Rc<Matches<SubId>>,
    remote: Option<&Rc<Matches<RKey>>>,
    onward: Onward,
    once: bool,
    run_to: Option<RunPlan>,
    mapped: bool,
) {
    let prefix = prefix_len(
        subject,
        joint_prefix(local.prefix_at(epoch), remote.map(|r| r.prefix_at(epoch))),
    );
    // By prefix when the subject is used once, or when it is the second subject in a row
    // under that prefix; a subject that repeats keeps the whole-subject memo, whose check
    // is one compare.
    let (key, by_prefix) = match prefix {
        Some(n) if once || memo.as_ref().is_some_and(|m| m.sibling_of(account, subject, n)) => (&subject[..n], true),
        _ if once => return,
        _ => (subject, false),
    };
    let elsewhere = remote.is_some_and(|r| !r.is_empty()) || onward.any();
    let nobody = local.is_empty() && !elsewhere;
    let one = match &local.psubs[..] {
        [id] if local.qsubs.is_empty() && !elsewhere => Some(*id),
        _ => None,
    };
    let mut buf = memo.take().map(|m| m.subject).unwrap_or_default();
    buf.clear();
    buf.extend_from_slice(key);
    *memo = Some(RouteMemo {
        subject: buf,
        prefix: by_prefix,
        account,
        epoch,
        local: local.clone(),
        remote: remote.cloned(),
        onward,
        nobody,
        run_to,
        one,
        mapped,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn prefixes_end_before_a_token() {
        assert_eq!(prefix_len(b"a.b.c", Some(1)), Some(1));
        assert_eq!(prefix_len(b"a.b.c", Some(2)), Some(3));
        assert_eq!(prefix_len(b"a.b.c", Some(3)), None);
        assert_eq!(prefix_len(b"a.b.c", Some(0)), Some(1));
        assert_eq!(prefix_len(b"a", Some(0)), None);
        assert_eq!(prefix_len(b"a.b.c", None), None);
    }

    #[test]
    fn a_prefix_covers_longer_valid_subjects_only() {
        let mut sl = crate::core::sublist::Sublist::new(true);
        sl.insert(b"$JS.ACK.>", None, 7).unwrap();
        let local = sl.matches_once(b"$JS.ACK.1.2");
        assert_eq!(local.psubs, [7]);
        let mut memo = None;
        let epoch = crate::core::sublist::epoch();
        store(
            &mut memo,
            epoch,
            0,
            b"$JS.ACK.1.2",
            &local,
            None,
            Onward::default(),
            true,
            None,
            false,
        );
        let hit = |s: &[u8]| lookup_local(&memo, 0, s).is_some();
        // Decided by `$JS.ACK` (below it there is only `>`).
        assert!(hit(b"$JS.ACK.1.9"));
        assert!(hit(b"$JS.ACK.9"));
        assert!(hit(b"$JS.ACK.1.2.3"));
        for miss in [
            &b"$JS.ACK"[..],
            b"$JS.ACK.",
            b"$JS.ACK..1",
            b"$JS.ACK.1..2",
            b"$JS.ACK.1.2.",
            b"$JS.ACKX.1.2",
            b"$JS.NAK.1.2",
        ] {
            assert!(!hit(miss), "{}", String::from_utf8_lossy(miss));
        }
        assert!(lookup_local(&memo, 1, b"$JS.ACK.1.9").is_none(), "another account");
        crate::core::sublist::bump_epoch();
        assert!(!hit(b"$JS.ACK.1.9"), "a change to interest ends it");
    }

    #[test]
    fn a_repeated_subject_keeps_its_whole_memo_and_a_second_sibling_takes_the_prefix() {
        let mut sl = crate::core::sublist::Sublist::new(true);
        sl.insert(b"$KV.b.>", None, 7).unwrap();
        let epoch = crate::core::sublist::epoch();
        let mut memo = None;
        let mut put = |memo: &mut Option<RouteMemo>, s: &[u8], once: bool| {
            let local = sl.matches(s);
            store(memo, epoch, 0, s, &local, None, Onward::default(), once, None, false);
        };
        put(&mut memo, b"$KV.b.k1", false);
        assert!(memo.as_ref().is_some_and(|m| !m.prefix && m.subject == b"$KV.b.k1"));
        put(&mut memo, b"$KV.b.k1", false);
        assert!(memo.as_ref().is_some_and(|m| !m.prefix), "a repeat stays whole");
        put(&mut memo, b"$KV.b.k2", false);
        assert!(
            memo.as_ref().is_some_and(|m| m.prefix && m.subject == b"$KV.b"),
            "a sibling: by prefix"
        );
        assert!(
            matches!(lookup(&memo, 0, b"$KV.b.k3", false), Hit::One(7)),
            "one subscriber"
        );
        // Used once: by prefix at once.
        let mut memo = None;
        put(&mut memo, b"$KV.b.k1", true);
        assert!(memo.as_ref().is_some_and(|m| m.prefix));
    }

    #[test]
    fn joint_prefixes_need_both() {
        assert_eq!(joint_prefix(Some(2), None), Some(2));
        assert_eq!(joint_prefix(Some(2), Some(Some(3))), Some(3));
        assert_eq!(joint_prefix(Some(0), Some(Some(3))), Some(3));
        assert_eq!(joint_prefix(None, Some(Some(3))), None);
        assert_eq!(joint_prefix(Some(2), Some(None)), None);
    }
}
