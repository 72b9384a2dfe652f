//! nginx's own size and time values, as its configuration writes them (`128k`, `1m`;
//! `30s`, `1m30s`, `500ms`, bare seconds) and as nginx parses them (`ngx_parse_size`,
//! `ngx_parse_time`): the linter reads them from real configurations, the model from a
//! scenario's `[nginx]` table. And the parameters of an upstream's `server` line
//! ([`ServerParams`]), which the lab writes into its nginx.conf, the model plays and the linter
//! reads from real configurations.
//!
//! ```
//! use resolvelab_core::spec::nginx::{self, ServerParams};
//! assert_eq!(nginx::size("64k"), Some(65536));
//! assert_eq!(nginx::time_ms("1m30s"), Some(90_000));
//! let p = ServerParams::parse(["resolve", "max_fails=0", "backup"]).unwrap();
//! assert!(p.resolve && p.backup && p.max_fails == Some(0));
//! assert_eq!(p.to_string(), " resolve max_fails=0 backup");
//! ```

use std::fmt;

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

/// An nginx time as a scenario wrote it (`30s`, `1m30s`, `500ms`, bare seconds): its value,
/// typed when the file is read, and its text, written verbatim into the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NginxTime {
    ms: u64,
    text: String,
}

impl NginxTime {
    /// The value in milliseconds.
    pub fn ms(&self) -> u64 {
        self.ms
    }

    /// The value.
    pub fn get(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.ms)
    }
}

impl std::str::FromStr for NginxTime {
    type Err = String;
    fn from_str(s: &str) -> Result<NginxTime, String> {
        match time_ms(s) {
            Some(ms) => Ok(NginxTime {
                ms,
                text: s.to_string(),
            }),
            None => Err(format!(
                "`{s}` is not an nginx time (`10s`, `500ms`, `1m30s`, bare seconds)"
            )),
        }
    }
}

impl std::fmt::Display for NginxTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

serde_as_text!(NginxTime);

/// A time in milliseconds as nginx's configuration writes it: whole seconds as `10s`, else
/// `1500ms`.
pub fn time_text(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The parameters of an upstream `server` line after its address
/// (`ngx_http_upstream_server`): `None` and `false` are nginx's defaults (`weight=1`,
/// `max_fails=1`, `fail_timeout=10s`), kept apart from an explicit value because the linter
/// and the lab's renderer care whether the line says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerParams {
    /// `resolve`: re-resolve the name and swap the peers (needs a zone).
    pub resolve: bool,
    /// `weight=N`.
    pub weight: Option<u32>,
    /// `max_fails=N` (0 disables the accounting).
    pub max_fails: Option<u32>,
    /// `fail_timeout=TIME`, in milliseconds.
    pub fail_timeout_ms: Option<u64>,
    /// `backup`.
    pub backup: bool,
    /// `down`.
    pub down: bool,
    /// `service=NAME`: an SRV lookup, one peer per SRV record.
    pub service: Option<String>,
    /// Words nginx knows that nothing here reads (`max_conns=`, `slow_start=`, `route=`, …).
    pub other: Vec<String>,
}

/// nginx's own defaults for what a `server` line leaves out.
impl ServerParams {
    /// `weight` when the line does not say.
    pub const DEFAULT_WEIGHT: u32 = 1;
    /// `max_fails` when the line does not say.
    pub const DEFAULT_MAX_FAILS: u32 = 1;
    /// `fail_timeout` when the line does not say.
    pub const DEFAULT_FAIL_TIMEOUT_MS: u64 = 10_000;

    /// The words after the address, as nginx reads them; an error names the word and why.
    pub fn parse<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<ServerParams, String> {
        let mut p = ServerParams::default();
        for w in words {
            p.read(w)?;
        }
        Ok(p)
    }

    /// Read one word into these parameters.
    pub fn read(&mut self, word: &str) -> Result<(), String> {
        let number = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("`{word}`: `{v}` is not a number"))
        };
        match word.split_once('=') {
            None if word == "resolve" => self.resolve = true,
            None if word == "backup" => self.backup = true,
            None if word == "down" => self.down = true,
            Some(("weight", v)) => self.weight = Some(number(v)?),
            Some(("max_fails", v)) => self.max_fails = Some(number(v)?),
            Some(("fail_timeout", v)) => {
                let ms = time_ms(v).ok_or_else(|| {
                    format!("`{word}`: `{v}` is not an nginx time (`10s`, `500ms`)")
                })?;
                self.fail_timeout_ms = Some(ms);
            }
            Some(("service", v)) => self.service = Some(v.to_string()),
            _ => self.other.push(word.to_string()),
        }
        Ok(())
    }

    /// `max_fails`, or nginx's default.
    pub fn max_fails_or_default(&self) -> u32 {
        self.max_fails.unwrap_or(Self::DEFAULT_MAX_FAILS)
    }

    /// `fail_timeout` in milliseconds, or nginx's default.
    pub fn fail_timeout_ms_or_default(&self) -> u64 {
        self.fail_timeout_ms
            .unwrap_or(Self::DEFAULT_FAIL_TIMEOUT_MS)
    }

    /// `weight`, or nginx's default.
    pub fn weight_or_default(&self) -> u32 {
        self.weight.unwrap_or(Self::DEFAULT_WEIGHT)
    }
}

