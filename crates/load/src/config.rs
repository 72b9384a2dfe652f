//! What to send, where, and how hard: [`LoadConfig`] and its parts.

use crate::plan::RatePlan;
use anyhow::{Context, bail};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// A parsed `http://host:port/path` target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Host as written (IP literal or name).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `host[:port]` for the `Host` header.
    pub authority: String,
    /// Path and query sent on the request line.
    pub path: String,
}

impl Target {
    /// Parse an `http://` URL and apply the loopback policy to its host (a pure function: no
    /// name is resolved and nothing is connected). `allow_remote` lifts the policy.
    pub fn parse(url: &str, allow_remote: bool) -> anyhow::Result<Target> {
        let uri: Uri = url.parse().map_err(|e| {
            anyhow::anyhow!("target `{url}` is not a URL ({e}); write e.g. http://127.0.0.1:8080/")
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => bail!(
                "target `{url}`: https is not supported (the lab speaks plain HTTP/1.1 on loopback); use http://"
            ),
            Some(other) => bail!("target `{url}`: scheme `{other}` is not supported; use http://"),
            None => bail!("target `{url}` has no scheme; write http://{url}"),
        }
        let host = uri
            .host()
            .ok_or_else(|| {
                anyhow::anyhow!("target `{url}` has no host; write e.g. http://127.0.0.1:8080/")
            })?
            .to_string();
        resolvelab_core::policy::check_host(&host, allow_remote).map_err(|e| anyhow::anyhow!(e))?;
        let port = uri.port_u16().unwrap_or(80);
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_else(|| host.clone());
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into());
        Ok(Target {
            url: url.to_string(),
            host,
            port,
            authority,
            path,
        })
    }

    /// The socket address to connect to. IP literals and `localhost` never touch DNS; other
    /// names (only accepted with `allow_remote`) are resolved, and every resolved address is
    /// checked against the policy again.
    pub async fn resolve(&self, allow_remote: bool) -> anyhow::Result<SocketAddr> {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        let addr = if bare.eq_ignore_ascii_case("localhost") {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.port)
        } else if let Ok(ip) = bare.parse::<IpAddr>() {
            SocketAddr::new(ip, self.port)
        } else {
            tokio::net::lookup_host((bare, self.port))
                .await
                .with_context(|| format!("cannot resolve `{bare}` of target {}", self.url))?
                .next()
                .ok_or_else(|| anyhow::anyhow!("`{bare}` of target {} has no address", self.url))?
        };
        resolvelab_core::policy::check_target(addr, allow_remote)
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok(addr)
    }
}

/// A weighted method mix (`GET=0.8,POST=0.2`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// Methods with their cumulative share in (0, 1].
    pub methods: Vec<(Method, f64)>,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            methods: vec![(Method::GET, 1.0)],
        }
    }
}

impl Mix {
    /// Parse `GET=0.8,POST=0.2` (weights are normalised; `GET` alone means all GET), with the
    /// vocabulary's one parser ([`resolvelab_core::spec::mix::Mix`]).
    pub fn parse(s: &str) -> Result<Mix, String> {
        let m: resolvelab_core::spec::mix::Mix =
            s.parse().map_err(|e| format!("--mix `{s}`: {e}"))?;
        Mix::from_shares(&m).map_err(|e| format!("--mix `{s}`: {e}"))
    }

    /// The generator's mix of a parsed one: methods as hyper's, shares made cumulative.
    pub fn from_shares(m: &resolvelab_core::spec::mix::Mix) -> Result<Mix, String> {
        let mut acc = 0.0;
        let mut methods = Vec::new();
        for (name, share) in m.shares() {
            let method = Method::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not an HTTP method"))?;
            acc += share;
            methods.push((method, acc));
        }
        Ok(Mix { methods })
    }

    /// Index of the method for a uniform sample `u` in [0, 1).
    pub fn pick(&self, u: f64) -> usize {
        self.methods
            .iter()
            .position(|(_, c)| u < *c)
            .unwrap_or(self.methods.len() - 1)
    }
}

/// Everything one load run needs. Build it with [`LoadConfig::new`] and adjust the fields.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Where to send.
    pub target: Target,
    /// `--rate`.
    pub plan: RatePlan,
    /// `--duration`: caps the plan (required for open-ended plans unless `requests` is set).
    pub duration: Option<Duration>,
    /// `--requests`: caps the number of requests.
    pub requests: Option<u64>,
    /// `--connections`: keep-alive connections (with `--rate max`: the concurrency).
    pub connections: usize,
    /// `false` for `--no-keepalive`: one new connection per request.
    pub keepalive: bool,
    /// `--retry-idempotent`: behave like real clients (browsers, curl, Go's `net/http`): a
    /// GET/HEAD/OPTIONS/TRACE written on a reused keep-alive connection that closed or reset
    /// before any response byte is sent once more on a new connection (counted as
    /// `client_retries`). Off by default: the lab counts such a request as failed. Open loop
    /// only.
    pub retry_idempotent: bool,
    /// `--mix`.
    pub mix: Mix,
    /// `--body-size`: body bytes for methods other than GET/HEAD/DELETE/OPTIONS.
    pub body_size: usize,
    /// `--timeout`: from the send to the last body byte; also how long a request may wait for
    /// a connection past its scheduled time before it counts as `late`.
    pub timeout: Duration,
    /// `--max-in-flight`: requests outstanding at once; a request due while it is full is `dropped`.
    pub max_in_flight: usize,
    /// `--header NAME:VALUE` extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `--header-capture NAME`: response header recorded per request.
    pub header_capture: Option<HeaderName>,
    /// `--allow-remote`: lift the loopback-only policy.
    pub allow_remote: bool,
    /// Seed of the method-mix RNG (and the body bytes).
    pub seed: u64,
    /// `--realtime`: run the open-loop lane threads with `SCHED_FIFO` priority, so a machine
    /// busy with other work cannot delay dispatch (needs root or `CAP_SYS_NICE`; open loop
    /// only).
    pub realtime: bool,
    /// Without `realtime`: ask for a 100 µs scheduler slice on the lane threads (Linux 6.12+,
    /// no privilege), so a lane waking at a request's time preempts a busy neighbour instead
    /// of waiting for the next tick. On by default; off only to measure what it does.
    pub short_slice: bool,
    /// Open loop: the number of lanes (threads, each with its own keep-alive pool and every
    /// n-th request). `None`: one per worker of the calling runtime. The lab runner asks for one,
    /// so that nginx sees a single pool reusing its most recently returned connection, the
    /// client the simulator models.
    pub lanes: Option<usize>,
}

