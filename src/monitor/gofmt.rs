//! Go's text forms that the monitoring JSON carries: `time.Duration.String()` (`rtt`,
//! `last_seen`), nats-server's whole-second uptime strings (`uptime`, `idle`), and
//! `strconv`'s parsing of query values with its error texts.

use std::time::Duration;

/// nats-server's uptime string: `6s`, `2m5s`, `1h2m3s`, `2d3h4m5s`, `1y2d3h4m5s`.
pub fn uptime(d: Duration) -> String {
    let mut s = d.as_secs();
    let years = s / (365 * 86_400);
    s %= 365 * 86_400;
    let days = s / 86_400;
    s %= 86_400;
    let hours = s / 3600;
    s %= 3600;
    let mins = s / 60;
    let secs = s % 60;
    if years > 0 {
        format!("{years}y{days}d{hours}h{mins}m{secs}s")
    } else if days > 0 {
        format!("{days}d{hours}h{mins}m{secs}s")
    } else if hours > 0 {
        format!("{hours}h{mins}m{secs}s")
    } else if mins > 0 {
        format!("{mins}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// Go's `time.Duration.String()` for a non-negative duration: `0s`, `312ns`, `1.5µs`,
/// `2.345ms`, `1.5s`, `1m2.5s`, `2h0m0s`.
pub fn go_duration(d: Duration) -> String {
    let n = d.as_nanos();
    if n == 0 {
        return "0s".to_string();
    }
    if n < 1_000 {
        return format!("{n}ns");
    }
    if n < 1_000_000 {
        return format!("{}µs", frac(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{}ms", frac(n, 1_000_000));
    }
    let secs = n / 1_000_000_000;
    let sub = n % 1_000_000_000;
    let h = secs / 3600;
    let m = (secs % 3600) / 60;
    let s = secs % 60;
    let sec_text = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    if h > 0 {
        format!("{h}h{m}m{sec_text}s")
    } else if m > 0 {
        format!("{m}m{sec_text}s")
    } else {
        format!("{sec_text}s")
    }
}

/// `n / unit` with the fraction's trailing zeros dropped.
fn frac(n: u128, unit: u128) -> String {
    let whole = n / unit;
    let rest = n % unit;
    if rest == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// The RTT as nats-server shows it: truncated to microseconds between 1µs and 1ms.
pub fn rtt(d: Duration) -> String {
    let d = if d > Duration::from_micros(1) && d < Duration::from_millis(1) {
        Duration::from_micros(d.as_micros() as u64)
    } else {
        d
    };
    go_duration(d)
}

/// Go's `strconv.Quote` of a query value, as strconv's errors show it.
fn quote(s: &str) -> String {
    crate::proto::reply::go_quote(s.as_bytes())
}

/// `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {}: invalid syntax", quote(s))),
    }
}

/// `strconv.Atoi` (64-bit `int`).
pub fn parse_int(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {}: invalid syntax", quote(s)));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", quote(s)))
}

/// `strconv.ParseUint(s, 10, 64)`.
pub fn parse_uint(s: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {}: invalid syntax", quote(s)));
    }
    s.parse::<u64>()
        .map_err(|_| format!("strconv.ParseUint: parsing {}: value out of range", quote(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_strings() {
        let cases = [
            (6, "6s"),
            (125, "2m5s"),
            (3723, "1h2m3s"),
            (2 * 86400 + 3 * 3600 + 4 * 60 + 5, "2d3h4m5s"),
            (365 * 86400 + 86400 + 1, "1y1d0h0m1s"),
        ];
        for (secs, want) in cases {
            assert_eq!(uptime(Duration::from_secs(secs)), want);
        }
    }

    #[test]
    fn go_duration_strings() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(312), "312ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(312), "312µs"),
            (Duration::from_nanos(2_345_000), "2.345ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(62) + Duration::from_millis(500), "1m2.5s"),
            (Duration::from_secs(7200), "2h0m0s"),
            (Duration::from_nanos(1_000_000_001), "1.000000001s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
        assert_eq!(rtt(Duration::from_nanos(312_456)), "312µs");
        assert_eq!(rtt(Duration::from_nanos(1_234_567)), "1.234567ms");
        assert_eq!(rtt(Duration::from_nanos(900)), "900ns");
    }

    #[test]
    fn strconv_like_go() {
        assert_eq!(parse_bool("T"), Ok(true));
        assert_eq!(parse_bool("False"), Ok(false));
        assert_eq!(
            parse_bool("yes"),
            Err("strconv.ParseBool: parsing \"yes\": invalid syntax".to_string())
        );
        assert_eq!(parse_int("-12"), Ok(-12));
        assert_eq!(parse_int("+3"), Ok(3));
        assert_eq!(
            parse_int("1.5"),
            Err("strconv.Atoi: parsing \"1.5\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_int("99999999999999999999"),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".to_string())
        );
        assert_eq!(parse_uint("7"), Ok(7));
        assert_eq!(
            parse_uint("-1"),
            Err("strconv.ParseUint: parsing \"-1\": invalid syntax".to_string())
        );
    }
}
