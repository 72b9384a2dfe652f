//! Clusters, classes, incidents: failures of one group close in time form a cluster; each
//! failure is classified from its facts and what precedes the cluster ([`classify`]); the
//! failures of one class inside a cluster are one incident, with its evidence lines.

use super::access::BUCKET_MS;
use super::errors::{Cites, ERef, SigIndex};
use super::failure::{Store, Traj, host_of};
use super::groups::{Buckets, Groups};
use super::stale::Answers;
use super::swaps::PeerChanges;
use super::traj_label;
use crate::classes::{self, Class, Sig};
use crate::classify::{Facts, Stale, classify};
use crate::evidence::{Race, SwapSource};
use crate::verdict::{Evidence, Incident, NluCounts, Point, Series};
use resolvelab_history::History;
use std::collections::{BTreeMap, HashMap};

/// Failures within this gap (ms) belong to one cluster.
pub(crate) const CLUSTER_GAP_MS: i64 = 1000;
/// A cluster longer than this whose last stretch of this length is mostly successes is a steady
/// trickle, not one incident: it is cut there.
const TRICKLE_SPAN_MS: i64 = 10_000;
/// Incidents that get a zoomed chart series.
pub(crate) const MAX_ZOOMS: usize = 20;

/// A cluster `span_ms` long whose last [`TRICKLE_SPAN_MS`] had `(requests, failed)` (asked only
/// of a long cluster): a trickle when under half failed (or, without an access log, when
/// nothing says it was a burst).
fn trickle(span_ms: i64, last_stretch: impl FnOnce() -> (u64, u64)) -> bool {
    span_ms > TRICKLE_SPAN_MS && {
        let (requests, failed) = last_stretch();
        failed * 2 < requests.max(1)
    }
}

/// What classification reads besides the failures.
pub(super) struct Ctx<'a> {
    pub hist: &'a History,
    pub trajs: &'a [Traj],
    pub groups: &'a Groups,
    pub peers: &'a PeerChanges,
    pub ix: &'a SigIndex,
    pub swaps: SwapSource,
    pub race: Race,
    /// Pairing was by `*cid` (the evidence notes say how a line was paired).
    pub by_cid: bool,
    /// The DNS log's NXDOMAIN answers (indexes into `hist.dns`).
    pub dns_nx: Vec<usize>,
    /// Each name's answers over time (stale addresses).
    pub answers: Answers,
    /// Each address's first success in the access log (ms).
    pub first_ok: HashMap<String, i64>,
    /// The configuration resolves some name only at start (`None`: no configuration given).
    pub resolved_once: Option<bool>,
}

/// The lines around a cluster that its classes look for.
struct Near {
    nx_err: Option<ERef>,
    nx_dns: Option<usize>,
    /// A proxy-state event: the server taken out when its DNS hold ran out (index into
    /// `hist.events`).
    hold: Option<usize>,
    /// A proxy-state event: a DNS cluster's hosts replaced (Envoy), within a refresh before.
    emptied: Option<usize>,
    /// A proxy-state event: a lookup inside a request failed (Caddy).
    lookup_failed: Option<usize>,
    mem: Option<ERef>,
    dis: Option<ERef>,
    p99: Option<ERef>,
}

impl Near {
    fn of(cx: &Ctx<'_>, cs: i64, ce: i64) -> Near {
        let ix = cx.ix;
        let period = cx.peers.requery.unwrap_or(6000.0) as i64;
        let hist = cx.hist;
        Near {
            nx_err: ix.first_in(Sig::ResolveNxdomain, cs - 10_000, ce + 1000),
            nx_dns: cx.dns_nx.iter().copied().find(|&i| {
                let t = hist.dns[i].t_us / 1000;
                t >= cs - period - 2000 && t <= ce
            }),
            // HAProxy says why: `(DNS NX status)`, `(DNS timeout status)`, `(DNS refused
            // status)`, and for a SERVFAIL `(unspecified DNS error)`.
            hold: proxy_state(hist, cs - 2000, ce, |n| {
                n.split_once("going DOWN for maintenance (")
                    .is_some_and(|(_, why)| why.contains("DNS"))
            }),
            emptied: proxy_state(hist, cs - period - 2000, ce, |n| {
                n.contains("DNS hosts have changed")
            }),
            lookup_failed: proxy_state(hist, cs - 1000, ce, |n| {
                n.contains("failed getting dynamic upstreams")
            }),
            mem: ix
                .first_in(Sig::ZoneMemoryExhausted, cs - period - 10_000, ce)
                .or_else(|| ix.first_in(Sig::ZoneSlabAlloc, cs - period - 10_000, ce)),
            dis: ix.first_in(Sig::PeerDisabled, cs - 12_000, ce + 1000),
            p99: ix.first_in(Sig::ConnectEaddrnotavail, cs - 1000, ce + 1000),
        }
    }
}

