//! The directory store: file format, reopening, garbage, saves, limits, eviction, expiry,
//! deletes, the store hash.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use crate::auth::resolver::testkit::{account_jwt, Keys, TempDir};
use std::os::unix::fs::PermissionsExt;

const SEC: i64 = 1_000_000_000;
const T0: i64 = 1_800_000_000 * SEC;

fn opts(delete: DeleteMode, limit: u64, evict: bool, ttl: Option<Duration>) -> StoreOptions {
    StoreOptions {
        delete,
        limit,
        evict,
        ttl,
    }
}

fn full() -> StoreOptions {
    opts(DeleteMode::NoDelete, u64::MAX, false, None)
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn one_file_per_account_named_by_its_key() {
    let k = Keys::new();
    let tmp = TempDir::new("format");
    let dir = tmp.path().join("new").join("jwts");
    let s = DirStore::open(&dir, full()).unwrap();
    assert_eq!(mode(&dir), 0o700, "created as the reference does");
    assert!(s.dir().is_absolute());
    let jwt = account_jwt(&k.operator, &k.account, 100, |_| {});
    assert_eq!(s.save(&k.account_pub(), &jwt), Ok(true));
    let file = dir.join(format!("{}.jwt", k.account_pub()));
    assert_eq!(fs::read_to_string(&file).unwrap(), jwt, "the JWT and nothing else");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        names(&dir),
        [format!("{}.jwt", k.account_pub())],
        "no temporary file left"
    );
    assert_eq!(s.load(&k.account_pub()).unwrap(), jwt);
    assert_eq!(s.save(&k.account_pub(), &jwt), Ok(false), "the same JWT is no change");
}

#[test]
fn reopening_indexes_what_is_there_and_ignores_garbage() {
    let k = Keys::new();
    let tmp = TempDir::new("reopen");
    let a = account_jwt(&k.operator, &k.account, 100, |_| {});
    let b = account_jwt(&k.operator, &k.other, 100, |_| {});
    {
        let s = DirStore::open(tmp.path(), full()).unwrap();
        s.save(&k.account_pub(), &a).unwrap();
    }
    // What a crash or another program may leave behind.
    let sys = k.system_pub();
    let torn = b.get(..b.len() / 2).unwrap();
    fs::write(tmp.path().join(format!("{}.jwt", k.other_pub())), torn).unwrap();
    fs::write(tmp.path().join(format!("{sys}.jwt")), "").unwrap();
    fs::write(tmp.path().join("NOTAKEY.jwt"), &a).unwrap();
    fs::write(tmp.path().join(format!(".{sys}.jwt.tmp")), "half").unwrap();
    fs::write(tmp.path().join("README"), "hello").unwrap();
    let s = DirStore::open(tmp.path(), full()).unwrap();
    assert_eq!(s.list(), [k.account_pub()], "only the usable JWT is indexed");
    assert_eq!(s.load(&k.account_pub()).unwrap(), a);
    assert_eq!(
        s.load(&k.other_pub()),
        Err(StoreError::NotFound),
        "a torn file is never served"
    );
    assert_eq!(s.load(&sys), Err(StoreError::NotFound), "nor an empty one");
    assert_eq!(s.load("NOTAKEY"), Err(StoreError::InvalidKey));
    assert!(
        !tmp.path().join(format!(".{sys}.jwt.tmp")).exists(),
        "stale temporary files go"
    );
    assert!(tmp.path().join("README").exists(), "other files stay");
    // A torn file is replaced by the next store.
    assert_eq!(s.save_if_newer(&k.other_pub(), &b), Ok(true));
    assert_eq!(s.load(&k.other_pub()).unwrap(), b);
}

