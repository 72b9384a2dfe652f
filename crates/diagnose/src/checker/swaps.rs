//! Peer-list changes: swaps from a DNS answer history, or inferred from the addresses in
//! `$upstream_addr`; NXDOMAIN removals and restorations; and the re-query period.

use super::errors::SigIndex;
use super::failure::{Keys, host_of, is_addr};
use crate::evidence::SwapSource;
use crate::verdict::Swap;
use resolvelab_history::History;
use std::collections::HashMap;

/// A success gap (ms) that ends an address's activity segment (swap inference).
pub(super) const SEGMENT_GAP_MS: i64 = 1500;

/// A stretch of requests through one address, no gap longer than [`SEGMENT_GAP_MS`]: of its
/// successes (swap inference) or of its tries (time to follow a swap).
#[derive(Clone)]
pub(super) struct Seg {
    pub key: u32,
    pub start: i64,
    pub end: i64,
}

/// Segments being built, one open per key, as the access lines come (nearly in time order).
#[derive(Default, Clone)]
pub(super) struct Segments {
    open: Vec<Option<(i64, i64)>>,
    done: Vec<Seg>,
}

impl Segments {
    /// A request through `key` at `t_ms` (called for every line and try: inlined).
    #[inline]
    pub fn touch(&mut self, key: u32, t_ms: i64) {
        let k = key as usize;
        if k >= self.open.len() {
            self.open.resize(k + 1, None);
        }
        match &mut self.open[k] {
            Some(s) if t_ms - s.1 <= SEGMENT_GAP_MS => s.1 = s.1.max(t_ms),
            Some(s) => {
                self.done.push(Seg {
                    key,
                    start: s.0,
                    end: s.1,
                });
                *s = (t_ms, t_ms);
            }
            slot @ None => *slot = Some((t_ms, t_ms)),
        }
    }

    /// Every segment, the open ones closed.
    pub fn finish(mut self) -> Vec<Seg> {
        for (key, seg) in self.open.into_iter().enumerate() {
            if let Some((start, end)) = seg {
                self.done.push(Seg {
                    key: key as u32,
                    start,
                    end,
                });
            }
        }
        self.done
    }
}

/// A change of a name's peer list: a swap, or the peers removed by NXDOMAIN / restored after it.
/// Each one bumps nginx's generation counter (DOMAIN.md F4).
pub(super) struct Change {
    pub t_ms: i64,
    pub direction: String,
    /// IPs before the change (empty when there were none).
    pub old: Vec<String>,
    pub dns_idx: Option<usize>,
}

/// Every peer-list change the inputs show, and the re-query period.
pub(super) struct PeerChanges {
    pub swaps: Vec<Swap>,
    pub source: SwapSource,
    /// Median re-query period (ms).
    pub requery: Option<f64>,
    /// Where the period comes from: `dns`, `inferred`, `error-log` or `none`.
    pub requery_source: &'static str,
    /// Swaps and NXDOMAIN removals/restorations, in time order.
    pub changes: Vec<Change>,
}

