//! Runs from another shard delivered the fast way (module `run_deliver`) give exactly what
//! the general path gives. The general path is forced by `trace` (protocol tracing takes
//! every message through `deliver_framed`), so each scenario runs both ways and compares.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

struct Outcome {
    /// What each subscriber connection was sent, and its status after.
    outputs: Vec<(String, ConnStatus)>,
    slow_consumers: u64,
    out_msgs: u64,
    /// The heads the fast path put together for the last run (empty if it did not run).
    heads: Vec<u8>,
}

/// Subscribers on shard 1 (one connection per entry, each with its protocol lines), a
/// publisher on shard 0 that sends `input` in one read (so it travels as runs).
fn run(trace: bool, max_pending: usize, subscribers: &[&str], input: &str) -> Outcome {
    let cfg = CoreConfig {
        trace,
        max_pending,
        ..CoreConfig::default()
    };
    let mut w = World::new(2, cfg);
    let lines: Vec<(usize, &str)> = subscribers.iter().map(|&l| (1, l)).collect();
    let conns = w.subscribers(&lines);
    let (ps, p) = w.connect(0, QUIET);
    w.shards[ps].input(p, input.as_bytes(), w.now);
    w.pump();
    let outputs = w.outputs(&conns);
    Outcome {
        outputs,
        slow_consumers: w.shards[1].counters.slow_consumers,
        out_msgs: w.shards[1].counters.out_msgs,
        heads: w.shards[1].run_heads.clone(),
    }
}

fn both(max_pending: usize, subscribers: &[&str], input: &str) -> Outcome {
    let general = run(true, max_pending, subscribers, input);
    assert!(general.heads.is_empty(), "tracing takes the general path");
    let fast = run(false, max_pending, subscribers, input);
    assert_eq!(fast.outputs, general.outputs);
    assert_eq!(fast.slow_consumers, general.slow_consumers);
    assert_eq!(fast.out_msgs, general.out_msgs);
    fast
}

/// `n` publishes of `body` to `feed`.
fn same_body(n: usize, body: &str) -> String {
    format!("PUB feed {}\r\n{body}\r\n", body.len()).repeat(n)
}

fn pubs(n: usize, reply: &str) -> String {
    (0..n)
        .map(|i| format!("PUB feed {reply}{}\r\n{i}\r\n", i.to_string().len()))
        .collect()
}

#[test]
fn plain_subscribers_get_every_payload_in_order() {
    let n = 120;
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed 7\r\n", "SUB feed 8\r\nSUB feed.> 9\r\nSUB feed 10\r\n"],
        &pubs(n, ""),
    );
    assert_eq!(got.heads, b"MSG feed 7 MSG feed 8 MSG feed 10 ", "the fast path ran");
    let one: String = (0..n)
        .map(|i| format!("MSG feed 7 {}\r\n{i}\r\n", i.to_string().len()))
        .collect();
    assert_eq!(got.outputs[0], (one, ConnStatus::Open { read: true }));
    // Two subscriptions of one connection: message by message, as the general path.
    let two: String = (0..n)
        .map(|i| {
            let l = i.to_string().len();
            format!("MSG feed 8 {l}\r\n{i}\r\nMSG feed 10 {l}\r\n{i}\r\n")
        })
        .collect();
    assert_eq!(got.outputs[1].0, two);
    assert_eq!(got.out_msgs, 3 * n as u64);
}

#[test]
fn replies_are_in_the_head() {
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed 3\r\n"],
        &pubs(20, "_INBOX.r "),
    );
    assert_eq!(got.heads, b"MSG feed 3 _INBOX.r ");
    assert!(got.outputs[0]
        .0
        .starts_with("MSG feed 3 _INBOX.r 1\r\n0\r\nMSG feed 3 _INBOX.r 1\r\n1\r\n"));
    assert_eq!(got.outputs[0].0.matches("MSG ").count(), 20);
}

