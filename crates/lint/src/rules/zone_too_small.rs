//! `zone-too-small`: an upstream zone too small for the peers it may hold.

use super::model::{Model, ServerLine, find, server_line};
use super::{ALL, Hit, Rule, hit};
use crate::LintOptions;
use crate::Severity;
use crate::parse::Directive;
use resolvelab_core::spec::nginx::size as parse_size;
use resolvelab_core::zone::{Group, Layout, pages_available, pages_needed};
use std::collections::BTreeMap;

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

/// The most addresses one name is taken to answer with (`--max-addresses` is bounded so).
pub const MAX_ADDRESSES: u32 = 4096;

/// The upstreams of one `zone` name in one context, and its sized `zone` directive.
struct Zone<'a> {
    sized: Option<&'a Directive>,
    upstreams: Vec<(&'a str, Vec<ServerLine<'a>>)>,
}

/// Every upstream `zone` against what the peers of the upstreams sharing it may need at a
/// peak (`core::zone`'s slab model, for the build `opts` names or a `--with-compat` one).
pub(super) fn check(m: &Model<'_>, opts: &LintOptions, hits: &mut Vec<Hit>) {
    let mut zones: BTreeMap<(&str, &str), Zone> = BTreeMap::new();
    for &(up, ctx) in &m.upstreams {
        let Some(zone) = find(up.children(), "zone") else {
            continue;
        };
        let Some(name) = zone.arg(0) else {
            continue;
        };
        let z = zones.entry((ctx, name)).or_insert(Zone {
            sized: None,
            upstreams: Vec::new(),
        });
        if z.sized.is_none() && zone.args.get(1).is_some() {
            z.sized = Some(zone);
        }
        let lines = up
            .children()
            .iter()
            .filter(|d| d.name.value == "server")
            .filter_map(server_line)
            .collect();
        z.upstreams.push((up.arg(0).unwrap_or("?"), lines));
    }
    for ((_, name), z) in &zones {
        if let Some(zone) = z.sized {
            check_zone(name, zone, &z.upstreams, opts, hits);
        }
    }
}

