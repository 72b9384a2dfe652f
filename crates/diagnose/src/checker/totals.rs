//! Totals: NLU counts over every failure, the per-class summary, and what each error-log
//! signature means for these failures.

use super::errors::{Cites, SigIndex};
use super::failure::Store;
use super::swaps::PeerChanges;
use super::traj_label;
use crate::TimeRange;
use crate::classes::{self, Class, Sig};
use crate::evidence::Race;
use crate::verdict::{ClassSummary, Incident, NluCounts, NluEvent, PassCounts, Series, Signature};
use resolvelab_history::History;
use std::collections::{BTreeMap, HashMap};

/// NLU events listed one by one (the counts cover all).
pub(crate) const MAX_NLU_EVENTS: usize = 5000;

/// NLU counts and events over every failure, and what else is summed over them: one pass over
/// the records (each pass reads them from memory: they are far larger than the caches).
pub(super) struct NluTotals {
    pub nlu: NluCounts,
    pub events: Vec<NluEvent>,
    /// End times of every NLU (internal ones included), in failure order.
    pub times: Vec<i64>,
    pub by_swap_direction: BTreeMap<String, u64>,
    /// Every NLU was listed.
    pub complete: bool,
    /// Client-visible failures (internal NLUs left out).
    pub client_failures: u64,
    /// Signatures that are a failed request's own cause (per-request resolution failures).
    pub caused: HashMap<Sig, u64>,
}

/// Count the NLUs (client-visible ones in `nlu`, internal ones in `passes`).
pub(super) fn nlu_totals(
    store: &Store,
    peers: &PeerChanges,
    hist: &History,
    passes: &mut PassCounts,
    range: Option<TimeRange>,
) -> NluTotals {
    let mut t = NluTotals {
        nlu: NluCounts::default(),
        events: Vec::new(),
        times: Vec::new(),
        by_swap_direction: BTreeMap::new(),
        complete: true,
        client_failures: 0,
        caused: HashMap::new(),
    };
    let changes = &peers.changes;
    for (i, r) in store.recs.iter().enumerate() {
        let (f, w) = (store.kind(i), r.weight());
        if !TimeRange::holds(range, r.t_ms) {
            // Context: only its time, for the signatures near an NLU.
            if f.nlu {
                t.times.push(r.t_ms);
            }
            continue;
        }
        if !f.internal {
            t.client_failures += w;
            if let Some(sig) = f.own_dns {
                *t.caused.entry(sig).or_default() += w;
            }
        }
        if !f.nlu {
            continue;
        }
        t.times.push(r.t_ms);
        if f.internal {
            passes.internal_nlu += w;
            passes.internal_paired += f.paired.is_some() as u64 * w;
            *passes
                .internal_by_class
                .entry(r.class.id().to_string())
                .or_insert(0) += w;
        } else {
            if let Some(si) = peers
                .prev_swap(r.t_ms)
                .filter(|&si| r.t_ms - peers.swaps[si].t_ms <= 1000)
            {
                *t.by_swap_direction
                    .entry(peers.swaps[si].direction.clone())
                    .or_insert(0) += w;
            }
            t.nlu.count_n(f.hops, w);
            t.nlu.paired += f.paired.is_some() as u64 * w;
        }
        // Failures counted into a record are not listed one by one.
        t.complete &= w == 1 && t.events.len() < MAX_NLU_EVENTS;
        if t.events.len() < MAX_NLU_EVENTS {
            t.events.push(NluEvent {
                t_ms: r.t_ms,
                hops: f.hops,
                trajectory: traj_label(f.hops).to_string(),
                after_swap_ms: peers.prev_change(r.t_ms).map(|s| r.t_ms - changes[s].t_ms),
                class: r.class,
                at: hist.cite(r.at.file(), r.at.line()),
                internal: f.internal,
                status: f.status,
            });
        }
    }
    t
}

/// Per class (in report order): its incidents and failed requests.
pub(crate) fn class_summaries(incidents: &[Incident], race: Race) -> Vec<ClassSummary> {
    let mut out = Vec::new();
    for class in Class::ALL {
        let c = class.id();
        let incs: Vec<&Incident> = incidents.iter().filter(|i| i.class == class).collect();
        if incs.is_empty() {
            continue;
        }
        // Undetermined says only what its incidents' evidence leaves open.
        let (explanation, fix) = if class == Class::Undetermined {
            let nlu = incs.iter().map(|i| i.nlu).sum();
            let (e, f) = classes::undetermined(nlu, race == Race::RuledOut, 0);
            (e, f.to_string())
        } else {
            (
                classes::explanation(c).to_string(),
                classes::fix(c).to_string(),
            )
        };
        out.push(ClassSummary {
            class,
            incidents: incs.len() as u64,
            requests: incs.iter().map(|i| i.count).sum(),
            explanation,
            fix,
        });
    }
    out
}

