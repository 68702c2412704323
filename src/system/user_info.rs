//! `$SYS.REQ.USER.INFO`: a connection asks who it is. Every account imports the subject
//! from the system account (mapped to `$SYS.REQ.USER.<account>.INFO`, sharing the
//! requester's details), so the request reaches the system account on the requester's
//! shard, where a local internal subscription answers from the requester's own state.

use super::envelope::{self, ApiError, ServerIdentity};
use super::System;
use crate::core::accounts::AccountId;
use crate::core::perms::PermSpec;
use crate::core::shard::internal::{Handler, InternalMsg};
use crate::core::shard::ShardCore;
use crate::proto::gotime;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// The subject clients request.
pub const USER_INFO: &str = "$SYS.REQ.USER.INFO";
/// The subject the system account serves (`%s` is the account).
pub const USER_DIRECT_PATTERN: &str = "$SYS.REQ.USER.*.INFO";

/// `$SYS.REQ.USER.<account>.INFO`.
pub fn direct_subject(account: &str) -> String {
    format!("$SYS.REQ.USER.{account}.INFO")
}

/// A permission list as nats-server reports it: subjects only (a queue qualifier of a
/// subscribe entry is not shown).
#[derive(Serialize)]
struct SubjectPermission {
    #[serde(skip_serializing_if = "Option::is_none")]
    allow: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny: Vec<String>,
}

fn subjects(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|e| e.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

#[derive(Serialize)]
struct ResponsePermission {
    max: i64,
    ttl: i64,
}

#[derive(Serialize)]
struct Permissions {
    publish: SubjectPermission,
    subscribe: SubjectPermission,
    #[serde(skip_serializing_if = "Option::is_none")]
    responses: Option<ResponsePermission>,
}

#[derive(Serialize)]
struct UserInfo<'a> {
    user: &'a str,
    account: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    account_name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    user_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    permissions: Option<Permissions>,
    #[serde(skip_serializing_if = "is_zero")]
    expires: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn side(p: &Option<crate::core::perms::SubjectPerm>) -> SubjectPermission {
    match p {
        Some(p) => SubjectPermission {
            allow: p.allow.as_deref().map(subjects),
            deny: subjects(&p.deny),
        },
        None => SubjectPermission {
            allow: None,
            deny: Vec::new(),
        },
    }
}

fn permissions(spec: &PermSpec) -> Permissions {
    Permissions {
        publish: side(&spec.publish),
        subscribe: side(&spec.subscribe),
        responses: spec.response.map(|r| ResponsePermission {
            max: r.max,
            ttl: gotime::duration_nanos(r.expires),
        }),
    }
}

/// The answer for the requester `m.sender`.
fn answer(core: &ShardCore, server: &ServerIdentity, m: &InternalMsg) -> Vec<u8> {
    let c = m.sender.and_then(|k| core.client_ref(k));
    let Some(c) = c else {
        return envelope::encode::<()>(
            server,
            None,
            Some(ApiError {
                code: 400,
                description: String::new(),
            }),
        );
    };
    let table = core.account_table();
    let account = table.name(c.account);
    let id = c.identity.as_deref();
    let user = id
        .map(|i| i.user.as_str())
        .filter(|u| !u.is_empty())
        .unwrap_or(c.opts.user.as_str());
    let expires = c
        .identity
        .as_ref()
        .and_then(|i| i.expires)
        .and_then(|t| t.duration_since(SystemTime::now()).ok())
        .map(gotime::duration_nanos)
        .unwrap_or(0);
    let info = UserInfo {
        user,
        account,
        account_name: table.name_tag(c.account),
        user_name: id.map(|i| i.name_tag.as_str()).unwrap_or(""),
        permissions: c.perms.as_deref().map(|p| permissions(p.spec())),
        expires,
    };
    envelope::encode(server, Some(info), None)
}

/// Subscribe the service in the system account `sys` of this shard.
pub fn subscribe(core: &mut ShardCore, sys: AccountId, system: Arc<System>, now: Instant) {
    let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
        if m.reply.is_empty() || system.stopped() {
            return;
        }
        let body = answer(core, system.server(), m);
        core.publish_internal(m.account, &m.reply, b"", None, &body, now);
    });
    core.subscribe_internal(sys, USER_DIRECT_PATTERN, None, true, h, now);
}
