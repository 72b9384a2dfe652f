//! The Prometheus exposition: the counters and gauges of one [`Snapshot`], encoded by the
//! `prometheus-client` crate at each scrape. Labels are bounded: classes, signatures, hops,
//! status classes and streams are fixed sets; upstreams are the first `--max-upstreams` seen
//! (the rest `other`); no client, path or peer address is ever a label.

use crate::totals::{Totals, Two};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The label that names an nginx instance when one watch follows several (`{instance}` paths,
/// `kubectl logs --prefix`, a syslog of several hosts, `--instance NAME`). Not `instance`:
/// Prometheus gives that label to the scraped target, which is the watcher.
pub const INSTANCE_LABEL: &str = "nginx_instance";

/// One nginx instance's counters and open failures.
#[derive(Debug, Clone, Default)]
pub struct Part {
    /// Its name (None: the one unnamed instance; its series carry no instance label).
    pub instance: Option<String>,
    /// Its counters.
    pub totals: Totals,
    /// Failures of its open window by upstream, then class (as last classed).
    pub open: Two,
}

/// What one scrape shows.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The instances' counters, one part each (those past `--max-instances` added up as
    /// `other`).
    pub parts: Vec<Part>,
    /// Changes of a name's answer, by name (the answer watcher is the watch's, not an
    /// instance's).
    pub dns_answer_changes: BTreeMap<String, u64>,
    /// Seconds from the newest request read to now.
    pub lag_s: Option<f64>,
    /// Followed paths that cannot be read now, by stream.
    pub unreadable: BTreeMap<String, u64>,
    /// Times a followed file was rotated (renamed or recreated) or truncated, by stream.
    pub rotations: Two,
}

impl Snapshot {
    /// Every instance's counters added up.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in &self.parts {
            t.add(&p.totals, usize::MAX);
        }
        t.dns_answer_changes = self.dns_answer_changes.clone();
        t
    }

    /// Every instance's open failures added up, by upstream and class.
    pub fn open(&self) -> Two {
        let mut m = Two::new();
        for p in &self.parts {
            for (u, inner) in &p.open {
                for (c, n) in inner {
                    *m.entry(u.clone())
                        .or_default()
                        .entry(c.clone())
                        .or_default() += n;
                }
            }
        }
        m
    }
}

/// The shared snapshot the watcher updates and the server encodes.
pub type Shared = Arc<Mutex<Snapshot>>;

#[derive(Debug)]
struct Export(Shared);

/// A registry with `resolvelab_*` metrics read from `shared`.
pub fn registry(shared: Shared) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Export(shared)));
    r
}

/// The exposition text (OpenMetrics) of a registry.
pub fn encode(r: &Registry) -> String {
    let mut s = String::new();
    prometheus_client::encoding::text::encode(&mut s, r).expect("writing to a String");
    s
}

/// Each part's counter picked by `of`, with the part's instance.
fn by_part<T>(parts: &[Part], of: impl Fn(&Part) -> T) -> Vec<(Option<&str>, T)> {
    parts
        .iter()
        .map(|p| (p.instance.as_deref(), of(p)))
        .collect()
}

/// A family by two labels, each series with its instance label (none for the unnamed
/// instance).
fn family2(
    e: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    labels: [&str; 2],
    series: &[(Option<&str>, Two)],
    gauge: bool,
) -> std::fmt::Result {
    let ty = if gauge {
        ConstGauge::new(0i64).metric_type()
    } else {
        ConstCounter::new(0u64).metric_type()
    };
    let mut d = e.encode_descriptor(name, help, None, ty)?;
    for (instance, m) in series {
        for (a, inner) in m {
            for (b, n) in inner {
                let mut ls = Vec::with_capacity(3);
                if let Some(i) = instance {
                    ls.push((INSTANCE_LABEL, *i));
                }
                ls.extend([(labels[0], a.as_str()), (labels[1], b.as_str())]);
                let me = d.encode_family(&ls)?;
                if gauge {
                    ConstGauge::new(*n as i64).encode(me)?;
                } else {
                    ConstCounter::new(*n).encode(me)?;
                }
            }
        }
    }
    Ok(())
}

/// A counter family by one label (as [`family2`]).
fn family1(
    e: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    label: &str,
    series: &[(Option<&str>, BTreeMap<String, u64>)],
) -> std::fmt::Result {
    let c = ConstCounter::new(0u64);
    let mut d = e.encode_descriptor(name, help, None, c.metric_type())?;
    for (instance, m) in series {
        for (v, n) in m {
            let mut ls = Vec::with_capacity(2);
            if let Some(i) = instance {
                ls.push((INSTANCE_LABEL, *i));
            }
            ls.push((label, v.as_str()));
            ConstCounter::new(*n).encode(d.encode_family(&ls)?)?;
        }
    }
    Ok(())
}

/// `m` with a zero for every class of every upstream seen: a counter must exist before its
/// first increase, or `increase()` never sees the step from nothing to its first value.
fn every_class(m: &Two, upstreams: &[String]) -> Two {
    let mut out = m.clone();
    for u in upstreams {
        let inner = out.entry(u.clone()).or_default();
        for c in resolvelab_diagnose::classes::CLASSES {
            inner.entry(c.to_string()).or_insert(0);
        }
    }
    out
}