impl PeerChanges {
    /// From nginx's DNS query log when there is one, else inferred from the access log's address segments
    /// (and the period from the error log's `could not be resolved` lines).
    pub fn find(
        hist: &History,
        segs: &[Seg],
        keys: &Keys,
        key_group: &[String],
        span: (i64, i64),
        ix: &SigIndex,
    ) -> PeerChanges {
        // A probe's answers (`dns watch`) say when the name changed, not when nginx swapped:
        // only nginx's own queries are swaps.
        let resolver_log = hist.dns.iter().any(|r| r.probe.is_none());
        let (swaps, swap_dns_idx, source, requery, requery_source, nx_changes) = if resolver_log {
            let (s, idx, p, nx) = swaps_from_dns(hist);
            (s, idx, SwapSource::Dns, p, "dns", nx)
        } else {
            let s = infer_swaps(segs, keys, key_group, span.0, span.1);
            let p = median_interval(&s.iter().map(|x| x.t_ms).collect::<Vec<_>>());
            let src = if s.is_empty() {
                SwapSource::None
            } else {
                SwapSource::Inferred
            };
            let (p, psrc) = match p {
                Some(p) => (Some(p), src.id()),
                None => match period_from_errors(ix) {
                    Some(p) => (Some(p), "error-log"),
                    None => (None, src.id()),
                },
            };
            (s, Vec::new(), src, p, psrc, Vec::new())
        };
        // Every peer-list change (swaps and NXDOMAIN removals/restorations) bumps the
        // generation; offsets "after the swap" are measured from the latest one before the
        // failing selection.
        let mut changes: Vec<Change> = swaps
            .iter()
            .enumerate()
            .map(|(i, s)| Change {
                t_ms: s.t_ms,
                direction: s.direction.clone(),
                old: s
                    .direction
                    .split(" → ")
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(host_of)
                    .collect(),
                dns_idx: swap_dns_idx.get(i).copied(),
            })
            .chain(nx_changes)
            .collect();
        changes.sort_by_key(|c| c.t_ms);
        PeerChanges {
            swaps,
            source,
            requery,
            requery_source,
            changes,
        }
    }

    /// The latest swap at or before `t` (ms).
    pub fn prev_swap(&self, t: i64) -> Option<usize> {
        self.swaps.partition_point(|s| s.t_ms <= t).checked_sub(1)
    }

    /// The latest peer-list change at or before `t` (ms).
    pub fn prev_change(&self, t: i64) -> Option<usize> {
        self.changes.partition_point(|c| c.t_ms <= t).checked_sub(1)
    }
}

/// Without swaps: every failed re-query logs `NAME could not be resolved`, once per period.
fn period_from_errors(ix: &SigIndex) -> Option<f64> {
    let mut all: Vec<i64> = Vec::new();
    for (_, ts) in ix.unresolved.values() {
        // Distinct seconds: lines of one second are 0 ms apart and never count.
        let ts: Vec<i64> = ts.iter().copied().collect();
        all.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|d| *d >= 500));
    }
    all.sort_unstable();
    (!all.is_empty()).then(|| all[all.len() / 2] as f64)
}

/// Median of the intervals between consecutive times (ms), ignoring gaps < 500 ms.
pub(super) fn median_interval(ts: &[i64]) -> Option<f64> {
    median_interval_of(std::iter::once(&ts.to_vec()))
}

