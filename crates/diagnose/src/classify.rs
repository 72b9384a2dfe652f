//! One failure's class from the facts around it and from what the inputs can show — a pure
//! function, so every branch of DOMAIN.md §4's procedure is one row of a table test.
//!
//! The rule this module keeps: **a class is never given on the absence of evidence.** A
//! generation race needs an observed peer-list change (a DNS answer history, or swaps inferred
//! from `$upstream_addr`) and an nginx that can race at all; a `no live upstreams` that the
//! inputs cannot explain is [`Class::Undetermined`], and the report says what would decide it.

use crate::classes::{Class, Sig};
use crate::evidence::{Race, SwapSource};

/// What the checker saw around one failed request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The request ended in `no live upstreams` (its trajectory, or its paired error line).
    pub nlu: bool,
    /// Hops of its last pass (`IP:port, be` = 2); 0 when `$upstream_addr` is not logged.
    pub hops: u32,
    /// Real addresses tried before the NLU.
    pub addrs: usize,
    /// First-try failure lines on the request's `*cid` (refused, reset, timed out, …).
    pub first_try: usize,
    /// One of those is `connect() failed (99: …)`.
    pub first_try_99: bool,
    /// Its own resolution failed: a `could not be resolved` line with its `*cid` (the rcode's
    /// signature).
    pub own_resolution: Option<Sig>,
    /// `connect() failed (99…)` lines within ±1 s.
    pub eaddrnotavail_near: bool,
    /// `memory exhausted` / `no memory in upstream zone` within one re-query period before.
    pub zone_memory_near: bool,
    /// An NXDOMAIN (error line, or the DNS log) within one re-query period before.
    pub nxdomain_near: bool,
    /// The proxy logged taking the server out at the end of its DNS hold (HAProxy's
    /// `going DOWN for maintenance (…)` naming DNS) shortly before.
    pub hold_expired_near: bool,
    /// The proxy logged replacing a DNS cluster's hosts (Envoy's `DNS hosts have changed`)
    /// after an NXDOMAIN answer, shortly before.
    pub cluster_emptied_near: bool,
    /// The proxy logged a failed lookup of the name inside a request (Caddy's `failed getting
    /// dynamic upstreams`) within a second.
    pub lookup_failed_near: bool,
    /// `upstream server temporarily disabled` within one `fail_timeout` (12 s) before.
    pub disabled_near: bool,
    /// ≥ 80 % of the upstream's requests in the window failed, and at least three did.
    pub burst: bool,
    /// Failed share of the upstream's requests in the window.
    pub share: f64,
    /// ms since the latest peer-list change before the failing selection.
    pub after_change_ms: Option<i64>,
    /// The request tried an address the change removed (or the trajectory cannot tell).
    pub through_old: bool,
    /// The NLU was paired with its own error line.
    pub paired: bool,
    /// Whether the address it tried was one its name no longer returned.
    pub stale: Stale,
}

/// Was the failed try's address stale (see `checker::stale`)?
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stale {
    /// Not seen to be: the answers still held it, or nothing shows either way.
    #[default]
    No,
    /// A DNS answer history shows the name no longer returned it.
    Seen,
    /// No answer history, but the evidence supports it: every failure of the incident went to
    /// one address that served before, refused or timed out while connecting, and the
    /// configuration (when given) resolves a name only at start.
    Probable,
}

/// The class, how sure, and why (one clause, for the evidence list).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The class.
    pub class: Class,
    /// 0..1.
    pub confidence: f64,
    /// Why, in a few words.
    pub reason: &'static str,
}

fn d(class: Class, confidence: f64, reason: &'static str) -> Decision {
    Decision {
        class,
        confidence,
        reason,
    }
}

