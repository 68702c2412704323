//! The server-wide account registry: stable ids for account names and the current
//! [`AccountTable`] snapshot.
//!
//! Writers (startup, reload, JWT account updates) build a new table under the registry's
//! lock and publish it; shards notice the new generation with one relaxed atomic load per
//! processing step and pick the snapshot up then. Nothing on the message path locks.

use super::{AccountDef, AccountId, AccountTable, GLOBAL, GLOBAL_NAME};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

#[derive(Default)]
struct Names {
    ids: HashMap<String, AccountId>,
    /// Connection counters by id, kept for the life of the server.
    conns: Vec<Arc<AtomicI64>>,
}

impl Names {
    fn id(&mut self, name: &str) -> AccountId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.conns.len() as AccountId;
        self.ids.insert(name.to_string(), id);
        self.conns.push(Arc::new(AtomicI64::new(0)));
        id
    }
}

/// Stable account ids and the current table.
pub struct AccountRegistry {
    names: Mutex<Names>,
    current: RwLock<Arc<AccountTable>>,
    generation: AtomicU64,
}

impl Default for AccountRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl AccountRegistry {
    /// A registry holding only the global account `$G` (id 0).
    pub fn new() -> Self {
        let mut names = Names::default();
        let g = names.id(GLOBAL_NAME);
        debug_assert_eq!(g, GLOBAL);
        let mut table = AccountTable::default();
        let mut def = AccountDef::plain(g, GLOBAL_NAME);
        def.conns = names.conns[g as usize].clone();
        put(&mut table, def);
        AccountRegistry {
            names: Mutex::new(names),
            current: RwLock::new(Arc::new(table)),
            generation: AtomicU64::new(1),
        }
    }

    /// The table in force.
    pub fn snapshot(&self) -> Arc<AccountTable> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Bumped by every published table.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replace the whole table (startup, reload): `build` gets a builder that starts
    /// empty but for `$G`.
    pub fn install(&self, build: impl FnOnce(&mut TableBuilder<'_>)) -> Arc<AccountTable> {
        self.edit(false, build)
    }

    /// Change some accounts and keep the rest (JWT account registration and updates).
    pub fn update(&self, build: impl FnOnce(&mut TableBuilder<'_>)) -> Arc<AccountTable> {
        self.edit(true, build)
    }

    fn edit(&self, keep: bool, build: impl FnOnce(&mut TableBuilder<'_>)) -> Arc<AccountTable> {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.snapshot();
        let mut table = AccountTable::default();
        if keep {
            table.defs = old.defs.clone();
            table.by_name = old.by_name.clone();
            table.system = old.system;
        }
        let mut b = TableBuilder {
            names: &mut names,
            table,
        };
        if b.table.get(GLOBAL).is_none() {
            let def = b.plain(GLOBAL_NAME);
            b.add(def);
        }
        build(&mut b);
        let table = Arc::new(b.table);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = table.clone();
        self.generation.fetch_add(1, Ordering::AcqRel);
        table
    }
}

/// Builds the next table; ids come from the registry.
pub struct TableBuilder<'a> {
    names: &'a mut Names,
    table: AccountTable,
}

impl TableBuilder<'_> {
    /// The id of `name` (assigned now if the name is new).
    pub fn id(&mut self, name: &str) -> AccountId {
        self.names.id(name)
    }

    /// A plain definition for `name` with the registry's id and connection counter.
    pub fn plain(&mut self, name: &str) -> AccountDef {
        let id = self.names.id(name);
        let mut def = AccountDef::plain(id, name);
        if let Some(c) = self.names.conns.get(id as usize) {
            def.conns = c.clone();
        }
        def
    }

    /// Add or replace a definition (its id and counter must come from [`Self::plain`]).
    pub fn add(&mut self, def: AccountDef) {
        put(&mut self.table, def);
    }

    /// Mark `name` as the system account (`None`: no system account).
    pub fn set_system(&mut self, id: Option<AccountId>) {
        self.table.system = id;
    }

    /// The table being built.
    pub fn table(&self) -> &AccountTable {
        &self.table
    }
}

fn put(table: &mut AccountTable, def: AccountDef) {
    let id = def.id as usize;
    if table.defs.len() <= id {
        table.defs.resize(id + 1, None);
    }
    table.by_name.insert(def.name.clone(), def.id);
    if let Some(slot) = table.defs.get_mut(id) {
        *slot = Some(Arc::new(def));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_across_installs_and_counters_are_shared() {
        let r = AccountRegistry::new();
        let g0 = r.generation();
        let t = r.install(|b| {
            let a = b.plain("A");
            let s = b.plain("$SYS");
            let sys = s.id;
            b.add(a);
            b.add(s);
            b.set_system(Some(sys));
        });
        assert!(r.generation() > g0);
        let a = t.by_name("A").map(|d| d.id);
        assert_eq!(t.name(0), "$G");
        assert_eq!(t.system(), t.by_name("$SYS").map(|d| d.id));
        if let Some(d) = t.by_name("A") {
            d.conns.fetch_add(1, Ordering::Relaxed);
        }
        // A reload without B, then with A again: same id, same counter.
        let t2 = r.install(|b| {
            let bdef = b.plain("B");
            b.add(bdef);
        });
        assert!(t2.by_name("A").is_none());
        assert_eq!(t2.system(), None);
        let t3 = r.update(|b| {
            let adef = b.plain("A");
            b.add(adef);
        });
        assert_eq!(t3.by_name("A").map(|d| d.id), a);
        assert_eq!(t3.by_name("A").map(|d| d.conns.load(Ordering::Relaxed)), Some(1));
        assert!(t3.by_name("B").is_some(), "update keeps the others");
        assert_eq!(t3.len(), 3);
    }
}
