//! Internal clients: services answering clients, requests answered by clients, local
//! and replicated subscriptions (ARCHITECTURE.md, invariant 14).

use super::*;
use crate::core::accounts::GLOBAL;
use crate::core::shard::internal::{Handler, InternalMsg, ReplyHandler};
use std::cell::RefCell;
use std::rc::Rc;

fn echo_service() -> Handler {
    Box::new(|core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
        let m = m.take();
        let mut body = b"echo:".to_vec();
        body.extend_from_slice(&m.payload);
        core.publish_internal(m.account, &m.reply, b"", None, &body, now);
    })
}

#[test]
fn a_service_on_one_shard_answers_clients_on_every_shard() {
    let mut w = World::new(3, CoreConfig::default());
    let now = w.now;
    assert!(w.shards[0]
        .subscribe_internal(GLOBAL, "svc.echo", None, false, echo_service(), now)
        .is_some());
    w.pump();
    for s in 0..3 {
        let (_, c) = w.connect(s, QUIET);
        w.send(s, c, "SUB inbox 1\r\nPUB svc.echo inbox 2\r\nhi\r\n");
        w.pump();
        w.shards[0].tick(w.now);
        w.pump();
        // A server-published message without a reply has two spaces before its size, as
        // nats-server writes it.
        assert_eq!(w.take(s, c), "MSG inbox 1  7\r\necho:hi\r\n", "client on shard {s}");
    }
    assert_eq!(w.shards[0].connections(), 1, "the internal client is not a connection");
}

#[test]
fn local_internal_subscriptions_see_only_local_publishes() {
    let mut w = World::new(2, CoreConfig::default());
    let now = w.now;
    let seen: Rc<RefCell<Vec<Option<ConnKey>>>> = Rc::default();
    for s in 0..2 {
        let seen = seen.clone();
        let h: Handler = Box::new(move |_core: &mut ShardCore, m: &mut InternalMsg, _now: Instant| {
            let m = m.take();
            seen.borrow_mut().push(m.sender);
        });
        w.shards[s].subscribe_internal(GLOBAL, "who", None, true, h, now);
    }
    w.pump();
    let (_, c) = w.connect(1, QUIET);
    w.send(1, c, "PUB who 0\r\n\r\n");
    w.pump();
    assert_eq!(*seen.borrow(), vec![Some(c)], "exactly one, with the sender");
}

#[test]
fn internal_requests_get_the_first_reply_or_none() {
    let mut w = World::new(2, CoreConfig::default());
    let (_, c) = w.connect(1, QUIET);
    w.send(1, c, "SUB ask 1\r\nPING\r\n");
    w.take(1, c);
    let got: Rc<RefCell<Vec<Option<Vec<u8>>>>> = Rc::default();
    let g = got.clone();
    let on_reply: ReplyHandler = Box::new(move |_c: &mut ShardCore, m: Option<InternalMsg>, _n: Instant| {
        g.borrow_mut().push(m.map(|m| m.payload));
    });
    let now = w.now;
    assert!(w.shards[0].request_internal(GLOBAL, b"ask", None, b"q", Duration::from_secs(1), on_reply, now));
    w.pump();
    let req = w.take(1, c);
    let inbox = req.split(' ').nth(3).unwrap().to_string();
    assert!(inbox.starts_with("$SYS._INBOX."), "{req}");
    w.send(1, c, &format!("PUB {inbox} 1\r\na\r\nPUB {inbox} 1\r\nb\r\n"));
    w.pump();
    w.shards[0].tick(w.now);
    assert_eq!(*got.borrow(), vec![Some(b"a".to_vec())]);
    // A request nobody serves is answered with None at once; one that is ignored, at
    // its deadline.
    let g = got.clone();
    let none: ReplyHandler = Box::new(move |_c: &mut ShardCore, m: Option<InternalMsg>, _n: Instant| {
        g.borrow_mut().push(m.map(|m| m.payload));
    });
    assert!(!w.shards[0].request_internal(GLOBAL, b"nobody", None, b"", Duration::from_secs(1), none, now));
    let g = got.clone();
    let late: ReplyHandler = Box::new(move |_c: &mut ShardCore, m: Option<InternalMsg>, _n: Instant| {
        g.borrow_mut().push(m.map(|m| m.payload));
    });
    assert!(w.shards[0].request_internal(GLOBAL, b"ask", None, b"", Duration::from_secs(1), late, now));
    w.pump();
    assert_eq!(got.borrow().len(), 2);
    w.advance(Duration::from_secs(2));
    assert_eq!(*got.borrow(), vec![Some(b"a".to_vec()), None, None]);
}

