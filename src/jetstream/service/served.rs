//! Is a direct get or a pull request served by a stream's or consumer's own subscription?
//! Asked for every such request routed to the API's `$JS.API.>` subscription (which then
//! skips it, `super::subscribe`), so the answer is remembered per shard and per API
//! subscription, keyed by account and stream (and consumer), for as long as the
//! registry's generation stays the same: no registry lock per request.
//!
//! Ownership: one [`ServedMemo`] per API subscription, inside its skip test, on the
//! subscription's shard (not shared, hence a `RefCell`).

use super::super::registry::Registry;
use super::super::JetStream;
use crate::core::accounts::AccountId;
use std::cell::RefCell;
use std::collections::HashMap;

/// Answers kept at most (a memo is cleared when full, and at each registry change).
const MEMO_MAX: usize = 4096;

/// Requests that streams and consumers serve on subscriptions of their own (direct gets,
/// pull requests): the API's handler only answers them when no one serves them.
pub(super) fn has_own_subscription(api: &str) -> bool {
    api.starts_with("DIRECT.") || api.starts_with("CONSUMER.MSG.NEXT.")
}

/// The part of an API subject (after `$JS.API.`) an answer depends on: `DIRECT.GET.<stream>`
/// or `CONSUMER.MSG.NEXT.<stream>.<consumer>`; the whole of anything else.
fn memo_key(api: &str) -> &str {
    if let Some(rest) = api.strip_prefix("DIRECT.GET.") {
        let stream_len = rest.find('.').unwrap_or(rest.len());
        return &api[..api.len() - rest.len() + stream_len];
    }
    api
}

/// [`served_in`] with the registry locked (waits for it; reads only).
pub(super) fn served_elsewhere(js: &JetStream, acc: AccountId, api: &str) -> bool {
    served_in(&js.registry_to_read(), acc, api)
}

/// Is `api` (a request of [`has_own_subscription`]'s kinds) served, by this registry?
pub(super) fn served_in(reg: &Registry, acc: AccountId, api: &str) -> bool {
    if let Some(rest) = api.strip_prefix("DIRECT.GET.") {
        let stream = rest.split('.').next().unwrap_or("");
        return reg.get(acc, stream).is_some_and(|e| e.cfg.allow_direct)
            || crate::jetstream::sourcing::report::mirrors_direct(reg, acc, stream);
    }
    if let Some(rest) = api.strip_prefix("CONSUMER.MSG.NEXT.") {
        let mut t = rest.split('.');
        let (stream, consumer) = (t.next().unwrap_or(""), t.next().unwrap_or(""));
        return t.next().is_none() && reg.get(acc, stream).is_some_and(|e| e.consumers.contains(consumer));
    }
    true
}

/// Remembered answers of [`served_in`], valid for one registry generation.
#[derive(Default)]
pub(super) struct ServedMemo {
    inner: RefCell<MemoInner>,
}

#[derive(Default)]
struct MemoInner {
    gen: u64,
    /// The last answer looked up or made (a client of a KV bucket asks for the same
    /// stream over and over: one compare, no hashing). Its key is rewritten in place, so
    /// requests alternating between streams allocate nothing either.
    last: Option<(AccountId, bool)>,
    last_key: String,
    answers: HashMap<AccountId, HashMap<Box<str>, bool, ahash::RandomState>, ahash::RandomState>,
    len: usize,
}

impl MemoInner {
    fn remember_last(&mut self, acc: AccountId, key: &str, v: bool) {
        self.last_key.clear();
        self.last_key.push_str(key);
        self.last = Some((acc, v));
    }
}

impl ServedMemo {
    /// Is `api` served? From the memo while the registry's generation holds; else from
    /// the registry if it is free at once (never waits: routing may run under its lock),
    /// and remembered. `None`: the registry was busy, nothing is known.
    pub fn served(&self, js: &JetStream, acc: AccountId, api: &str) -> Option<bool> {
        let key = memo_key(api);
        // Read before the registry is locked: a change after this moves it on.
        let gen = js.registry_gen();
        {
            let mut m = self.inner.borrow_mut();
            if m.gen == gen {
                if let Some((a, v)) = m.last {
                    if a == acc && m.last_key == key {
                        return Some(v);
                    }
                }
                if let Some(&v) = m.answers.get(&acc).and_then(|a| a.get(key)) {
                    m.remember_last(acc, key, v);
                    return Some(v);
                }
            }
        }
        let v = served_in(&*js.try_registry()?, acc, api);
        let mut m = self.inner.borrow_mut();
        if m.gen != gen || m.len >= MEMO_MAX {
            m.answers.clear();
            m.len = 0;
            m.gen = gen;
        }
        m.remember_last(acc, key, v);
        if m.answers.entry(acc).or_default().insert(key.into(), v).is_none() {
            m.len += 1;
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_keys_keep_what_the_answer_depends_on() {
        assert_eq!(memo_key("DIRECT.GET.KV_b.$KV.b.k1"), "DIRECT.GET.KV_b");
        assert_eq!(memo_key("DIRECT.GET.KV_b.$KV.b.k2"), "DIRECT.GET.KV_b");
        assert_eq!(memo_key("DIRECT.GET.S"), "DIRECT.GET.S");
        assert_eq!(memo_key("CONSUMER.MSG.NEXT.S.C"), "CONSUMER.MSG.NEXT.S.C");
        assert!(has_own_subscription("DIRECT.GET.S"));
        assert!(!has_own_subscription("STREAM.INFO.S"));
    }
}
