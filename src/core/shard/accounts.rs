//! The shard's view of the account table: per-account routing state, and picking up a
//! new table when the registry publishes one (reload, JWT account updates).

use super::ShardCore;
use crate::core::accounts::state::ShardAccount;
use crate::core::accounts::AccountId;

impl ShardCore {
    /// The routing state of account `id`, created empty on first use (interest for an
    /// account can arrive from another shard before this shard's table has it).
    pub(super) fn acct(&mut self, id: AccountId) -> &mut ShardAccount {
        let i = id as usize;
        if self.accts.len() <= i {
            let cache = self.cfg.sublist_cache;
            self.accts.resize_with(i + 1, || ShardAccount::new(cache));
        }
        // The resize above makes `i` a valid index.
        &mut self.accts[i]
    }

    /// The account table this shard uses.
    pub fn account_table(&self) -> &std::sync::Arc<crate::core::accounts::AccountTable> {
        &self.table
    }

    /// A connection of this shard (internal ones included).
    pub fn client_ref(&self, key: crate::core::client::ConnKey) -> Option<&crate::core::client::Client> {
        self.client(key)
    }

    /// Remote-interest entries over all accounts (what other shards told this one).
    pub fn remote_entries(&self) -> usize {
        self.accts.iter().map(|a| a.remote.len()).sum()
    }

    /// Take the registry's table if it changed since this shard last looked: one atomic
    /// load when it did not.
    pub(super) fn sync_accounts(&mut self) {
        let gen = self.shared.accounts.generation();
        if gen == self.table_gen {
            return;
        }
        self.table = self.shared.accounts.snapshot();
        self.table_gen = gen;
        self.apply_table();
    }

    /// Give every account's state the definition of the current table.
    pub(super) fn apply_table(&mut self) {
        let table = self.table.clone();
        let cache = self.cfg.sublist_cache;
        let bound = table.id_bound().max(self.accts.len());
        for id in 0..bound {
            let def = table.get(id as AccountId).cloned();
            let st = self.acct(id as AccountId);
            let same = match (&st.def, &def) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                st.set_def(def, cache);
            }
        }
    }
}