/// The first proxy-state event in `[from, to]` (ms) whose note is `what`.
fn proxy_state(hist: &History, from: i64, to: i64, what: impl Fn(&str) -> bool) -> Option<usize> {
    hist.events.iter().position(|e| {
        let t = e.t_us / 1000;
        e.kind == resolvelab_core::evidence::event_kind::PROXY_STATE
            && (from..=to).contains(&t)
            && e.note.as_deref().is_some_and(&what)
    })
}

/// Classify every failure and build the incidents, numbered in time order.
pub(super) fn build(store: &mut Store, cx: &Ctx<'_>, cites: &mut Cites) -> Vec<Incident> {
    let mut incidents: Vec<Incident> = Vec::new();
    for (g, idxs) in by_group(store) {
        let cs = match idxs {
            Some(idxs) => clusters(store, cx.groups, &g, idxs),
            None => clusters(store, cx.groups, &g, 0..store.recs.len()),
        };
        for c in cs {
            let near = Near::of(cx, c.start_ms, c.end_ms);
            for part in classify_cluster(store, &c, cx, &g, &near) {
                incidents.push(incident(store, &part, &g, cx, &near, cites));
            }
        }
    }
    let mut order: Vec<usize> = (0..incidents.len()).collect();
    order.sort_by_key(|&i| (incidents[i].start_ms, incidents[i].class.id()));
    order.iter().map(|&i| incidents[i].clone()).collect()
}

/// Number the incidents of a diagnosis in time order and zoom into the first [`MAX_ZOOMS`]
/// (after a time range kept its own: `conclude`).
pub(super) fn number_and_zoom(incidents: &mut [Incident], groups: &Groups) {
    for (n, inc) in incidents.iter_mut().enumerate() {
        inc.id = n + 1;
        if n < MAX_ZOOMS {
            inc.zoom = zoom(groups.of(&inc.upstream), inc.start_ms, inc.end_ms);
        }
    }
}

/// The failures of each group (indexes in time order; `None`: every failure), in name order.
/// The records are far larger than the caches: each pass over them is a read of memory, so
/// the one group of most logs takes none.
fn by_group(store: &Store) -> Vec<(String, Option<Vec<usize>>)> {
    if store.groups.len() == 1 && !store.recs.is_empty() {
        return vec![(store.groups[0].clone(), None)];
    }
    // Bucketed by interned group id (a string comparison per failure costs more than the
    // rest of the grouping), then put in name order.
    let mut by_id: Vec<Vec<usize>> = vec![Vec::new(); store.groups.len()];
    for i in 0..store.recs.len() {
        by_id[store.kind(i).group as usize].push(i);
    }
    let mut by_group: Vec<(String, Option<Vec<usize>>)> = by_id
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(g, v)| (store.groups[g].clone(), Some(v)))
        .collect();
    by_group.sort_by(|a, b| a.0.cmp(&b.0));
    by_group
}

/// Failures of one group close in time, with what is summed over them as they are gathered
/// (one pass over the records rather than one per sum).
struct Cluster {
    /// Indexes in time order.
    members: Vec<usize>,
    /// The earliest start and the latest end of the members.
    start_ms: i64,
    end_ms: i64,
    /// Client-visible failures (weights of the members that are not internal NLUs).
    client: u64,
}

impl Cluster {
    fn of(store: &Store, i: usize) -> Cluster {
        let mut c = Cluster {
            members: Vec::new(),
            start_ms: i64::MAX,
            end_ms: i64::MIN,
            client: 0,
        };
        c.push(store, i);
        c
    }

