//! nginx's own size and time values, as its configuration writes them (`128k`, `1m`;
//! `30s`, `1m30s`, `500ms`, bare seconds) and as nginx parses them (`ngx_parse_size`,
//! `ngx_parse_time`): the linter reads them from real configurations, the model from a
//! scenario's `[nginx]` table.
//!
//! ```
//! use resolvelab_core::spec::nginx;
//! assert_eq!(nginx::size("64k"), Some(65536));
//! assert_eq!(nginx::time_ms("1m30s"), Some(90_000));
//! ```

/// An nginx size (`128k`, `1m`, `1g`, `65536`) in bytes.
pub fn size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// An nginx time (`30s`, `1m30s`, `500ms`, bare seconds) in milliseconds.
pub fn time_ms(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    if let Ok(n) = s.parse::<u64>() {
        return n.checked_mul(1000);
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let mul: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "M" => 2_592_000_000,
            "y" => 31_536_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.checked_add(n.checked_mul(mul)?)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times() {
        assert_eq!(size("128k"), Some(131072));
        assert_eq!(size("1m"), Some(1 << 20));
        assert_eq!(size("x"), None);
        assert_eq!(time_ms("30s"), Some(30_000));
        assert_eq!(time_ms("1m30s"), Some(90_000));
        assert_eq!(time_ms("500ms"), Some(500));
        assert_eq!(time_ms("5"), Some(5000));
        assert_eq!(time_ms("5x"), None);
        assert_eq!(time_ms("s"), None);
    }
}
