//! The log file with nats-server's size-based rotation: past `log_size_limit` bytes the
//! file is renamed to `<name>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` (local time), a new one is
//! started with `Rotated log, backup saved as "<backup>"`, and with `logfile_max_num`
//! only that many files (the current one included) are kept, oldest purged first.

use super::{go_os_error, LineFormat, Lvl};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    /// Bytes past which to rotate; 0: never.
    limit: u64,
    max_num: i64,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o640);
    }
    o.open(path)
}

impl RotatingFile {
    pub fn open(path: &str, max_num: i64) -> std::io::Result<RotatingFile> {
        let path = PathBuf::from(path);
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path,
            file,
            size,
            limit: 0,
            max_num,
        })
    }

    /// Set the size limit; true when the file is already past it (rotate on next write).
    pub fn set_limit(&mut self, limit: i64) -> bool {
        self.limit = limit.max(0) as u64;
        self.limit > 0 && self.size > self.limit
    }

    pub fn set_max_num(&mut self, n: i64) {
        self.max_num = n;
    }

    /// Append one formatted line; rotate when past the limit.
    pub fn write_line(&mut self, line: &[u8], fmt: &LineFormat) {
        if self.file.write_all(line).is_ok() {
            self.size += line.len() as u64;
        }
        if self.limit > 0 && self.size > self.limit {
            self.rotate(fmt);
        }
    }

    /// A line written by the rotation itself (`\r\n`-terminated, as in the reference).
    fn direct(&mut self, fmt: &LineFormat, lvl: Lvl, msg: &str) -> u64 {
        let line = fmt.line(lvl, false, msg, "\r\n");
        let _ = self.file.write_all(line.as_bytes());
        line.len() as u64
    }

    fn rotate(&mut self, fmt: &LineFormat) {
        let p = super::time::parts(std::time::SystemTime::now(), false);
        let backup = format!(
            "{}.{:04}.{:02}.{:02}.{:02}.{:02}.{:02}.{:09}",
            self.path.display(),
            p.year,
            p.month,
            p.day,
            p.hour,
            p.minute,
            p.second,
            p.nanos
        );
        let _ = self.file.flush();
        if let Err(e) = std::fs::rename(&self.path, &backup) {
            // Keep writing where we are; try again at twice the size.
            self.limit = self.limit.saturating_mul(2);
            let msg = format!(
                "Unable to rename logfile for rotation ({}), will attempt next rotation at size {}",
                go_os_error(&e),
                self.limit
            );
            self.direct(fmt, Lvl::Error, &msg);
            return;
        }
        match open_append(&self.path) {
            Ok(f) => self.file = f,
            Err(e) => {
                // The old handle still points at the backup; keep logging there.
                let msg = format!(
                    "Unable to re-open the logfile {:?} after rotation: {}",
                    self.path.display().to_string(),
                    go_os_error(&e)
                );
                self.direct(fmt, Lvl::Error, &msg);
                return;
            }
        }
        self.size = self.direct(fmt, Lvl::Info, &format!("Rotated log, backup saved as {backup:?}"));
        if self.max_num > 0 {
            self.purge(fmt);
        }
    }

    /// Remove the oldest backups beyond `max_num - 1`.
    fn purge(&mut self, fmt: &LineFormat) {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(base) = self.path.file_name().map(|b| b.to_string_lossy().into_owned()) else {
            return;
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                let msg = format!(
                    "Unable to read directory {:?} for log purge ({}), will attempt next rotation",
                    dir.display().to_string(),
                    go_os_error(&e)
                );
                self.direct(fmt, Lvl::Error, &msg);
                return;
            }
        };
        let prefix = format!("{base}.");
        let mut backups: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.strip_prefix(&prefix).is_some_and(is_backup_stamp))
            .collect();
        backups.sort();
        let keep = (self.max_num - 1).max(0) as usize;
        if backups.len() <= keep {
            return;
        }
        let excess = backups.len() - keep;
        for name in backups.into_iter().take(excess) {
            if let Err(e) = std::fs::remove_file(dir.join(&name)) {
                let msg = format!(
                    "Unable to remove backup log file {name:?} ({}), will attempt next rotation",
                    go_os_error(&e)
                );
                self.direct(fmt, Lvl::Error, &msg);
                return;
            }
            self.direct(fmt, Lvl::Info, &format!("Purged log file {name:?}"));
        }
    }
}

/// `YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` (the fraction may be shorter, as Go's parser allows).
fn is_backup_stamp(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    let widths = [4, 2, 2, 2, 2, 2];
    parts.len() == 7
        && parts
            .iter()
            .zip(widths)
            .all(|(p, w)| p.len() == w && p.bytes().all(|b| b.is_ascii_digit()))
        && parts
            .get(6)
            .is_some_and(|f| (1..=9).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names() {
        assert!(is_backup_stamp("2026.11.29.21.31.44.123456789"));
        assert!(!is_backup_stamp("2026.11.29.21.31.44"));
        assert!(!is_backup_stamp("old"));
    }

    #[test]
    fn rotates_and_purges() {
        let dir = std::env::temp_dir().join(format!("rnats-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.log");
        let mut f = RotatingFile::open(path.to_str().unwrap(), 2).unwrap();
        assert!(!f.set_limit(100));
        let fmt = LineFormat {
            pid: 1,
            logtime: false,
            utc: false,
        };
        for _ in 0..10 {
            f.write_line(&[b'x'; 60], &fmt);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let cur = std::fs::read_to_string(&path).unwrap();
        assert!(
            cur.contains("[INF] Purged log file") || cur.contains("Rotated log"),
            "{cur}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