    fn push(&mut self, store: &Store, i: usize) {
        let r = &store.recs[i];
        self.members.push(i);
        self.start_ms = self.start_ms.min(r.start_ms());
        self.end_ms = self.end_ms.max(r.last_ms());
        if !store.kind(i).internal {
            self.client += r.weight();
        }
    }
}

/// Group `g`'s failures (indexes in time order) cut into clusters.
fn clusters(
    store: &Store,
    groups: &Groups,
    g: &str,
    idxs: impl IntoIterator<Item = usize>,
) -> Vec<Cluster> {
    let recs = &store.recs;
    let mut sums = groups.sums(g).cursor();
    // The last stretch's counts change only with the bucket `t` falls in (a window of
    // TRICKLE_SPAN_MS ends there): asked once per bucket, not once per failure.
    let mut stretch: Option<(i64, (u64, u64))> = None;
    let mut last_stretch = |t: i64| {
        let b = t.div_euclid(BUCKET_MS);
        match stretch {
            Some((sb, n)) if sb == b => n,
            _ => {
                let n = sums.window(t - TRICKLE_SPAN_MS, t);
                stretch = Some((b, n));
                n
            }
        }
    };
    let mut clusters: Vec<Cluster> = Vec::new();
    for i in idxs {
        let t = recs[i].t_ms;
        match clusters.last_mut() {
            Some(c)
                if t - recs[*c.members.last().unwrap()].last_ms() <= CLUSTER_GAP_MS
                    && !trickle(t - recs[c.members[0]].t_ms, || last_stretch(t)) =>
            {
                c.push(store, i)
            }
            _ => clusters.push(Cluster::of(store, i)),
        }
    }
    clusters
}

/// The client-visible failures of one class in a cluster: one incident.
struct Part {
    class: Class,
    /// Indexes in time order.
    members: Vec<usize>,
    tally: Tally,
}

/// The client-visible failures of a cluster by class, in class-id order: one incident each,
/// gathered and tallied as they are classified. Internal NLUs (rescued or not by a later pass)
/// are classified, but the incidents are made of what the client saw.
#[derive(Default)]
struct PerClass {
    out: Vec<Part>,
    /// The entry added to last (a cluster's failures come in runs of one class).
    hit: usize,
}

impl PerClass {
    fn add(&mut self, store: &Store, class: Class, i: usize) {
        // A cluster holds a few classes: a short list searched from its last hit beats a map.
        if self.out.get(self.hit).is_none_or(|e| e.class != class) {
            self.hit = match self.out.iter().position(|e| e.class == class) {
                Some(p) => p,
                None => {
                    self.out.push(Part {
                        class,
                        members: Vec::new(),
                        tally: Tally::new(store),
                    });
                    self.out.len() - 1
                }
            };
        }
        let part = &mut self.out[self.hit];
        part.members.push(i);
        part.tally.add(store, i);
    }

    fn done(mut self) -> Vec<Part> {
        self.out.sort_by_key(|e| e.class.id());
        self.out
    }
}

