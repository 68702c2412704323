//! Helpers shared by the integration tests.
#![allow(dead_code)]

use conf::{Map, Parser, Value, ValueKind};

/// A compact, order-preserving rendering of a tree for table tests:
/// `{key: "string", int: 22, float: 2.5f, b: true, d: 2016-05-04T18:53:41Z, a: [1, 2], m: {}}`.
pub fn show(map: &Map) -> String {
    let items: Vec<String> = map
        .iter()
        .map(|(k, e)| format!("{}: {}", show_key(k), show_value(&e.value)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

pub fn show_value(v: &Value) -> String {
    match &v.kind {
        ValueKind::String(s) => format!("{s:?}"),
        ValueKind::Integer(i) => i.to_string(),
        ValueKind::Float(f) => format!("{f:?}f"),
        ValueKind::Bool(b) => b.to_string(),
        ValueKind::DateTime(d) => d.to_string(),
        ValueKind::Array(a) => format!("[{}]", a.iter().map(show_value).collect::<Vec<_>>().join(", ")),
        ValueKind::Map(m) => show(m),
    }
}

fn show_key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        format!("{k:?}")
    }
}

/// A parser whose environment is exactly `vars`.
pub fn parser_with_env(vars: &[(&str, &str)]) -> Parser {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Parser::new().with_env(move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

/// Parses with an empty environment and renders the tree, or the error's Display.
pub fn parse_show(text: &str) -> String {
    match parser_with_env(&[]).parse_str(text) {
        Ok(m) => show(&m),
        Err(e) => format!("error: {e}"),
    }
}

/// Tests that change the working directory take this lock (the process has one).
static CWD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The working directory moved to `dir` until dropped.
pub struct CwdGuard {
    old: std::path::PathBuf,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl CwdGuard {
    pub fn enter(dir: &std::path::Path) -> CwdGuard {
        let lock = CWD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let old = std::env::current_dir().expect("cwd");
        std::env::set_current_dir(dir).expect("chdir");
        CwdGuard { old, _lock: lock }
    }
}

impl Drop for CwdGuard {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.old);
    }
}
