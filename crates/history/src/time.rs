//! Timestamps of nginx logs: `$msec`, `$time_local`, `$time_iso8601`, and the error log's
//! offset-less local time.

/// Parse `$msec` (`1796018401.123`, epoch seconds with milliseconds) into epoch µs.
#[inline]
pub fn parse_msec(b: &[u8]) -> Option<i64> {
    let mut secs: i64 = 0;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        secs = secs.checked_mul(10)?.checked_add((b[i] - b'0') as i64)?;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac_us: i64 = 0;
    if i < b.len() {
        if b[i] != b'.' {
            return None;
        }
        i += 1;
        let mut scale = 100_000;
        while i < b.len() {
            let c = b[i];
            if !c.is_ascii_digit() {
                return None;
            }
            frac_us += (c - b'0') as i64 * scale;
            scale /= 10;
            i += 1;
        }
    }
    Some(secs * 1_000_000 + frac_us)
}

/// Parse a non-negative decimal like `$request_time` (`0.004`) into microseconds; `-` → None.
#[inline]
pub fn parse_secs_us(b: &[u8]) -> Option<i64> {
    parse_msec(b)
}

/// Parse a decimal integer.
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    Some(v)
}

/// Parse `$time_local` (`30/Nov/2026:06:00:01 +0900`) into (epoch µs, UTC offset seconds).
pub fn parse_time_local(b: &[u8]) -> Option<(i64, i32)> {
    let s = std::str::from_utf8(b).ok()?;
    let (dt, off) = s.split_once(' ')?;
    let mut it = dt.splitn(4, ['/', ':']);
    let day: i8 = it.next()?.parse().ok()?;
    let mon = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i16 = it.next()?.parse().ok()?;
    let hms = it.next()?;
    let (h, m, sec) = parse_hms(hms)?;
    let off_s = parse_offset(off)?;
    let naive = naive_secs(year, mon, day, h, m, sec)?;
    Some(((naive - off_s as i64) * 1_000_000, off_s))
}

/// Parse `$time_iso8601` (`2026-11-30T06:00:01+09:00`) into (epoch µs, UTC offset seconds).
pub fn parse_iso8601(b: &[u8]) -> Option<(i64, i32)> {
    let s = std::str::from_utf8(b).ok()?;
    if s.len() < 20 {
        return None;
    }
    let (date, rest) = s.split_once('T')?;
    let mut d = date.split('-');
    let year: i16 = d.next()?.parse().ok()?;
    let mon: i8 = d.next()?.parse().ok()?;
    let day: i8 = d.next()?.parse().ok()?;
    let (h, m, sec) = parse_hms(rest.get(..8)?)?;
    let off_s = parse_offset(rest.get(8..)?)?;
    let naive = naive_secs(year, mon, day, h, m, sec)?;
    Some(((naive - off_s as i64) * 1_000_000, off_s))
}

/// Parse the error log's `2026/11/30 06:00:01` into "naive" seconds: the local wall-clock time
/// read as if it were UTC. Subtract the server's UTC offset to get epoch seconds.
pub fn parse_error_time(b: &[u8]) -> Option<i64> {
    if b.len() != 19 || b[4] != b'/' || b[7] != b'/' || b[10] != b' ' {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    let year: i16 = s[0..4].parse().ok()?;
    let mon: i8 = s[5..7].parse().ok()?;
    let day: i8 = s[8..10].parse().ok()?;
    let (h, m, sec) = parse_hms(&s[11..19])?;
    naive_secs(year, mon, day, h, m, sec)
}

fn parse_hms(s: &str) -> Option<(i8, i8, i8)> {
    let b = s.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    Some((
        s[0..2].parse().ok()?,
        s[3..5].parse().ok()?,
        s[6..8].parse().ok()?,
    ))
}

/// Parse a UTC offset: `+0900`, `+09:00`, `-0330`, `Z`.
pub fn parse_offset(s: &str) -> Option<i32> {
    if s == "Z" {
        return Some(0);
    }
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let h: i32 = digits[..2].parse().ok()?;
    let m: i32 = digits[2..].parse().ok()?;
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

/// Render an offset in seconds as `+09:00`.
pub fn format_offset(off_s: i32) -> String {
    let sign = if off_s < 0 { '-' } else { '+' };
    let a = off_s.abs();
    format!("{sign}{:02}:{:02}", a / 3600, (a % 3600) / 60)
}

fn naive_secs(year: i16, mon: i8, day: i8, h: i8, m: i8, s: i8) -> Option<i64> {
    let dt = jiff::civil::DateTime::new(year, mon, day, h, m, s, 0).ok()?;
    let ts = jiff::tz::Offset::UTC.to_timestamp(dt).ok()?;
    Some(ts.as_second())
}

/// The machine's UTC offset at epoch second `t_s` (lab runs are on this machine).
pub fn machine_offset_at(t_s: i64) -> i32 {
    let tz = jiff::tz::TimeZone::system();
    match jiff::Timestamp::from_second(t_s) {
        Ok(ts) => tz.to_offset(ts).seconds(),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_agree() {
        // 2026-11-30T06:00:01Z
        let utc = 1_796_018_401i64;
        assert_eq!(
            parse_msec(b"1796018401.123"),
            Some(utc * 1_000_000 + 123_000)
        );
        assert_eq!(parse_msec(b"1796018401"), Some(utc * 1_000_000));
        assert_eq!(parse_msec(b"-"), None);
        assert_eq!(
            parse_time_local(b"30/Nov/2026:15:00:01 +0900"),
            Some((utc * 1_000_000, 9 * 3600))
        );
        assert_eq!(
            parse_iso8601(b"2026-11-30T15:00:01+09:00"),
            Some((utc * 1_000_000, 9 * 3600))
        );
        assert_eq!(
            parse_error_time(b"2026/11/30 15:00:01"),
            Some(utc + 9 * 3600)
        );
        assert_eq!(parse_offset("-03:30"), Some(-(3 * 3600 + 30 * 60)));
        assert_eq!(format_offset(9 * 3600), "+09:00");
        assert_eq!(parse_secs_us(b"0.004"), Some(4_000));
    }
}
