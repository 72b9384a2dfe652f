//! `resolvelab dns watch`: the seeds' `dig` loop as a production probe. It asks a resolver for
//! each name's A (and AAAA) records every interval and records every answer in the query-log
//! schema (`resolvelab.dns/v1`, `"probe": "watch"`), with `changed` when the answer set differs
//! from the previous one and flags for what makes nginx fail: two records at once (a wipeout's
//! precondition), NXDOMAIN/NODATA, SERVFAIL, REFUSED, no answer, AAAA answers. `resolvelab
//! diagnose --dns` reads the file as the names' answer history (stale addresses).
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! use resolvelab_dns::watch::{Watch, watch};
//! use std::time::Duration;
//! let w = Watch {
//!     names: vec!["app.test.local".into()],
//!     server: "127.0.0.1:5300".parse()?,
//!     interval: Duration::from_secs(1),
//!     count: Some(3),
//!     ..Watch::default()
//! };
//! let summary = watch(&w, |obs| println!("{} {} {:?}", obs.qname, obs.rcode, obs.answers)).await?;
//! println!("{} queries, {} changes", summary.queries, summary.changes);
//! # Ok(()) }
//! ```

use crate::client::query_checked;
use crate::engine::{QueryEvent, Transport};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What to watch and how often.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Names to ask for.
    pub names: Vec<String>,
    /// The resolver (or authority) asked.
    pub server: SocketAddr,
    /// Time between two rounds (a round asks every name).
    pub interval: Duration,
    /// Longest wait for one answer.
    pub timeout: Duration,
    /// Ask for AAAA records too.
    pub aaaa: bool,
    /// Stop after this many rounds.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Allow a non-loopback server.
    pub allow_remote: bool,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            names: Vec::new(),
            server: ([127, 0, 0, 1], 53).into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            aaaa: true,
            count: None,
            duration: None,
            allow_remote: false,
        }
    }
}

/// Totals of a watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Queries sent.
    pub queries: u64,
    /// Answers that differed from the previous one of their name and type.
    pub changes: u64,
    /// Answers per flag.
    pub flags: HashMap<String, u64>,
}

impl Watch {
    /// What must hold before anything is sent: a name, a loopback server (or `allow_remote`).
    pub fn check(&self) -> anyhow::Result<()> {
        if self.names.is_empty() {
            anyhow::bail!("dns watch needs at least one NAME");
        }
        resolvelab_core::policy::check_target(self.server, self.allow_remote)
            .map_err(anyhow::Error::msg)
    }
}

/// The flags of one answer (see the module doc).
pub fn flags(qtype: &str, rcode: &str, answers: &[IpAddr]) -> Vec<String> {
    let mut f = Vec::new();
    match rcode {
        // No AAAA record is the usual case; no A record empties nginx's peers like NXDOMAIN.
        "NOERROR" if answers.is_empty() && qtype != "AAAA" => f.push("nodata"),
        "NOERROR" => {}
        "NXDOMAIN" => f.push("nxdomain"),
        "SERVFAIL" => f.push("servfail"),
        "REFUSED" => f.push("refused"),
        "TIMEOUT" => f.push("timeout"),
        _ => f.push("error"),
    }
    if qtype == "A" && answers.len() >= 2 {
        f.push("two-records");
    }
    if qtype == "AAAA" && !answers.is_empty() {
        f.push("aaaa");
    }
    f.into_iter().map(String::from).collect()
}