/// Give each failure of cluster `c` its class and confidence; its client-visible failures by
/// class ([`PerClass`]).
fn classify_cluster(
    store: &mut Store,
    c: &Cluster,
    cx: &Ctx<'_>,
    g: &str,
    near: &Near,
) -> Vec<Part> {
    let (cs, ce) = (c.start_ms, c.end_ms);
    let (req, fail) = cx.groups.window(g, cs, ce);
    let share = if req == 0 {
        1.0
    } else {
        fail as f64 / req as f64
    };
    // Without an access log the successes in between are unknown: no burst is claimed.
    let burst = req > 0 && share >= 0.8 && c.client >= 3;
    let changes = &cx.peers.changes;
    let probable = probable_stale(store, &c.members, cx, cs);
    // With no peer-list change before a failure and no answer history, its facts are its
    // kind's and the cluster's: classified once per kind.
    let timeless = cx.answers.is_empty();
    let mut decided: rustc_hash::FxHashMap<u32, (Class, u16)> = Default::default();
    let mut per = PerClass::default();
    for &i in &c.members {
        let (t_ms, kind) = (store.recs[i].t_ms, store.recs[i].kind);
        let client = !store.kinds[kind as usize].internal;
        let pc = cx.peers.prev_change(t_ms);
        let memo = timeless && pc.is_none();
        if memo && let Some(&(class, conf)) = decided.get(&kind) {
            let r = &mut store.recs[i];
            (r.class, r.conf) = (class, conf);
            if client {
                per.add(store, class, i);
            }
            continue;
        }
        let f = store.kind(i);
        let addrs = store.addrs(i, cx.trajs);
        // The generation race needs a request that started before the change, i.e. one that
        // tried a pre-change peer (DOMAIN.md §8: "all through the pre-swap IP").
        let through_old = pc.is_some_and(|s| {
            let old = &changes[s].old;
            old.is_empty() || addrs.is_empty() || addrs.iter().any(|a| old.contains(&host_of(a)))
        });
        let facts = Facts {
            nlu: f.nlu,
            hops: f.hops,
            addrs: addrs.len(),
            first_try: f.first_try as usize,
            first_try_99: f.first_try_99,
            own_resolution: f.own_dns,
            eaddrnotavail_near: near.p99.is_some(),
            zone_memory_near: near.mem.is_some(),
            nxdomain_near: near.nx_err.is_some() || near.nx_dns.is_some(),
            hold_expired_near: near.hold.is_some(),
            cluster_emptied_near: near.emptied.is_some(),
            lookup_failed_near: near.lookup_failed.is_some(),
            disabled_near: near.dis.is_some(),
            burst,
            share,
            after_change_ms: pc.map(|s| t_ms - changes[s].t_ms),
            through_old,
            paired: f.paired.is_some(),
            stale: match addrs.last() {
                Some(a) if !f.nlu && cx.answers.stale(a, t_ms).is_some() => Stale::Seen,
                Some(a) if !f.nlu && probable.as_deref() == Some(a.as_str()) => Stale::Probable,
                _ => Stale::No,
            },
        };
        let decision = classify(&facts, cx.swaps, cx.race);
        let r = &mut store.recs[i];
        r.class = decision.class;
        r.conf = (decision.confidence * 10_000.0).round() as u16;
        let class = r.class;
        if memo {
            decided.insert(kind, (r.class, r.conf));
        }
        if client {
            per.add(store, class, i);
        }
    }
    per.done()
}

/// Without an answer history that covers it, the address of a cluster whose failures are a
/// probable stale address: at least three, every one a try of that one address (and no `no live upstreams`)
/// that refused, found no route or timed out, an address that served before the cluster, and a
/// configuration (when given) that resolves some name only at start.
fn probable_stale(store: &Store, c: &[usize], cx: &Ctx<'_>, start_ms: i64) -> Option<String> {
    if cx.resolved_once == Some(false) {
        return None;
    }
    one_refused_address(store, c, cx, start_ms)
}

/// The shape of a stale address in the access and error logs alone: at least three failures,
/// every one a try of the one address (no `no live upstreams`) that refused, found no route or
/// timed out, an address that served before `start_ms`, no answer history covering it.
fn one_refused_address(store: &Store, c: &[usize], cx: &Ctx<'_>, start_ms: i64) -> Option<String> {
    let mut addr: Option<&String> = None;
    let mut n = 0u64;
    for &i in c {
        let f = store.kind(i);
        if f.internal {
            continue;
        }
        let connect_failed = matches!(
            f.paired,
            Some(
                Sig::ConnectRefused
                    | Sig::ConnectNoRoute
                    | Sig::ConnectUnreachable
                    | Sig::UpstreamTimeout
            )
        );
        let last = store.addrs(i, cx.trajs).last();
        if f.nlu || !connect_failed || last.is_none() || (addr.is_some() && addr != last) {
            return None;
        }
        addr = last;
        n += store.recs[i].weight();
    }
    let a = addr?;
    // An answer history that saw the name during the failures decides instead (stale or not).
    let served_before = cx.first_ok.get(a).is_some_and(|&t| t < start_ms);
    (n >= 3 && served_before && !cx.answers.covers(a, start_ms)).then(|| a.clone())
}