/// The pairing window's losses ([`Totals::pairing_loss`]), one counter each.
fn pairing_loss(e: &mut DescriptorEncoder, parts: &[Part]) -> std::fmt::Result {
    for (name, help, of) in [
        (
            "resolvelab_pairing_dropped_lines",
            "Error-log lines the pairing window dropped (more within one request's span than it holds), counted when their window closes",
            (|p: &Part| p.totals.pairing_loss.lines) as fn(&Part) -> u64,
        ),
        (
            "resolvelab_pairing_unpaired_failures",
            "Failures that paired with no error line although a line of their span was dropped: each may be classed without its own line",
            |p: &Part| p.totals.pairing_loss.unpaired,
        ),
    ] {
        let c = ConstCounter::new(0u64);
        let mut d = e.encode_descriptor(name, help, None, c.metric_type())?;
        match by_part(parts, of).as_slice() {
            // The one unnamed instance: a series without labels.
            [(None, n)] => ConstCounter::new(*n).encode(d)?,
            series => {
                for (instance, n) in series {
                    let ls = [(INSTANCE_LABEL, instance.unwrap_or(crate::totals::OTHER))];
                    ConstCounter::new(*n).encode(d.encode_family(&ls)?)?;
                }
            }
        }
    }
    Ok(())
}

impl Collector for Export {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = self.0.lock().expect("not poisoned").clone();
        let parts = &s.parts;
        family2(
            &mut e,
            (
                "resolvelab_requests",
                "Requests read from the access logs, by upstream (none: answered without one) and status class",
            ),
            ["upstream", "status_class"],
            &by_part(parts, |p| p.totals.requests.clone()),
            false,
        )?;
        family2(
            &mut e,
            (
                "resolvelab_failed_requests",
                "Failed requests (502/504 or no live upstreams) by upstream and failure class, counted when their incident closes",
            ),
            ["upstream", "class"],
            &by_part(parts, |p| {
                every_class(&p.totals.failed, &p.totals.upstreams)
            }),
            false,
        )?;
        family2(
            &mut e,
            (
                "resolvelab_no_live_upstreams",
                "Requests that ended in no live upstreams, by upstream and hops tried",
            ),
            ["upstream", "hops"],
            &by_part(parts, |p| p.totals.nlu.clone()),
            false,
        )?;
        family2(
            &mut e,
            (
                "resolvelab_incidents",
                "Incidents (clusters of failures) by upstream and class, counted when they close",
            ),
            ["upstream", "class"],
            &by_part(parts, |p| {
                every_class(&p.totals.incidents, &p.totals.upstreams)
            }),
            false,
        )?;
        family2(
            &mut e,
            (
                "resolvelab_open_incident_failures",
                "Failures of the incidents still open, by upstream and class as classed so far",
            ),
            ["upstream", "class"],
            &by_part(parts, |p| p.open.clone()),
            true,
        )?;
        family1(
            &mut e,
            ("resolvelab_error_lines", "Error-log lines by signature"),
            "signature",
            &by_part(parts, |p| p.totals.error_lines.clone()),
        )?;
        family1(
            &mut e,
            (
                "resolvelab_dns_answer_changes",
                "Changes of a name's DNS answer",
            ),
            "name",
            &[(None, s.dns_answer_changes.clone())],
        )?;
        family2(
            &mut e,
            ("resolvelab_lines", "Log lines read, by stream and result"),
            ["stream", "result"],
            &by_part(parts, |p| p.totals.lines.clone()),
            false,
        )?;
        family2(
            &mut e,
            (
                "resolvelab_file_changes",
                "Followed files rotated or truncated, by stream and change",
            ),
            ["stream", "change"],
            &[(None, s.rotations.clone())],
            false,
        )?;
        pairing_loss(&mut e, parts)?;
        let g = ConstGauge::new(0i64);
        let mut d = e.encode_descriptor(
            "resolvelab_unreadable_inputs",
            "Followed paths that cannot be read now (missing, a directory, no permission), by stream",
            None,
            g.metric_type(),
        )?;
        for (stream, n) in &s.unreadable {
            ConstGauge::new(*n as i64).encode(d.encode_family(&[("stream", stream.as_str())])?)?;
        }
        if let Some(lag) = s.lag_s {
            let g = ConstGauge::new(lag);
            g.encode(e.encode_descriptor(
                "resolvelab_lag_seconds",
                "Seconds from the newest request read to now",
                None,
                g.metric_type(),
            )?)?;
        }
        let info =
            prometheus_client::metrics::info::Info::new([("version", env!("CARGO_PKG_VERSION"))]);
        info.encode(e.encode_descriptor(
            "resolvelab_build",
            "The resolvelab build",
            None,
            info.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_conventions() {
        let shared: Shared = Default::default();
        {
            let mut s = shared.lock().unwrap();
            let mut t = Totals::default();
            t.requests
                .entry("be".into())
                .or_default()
                .insert("5xx".into(), 3);
            t.failed
                .entry("be".into())
                .or_default()
                .insert("nxdomain-window".into(), 2);
            t.upstreams.push("be".into());
            s.lag_s = Some(0.5);
            s.parts.push(Part {
                instance: None,
                totals: t.clone(),
                open: Two::new(),
            });
            s.parts.push(Part {
                instance: Some("web-2".into()),
                totals: t,
                open: Two::new(),
            });
        }
        let text = encode(&registry(shared));
        for want in [
            "# TYPE resolvelab_requests counter",
            "resolvelab_requests_total{upstream=\"be\",status_class=\"5xx\"} 3",
            "resolvelab_requests_total{nginx_instance=\"web-2\",upstream=\"be\",status_class=\"5xx\"} 3",
            "resolvelab_failed_requests_total{upstream=\"be\",class=\"nxdomain-window\"} 2",
            "resolvelab_lag_seconds 0.5",
            "resolvelab_incidents_total{upstream=\"be\",class=\"maxfails-wipeout\"} 0",
            "resolvelab_build_info{version=",
            "# EOF",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}
