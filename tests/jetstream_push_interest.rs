//! When a push consumer counts as bound (`push_bound`, and whether it delivers), compared
//! with the reference: only a subscription on exactly the deliver subject counts, a plain
//! one without `deliver_group` or a member of that group with it; a wildcard that matches,
//! a member of another group and another stream's subscription do not; and the binding
//! ends when the subscriber leaves. Subscribers sit on their own connection (another shard
//! with several shards). Both reactors, one and three shards.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use async_nats::jetstream::{self, consumer, stream};
use common::{reference_server, rt, scratch_dir, Reactor, Server};
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

/// The observations of one run: (case, value) in order.
async fn scenario(url: &str) -> Vec<(String, String)> {
    let admin = async_nats::connect(url).await.unwrap();
    let subs = async_nats::connect(url).await.unwrap();
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
    let mut s = subs.subscribe("dl.a").await.unwrap();
    subs.flush().await.unwrap();
    note("exact subscribed", bound(&js, "exact").await.to_string());
    let got = tokio::time::timeout(Duration::from_secs(3), futures::StreamExt::next(&mut s)).await;
    note(
        "exact delivered",
        got.ok()
            .flatten()
            .map(|m| String::from_utf8_lossy(&m.payload).to_string())
            .unwrap_or_default(),
    );
    s.unsubscribe().await.unwrap();
    subs.flush().await.unwrap();
    note("exact after unsubscribe", bound(&js, "exact").await.to_string());

    // A wildcard that matches the deliver subject does not bind it.
    push(&js, "wild", "dl.b.x", None).await;
    let w = subs.subscribe("dl.b.*").await.unwrap();
    subs.flush().await.unwrap();
    note("wildcard", bound(&js, "wild").await.to_string());

    // A queue subscription does not bind a consumer without a deliver group.
    push(&js, "nogroup", "dl.c", None).await;
    let q = subs.queue_subscribe("dl.c", "G".into()).await.unwrap();
    subs.flush().await.unwrap();
    note(
        "queue member, no deliver_group",
        bound(&js, "nogroup").await.to_string(),
    );

    // With a deliver group: a plain subscriber or another group's member does not bind.
    push(&js, "grp", "dl.d", Some("G")).await;
    let plain = subs.subscribe("dl.d").await.unwrap();
    subs.flush().await.unwrap();
    note("group, plain subscriber", bound(&js, "grp").await.to_string());
    let other = subs.queue_subscribe("dl.d", "H".into()).await.unwrap();
    subs.flush().await.unwrap();
    note("group, other group's member", bound(&js, "grp").await.to_string());
    let member = subs.queue_subscribe("dl.d", "G".into()).await.unwrap();
    subs.flush().await.unwrap();
    note("group, member", bound(&js, "grp").await.to_string());

    // Another stream listening on the deliver subject's space does not bind it, and so
    // gets nothing delivered.
    push(&js, "internal", "deliver.here", None).await;
    note("stream on deliver.>", bound(&js, "internal").await.to_string());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut a = js.get_stream("A").await.unwrap();
    note("stream A messages", a.info().await.unwrap().state.messages.to_string());
    drop((w, q, plain, other, member));
    out
}

fn run_on(server: &Server) -> Vec<(String, String)> {
    rt().block_on(scenario(&server.url()))
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
