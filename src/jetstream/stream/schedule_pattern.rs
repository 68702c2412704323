//! The `Nats-Schedule` patterns nats-server 2.14 understands, and when each fires next:
//! `@at <RFC 3339 time>` (once), `@every <Go duration of at least 1s>`, the predefined
//! `@yearly`/`@annually`/`@monthly`/`@weekly`/`@daily`/`@midnight`/`@hourly`, and
//! six-field cron (`sec min hour day-of-month month day-of-week`, with `*`/`?`, ranges,
//! steps, lists and month/weekday names), in UTC or a `Nats-Schedule-Time-Zone`.
//! Missed firings (after a restart) are not replayed: the next one counts from now.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::Timestamp;

const SECOND: i64 = 1_000_000_000;

/// When a schedule fires next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Next {
    /// Unix nanoseconds; 0 for an empty pattern (no schedule).
    pub at: i64,
    pub repeat: bool,
}

/// Go's `time.Round(time.Second)` of Unix nanoseconds.
fn round_second(ns: i64) -> i64 {
    let r = ns.rem_euclid(SECOND);
    let down = ns - r;
    if r >= SECOND / 2 {
        down.saturating_add(SECOND)
    } else {
        down
    }
}

/// The next firing of `pattern` after `ts` (Unix ns, the schedule message's time), with
/// `now` as the present; `None` when the pattern is invalid. `tz` is the time zone
/// header's zone (not allowed with `@at` and `@every`).
pub fn next(pattern: &str, tz: Option<&TimeZone>, ts: i64, now: i64) -> Option<Next> {
    if pattern.is_empty() {
        return Some(Next { at: 0, repeat: false });
    }
    if let Some(t) = pattern.strip_prefix("@at ") {
        if tz.is_some() {
            return None;
        }
        let at = parse_rfc3339(t)?;
        return Some(Next { at, repeat: false });
    }
    if let Some(d) = pattern.strip_prefix("@every ") {
        if tz.is_some() {
            return None;
        }
        let dur = crate::jetstream::api::duration::parse_go_duration(d)?;
        if dur < SECOND {
            return None;
        }
        let mut at = round_second(ts).checked_add(dur)?;
        if at < now {
            at = round_second(now).checked_add(dur)?;
        }
        return Some(Next { at, repeat: true });
    }
    let pattern = match pattern {
        "@yearly" | "@annually" => "0 0 0 1 1 *",
        "@monthly" => "0 0 0 1 * *",
        "@weekly" => "0 0 0 * * 0",
        "@daily" | "@midnight" => "0 0 0 * * *",
        "@hourly" => "0 0 * * * *",
        p => p,
    };
    let cron = Cron::parse(pattern)?;
    let utc = TimeZone::UTC;
    let zone = tz.unwrap_or(&utc);
    let mut at = cron.next_after(ts, zone)?;
    if at < now {
        at = cron.next_after(round_second(now), zone)?;
    }
    Some(Next { at, repeat: true })
}

/// Go's `time.Parse(time.RFC3339, s)`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b.get(10) != Some(&b'T') {
        return None;
    }
    let ts: Timestamp = s.parse().ok()?;
    i64::try_from(ts.as_nanosecond()).ok()
}

/// A parsed six-field cron pattern: a bit per allowed value of each field, and whether
/// the day fields were `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    second: u64,
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

const STAR: u64 = 1 << 63;

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
// Index = value (0 unused for months).
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

fn number(s: &str, names: &[&str]) -> Option<u32> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| !n.is_empty() && *n == lower) {
        return u32::try_from(i).ok();
    }
    // Go's strconv.Atoi: an optional sign and digits; negatives are refused.
    let digits = s.strip_prefix('+').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u32>().ok()
}

