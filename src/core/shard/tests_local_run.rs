//! Publishes held in a local run (module `local_run`) and runs given whole (module
//! `run_block`) give each connection exactly what message-by-message delivery gives. The
//! general path is forced by `trace` (protocol tracing takes every message through
//! `deliver_framed`), so each scenario runs both ways and compares every connection's
//! output, the publisher's included.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

const ECHO_OFF: &str = r#"{"verbose":false,"pedantic":false,"echo":false}"#;
const VERBOSE: &str = r#"{"verbose":true,"pedantic":false}"#;

struct Outcome {
    /// What each subscriber connection was sent, and its status after; the publisher's
    /// output last.
    outputs: Vec<(String, ConnStatus)>,
    slow_consumers: u64,
    out_msgs: u64,
    /// Whether the publisher's shard delivered a run the fast way.
    ran_here: bool,
}

/// A publisher on shard 0 (connected with `connect`, its own protocol lines first) sends
/// `input` in one read; `subscribers` are (shard, protocol lines), one connection each.
fn run(
    trace: bool,
    shards: usize,
    max_pending: usize,
    connect: &str,
    own: &str,
    subscribers: &[(usize, &str)],
    input: &str,
) -> Outcome {
    let cfg = CoreConfig {
        trace,
        max_pending,
        ..CoreConfig::default()
    };
    let mut w = World::new(shards, cfg);
    let (mut conns, p) = with_publisher(&mut w, subscribers, connect, own);
    w.shards[0].run_heads.clear();
    w.shards[0].input(p, input.as_bytes(), w.now);
    w.pump();
    conns.push((0, p));
    let outputs = w.outputs(&conns);
    Outcome {
        outputs,
        slow_consumers: w.shards.iter().map(|s| s.counters.slow_consumers).sum(),
        out_msgs: w.shards.iter().map(|s| s.counters.out_msgs).sum(),
        ran_here: !w.shards[0].run_heads.is_empty(),
    }
}

/// Subscriber connections (shard, lines) and a publisher on shard 0 (connected with
/// `connect`, its own lines sent), all settled.
fn with_publisher<L: AsRef<str>>(
    w: &mut World,
    subscribers: &[(usize, L)],
    connect: &str,
    own: &str,
) -> (Vec<(usize, ConnKey)>, ConnKey) {
    let conns = w.subscribers(subscribers);
    let (ps, p) = w.connect(0, connect);
    w.send(ps, p, &format!("{own}PING\r\n"));
    w.take(ps, p);
    (conns, p)
}

/// Both ways, compared; the fast way's outcome.
fn both(
    shards: usize,
    max_pending: usize,
    connect: &str,
    own: &str,
    subscribers: &[(usize, &str)],
    input: &str,
) -> Outcome {
    let general = run(true, shards, max_pending, connect, own, subscribers, input);
    assert!(!general.ran_here, "tracing takes the general path");
    let fast = run(false, shards, max_pending, connect, own, subscribers, input);
    assert_eq!(fast.outputs, general.outputs);
    assert_eq!(fast.slow_consumers, general.slow_consumers);
    assert_eq!(fast.out_msgs, general.out_msgs);
    fast
}

fn pubs(from: usize, n: usize, reply: &str) -> String {
    (from..from + n)
        .map(|i| format!("PUB feed {reply}{}\r\n{i}\r\n", i.to_string().len()))
        .collect()
}

fn count(out: &str, head: &str) -> usize {
    out.matches(head).count()
}

#[test]
fn fan_out_here_and_on_another_shard_keeps_every_order() {
    // Sids of several lengths; one connection with two subscriptions; a PING between
    // publishes, whose PONG must come after the first ones' messages.
    let input = format!("{}PING\r\n{}", pubs(0, 150, ""), pubs(150, 150, ""));
    let subs = [
        (0, "SUB feed 1\r\n"),
        (0, "SUB feed 22\r\n"),
        (0, "SUB feed 3\r\nSUB feed 4\r\n"),
        (0, "SUB feed 555\r\n"),
        (1, "SUB feed 6\r\n"),
        (1, "SUB feed 7\r\n"),
    ];
    let got = both(
        2,
        CoreConfig::default().max_pending,
        QUIET,
        "SUB feed 9\r\n",
        &subs,
        &input,
    );
    assert!(got.ran_here, "the publisher's shard took its publishes as runs");
    for (i, sid) in ["1", "22", "3", "555", "6", "7"].iter().enumerate() {
        assert_eq!(count(&got.outputs[i].0, &format!("MSG feed {sid} ")), 300, "sid {sid}");
    }
    // The publisher (echo on) gets its own, and the PONG between the two halves.
    let own = &got.outputs[6].0;
    let pong = own.find("PONG\r\n").unwrap();
    assert_eq!(count(&own[..pong], "MSG feed 9 "), 150);
    assert_eq!(count(&own[pong..], "MSG feed 9 "), 150);
    // Message by message for the connection with two subscriptions.
    assert!(got.outputs[2]
        .0
        .starts_with("MSG feed 3 1\r\n0\r\nMSG feed 4 1\r\n0\r\nMSG feed 3 1\r\n1\r\n"));
}

