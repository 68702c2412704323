//! `$JS.API.ACCOUNT.PURGE.<account>`: the system account deletes every stream (and its
//! consumers) of an account and its store directory. Subscribed in the system account on
//! every shard in the API's queue group; the streams are deleted on the shards that own
//! them, then the directory goes and the requester hears `initiated`.

use super::API_QUEUE;
use crate::core::accounts::AccountId;
use crate::core::shard::internal::{DoneFn, Handler, InternalMsg, PartFn};
use crate::core::shard::ShardCore;
use crate::jetstream::api::errors_table as e;
use crate::jetstream::api::ApiError;
use crate::jetstream::shard::with_js;
use crate::jetstream::JetStream;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// The subject, with the account's name as its last token.
pub const SUBJECT: &str = "$JS.API.ACCOUNT.PURGE.*";
const PREFIX: &str = "$JS.API.ACCOUNT.PURGE.";
const SUFFIX: &str = "account_purge_response";

/// Subscribe the purge endpoint in the system account `sys` on this shard.
pub fn subscribe(core: &mut ShardCore, js: &Arc<JetStream>, sys: AccountId, now: Instant) {
    let js = js.clone();
    let h: Handler = Box::new(move |core: &mut ShardCore, m: &mut InternalMsg, now: Instant| {
        let m = m.take();
        handle(core, &js, m, now);
    });
    core.subscribe_internal(sys, SUBJECT, Some(API_QUEUE), false, h, now);
}

fn handle(core: &mut ShardCore, js: &Arc<JetStream>, m: InternalMsg, now: Instant) {
    let Some(name) = std::str::from_utf8(&m.subject)
        .ok()
        .and_then(|s| s.strip_prefix(PREFIX))
    else {
        return;
    };
    let name = name.to_string();
    let reply = m.reply;
    if name.contains(['\\', '/']) {
        let err = e::JS_STREAM_GENERAL_ERROR_F.err_with("account name can not contain path separators");
        return answer(core, m.account, &reply, Err(err), now);
    }
    let target = core.account_table().by_name(&name).map(|a| a.id);
    let streams = target.map_or(0, |acc| js.registry_to_read().streams(acc).count());
    tracing::info!(
        "Purge request for account {name} (streams: {streams}, hasAccount: {})",
        target.is_some()
    );
    let sys = m.account;
    let root = js.settings.root.join(&name);
    let Some(acc) = target else {
        let res = remove_dir(&root);
        return answer(core, sys, &reply, res, now);
    };
    let part_js = js.clone();
    let part: PartFn<()> = Arc::new(move |core: &mut ShardCore, now: Instant| {
        with_js(core, |sjs, core| {
            let here: Vec<String> = sjs.streams.keys().filter(|k| k.0 == acc).map(|k| k.1.clone()).collect();
            for stream in here {
                sjs.delete_consumers(core, acc, &stream, now);
                if sjs.close_stream(core, acc, &stream, true).is_some() {
                    part_js.registry().remove(acc, &stream);
                    crate::jetstream::advisory::stream_action(core, &part_js, acc, &stream, "delete", now);
                }
            }
        });
    });
    let done: DoneFn<()> = Box::new(move |core: &mut ShardCore, _: Vec<()>, now: Instant| {
        let res = remove_dir(&root);
        answer(core, sys, &reply, res, now);
    });
    core.gather(part, done, now);
}

fn remove_dir(dir: &std::path::Path) -> Result<(), ApiError> {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(e::JS_STREAM_GENERAL_ERROR_F.err_with(err.to_string()))
        }
        _ => Ok(()),
    }
}

/// The response, from the system's own client (not counted: the system account has no
/// JetStream statistics).
fn answer(core: &mut ShardCore, sys: AccountId, reply: &[u8], res: Result<(), ApiError>, now: Instant) {
    if reply.is_empty() {
        return;
    }
    let body = match res {
        Ok(()) => super::envelope(SUFFIX, json!({"initiated": true})),
        Err(err) => super::error_envelope(SUFFIX, &err, json!({})),
    };
    core.publish_internal(sys, reply, b"", None, &body, now);
}
