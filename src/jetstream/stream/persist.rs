//! A stream's directory, laid out as the reference lays it out:
//! `<store_dir>/jetstream/<account>/streams/<stream>/` with `meta.inf` (the stream config
//! with its `created` time, JSON), `meta.sum` (its HighwayHash checksum keyed by the
//! stream name), the store under `msgs/`, and each durable consumer under
//! `obs/<consumer>/` (`meta.inf` with `created`, `name` and the config; `o.dat` its state).
//! Files are replaced atomically (write, fsync, rename).

use crate::jetstream::api::config::{ConsumerConfig, StreamConfig};
use crate::jetstream::api::GoTime;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `<root>/<account>/streams`.
pub fn streams_dir(root: &Path, account: &str) -> PathBuf {
    root.join(account).join("streams")
}

/// Replace the files `files` (name, contents) of `dir` atomically, each on its own: every
/// temporary file is written and synced (the syncs run side by side), then renamed over its
/// file, then the directory is synced once; with `new_dir` also the parent directory (the
/// directory itself was just created).
pub fn write_files_atomic(dir: &Path, files: &[(&str, &[u8])], new_dir: bool) -> std::io::Result<()> {
    let tmps: Vec<PathBuf> = files.iter().map(|(n, _)| dir.join(format!("{n}.tmp"))).collect();
    std::thread::scope(|scope| -> std::io::Result<()> {
        let jobs: Vec<_> = files
            .iter()
            .zip(&tmps)
            .map(|((_, bytes), tmp)| {
                scope.spawn(move || -> std::io::Result<()> {
                    let mut f = std::fs::File::create(tmp)?;
                    f.write_all(bytes)?;
                    f.sync_data()
                })
            })
            .collect();
        for j in jobs {
            j.join().map_err(|_| std::io::Error::other("sync thread panicked"))??;
        }
        Ok(())
    })?;
    for ((name, _), tmp) in files.iter().zip(&tmps) {
        std::fs::rename(tmp, dir.join(name))?;
    }
    sync_dir(dir);
    if new_dir {
        if let Some(parent) = dir.parent() {
            sync_dir(parent);
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn with_front(front: Vec<(&str, serde_json::Value)>, body: serde_json::Value) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (k, v) in front {
        m.insert(k.to_string(), v);
    }
    if let serde_json::Value::Object(o) = body {
        for (k, v) in o {
            if !m.contains_key(&k) {
                m.insert(k, v);
            }
        }
    }
    serde_json::Value::Object(m)
}

/// Write the stream's `meta.inf` and `meta.sum`.
pub fn write_stream_meta(dir: &Path, cfg: &StreamConfig, created: GoTime) -> std::io::Result<()> {
    let new_dir = !dir.exists();
    std::fs::create_dir_all(dir)?;
    let body = serde_json::to_value(cfg).map_err(std::io::Error::other)?;
    let v = with_front(vec![("Created", serde_json::Value::String(created.format()))], body);
    let bytes = crate::proto::gojson::to_vec(&v);
    let sum = storage::reference::meta_sum(&cfg.name, &bytes);
    write_files_atomic(dir, &[("meta.inf", &bytes), ("meta.sum", sum.as_bytes())], new_dir)
}

/// Read a stream's `meta.inf`: its config and creation time.
pub fn read_stream_meta(dir: &Path) -> Result<(StreamConfig, GoTime), String> {
    let bytes = std::fs::read(dir.join("meta.inf")).map_err(|e| e.to_string())?;
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    // The reference's `FileStreamInfo` has `Created` without a JSON tag.
    let created = v
        .as_object_mut()
        .and_then(|o| o.remove("Created").or_else(|| o.remove("created")))
        .and_then(|c| c.as_str().and_then(GoTime::parse))
        .unwrap_or_else(GoTime::now);
    // Fields a newer server wrote are not fatal when reading back.
    let cfg: StreamConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok((cfg, created))
}

/// `<stream dir>/obs/<consumer>`.
pub fn consumer_dir(stream_dir: &Path, name: &str) -> PathBuf {
    stream_dir.join("obs").join(name)
}

/// Write a consumer's `meta.inf` (and `meta.sum`, keyed by the consumer name).
pub fn write_consumer_meta(dir: &Path, name: &str, cfg: &ConsumerConfig, created: GoTime) -> std::io::Result<()> {
    let new_dir = !dir.exists();
    std::fs::create_dir_all(dir)?;
    let body = serde_json::to_value(cfg).map_err(std::io::Error::other)?;
    let v = with_front(
        vec![
            ("Created", serde_json::Value::String(created.format())),
            ("Name", serde_json::Value::String(name.to_string())),
        ],
        body,
    );
    let bytes = crate::proto::gojson::to_vec(&v);
    let sum = storage::reference::meta_sum(name, &bytes);
    write_files_atomic(dir, &[("meta.inf", &bytes), ("meta.sum", sum.as_bytes())], new_dir)
}

/// Read a consumer's `meta.inf`: name, config, creation time.
pub fn read_consumer_meta(dir: &Path) -> Result<(String, ConsumerConfig, GoTime), String> {
    let bytes = std::fs::read(dir.join("meta.inf")).map_err(|e| e.to_string())?;
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let o = v.as_object_mut().ok_or("meta.inf is not an object")?;
    // The reference's `FileConsumerInfo`: `Created` and `Name` without JSON tags, then
    // the configuration's fields.
    let created = o
        .remove("Created")
        .or_else(|| o.remove("created"))
        .and_then(|c| c.as_str().and_then(GoTime::parse))
        .unwrap_or_else(GoTime::now);
    let outer = o.remove("Name").and_then(|n| n.as_str().map(str::to_string));
    let name = outer
        .or_else(|| o.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .unwrap_or_default();
    let cfg: ConsumerConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let name = if name.is_empty() {
        cfg.durable_name.clone()
    } else {
        name
    };
    Ok((name, cfg, created))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_meta_round_trips() {
        let dir = std::env::temp_dir().join(format!("rnats-meta-{}", std::process::id()));
        let cfg = StreamConfig {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            max_msgs: -1,
            ..Default::default()
        };
        let created = GoTime::parse("2026-11-29T18:07:58.021170178Z").unwrap();
        write_stream_meta(&dir, &cfg, created).unwrap();
        let text = std::fs::read_to_string(dir.join("meta.inf")).unwrap();
        assert!(
            text.starts_with(r#"{"Created":"2026-11-29T18:07:58.021170178Z","name":"ORDERS""#),
            "{text}"
        );
        let (back, t) = read_stream_meta(&dir).unwrap();
        assert_eq!((back, t), (cfg, created));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
