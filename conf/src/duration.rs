//! Go duration strings (`"2s"`, `"1m30s"`, `"1.5h"`, `"-300ms"`) with Go's
//! `time.ParseDuration` rules and error texts. The config format keeps durations as
//! strings; the server converts them with these helpers.

use std::time::Duration;

/// A string that is not a valid Go duration. The message is Go's (`time: invalid duration "x"`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

const NANOS_PER_UNIT: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // U+00B5 micro sign
    ("\u{3bc}s", 1_000), // U+03BC Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("", 0),
];

const LIMIT: u64 = 1 << 63;

/// Parses a Go duration into signed nanoseconds (Go's `time.Duration`), exactly as
/// `time.ParseDuration` does: a sequence of decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`), with an optional sign;
/// `"0"` needs no unit.
pub fn parse_duration_nanos(text: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError(format!("time: invalid duration {}", go_quote(text)));
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        // Each component starts with a digit or '.'.
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let (whole, rest) = leading_int(s).ok_or_else(invalid)?;
        let had_whole = rest.len() != s.len();
        s = rest;
        let mut fraction: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut had_fraction = false;
        if let Some(rest) = s.strip_prefix('.') {
            let (f, sc, rest2) = leading_fraction(rest);
            had_fraction = rest2.len() != rest.len();
            fraction = f;
            scale = sc;
            s = rest2;
        }
        if !had_whole && !had_fraction {
            return Err(invalid());
        }
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError(format!(
                "time: missing unit in duration {}",
                go_quote(text)
            )));
        }
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let Some(&(_, per_unit)) = NANOS_PER_UNIT.iter().find(|(name, n)| *n > 0 && *name == unit) else {
            return Err(DurationError(format!(
                "time: unknown unit {} in duration {}",
                go_quote(unit),
                go_quote(text)
            )));
        };
        if whole > LIMIT / per_unit {
            return Err(invalid());
        }
        let mut v = whole * per_unit;
        if fraction > 0 {
            // Go computes the fractional part in float64 and truncates.
            v = v.saturating_add((fraction as f64 * (per_unit as f64 / scale)) as u64);
            if v > LIMIT {
                return Err(invalid());
            }
        }
        total = total.saturating_add(v);
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 2^63, so the negation fits (2^63 gives i64::MIN).
        return Ok((total as i64).wrapping_neg());
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// Parses a Go duration into a [`Duration`]; negative durations are an error here.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let nanos = parse_duration_nanos(text)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| DurationError(format!("time: negative duration {}", go_quote(text))))
}

/// Formats nanoseconds the way Go's `Duration.String` does (`1h2m3.5s`, `1.5ms`, `0s`).
pub fn format_duration_nanos(nanos: i64) -> String {
    let negative = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        // Sub-second: one unit with a fraction.
        let (unit, per) = match u {
            0 => return "0s".to_string(),
            1..=999 => ("ns", 1),
            1_000..=999_999 => ("\u{b5}s", 1_000),
            _ => ("ms", 1_000_000),
        };
        out.push_str(&with_fraction(u / per, u % per, per));
        out.push_str(unit);
    } else {
        let secs = u / 1_000_000_000;
        let frac = u % 1_000_000_000;
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&with_fraction(s, frac, 1_000_000_000));
        out.push('s');
    }
    if negative {
        out.insert(0, '-');
    }
    out
}

/// `whole` plus `frac / per` in decimal without trailing zeros.
fn with_fraction(whole: u64, frac: u64, per: u64) -> String {
    if frac == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Leading decimal digits as a number, with what follows; `None` on overflow past 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for b in s.bytes().take(end) {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, s.get(end..).unwrap_or_default()))
}

/// Leading fraction digits (after the '.'): the digits that fit as a number, the power
/// of ten they are scaled by, and what follows. Digits past the precision are skipped.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    let mut scale = 1.0;
    let mut overflow = false;
    for b in s.bytes().take(end) {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, s.get(end..).unwrap_or_default())
}

/// Go's `strconv.Quote` for the strings that reach it here.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    crate::printer::write_string(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_durations() {
        for (text, nanos) in [
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1478s", 1_478_000_000_000),
            ("-5s", -5_000_000_000),
            ("+5s", 5_000_000_000),
            ("-0s", 0),
            ("5.0s", 5_000_000_000),
            ("5.6s", 5_600_000_000),
            ("5.s", 5_000_000_000),
            (".5s", 500_000_000),
            ("1.0s", 1_000_000_000),
            ("1.00s", 1_000_000_000),
            ("1.004s", 1_004_000_000),
            ("1.0040s", 1_004_000_000),
            ("100.00100s", 100_001_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12\u{b5}s", 12_000),
            ("12\u{3bc}s", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14_000_000_000),
            ("15m", 900_000_000_000),
            ("16h", 57_600_000_000_000),
            ("3h30m", 12_600_000_000_000),
            ("10.5s4m", 250_500_000_000),
            ("-2m3.4s", -123_400_000_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("39h9m14.425s", 140_954_425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 1_200_000_000_000),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036.854775807s", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036.854775808s", i64::MIN),
            ("0.100000000000000000000h", 360_000_000_000),
            ("0.830103483285477580700h", 2_988_372_539_827),
            ("1.0000000000000000000000001s", 1_000_000_000),
            ("0.0000000001s", 0),
            ("1.5h", 5_400_000_000_000),
        ] {
            assert_eq!(parse_duration_nanos(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn invalid_durations() {
        for (text, msg) in [
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
            (
                "2562047h47m16.854775808s",
                r#"time: invalid duration "2562047h47m16.854775808s""#,
            ),
            ("1e3s", r#"time: unknown unit "e" in duration "1e3s""#),
            ("1h\"x", r#"time: unknown unit "h\"x" in duration "1h\"x""#),
        ] {
            // Non-ASCII quoting differs from Go's (\u escapes); only the ASCII cases are exact.
            let got = parse_duration_nanos(text).expect_err("invalid").to_string();
            if text.is_ascii() {
                assert_eq!(got, msg, "{text:?}");
            }
        }
    }

    #[test]
    fn std_duration() {
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn format_like_go() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{b5}s"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (240_000_000_000, "4m0s"),
            (5_000_000_000 * 60 + 500_000_000, "5m0.5s"),
            (3_723_000_000_000, "1h2m3s"),
            (-1_000_000_000, "-1s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format_duration_nanos(nanos), text);
        }
    }
}