#[test]
fn save_if_newer_keeps_the_newer_jwt() {
    let k = Keys::new();
    let tmp = TempDir::new("newer");
    let s = DirStore::open(tmp.path(), full()).unwrap();
    let key = k.account_pub();
    let v2 = account_jwt(&k.operator, &k.account, 200, |c| c.claims.name = "v2".into());
    let v1 = account_jwt(&k.operator, &k.account, 100, |c| c.claims.name = "v1".into());
    let v3 = account_jwt(&k.operator, &k.account, 300, |c| c.claims.name = "v3".into());
    assert_eq!(s.save_if_newer(&key, &v2), Ok(true), "nothing stored yet");
    assert_eq!(s.save_if_newer(&key, &v2), Ok(false), "same jti");
    assert_eq!(s.save_if_newer(&key, &v1), Ok(false), "older iat");
    assert_eq!(s.load(&key).unwrap(), v2);
    assert_eq!(s.save_if_newer(&key, &v3), Ok(true));
    assert_eq!(s.load(&key).unwrap(), v3);
    // `save` (the reference's `$SYS` update path) does not compare.
    assert_eq!(s.save(&key, &v1), Ok(true));
    assert_eq!(s.load(&key).unwrap(), v1);
    let other = account_jwt(&k.operator, &k.other, 400, |_| {});
    assert_eq!(s.save_if_newer(&key, &other), Err(StoreError::SubjectMismatch));
    assert_eq!(
        s.save_if_newer(&key, "garbage"),
        Err(StoreError::Jwt("expected 3 chunks".into()))
    );
    assert_eq!(s.save(&key, ""), Err(StoreError::InvalidJwt));
    assert_eq!(s.save("nope", &v1), Err(StoreError::InvalidKey));
    assert_eq!(
        StoreError::SubjectMismatch.to_string(),
        "jwt subject nkey and provided nkey do not match"
    );
}

#[test]
fn a_full_store_at_its_limit_refuses_new_accounts() {
    let k = Keys::new();
    let tmp = TempDir::new("limit");
    let s = DirStore::open(tmp.path(), opts(DeleteMode::NoDelete, 1, false, None)).unwrap();
    let a = account_jwt(&k.operator, &k.account, 100, |_| {});
    let a2 = account_jwt(&k.operator, &k.account, 200, |_| {});
    let b = account_jwt(&k.operator, &k.other, 100, |_| {});
    s.save(&k.account_pub(), &a).unwrap();
    assert_eq!(s.save(&k.other_pub(), &b), Err(StoreError::Full));
    assert_eq!(StoreError::Full.to_string(), "jwt store is full");
    assert_eq!(s.save(&k.account_pub(), &a2), Ok(true), "updates still work");
    assert_eq!(s.list(), [k.account_pub()]);
}

#[test]
fn a_cache_evicts_the_least_recently_used() {
    let k = Keys::new();
    let tmp = TempDir::new("lru");
    let s = DirStore::open(tmp.path(), opts(DeleteMode::Hard, 2, true, None)).unwrap();
    let (a, b, c) = (k.account_pub(), k.other_pub(), k.system_pub());
    s.save(&a, &account_jwt(&k.operator, &k.account, 1, |_| {})).unwrap();
    s.save(&b, &account_jwt(&k.operator, &k.other, 1, |_| {})).unwrap();
    s.load(&a).unwrap(); // a is now the more recent
    s.save(&c, &account_jwt(&k.operator, &k.system, 1, |_| {})).unwrap();
    let mut want = vec![a.clone(), c.clone()];
    want.sort();
    assert_eq!(s.list(), want, "b went");
    assert!(!tmp.path().join(format!("{b}.jwt")).exists(), "with its file");
    // Rewriting c makes it the most recent; b comes back in place of a.
    s.save(&c, &account_jwt(&k.operator, &k.system, 2, |_| {})).unwrap();
    s.save(&b, &account_jwt(&k.operator, &k.other, 2, |_| {})).unwrap();
    let mut want = vec![b, c];
    want.sort();
    assert_eq!(s.list(), want);
}

#[test]
fn a_ttl_runs_from_the_last_use() {
    let k = Keys::new();
    let tmp = TempDir::new("ttl");
    let ttl = Duration::from_secs(10);
    let s = DirStore::open(tmp.path(), opts(DeleteMode::Hard, 10, true, Some(ttl))).unwrap();
    assert_eq!(s.check_interval(), Duration::from_secs(5));
    let key = k.account_pub();
    s.save_at(&key, &account_jwt(&k.operator, &k.account, 1, |_| {}), T0)
        .unwrap();
    assert!(s.expire_at(T0 + 9 * SEC).is_empty());
    s.load_at(&key, T0 + 9 * SEC).unwrap();
    assert!(s.expire_at(T0 + 18 * SEC).is_empty(), "the read renewed it");
    assert_eq!(s.expire_at(T0 + 19 * SEC), std::slice::from_ref(&key));
    assert!(s.is_empty());
    assert_eq!(s.load(&key), Err(StoreError::NotFound), "the file is gone");
    let long = DirStore::open(
        tmp.path(),
        opts(DeleteMode::Hard, 10, true, Some(Duration::from_secs(3600))),
    )
    .unwrap();
    assert_eq!(long.check_interval(), Duration::from_secs(60), "at most a minute");
}

