//! The counters `watch` exports, added up from the checker: what it counts line by line is
//! added at every tick (from its tally), what it classes is added when the incident closes.

use resolvelab_diagnose::Incident;
use resolvelab_diagnose::checker::tally::Counts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Label value of the upstreams beyond `--max-upstreams`.
pub const OTHER: &str = "other";

/// Label value of the requests answered without an upstream (static files, redirects, a
/// client gone before one was asked).
pub const NO_UPSTREAM: &str = "none";

/// A counter by two labels (outer, inner).
pub type Two = BTreeMap<String, BTreeMap<String, u64>>;

/// Every counter, as the state file keeps it across restarts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Requests by upstream (`none`: answered without one), then status class (`2xx` … `5xx`,
    /// `other`).
    pub requests: Two,
    /// Failed requests by upstream, then class.
    pub failed: Two,
    /// `no live upstreams` failures by upstream, then hops (`1`, `2`, `3+`, `unknown`).
    pub nlu: Two,
    /// Incidents by upstream, then class.
    pub incidents: Two,
    /// Error-log lines by signature.
    pub error_lines: BTreeMap<String, u64>,
    /// Lines read by stream (`access`, `error`, `mixed`), then result (`parsed`, `malformed`,
    /// `skipped`).
    pub lines: Two,
    /// Changes of a name's answer, by name.
    pub dns_answer_changes: BTreeMap<String, u64>,
    /// The upstream label values given so far, in the order first seen (bounded).
    pub upstreams: Vec<String>,
    /// Error-log lines the checker's pairing window dropped (more lines within one request's
    /// span than it holds) and the failures that may have lost their line with them, in the
    /// windows closed so far: `diagnose`'s `parse.pairing_loss`, live.
    #[serde(default)]
    pub pairing_loss: PairingCount,
}

/// [`Totals::pairing_loss`]: dropped lines and the failures that found no line after a drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingCount {
    /// Lines dropped before any failure took them.
    pub lines: u64,
    /// Failures that paired with no line although a line of their span was dropped.
    pub unpaired: u64,
}

/// The status class label of an HTTP status (`502` → `5xx`).
pub fn status_class(status: &str) -> &'static str {
    match status.as_bytes().first() {
        Some(b'1') => "1xx",
        Some(b'2') => "2xx",
        Some(b'3') => "3xx",
        Some(b'4') => "4xx",
        Some(b'5') => "5xx",
        _ => "other",
    }
}

fn add2(m: &mut Two, a: &str, b: &str, n: u64) {
    if n > 0 {
        *m.entry(a.to_string())
            .or_default()
            .entry(b.to_string())
            .or_default() += n;
    }
}

impl Totals {
    /// The label of an upstream: its name among the first `max` seen, else [`OTHER`].
    pub fn upstream_label(&mut self, name: &str, max: usize) -> String {
        if self.upstreams.iter().any(|u| u == name) {
            return name.to_string();
        }
        if self.upstreams.len() < max {
            self.upstreams.push(name.to_string());
            return name.to_string();
        }
        OTHER.to_string()
    }

    /// What the checker counts line by line ([`Counts`]): requests, error lines, lines read.
    /// These add up over any split of the lines, so every tick's lines add theirs.
    pub fn add_lines(&mut self, c: &Counts, max_upstreams: usize) {
        for (upstream, by_class) in &c.requests {
            let u = self.upstream_label(upstream, max_upstreams);
            for (class, n) in by_class {
                add2(&mut self.requests, &u, class, *n);
            }
        }
        for (class, n) in &c.unrouted {
            add2(&mut self.requests, NO_UPSTREAM, class, *n);
        }
        for (id, n) in &c.signatures {
            *self.error_lines.entry(id.to_string()).or_default() += n;
        }
        for (kind, [parsed, malformed, skipped]) in &c.lines {
            add2(&mut self.lines, kind, "parsed", *parsed);
            add2(&mut self.lines, kind, "malformed", *malformed);
            add2(&mut self.lines, kind, "skipped", *skipped);
        }
    }

    /// A closed incident: its failures by class, its NLUs by hops, the incident itself.
    pub fn add_incident(&mut self, i: &Incident, max_upstreams: usize) {
        let u = self.upstream_label(&i.upstream, max_upstreams);
        let class = i.class.id();
        add2(&mut self.failed, &u, class, i.count);
        add2(&mut self.incidents, &u, class, 1);
        let h = &i.hops;
        for (hops, n) in [
            ("1", h.one_hop),
            ("2", h.two_hop),
            ("3+", h.multi_hop),
            ("unknown", h.unknown_hops),
        ] {
            add2(&mut self.nlu, &u, hops, n);
        }
    }

    /// Another instance's counters added to these (the upstreams it names appended, up to
    /// `max`; the rest are `other`).
    pub fn add(&mut self, o: &Totals, max_upstreams: usize) {
        let mut relabel = |m: &Two| -> Two {
            let mut out = Two::new();
            for (u, inner) in m {
                let label = if u == NO_UPSTREAM || u == OTHER {
                    u.clone()
                } else {
                    self.upstream_label(u, max_upstreams)
                };
                for (b, n) in inner {
                    add2(&mut out, &label, b, *n);
                }
            }
            out
        };
        let (requests, failed, nlu, incidents) = (
            relabel(&o.requests),
            relabel(&o.failed),
            relabel(&o.nlu),
            relabel(&o.incidents),
        );
        let plain = |into: &mut Two, m: &Two| {
            for (a, inner) in m {
                for (b, n) in inner {
                    add2(into, a, b, *n);
                }
            }
        };
        plain(&mut self.requests, &requests);
        plain(&mut self.failed, &failed);
        plain(&mut self.nlu, &nlu);
        plain(&mut self.incidents, &incidents);
        plain(&mut self.lines, &o.lines);
        for (k, n) in &o.error_lines {
            *self.error_lines.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &o.dns_answer_changes {
            *self.dns_answer_changes.entry(k.clone()).or_default() += n;
        }
        self.pairing_loss.lines += o.pairing_loss.lines;
        self.pairing_loss.unpaired += o.pairing_loss.unpaired;
    }

    /// Requests by status class, every upstream summed.
    pub fn requests_by_class(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for inner in self.requests.values() {
            for (c, n) in inner {
                *m.entry(c.clone()).or_default() += n;
            }
        }
        m
    }

    /// The sum of a two-label counter.
    pub fn sum(m: &Two) -> u64 {
        m.values().flat_map(|v| v.values()).sum()
    }
}
