//! A connection's route memo (module `memo`): a publisher that repeats its subject is
//! routed by the memo, and every change of interest or of the account's definition made
//! since is seen by the next publish, on one shard and across shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

fn msgs(got: &str, line: &str) -> usize {
    got.matches(line).count()
}

#[test]
fn the_memo_sees_every_subscribe_and_unsubscribe() {
    for n in [1, 3] {
        let mut w = World::new(n, CoreConfig::default());
        let far = n - 1;
        let (_, p) = w.connect(0, QUIET);
        let (_, near) = w.connect(0, QUIET);
        let (_, away) = w.connect(far, QUIET);
        // Nobody listens: the memo remembers that.
        w.send(0, p, "PUB m.x 1\r\na\r\nPUB m.x 1\r\na\r\n");
        assert!(w.shards[0].client(p).unwrap().route_memo.is_some());
        // A subscriber on the last shard, then one on the publisher's own shard.
        w.send(far, away, "SUB m.* 1\r\nPING\r\n");
        assert_eq!(w.take(far, away), "PONG\r\n");
        w.send(0, p, "PUB m.x 1\r\nb\r\n");
        assert_eq!(w.take(far, away), "MSG m.x 1 1\r\nb\r\n", "{n} shards");
        w.send(0, near, "SUB m.x 2\r\nPING\r\n");
        assert_eq!(w.take(0, near), "PONG\r\n");
        w.send(0, p, "PUB m.x 1\r\nc\r\n");
        assert_eq!(w.take(0, near), "MSG m.x 2 1\r\nc\r\n", "{n} shards");
        assert_eq!(w.take(far, away), "MSG m.x 1 1\r\nc\r\n", "{n} shards");
        // Unsubscribes: the far one first, then the near one.
        w.send(far, away, "UNSUB 1\r\nPING\r\n");
        w.take(far, away);
        w.send(0, p, "PUB m.x 1\r\nd\r\n");
        assert_eq!(w.take(0, near), "MSG m.x 2 1\r\nd\r\n");
        assert_eq!(w.take(far, away), "", "{n} shards: unsubscribed");
        w.send(0, near, "UNSUB 2\r\nPING\r\n");
        w.take(0, near);
        w.send(0, p, "PUB m.x 1\r\ne\r\n");
        assert_eq!(w.take(0, near), "");
        // And a queue group on the far shard after that.
        w.send(far, away, "SUB m.x q 3\r\nPING\r\n");
        w.take(far, away);
        w.send(0, p, "PUB m.x 1\r\nf\r\n");
        assert_eq!(w.take(far, away), "MSG m.x 3 1\r\nf\r\n", "{n} shards");
    }
}

#[test]
fn an_auto_unsubscribe_in_the_middle_of_a_read_ends_delivery() {
    for n in [1, 2] {
        let mut w = World::new(n, CoreConfig::default());
        let (_, p) = w.connect(0, QUIET);
        let (_, s) = w.connect(n - 1, QUIET);
        w.send(n - 1, s, "SUB a 7\r\nUNSUB 7 2\r\nPING\r\n");
        assert_eq!(w.take(n - 1, s), "PONG\r\n");
        w.send(0, p, &"PUB a 1\r\nz\r\n".repeat(5));
        assert_eq!(msgs(&w.take(n - 1, s), "MSG a 7 1"), 2, "{n} shards");
        // A new subscription in the same slot gets what comes after it, once.
        w.send(n - 1, s, "SUB a 8\r\nPING\r\n");
        w.take(n - 1, s);
        w.send(0, p, "PUB a 1\r\nz\r\n");
        assert_eq!(w.take(n - 1, s), "MSG a 8 1\r\nz\r\n", "{n} shards");
    }
}