#[test]
fn one_shard_fan_out_and_large_payloads() {
    // Payloads larger than a block of frames, and small ones, in one run.
    let big = "b".repeat(20 * 1024);
    let mut input = pubs(0, 40, "");
    input.push_str(&format!("PUB feed {}\r\n{big}\r\n", big.len()).repeat(3));
    input.push_str(&pubs(40, 40, ""));
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\n"), (0, "SUB feed 33\r\n")];
    let got = both(1, CoreConfig::default().max_pending, QUIET, "", &subs, &input);
    assert!(got.ran_here);
    for (i, sid) in ["1", "2", "33"].iter().enumerate() {
        let out = &got.outputs[i].0;
        assert_eq!(count(out, &format!("MSG feed {sid} ")), 83);
        assert_eq!(count(out, &big), 3);
    }
}

#[test]
fn the_publishers_own_subscription_follows_echo() {
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\n")];
    let got = both(
        2,
        CoreConfig::default().max_pending,
        ECHO_OFF,
        "SUB feed 9\r\n",
        &subs,
        &pubs(0, 50, ""),
    );
    assert!(got.ran_here);
    assert_eq!(got.outputs[2].0, "", "no echo");
    assert_eq!(count(&got.outputs[0].0, "MSG feed 1 "), 50);
    assert_eq!(got.out_msgs, 100);
}

#[test]
fn replies_go_in_the_heads_and_requests_only_here_go_the_general_way() {
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\n")];
    let got = both(
        2,
        CoreConfig::default().max_pending,
        QUIET,
        "",
        &subs,
        &pubs(0, 20, "_INBOX.r "),
    );
    assert!(
        !got.ran_here,
        "a request only to subscribers here may have no responder"
    );
    assert!(got.outputs[0].0.starts_with("MSG feed 1 _INBOX.r 1\r\n0\r\n"));
    // With a subscriber on the other shard too, requests go as runs.
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\n"), (1, "SUB feed 3\r\n")];
    let got = both(
        2,
        CoreConfig::default().max_pending,
        QUIET,
        "",
        &subs,
        &pubs(0, 20, "_INBOX.r "),
    );
    assert!(got.ran_here);
    assert_eq!(count(&got.outputs[2].0, "MSG feed 3 _INBOX.r "), 20);
    // A requester whose own subscriptions (echo off) are all the interest: no responders.
    let got = both(
        1,
        CoreConfig::default().max_pending,
        r#"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"echo":false}"#,
        "SUB feed 1\r\nSUB feed 2\r\nSUB _INBOX.r 3\r\n",
        &[],
        &pubs(0, 2, "_INBOX.r "),
    );
    assert_eq!(count(&got.outputs[0].0, "HMSG _INBOX.r 3 "), 2, "{}", got.outputs[0].0);
}

#[test]
fn a_verbose_publisher_gets_each_ok_before_its_message() {
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\n")];
    let got = both(
        1,
        CoreConfig::default().max_pending,
        VERBOSE,
        "SUB feed 9\r\n",
        &subs,
        &pubs(0, 10, ""),
    );
    let own = &got.outputs[2].0;
    assert!(
        own.starts_with("+OK\r\nMSG feed 9 1\r\n0\r\n+OK\r\nMSG feed 9 1\r\n1\r\n"),
        "{own}"
    );
}

#[test]
fn a_limited_subscription_takes_the_general_path() {
    // An auto-unsubscribe limit here: the general way for that interest.
    let subs = [(0, "SUB feed 1\r\n"), (0, "SUB feed 2\r\nUNSUB 2 5\r\n")];
    let got = both(1, CoreConfig::default().max_pending, QUIET, "", &subs, &pubs(0, 30, ""));
    assert_eq!(count(&got.outputs[0].0, "MSG feed 1 "), 30);
    assert_eq!(count(&got.outputs[1].0, "MSG feed 2 "), 5);
    // (A consumer on the publisher's shard holds it back before it passes max_pending:
    // see the next test. Slow consumers of runs: `tests_run_deliver`.)
}