/// Classify one failure. `swaps` is where peer-list changes come from; `race` whether this
/// nginx and configuration can race at all.
pub fn classify(f: &Facts, swaps: SwapSource, race: Race) -> Decision {
    if let Some(sig) = f.own_resolution {
        let conf = if sig == Sig::ResolveOther { 0.8 } else { 0.9 };
        return d(
            Class::DnsRequestFailure,
            conf,
            "its own resolution failed on its *cid",
        );
    }
    if f.first_try_99 || (f.eaddrnotavail_near && !f.nlu) {
        return d(Class::PortExhaustion, 0.8, "connect() failed (99)");
    }
    if !f.nlu {
        match f.stale {
            Stale::Seen => {
                return d(
                    Class::StaleAddress,
                    0.9,
                    "it tried an address its name's DNS answers no longer held",
                );
            }
            Stale::Probable => {
                return d(
                    Class::StaleAddress,
                    0.5,
                    "probable: every failure went to one address that served before (no DNS answer history to decide it)",
                );
            }
            Stale::No => {}
        }
        if f.paired || f.first_try > 0 {
            return d(Class::UpstreamFailure, 0.85, "a real try failed, no NLU");
        }
        if f.addrs > 0 {
            return d(Class::UpstreamFailure, 0.65, "a real try is logged, no NLU");
        }
        // Neither `$upstream_addr` nor an error line shows that any upstream was tried: it may
        // as well have been a `no live upstreams`.
        return d(
            Class::Undetermined,
            0.2,
            "a 502/504 with no trajectory and no error line",
        );
    }
    nlu(f, swaps, race)
}

fn nlu(f: &Facts, swaps: SwapSource, race: Race) -> Decision {
    if f.zone_memory_near {
        return d(Class::ZoneMemoryExhausted, 0.85, "zone memory exhausted");
    }
    if f.hold_expired_near && f.hops <= 1 {
        let conf = if f.burst { 0.95 } else { 0.8 };
        return d(
            Class::DnsHoldExpired,
            conf,
            "the proxy took the server out when its DNS hold ran out",
        );
    }
    if f.lookup_failed_near && f.hops <= 1 {
        return d(
            Class::DnsLookupFailed,
            0.9,
            "the proxy logged a failed lookup of the name inside the request",
        );
    }
    if f.cluster_emptied_near && f.nxdomain_near && f.hops <= 1 {
        let conf = if f.burst { 0.95 } else { 0.8 };
        return d(
            Class::DnsClusterEmptied,
            conf,
            "the proxy replaced the cluster's hosts with an NXDOMAIN answer",
        );
    }
    if f.nxdomain_near && f.hops <= 1 {
        let conf = if f.burst { 0.95 } else { 0.7 };
        return d(
            Class::DnsNxdomain,
            conf,
            "NXDOMAIN within one re-query period",
        );
    }
    if f.eaddrnotavail_near {
        return d(Class::PortExhaustion, 0.6, "connect() failed (99) nearby");
    }
    // A race needs a change that was seen, an nginx that checks generations, and a request
    // that tried a peer the change removed.
    let changed = swaps != SwapSource::None && race != Race::RuledOut;
    let near_change = |ms: i64| changed && f.after_change_ms.is_some_and(|a| a <= ms);
    if f.hops >= 2 || (f.hops == 0 && f.first_try > 0) {
        multi_hop(f, swaps, race, near_change(1000) && f.through_old)
    } else {
        one_hop(f, swaps, race, near_change(500))
    }
}

fn multi_hop(f: &Facts, swaps: SwapSource, race: Race, race_seen: bool) -> Decision {
    if race_seen {
        let conf = if f.first_try > 0 { 0.95 } else { 0.75 };
        return d(
            Class::GenerationRaceRetry,
            conf,
            "retry ≤ 1 s after a peer-list change, through a removed peer",
        );
    }
    if f.burst && f.disabled_near {
        // The first failure of a wipeout: its own try disabled the last live peer.
        return d(
            Class::MaxfailsWipeout,
            0.8,
            "its try disabled the last peer",
        );
    }
    // Only an exact answer history shows that no change came near; swaps inferred from
    // `$upstream_addr` are placed no better than the traffic between them.
    if swaps == SwapSource::Dns {
        let conf = if f.hops >= 3 { 0.85 } else { 0.6 };
        return d(
            Class::TriesExhausted,
            conf,
            "every tried peer failed, no change nearby",
        );
    }
    if f.addrs >= 2 && f.first_try >= f.addrs {
        return d(
            Class::TriesExhausted,
            0.5,
            "every tried peer's failure is logged",
        );
    }
    if race == Race::RuledOut {
        return d(
            Class::TriesExhausted,
            0.5,
            "no race possible here: the retry found every peer tried or excluded",
        );
    }
    d(
        Class::Undetermined,
        0.3,
        "a retry refused: a race needs a seen peer-list change, tries-exhausted every peer's failure",
    )
}