pub(super) fn summarize_signatures(
    h: &History,
    ix: &SigIndex,
    cites: &mut Cites,
    nlu_times: &[i64],
    caused: &HashMap<Sig, u64>,
    timeline: &Series,
    range: Option<TimeRange>,
) -> Vec<Signature> {
    let near = |t: i64| {
        let i = nlu_times.partition_point(|&x| x < t - 10_000);
        nlu_times.get(i).is_some_and(|&x| x <= t + 11_000)
    };
    let mut out = Vec::new();
    for (si, def) in classes::SIGNATURES.iter().enumerate() {
        // The seconds of the range; `first` is the first of their lines in merged order.
        let secs = || {
            ix.per_sec[si]
                .iter()
                .filter(|(t, _)| TimeRange::holds(range, **t))
        };
        let Some(first) = secs().map(|(_, v)| v.0).min() else {
            continue;
        };
        let near_nlu = secs()
            .filter(|(t, _)| near(**t))
            .map(|(_, c)| c.1)
            .sum::<u64>();
        let failed = caused.get(&def.sig).copied().unwrap_or(0);
        let (harmless, note) = judged(def.sig, failed, near_nlu, || {
            super::refusal::note(timeline, &secs().map(|(t, _)| *t).collect::<Vec<_>>())
        });
        out.push(Signature {
            id: def.id.to_string(),
            pattern: def.pattern.to_string(),
            count: secs().map(|(_, v)| v.1).sum(),
            near_nlu,
            caused: failed,
            harmless,
            note,
            first: cites.ev(h, first, "first occurrence"),
        });
    }
    out
}

/// Whether a signature did harm here and what it means, from the failed requests it is the own
/// cause of and its lines near an NLU (`refusal`: what a refused configuration did next, for
/// `host not found in upstream`). Also what a merge of time slices says again of their sums.
pub(crate) fn judged(
    sig: Sig,
    failed: u64,
    near_nlu: u64,
    refusal: impl FnOnce() -> String,
) -> (bool, String) {
    use Sig::*;
    match sig {
            _ if failed > 0 => (
                false,
                format!(
                    "the cause of {failed} failed request(s): their own resolution (a variable `proxy_pass`), logged with their *cid"
                ),
            ),
            ResolveServfail | ResolveTimeout | ResolveOther if near_nlu == 0 => (
                true,
                "harmless for `resolve` upstreams: SERVFAIL and resolver timeouts keep the current peers (DOMAIN.md F2), and no failed request carries this line".to_string(),
            ),
            ResolveServfail | ResolveTimeout | ResolveOther => (
                false,
                "resolver failures near NLU: they keep the peers, so look for another cause".to_string(),
            ),
            ResolveNxdomain if near_nlu == 0 => (
                true,
                "NXDOMAIN answered but no request failed (the re-query missed it, or the name is idle)".to_string(),
            ),
            ResolveNxdomain => (false, "NXDOMAIN removes every peer of the name for one re-query period".to_string()),
            PeerDisabled if near_nlu == 0 => (
                true,
                "a peer was excluded by max_fails but another one served: no NLU".to_string(),
            ),
            PeerDisabled => (false, "max_fails excluded peers around NLU (wipeout precondition)".to_string()),
            NoLiveUpstreams => (false, "the NLU error line itself".to_string()),
            ZoneMemoryExhausted => (false, "peers lost while adding a new answer".to_string()),
            ConnectEaddrnotavail => (false, "ephemeral ports exhausted".to_string()),
            HostNotFoundInUpstream => (
                false,
                format!(
                    "nginx refused to start or reload: a name it resolves at start did not resolve. A reload keeps the running configuration (and its old addresses); a fresh start or a restart fails and serves nothing. `server NAME resolve` in an upstream with a zone, or a variable proxy_pass with a resolver, starts without the name. Here: {}",
                    refusal()
                ),
            ),
            _ => (false, "a first-try failure (retried when allowed)".to_string()),
        }
}
