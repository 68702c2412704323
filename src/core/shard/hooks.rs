//! What the server observes of a shard's connections, and what it may do to one of them
//! by id: the system account's connect, disconnect and authentication-failure events
//! come from an observer ([`ConnEvents`]) the server installs on every shard, and the
//! `$SYS.REQ.SERVER.<id>.KICK` / `.LDM` services act on a client through
//! [`ShardCore::kick`] and [`ShardCore::lame_duck_client`].
//!
//! Ownership: the observer belongs to its shard and runs on the shard's thread, inside
//! the step that caused the event (possibly while a message is being routed), so it must
//! only read the connection and queue what it publishes (`ShardCore::publish_later`) or
//! post jobs. A shard without an observer pays one branch per event.

use super::ShardCore;
use crate::core::client::{ClosedState, ConnKey};
use std::any::Any;
use std::time::Instant;

/// An observer of a shard's client connections.
pub trait ConnEvents: Any {
    /// A CONNECT was accepted: the client is bound to its account.
    fn connected(&mut self, core: &mut ShardCore, key: ConnKey, now: Instant);
    /// A client closed for `reason` (once per connection, after its subscriptions and its
    /// account binding were released; its other state is still there).
    fn closed(&mut self, core: &mut ShardCore, key: ConnKey, reason: ClosedState, now: Instant);
    /// Authentication refused a client, which closes for `reason` next.
    fn auth_failed(&mut self, core: &mut ShardCore, key: ConnKey, reason: ClosedState, now: Instant);
    /// The observer as `Any` (jobs reach their shard's observer through
    /// [`ShardCore::with_conn_events`]).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Why [`ShardCore::lame_duck_client`] did not notify a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LdmRefused {
    /// No open client with that id on this shard.
    NoSuchClient,
    /// The client does not take asynchronous INFO (protocol 0) or is not ready yet.
    NotReady,
}

impl ShardCore {
    /// Install (or remove) this shard's connection observer.
    pub fn set_conn_events(&mut self, events: Option<Box<dyn ConnEvents>>) {
        self.events = events;
    }

    /// Run `f` with this shard's observer, if one is installed.
    pub fn with_conn_events<R>(&mut self, f: impl FnOnce(&mut dyn ConnEvents, &mut ShardCore) -> R) -> Option<R> {
        let mut ev = self.events.take()?;
        let r = f(ev.as_mut(), self);
        if self.events.is_none() {
            self.events = Some(ev);
        }
        Some(r)
    }

    pub(super) fn notify_connected(&mut self, key: ConnKey, now: Instant) {
        if self.events.is_some() {
            self.with_conn_events(|ev, core| ev.connected(core, key, now));
        }
    }

    pub(super) fn notify_closed(&mut self, key: ConnKey, reason: ClosedState, now: Instant) {
        if self.events.is_some() {
            self.with_conn_events(|ev, core| ev.closed(core, key, reason, now));
        }
    }

    pub(super) fn notify_auth_failed(&mut self, key: ConnKey, reason: ClosedState, now: Instant) {
        if self.events.is_some() {
            self.with_conn_events(|ev, core| ev.auth_failed(core, key, reason, now));
        }
    }

    /// The open (not internal, not closing) client with id `cid` on this shard.
    fn open_client(&self, cid: u64) -> Option<ConnKey> {
        self.clients
            .iter()
            .find(|(_, c)| c.cid == cid && !c.internal && c.closing.is_none())
            .map(|(i, c)| ConnKey {
                idx: i as u32,
                gen: c.gen,
            })
    }

    /// Close the client with id `cid` as `Kicked`, if it is on this shard.
    pub fn kick(&mut self, cid: u64, now: Instant) -> bool {
        let Some(key) = self.open_client(cid) else {
            return false;
        };
        self.close(key, ClosedState::Kicked);
        self.finish(now);
        true
    }

    /// Send the client with id `cid` an INFO with `ldm: true` (as lame duck mode does for
    /// every client), if it is on this shard and takes asynchronous INFO.
    pub fn lame_duck_client(&mut self, cid: u64, now: Instant) -> Result<(), LdmRefused> {
        let key = self.open_client(cid).ok_or(LdmRefused::NoSuchClient)?;
        let mut info = self.cfg.info.clone();
        info.auth_required = self.cfg.authenticator.advertised();
        info.ldm = true;
        let c = self.client_mut(key).ok_or(LdmRefused::NoSuchClient)?;
        if c.opts.protocol < 1 || !c.first_pong_sent {
            return Err(LdmRefused::NotReady);
        }
        info.client_id = c.cid;
        info.client_ip = c.peer.ip().to_string();
        info.write_line(&mut c.out.writer(now));
        self.queued(key);
        self.finish(now);
        Ok(())
    }
}
