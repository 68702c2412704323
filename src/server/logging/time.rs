//! Calendar fields in local time or UTC, and the time formats the logs use.

use std::time::SystemTime;

/// `yyyy/mm/dd hh:mm:ss.uuuuuu` in local time (or UTC), as Go's `log` package writes it.
pub fn timestamp(utc: bool) -> String {
    let mut s = String::with_capacity(26);
    write_timestamp(&mut s, utc);
    s
}

/// [`timestamp`], appended to `out`.
pub fn write_timestamp(out: &mut String, utc: bool) {
    use std::fmt::Write;
    let p = parts(SystemTime::now(), utc);
    let _ = write!(
        out,
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}.{:06}",
        p.year,
        p.month,
        p.day,
        p.hour,
        p.minute,
        p.second,
        p.nanos / 1000
    );
}

/// Go's `time.Stamp` (`Jan _2 15:04:05`), local time.
#[cfg(unix)]
pub fn stamp(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let p = parts(t, false);
    let m = MONTHS.get(p.month.saturating_sub(1) as usize).copied().unwrap_or("Jan");
    format!("{m} {:>2} {:02}:{:02}:{:02}", p.day, p.hour, p.minute, p.second)
}

/// Go's `time.RFC3339` (`2006-01-02T15:04:05Z07:00`), local time.
#[cfg(unix)]
pub fn rfc3339(t: SystemTime) -> String {
    let p = parts(t, false);
    let zone = if p.offset == 0 {
        "Z".to_string()
    } else {
        let sign = if p.offset < 0 { '-' } else { '+' };
        let o = p.offset.abs();
        format!("{sign}{:02}:{:02}", o / 3600, (o % 3600) / 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{zone}",
        p.year, p.month, p.day, p.hour, p.minute, p.second
    )
}

pub use crate::proto::gotime::{civil_utc, parts};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_utc(1_795_984_190), (2026, 11, 29, 20, 29, 50));
        assert_eq!(civil_utc(951_782_400), (2000, 2, 29, 0, 0, 0));
    }

    #[test]
    fn shapes() {
        let t = timestamp(true);
        assert_eq!(t.len(), "2026/11/29 20:29:55.123456".len());
        assert_eq!(&t[4..5], "/");
        assert_eq!(&t[19..20], ".");
    }

    #[test]
    #[cfg(unix)]
    fn syslog_shapes() {
        assert_eq!(stamp(SystemTime::now()).len(), "Jan _2 15:04:05".len());
        let r = rfc3339(SystemTime::now());
        assert!(r.ends_with('Z') || r.len() == "2006-01-02T15:04:05+07:00".len(), "{r}");
    }
}
