//! How much of an nginx upstream `zone` its peers take: the allocations
//! `ngx_http_upstream_zone_module.c` makes (a peers list per group, and per peer its structure,
//! its `ngx_sockaddr_t`, its `NGX_SOCKADDR_STRLEN` name and its server text; per `resolve`
//! line a host), fed to nginx's slab allocator (`src/core/ngx_slab.c`: a chunk is rounded up to
//! a power of two from 8 bytes, and each size uses whole 4 KiB pages). Sizes are x86-64's; the
//! peer's depends on the build ([`Layout`]). The lab measured where a 32k zone runs out on two
//! builds (`zone-sweep`, docs/COMPARISON.md (c)), and the model reproduces both thresholds (the
//! tests below); the linter's `zone-too-small` reads it.
//!
//! ```
//! use resolvelab_core::zone::{Group, Layout, pages_available, pages_needed};
//! let layout: Layout = Layout::of(None, None); // a current --with-compat build
//! // One upstream resolving one name to 8 addresses.
//! let g = Group::resolving("be", "app.internal:8080", &[("app.internal", 8)]);
//! assert!(pages_needed(2, &[g.clone()], layout) <= pages_available(32 * 1024));
//! // Twenty such names do not fit in 32k.
//! let many = Group::resolving("be", "app.internal:8080", &[("app.internal", 8); 20]);
//! assert!(pages_needed(2, &[many], layout) > pages_available(32 * 1024));
//! ```

use crate::version::{BuildFlags, Version};
use std::collections::BTreeMap;

/// A slab page.
const PAGE: u64 = 4096;

/// The sizes of a build's structures that vary (bytes, before the slab rounds them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `ngx_http_upstream_rr_peer_t`: 192 bytes in 1.28 without SSL; the SSL session adds 16,
    /// 1.29.6's sticky id 8, 1.31's `least_time` fields 48 (1.30 with SSL: 216; 1.31 with SSL:
    /// 264), and `--with-compat` reserves room for every optional field (about 320 bytes on
    /// 1.28, 1.30 and 1.31 alike).
    pub peer: u64,
    /// 1.29.6+ keeps a sticky id per peer in the zone, a 32-byte chunk of its own.
    pub sid: bool,
}

impl Layout {
    /// The layout of `version` (none: a current one) built with `flags` (none: unknown, taken
    /// as `--with-compat`, the largest peers — nginx.org's and Debian's packages are built so).
    pub fn of(version: Option<Version>, flags: Option<BuildFlags>) -> Layout {
        let v = version.unwrap_or(Version(1, 31, 0));
        let flags = flags.unwrap_or(BuildFlags {
            http_ssl: true,
            compat: true,
        });
        let (sid, least_time) = (v >= Version(1, 29, 6), v >= Version(1, 31, 0));
        let peer = match (flags.compat, flags.http_ssl) {
            (true, _) => 320,
            (false, ssl) => 192 + 16 * ssl as u64 + 8 * sid as u64 + 48 * least_time as u64,
        };
        Layout { peer, sid }
    }
}

/// One upstream group in the zone, as the allocations it makes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's name.
    pub name: String,
    /// Each peer's server text (`host:port` as written, or the resolved name's line), static
    /// and resolved peers alike, with the `resolve` lines' templates.
    pub peers: Vec<usize>,
    /// Each `resolve` line's host name length.
    pub hosts: Vec<usize>,
    /// It has `backup` servers (a second peers list).
    pub backup: bool,
}

impl Group {
    /// A group whose `resolve` lines (each written as `server`, e.g. `app.internal:8080`) name
    /// `names` (host, addresses at the peak: the answer, and the old peers still busy while an
    /// answer changes).
    pub fn resolving(name: &str, server: &str, names: &[(&str, u64)]) -> Group {
        let mut g = Group {
            name: name.to_string(),
            peers: Vec::new(),
            hosts: Vec::new(),
            backup: false,
        };
        for (host, n) in names {
            g.hosts.push(host.len());
            // The template, and a peer per address.
            g.peers
                .extend(std::iter::repeat_n(server.len(), 1 + *n as usize));
        }
        g
    }
}

/// The slab's size class of a `size`-byte allocation (at most half a page).
fn class(size: u64) -> u64 {
    size.max(8).next_power_of_two()
}

/// Chunks of `class` bytes one page holds: below 64 bytes a page starts with its own bitmap.
fn per_page(class: u64) -> u64 {
    let n = PAGE / class;
    let bitmap = if class < 64 {
        (n / (class * 8)).max(1)
    } else {
        0
    };
    n - bitmap
}