/// The words as a `server` line writes them, each after a space (`" resolve max_fails=0"`), so
/// `server ADDR{params};` is the line.
impl fmt::Display for ServerParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.resolve {
            f.write_str(" resolve")?;
        }
        if let Some(w) = self.weight {
            write!(f, " weight={w}")?;
        }
        if let Some(m) = self.max_fails {
            write!(f, " max_fails={m}")?;
        }
        if let Some(t) = self.fail_timeout_ms {
            write!(f, " fail_timeout={}", time_text(t))?;
        }
        if self.backup {
            f.write_str(" backup")?;
        }
        if self.down {
            f.write_str(" down")?;
        }
        if let Some(s) = &self.service {
            write!(f, " service={s}")?;
        }
        for w in &self.other {
            write!(f, " {w}")?;
        }
        Ok(())
    }
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

    #[test]
    fn server_params_read_and_write_nginx_words() {
        let p = ServerParams::parse([
            "weight=3",
            "max_fails=0",
            "fail_timeout=1m30s",
            "service=_http._tcp",
            "slow_start=5s",
            "resolve",
        ])
        .unwrap();
        assert_eq!(p.weight, Some(3));
        assert_eq!(p.max_fails_or_default(), 0);
        assert_eq!(p.fail_timeout_ms, Some(90_000));
        assert_eq!(p.service.as_deref(), Some("_http._tcp"));
        assert_eq!(p.other, ["slow_start=5s"]);
        assert_eq!(
            p.to_string(),
            " resolve weight=3 max_fails=0 fail_timeout=90s service=_http._tcp slow_start=5s"
        );
        let d = ServerParams::default();
        assert_eq!(
            (
                d.max_fails_or_default(),
                d.fail_timeout_ms_or_default(),
                d.weight_or_default()
            ),
            (1, 10_000, 1)
        );
        assert_eq!(d.to_string(), "");
        assert!(
            ServerParams::parse(["max_fails=x"])
                .unwrap_err()
                .contains("max_fails=x")
        );
        assert!(ServerParams::parse(["fail_timeout=5q"]).is_err());
        assert_eq!(time_text(1500), "1500ms");
    }
}

/// `proxy_next_upstream` (and `fastcgi_`/`grpc_`/`uwsgi_`/`scgi_next_upstream`): the cases in
/// which nginx passes a request to the next server, as its configuration writes them
/// (`ngx_http_proxy_next_upstream_masks`). Parsed once, where the scenario is read; the
/// renderers of every engine and the model read the typed value.
///
/// ```
/// use resolvelab_core::spec::nginx::NextUpstream;
/// let n: NextUpstream = "error timeout http_502".parse().unwrap();
/// assert!(n.error && n.timeout && n.statuses == [502]);
/// assert_eq!(n.to_string(), "error timeout http_502");
/// assert!("off".parse::<NextUpstream>().unwrap().is_off());
/// assert!("eror".parse::<NextUpstream>().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NextUpstream {
    /// `error`: a connection error, or an error sending or reading the response header.
    pub error: bool,
    /// `timeout`: a timeout connecting, sending or reading the response header.
    pub timeout: bool,
    /// `invalid_header`: an empty or invalid response header.
    pub invalid_header: bool,
    /// `http_NNN`: these response statuses, in the order written.
    pub statuses: Vec<u16>,
    /// `non_idempotent`: POST, LOCK, PATCH are retried too.
    pub non_idempotent: bool,
}

impl NextUpstream {
    /// The statuses nginx accepts as `http_NNN`.
    pub const STATUSES: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];

    /// `off`: no case passes a request on.
    pub fn is_off(&self) -> bool {
        !self.error && !self.timeout && !self.invalid_header && self.statuses.is_empty()
    }
}

impl std::str::FromStr for NextUpstream {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut n = NextUpstream::default();
        let words: Vec<&str> = s.split_whitespace().collect();
        if words.is_empty() {
            return Err(
                "`proxy_next_upstream` is empty: write e.g. `error timeout`, or `off`".into(),
            );
        }
        for w in &words {
            match *w {
                "off" if words.len() == 1 => {}
                "off" => return Err(format!("`{s}`: `off` stands alone")),
                "error" => n.error = true,
                "timeout" => n.timeout = true,
                "invalid_header" => n.invalid_header = true,
                "non_idempotent" => n.non_idempotent = true,
                other => match other
                    .strip_prefix("http_")
                    .and_then(|c| c.parse::<u16>().ok())
                {
                    Some(code) if Self::STATUSES.contains(&code) => n.statuses.push(code),
                    _ => {
                        return Err(format!(
                            "`{other}` is not a `proxy_next_upstream` case (error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent, off)"
                        ));
                    }
                },
            }
        }
        Ok(n)
    }
}

impl fmt::Display for NextUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() && !self.non_idempotent {
            return f.write_str("off");
        }
        let mut w: Vec<String> = Vec::new();
        for (on, name) in [
            (self.error, "error"),
            (self.timeout, "timeout"),
            (self.invalid_header, "invalid_header"),
        ] {
            if on {
                w.push(name.into());
            }
        }
        w.extend(self.statuses.iter().map(|c| format!("http_{c}")));
        if self.non_idempotent {
            w.push("non_idempotent".into());
        }
        f.write_str(&w.join(" "))
    }
}

serde_as_text!(NextUpstream);
