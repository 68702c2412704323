//! Opening a stream directory that nats-server wrote: its `msgs/` holds the reference's
//! blocks (`1.blk`, `index.db`), which rnats's store does not use. On the first start the
//! reference's `msgs/` is moved aside to `.nats-server/<stream>/msgs` (with copies of its
//! `meta.inf` and `meta.sum`, so an operator can go back), and every message is replayed
//! into a fresh rnats store through `storage::reference`. Consumers' `obs/` files are the
//! reference's format already and are read as they are.

use std::path::Path;
use storage::Store;

/// Does `msgs` hold reference blocks and none of rnats's (ten-digit names)?
fn has_reference_blocks(msgs: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(msgs) else { return false };
    let mut reference = false;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".blk") else {
            continue;
        };
        if !stem.bytes().all(|b| b.is_ascii_digit()) || stem.is_empty() {
            continue;
        }
        if stem.len() == 10 {
            return false;
        }
        reference = true;
    }
    reference
}

/// Move a reference `msgs/` aside before the store opens. Returns the staging directory
/// to import from, if there was one.
pub fn stage(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    let msgs = dir.join("msgs");
    if !has_reference_blocks(&msgs) {
        return None;
    }
    let staging = dir.join(".nats-server").join(name);
    let moved = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&staging)?;
        for f in ["meta.inf", "meta.sum", "meta.key"] {
            if dir.join(f).exists() {
                std::fs::copy(dir.join(f), staging.join(f))?;
            }
        }
        std::fs::rename(&msgs, staging.join("msgs"))
    })();
    match moved {
        Ok(()) => Some(staging),
        Err(e) => {
            tracing::error!("JetStream: could not move nats-server's blocks of '{name}' aside: {e}");
            None
        }
    }
}

/// Replay the staged reference blocks into `store`.
pub fn import(staging: &Path, account: &str, enc: Option<&storage::crypto::EncryptionConfig>, store: &mut dyn Store) {
    let sd = match storage::reference::dir::StreamDir::open(staging, account, enc) {
        Ok(sd) => sd,
        Err(e) => {
            tracing::error!(
                "JetStream: cannot read nats-server's stream at {}: {e}",
                staging.display()
            );
            return;
        }
    };
    let mut report = |line: String| tracing::warn!("JetStream import: {line}");
    match sd.import_into(store, &mut report) {
        Ok(st) => tracing::info!(
            "JetStream: imported stream '{}' written by nats-server: {} messages ({} damaged records skipped)",
            sd.name,
            st.msgs,
            st.corrupt
        ),
        Err(e) => tracing::error!("JetStream: importing stream '{}' failed: {e}", sd.name),
    }
    if let Err(e) = store.sync() {
        tracing::error!("JetStream: syncing imported stream '{}' failed: {e}", sd.name);
    }
}
