//! Client events (nats-server's `accountConnectEvent`, `accountDisconnectEvent`,
//! `sendAuthErrorEvent`, `sendAccountAuthErrorEvent`): `$SYS.ACCOUNT.<acc>.CONNECT` and
//! `.DISCONNECT` (`io.nats.server.advisory.v1.client_connect` / `client_disconnect`),
//! `$SYS.SERVER.<id>.CLIENT.AUTH.ERR` in the system account and
//! `$SYS.ACCOUNT.CLIENT.AUTH.ERR` in the account the failing connection was in.
//!
//! [`EventHooks`] is each shard's observer of its connections. An event is built only
//! when a publish on its subject would reach someone (the shard's sublists answer that
//! from their caches), and goes out at the end of the step. When the account's connection
//! count is watched too, the event waits for the count (`conns`), as nats-server sends the
//! count first.

use super::conns;
use super::nuid::Nuid;
use super::System;
use crate::core::accounts::{AccountId, GLOBAL};
use crate::core::auth::ConnType;
use crate::core::client::{Client, ClosedState, ConnKey};
use crate::core::shard::{ConnEvents, ShardCore};
use crate::proto::gotime::rfc3339_nano;
use serde::Serialize;
use std::any::Any;
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub const CONNECT_TYPE: &str = "io.nats.server.advisory.v1.client_connect";
pub const DISCONNECT_TYPE: &str = "io.nats.server.advisory.v1.client_disconnect";

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i(n: &i64) -> bool {
    *n == 0
}

/// nats-server's `ClientInfo` as its client events fill it.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub id: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub acc: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lang: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ver: String,
    /// Nanoseconds.
    #[serde(skip_serializing_if = "is_zero_i")]
    pub rtt: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_type: String,
}

/// nats-server's "raw auth user": the nkey, user name, JWT user key, or `[REDACTED]`.
pub fn raw_user(c: &Client) -> String {
    let o = &c.opts;
    if !o.nkey.is_empty() {
        o.nkey.clone()
    } else if !o.user.is_empty() {
        o.user.clone()
    } else if !o.jwt.is_empty() {
        c.identity.as_ref().map(|i| i.user.clone()).unwrap_or_default()
    } else if !o.auth_token.is_empty() {
        "[REDACTED]".to_string()
    } else {
        String::new()
    }
}

/// nats-server's `getRTT`: microseconds when under a millisecond.
fn rtt_nanos(rtt: Option<Duration>) -> i64 {
    let Some(d) = rtt else { return 0 };
    let d = if d > Duration::from_micros(1) && d < Duration::from_millis(1) {
        Duration::from_micros(d.as_micros() as u64)
    } else {
        d
    };
    crate::proto::gotime::duration_nanos(d)
}

/// What the events say about a client; `acc` is the account named in it, `name_tag` that
/// account's name tag (its JWT `name`, or its name).
pub fn client_info(c: &Client, acc: &str, name_tag: &str, with_rtt: bool) -> ClientInfo {
    let issuer_key = match c.identity.as_deref() {
        Some(id) if !id.issuer_key.is_empty() => id.issuer_key.clone(),
        Some(_) if !c.opts.nkey.is_empty() || !c.opts.jwt.is_empty() => acc.to_string(),
        _ => String::new(),
    };
    let websocket = c
        .transport
        .as_ref()
        .is_some_and(|t| matches!(t.conn_type, ConnType::Websocket));
    ClientInfo {
        start: Some(rfc3339_nano(c.started)),
        host: c.peer.ip().to_string(),
        id: c.cid,
        acc: acc.to_string(),
        user: raw_user(c),
        name: c.opts.name.clone(),
        lang: c.opts.lang.clone(),
        ver: c.opts.version.clone(),
        rtt: if with_rtt { rtt_nanos(c.rtt) } else { 0 },
        stop: None,
        jwt: c.opts.jwt.clone(),
        issuer_key,
        name_tag: name_tag.to_string(),
        tags: c.identity.as_ref().map(|i| i.tags.clone()).unwrap_or_default(),
        kind: "Client".into(),
        client_type: if websocket { "websocket" } else { "nats" }.into(),
    }
}

/// `{msgs, bytes}` (nats-server's `DataStats` without routes, gateways and leafs).
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub msgs: u64,
    pub bytes: u64,
}

/// An event waiting to be published (built on the client's shard, sent from wherever
/// its turn comes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The account it is published in.
    pub account: AccountId,
    pub subject: String,
    pub id: String,
    pub timestamp: SystemTime,
    pub client: ClientInfo,
    /// Disconnect-shaped events: what the client sent and received, and why it went.
    pub end: Option<(Counts, Counts, &'static str)>,
}

impl Event {
    /// The JSON, with the server's description (and its next sequence number).
    pub fn encode(&self, sys: &System) -> Vec<u8> {
        #[derive(Serialize)]
        struct Connect<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            id: &'a str,
            timestamp: String,
            server: super::envelope::ServerInfo<'a>,
            client: &'a ClientInfo,
        }
        #[derive(Serialize)]
        struct Disconnect<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            id: &'a str,
            timestamp: String,
            server: super::envelope::ServerInfo<'a>,
            client: &'a ClientInfo,
            sent: Counts,
            received: Counts,
            reason: &'static str,
        }
        let timestamp = rfc3339_nano(self.timestamp);
        match self.end {
            None => crate::proto::gojson::to_vec(&Connect {
                kind: CONNECT_TYPE,
                id: &self.id,
                timestamp,
                server: sys.server().info(),
                client: &self.client,
            }),
            Some((sent, received, reason)) => crate::proto::gojson::to_vec(&Disconnect {
                kind: DISCONNECT_TYPE,
                id: &self.id,
                timestamp,
                server: sys.server().info(),
                client: &self.client,
                sent,
                received,
                reason,
            }),
        }
    }

    /// Queue it for publishing at the end of this step.
    pub fn publish_later(&self, core: &mut ShardCore, sys: &System) {
        if sys.stopped() {
            return;
        }
        let body = self.encode(sys);
        core.publish_later(self.account, &self.subject, body);
    }
}

