//! Turning token text into scalar values: integers with size suffixes, floats, booleans
//! and ISO 8601 dates, with the reference's rules and error messages.

use crate::error::ErrorKind;
use crate::value::DateTime;

/// An integer token (`-12`, `1k`, `2MiB`, ...). `Ok(None)` for a suffix the reference does
/// not know (such as `1kbb`): it sets no value at all for those, and neither do we.
pub(crate) fn integer(text: &str) -> Result<Option<i64>, ErrorKind> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let num: i64 = digits.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
            ErrorKind::IntegerRange(text.to_string())
        }
        _ => ErrorKind::Integer(text.to_string()),
    })?;
    let Some(multiplier) = suffix_multiplier(suffix.trim()) else {
        return Ok(None);
    };
    // Go multiplies int64s and wraps on overflow (8EB is i64::MIN there); so do we.
    Ok(Some(num.wrapping_mul(multiplier)))
}

/// The multiplier for a size suffix: `k`/`m`/`g`/`t`/`p`/`e` are powers of 1000, with `b`,
/// `i` or `ib` after them powers of 1024 (any case).
pub fn suffix_multiplier(suffix: &str) -> Option<i64> {
    let lower = suffix.to_ascii_lowercase();
    let (letter, rest) = match lower.as_bytes() {
        [] => return Some(1),
        [l, rest @ ..] => (*l, rest),
    };
    let power: u32 = match letter {
        b'k' => 1,
        b'm' => 2,
        b'g' => 3,
        b't' => 4,
        b'p' => 5,
        b'e' => 6,
        _ => return None,
    };
    let base: i64 = match rest {
        [] => 1000,
        b"b" | b"i" | b"ib" => 1024,
        _ => return None,
    };
    Some(base.pow(power))
}

pub(crate) fn float(text: &str) -> Result<f64, ErrorKind> {
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(f),
        Ok(_) => Err(ErrorKind::FloatRange(text.to_string())),
        Err(_) => Err(ErrorKind::Float(text.to_string())),
    }
}

pub(crate) fn boolean(text: &str) -> Result<bool, ErrorKind> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => Err(ErrorKind::Bool(text.to_string())),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, with Go's range checks.
pub(crate) fn datetime(text: &str) -> Result<DateTime, ErrorKind> {
    let err = || ErrorKind::DateTime(text.to_string());
    let b = text.as_bytes();
    if b.len() != 20 {
        return Err(err());
    }
    let num = |from: usize, to: usize| -> Result<u16, ErrorKind> {
        let s = text.get(from..to).ok_or_else(err)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err());
        }
        s.parse().map_err(|_| err())
    };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'Z')];
    if seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return Err(err());
    }
    let small = |v: u16| u8::try_from(v).map_err(|_| err());
    DateTime::new(
        num(0, 4)?,
        small(num(5, 7)?)?,
        small(num(8, 10)?)?,
        small(num(11, 13)?)?,
        small(num(14, 16)?)?,
        small(num(17, 19)?)?,
    )
    .ok_or_else(err)
}
