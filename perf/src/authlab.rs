//! The server configuration of the auth scenarios (`perms`, `import`): users with and without
//! permissions, and two accounts joined by a service import.
//!
//! | user | account | for |
//! |---|---|---|
//! | `plain` | `A` | `perms` baseline: no permissions |
//! | `perms` | `A` | `perms`: publish and subscribe allowed on `foo.>`, denied on `foo.secret` |
//! | `svc` | `A` | `import`: the responders |
//! | `local` | `A` | `import` baseline: requesters in the responders' account |
//! | `importer` | `B` | `import`: requesters reaching `svc.>` through B's import of A's export |
//! | `sys` | `SYS` (the system account) | `sysevents`: watches `$SYS.>` |
//!
//! The lab writes the file to a fresh temporary folder for every server it starts and passes
//! `-c <file>`; for a server started by hand, `rnats-perf auth-config FILE` writes the same
//! file. Both servers get the identical file, so the runs differ only in the user a client
//! logs in as.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::client::Credentials;
use crate::error::{PerfError, Result};

/// What the `perms` user may publish and subscribe to.
pub const PERMS_ALLOW: &str = "foo.>";
/// What it may not, inside the allowed space.
pub const PERMS_DENY: &str = "foo.secret";
/// The service account A exports and account B imports.
pub const SERVICE: &str = "svc.>";
/// The system account (its user watches the system events in `sysevents`).
pub const SYSTEM_ACCOUNT: &str = "SYS";

/// The users of the lab's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Plain,
    Perms,
    Responder,
    Local,
    Importer,
    /// A user of the system account.
    System,
}

impl User {
    /// Every user, in the order of the config file.
    pub const ALL: [User; 6] = [
        User::Plain,
        User::Perms,
        User::Responder,
        User::Local,
        User::Importer,
        User::System,
    ];

    /// The user name.
    pub fn name(self) -> &'static str {
        match self {
            User::Plain => "plain",
            User::Perms => "perms",
            User::Responder => "svc",
            User::Local => "local",
            User::Importer => "importer",
            User::System => "sys",
        }
    }

    /// The account the user belongs to.
    pub fn account(self) -> &'static str {
        match self {
            User::Importer => "B",
            User::System => SYSTEM_ACCOUNT,
            _ => "A",
        }
    }

    /// The user's name and password (the password is not a secret: loopback test servers).
    pub fn credentials(self) -> Credentials {
        Credentials::new(self.name(), &format!("perf-{}", self.name()))
    }
}

/// The configuration file's text.
pub fn config_text() -> String {
    let mut out = String::from("# rnats-perf auth lab (written by rnats-perf; see perf/src/authlab.rs)\naccounts {\n");
    for account in ["A", "B", SYSTEM_ACCOUNT] {
        let _ = writeln!(out, "  {account}: {{\n    users: [");
        for user in User::ALL.iter().filter(|u| u.account() == account) {
            let c = user.credentials();
            let _ = write!(out, "      {{ user: \"{}\", password: \"{}\"", c.user, c.pass);
            if *user == User::Perms {
                let rule = format!("{{ allow: [\"{PERMS_ALLOW}\"], deny: [\"{PERMS_DENY}\"] }}");
                let _ = write!(out, ", permissions: {{ publish: {rule}, subscribe: {rule} }}");
            }
            out.push_str(" }\n");
        }
        out.push_str("    ]\n");
        if account == "A" {
            let _ = writeln!(out, "    exports: [ {{ service: \"{SERVICE}\" }} ]");
        } else if account == "B" {
            let _ = writeln!(
                out,
                "    imports: [ {{ service: {{ account: A, subject: \"{SERVICE}\" }} }} ]"
            );
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    let _ = writeln!(out, "system_account: {SYSTEM_ACCOUNT}");
    out
}

/// Writes [`config_text`] to `path`.
pub fn write_to(path: &Path) -> Result<()> {
    std::fs::write(path, config_text()).map_err(|e| PerfError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// A temporary folder holding the configuration file; removed when dropped.
pub struct ConfigDir {
    dir: PathBuf,
    file: PathBuf,
}

impl ConfigDir {
    /// Creates a fresh folder under the system's temporary directory and writes the file.
    pub fn write() -> Result<ConfigDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut last_err = None;
        for _ in 0..8 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("rnats-perf-auth-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let file = dir.join("auth.conf");
                    let conf = ConfigDir { dir, file };
                    write_to(&conf.file)?;
                    return Ok(conf);
                }
                Err(e) => last_err = Some((dir, e)),
            }
        }
        let (path, e) = last_err.unwrap_or_else(|| (std::env::temp_dir(), std::io::Error::other("no attempt")));
        Err(PerfError::Output {
            path,
            reason: e.to_string(),
        })
    }

    /// The configuration file.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// `-c <file>` for the server's command line.
    pub fn server_args(&self) -> Result<Vec<String>> {
        let file = self.path().to_str().ok_or_else(|| PerfError::Output {
            path: self.file.clone(),
            reason: "temporary path is not UTF-8".into(),
        })?;
        Ok(vec!["-c".into(), file.to_string()])
    }
}

impl Drop for ConfigDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_every_user_in_its_account() {
        let text = config_text();
        let b_at = text.find("  B: {").unwrap();
        let sys_at = text.find("  SYS: {").unwrap();
        for user in User::ALL {
            let c = user.credentials();
            let at = text
                .find(&format!("user: \"{}\", password: \"{}\"", c.user, c.pass))
                .unwrap_or_else(|| panic!("{} missing:\n{text}", c.user));
            let account = if at > sys_at {
                "SYS"
            } else if at > b_at {
                "B"
            } else {
                "A"
            };
            assert_eq!(account, user.account(), "{} in the wrong account", c.user);
        }
        assert_eq!(text.matches("allow: [\"foo.>\"], deny: [\"foo.secret\"]").count(), 2);
        assert!(text.contains("exports: [ { service: \"svc.>\" } ]"), "{text}");
        assert!(
            text.contains("imports: [ { service: { account: A, subject: \"svc.>\" } } ]"),
            "{text}"
        );
        assert!(text.ends_with("system_account: SYS\n"), "{text}");
    }

    #[test]
    fn config_dir_is_written_and_removed() {
        let conf = ConfigDir::write().unwrap();
        let path = conf.path().to_path_buf();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), config_text());
        let args = conf.server_args().unwrap();
        assert_eq!(args[0], "-c");
        assert_eq!(Path::new(&args[1]), path);
        let other = ConfigDir::write().unwrap();
        assert_ne!(other.path(), path, "every server gets its own folder");
        drop(conf);
        assert!(!path.exists());
        assert!(other.path().exists());
    }
}