/// Pages the zone named with `zone_name_len` bytes needs for `groups` laid out as `layout`.
pub fn pages_needed(zone_name_len: usize, groups: &[Group], layout: Layout) -> u64 {
    let mut chunks: BTreeMap<u64, u64> = BTreeMap::new();
    let mut alloc = |size: u64, n: u64| *chunks.entry(class(size)).or_default() += n;
    // The pool's log context: ` in upstream zone "NAME"`.
    alloc(21 + zone_name_len as u64, 1);
    for g in groups {
        let lists = 1 + g.backup as u64;
        // `*config`, the peers lists (`ngx_http_upstream_rr_peers_t`: 96 bytes), the name.
        alloc(8, 1);
        alloc(96, lists);
        alloc(16, 1);
        alloc(g.name.len() as u64, 1);
        for &server in &g.peers {
            alloc(layout.peer, 1);
            // `ngx_sockaddr_t` (with `sockaddr_un`: 112) and `NGX_SOCKADDR_STRLEN` (115).
            alloc(112, 1);
            alloc(115, 1);
            alloc(server as u64, 1);
            if layout.sid {
                alloc(32, 1);
            }
        }
        for &host in &g.hosts {
            // `ngx_http_upstream_host_t` (its resolve event inside: 168 bytes) and its name.
            alloc(168, 1);
            alloc(host as u64, 1);
        }
    }
    chunks
        .iter()
        .map(|(&class, &n)| n.div_ceil(per_page(class)))
        .sum()
}

/// Pages a zone of `size` bytes gives its allocations: the slab pool's header and a 24-byte
/// descriptor per page come out of it first (`ngx_slab_init`).
pub fn pages_available(size: u64) -> u64 {
    size.saturating_sub(2048) / (PAGE + 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's `zone-sweep` (docs/COMPARISON.md (c), three runs of every point in
    /// COMPARISON-REPEATS.md's ninth sitting): upstream `be` resolving `app.test.local` (one
    /// address, its old peer still busy when the answer changes: two) and `filler` resolving
    /// `filler.test.local` to `n` addresses, sharing the 32k zone `be`.
    fn sweep(n: u64, layout: Layout) -> bool {
        let groups = [
            Group::resolving("be", "app.test.local:8080", &[("app.test.local", 2)]),
            Group::resolving(
                "filler",
                "filler.test.local:8080",
                &[("filler.test.local", n)],
            ),
        ];
        pages_needed(2, &groups, layout) <= pages_available(32 * 1024)
    }

    /// The lab's nginx 1.28.3 (built without SSL) held 25 filler peers and ran out with 30;
    /// the nginx-1.31 engine's 1.31.3 (with SSL) held 10 and ran out with 15.
    #[test]
    fn the_model_holds_what_the_lab_measured_on_both_builds() {
        let plain_128 = Layout::of(Some(Version(1, 28, 3)), Some("plain".parse().unwrap()));
        assert!(sweep(25, plain_128) && !sweep(30, plain_128));
        let ssl_131 = Layout::of(Some(Version(1, 31, 3)), Some("ssl".parse().unwrap()));
        assert!(sweep(10, ssl_131) && !sweep(15, ssl_131));
        // The lab's `zone-exhaustion`: 200 filler peers exhaust 32k on both.
        assert!(!sweep(200, plain_128) && !sweep(200, ssl_131));
    }

    /// Seed 000 P7a: 25 peers churned through a 64k zone without `memory exhausted` (every
    /// one replaced while busy), on a build the seed does not name: even the largest peers fit.
    #[test]
    fn the_seed_churn_fits_in_64k_with_any_build() {
        let g = Group::resolving("be", "app.internal:8080", &[("app.internal", 50)]);
        assert!(pages_needed(2, &[g], Layout::of(None, None)) <= pages_available(64 * 1024));
    }

    /// The page counts of the slab: 7 usable pages in 32k, 15 in 64k; a chunk below 64 bytes
    /// shares its page with its bitmap.
    #[test]
    fn the_slab_rounds_as_nginx_does() {
        assert_eq!(pages_available(32 * 1024), 7);
        assert_eq!(pages_available(64 * 1024), 15);
        assert_eq!(
            (class(1), class(9), class(115), class(192), class(264)),
            (8, 16, 128, 256, 512)
        );
        assert_eq!(
            (per_page(8), per_page(16), per_page(32), per_page(64)),
            (504, 254, 127, 64)
        );
    }
}
