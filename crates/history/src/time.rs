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
    let frac_us = match b.get(i) {
        None => 0,
        Some(b'.') => fraction_us(&b[i + 1..])?,
        Some(_) => return None,
    };
    Some(secs * 1_000_000 + frac_us)
}

/// The digits after a decimal point, in µs (digits past the sixth count for nothing).
#[inline]
fn fraction_us(b: &[u8]) -> Option<i64> {
    // The digits read as one integer, then scaled once: a running `scale /= 10` put a
    // division in every digit's dependency chain (2 % of a 10 M-line `lab` pass).
    const SCALE: [i64; 7] = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];
    let mut frac: i64 = 0;
    for &c in b.iter().take(6) {
        if !c.is_ascii_digit() {
            return None;
        }
        frac = frac * 10 + (c - b'0') as i64;
    }
    if b.len() > 6 && !b[6..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(frac * SCALE[b.len().min(6)])
}

/// [`parse_msec`] that remembers the last whole seconds it read (ten digits, the epoch
/// seconds from 2001 to 2286): the lines of one second share them, and only the milliseconds
/// are read again.
#[derive(Default)]
pub struct MsecReader {
    /// The last ten-digit seconds read, as a word and a half-word, and their value (`None`:
    /// none yet). Compared as integers: an array compare was a call to `memcmp` per line.
    last: Option<(u64, u16, i64)>,
}

impl MsecReader {
    /// [`parse_msec`] of `b`.
    #[inline]
    pub fn read(&mut self, b: &[u8]) -> Option<i64> {
        let ten = b.get(..10).map(|t| {
            (
                u64::from_le_bytes(t[..8].try_into().expect("8 bytes")),
                u16::from_le_bytes(t[8..].try_into().expect("2 bytes")),
            )
        });
        if let (Some((w, h)), Some((lw, lh, secs))) = (ten, self.last)
            && w == lw
            && h == lh
        {
            match b.get(10) {
                None => return Some(secs * 1_000_000),
                Some(b'.') => return fraction_us(&b[11..]).map(|f| secs * 1_000_000 + f),
                // More digits: other seconds.
                Some(_) => {}
            }
        }
        let us = parse_msec(b)?;
        if let Some((w, h)) = ten
            && matches!(b.get(10), None | Some(b'.'))
        {
            self.last = Some((w, h, us.div_euclid(1_000_000)));
        }
        Some(us)
    }
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

/// The server's UTC offset over time: one offset, or the changes (daylight saving) that the
/// access log's `$time_local` / `$time_iso8601` showed. It places the error log's local times
/// (which carry no offset) on the epoch clock line by line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offsets {
    /// (first epoch second, offset east in seconds), in time order.
    segs: Vec<(i64, i32)>,
    /// The latest epoch second seen with the current offset.
    last_seen: i64,
    /// No more changes will come: a local time that goes back is a late line, not a change not
    /// seen yet.
    sealed: bool,
}

/// Where one file's lines are on an [`Offsets`] schedule: lines of one file are in time order,
/// so a local time that goes back marks the repeated hour of a change back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileClock {
    seg: usize,
    last_local: Option<i64>,
}

impl Offsets {
    /// One offset for all time.
    pub fn fixed(offset_s: i32) -> Offsets {
        Offsets {
            segs: vec![(i64::MIN, offset_s)],
            last_seen: i64::MIN,
            sealed: true,
        }
    }

    /// `offset_s` until [`Offsets::observe`] says otherwise; [`Offsets::seal`] when the access
    /// log has been read.
    pub fn open(offset_s: i32) -> Offsets {
        Offsets {
            sealed: false,
            ..Offsets::fixed(offset_s)
        }
    }

    /// No more changes will be observed.
    pub fn seal(&mut self) {
        self.sealed = true;
    }

    /// The changes seen so far: (first epoch second, offset).
    pub fn segments(&self) -> &[(i64, i32)] {
        &self.segs
    }

    /// An access line at epoch second `utc_s` showed `offset_s`. A new offset starts at the
    /// latest half hour after the last line of the old one (changes happen on the hour or the
    /// half hour); a line of the offset before, minutes after a change, is a late line (several
    /// workers) and changes nothing.
    #[inline]
    pub fn observe(&mut self, utc_s: i64, offset_s: i32) {
        let &(from, cur) = self.segs.last().expect("never empty");
        if offset_s == cur {
            self.last_seen = self.last_seen.max(utc_s);
            return;
        }
        let n = self.segs.len();
        if n >= 2 && self.segs[n - 2].1 == offset_s && utc_s < from + 600 {
            return;
        }
        let half = utc_s - utc_s.rem_euclid(1800);
        let start = if half > self.last_seen { half } else { utc_s };
        self.segs
            .push((start.max(from.saturating_add(1)), offset_s));
        self.last_seen = utc_s;
    }

    /// The epoch second of local time `local_s` (read as if UTC) of a file whose previous
    /// line left it at `clock`; the new clock, to keep if the line is used. `None` while it
    /// cannot be placed yet: the file's local time went back by more than two minutes — the
    /// repeated hour of a change back that the access log has not shown yet (not sealed).
    pub fn try_utc(&self, local_s: i64, clock: FileClock) -> Option<(i64, FileClock)> {
        let far_back = clock.last_local.is_some_and(|l| local_s + 120 < l);
        if far_back && !self.sealed && clock.seg + 1 >= self.segs.len() {
            return None;
        }
        Some(self.to_utc(local_s, clock))
    }