/// Swaps from the DNS log: a NOERROR answer whose address set differs from the previous
/// non-empty answer for the same name and type. Returns the swaps, their dns indexes and the
/// median re-query period (per client, name and type).
fn swaps_from_dns(h: &History) -> (Vec<Swap>, Vec<usize>, Option<f64>, Vec<Change>) {
    let mut last: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut removed: HashMap<(String, String), bool> = HashMap::new();
    let mut nx_changes = Vec::new();
    let mut swaps = Vec::new();
    let mut idx = Vec::new();
    let mut per_client: HashMap<(String, String, String), Vec<i64>> = HashMap::new();
    for (i, r) in h.dns.iter().enumerate().filter(|(_, r)| r.probe.is_none()) {
        per_client
            .entry((r.client.to_string(), r.qname.clone(), r.qtype.clone()))
            .or_default()
            .push(r.t_us / 1000);
        let k = (r.qname.clone(), r.qtype.clone());
        if r.rcode.eq_ignore_ascii_case("NXDOMAIN") {
            // NXDOMAIN removes every peer of the name (DOMAIN.md F2): a peer-list change.
            if let Some(prev) = last.get(&k)
                && !removed.get(&k).copied().unwrap_or(false)
            {
                nx_changes.push(Change {
                    t_ms: r.t_us / 1000,
                    direction: format!("{} → NXDOMAIN (no peers)", prev.join(",")),
                    old: prev.clone(),
                    dns_idx: Some(i),
                });
                removed.insert(k, true);
            }
            continue;
        }
        if !r.rcode.eq_ignore_ascii_case("NOERROR") || r.answers.is_empty() {
            continue;
        }
        let mut set = r.answer_texts();
        set.sort();
        if removed.insert(k.clone(), false).unwrap_or(false) && last.get(&k) == Some(&set) {
            // Peers restored after NXDOMAIN: a change, not a swap.
            nx_changes.push(Change {
                t_ms: r.t_us / 1000,
                direction: format!("NXDOMAIN → {}", set.join(",")),
                old: Vec::new(),
                dns_idx: Some(i),
            });
        }
        match last.get(&k) {
            Some(prev) if *prev != set => {
                swaps.push(Swap {
                    t_ms: r.t_us / 1000,
                    name: r.qname.clone(),
                    direction: format!("{} → {}", prev.join(","), set.join(",")),
                });
                idx.push(i);
                last.insert(k, set);
            }
            Some(_) => {}
            None => {
                last.insert(k, set);
            }
        }
    }
    let mut period = median_interval_of(per_client.values());
    if period.is_none() {
        // A resolver that opens a socket per query (Envoy's c-ares) is one client per query:
        // its period is read per source address instead.
        let mut per_ip: HashMap<(String, String, String), Vec<i64>> = HashMap::new();
        for ((client, name, qtype), ts) in per_client {
            let ip = client
                .rsplit_once(':')
                .map_or(client.as_str(), |(ip, _)| ip)
                .to_string();
            per_ip.entry((ip, name, qtype)).or_default().extend(ts);
        }
        for ts in per_ip.values_mut() {
            ts.sort_unstable();
        }
        period = median_interval_of(per_ip.values());
    }
    (swaps, idx, period, nx_changes)
}

/// The median of the intervals ≥ 500 ms within each series of times (ms).
fn median_interval_of<'a>(series: impl Iterator<Item = &'a Vec<i64>>) -> Option<f64> {
    let mut all = Vec::new();
    for ts in series {
        all.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|d| *d >= 500));
    }
    all.sort_unstable();
    let n = all.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            all[n / 2] as f64
        } else {
            (all[n / 2 - 1] + all[n / 2]) as f64 / 2.0
        }
    })
}

/// Swaps inferred from `$upstream_addr`: an address whose successes start within 1.5 s of
/// another address of the same group going quiet.
fn infer_swaps(
    segs: &[Seg],
    keys: &Keys,
    key_group: &[String],
    first: i64,
    last: i64,
) -> Vec<Swap> {
    let mut out: Vec<Swap> = Vec::new();
    // Segment ends in time order, so each start looks only at the ends within the gap.
    let mut ends: Vec<(i64, usize)> = segs.iter().enumerate().map(|(i, a)| (a.end, i)).collect();
    ends.sort_unstable();
    for b in segs {
        if b.start - first <= SEGMENT_GAP_MS || !is_addr(&keys.names[b.key as usize]) {
            continue;
        }
        let gb = &key_group[b.key as usize];
        let lo = ends.partition_point(|e| e.0 < b.start - SEGMENT_GAP_MS);
        let hi = ends.partition_point(|e| e.0 <= b.start + SEGMENT_GAP_MS);
        let old = ends[lo..hi].iter().map(|&(_, i)| &segs[i]).find(|a| {
            a.key != b.key
                && &key_group[a.key as usize] == gb
                && last - a.end > SEGMENT_GAP_MS
                && a.start < b.start
        });
        if let Some(a) = old {
            out.push(Swap {
                t_ms: b.start,
                name: gb.clone(),
                direction: format!(
                    "{} → {}",
                    keys.names[a.key as usize], keys.names[b.key as usize]
                ),
            });
        }
    }
    out.sort_by_key(|s| s.t_ms);
    // Two records swapping together are one swap.
    out.dedup_by(|b, a| b.t_ms - a.t_ms < 500);
    out
}
