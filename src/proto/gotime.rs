//! Go's time formats as nats-server's JSON carries them: `time.Time` as RFC 3339 with
//! nanoseconds, `time.Duration` as integer nanoseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Go's RFC3339Nano in UTC: trailing zeros of the fraction dropped.
pub fn rfc3339_nano(t: SystemTime) -> String {
    let mut out = Vec::with_capacity(30);
    push_rfc3339_nano(&mut out, t);
    // Only ASCII digits and separators were written.
    String::from_utf8(out).unwrap_or_default()
}

/// [`rfc3339_nano`] appended to `out` (no allocation of its own): this runs for every
/// direct get and every message header that carries a time.
pub fn push_rfc3339_nano(out: &mut Vec<u8>, t: SystemTime) {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (y, mo, da, h, mi, s) = civil_utc(d.as_secs() as i64);
    if (0..=9999).contains(&y) {
        push_digits(out, y as u32, 4);
        for (sep, v) in [(b'-', mo), (b'-', da), (b'T', h), (b':', mi), (b':', s)] {
            out.push(sep);
            push_digits(out, v, 2);
        }
    } else {
        out.extend_from_slice(format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{s:02}").as_bytes());
    }
    let mut nanos = d.subsec_nanos();
    if nanos > 0 {
        let mut width = 9;
        while nanos % 10 == 0 {
            nanos /= 10;
            width -= 1;
        }
        out.push(b'.');
        push_digits(out, nanos, width);
    }
    out.push(b'Z');
}

/// `v` in decimal, zero-padded to `width` digits.
fn push_digits(out: &mut Vec<u8>, v: u32, width: usize) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(v);
    for _ in digits.len()..width {
        out.push(b'0');
    }
    out.extend_from_slice(digits.as_bytes());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// The plain formatted version the digit-by-digit writer replaced.
    fn oracle(t: SystemTime) -> String {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let (y, mo, da, h, mi, s) = civil_utc(d.as_secs() as i64);
        let mut out = format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{s:02}");
        if d.subsec_nanos() > 0 {
            out.push('.');
            out.push_str(format!("{:09}", d.subsec_nanos()).trim_end_matches('0'));
        }
        out.push('Z');
        out
    }

    #[test]
    fn rfc3339_like_go() {
        let at = |ns: u64| UNIX_EPOCH + Duration::from_nanos(ns);
        assert_eq!(rfc3339_nano(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_nano(at(1_700_000_000_000_000_001)),
            "2023-11-14T22:13:20.000000001Z"
        );
        assert_eq!(rfc3339_nano(at(1_700_000_000_120_000_000)), "2023-11-14T22:13:20.12Z");
        let mut out = b"Nats-Time-Stamp: ".to_vec();
        push_rfc3339_nano(&mut out, at(1_700_000_000_120_000_000));
        assert_eq!(out, b"Nats-Time-Stamp: 2023-11-14T22:13:20.12Z");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = at(x % 4_000_000_000_000_000_000);
            assert_eq!(rfc3339_nano(t), oracle(t));
        }
    }
}