#[test]
fn without_a_ttl_jwts_expire_at_their_exp() {
    let k = Keys::new();
    let tmp = TempDir::new("exp");
    let s = DirStore::open(tmp.path(), full()).unwrap();
    let exp = T0 / SEC + 100;
    let a = account_jwt(&k.operator, &k.account, 1, |c| c.claims.expires = exp);
    let b = account_jwt(&k.operator, &k.other, 1, |_| {});
    s.save_at(&k.account_pub(), &a, T0).unwrap();
    s.save_at(&k.other_pub(), &b, T0).unwrap();
    assert_eq!(s.pack_at(T0).len(), 2);
    assert_eq!(
        s.pack_at(T0 + 101 * SEC),
        [(k.other_pub(), b.clone())],
        "expired ones are not listed"
    );
    assert!(s.expire_at(T0 + 99 * SEC).is_empty());
    assert_eq!(s.expire_at(T0 + 100 * SEC), [k.account_pub()]);
    assert_eq!(s.list(), [k.other_pub()]);
    assert!(s.expire_at(i64::MAX - 1).is_empty(), "no exp: never");
}

#[test]
fn deletes_follow_the_mode() {
    let k = Keys::new();
    let key = k.account_pub();
    let jwt = account_jwt(&k.operator, &k.account, 1, |_| {});
    let tmp = TempDir::new("delete-none");
    let s = DirStore::open(tmp.path(), full()).unwrap();
    s.save(&key, &jwt).unwrap();
    assert_eq!(s.delete(&key), Err(StoreError::NoDelete));
    assert_eq!(StoreError::NoDelete.to_string(), "store is not set up to for delete");
    assert_eq!(s.load(&key).unwrap(), jwt);

    let tmp = TempDir::new("delete-rename");
    let s = DirStore::open(tmp.path(), opts(DeleteMode::Rename, u64::MAX, false, None)).unwrap();
    s.save(&key, &jwt).unwrap();
    let before = s.hash();
    assert_ne!(before, [0; 32]);
    assert_eq!(s.delete(&key), Ok(true));
    assert_eq!(names(tmp.path()), [format!("{key}.jwt.deleted")]);
    assert_eq!(
        fs::read_to_string(tmp.path().join(format!("{key}.jwt.deleted"))).unwrap(),
        jwt
    );
    assert_eq!(s.hash(), [0; 32], "no longer indexed");
    assert_eq!(s.load(&key), Err(StoreError::NotFound));
    assert_eq!(s.delete(&key), Ok(false), "nothing left to delete is no error");
    s.save(&key, &jwt).unwrap();
    assert_eq!(s.hash(), before);
    let reopened = DirStore::open(tmp.path(), full()).unwrap();
    assert_eq!(
        reopened.list(),
        std::slice::from_ref(&key),
        "a .deleted file is not a JWT of the store"
    );

    let tmp = TempDir::new("delete-hard");
    let s = DirStore::open(tmp.path(), opts(DeleteMode::Hard, u64::MAX, false, None)).unwrap();
    s.save(&key, &jwt).unwrap();
    assert_eq!(s.delete(&key), Ok(true));
    assert!(names(tmp.path()).is_empty());
    assert_eq!(s.delete("bad"), Err(StoreError::InvalidKey));
}

#[test]
fn the_store_hash_is_the_xor_of_the_jwt_hashes() {
    let k = Keys::new();
    let tmp = TempDir::new("hash");
    let s = DirStore::open(tmp.path(), full()).unwrap();
    assert_eq!(s.hash(), [0; 32]);
    let a = account_jwt(&k.operator, &k.account, 1, |_| {});
    let b = account_jwt(&k.operator, &k.other, 1, |_| {});
    s.save(&k.account_pub(), &a).unwrap();
    s.save(&k.other_pub(), &b).unwrap();
    let mut want = sha256(a.as_bytes());
    for (w, x) in want.iter_mut().zip(sha256(b.as_bytes())) {
        *w ^= x;
    }
    assert_eq!(s.hash(), want);
    let a2 = account_jwt(&k.operator, &k.account, 2, |_| {});
    s.save(&k.account_pub(), &a2).unwrap();
    let reopened = DirStore::open(tmp.path(), full()).unwrap();
    assert_eq!(reopened.hash(), s.hash(), "the hash follows replacements");
    assert_eq!(s.pack().len(), 2);
}
