//! Go's `time.ParseDuration` text (`"1h2m3.5s"`, `"300ms"`, `"1us"`, `"-2s"`), as headers
//! such as `Nats-TTL` and `-NAK <delay>` carry it.

/// Nanoseconds, or `None` where Go's parser fails (also on overflow).
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, s.get(1..)?),
        b'+' => (false, s.get(1..)?),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = rest.get(..num_end)?;
        if num.is_empty() || num == "." {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        rest = rest.get(num_end..)?;
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = rest.get(..unit_end)?;
        rest = rest.get(unit_end..)?;
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += value * scale;
    }
    if total > i64::MAX as f64 {
        return None;
    }
    let ns = total.round() as i64;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration as p;

    #[test]
    fn go_durations() {
        for (s, want) in [
            ("0", Some(0)),
            ("1s", Some(1_000_000_000)),
            ("1h2m3.5s", Some(3_723_500_000_000)),
            ("300ms", Some(300_000_000)),
            ("1us", Some(1_000)),
            ("1µs", Some(1_000)),
            ("-2s", Some(-2_000_000_000)),
            ("", None),
            ("1", None),
            ("s", None),
            ("1x", None),
            ("10000000000h", None),
        ] {
            assert_eq!(p(s), want, "{s}");
        }
    }
}