#[test]
fn a_new_account_definition_changes_the_route_of_a_memoized_subject() {
    use super::accounts::{login, world};
    use crate::core::accounts::links::{ResponseType, Rewrite, StreamLink};
    for n in [1, 2] {
        let mut w = world(n, None, ResponseType::Singleton);
        // A without its stream export: what A publishes on `feed.x` reaches nobody.
        w.shared.accounts.update(|b| {
            let a = b.plain("A");
            b.add(a);
        });
        let a = login(&mut w, 0, "a");
        let b = login(&mut w, n - 1, "b");
        w.send(n - 1, b, "SUB a.feed.x 1\r\nPING\r\n");
        w.take(n - 1, b);
        w.send(0, a, "PUB feed.x 1\r\n1\r\nPUB feed.x 1\r\n2\r\n");
        assert_eq!(w.take(n - 1, b), "");
        // The export comes back (a reload, a JWT update): the same subject now reaches B.
        w.shared.accounts.update(|t| {
            let importer = t.id("B");
            let mut a = t.plain("A");
            a.stream_links.push(StreamLink {
                from: b"feed.>".to_vec().into(),
                importer,
                rewrite: Rewrite::Prefix(b"a.".to_vec().into()),
                allow_trace: false,
            });
            t.add(a);
        });
        w.send(0, a, "PUB feed.x 1\r\n3\r\n");
        assert_eq!(w.take(n - 1, b), "MSG a.feed.x 1 1\r\n3\r\n", "{n} shards");
    }
}

#[test]
fn memo_hits_count_as_sublist_lookups() {
    let mut w = World::new(2, CoreConfig::default());
    let (_, p) = w.connect(0, QUIET);
    w.send(0, p, "PUB none 0\r\n\r\n");
    let before = w.shards[0].acct(crate::core::accounts::GLOBAL).sublist.stats();
    w.send(0, p, &"PUB none 0\r\n\r\n".repeat(10));
    let after = w.shards[0].acct(crate::core::accounts::GLOBAL).sublist.stats();
    assert_eq!(after.matches - before.matches, 10);
    assert_eq!(after.cache_hits - before.cache_hits, 10);
}

/// Subjects that never repeat under a `>` subscription (a consumer's acks) share one memo
/// keyed by the tokens the interest was decided by; a subscription deeper down, a subject
/// with an empty token, or another account are each told apart from it.
#[test]
fn a_prefix_memo_routes_subjects_that_never_repeat() {
    for n in [1, 2, 3] {
        let mut w = World::new(n, CoreConfig::default());
        let far = n - 1;
        let (_, p) = w.connect(0, QUIET);
        let (_, s) = w.connect(far, QUIET);
        w.send(far, s, "SUB ack.S.C.> 1\r\nPING\r\n");
        assert_eq!(w.take(far, s), "PONG\r\n");
        let pubs: String = (0..20).map(|i| format!("PUB ack.S.C.1.{i}.7 1\r\nx\r\n")).collect();
        w.send(0, p, &pubs);
        assert_eq!(msgs(&w.take(far, s), "MSG ack.S.C.1."), 20, "{n} shards");
        let hits = w.shards[0]
            .acct(crate::core::accounts::GLOBAL)
            .sublist
            .stats()
            .cache_hits;
        // The first is looked up, the second (a sibling) switches to the prefix.
        assert!(hits >= 18, "{n} shards: {hits} memo hits");
        if n > 1 {
            let far_hits = w.shards[far]
                .acct(crate::core::accounts::GLOBAL)
                .sublist
                .stats()
                .cache_hits;
            assert!(far_hits >= 19, "{n} shards: {far_hits} memo hits where they arrive");
        }
        // Empty tokens past the prefix: nobody, as for the reference.
        w.send(0, p, "PUB ack.S.C.1..7 1\r\nx\r\nPUB ack.S.C.1.7. 1\r\nx\r\n");
        assert_eq!(w.take(far, s), "", "{n} shards");
        // The prefix itself, and a subject of another consumer, are not covered.
        w.send(0, p, "PUB ack.S.C 1\r\nx\r\nPUB ack.S.D.1.2 1\r\nx\r\n");
        assert_eq!(w.take(far, s), "", "{n} shards");
        // A subscription below the prefix on the publisher's shard, then one on the far
        // shard: each publish after it is routed by a fresh lookup.
        let (_, near) = w.connect(0, QUIET);
        w.send(0, near, "SUB ack.S.C.1.5.* 2\r\nPING\r\n");
        assert_eq!(w.take(0, near), "PONG\r\n");
        w.send(0, p, "PUB ack.S.C.1.5.9 1\r\ny\r\nPUB ack.S.C.1.6.9 1\r\ny\r\n");
        assert_eq!(w.take(0, near), "MSG ack.S.C.1.5.9 2 1\r\ny\r\n", "{n} shards");
        assert_eq!(msgs(&w.take(far, s), "MSG ack.S.C.1."), 2, "{n} shards");
        w.send(far, s, "SUB ack.S.C.1.6.9 3\r\nPING\r\n");
        assert_eq!(w.take(far, s), "PONG\r\n");
        w.send(0, p, "PUB ack.S.C.1.6.9 1\r\nz\r\nPUB ack.S.C.1.6.8 1\r\nz\r\n");
        let got = w.take(far, s);
        assert_eq!(msgs(&got, "MSG ack.S.C.1.6.9 1 1"), 1, "{n} shards: {got}");
        assert_eq!(msgs(&got, "MSG ack.S.C.1.6.9 3 1"), 1, "{n} shards: {got}");
        assert_eq!(msgs(&got, "MSG ack.S.C.1.6.8 1 1"), 1, "{n} shards: {got}");
    }
}

