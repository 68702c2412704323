//! A connection's route memo: the subject of its last publish, the interest that subject
//! matched on this shard and on the others, and the kinds of import it may take. A
//! publisher that repeats its subject (the common case) is routed by one compare instead
//! of two sublist lookups and the import gates, and a publish nobody listens to ends there.
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
    subject: Vec<u8>,
    account: AccountId,
    epoch: u64,
    local: Rc<Matches<SubId>>,
    /// Interest on other shards (`None` with one shard).
    remote: Option<Rc<Matches<RKey>>>,
    onward: Onward,
    /// No subscriber anywhere and no import to follow.
    nobody: bool,
}

/// The memo's answer for a publish.
pub(super) enum Hit {
    /// Not memoized (another subject or account, or something changed since).
    Miss,
    /// Memoized, and nobody is interested.
    Nobody,
    Found(Rc<Matches<SubId>>, Option<Rc<Matches<RKey>>>, Onward),
}

/// The memo's answer for `subject` published in `account`, at the current epoch.
#[inline(always)]
pub(super) fn lookup(memo: &Option<RouteMemo>, account: AccountId, subject: &[u8]) -> Hit {
    let Some(m) = memo else { return Hit::Miss };
    if m.epoch != crate::core::sublist::epoch()
        || m.account != account
        || !crate::core::subject::same(&m.subject, subject)
    {
        return Hit::Miss;
    }
    if m.nobody {
        Hit::Nobody
    } else {
        Hit::Found(m.local.clone(), m.remote.clone(), m.onward)
    }
}

/// Remember what `subject` in `account` matched, as of `epoch` (read before the lookups:
/// a change made while delivering leaves the memo stale, as it must).
pub(super) fn store(
    memo: &mut Option<RouteMemo>,
    epoch: u64,
    account: AccountId,
    subject: &[u8],
    local: &Rc<Matches<SubId>>,
    remote: Option<&Rc<Matches<RKey>>>,
    onward: Onward,
) {
    let nobody = local.is_empty() && remote.is_none_or(|r| r.is_empty()) && !onward.any();
    let mut key = memo.take().map(|m| m.subject).unwrap_or_default();
    key.clear();
    key.extend_from_slice(subject);
    *memo = Some(RouteMemo {
        subject: key,
        account,
        epoch,
        local: local.clone(),
        remote: remote.cloned(),
        onward,
        nobody,
    });
}