/// What a stale-address incident rests on: the answer that dropped the address, or — without
/// an answer history — what was seen, what was not, and the command that would decide it.
fn stale_detail(store: &Store, members: &[usize], cx: &Ctx<'_>) -> String {
    let i = members[0];
    let Some(addr) = store.addrs(i, cx.trajs).last() else {
        return String::new();
    };
    let t = store.recs[i].t_ms;
    if let Some(st) = cx.answers.stale(addr, t) {
        return format!(
            "`{addr}` had left `{}`'s DNS answers {} ms before the first failure: nginx was still sending to where the backend used to be.",
            st.name,
            t - st.since_ms
        );
    }
    let config = match cx.resolved_once {
        Some(true) => "the configuration resolves a name only at start (see `resolvelab lint`)",
        _ => {
            "the configuration was not given (--nginx-conf would show whether a name is resolved only at start)"
        }
    };
    format!(
        "Probable, not decided: every failure went to `{addr}`, which served before, and failed to connect; {config}. Not seen: the name's DNS answers. To decide it, compare `dig +short NAME` with `{addr}`, or record the answers (`resolvelab dns watch NAME --server RESOLVER --out dns.jsonl`) and diagnose again with --dns dns.jsonl."
    )
}

/// An upstream failure that has a stale address's shape where the configuration resolves its
/// names again: undetermined between a failed backend and one that moved, said so.
fn followed_name_note(addr: &str) -> String {
    format!(
        "Undetermined: every failure went to `{addr}`, which served before, and failed to connect — a failed backend, or one that moved: the configuration resolves its names again (per request or `resolve`), so a moved backend is followed within the resolver's `valid=` and its old address fails until then. Not seen: the name's DNS answers. To decide it, record them (`resolvelab dns watch NAME --server RESOLVER --out dns.jsonl`) and diagnose again with --dns dns.jsonl."
    )
}

/// The incident of one class's `members` (indexes in time order) inside a cluster of group `g`.
fn incident(
    store: &Store,
    part: &Part,
    g: &str,
    cx: &Ctx<'_>,
    near: &Near,
    cites: &mut Cites,
) -> Incident {
    let (class, members, m) = (part.class, &part.members[..], &part.tally);
    let (s, e) = (m.start_ms, m.end_ms);
    let (req, _) = cx.groups.window(g, s, e);
    let (n, hops, conf) = (m.n, m.hops.clone(), m.conf());
    let share = if req == 0 {
        1.0
    } else {
        (n as f64 / req as f64).min(1.0)
    };
    let mut methods = BTreeMap::new();
    for (id, &w) in m.per_method.iter().enumerate().filter(|(_, w)| **w > 0) {
        let m = store.methods[id].as_deref().unwrap_or("-");
        *methods.entry(m.to_string()).or_insert(0) += w;
    }
    // Offset after the swap: from the first failure's end (the failing selection happens after
    // the swap even when the request started before it).
    let first_end = m.first_end;
    let sw = cx.peers.prev_change(first_end);
    let changes = &cx.peers.changes;
    let evidence = evidence(store, members, class, cx, near, cites, first_end);
    let shape = if req == 0 {
        "unknown"
    } else if share >= 0.8 && n >= 3 {
        "burst"
    } else if share <= 0.5 {
        "isolated"
    } else {
        "mixed"
    };
    let share_text = if req == 0 {
        "no access-log request of this upstream in the window, so the failed share is unknown"
            .to_string()
    } else {
        format!(
            "{shape}, {:.0}% of {req} requests to `{g}` in the window failed",
            share * 100.0
        )
    };
    let detail = format!(
        "{n} failure(s) over {} ms ({share_text}){}.",
        e - s,
        sw.map(|i| format!(
            ", starting {} ms after a peer-list change ({})",
            first_end - changes[i].t_ms,
            changes[i].direction
        ))
        .unwrap_or_default()
    );
    let detail = match class {
        Class::StaleAddress => format!("{detail} {}", stale_detail(store, members, cx)),
        Class::UpstreamFailure if cx.resolved_once == Some(false) => {
            match one_refused_address(store, members, cx, s) {
                Some(a) => format!("{detail} {}", followed_name_note(&a)),
                None => detail,
            }
        }
        _ => detail,
    };
    let (explanation, fix) = match class {
        Class::Undetermined => undetermined_text(store, members, hops.total, cx.race, &detail),
        _ => (
            format!("{} {detail}", classes::explanation(class.id())),
            classes::fix(class.id()).to_string(),
        ),
    };
    Incident {
        id: 0,
        class,
        confidence: (conf * 100.0).round() / 100.0,
        upstream: g.to_string(),
        start_ms: s,
        end_ms: e,
        duration_ms: e - s,
        count: n,
        nlu: hops.total,
        hops,
        requests_in_window: req,
        share_failed: (share * 1000.0).round() / 1000.0,
        shape: shape.to_string(),
        after_swap_ms: sw.map(|i| first_end - changes[i].t_ms),
        swap_direction: sw.map(|i| changes[i].direction.clone()),
        methods,
        evidence,
        explanation,
        fix,
        zoom: Series::default(),
    }
}