    /// [`Offsets::try_utc`], placing the line whatever is known.
    pub fn to_utc(&self, local_s: i64, clock: FileClock) -> (i64, FileClock) {
        if self.segs.len() == 1 {
            let next = FileClock {
                seg: 0,
                last_local: Some(local_s),
            };
            return (local_s - self.segs[0].1 as i64, next);
        }
        let valid = |i: usize| {
            let u = local_s - self.segs[i].1 as i64;
            let end = self.segs.get(i + 1).map_or(i64::MAX, |s| s.0);
            (u >= self.segs[i].0 && u < end).then_some(u)
        };
        let back = clock.last_local.is_some_and(|l| local_s + 60 < l);
        let from = clock.seg.min(self.segs.len() - 1);
        // Stay in the file's segment unless the time left it (or went back: the repeated hour).
        let order = (from + back as usize..self.segs.len()).chain(0..from);
        let seg = order
            .clone()
            .find(|&i| valid(i).is_some())
            .or_else(|| {
                // A local time that does not exist (the skipped hour): the nearest segment.
                (0..self.segs.len()).min_by_key(|&i| {
                    let u = local_s - self.segs[i].1 as i64;
                    let end = self.segs.get(i + 1).map_or(i64::MAX, |s| s.0);
                    if u < self.segs[i].0 {
                        self.segs[i].0 - u
                    } else {
                        u.saturating_sub(end)
                    }
                })
            })
            .unwrap_or(from);
        let next = FileClock {
            seg,
            last_local: Some(local_s),
        };
        (local_s - self.segs[seg].1 as i64, next)
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
        // The reader that remembers the seconds reads every input as parse_msec does,
        // whatever came before it.
        let inputs: [&[u8]; 12] = [
            b"1796018401.123",
            b"1796018401.5",
            b"1796018401",
            b"17960184011.5",
            b"1796018401.12x",
            b"1796018401x",
            b"1796018401.",
            b"179601840",
            b"1796018402.000",
            b"-",
            b"",
            b"1796018401.1234567",
        ];
        let mut r = MsecReader::default();
        for a in inputs {
            for b in inputs {
                r.read(a);
                assert_eq!(r.read(b), parse_msec(b), "{:?} after {:?}", b, a);
            }
        }
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

    #[test]
    fn fractions_read_as_microseconds() {
        let cases: [(&[u8], Option<i64>); 9] = [
            (b"", Some(0)),
            (b"5", Some(500_000)),
            (b"004", Some(4_000)),
            (b"123456", Some(123_456)),
            (b"1234567", Some(123_456)),
            (b"00000099", Some(0)),
            (b"12x", None),
            (b"1234567x", None),
            (b"-", None),
        ];
        for (b, want) in cases {
            assert_eq!(fraction_us(b), want, "{}", String::from_utf8_lossy(b));
        }
    }

    #[test]
    fn a_change_back_places_the_repeated_hour() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST (+02:00) becomes 02:00 CET (+01:00) at 01:00Z.
        let z = |h: i64, m: i64| 1_792_886_400 + h * 3600 + m * 60; // 2026-10-25T00:00Z
        let mut o = Offsets::fixed(7200);
        o.observe(z(0, 30), 7200);
        o.observe(z(0, 59), 7200);
        o.observe(z(1, 3), 3600);
        assert_eq!(o.segments(), &[(i64::MIN, 7200), (z(1, 0), 3600)]);
        // A late line of the old offset right after the change changes nothing.
        o.observe(z(1, 4), 7200);
        assert_eq!(o.segments().len(), 2);
        let local = |h: i64, m: i64| 1_792_886_400 + h * 3600 + m * 60;
        let c = FileClock::default();
        // 02:30 local before the change is 00:30Z; the file then goes back to 02:20 (CET).
        let (u1, c) = o.to_utc(local(2, 30), c);
        assert_eq!(u1, z(0, 30));
        let (u2, c) = o.to_utc(local(2, 20), c);
        assert_eq!(u2, z(1, 20));
        // 03:10 local after the change is 02:10Z.
        let (u3, _) = o.to_utc(local(3, 10), c);
        assert_eq!(u3, z(2, 10));
    }

    #[test]
    fn a_change_forward_skips_an_hour() {
        // 2026-03-29: 02:00 CET (+01:00) becomes 03:00 CEST (+02:00) at 01:00Z.
        let z = |h: i64, m: i64| 1_774_742_400 + h * 3600 + m * 60; // 2026-03-29T00:00Z
        let mut o = Offsets::fixed(3600);
        o.observe(z(0, 50), 3600);
        o.observe(z(1, 0), 7200);
        let local = |h: i64, m: i64| 1_774_742_400 + h * 3600 + m * 60;
        let (u, c) = o.to_utc(local(1, 50), FileClock::default());
        assert_eq!(u, z(0, 50));
        let (u, _) = o.to_utc(local(3, 5), c);
        assert_eq!(u, z(1, 5));
        assert_eq!(Offsets::fixed(-3600).to_utc(100, c).0, 3700);
    }
}
