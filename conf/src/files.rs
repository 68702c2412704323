//! Reading config files with a size cap, and the reference's path rules for includes
//! (Go's `filepath.Dir`, `Join` and `Clean`: an include path is always joined to the
//! including file's directory, even when it starts with `/`).

use std::fs::File;
use std::io::Read;
use std::path::{is_separator, Path, MAIN_SEPARATOR};

use crate::error::ErrorKind;

/// Reads at most `max` bytes of `path`; `shown` is the name used in messages. Errors are
/// worded like Go's (`open x.conf: no such file or directory`).
pub(crate) fn read_limited(path: &Path, shown: &str, max: u64) -> Result<Vec<u8>, ErrorKind> {
    let file = File::open(path).map_err(|e| ErrorKind::Io(format!("open {shown}: {}", go_os_error(&e))))?;
    let mut data = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| ErrorKind::Io(format!("read {shown}: {}", go_os_error(&e))))?;
    if data.len() as u64 > max {
        return Err(ErrorKind::FileTooLarge {
            path: shown.to_string(),
            max,
        });
    }
    Ok(data)
}

/// An OS error as Go prints it: the lower-case `strerror` text without Rust's
/// " (os error N)" suffix (`no such file or directory`).
pub fn go_os_error(e: &std::io::Error) -> String {
    let s = match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code).to_string(),
        None => e.to_string(),
    };
    let s = match s.find(" (os error") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => s,
    }
}

/// Go's `filepath.Clean`: lexical simplification of a path.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let rooted = path.starts_with(is_separator);
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(is_separator) {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let sep = MAIN_SEPARATOR.to_string();
    let joined = parts.join(&sep);
    match (rooted, joined.is_empty()) {
        (true, _) => format!("{sep}{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Go's `filepath.Dir`: everything before the last separator, cleaned.
pub(crate) fn dir(path: &str) -> String {
    match path.rfind(is_separator) {
        Some(i) => clean(path.get(..=i).unwrap_or_default()),
        None => ".".to_string(),
    }
}

/// Go's `filepath.Join` of two elements.
pub(crate) fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, true) => String::new(),
        (true, false) => clean(name),
        (false, true) => clean(dir),
        (false, false) => clean(&format!("{dir}{MAIN_SEPARATOR}{name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_matches_go() {
        for (input, want) in [
            ("", "."),
            (".", "."),
            ("a/b/../c", "a/c"),
            ("/../x", "/x"),
            ("../../x", "../../x"),
            ("a//b/./c/", "a/b/c"),
            ("/", "/"),
            ("a/..", "."),
        ] {
            assert_eq!(clean(input), want, "clean({input:?})");
        }
    }

    #[test]
    fn dir_and_join_match_go() {
        assert_eq!(dir("t.conf"), ".");
        assert_eq!(dir("/etc/nats/t.conf"), "/etc/nats");
        assert_eq!(dir(""), ".");
        assert_eq!(join(".", "x.conf"), "x.conf");
        assert_eq!(join(".", "/tmp/ct/x.conf"), "tmp/ct/x.conf");
        assert_eq!(join("/etc/nats", "../other/x.conf"), "/etc/other/x.conf");
        assert_eq!(
            join("conf/includes", "./passwords.conf"),
            "conf/includes/passwords.conf"
        );
    }

    #[test]
    fn io_errors_read_like_go() {
        let e = read_limited(Path::new("/nonexistent/x.conf"), "x.conf", 10).expect_err("missing file");
        assert_eq!(e, ErrorKind::Io("open x.conf: no such file or directory".to_string()));
    }
}
