//! `zone-too-small`: an upstream zone too small for the peers it may hold.

use super::model::{ServerLine, find};
use super::{ALL, Hit, Rule, hit};
use crate::LintOptions;
use crate::Severity;
use crate::parse::Directive;
use resolvelab_core::spec::nginx::size as parse_size;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "zone-too-small",
    severity: Severity::Warning,
    title: "upstream zone too small for the peers it may hold",
    explain: "When the zone's slab allocator runs out while a requery adds peers, nginx logs `memory exhausted` and gives up the additions after the removals already happened: partial or total loss of peers.",
    fix: "enlarge the zone (e.g. `zone NAME 128k;`)",
    versions: ALL,
    scenario: Some("zone-churn"),
};

/// Slab pages (4 KiB) an upstream zone needs for `peers` peers; a model of nginx's slab allocator
/// with 64-bit structure sizes rounded up to their slab size class.
fn pages_needed(peers: u64, resolve_names: u64) -> u64 {
    let per_class = |count: u64, size: u64| -> u64 {
        if count == 0 {
            0
        } else {
            (count * size).div_ceil(4096)
        }
    };
    // Peer structs (256), sockaddrs (32), "ip:port" names (32), server names (64), the
    // per-upstream peers header (128), per resolve name a host struct (256) and name (64).
    1 + per_class(peers, 256)
        + per_class(peers, 32)
        + per_class(peers, 32)
        + per_class(peers, 64)
        + per_class(resolve_names, 256)
        + per_class(resolve_names, 64)
}

fn pages_available(size: u64) -> u64 {
    // The slab pool header and per-page descriptors (24 bytes each) come out of the zone.
    size.saturating_sub(2048) / (4096 + 24)
}

/// The upstream's `zone` against what its peers may need.
pub(super) fn check(
    up: &Directive,
    uname: &str,
    lines: &[ServerLine],
    opts: &LintOptions,
    hits: &mut Vec<Hit>,
) {
    let Some(zone) = find(up.children(), "zone") else {
        return;
    };
    let Some(size_word) = zone.args.get(1) else {
        return;
    };
    let Some(size) = parse_size(&size_word.value) else {
        return;
    };
    if size < 32 * 1024 {
        let mut h = hit(
            &RULE,
            size_word,
            zone.file,
            format!(
                "zone `{}` of upstream `{uname}` is {} bytes; nginx refuses zones below 8 pages (32k)",
                zone.arg(0).unwrap_or("?"),
                size
            ),
        );
        h.severity = Severity::Error;
        hits.push(h);
        return;
    }
    let per_name = u64::from(opts.max_addresses_per_name.max(1));
    let mut peers = 0u64;
    let mut names = 0u64;
    for s in lines {
        if s.resolve() && s.name.is_some() {
            names += 1;
            peers += per_name;
        } else {
            peers += 1;
        }
    }
    let need = pages_needed(peers, names);
    let have = pages_available(size);
    if need > have {
        let suggest = ((need * 2 * 4096 + 2048) / 1024)
            .next_power_of_two()
            .max(64);
        let mut h = hit(
            &RULE,
            size_word,
            zone.file,
            format!(
                "zone `{}` ({}) of upstream `{uname}` holds about {have} slab pages, but up to {peers} peers ({names} resolve name(s) x {per_name} addresses, --max-addresses) need about {need}: a requery can end in `memory exhausted` and lost peers",
                zone.arg(0).unwrap_or("?"),
                size_word.value
            ),
        );
        h.fix = format!(
            "enlarge the zone: `zone {} {suggest}k;`",
            zone.arg(0).unwrap_or("NAME")
        );
        hits.push(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_model_matches_the_seed_measurement() {
        // Seed 000 P7a: 25 peers churned through a 64k zone without `memory exhausted`.
        assert!(pages_needed(25, 1) <= pages_available(64 * 1024));
        // 32k holds one name with a handful of addresses...
        assert!(pages_needed(8, 1) <= pages_available(32 * 1024));
        // ...but not four dual-stack names of 16 addresses each.
        assert!(pages_needed(64, 4) > pages_available(32 * 1024));
    }
}