#[test]
fn a_subscription_with_a_limit_takes_the_general_path() {
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed 1\r\n", "SUB feed 2\r\nUNSUB 2 3\r\n"],
        &pubs(50, ""),
    );
    // (A run after the limit was reached may go the fast way to the first subscriber.)
    assert!(
        !String::from_utf8_lossy(&got.heads).contains("feed 2"),
        "no fast path to a limited subscription"
    );
    assert_eq!(got.outputs[0].0.matches("MSG feed 1 ").count(), 50);
    assert_eq!(got.outputs[1].0.matches("MSG feed 2 ").count(), 3);
}

#[test]
fn a_slow_consumer_is_closed_mid_run_and_the_others_get_everything() {
    // Two frames a message for the first connection: it passes max_pending first.
    let got = both(1024, &["SUB feed 1\r\nSUB feed 2\r\n", "SUB feed 3\r\n"], &pubs(40, ""));
    assert_eq!(got.slow_consumers, 1);
    assert_eq!(
        got.outputs[0],
        (String::new(), ConnStatus::Close),
        "closed, output dropped"
    );
    assert_eq!(got.outputs[1].0.matches("MSG feed 3 ").count(), 40);
    assert_eq!(got.outputs[1].1, ConnStatus::Open { read: true });
}

#[test]
fn large_payloads_to_two_subscribers() {
    let body = "y".repeat(super::fan::FAN_MAX_DATA + 1);
    let input = same_body(6, &body);
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed 1\r\nSUB feed 22\r\n"],
        &input,
    );
    assert_eq!(got.heads, b"MSG feed 1 MSG feed 22 ");
    let want: String = (0..6)
        .map(|_| format!("MSG feed 1 {0}\r\n{body}\r\nMSG feed 22 {0}\r\n{body}\r\n", body.len()))
        .collect();
    assert_eq!(got.outputs[0].0, want);
}

#[test]
fn queue_members_share_a_run_as_on_the_general_path() {
    // The publisher's shard has no member: every message travels in runs for group `q`.
    let n = 200;
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed q 1\r\n", "SUB feed q 2\r\n", "SUB feed 3\r\n"],
        &pubs(n, ""),
    );
    assert_eq!(got.heads, b"MSG feed 3 MSG feed 1 MSG feed 2 ", "the fast path ran");
    let a = got.outputs[0].0.matches("MSG feed 1 ").count();
    let b = got.outputs[1].0.matches("MSG feed 2 ").count();
    assert_eq!(a + b, n, "each message to one member");
    assert!(a > 0 && b > 0, "both members get a share: {a} {b}");
    assert_eq!(got.outputs[2].0.matches("MSG feed 3 ").count(), n);
}

#[test]
fn slow_queue_members_are_closed_and_the_others_take_over() {
    let input = same_body(30, &"z".repeat(100));
    let got = both(1024, &["SUB feed q 1\r\n", "SUB feed q 2\r\n"], &input);
    assert_eq!(got.slow_consumers, 2, "each member in turn, as neither reads");
    assert!(got.outputs.iter().all(|(_, st)| *st == ConnStatus::Close));
}

#[test]
fn whole_runs_in_blocks_to_sids_of_every_length() {
    // Distinct connections, sids of three lengths, more frames than one block holds.
    let n = 900;
    let got = both(
        CoreConfig::default().max_pending,
        &["SUB feed 1\r\n", "SUB feed 2\r\n", "SUB feed 333\r\n"],
        &pubs(n, ""),
    );
    for (i, sid) in ["1", "2", "333"].iter().enumerate() {
        let want: String = (0..n)
            .map(|k| format!("MSG feed {sid} {}\r\n{k}\r\n", k.to_string().len()))
            .collect();
        assert_eq!(got.outputs[i].0, want, "sid {sid}");
    }
}

#[test]
fn a_run_that_does_not_fit_goes_payload_by_payload_to_its_slow_consumers() {
    // Distinct connections, but the run is more than max_pending: each is closed where
    // the general path closes it.
    let input = same_body(40, &"w".repeat(100));
    let got = both(4096, &["SUB feed 1\r\n", "SUB feed 2\r\n"], &input);
    assert_eq!(got.slow_consumers, 2);
    assert!(got.outputs.iter().all(|(_, st)| *st == ConnStatus::Close));
}