#[test]
fn a_consumer_past_the_mark_holds_the_producer_back_and_nothing_is_lost() {
    let mut w = World::new(
        1,
        CoreConfig {
            max_pending: 4096,
            ..CoreConfig::default()
        },
    );
    let (s, a) = w.connect(0, QUIET);
    w.send(s, a, "SUB s 1\r\n");
    let (_, b) = w.connect(0, QUIET);
    w.send(s, b, "SUB s 2\r\n");
    let (_, p) = w.connect(0, QUIET);
    let frame = 13 + 100 + 2;
    let publish = |n: usize| format!("PUB s 100\r\n{}\r\n", "x".repeat(100)).repeat(n);
    // The second message makes the memo, and the local run, of the subject.
    w.send(s, p, &publish(2));
    w.take(s, a);
    w.take(s, b);
    w.send(s, p, &publish(40));
    assert_eq!(w.shards[s].status(p), ConnStatus::Open { read: false }, "held back");
    assert_eq!(w.shards[s].counters.stalls, 1);
    // Past the mark (3072 bytes) by at most one run (an eighth of max_pending), and
    // short of max_pending.
    let pending = w.shards[s].pending_len(a);
    assert!(pending > 3072 && pending <= 3072 + 512 + frame, "{pending}");
    assert_eq!(w.shards[s].pending_len(b), pending);
    // Input that arrives meanwhile waits behind it; once the consumers drain, the
    // producer goes on, and everything arrives in order.
    w.send(s, p, "PUB s 2\r\nzz\r\n");
    let (mut all_a, mut all_b) = (w.take(s, a), w.take(s, b));
    assert_eq!(
        w.shards[s].status(p),
        ConnStatus::Open { read: true },
        "let go once drained"
    );
    all_a.push_str(&w.take(s, a));
    all_b.push_str(&w.take(s, b));
    assert_eq!(count(&all_a, "MSG s 1 100"), 40);
    assert!(all_a.ends_with("MSG s 1 2\r\nzz\r\n"), "in order");
    assert_eq!(count(&all_b, "MSG s 2 100"), 40);
    assert!(all_b.ends_with("MSG s 2 2\r\nzz\r\n"));
    assert_eq!(w.shards[s].counters.slow_consumers, 0);
}

/// Queue members (shard, sid) and a publisher on shard 0 (`connect`, its own lines): each
/// member's output after `input`, and the publisher's memo plan.
fn queue_run(
    shards: usize,
    connect: &str,
    own: &str,
    members: &[(usize, &str)],
    input: &str,
) -> (Vec<String>, Option<crate::core::shard::memo::RunPlan>) {
    let mut w = World::new(shards, CoreConfig::default());
    let lines: Vec<(usize, String)> = members
        .iter()
        .map(|(s, sid)| (*s, format!("SUB feed q {sid}\r\n")))
        .collect();
    let (mut conns, p) = with_publisher(&mut w, &lines, connect, own);
    w.send(0, p, input);
    conns.push((0, p));
    let plan = crate::core::shard::memo::run_to_of(&w.shards[0].client(p).unwrap().route_memo);
    (conns.iter().map(|&(s, k)| w.take(s, k)).collect(), plan)
}

/// The payloads (numbers) each output got, checking each went to one member, in order.
fn shares(outputs: &[String], n: usize) -> Vec<usize> {
    let mut seen = vec![0; n];
    let mut shares = Vec::new();
    for out in outputs {
        let got: Vec<usize> = out
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with("MSG") && !l.starts_with("PONG"))
            .map(|l| l.parse().unwrap())
            .collect();
        assert!(got.windows(2).all(|p| p[0] < p[1]), "in order: {got:?}");
        for &i in &got {
            seen[i] += 1;
        }
        shares.push(got.len());
    }
    assert!(seen.iter().all(|&c| c == 1), "each message to exactly one member");
    shares
}

#[test]
fn a_queue_group_here_takes_each_publish_once_in_order() {
    let n = 600;
    let (outputs, plan) = queue_run(1, QUIET, "", &[(0, "1"), (0, "2"), (0, "3")], &pubs(0, n, ""));
    assert!(plan.is_some_and(|p| p.queue), "{plan:?}");
    let got = shares(&outputs, n);
    assert!(got[..3].iter().all(|&c| c > 100), "shared out: {got:?}");
    assert_eq!(got[3], 0, "nothing for the publisher");
}

#[test]
fn a_queue_group_on_two_shards_is_shared_by_member_count() {
    let n = 900;
    let (outputs, plan) = queue_run(2, QUIET, "", &[(0, "1"), (1, "2"), (1, "3")], &pubs(0, n, ""));
    assert!(plan.is_some_and(|p| p.queue), "{plan:?}");
    let got = shares(&outputs, n);
    // A third here and two thirds there, give or take.
    assert!(got[0] > 200 && got[0] < 400, "{got:?}");
    assert!(got[1] > 200 && got[2] > 200, "{got:?}");
}

#[test]
fn a_publisher_without_echo_is_not_its_own_queue_member() {
    let n = 200;
    let (outputs, _) = queue_run(1, ECHO_OFF, "SUB feed q 9\r\n", &[(0, "1")], &pubs(0, n, ""));
    let got = shares(&outputs, n);
    assert_eq!(got, vec![n, 0]);
}

#[test]
fn a_plain_subscriber_or_a_second_group_means_no_queue_plan() {
    let (outputs, plan) = queue_run(1, QUIET, "SUB feed 9\r\n", &[(0, "1")], &pubs(0, 50, ""));
    assert_eq!(plan, None);
    assert_eq!(count(&outputs[1], "MSG feed 9 "), 50);
    assert_eq!(count(&outputs[0], "MSG feed 1 "), 50);
}