fn one_hop(f: &Facts, swaps: SwapSource, race: Race, race_seen: bool) -> Decision {
    if f.burst && f.disabled_near {
        return d(
            Class::MaxfailsWipeout,
            0.9,
            "burst after peers were disabled",
        );
    }
    if f.burst && swaps == SwapSource::Dns {
        // The answer history shows no change that removed the peers: max_fails did (its
        // warn-level line may not be logged).
        return d(
            Class::MaxfailsWipeout,
            0.6,
            "burst without a peer-list change",
        );
    }
    if race_seen {
        let conf = if f.paired { 0.75 } else { 0.6 };
        return d(
            Class::GenerationRaceFirstPick,
            conf,
            "first pick ≤ 500 ms after a peer-list change",
        );
    }
    if f.disabled_near {
        return d(Class::MaxfailsWipeout, 0.5, "a peer was disabled nearby");
    }
    let _ = race;
    d(
        Class::Undetermined,
        if f.burst { 0.3 } else { 0.2 },
        "the first pick found no live peer, and the inputs do not show why",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use Class::*;

    fn nlu(hops: u32) -> Facts {
        Facts {
            nlu: true,
            hops,
            addrs: hops.saturating_sub(1) as usize,
            ..Facts::default()
        }
    }

    /// One row per branch of DOMAIN.md §4: (facts, swap source, race, expected class).
    #[test]
    fn every_branch() {
        use Race::{Possible, RuledOut, Unknown};
        use SwapSource::{Dns, Inferred, None as NoSwaps};
        let after = |mut f: Facts, ms: i64| {
            f.after_change_ms = Some(ms);
            f.through_old = true;
            f
        };
        let with = |f: Facts, g: fn(&mut Facts)| {
            let mut f = f;
            g(&mut f);
            f
        };
        let rows: Vec<(&str, Facts, SwapSource, Race, Class)> = vec![
            (
                "own resolution",
                with(Facts::default(), |f| {
                    f.own_resolution = Some(Sig::ResolveServfail)
                }),
                NoSwaps,
                Unknown,
                DnsRequestFailure,
            ),
            (
                "errno 99 first try",
                with(nlu(2), |f| f.first_try_99 = true),
                Dns,
                Possible,
                PortExhaustion,
            ),
            (
                "plain 502",
                with(Facts::default(), |f| f.first_try = 1),
                NoSwaps,
                Unknown,
                UpstreamFailure,
            ),
            (
                "502 after a logged try",
                with(Facts::default(), |f| f.addrs = 1),
                NoSwaps,
                Unknown,
                UpstreamFailure,
            ),
            (
                "502 to an address the answers dropped",
                with(Facts::default(), |f| {
                    f.first_try = 1;
                    f.stale = Stale::Seen
                }),
                Dns,
                RuledOut,
                StaleAddress,
            ),
            (
                "502s all to one address that served, no history",
                with(Facts::default(), |f| {
                    f.first_try = 1;
                    f.stale = Stale::Probable
                }),
                NoSwaps,
                Unknown,
                StaleAddress,
            ),
            (
                "a stale address is still its own resolution's failure first",
                with(Facts::default(), |f| {
                    f.own_resolution = Some(Sig::ResolveServfail);
                    f.stale = Stale::Seen
                }),
                Dns,
                Possible,
                DnsRequestFailure,
            ),
            (
                "502, nothing logged",
                Facts::default(),
                NoSwaps,
                Unknown,
                Undetermined,
            ),
            (
                "zone memory",
                with(nlu(1), |f| f.zone_memory_near = true),
                Dns,
                Possible,
                ZoneMemoryExhausted,
            ),
            (
                "nxdomain",
                with(nlu(1), |f| f.nxdomain_near = true),
                NoSwaps,
                Unknown,
                DnsNxdomain,
            ),
            (
                "a hold that ran out, even during an NXDOMAIN",
                with(nlu(1), |f| {
                    f.hold_expired_near = true;
                    f.nxdomain_near = true
                }),
                Dns,
                Unknown,
                DnsHoldExpired,
            ),
            (
                "an emptied cluster is an NXDOMAIN the proxy applied",
                with(nlu(1), |f| {
                    f.cluster_emptied_near = true;
                    f.nxdomain_near = true
                }),
                Dns,
                Unknown,
                DnsClusterEmptied,
            ),
            (
                "hosts changed without an NXDOMAIN is no emptied cluster",
                with(nlu(1), |f| f.cluster_emptied_near = true),
                Dns,
                Unknown,
                Undetermined,
            ),
            (
                "a lookup that failed inside the request",
                with(nlu(1), |f| f.lookup_failed_near = true),
                NoSwaps,
                Unknown,
                DnsLookupFailed,
            ),
            (
                "race at retry",
                after(nlu(2), 40),
                Dns,
                Possible,
                GenerationRaceRetry,
            ),
            (
                "race at retry, swaps inferred",
                after(nlu(2), 40),
                Inferred,
                Unknown,
                GenerationRaceRetry,
            ),
            (
                "no race on an old nginx",
                after(nlu(2), 40),
                Inferred,
                RuledOut,
                TriesExhausted,
            ),
            (
                "2-hop, no swaps seen",
                nlu(2),
                NoSwaps,
                Unknown,
                Undetermined,
            ),
            (
                "2-hop, swaps known, none near",
                nlu(2),
                Dns,
                Possible,
                TriesExhausted,
            ),
            (
                "3-hop, nothing known",
                nlu(3),
                NoSwaps,
                Unknown,
                Undetermined,
            ),
            (
                "3-hop, every try's failure logged",
                with(nlu(3), |f| f.first_try = 2),
                NoSwaps,
                Unknown,
                TriesExhausted,
            ),
            (
                "2-hop, swaps inferred, none near",
                nlu(2),
                Inferred,
                Unknown,
                Undetermined,
            ),
            (
                "wipeout start",
                with(nlu(2), |f| {
                    f.burst = true;
                    f.disabled_near = true
                }),
                Dns,
                Possible,
                MaxfailsWipeout,
            ),
            (
                "wipeout",
                with(nlu(1), |f| {
                    f.burst = true;
                    f.disabled_near = true
                }),
                NoSwaps,
                Unknown,
                MaxfailsWipeout,
            ),
            (
                "burst, swaps known",
                with(nlu(1), |f| f.burst = true),
                Dns,
                Possible,
                MaxfailsWipeout,
            ),
            (
                "burst, nothing known",
                with(nlu(1), |f| f.burst = true),
                NoSwaps,
                Unknown,
                Undetermined,
            ),
            (
                "first pick",
                after(nlu(1), 3),
                Dns,
                Possible,
                GenerationRaceFirstPick,
            ),
            (
                "first pick ruled out",
                after(nlu(1), 3),
                Dns,
                RuledOut,
                Undetermined,
            ),
            (
                "isolated 1-hop, no swaps seen",
                nlu(1),
                NoSwaps,
                Unknown,
                Undetermined,
            ),
            (
                "isolated 1-hop, disabled nearby",
                with(nlu(1), |f| f.disabled_near = true),
                NoSwaps,
                Unknown,
                MaxfailsWipeout,
            ),
        ];
        for (name, facts, swaps, race, want) in rows {
            let got = classify(&facts, swaps, race);
            assert_eq!(got.class, want, "{name}: {facts:?}");
            assert!((0.0..=1.0).contains(&got.confidence), "{name}");
        }
    }

    #[test]
    fn a_race_is_never_given_without_a_seen_change() {
        for hops in 0..4 {
            for burst in [false, true] {
                for race in [Race::Possible, Race::Unknown, Race::RuledOut] {
                    let mut f = nlu(hops);
                    f.burst = burst;
                    f.first_try = (hops == 0) as usize;
                    f.after_change_ms = Some(10);
                    f.through_old = true;
                    let got = classify(&f, SwapSource::None, race).class;
                    assert!(!got.is_race(), "{hops} {burst} {race:?}: {got:?}");
                }
            }
        }
    }
}
