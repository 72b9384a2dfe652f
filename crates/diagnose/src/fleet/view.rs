//! The fleet report built from the instances' [`Digest`]s: a pure function of them, so any order
//! or grouping of merges gives the same report.

use super::digest::{Digest, IncidentDigest, Lane};
use super::reading::{self, Reading, Window};
use super::{Partial, VERSION};
use crate::classes::Class;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The fleet report's schema id.
pub const FLEET_SCHEMA: &str = "resolvelab.fleet/v1";

/// Incidents of one upstream on different instances join one fleet incident when one starts
/// within this of another's end (the windows of one event overlap or touch).
const JOIN_MS: i64 = 1_000;

/// One diagnosis over a fleet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fleet {
    /// [`FLEET_SCHEMA`].
    pub schema: String,
    /// The resolvelab version that built it.
    pub resolvelab: String,
    /// First request of any instance, epoch ms.
    pub start_ms: Option<i64>,
    /// Last request of any instance, epoch ms.
    pub end_ms: Option<i64>,
    /// Requests of every instance.
    pub requests: u64,
    /// Failed requests of every instance.
    pub failures: u64,
    /// Of them `no live upstreams`.
    pub nlu: u64,
    /// The instances, by name.
    pub instances: Vec<InstanceRow>,
    /// Each class found, over the fleet.
    pub classes: Vec<FleetClass>,
    /// The fleet's incidents in time order.
    pub incidents: Vec<FleetIncident>,
    /// Each instance's requests per bin, by name (the aligned chart; its own time bins).
    pub timelines: BTreeMap<String, Lane>,
}

/// One instance at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstanceRow {
    /// Its name.
    pub name: String,
    /// First request, epoch ms.
    pub start_ms: Option<i64>,
    /// Last request, epoch ms.
    pub end_ms: Option<i64>,
    /// Requests read.
    pub requests: u64,
    /// Failed requests.
    pub failures: u64,
    /// Of them NLU.
    pub nlu: u64,
    /// Its incidents.
    pub incidents: u64,
    /// Failed requests by class.
    pub classes: BTreeMap<Class, u64>,
    /// Its re-query period: from its logs, else its configuration's `valid=` + 1 s.
    pub requery_period_ms: Option<f64>,
    /// Why its diagnosis does not stand (see `Diagnosis::unusable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
}

/// One class over the fleet.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FleetClass {
    /// The class.
    pub class: Class,
    /// Instances where it was found.
    pub instances: u64,
    /// Incidents, every instance.
    pub incidents: u64,
    /// Failed requests, every instance.
    pub requests: u64,
}

/// One instance's incident inside a fleet incident.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Member {
    /// The instance.
    pub instance: String,
    /// The incident's id in that instance's diagnosis.
    pub incident: usize,
    /// Its class there.
    pub class: Class,
    /// Its first failure, epoch ms.
    pub start_ms: i64,
    /// Its last failure, epoch ms.
    pub end_ms: i64,
    /// Its start minus the fleet incident's start, ms (the instance's phase).
    pub offset_ms: i64,
    /// Its failed requests.
    pub count: u64,
}

/// Incidents on one upstream, on one or more instances, that overlap in time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FleetIncident {
    /// 1-based id in time order.
    pub id: usize,
    /// The upstream.
    pub upstream: String,
    /// First failure on any instance, epoch ms.
    pub start_ms: i64,
    /// Last failure on any instance, epoch ms.
    pub end_ms: i64,
    /// Instances that failed.
    pub hit: u64,
    /// Instances that served requests meanwhile (hit or not).
    pub serving: u64,
    /// Failed requests, every instance.
    pub count: u64,
    /// Latest first-failure minus earliest, over the hit instances, ms.
    pub start_spread_ms: i64,
    /// Latest last-failure minus earliest, over the hit instances, ms.
    #[serde(default)]
    pub end_spread_ms: i64,
    /// The instances' incidents, by start.
    pub members: Vec<Member>,
    /// What the fleet shows.
    pub reading: Reading,
}

impl Fleet {
    /// The report of a partial's instances.
    pub fn of_partial(p: &Partial) -> Fleet {
        let digests: BTreeMap<String, Digest> = p
            .instances
            .iter()
            .map(|(n, d)| (n.clone(), Digest::from(d)))
            .collect();
        Fleet::of(digests)
    }

    /// The report of the instances' digests, by name (their timelines move into it).
    pub fn of(mut ds: BTreeMap<String, Digest>) -> Fleet {
        let instances: Vec<InstanceRow> = ds.iter().map(|(n, d)| row(n, d)).collect();
        Fleet {
            schema: FLEET_SCHEMA.into(),
            resolvelab: VERSION.into(),
            start_ms: instances.iter().filter_map(|i| i.start_ms).min(),
            end_ms: instances.iter().filter_map(|i| i.end_ms).max(),
            requests: instances.iter().map(|i| i.requests).sum(),
            failures: instances.iter().map(|i| i.failures).sum(),
            nlu: instances.iter().map(|i| i.nlu).sum(),
            classes: classes(&ds),
            incidents: incidents(&ds),
            instances,
            timelines: ds
                .iter_mut()
                .map(|(n, d)| (n.clone(), std::mem::take(&mut d.timeline)))
                .collect(),
        }
    }

