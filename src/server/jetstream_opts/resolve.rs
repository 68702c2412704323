//! What JetStream starts with: nats-server's `EnableJetStream` and `dynJetStreamConfig`
//! (the store directory, the dynamic memory and storage limits from the host), the
//! store directory checks, and the startup log lines.

use super::{JetStreamOptions, StoreCipher, DEFAULT_TPM_PCR, MAX_MEMORY_FALLBACK, MAX_STORE_FALLBACK, STORE_SUBDIR};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// What JetStream starts with (nats-server's `JetStreamConfig` after `EnableJetStream`
/// filled it in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedJetStream {
    /// Where JetStream's files go: `<store_dir>/jetstream` (accounts below it:
    /// `<account>/streams/<stream>`). Without a store directory: the temporary
    /// directory's `nats/jetstream`, or its `jetstream` when both limits were given.
    pub store_root: PathBuf,
    /// Memory limit in bytes.
    pub max_memory: i64,
    /// Storage limit in bytes.
    pub max_store: i64,
    pub sync_interval: Duration,
    pub sync_always: bool,
    pub domain: String,
    pub unique_tag: String,
    pub strict: bool,
    /// Whether the configuration was not computed dynamically (the reference reports
    /// `compress_ok` only then).
    pub compress_ok: bool,
    /// A limit was computed (the `JetStream creating dynamic configuration` debug line).
    pub dynamic: bool,
    /// No store directory was given: the data lives in the temporary directory.
    pub temporary_dir: bool,
    /// The cipher, when encryption at rest is on (a key is set).
    pub encryption: Option<StoreCipher>,
    /// The TPM keys file and PCR, when TPM use is on.
    pub tpm: Option<(String, i64)>,
}

/// What a host reports for the dynamic limits (read from the system by [`resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostResources {
    /// Total system memory in bytes (0: unknown).
    pub system_memory: i64,
    /// A Go memory limit (`GOMEMLIMIT`) in bytes, if one is set.
    pub memory_limit: Option<i64>,
}

/// Resolve the options as nats-server's `EnableJetStream` does, reading the system memory
/// and the free disk space (and creating the store directory, as the reference's disk
/// check does).
pub fn resolve(o: &JetStreamOptions) -> ResolvedJetStream {
    let host = HostResources {
        system_memory: system_memory(),
        memory_limit: go_memory_limit(std::env::var("GOMEMLIMIT").ok().as_deref()),
    };
    resolve_with(o, &std::env::temp_dir(), host, disk_available)
}

/// [`resolve`] with the temporary directory, the host's memory and the disk check given.
pub fn resolve_with(
    o: &JetStreamOptions,
    temp_dir: &Path,
    host: HostResources,
    disk: impl FnOnce(&Path) -> i64,
) -> ResolvedJetStream {
    let temporary_dir = o.store_dir.is_empty();
    let fixed = o.max_memory > 0 && o.max_store > 0;
    let store_root = match (temporary_dir, fixed) {
        (false, _) => go_join(Path::new(&o.store_dir), STORE_SUBDIR),
        (true, true) => go_join(temp_dir, STORE_SUBDIR),
        (true, false) => go_join(&go_join(temp_dir, "nats"), STORE_SUBDIR),
    };
    let max_store = if o.max_store >= 0 {
        o.max_store
    } else {
        disk(&store_root)
    };
    let max_memory = if o.max_memory >= 0 {
        o.max_memory
    } else {
        let mut mem = host.system_memory;
        if mem > 0 {
            if let Some(limit) = host.memory_limit.filter(|&l| l < mem) {
                mem = limit;
            }
            mem / 4 * 3
        } else {
            MAX_MEMORY_FALLBACK
        }
    };
    ResolvedJetStream {
        store_root,
        max_memory,
        max_store,
        sync_interval: o.sync_interval(),
        sync_always: o.sync_always,
        domain: o.domain.clone(),
        unique_tag: o.unique_tag.clone(),
        strict: o.strict,
        compress_ok: fixed,
        dynamic: !fixed,
        temporary_dir,
        encryption: (!o.key.is_empty()).then_some(o.cipher),
        tpm: (!o.tpm.keys_file.is_empty()).then(|| {
            let pcr = if o.tpm.pcr == 0 { DEFAULT_TPM_PCR } else { o.tpm.pcr };
            (o.tpm.keys_file.clone(), pcr)
        }),
    }
}

/// How a startup log line is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    Warn,
    Debug,
}

/// The log lines nats-server writes when JetStream starts, before its accounts are
/// enabled, in order with their levels: `Starting JetStream`, the temporary directory
/// warning, the dynamic configuration's debug line, then [`startup_log_lines`].
pub fn startup_log(r: &ResolvedJetStream) -> Vec<(LogLevel, String)> {
    let mut out = vec![(LogLevel::Info, "Starting JetStream".to_string())];
    if r.temporary_dir {
        out.push((
            LogLevel::Warn,
            "Temporary storage directory used, data could be lost on system reboot".into(),
        ));
    }
    if r.dynamic {
        out.push((
            LogLevel::Debug,
            format!(
                "JetStream creating dynamic configuration - {} memory, {} disk",
                friendly_bytes(r.max_memory),
                friendly_bytes(r.max_store)
            ),
        ));
    }
    out.extend(startup_log_lines(r).into_iter().map(|l| (LogLevel::Info, l)));
    out
}