/// An undetermined incident's explanation and fix ([`classes::undetermined`]), from what it
/// holds: its NLUs, its 504s, and whether the configuration allows a race.
fn undetermined_text(
    store: &Store,
    members: &[usize],
    nlu: u64,
    race: Race,
    detail: &str,
) -> (String, String) {
    let timeouts: u64 = members
        .iter()
        .filter(|&&i| store.kind(i).status == 504)
        .map(|&i| store.recs[i].weight())
        .sum();
    let (what, fix) = classes::undetermined(nlu, race == Race::RuledOut, timeouts);
    (format!("{what} {detail}"), fix.to_string())
}

/// What an incident counts over its members.
struct Tally {
    /// Failures (weights summed).
    n: u64,
    hops: NluCounts,
    /// Failures per interned method id (named once per method, not once per failure).
    per_method: Vec<u64>,
    /// The earliest end (ms).
    first_end: i64,
    /// The earliest start and the latest end (ms).
    start_ms: i64,
    end_ms: i64,
    /// Confidences times weights, summed.
    conf_sum: f64,
}

impl Tally {
    fn new(store: &Store) -> Tally {
        Tally {
            n: 0,
            hops: NluCounts::default(),
            per_method: vec![0; store.methods.len()],
            first_end: i64::MAX,
            start_ms: i64::MAX,
            end_ms: i64::MIN,
            conf_sum: 0.0,
        }
    }

    /// Count failure `i` (classified).
    fn add(&mut self, store: &Store, i: usize) {
        let (r, f) = (&store.recs[i], store.kind(i));
        let w = r.weight();
        self.n += w;
        if f.nlu {
            self.hops.count_n(f.hops, w);
            self.hops.paired += f.paired.is_some() as u64 * w;
        }
        self.per_method[f.method as usize] += w;
        self.first_end = self.first_end.min(r.t_ms);
        self.start_ms = self.start_ms.min(r.start_ms());
        self.end_ms = self.end_ms.max(r.last_ms());
        self.conf_sum += r.confidence() * w as f64;
    }

    /// The mean confidence, by weight.
    fn conf(&self) -> f64 {
        self.conf_sum / self.n as f64
    }
}

/// An incident's evidence: its first failure and the lines paired with it, the lines its class
/// rests on, the peer-list change before a race, its last failure (at most eight).
fn evidence(
    store: &Store,
    members: &[usize],
    class: Class,
    cx: &Ctx<'_>,
    near: &Near,
    cites: &mut Cites,
    first_end: i64,
) -> Vec<Evidence> {
    let hist = cx.hist;
    let mut ev = Vec::new();
    let (r0, f0) = (&store.recs[members[0]], store.kind(members[0]));
    let note = format!(
        "first failure: status {}{}",
        f0.status,
        if f0.nlu {
            format!(", {}", traj_label(f0.hops))
        } else {
            String::new()
        }
    );
    ev.push(cites.line(hist, r0.at.file(), r0.at.line(), note));
    if let Some((file, line)) = r0.first_try_at.get() {
        let note = if cx.by_cid {
            "first-try failure on the same *cid"
        } else {
            "first-try failure of the same request (by time and client: no `$connection` logged)"
        };
        ev.push(cites.line(hist, file, line, note.to_string()));
    }
    if f0.paired == Some(Sig::NoLiveUpstreams)
        && let Some((file, line)) = r0.paired_at.get()
    {
        let note = if cx.by_cid {
            "paired `no live upstreams` (same *cid, time, request)"
        } else {
            "paired `no live upstreams` (same time, client, request: no `$connection` logged)"
        };
        ev.push(cites.line(hist, file, line, note.to_string()));
    }
    class_evidence(&mut ev, class, hist, near, cites);
    let changes = &cx.peers.changes;
    if class.is_race()
        && let Some(si) = cx.peers.prev_change(first_end)
        && let Some(d) = changes[si].dns_idx
    {
        let r = &hist.dns[d];
        ev.push(Evidence {
            at: hist.cite(r.file, r.line),
            note: format!(
                "peer-list change {} ms before the first failure",
                first_end - changes[si].t_ms
            ),
            text: format!(
                "{} {} {} → {}",
                r.qname,
                r.qtype,
                r.rcode,
                r.answer_texts().join(",")
            ),
        });
    }
    if members.len() > 1 {
        let last = store.recs[*members.last().unwrap()].at;
        ev.push(cites.line(hist, last.file(), last.line(), "last failure".into()));
    }
    ev.truncate(8);
    ev
}