/// One zone: refused below 32k; else warned when its peers may outgrow it.
fn check_zone(
    name: &str,
    zone: &Directive,
    upstreams: &[(&str, Vec<ServerLine<'_>>)],
    opts: &LintOptions,
    hits: &mut Vec<Hit>,
) {
    let size_word = &zone.args[1];
    let Some(size) = parse_size(&size_word.value) else {
        return;
    };
    if size < 32 * 1024 {
        let mut h = hit(
            &RULE,
            size_word,
            zone.file,
            format!("zone `{name}` is {size} bytes; nginx refuses zones below 8 pages (32k)"),
        );
        h.severity = Severity::Error;
        hits.push(h);
        return;
    }
    // A DNS answer holds at most a few thousand addresses (65,535 bytes over TCP).
    let per_name = u64::from(opts.max_addresses_per_name.clamp(1, MAX_ADDRESSES));
    let (groups, peak) = groups_at_peak(upstreams, per_name);
    let layout = Layout::of(opts.nginx_version, opts.nginx_build);
    let need = pages_needed(name.len(), &groups, layout);
    let have = pages_available(size);
    if need <= have {
        return;
    }
    let build = match opts.nginx_build {
        Some(b) => format!("{}-byte peers of this {b} build", layout.peer),
        None => format!(
            "{}-byte peers of a --with-compat build, as nginx.org's and Debian's packages are (--nginx-build or --nginx for yours)",
            layout.peer
        ),
    };
    let names: usize = groups.iter().map(|g| g.hosts.len()).sum();
    let who = upstreams
        .iter()
        .map(|u| format!("`{}`", u.0))
        .collect::<Vec<_>>();
    let mut h = hit(
        &RULE,
        size_word,
        zone.file,
        format!(
            "zone `{name}` ({}) of upstream {} holds {have} slab pages, but {peak} peers need about {need} ({names} resolve name(s) x {per_name} addresses, --max-addresses, one answer changing while its old peers are busy; {build}): a requery can end in `memory exhausted` and lost peers",
            size_word.value,
            who.join(", ")
        ),
    );
    let suggest = (6..=40)
        .map(|p| 1u64 << p)
        .find(|k| pages_available(k * 1024) >= 2 * need)
        .unwrap_or(1 << 40);
    h.fix = format!("enlarge the zone: `zone {name} {suggest}k;`");
    hits.push(h);
}

/// The zone's groups at their peak: each `resolve` line's template and `per_name` addresses,
/// one static peer per other line, and one name's old peers still busy while its answer
/// changes (nginx removes a busy peer only when its last connection ends); the peers in all.
fn groups_at_peak(upstreams: &[(&str, Vec<ServerLine<'_>>)], per_name: u64) -> (Vec<Group>, u64) {
    let mut changing = true;
    let mut groups = Vec::new();
    let mut peers = 0;
    for (uname, lines) in upstreams {
        let mut g = Group {
            name: uname.to_string(),
            peers: Vec::new(),
            hosts: Vec::new(),
            backup: lines.iter().any(|s| s.backup()),
        };
        for s in lines {
            let server = s.addr.value.len();
            match &s.name {
                Some(host) if s.resolve() => {
                    let n = per_name * (1 + std::mem::take(&mut changing) as u64);
                    g.hosts.push(host.len());
                    g.peers.extend(std::iter::repeat_n(server, 1 + n as usize));
                    peers += n;
                }
                _ => {
                    g.peers.push(server);
                    peers += 1;
                }
            }
        }
        groups.push(g);
    }
    (groups, peers)
}

#[cfg(test)]
mod tests {
    use crate::{LintOptions, Version, lint_text};

    /// The zone findings' messages for `conf` linted for nginx 1.28.3 built as `build`.
    fn zone_findings(conf: &str, build: Option<&str>) -> Vec<String> {
        let o = LintOptions {
            nginx_version: Some(Version(1, 28, 3)),
            nginx_build: build.map(|b| b.parse().unwrap()),
            ..LintOptions::default()
        };
        let r = lint_text("nginx.conf", conf.to_string(), &o).unwrap();
        r.findings
            .into_iter()
            .filter(|f| f.rule == "zone-too-small")
            .map(|f| f.message)
            .collect()
    }

    /// Upstreams that share a zone are sized together: the lab's `zone-sweep` shape (two
    /// upstreams in `be`'s 32k), each name taken at 8 addresses and one answer changing while
    /// its old peers are busy (26 peers), fits with the peers of the lab's 1.28.3 build (which
    /// held 25 filler peers beside `be`'s) but not with a --with-compat build's, twice the slab
    /// class.
    #[test]
    fn a_shared_zone_is_sized_for_all_its_upstreams_and_the_build() {
        let conf = "http {\n resolver 127.0.0.53 valid=1s;\n upstream be {\n  zone be 32k;\n  server app.test.local:8080 resolve;\n }\n upstream filler {\n  zone be;\n  server filler.test.local:8080 resolve max_fails=0;\n }\n}\n";
        let plain = zone_findings(conf, Some("plain"));
        assert!(plain.is_empty(), "{plain:?}");
        let compat = zone_findings(conf, Some("compat"));
        assert_eq!(compat.len(), 1, "{compat:?}");
        assert!(compat[0].contains("upstream `be`, `filler`"), "{compat:?}");
        // Unknown, the build is taken as --with-compat, and the message says how to say it.
        let unknown = zone_findings(conf, None);
        assert!(
            unknown.len() == 1 && unknown[0].contains("--nginx-build"),
            "{unknown:?}"
        );
    }

    /// Any number of addresses a name is said to answer with is taken at most at
    /// `MAX_ADDRESSES`: the estimate stays small and the fix a size nginx reads.
    #[test]
    fn a_huge_address_count_is_bounded() {
        let conf = "http {\n upstream be {\n  zone be 32k;\n  server a.internal resolve;\n }\n}\n";
        let o = LintOptions {
            max_addresses_per_name: u32::MAX,
            ..LintOptions::default()
        };
        let r = lint_text("nginx.conf", conf.to_string(), &o).unwrap();
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "zone-too-small")
            .unwrap();
        assert!(f.message.contains("x 4096 addresses"), "{}", f.message);
        assert!(
            f.fix.starts_with("enlarge the zone: `zone be "),
            "{}",
            f.fix
        );
    }
}