fn range(expr: &str, r: &Bounds) -> Option<u64> {
    let mut steps = expr.split('/');
    let span = steps.next()?;
    let step = steps.next();
    if steps.next().is_some() {
        return None;
    }
    let mut ends = span.split('-');
    let low = ends.next()?;
    let high = ends.next();
    if ends.next().is_some() {
        return None;
    }
    let (start, mut end, mut extra) = if low == "*" || low == "?" {
        // Go ignores anything after a star's hyphen.
        (r.min, r.max, STAR)
    } else {
        let start = number(low, r.names)?;
        let end = match high {
            Some(h) => number(h, r.names)?,
            None => start,
        };
        (start, end, 0)
    };
    let step = match step {
        None => 1,
        Some(s) => {
            let step = number(s, &[])?;
            if high.is_none() {
                end = r.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
    };
    if start < r.min || end > r.max || start > end || step == 0 {
        return None;
    }
    let mut bits = 0u64;
    let mut i = start;
    while i <= end {
        bits |= 1 << i;
        i += step;
    }
    Some(bits | extra)
}

fn field(f: &str, r: &Bounds) -> Option<u64> {
    let mut bits = 0;
    for expr in f.split(',').filter(|e| !e.is_empty()) {
        bits |= range(expr, r)?;
    }
    Some(bits)
}

fn has(bits: u64, v: i8) -> bool {
    u32::try_from(v).is_ok_and(|v| v < 63 && bits & (1 << v) != 0)
}

impl Cron {
    pub fn parse(pattern: &str) -> Option<Cron> {
        let f: Vec<&str> = pattern.split_ascii_whitespace().collect();
        let [s, mi, h, dom, mo, dow] = f.as_slice() else {
            return None;
        };
        Some(Cron {
            second: field(s, &SECONDS)?,
            minute: field(mi, &MINUTES)?,
            hour: field(h, &HOURS)?,
            dom: field(dom, &DOM)?,
            month: field(mo, &MONTHS)?,
            dow: field(dow, &DOW)?,
        })
    }

    fn day_matches(&self, d: Date) -> bool {
        let dom = has(self.dom, d.day());
        let dow = has(self.dow, d.weekday().to_sunday_zero_offset());
        if self.dom & STAR != 0 || self.dow & STAR != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first matching second after `ts` (Unix ns) in `tz`, within five years.
    pub fn next_after(&self, ts: i64, tz: &TimeZone) -> Option<i64> {
        let start = Timestamp::from_nanosecond(i128::from(ts.div_euclid(SECOND) * SECOND + SECOND)).ok()?;
        let mut t: DateTime = start.to_zoned(tz.clone()).datetime();
        let limit = t.year().saturating_add(5);
        // Each step moves to the start of the next candidate unit; at most a few
        // thousand steps over five years.
        for _ in 0..200_000 {
            if t.year() > limit {
                return None;
            }
            if !has(self.month, t.month()) {
                let first = t
                    .date()
                    .first_of_month()
                    .checked_add(jiff::Span::new().months(1))
                    .ok()?;
                t = first.to_datetime(jiff::civil::Time::midnight());
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().tomorrow().ok()?.to_datetime(jiff::civil::Time::midnight());
                continue;
            }
            if !has(self.hour, t.hour()) {
                t = t
                    .date()
                    .to_datetime(jiff::civil::time(t.hour(), 0, 0, 0))
                    .checked_add(jiff::Span::new().hours(1))
                    .ok()?;
                continue;
            }
            if !has(self.minute, t.minute()) {
                t = t
                    .date()
                    .to_datetime(jiff::civil::time(t.hour(), t.minute(), 0, 0))
                    .checked_add(jiff::Span::new().minutes(1))
                    .ok()?;
                continue;
            }
            if !has(self.second, t.second()) {
                t = t
                    .with()
                    .subsec_nanosecond(0)
                    .build()
                    .ok()?
                    .checked_add(jiff::Span::new().seconds(1))
                    .ok()?;
                continue;
            }
            let z = t.to_zoned(tz.clone()).ok()?;
            return i64::try_from(z.timestamp().as_nanosecond()).ok();
        }
        None
    }
}

/// Format Unix ns as Go's `time.RFC3339` in UTC (`Nats-Schedule-Next`).
pub fn rfc3339(ns: i64) -> String {
    rfc3339_in(ns, None)
}

/// Format Unix ns as Go's `time.RFC3339` in `tz` (UTC without): `Z` for a zero offset,
/// else `±hh:mm`.
pub fn rfc3339_in(ns: i64, tz: Option<&TimeZone>) -> String {
    let Ok(t) = Timestamp::from_nanosecond(i128::from(ns.div_euclid(SECOND) * SECOND)) else {
        return String::new();
    };
    let z = t.to_zoned(tz.cloned().unwrap_or(TimeZone::UTC));
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// Parse `Nats-Schedule-Next`'s time (Go's `time.RFC3339Nano`).
pub fn parse_next(s: &str) -> Option<i64> {
    parse_rfc3339(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> i64 {
        parse_rfc3339(s).unwrap()
    }

    #[test]
    fn at_and_every() {
        let now = at("2026-01-01T00:00:00Z");
        assert_eq!(
            next("@at 2026-06-01T12:00:00Z", None, now, now),
            Some(Next {
                at: at("2026-06-01T12:00:00Z"),
                repeat: false
            })
        );
        assert_eq!(
            next("@at 2026-06-01T14:00:00+02:00", None, now, now).map(|n| n.at),
            Some(at("2026-06-01T12:00:00Z"))
        );
        assert_eq!(next("@at tomorrow", None, now, now), None);
        assert_eq!(next("@at 2026-06-01", None, now, now), None);
        assert_eq!(next("@at 2026-06-01T12:00:00Z", Some(&TimeZone::UTC), now, now), None);
        assert_eq!(next("", None, now, now), Some(Next { at: 0, repeat: false }));
        let e = next("@every 5s", None, now + 300_000_000, now).unwrap();
        assert_eq!(
            e,
            Next {
                at: now + 5 * SECOND,
                repeat: true
            }
        );
        // Missed: counts from now.
        let late = next("@every 5s", None, now - 60 * SECOND, now).unwrap();
        assert_eq!(late.at, now + 5 * SECOND);
        assert_eq!(next("@every 500ms", None, now, now), None);
        assert_eq!(next("@every x", None, now, now), None);
        assert_eq!(next("@sometimes", None, now, now), None);
    }

    #[test]
    fn cron_next() {
        let now = at("2026-01-01T10:20:30Z"); // a Thursday
        for (pattern, want) in [
            ("* * * * * *", "2026-01-01T10:20:31Z"),
            ("0 * * * * *", "2026-01-01T10:21:00Z"),
            ("0 0 * * * *", "2026-01-01T11:00:00Z"),
            ("@hourly", "2026-01-01T11:00:00Z"),
            ("@daily", "2026-01-02T00:00:00Z"),
            ("@weekly", "2026-01-04T00:00:00Z"),
            ("@monthly", "2026-02-01T00:00:00Z"),
            ("@yearly", "2027-01-01T00:00:00Z"),
            ("*/15 * * * * *", "2026-01-01T10:20:45Z"),
            ("0 30 9-17 * * mon-fri", "2026-01-01T10:30:00Z"),
            ("0 0 12 * * SAT", "2026-01-03T12:00:00Z"),
            ("0 0 0 29 feb *", "2028-02-29T00:00:00Z"),
            ("0 0 0 1,15 * *", "2026-01-15T00:00:00Z"),
            ("0 0 0 13 * 5", "2026-01-02T00:00:00Z"),
        ] {
            let n = next(pattern, None, now, now).unwrap_or_else(|| panic!("{pattern}"));
            assert_eq!(rfc3339(n.at), want, "{pattern}");
            assert!(n.repeat);
        }
        let ams = jiff::tz::db().get("Europe/Amsterdam").unwrap();
        let n = next("0 0 9 * * *", Some(&ams), now, now).unwrap();
        assert_eq!(rfc3339(n.at), "2026-01-02T08:00:00Z");
    }

    #[test]
    fn cron_invalid() {
        let now = at("2026-01-01T00:00:00Z");
        for p in [
            "* * * * *",
            "* * * * * * *",
            "60 * * * * *",
            "* * 24 * * *",
            "* * * 0 * *",
            "* * * * 13 *",
            "* * * * * 7",
            "5-1 * * * * *",
            "*/0 * * * * *",
            "1-2-3 * * * * *",
            "1/2/3 * * * * *",
            "-1 * * * * *",
            "x * * * * *",
            "0 0 0 31 2 *",
        ] {
            assert_eq!(next(p, None, now, now), None, "{p}");
        }
    }

    #[test]
    fn next_header_format() {
        let t = at("2026-03-04T05:06:07Z");
        assert_eq!(rfc3339(t + 123), "2026-03-04T05:06:07Z");
        assert_eq!(parse_next("2026-03-04T05:06:07Z"), Some(t));
        assert_eq!(parse_next("2026-03-04T05:06:07.5Z"), Some(t + 500_000_000));
        let ams = jiff::tz::db().get("Europe/Amsterdam").unwrap();
        assert_eq!(rfc3339_in(t, Some(&ams)), "2026-03-04T06:06:07+01:00");
        assert_eq!(parse_next("2026-03-04T06:06:07+01:00"), Some(t));
        let london = jiff::tz::db().get("Europe/London").unwrap();
        assert_eq!(rfc3339_in(t, Some(&london)), "2026-03-04T05:06:07Z");
    }
}