/// An extension that publishes on `ping` at the end of every step (as JetStream delivers
/// from its step-end hook) and counts what its internal handler saw.
struct Pinger {
    sent: bool,
}

impl super::ext::ShardExt for Pinger {
    fn after_step(&mut self, core: &mut ShardCore, now: Instant) {
        if !self.sent {
            self.sent = true;
            core.publish_internal(GLOBAL, b"ping", b"", None, b"x", now);
        }
    }
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    fn tick(&mut self, _core: &mut ShardCore, _now: Instant) {}
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[test]
fn internal_handlers_see_the_extension_even_when_queued_during_its_step() {
    let mut w = World::new(1, CoreConfig::default());
    let now = w.now;
    // (ext available, messages) as seen by the handler.
    let seen: Rc<RefCell<Vec<bool>>> = Rc::default();
    let s2 = seen.clone();
    let h: Handler = Box::new(move |core: &mut ShardCore, _m: &mut InternalMsg, _now: Instant| {
        s2.borrow_mut().push(core.with_ext(|_, _| ()).is_some());
    });
    w.shards[0].subscribe_internal(GLOBAL, "ping", None, false, h, now);
    w.shards[0].set_ext(Some(Box::new(Pinger { sent: false })));
    let (_, c) = w.connect(0, QUIET);
    // A client's publish to the same subject is queued for the handler; the step's end
    // runs the extension, whose publish would run the queue from inside it.
    w.send(0, c, "PUB ping 1\r\ny\r\n");
    w.pump();
    w.shards[0].tick(w.now);
    w.pump();
    assert_eq!(
        *seen.borrow(),
        vec![true, true],
        "every handler ran with the extension free"
    );
}

#[test]
fn skipped_internal_messages_are_taken_without_a_copy_or_a_handler() {
    // One member of a `_sys_` queue group on each shard, as the JetStream API has.
    let mut w = World::new(2, CoreConfig::default());
    let now = w.now;
    let handled: Rc<RefCell<Vec<(usize, String)>>> = Rc::default();
    for s in 0..2 {
        let seen = handled.clone();
        let h: Handler = Box::new(move |_core: &mut ShardCore, m: &mut InternalMsg, _now: Instant| {
            seen.borrow_mut()
                .push((s, String::from_utf8_lossy(&m.subject).into_owned()));
        });
        let id = w.shards[s]
            .subscribe_internal(GLOBAL, "svc.>", Some("_sys_svc"), false, h, now)
            .unwrap();
        w.shards[s].skip_internal(id, Box::new(|_acc, subject: &[u8]| subject.starts_with(b"svc.skip.")));
    }
    w.pump();
    let (s1, cli) = w.connect(
        1,
        r#"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true}"#,
    );
    w.send(s1, cli, "SUB _INBOX.x 9\r\nPING\r\n");
    assert_eq!(w.take(s1, cli), "PONG\r\n");
    w.send(
        s1,
        cli,
        "PUB svc.skip.a _INBOX.x 2\r\nhi\r\nPUB svc.keep _INBOX.x 2\r\nhi\r\n",
    );
    w.pump();
    w.shards[0].tick(w.now);
    w.shards[1].tick(w.now);
    w.pump();
    // The skipped one reached no handler here and was not sent on to the other shard's
    // member; it counted as taken, so the requester got no "no responders" status.
    assert_eq!(*handled.borrow(), vec![(1, "svc.keep".to_string())]);
    assert_eq!(w.take(s1, cli), "");
}