/// Watch until `count` rounds or `duration` (whichever first; neither: until the caller's
/// future is dropped), calling `on` with every observation as it is made. A refused target
/// (non-loopback without `allow_remote`) is an error before anything is sent.
pub async fn watch(w: &Watch, mut on: impl FnMut(&QueryEvent)) -> anyhow::Result<Summary> {
    w.check()?;
    let qtypes: &[&str] = if w.aaaa { &["A", "AAAA"] } else { &["A"] };
    let start = Instant::now();
    let mut last: HashMap<(String, &str), Vec<IpAddr>> = HashMap::new();
    let mut sum = Summary::default();
    let mut round = 0u64;
    loop {
        if w.count.is_some_and(|c| round >= c) || w.duration.is_some_and(|d| start.elapsed() >= d) {
            return Ok(sum);
        }
        let due = start + w.interval * round as u32;
        tokio::time::sleep_until(due.into()).await;
        for name in &w.names {
            for &qtype in qtypes {
                let obs = observe(w, name, qtype, &mut last).await;
                sum.queries += 1;
                sum.changes += obs.changed as u64;
                for f in &obs.flags {
                    *sum.flags.entry(f.clone()).or_default() += 1;
                }
                on(&obs);
            }
        }
        round += 1;
    }
}

/// One query and what it was answered (over TCP again when the UDP answer was truncated).
async fn observe(
    w: &Watch,
    name: &str,
    qtype: &'static str,
    last: &mut HashMap<(String, &'static str), Vec<IpAddr>>,
) -> QueryEvent {
    let t_us = resolvelab_core::time::now_us();
    let sent = Instant::now();
    let mut transport = Transport::Udp;
    let mut got = query_checked(w.server, name, qtype, transport, w.timeout, w.allow_remote).await;
    if got.as_ref().is_ok_and(|a| a.truncated) {
        transport = Transport::Tcp;
        got = query_checked(w.server, name, qtype, transport, w.timeout, w.allow_remote).await;
    }
    let latency_us = sent.elapsed().as_micros() as u64;
    let (rcode, answers, ttl, id) = match got {
        Ok(a) => (
            a.rcode,
            a.answers,
            a.ttls.iter().copied().min().unwrap_or(0),
            a.id,
        ),
        Err(_) => ("TIMEOUT".to_string(), Vec::new(), 0, 0),
    };
    let mut sorted = answers.clone();
    sorted.sort();
    // A failure says nothing of the records: the next answer is compared with the last one.
    let changed = if matches!(rcode.as_str(), "NOERROR" | "NXDOMAIN") {
        let prev = last.insert((name.to_ascii_lowercase(), qtype), sorted.clone());
        prev.is_some_and(|p| p != sorted)
    } else {
        false
    };
    QueryEvent {
        t_us,
        client: SocketAddr::from(([0, 0, 0, 0], 0)),
        qname: name.trim_end_matches('.').to_ascii_lowercase(),
        qtype: qtype.to_string(),
        transport,
        id,
        mode: String::new(),
        flags: flags(qtype, &rcode, &answers),
        rcode,
        answers,
        ttl,
        changed,
        injected: false,
        truncated: transport == Transport::Tcp,
        probe: Some("watch".into()),
        latency_us: Some(latency_us),
        ..QueryEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_name_what_makes_nginx_fail() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(flags("A", "NOERROR", &[a("10.0.0.1")]).is_empty());
        assert_eq!(
            flags("A", "NOERROR", &[a("10.0.0.1"), a("10.0.0.2")]),
            ["two-records"]
        );
        assert_eq!(flags("A", "NOERROR", &[]), ["nodata"]);
        assert!(flags("AAAA", "NOERROR", &[]).is_empty());
        assert_eq!(flags("AAAA", "NOERROR", &[a("::1")]), ["aaaa"]);
        assert_eq!(flags("A", "NXDOMAIN", &[]), ["nxdomain"]);
        assert_eq!(flags("A", "SERVFAIL", &[]), ["servfail"]);
        assert_eq!(flags("A", "TIMEOUT", &[]), ["timeout"]);
    }

    #[test]
    fn a_remote_server_is_refused_unless_allowed() {
        // The policy as a function: nothing is sent here.
        let mut w = Watch {
            names: vec!["app.example".into()],
            server: "192.0.2.1:53".parse().unwrap(),
            ..Watch::default()
        };
        let e = w.check().unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
        w.allow_remote = true;
        assert!(w.check().is_ok());
        w.names.clear();
        assert!(w.check().is_err());
    }
}