#[test]
fn plain_publishes_to_one_other_shard_go_straight_into_its_run() {
    const HDRS: &str = r#"{"verbose":false,"pedantic":false,"headers":true}"#;
    // Each publish against 3 shards (subscriber on shard 1) and, for what it must give,
    // against one shard.
    let mut w = World::new(3, CoreConfig::default());
    let mut one = World::new(1, CoreConfig::default());
    let (_, p) = w.connect(0, HDRS);
    let (_, a) = w.connect(1, HDRS);
    let (_, p1) = one.connect(0, HDRS);
    let (_, a1) = one.connect(0, HDRS);
    w.send(1, a, "SUB r.* 1\r\nPING\r\n");
    assert_eq!(w.take(1, a), "PONG\r\n");
    one.send(0, a1, "SUB r.* 1\r\nPING\r\n");
    one.take(0, a1);
    let run_to = |w: &World| {
        crate::core::shard::memo::run_to_of(&w.shards[0].client(p).unwrap().route_memo).map(|plan| {
            assert!(!plan.here, "no subscriber on the publisher's shard");
            plan.each_shard().collect::<Vec<_>>()
        })
    };
    let mut check = |w: &mut World, input: &str| {
        w.send(0, p, input);
        one.send(0, p1, input);
        assert_eq!(w.take(1, a), one.take(0, a1), "{input:?}");
    };
    check(&mut w, "PUB r.x 1\r\na\r\n");
    assert_eq!(run_to(&w), Some(vec![1]), "one other shard's plain subscriber: runs");
    check(&mut w, "PUB r.x 1\r\nb\r\nPUB r.x 1\r\nc\r\n");
    check(&mut w, "PUB r.x _INBOX.1 1\r\nd\r\n");
    // What a run cannot carry takes the general way on the same memo.
    check(&mut w, "HPUB r.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
    check(&mut w, "PUB r.x 01\r\ne\r\n");
    let big = "x".repeat(crate::core::shard::blob::BLOB_MIN);
    check(&mut w, &format!("PUB r.x {}\r\n{big}\r\n", big.len()));
    assert_eq!(run_to(&w), Some(vec![1]));
    // A second shard: runs to both. A local subscriber (one), a queue group: no runs
    // straight away.
    let (_, b) = w.connect(2, QUIET);
    w.send(2, b, "SUB r.x 2\r\nPING\r\n");
    w.take(2, b);
    check(&mut w, "PUB r.x 1\r\nf\r\n");
    assert_eq!(w.take(2, b), "MSG r.x 2 1\r\nf\r\n");
    assert_eq!(run_to(&w), Some(vec![1, 2]), "two shards");
    w.send(2, b, "UNSUB 2\r\nPING\r\n");
    w.take(2, b);
    check(&mut w, "PUB r.x 1\r\ng\r\n");
    assert_eq!(run_to(&w), Some(vec![1]), "one shard again");
    let (_, c) = w.connect(0, QUIET);
    w.send(0, c, "SUB r.x 3\r\nPING\r\n");
    w.take(0, c);
    check(&mut w, "PUB r.x 1\r\nh\r\n");
    assert_eq!(w.take(0, c), "MSG r.x 3 1\r\nh\r\n");
    assert_eq!(run_to(&w), None, "a local subscriber");
    w.send(0, c, "UNSUB 3\r\nPING\r\n");
    w.take(0, c);
    let (_, q) = w.connect(1, QUIET);
    w.send(1, q, "SUB r.x g 4\r\nPING\r\n");
    w.take(1, q);
    w.send(0, p, "PUB r.x 1\r\ni\r\n");
    assert_eq!(w.take(1, q), "MSG r.x 4 1\r\ni\r\n");
    assert_eq!(w.take(1, a), "MSG r.x 1 1\r\ni\r\n");
    assert_eq!(run_to(&w), None, "a queue group");
}

/// One plain subscriber on the publisher's shard is the memo's `one`: each publish goes
/// straight to it, with every check of a delivery still made per message (echo off, an
/// auto-unsubscribe, a slow consumer), and a second subscriber ends the shortcut.
#[test]
fn one_subscriber_here_is_delivered_to_straight_and_checked_each_time() {
    let cfg = CoreConfig {
        max_pending: 4096,
        ..CoreConfig::default()
    };
    let mut w = World::new(1, cfg);
    let (_, p) = w.connect(0, QUIET);
    let [(_, s)] = w.subscribers(&[(0, "SUB one 5\r\nUNSUB 5 3\r\n")])[..] else {
        unreachable!()
    };
    w.send(0, p, "PUB one 2\r\nhi\r\nPUB one 02\r\nho\r\n");
    assert_eq!(
        crate::core::shard::memo::run_to_of(&w.shards[0].client(p).unwrap().route_memo),
        None
    );
    assert!(w.shards[0]
        .client(p)
        .unwrap()
        .route_memo
        .as_ref()
        .is_some_and(|m| m.one_of().is_some()));
    // The size text goes out as published; the third is the last the auto-unsubscribe
    // allows.
    w.send(0, p, "PUB one 2\r\nhu\r\nPUB one 2\r\nha\r\n");
    assert_eq!(
        w.take(0, s),
        "MSG one 5 2\r\nhi\r\nMSG one 5 02\r\nho\r\nMSG one 5 2\r\nhu\r\n"
    );
    // A publisher that is its own only subscriber, with echo off, gets nothing back.
    let (_, me) = w.connect(0, r#"{"verbose":false,"pedantic":false,"echo":false}"#);
    w.send(0, me, "SUB self 1\r\nPUB self 1\r\na\r\nPUB self 1\r\nb\r\nPING\r\n");
    assert_eq!(w.take(0, me), "PONG\r\n");
    // A second subscriber here: both get what comes next.
    w.send(0, s, "SUB self 6\r\nPING\r\n");
    w.take(0, s);
    w.send(0, me, "PUB self 1\r\nc\r\nPUB self 1\r\nd\r\n");
    assert_eq!(w.take(0, s), "MSG self 6 1\r\nc\r\nMSG self 6 1\r\nd\r\n");
    // A delivery past max_pending closes the consumer, as on every path.
    let [(_, slow)] = w.subscribers(&[(0, "SUB big 1\r\n")])[..] else {
        unreachable!()
    };
    let payload = "x".repeat(3000);
    w.send(0, p, &format!("PUB big 3000\r\n{payload}\r\n").repeat(2));
    assert!(
        w.shards[0].client(slow).is_none_or(|c| c.closing.is_some()),
        "slow consumer closed"
    );
}

/// In an account with subject mappings the memo is keyed by the mapped subject and a
/// publish is mapped before it is looked up; in one without, the mapping is not looked at
/// (the memo holds only while no definition has changed), and a mapping that arrives later
/// applies from the next publish.
#[test]
fn a_memo_in_an_account_with_mappings_routes_by_the_mapped_subject() {
    use crate::core::transform::mapping::MapDest;
    let mut w = World::new(1, CoreConfig::default());
    let (_, p) = w.connect(0, QUIET);
    let [(_, s)] = w.subscribers(&[(0, "SUB src 1\r\nSUB dst 2\r\n")])[..] else {
        unreachable!()
    };
    w.send(0, p, "PUB src 1\r\na\r\nPUB src 1\r\nb\r\n");
    assert_eq!(w.take(0, s), "MSG src 1 1\r\na\r\nMSG src 1 1\r\nb\r\n");
    // Now `src` maps to `dst` in the global account.
    w.shared.accounts.update(|t| {
        let mut g = t.plain(crate::core::accounts::GLOBAL_NAME);
        g.mappings.add("src", &[MapDest::new("dst", 100)]).unwrap();
        t.add(g);
    });
    w.send(
        0,
        p,
        "PUB src 1\r\nc\r\nPUB src 1\r\nd\r\nPUB dst 1\r\ne\r\nPUB dst 1\r\nf\r\nPUB src 1\r\ng\r\n",
    );
    assert_eq!(
        w.take(0, s),
        "MSG dst 2 1\r\nc\r\nMSG dst 2 1\r\nd\r\nMSG dst 2 1\r\ne\r\nMSG dst 2 1\r\nf\r\nMSG dst 2 1\r\ng\r\n"
    );
}
