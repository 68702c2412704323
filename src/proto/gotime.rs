//! Go's time formats as nats-server's JSON carries them: `time.Time` as RFC 3339 with
//! nanoseconds, `time.Duration` as integer nanoseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Go's RFC3339Nano in UTC: trailing zeros of the fraction dropped.
pub fn rfc3339_nano(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (y, mo, da, h, mi, s) = civil_utc(d.as_secs() as i64);
    let mut out = format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{s:02}");
    let nanos = d.subsec_nanos();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// UTC calendar fields from Unix seconds (days-from-civil inverse).
pub fn civil_utc(secs: i64) -> (i32, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

/// A `time.Duration` as encoding/json writes it.
pub fn duration_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Broken-down time: year, month, day, hour, minute, second, nanosecond, UTC offset in
/// seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
    pub offset: i64,
}

/// `t` in local time (or UTC).
pub fn parts(t: SystemTime, utc: bool) -> Parts {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (year, month, day, hour, minute, second, offset) = broken_down(secs, utc);
    Parts {
        year,
        month,
        day,
        hour,
        minute,
        second,
        nanos: d.subsec_nanos(),
        offset,
    }
}

#[cfg(unix)]
fn broken_down(secs: i64, utc: bool) -> (i32, u32, u32, u32, u32, u32, i64) {
    let utc_fields = || {
        let (y, mo, d, h, mi, s) = civil_utc(secs);
        (y, mo, d, h, mi, s, 0)
    };
    if utc {
        return utc_fields();
    }
    // SAFETY: localtime_r writes into the tm we own and reads only `t`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: as above.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return utc_fields();
    }
    (
        tm.tm_year + 1900,
        (tm.tm_mon + 1) as u32,
        tm.tm_mday as u32,
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
        tm.tm_gmtoff as i64,
    )
}

#[cfg(not(unix))]
fn broken_down(secs: i64, _utc: bool) -> (i32, u32, u32, u32, u32, u32, i64) {
    let (y, mo, d, h, mi, s) = civil_utc(secs);
    (y, mo, d, h, mi, s, 0)
}