/// A shard's observer of its connections (see the module documentation).
pub struct EventHooks {
    sys: Arc<System>,
    nuid: Nuid,
    /// Subject scratch space (no allocation to ask whether anyone listens).
    subject: String,
}

impl EventHooks {
    pub fn new(sys: Arc<System>) -> EventHooks {
        EventHooks {
            sys,
            nuid: Nuid::new(),
            subject: String::with_capacity(64),
        }
    }

    /// Does anyone listen to `$SYS.ACCOUNT.<acc>.<what>` in the system account?
    fn listened(&mut self, core: &mut ShardCore, sys: AccountId, acc: &str, what: &str) -> bool {
        self.subject.clear();
        let _ = write!(self.subject, "$SYS.ACCOUNT.{acc}.{what}");
        core.has_interest(sys, self.subject.as_bytes())
    }

    /// The connect or disconnect event of `key`, and the account count update if watched.
    fn account_event(&mut self, core: &mut ShardCore, key: ConnKey, end: Option<ClosedState>) {
        if self.sys.stopped() {
            return;
        }
        let Some(sys) = core.account_table().system() else {
            return;
        };
        let Some(c) = core.client_ref(key) else { return };
        let acc = c.account;
        let table = core.account_table().clone();
        let (name, tag) = (table.name(acc), table.name_tag(acc));
        let what = if end.is_some() { "DISCONNECT" } else { "CONNECT" };
        let wanted = self.listened(core, sys, name, what);
        let counted = acc != GLOBAL && conns::watched(core, sys, name, &mut self.subject);
        if !wanted && !counted {
            return;
        }
        let event = if wanted {
            let Some(c) = core.client_ref(key) else { return };
            let now = SystemTime::now();
            let mut client = client_info(c, name, tag, end.is_some());
            let end = end.map(|reason| {
                client.stop = Some(rfc3339_nano(now));
                (
                    Counts {
                        msgs: c.in_msgs,
                        bytes: c.in_bytes,
                    },
                    Counts {
                        msgs: c.out_msgs,
                        bytes: c.out_bytes,
                    },
                    reason.as_str(),
                )
            });
            Some(Event {
                account: sys,
                subject: format!("$SYS.ACCOUNT.{name}.{what}"),
                id: self.nuid.next_id(),
                timestamp: now,
                client,
                end,
            })
        } else {
            None
        };
        if counted {
            conns::changed(core, &self.sys, acc, event);
        } else if let Some(e) = event {
            e.publish_later(core, &self.sys);
        }
    }
}

impl ConnEvents for EventHooks {
    fn connected(&mut self, core: &mut ShardCore, key: ConnKey, _now: Instant) {
        self.account_event(core, key, None);
    }

    fn closed(&mut self, core: &mut ShardCore, key: ConnKey, reason: ClosedState, _now: Instant) {
        self.account_event(core, key, Some(reason));
    }

    fn auth_failed(&mut self, core: &mut ShardCore, key: ConnKey, reason: ClosedState, _now: Instant) {
        if self.sys.stopped() {
            return;
        }
        let Some(sys) = core.account_table().system() else {
            return;
        };
        let Some(c) = core.client_ref(key) else { return };
        let acc = c.account;
        let server_subject = format!("$SYS.SERVER.{}.CLIENT.AUTH.ERR", self.sys.server().id);
        let account_subject = "$SYS.ACCOUNT.CLIENT.AUTH.ERR";
        // The account-scoped one first, as nats-server sends it.
        for (target, subject) in [(acc, account_subject), (sys, server_subject.as_str())] {
            if !core.has_interest(target, subject.as_bytes()) {
                continue;
            }
            let Some(c) = core.client_ref(key) else { return };
            let table = core.account_table();
            let (name, tag) = (table.name(acc), table.name_tag(acc));
            let now = SystemTime::now();
            let mut client = client_info(c, name, tag, true);
            client.stop = Some(rfc3339_nano(now));
            let e = Event {
                account: target,
                subject: subject.to_string(),
                id: self.nuid.next_id(),
                timestamp: now,
                client,
                end: Some((
                    Counts {
                        msgs: c.in_msgs,
                        bytes: c.in_bytes,
                    },
                    Counts {
                        msgs: c.out_msgs,
                        bytes: c.out_bytes,
                    },
                    reason.as_str(),
                )),
            };
            e.publish_later(core, &self.sys);
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_is_truncated_to_microseconds_below_a_millisecond() {
        assert_eq!(rtt_nanos(None), 0);
        assert_eq!(rtt_nanos(Some(Duration::from_nanos(461_789))), 461_000);
        assert_eq!(rtt_nanos(Some(Duration::from_nanos(1_500_123))), 1_500_123);
        assert_eq!(rtt_nanos(Some(Duration::from_nanos(900))), 900);
    }

    #[test]
    fn client_info_omits_what_is_empty() {
        let c = Client::new(
            7,
            1,
            "127.0.0.1:4000"
                .parse()
                .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 4000))),
            Instant::now(),
            Duration::from_secs(120),
        );
        let ci = client_info(&c, "$G", "$G", false);
        let v = serde_json::to_value(&ci).unwrap_or_default();
        let mut keys: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        assert_eq!(keys, ["acc", "client_type", "host", "id", "kind", "name_tag", "start"]);
        assert_eq!(v["client_type"], "nats");
        assert_eq!(v["kind"], "Client");
    }
}
