//! When a push consumer counts as bound (`push_bound`, and whether it delivers), compared
//! with the reference: only a subscription on exactly the deliver subject counts, a plain
//! one without `deliver_group` or a member of that group with it; a wildcard that matches,
//! a member of another group and another stream's subscription do not; and the binding
//! ends when the subscriber leaves. Subscribers sit on their own connection (another shard
//! with several shards). Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, stream};
use common::{reference_server, rt, scratch_dir, Raw, Reactor, Server};
use std::time::Duration;

async fn bound(js: &jetstream::Context, name: &str) -> bool {
    let st = js.get_stream("P").await.unwrap();
    st.consumer_info(name).await.unwrap().push_bound
}

async fn push(js: &jetstream::Context, name: &str, deliver: &str, group: Option<&str>) {
    let st = js.get_stream("P").await.unwrap();
    st.create_consumer(consumer::push::Config {
        durable_name: Some(name.into()),
        deliver_subject: deliver.into(),
        deliver_group: group.map(str::to_string),
        ack_policy: consumer::AckPolicy::Explicit,
        ..Default::default()
    })
    .await
    .unwrap();
}

/// Send protocol lines, then PING, and read up to the PONG: the subscription change has
/// reached every shard then (PING is a barrier). Returns the payload lines seen before.
fn barrier(raw: &mut Raw, lines: &str) -> Vec<String> {
    raw.send_str(&format!("{lines}PING\r\n"));
    let mut seen = Vec::new();
    loop {
        let l = raw.read_line(Duration::from_secs(5));
        if l == "PONG" {
            return seen;
        }
        seen.push(l);
    }
}

/// The observations of one run: (case, value) in order.
async fn scenario(url: &str, port: u16) -> Vec<(String, String)> {
    let admin = async_nats::connect(url).await.unwrap();
    // The subscribers: raw protocol, for the PING barrier (async-nats's flush is none).
    let mut subs = Raw::connect(port);
    subs.handshake();
    let js = jetstream::new(admin.clone());
    let mut out = Vec::new();
    let mut note = |k: &str, v: String| out.push((k.to_string(), v));
    js.create_stream(stream::Config {
        name: "P".into(),
        subjects: vec!["p.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    js.create_stream(stream::Config {
        name: "A".into(),
        subjects: vec!["deliver.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    js.publish("p.1", "one".into()).await.unwrap().await.unwrap();

    // Exactly the deliver subject: bound while subscribed, unbound after it leaves.
    push(&js, "exact", "dl.a", None).await;
    note("exact before", bound(&js, "exact").await.to_string());
    let mut seen = barrier(&mut subs, "SUB dl.a 1\r\n");
    note("exact subscribed", bound(&js, "exact").await.to_string());
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while !seen.iter().any(|l| l == "one") && std::time::Instant::now() < deadline {
        seen.extend(barrier(&mut subs, ""));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    note("exact delivered", seen.iter().any(|l| l == "one").to_string());
    barrier(&mut subs, "UNSUB 1\r\n");
    note("exact after unsubscribe", bound(&js, "exact").await.to_string());

    // A wildcard that matches the deliver subject does not bind it.
    push(&js, "wild", "dl.b.x", None).await;
    barrier(&mut subs, "SUB dl.b.* 2\r\n");
    note("wildcard", bound(&js, "wild").await.to_string());

    // A queue subscription does not bind a consumer without a deliver group.
    push(&js, "nogroup", "dl.c", None).await;
    barrier(&mut subs, "SUB dl.c G 3\r\n");
    note(
        "queue member, no deliver_group",
        bound(&js, "nogroup").await.to_string(),
    );

    // With a deliver group: a plain subscriber or another group's member does not bind.
    push(&js, "grp", "dl.d", Some("G")).await;
    barrier(&mut subs, "SUB dl.d 4\r\n");
    note("group, plain subscriber", bound(&js, "grp").await.to_string());
    barrier(&mut subs, "SUB dl.d H 5\r\n");
    note("group, other group's member", bound(&js, "grp").await.to_string());
    barrier(&mut subs, "SUB dl.d G 6\r\n");
    note("group, member", bound(&js, "grp").await.to_string());

    // Another stream listening on the deliver subject's space does not bind it, and so
    // gets nothing delivered.
    push(&js, "internal", "deliver.here", None).await;
    note("stream on deliver.>", bound(&js, "internal").await.to_string());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut a = js.get_stream("A").await.unwrap();
    note("stream A messages", a.info().await.unwrap().state.messages.to_string());
    out
}

fn run_on(server: &Server) -> Vec<(String, String)> {
    rt().block_on(scenario(&server.url(), server.port))
}

fn compare(r: Reactor, shards: &str) {
    let dir = scratch_dir();
    let rdir = dir.join("ref");
    let ndir = dir.join("rnats");
    let reference = Server::start_cmd(
        &reference_server(),
        &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", rdir.to_str().unwrap()],
    );
    let want = run_on(&reference);
    drop(reference);
    let ours = Server::start(r, &["-js", "-sd", ndir.to_str().unwrap(), "--shards", shards]);
    let got = run_on(&ours);
    drop(ours);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(want.len(), 11, "{want:?}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(
            w, g,
            "rnats differs from the reference\nreference: {want:?}\nrnats: {got:?}"
        );
    }
    assert_eq!(want, got);
}

mod one_shard {
    use super::*;
    both_reactors!(push_interest, |r| super::compare(r, "1"));
}

mod three_shards {
    use super::*;
    both_reactors!(push_interest, |r| super::compare(r, "3"));
}