/// The lines a class rests on (the NXDOMAIN, the disabled peer, the zone, the ports).
/// The DNS log's NXDOMAIN answer `d`, as evidence.
fn nxdomain_answer(hist: &History, d: usize) -> Evidence {
    let r = &hist.dns[d];
    Evidence {
        at: hist.cite(r.file, r.line),
        note: "the authority answered NXDOMAIN".into(),
        text: format!("{} {} {} {}", r.qname, r.qtype, r.rcode, r.client),
    }
}

/// A proxy-state event as evidence.
fn state_line(hist: &History, i: Option<usize>, note: &str) -> Option<Evidence> {
    let e = &hist.events[i?];
    Some(Evidence {
        at: hist.cite(e.file, e.line),
        note: note.into(),
        text: e.note.clone().unwrap_or_default(),
    })
}

fn class_evidence(
    ev: &mut Vec<Evidence>,
    class: Class,
    hist: &History,
    near: &Near,
    cites: &mut Cites,
) {
    let line = |r: Option<ERef>, note: &str, cites: &mut Cites| r.map(|e| cites.ev(hist, e, note));
    match class {
        Class::DnsNxdomain => {
            ev.extend(line(
                near.nx_err,
                "NXDOMAIN: nginx removed every peer of the name",
                cites,
            ));
            ev.extend(near.nx_dns.map(|d| nxdomain_answer(hist, d)));
        }
        Class::DnsHoldExpired => {
            ev.extend(state_line(
                hist,
                near.hold,
                "the proxy took the server out: its DNS hold ran out",
            ));
            ev.extend(near.nx_dns.map(|d| nxdomain_answer(hist, d)));
        }
        Class::DnsClusterEmptied => {
            ev.extend(near.nx_dns.map(|d| nxdomain_answer(hist, d)));
            ev.extend(state_line(
                hist,
                near.emptied,
                "the proxy replaced the cluster's hosts with the answer",
            ));
        }
        Class::DnsLookupFailed => {
            ev.extend(state_line(
                hist,
                near.lookup_failed,
                "the proxy's lookup inside the request failed",
            ));
            ev.extend(near.nx_dns.map(|d| nxdomain_answer(hist, d)));
        }
        Class::MaxfailsWipeout => {
            ev.extend(line(near.dis, "a peer was excluded by max_fails", cites));
        }
        Class::ZoneMemoryExhausted => ev.extend(line(
            near.mem,
            "the zone ran out of memory while adding peers",
            cites,
        )),
        Class::PortExhaustion => ev.extend(line(near.p99, "ephemeral ports exhausted", cites)),
        _ => {}
    }
}

/// An incident's chart series: its group's buckets from 3 s before to 3 s after it.
fn zoom(m: &Buckets, s: i64, e: i64) -> Series {
    let span = (e - s).max(0) + 6000;
    // At most ~300 points per zoom.
    let bin = ((span / 300).max(BUCKET_MS) + BUCKET_MS - 1) / BUCKET_MS * BUCKET_MS;
    let a = (s - 3000).div_euclid(bin) * bin;
    let b = e + 3000;
    let mut pts: Vec<Point> = Vec::new();
    let mut t = a;
    while t <= b {
        let mut p = Point {
            t_ms: t,
            ..Default::default()
        };
        for (_, c) in m.range(t.div_euclid(BUCKET_MS)..(t + bin).div_euclid(BUCKET_MS)) {
            p.ok += c[0] - c[1];
            p.failed += c[1] - c[2];
            p.nlu += c[2];
        }
        pts.push(p);
        t += bin;
    }
    Series {
        bin_ms: bin,
        points: pts,
    }
}
