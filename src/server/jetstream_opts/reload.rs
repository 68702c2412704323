//! Configuration reload of the JetStream options (nats-server's `diffOptions` for its
//! `JetStream*`, `StoreDir`, `Sync*` and `StreamMaxBuffered*` fields).

use super::{friendly_bytes, JetStreamOptions};
use crate::server::options::go_duration;

/// What a reload does to JetStream.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JetStreamReload {
    /// `Reloaded: ...` lines, in the reference's order.
    pub messages: Vec<String>,
    /// Turn JetStream on (`Some(true)`: start, or restart when it stopped) or off.
    pub enable: Option<bool>,
    /// New memory limit (raised), if any.
    pub max_memory: Option<i64>,
    /// New storage limit (raised), if any.
    pub max_store: Option<i64>,
}

/// A reload that changes a JetStream option the reference cannot change at runtime.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamReloadError {
    #[error("config reload not supported for {field}: old={old}, new={new}")]
    NotSupported {
        field: &'static str,
        old: String,
        new: String,
    },
    #[error("config reload not supported for jetstream storage directory")]
    StoreDirectory,
    #[error("config reload not supported for jetstream dynamic max memory and store")]
    DynamicLimits,
    #[error("config reload not supported for decreasing jetstream max memory and store")]
    DecreasingLimits,
    #[error("config reload not supported for jetstream max memory and max store")]
    LimitsWithoutDisable,
    #[error("config reload not supported for jetstream storage dir")]
    StoreDirWithoutDisable,
}

/// JetStream options that refuse any change, in nats-server's field order, with Go's
/// `%v` of their values.
type Shown = fn(&JetStreamOptions) -> String;
const FIXED_BEFORE_LIMITS: &[(&str, Shown)] = &[("NoJetStreamStrict", |o| (!o.strict).to_string())];
const FIXED_AFTER_LIMITS: &[(&str, Shown)] = &[
    ("JetStreamDomain", |o| o.domain.clone()),
    ("JetStreamExtHint", |o| o.extension_hint.clone()),
    ("JetStreamKey", |o| o.key.clone()),
    ("JetStreamOldKey", |o| o.prev_key.clone()),
    ("JetStreamCipher", |o| o.cipher.to_string()),
    ("JetStreamUniqueTag", |o| o.unique_tag.clone()),
    ("JetStreamLimits", |o| o.limits.go_value()),
    ("JetStreamTpm", |o| {
        let t = &o.tpm;
        format!(
            "{{{} {} {} {}}}",
            t.keys_file, t.encryption_password, t.srk_password, t.pcr
        )
    }),
    ("JetStreamMaxCatchup", |o| o.max_outstanding_catchup.to_string()),
    ("JetStreamRequestQueueLimit", |o| o.request_queue_limit.to_string()),
    ("JetStreamInfoQueueLimit", |o| o.info_queue_limit.to_string()),
];
const FIXED_BUFFERED: &[(&str, Shown)] = &[
    ("StreamMaxBufferedMsgs", |o| o.max_buffered_msgs.to_string()),
    ("StreamMaxBufferedSize", |o| o.max_buffered_size.to_string()),
];
const FIXED_SYNC: &[(&str, Shown)] = &[
    ("SyncInterval", |o| go_duration(o.sync_interval())),
    ("SyncAlways", |o| o.sync_always.to_string()),
];

fn fixed(
    list: &[(&'static str, Shown)],
    old: &JetStreamOptions,
    new: &JetStreamOptions,
) -> Result<(), JetStreamReloadError> {
    for (field, shown) in list {
        let (a, b) = (shown(old), shown(new));
        if a != b {
            return Err(JetStreamReloadError::NotSupported { field, old: a, new: b });
        }
    }
    Ok(())
}

/// Compare the JetStream options in force with reloaded ones (both after
/// [`JetStreamOptions::apply_baseline`]), as nats-server's reload does: JetStream can be
/// turned on or off, and explicit limits raised while it runs; the store directory and
/// the limits can change only while it is off or being turned off; every other option
/// is fixed. `running` tells whether JetStream runs now (it may have stopped itself).
pub fn reload_diff(
    old: &JetStreamOptions,
    new: &JetStreamOptions,
    running: bool,
) -> Result<JetStreamReload, JetStreamReloadError> {
    let mut plan = JetStreamReload::default();
    let mut disabling = false;
    if old.enabled != new.enabled {
        plan.enable = Some(new.enabled);
        plan.messages.push("Reloaded: JetStream".into());
        disabling = !new.enabled;
    } else if new.enabled && !running {
        plan.enable = Some(true);
        plan.messages.push("Reloaded: JetStream".into());
    }
    fixed(FIXED_BEFORE_LIMITS, old, new)?;
    let mut limits_dropped = false;
    let mut raised = false;
    for memory in [true, false] {
        let (a, b) = if memory {
            (old.max_memory, new.max_memory)
        } else {
            (old.max_store, new.max_store)
        };
        if !running || a == b {
            continue;
        }
        match (a == -1, b == -1) {
            (false, false) if b > a => {
                raised = true;
                if memory {
                    plan.max_memory = Some(b);
                } else {
                    plan.max_store = Some(b);
                }
            }
            (false, true) => limits_dropped = true,
            (true, false) => return Err(JetStreamReloadError::DynamicLimits),
            _ => return Err(JetStreamReloadError::DecreasingLimits),
        }
    }
    if raised {
        if let Some(m) = plan.max_memory.filter(|&m| m > 0) {
            plan.messages
                .push(format!("Reloaded: JetStream max_mem_store = {}", friendly_bytes(m)));
        }
        if let Some(s) = plan.max_store.filter(|&s| s > 0) {
            plan.messages
                .push(format!("Reloaded: JetStream max_file_store = {}", friendly_bytes(s)));
        }
    }
    fixed(FIXED_AFTER_LIMITS, old, new)?;
    // meta_compact, meta_compact_size and meta_compact_sync may change freely.
    fixed(FIXED_BUFFERED, old, new)?;
    let mut store_dir_dropped = false;
    if running && old.store_dir != new.store_dir {
        if !new.store_dir.is_empty() {
            return Err(JetStreamReloadError::StoreDirectory);
        }
        store_dir_dropped = true;
    }
    fixed(FIXED_SYNC, old, new)?;
    if !disabling {
        if limits_dropped {
            return Err(JetStreamReloadError::LimitsWithoutDisable);
        }
        if store_dir_dropped {
            return Err(JetStreamReloadError::StoreDirWithoutDisable);
        }
    }
    Ok(plan)
}
