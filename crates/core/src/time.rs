//! Wall-clock time in epoch microseconds (UTC), the `t_us` of every record.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, now.
pub fn now_us() -> i64 {
    to_us(SystemTime::now())
}

/// Convert a [`SystemTime`] to epoch microseconds (negative before 1970).
pub fn to_us(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// A UTC timestamp suitable for file and directory names: `20261130T055720Z`.
pub fn stamp_utc(t_us: i64) -> String {
    let ts = jiff::Timestamp::from_microsecond(t_us).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ts.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// The UTC time of day with milliseconds (`06:00:01.250`), for live lines.
pub fn clock_ms(t_us: i64) -> String {
    jiff::Timestamp::from_microsecond(t_us)
        .map(|t| t.strftime("%H:%M:%S%.3f").to_string())
        .unwrap_or_else(|_| t_us.to_string())
}

/// RFC 3339 rendering of epoch microseconds, for humans.
pub fn rfc3339(t_us: i64) -> String {
    jiff::Timestamp::from_microsecond(t_us)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| t_us.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_is_utc_compact() {
        // 2026-11-30T05:57:20Z
        assert_eq!(stamp_utc(1_796_018_240_000_000), "20261130T055720Z");
        assert!(now_us() > 1_700_000_000_000_000);
        assert_eq!(clock_ms(1_796_018_240_250_000), "05:57:20.250");
    }
}