/// The banner and the `JETSTREAM` block nats-server logs (at info level) once the store
/// directory is ready: the logo, the limits, the directory, the domain, encryption, the
/// API level.
pub fn startup_log_lines(r: &ResolvedJetStream) -> Vec<String> {
    let mut out: Vec<String> = [
        r"    _ ___ _____ ___ _____ ___ ___   _   __  __",
        r" _ | | __|_   _/ __|_   _| _ \ __| /_\ |  \/  |",
        r"| || | _|  | | \__ \ | | |   / _| / _ \| |\/| |",
        r" \__/|___| |_| |___/ |_| |_|_\___/_/ \_\_|  |_|",
        "",
        "         https://docs.nats.io/jetstream",
        "",
        "---------------- JETSTREAM ----------------",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if r.strict {
        out.push("  Strict:          true".into());
    }
    out.push(format!("  Max Memory:      {}", friendly_bytes(r.max_memory)));
    out.push(format!("  Max Storage:     {}", friendly_bytes(r.max_store)));
    out.push(format!("  Store Directory: \"{}\"", r.store_root.display()));
    if !r.domain.is_empty() {
        out.push(format!("  Domain:          {}", r.domain));
    }
    if let Some(c) = r.encryption {
        out.push(format!("  Encryption:      {c}"));
    }
    if let Some((file, pcr)) = &r.tpm {
        out.push(format!(
            "  TPM File:        {}, Pcr: {pcr}",
            crate::proto::reply::go_quote(file.as_bytes())
        ));
    }
    out.push(format!("  API Level:       {}", crate::server::API_LEVEL));
    out.push("-------------------------------------------".into());
    out
}

/// nats-server's `friendlyBytes`: `512 B`, `953.67 MB`, `1.00 GB` (powers of 1024).
pub fn friendly_bytes(bytes: i64) -> String {
    let f = bytes as f64;
    if f < 1024.0 {
        return format!("{bytes} B");
    }
    let exp = (f.ln() / 1024f64.ln()) as i32;
    let unit = ["K", "M", "G", "T", "P", "E"]
        .get(usize::try_from(exp - 1).unwrap_or(0))
        .copied()
        .unwrap_or("E");
    format!("{:.2} {unit}B", f / 1024f64.powi(exp))
}

/// A JetStream start that cannot go ahead (`Can't start JetStream: <this>`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JetStreamStartError {
    #[error("JetStream encryption key may not be used with TPM options")]
    KeyWithTpm,
    #[error("could not create storage directory - {0}")]
    CreateDir(String),
    #[error("storage directory is not a directory")]
    NotADirectory,
    #[error("storage directory is not writable")]
    NotWritable,
}

/// The store directory checks JetStream makes when it starts: the directory is made if
/// missing, otherwise it must be a writable directory; a key and TPM options exclude
/// each other.
pub fn prepare_store(o: &JetStreamOptions, r: &ResolvedJetStream) -> Result<(), JetStreamStartError> {
    match std::fs::metadata(&r.store_root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&r.store_root).map_err(|e| JetStreamStartError::CreateDir(mkdir_error(r, &e)))?;
        }
        Ok(m) if m.is_dir() => {
            let probe = r.store_root.join(format!("_test_{}", std::process::id()));
            std::fs::File::create(&probe).map_err(|_| JetStreamStartError::NotWritable)?;
            let _ = std::fs::remove_file(&probe);
        }
        _ => return Err(JetStreamStartError::NotADirectory),
    }
    if !o.key.is_empty() && !o.tpm.keys_file.is_empty() {
        return Err(JetStreamStartError::KeyWithTpm);
    }
    Ok(())
}

fn mkdir_error(r: &ResolvedJetStream, e: &std::io::Error) -> String {
    format!("mkdir {}: {}", r.store_root.display(), conf::go_os_error(e))
}

/// Go's `filepath.Join(dir, name)`: joined and cleaned (`.`, `..`, repeated slashes).
pub fn go_join(dir: &Path, name: &str) -> PathBuf {
    let joined = if dir.as_os_str().is_empty() {
        PathBuf::from(name)
    } else {
        dir.join(name)
    };
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) | Some(Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// 75% of the space available to the server at `dir` (made first if missing), or
/// [`MAX_STORE_FALLBACK`] when that cannot be read (nats-server's `diskAvailable`).
pub fn disk_available(dir: &Path) -> i64 {
    if std::fs::metadata(dir).is_err() {
        let _ = std::fs::create_dir_all(dir);
    }
    #[cfg(unix)]
    {
        if let Ok(st) = rustix::fs::statvfs(dir) {
            let avail = u128::from(st.f_bavail) * u128::from(st.f_bsize) / 4 * 3;
            return i64::try_from(avail).unwrap_or(i64::MAX);
        }
    }
    MAX_STORE_FALLBACK
}

/// The system's total memory in bytes (0: unknown).
pub fn system_memory() -> i64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let info = rustix::system::sysinfo();
        let total = u128::from(info.totalram) * u128::from(info.mem_unit.max(1));
        i64::try_from(total).unwrap_or(i64::MAX)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        0
    }
}

/// Go's `GOMEMLIMIT`: bytes with an optional `B`, `KiB`, `MiB`, `GiB` or `TiB` suffix, or
/// `off`. `None` when unset, off or not understood (Go refuses to start on a bad value;
/// here it is ignored).
pub fn go_memory_limit(v: Option<&str>) -> Option<i64> {
    let v = v?.trim();
    if v == "off" || v.is_empty() {
        return None;
    }
    let (num, mult) = [
        ("TiB", 1i64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ]
    .into_iter()
    .find_map(|(suffix, m)| v.strip_suffix(suffix).map(|n| (n, m)))
    .unwrap_or((v, 1));
    let n: i64 = num.parse().ok().filter(|n: &i64| *n >= 0)?;
    n.checked_mul(mult)
}
