//! What the third-party proxies' logs ([`crate::haproxy::log`], [`crate::envoy::log`],
//! [`crate::caddy::log`])
//! become in a run directory: access lines in the lab's nginx format, so the one checker reads
//! every engine's runs, and the proxy's timestamped state lines (an address changed, a server in
//! maintenance, a lookup failed), which the runner writes as `proxy-state` events.

use anyhow::{Context, Result};
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

/// What a conversion found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// Access lines written.
    pub requests: u64,
    /// Timestamped state lines, in order.
    pub states: Vec<(i64, String)>,
    /// Lines neither (untimed notices, or malformed).
    pub other: u64,
}

/// A line of a proxy's log as its module reads it: a request (`A`, the proxy's own access
/// record) or a timestamped state line.
#[derive(Debug, Clone, PartialEq)]
pub enum Line<A> {
    /// A request.
    Access(A),
    /// A state line: a DNS or server state change, a lookup, a failure.
    State {
        /// Epoch µs.
        t_us: i64,
        /// The message.
        message: String,
    },
}

/// One line of a proxy's log, classified.
pub enum Parsed {
    /// A request, as a line of the lab's access log.
    Access(String),
    /// A state change worth keeping as evidence: epoch µs, message.
    State(i64, String),
    /// Anything else.
    Other,
}

impl Parsed {
    /// A module's parsed line (`None`: not one of its lines), its access record written as a
    /// lab line by `lab_line`.
    pub fn of<A>(line: Option<Line<A>>, lab_line: impl Fn(&A) -> String) -> Parsed {
        match line {
            Some(Line::Access(a)) => Parsed::Access(lab_line(&a)),
            Some(Line::State { t_us, message }) => Parsed::State(t_us, message),
            None => Parsed::Other,
        }
    }
}

impl Converted {
    /// Keep a state line, unless the same message was kept less than a second before (a
    /// proxy that logs a failed lookup per request would otherwise flood the events).
    pub fn state(&mut self, t_us: i64, message: String) {
        let repeat = self
            .states
            .iter()
            .rev()
            .find(|(_, m)| *m == message)
            .is_some_and(|(t, _)| t_us - t < 1_000_000);
        if !repeat {
            self.states.push((t_us, message));
        }
    }
}

/// Read `logs` in order, writing their access lines to `access_out` (the lab's format) and
/// collecting their state lines; `parse` classifies one line.
pub fn convert(
    logs: &[&Path],
    access_out: &Path,
    parse: impl Fn(&str) -> Parsed,
) -> Result<Converted> {
    let out = std::fs::File::create(access_out)
        .with_context(|| format!("cannot create {}", access_out.display()))?;
    let mut w = BufWriter::new(out);
    let mut c = Converted::default();
    for log in logs {
        let f =
            std::fs::File::open(log).with_context(|| format!("cannot read {}", log.display()))?;
        for line in std::io::BufReader::new(f).lines() {
            match parse(&line?) {
                Parsed::Access(l) => {
                    writeln!(w, "{l}")?;
                    c.requests += 1;
                }
                Parsed::State(t, m) => c.state(t, m),
                Parsed::Other => c.other += 1,
            }
        }
    }
    w.flush()?;
    c.states.sort_by_key(|(t, _)| *t);
    Ok(c)
}

/// Seconds with milliseconds (`1.234`), `-` for a negative (absent) value.
pub fn secs(ms: i64) -> String {
    if ms < 0 {
        "-".into()
    } else {
        format!("{}.{:03}", ms / 1000, ms % 1000)
    }
}

/// `$msec` from epoch µs.
pub fn msec(t_us: i64) -> String {
    let t_ms = t_us.div_euclid(1000);
    format!("{}.{:03}", t_ms.div_euclid(1000), t_ms.rem_euclid(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_repeated_within_a_second_is_kept_once() {
        let mut c = Converted::default();
        c.state(0, "a".into());
        c.state(500_000, "a".into());
        c.state(600_000, "b".into());
        c.state(1_200_000, "a".into());
        assert_eq!(c.states.len(), 3);
    }

    #[test]
    fn times_read_like_nginx() {
        assert_eq!(msec(1_796_166_921_568_735), "1796166921.568");
        assert_eq!(secs(-1), "-");
        assert_eq!(secs(1234), "1.234");
    }
}
