//! Go's `time.Duration` text: parsing as `time.ParseDuration` accepts it (`1h2m3.5s`,
//! `300ms`, `1us`/`1µs`, `-2s`, a bare `0`) and formatting as `Duration.String` writes it
//! (`5s`, `1m30s`, `1.5ms`, `0s`). Used by NAK delays, status texts such as `Exceeded
//! MaxRequestExpires of 5s`, and the stream side's `Nats-TTL`.

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;

fn unit(u: &str) -> Option<u64> {
    Some(match u {
        "ns" => NS,
        "us" | "\u{b5}s" | "\u{3bc}s" => US,
        "ms" => MS,
        "s" => SEC,
        "m" => MIN,
        "h" => HOUR,
        _ => return None,
    })
}

/// Parse a Go duration into nanoseconds; `None` where Go reports an error (empty text, a
/// missing or unknown unit, a number without digits, overflow of int64).
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..)?),
        Some(b'+') => (false, s.get(1..)?),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        // The integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_txt, after) = rest.split_at(int_len);
        let mut v: u64 = 0;
        for d in int_txt.bytes() {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            if v > 1 << 63 {
                return None;
            }
        }
        rest = after;
        // An optional fraction: digits past what fits are dropped, as Go does.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut frac_len = 0;
        if let Some(r) = rest.strip_prefix('.') {
            frac_len = r.bytes().take_while(u8::is_ascii_digit).count();
            let (frac_txt, after) = r.split_at(frac_len);
            let mut overflow = false;
            for d in frac_txt.bytes() {
                if overflow {
                    continue;
                }
                match frac.checked_mul(10).and_then(|f| f.checked_add(u64::from(d - b'0'))) {
                    Some(f) if f <= 1 << 63 => {
                        frac = f;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            rest = after;
        }
        if int_len == 0 && frac_len == 0 {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let (unit_txt, after) = rest.split_at(unit_len);
        let u = unit(unit_txt)?;
        rest = after;
        if v > (1u64 << 63) / u {
            return None;
        }
        let mut part = v * u;
        if frac > 0 {
            part = part.checked_add((frac as f64 * (u as f64 / scale)) as u64)?;
            if part > 1 << 63 {
                return None;
            }
        }
        total = total.checked_add(part)?;
        if total > 1 << 63 {
            return None;
        }
    }
    if neg {
        Some(0i64.wrapping_sub_unsigned(total))
    } else if total > i64::MAX as u64 {
        None
    } else {
        Some(total as i64)
    }
}

/// Write `v` / 10^prec with the fraction's trailing zeros dropped.
fn frac(v: u64, prec: u32) -> String {
    let p = 10u64.pow(prec);
    let (int, mut f) = (v / p, v % p);
    if f == 0 {
        return int.to_string();
    }
    let mut digits = prec as usize;
    while f % 10 == 0 {
        f /= 10;
        digits -= 1;
    }
    format!("{int}.{f:0digits$}")
}

/// Go's `Duration.String` of nanoseconds.
pub fn format_go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    if u < SEC {
        let (v, prec, unit) = if u < US {
            (u, 0, "ns")
        } else if u < MS {
            (u, 3, "\u{b5}s")
        } else {
            (u, 6, "ms")
        };
        return format!("{sign}{}{unit}", frac(v, prec));
    }
    let secs = frac(u % MIN, 9);
    let mins = (u / MIN) % 60;
    let hours = u / HOUR;
    if hours > 0 {
        format!("{sign}{hours}h{mins}m{secs}s")
    } else if mins > 0 {
        format!("{sign}{mins}m{secs}s")
    } else {
        format!("{sign}{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_go() {
        let cases: &[(&str, Option<i64>)] = &[
            ("0", Some(0)),
            ("-0", Some(0)),
            ("1s", Some(1_000_000_000)),
            ("1h2m3.5s", Some(3_723_500_000_000)),
            ("300ms", Some(300_000_000)),
            ("1us", Some(1_000)),
            ("1\u{b5}s", Some(1_000)),
            ("1\u{3bc}s", Some(1_000)),
            ("-1.5h", Some(-5_400_000_000_000)),
            ("+5m", Some(300_000_000_000)),
            (".5s", Some(500_000_000)),
            ("1.s", Some(1_000_000_000)),
            ("1.000000001s", Some(1_000_000_001)),
            ("2562047h47m16.854775807s", Some(i64::MAX)),
            ("-2562047h47m16.854775808s", Some(i64::MIN)),
            ("2562047h47m16.854775808s", None),
            ("9223372036854775808ns", None),
            ("", None),
            ("-", None),
            ("1", None),
            ("s", None),
            (".s", None),
            ("1x", None),
            ("1s ", None),
            ("1d", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_go_duration(s), *want, "{s:?}");
        }
    }

    #[test]
    fn formats_as_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5\u{b5}s"),
            (1_000_000, "1ms"),
            (1_500_000, "1.5ms"),
            (5_000_000_000, "5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-2_000_000_000, "-2s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (ns, want) in cases {
            assert_eq!(format_go_duration(*ns), *want, "{ns}");
        }
    }
}
