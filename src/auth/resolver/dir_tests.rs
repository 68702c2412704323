//! The `full` and `cache` resolvers over their stores: configuration, restarts, the
//! trait's operations, the expiry thread.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::resolver::testkit::{account_jwt, Keys, TempDir};
use std::time::Instant;

fn cfg(dir: &Path) -> DirConfig {
    DirConfig {
        dir: dir.display().to_string(),
        ..DirConfig::default()
    }
}

#[test]
fn a_full_resolver_keeps_what_it_stored_across_restarts() {
    let k = Keys::new();
    let tmp = TempDir::new("full-restart");
    let a = account_jwt(&k.operator, &k.account, 100, |_| {});
    {
        let r = DirectoryResolver::full(&cfg(tmp.path())).unwrap();
        assert_eq!(r.kind(), ResolverKind::Full);
        assert!(!r.is_remote());
        assert_eq!(r.fetch_timeout(), DEFAULT_FETCH_TIMEOUT);
        assert_eq!(r.sync_interval(), DEFAULT_SYNC_INTERVAL);
        assert_eq!(r.store(&k.account_pub(), &a), Ok(()));
        assert_eq!(r.store.options().limit, u64::MAX, "no limit by default");
    }
    let r = DirectoryResolver::full(&cfg(tmp.path())).unwrap();
    assert_eq!(r.lookup(&k.account_pub()), Some(a.clone()));
    assert_eq!(r.list(), [k.account_pub()]);
    assert_eq!(r.lookup(&k.other_pub()), None);
    assert_eq!(r.lookup("not-a-key"), None);
    assert_eq!(
        r.lookup(&k.operator.public_key()),
        None,
        "only account keys are looked up"
    );
    // `store` is the reference's `Store`: an older JWT does not replace a newer one.
    let older = account_jwt(&k.operator, &k.account, 50, |_| {});
    assert_eq!(r.store(&k.account_pub(), &older), Ok(()));
    assert_eq!(r.lookup(&k.account_pub()), Some(a));
    assert!(r.dir_store().is_some());
}

#[test]
fn full_resolver_options() {
    let k = Keys::new();
    let tmp = TempDir::new("full-opts");
    let r = DirectoryResolver::full(&DirConfig {
        limit: 1,
        interval: Duration::from_secs(5),
        timeout: Some(Duration::from_millis(300)),
        delete: DeleteMode::Hard,
        ..cfg(tmp.path())
    })
    .unwrap();
    assert_eq!(
        (r.sync_interval(), r.fetch_timeout()),
        (Duration::from_secs(5), Duration::from_millis(300))
    );
    r.store(&k.account_pub(), &account_jwt(&k.operator, &k.account, 1, |_| {}))
        .unwrap();
    let full = r.store(&k.other_pub(), &account_jwt(&k.operator, &k.other, 1, |_| {}));
    assert_eq!(full, Err(ResolverError::Refused("jwt store is full".into())));
    assert_eq!(
        r.delete(&[k.account_pub(), "bad".into()]),
        Err(ResolverError::Refused("invalid public key".into()))
    );
    assert_eq!(r.lookup(&k.account_pub()), None, "the valid one was deleted");
    let none = DirectoryResolver::full(&cfg(tmp.path())).unwrap();
    assert_eq!(
        none.delete(&[k.account_pub()]),
        Err(ResolverError::Refused("store is not set up to for delete".into()))
    );
}

#[test]
fn cache_defaults_and_deletes() {
    let k = Keys::new();
    let tmp = TempDir::new("cache");
    let r = DirectoryResolver::cache(&cfg(tmp.path())).unwrap();
    assert_eq!(r.kind(), ResolverKind::Cache);
    let o = *r.store.options();
    assert_eq!(
        (o.limit, o.evict, o.ttl, o.delete),
        (DEFAULT_CACHE_LIMIT, true, None, DeleteMode::Hard)
    );
    r.store(&k.account_pub(), &account_jwt(&k.operator, &k.account, 1, |_| {}))
        .unwrap();
    assert_eq!(r.delete(&[k.account_pub()]), Ok(()));
    assert!(r.list().is_empty());
}

#[test]
fn the_expiry_thread_removes_jwts_whose_ttl_ran_out() {
    let k = Keys::new();
    let tmp = TempDir::new("cache-ttl");
    let r = DirectoryResolver::cache(&DirConfig {
        ttl: Duration::from_millis(200),
        ..cfg(tmp.path())
    })
    .unwrap();
    let file = tmp.path().join(format!("{}.jwt", k.account_pub()));
    r.store(&k.account_pub(), &account_jwt(&k.operator, &k.account, 1, |_| {}))
        .unwrap();
    assert!(file.exists());
    let start = Instant::now();
    while file.exists() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!file.exists(), "removed by the timer");
    assert!(start.elapsed() >= Duration::from_millis(150), "not before its time");
    assert_eq!(r.lookup(&k.account_pub()), None);
}

#[test]
fn an_unusable_directory_is_an_error() {
    let tmp = TempDir::new("notadir");
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = DirectoryResolver::full(&cfg(&file)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the path [{}] is not a directory", file.display())
    );
}
