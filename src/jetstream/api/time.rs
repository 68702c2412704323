//! Go `time.Time` in the API's JSON: RFC 3339 with nanoseconds in UTC; the zero time is
//! `0001-01-01T00:00:00Z`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch; [`GoTime::ZERO`] is Go's zero time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoTime(pub i64);

impl GoTime {
    /// Go's zero time (serialized as `0001-01-01T00:00:00Z`).
    pub const ZERO: GoTime = GoTime(i64::MIN);

    pub fn now() -> GoTime {
        GoTime::from_system(SystemTime::now())
    }

    pub fn from_system(t: SystemTime) -> GoTime {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => GoTime(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
            Err(e) => GoTime(-i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX)),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.0 == i64::MIN
    }

    /// Unix nanoseconds (0 for the zero time).
    pub fn nanos(&self) -> i64 {
        if self.is_zero() {
            0
        } else {
            self.0
        }
    }

    /// From Unix nanoseconds where 0 means "no time" (the stores' convention).
    pub fn from_nanos_or_zero(ns: i64) -> GoTime {
        if ns == 0 {
            GoTime::ZERO
        } else {
            GoTime(ns)
        }
    }

    /// RFC 3339 with nanoseconds, trailing zeros dropped, as Go's RFC3339Nano.
    pub fn format(&self) -> String {
        if self.is_zero() {
            return "0001-01-01T00:00:00Z".to_string();
        }
        if self.0 >= 0 {
            return crate::proto::gotime::rfc3339_nano(UNIX_EPOCH + Duration::from_nanos(self.0 as u64));
        }
        match jiff::Timestamp::from_nanosecond(i128::from(self.0)) {
            Ok(ts) => ts.to_string(),
            Err(_) => "0001-01-01T00:00:00Z".to_string(),
        }
    }

    /// [`GoTime::format`] appended to `out` (no allocation for times after 1970).
    pub fn format_into(&self, out: &mut Vec<u8>) {
        if self.0 > 0 {
            crate::proto::gotime::push_rfc3339_nano(out, UNIX_EPOCH + Duration::from_nanos(self.0 as u64));
        } else {
            out.extend_from_slice(self.format().as_bytes());
        }
    }

    /// Parse RFC 3339 (any offset, optional fraction).
    pub fn parse(s: &str) -> Option<GoTime> {
        if s == "0001-01-01T00:00:00Z" {
            return Some(GoTime::ZERO);
        }
        let ts: jiff::Timestamp = s.parse().ok()?;
        i64::try_from(ts.as_nanosecond()).ok().map(GoTime)
    }
}

impl Serialize for GoTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.format())
    }
}

impl<'de> Deserialize<'de> for GoTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        GoTime::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::GoTime;

    #[test]
    fn round_trips_and_zero() {
        let t = GoTime::parse("2026-11-29T18:07:58.021170178Z").unwrap();
        assert_eq!(t.format(), "2026-11-29T18:07:58.021170178Z");
        assert_eq!(GoTime::ZERO.format(), "0001-01-01T00:00:00Z");
        assert!(GoTime::parse("0001-01-01T00:00:00Z").unwrap().is_zero());
        assert_eq!(
            GoTime::parse("2026-01-01T01:00:00+01:00").unwrap().format(),
            "2026-01-01T00:00:00Z"
        );
        assert!(GoTime::parse("yesterday").is_none());
    }
}