    /// Those of `classes` found on any instance (for `--fail-on`).
    pub fn found<'a>(&self, classes: &'a [String]) -> Vec<&'a str> {
        classes
            .iter()
            .filter(|c| self.classes.iter().any(|s| &&s.class == c))
            .map(String::as_str)
            .collect()
    }
}

fn row(name: &str, d: &Digest) -> InstanceRow {
    InstanceRow {
        name: name.to_string(),
        start_ms: d.start_ms,
        end_ms: d.end_ms,
        requests: d.requests,
        failures: d.failures,
        nlu: d.nlu.total,
        incidents: d.incidents.len() as u64,
        classes: d.classes.iter().map(|c| (c.class, c.requests)).collect(),
        requery_period_ms: d.requery_ms(),
        unusable: d.unusable(),
    }
}

fn classes(ds: &BTreeMap<String, Digest>) -> Vec<FleetClass> {
    let mut by: BTreeMap<Class, FleetClass> = BTreeMap::new();
    for d in ds.values() {
        for c in &d.classes {
            let f = by.entry(c.class).or_insert(FleetClass {
                class: c.class,
                instances: 0,
                incidents: 0,
                requests: 0,
            });
            f.instances += 1;
            f.incidents += c.incidents;
            f.requests += c.requests;
        }
    }
    let mut v: Vec<FleetClass> = by.into_values().collect();
    v.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.class.cmp(&b.class)));
    v
}

/// Cluster every instance's incidents by upstream and overlap, then read each cluster.
fn incidents(ds: &BTreeMap<String, Digest>) -> Vec<FleetIncident> {
    let mut all: Vec<(&str, &IncidentDigest)> = ds
        .iter()
        .flat_map(|(n, d)| d.incidents.iter().map(move |i| (n.as_str(), i)))
        .collect();
    all.sort_by(|a, b| {
        (&a.1.upstream, a.1.start_ms, a.0, a.1.id).cmp(&(&b.1.upstream, b.1.start_ms, b.0, b.1.id))
    });
    let mut clusters: Vec<Vec<(&str, &IncidentDigest)>> = Vec::new();
    for (n, i) in all {
        match clusters.last_mut() {
            Some(c)
                if c[0].1.upstream == i.upstream
                    && i.start_ms <= c.iter().map(|m| m.1.end_ms).max().unwrap_or(0) + JOIN_MS =>
            {
                c.push((n, i))
            }
            _ => clusters.push(vec![(n, i)]),
        }
    }
    let mut out: Vec<FleetIncident> = clusters.iter().map(|c| cluster(c, ds)).collect();
    out.sort_by(|a, b| (a.start_ms, &a.upstream).cmp(&(b.start_ms, &b.upstream)));
    for (k, f) in out.iter_mut().enumerate() {
        f.id = k + 1;
    }
    out
}

fn cluster(c: &[(&str, &IncidentDigest)], ds: &BTreeMap<String, Digest>) -> FleetIncident {
    let start = c.iter().map(|m| m.1.start_ms).min().unwrap_or(0);
    let end = c.iter().map(|m| m.1.end_ms).max().unwrap_or(0);
    // One window per hit instance: from its first failure to its last in this cluster.
    let mut per: BTreeMap<&str, Window> = BTreeMap::new();
    for (n, i) in c {
        let w = per.entry(n).or_insert(Window {
            start_ms: i.start_ms,
            end_ms: i.end_ms,
            requery_ms: ds[*n].requery_ms(),
        });
        w.start_ms = w.start_ms.min(i.start_ms);
        w.end_ms = w.end_ms.max(i.end_ms);
    }
    let serving = ds
        .iter()
        .filter(|(n, d)| per.contains_key(n.as_str()) || served(d, start, end))
        .count();
    let windows: Vec<Window> = per.values().copied().collect();
    let spread = windows.iter().map(|w| w.start_ms).max().unwrap_or(0)
        - windows.iter().map(|w| w.start_ms).min().unwrap_or(0);
    let end_spread = windows.iter().map(|w| w.end_ms).max().unwrap_or(0)
        - windows.iter().map(|w| w.end_ms).min().unwrap_or(0);
    let mut members: Vec<Member> = c
        .iter()
        .map(|(n, i)| Member {
            instance: n.to_string(),
            incident: i.id,
            class: i.class,
            start_ms: i.start_ms,
            end_ms: i.end_ms,
            offset_ms: i.start_ms - start,
            count: i.count,
        })
        .collect();
    members.sort_by(|a, b| (a.start_ms, &a.instance).cmp(&(b.start_ms, &b.instance)));
    FleetIncident {
        id: 0,
        upstream: c[0].1.upstream.clone(),
        start_ms: start,
        end_ms: end,
        hit: per.len() as u64,
        serving: serving as u64,
        count: c.iter().map(|m| m.1.count).sum(),
        start_spread_ms: spread,
        end_spread_ms: end_spread,
        members,
        reading: reading::read(&c[0].1.upstream, &windows, serving),
    }
}

/// The instance logged requests between `start` and `end` (its timeline's bins).
fn served(d: &Digest, start: i64, end: i64) -> bool {
    let bin = d.timeline.bin_ms.max(1);
    d.timeline
        .points
        .iter()
        .any(|p| p.t_ms + bin > start && p.t_ms <= end && p.ok + p.failed + p.nlu > 0)
}