impl LoadConfig {
    /// A config with the defaults of the CLI: keep-alive pool of 64, GET only, 10 s timeout,
    /// 10,000 in flight, seed 1. Fails on a non-`http` URL or a non-loopback host.
    pub fn new(url: &str, plan: RatePlan, allow_remote: bool) -> anyhow::Result<LoadConfig> {
        Ok(LoadConfig {
            target: Target::parse(url, allow_remote)?,
            plan,
            duration: None,
            requests: None,
            connections: 64,
            keepalive: true,
            retry_idempotent: false,
            mix: Mix::default(),
            body_size: 0,
            timeout: Duration::from_secs(10),
            max_in_flight: 10_000,
            headers: Vec::new(),
            header_capture: None,
            allow_remote,
            seed: 1,
            realtime: false,
            short_slice: true,
            lanes: None,
        })
    }

    /// Check the bounds: every run must end by itself.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.connections == 0 {
            bail!("--connections must be at least 1");
        }
        if self.max_in_flight == 0 {
            bail!("--max-in-flight must be at least 1");
        }
        if self.realtime && !self.plan.is_open_loop() {
            bail!(
                "--realtime applies to open-loop schedules only; with --rate max it would let the workers starve the server"
            );
        }
        if self.timeout.is_zero() {
            bail!("--timeout must be above 0, e.g. --timeout 5s");
        }
        let bounded =
            self.duration.is_some() || self.requests.is_some() || self.plan.length().is_some();
        if !bounded {
            bail!(
                "--rate {} never ends by itself: add --duration (e.g. --duration 10s) or --requests N",
                self.plan
            );
        }
        Ok(())
    }
}

/// Parse `Name: value` (or `Name=value`) for `--header`.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (n, v) = s
        .split_once(':')
        .or_else(|| s.split_once('='))
        .ok_or_else(|| format!("--header `{s}`: write `Name: value`"))?;
    let name = HeaderName::from_bytes(n.trim().as_bytes())
        .map_err(|_| format!("--header `{s}`: `{}` is not a header name", n.trim()))?;
    let value = HeaderValue::from_str(v.trim())
        .map_err(|_| format!("--header `{s}`: the value is not a valid header value"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_policy_is_a_pure_check() {
        let t = Target::parse("http://127.0.0.20:8080/x?y=1", false).unwrap();
        assert_eq!((t.port, t.path.as_str()), (8080, "/x?y=1"));
        assert_eq!(t.authority, "127.0.0.20:8080");
        assert_eq!(Target::parse("http://[::1]/", false).unwrap().port, 80);
        assert!(Target::parse("http://localhost:1/", false).is_ok());
        for remote in [
            "http://10.1.2.3/",
            "http://192.0.2.1:80/",
            "http://example.com/",
            "http://[2001:db8::1]/",
        ] {
            let e = Target::parse(remote, false).unwrap_err().to_string();
            assert!(e.contains("--allow-remote"), "{remote}: {e}");
            assert!(Target::parse(remote, true).is_ok(), "{remote}");
        }
        assert!(
            Target::parse("https://127.0.0.1/", false)
                .unwrap_err()
                .to_string()
                .contains("https")
        );
        assert!(Target::parse("127.0.0.1:80", false).is_err());
    }

    #[test]
    fn mix_weights() {
        let m = Mix::parse("GET=0.8,POST=0.2").unwrap();
        assert_eq!(m.pick(0.1), 0);
        assert_eq!(m.pick(0.85), 1);
        assert_eq!(m.pick(0.9999), 1);
        assert_eq!(Mix::parse("put").unwrap().methods[0].0, Method::PUT);
        assert!(Mix::parse("GET=x").is_err());
        assert!(Mix::parse("GET=0").is_err());
    }

    #[test]
    fn unbounded_is_refused() {
        let c = LoadConfig::new(
            "http://127.0.0.1:1/",
            RatePlan::parse("100").unwrap(),
            false,
        )
        .unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("--duration"));
        let c = LoadConfig {
            requests: Some(10),
            ..c
        };
        assert!(c.validate().is_ok());
        let max = LoadConfig {
            plan: RatePlan::Max,
            realtime: true,
            ..c
        };
        assert!(
            max.validate()
                .unwrap_err()
                .to_string()
                .contains("--realtime")
        );
        assert!(parse_header("x-a: b").is_ok());
        assert!(parse_header("nope").is_err());
    }
}
