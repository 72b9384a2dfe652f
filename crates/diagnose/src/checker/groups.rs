//! Upstream groups: which group each counted key (address or group name) belongs to, and the
//! per-group request counts in 100 ms buckets that shares, trickles and zooms are read from.

use super::access::{AccessPass, BUCKET_MS};
use super::failure::is_addr;
use std::collections::{BTreeMap, HashMap};

/// Per group: 100 ms bucket → [requests, failed, nlu].
pub(super) type Buckets = BTreeMap<i64, [u64; 3]>;

/// The groups of the access pass.
pub(super) struct Groups {
    /// The group of a request nothing names: `--upstream`, the only group seen, or `upstream`.
    pub default_group: String,
    /// The group of each key (indexed like `Keys::names`).
    pub key_group: Vec<String>,
    pub buckets: HashMap<String, Buckets>,
    empty: Buckets,
}

impl Groups {
    /// Group the access pass's counts (which it consumes).
    pub fn build(acc: &mut AccessPass, upstream: Option<&str>) -> Groups {
        let group_names: Vec<&String> = {
            let mut g: Vec<&String> = acc.trajs.iter().filter_map(|t| t.group.as_ref()).collect();
            g.sort();
            g.dedup();
            g
        };
        let default_group = upstream
            .map(str::to_string)
            .or_else(|| (group_names.len() == 1).then(|| group_names[0].clone()))
            .unwrap_or_else(|| "upstream".to_string());
        let key_group: Vec<String> = acc
            .keys
            .names
            .iter()
            .map(|k| {
                if !is_addr(k) {
                    k.clone()
                } else {
                    acc.addr_group
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| default_group.clone())
                }
            })
            .collect();
        let mut gnames: Vec<String> = Vec::new();
        let key_gid: Vec<usize> = key_group
            .iter()
            .map(|g| match gnames.iter().position(|x| x == g) {
                Some(i) => i,
                None => {
                    gnames.push(g.clone());
                    gnames.len() - 1
                }
            })
            .collect();
        let default_gid = gnames
            .iter()
            .position(|x| *x == default_group)
            .unwrap_or_else(|| {
                gnames.push(default_group.clone());
                gnames.len() - 1
            });
        let mut per_gid: Vec<Buckets> = vec![BTreeMap::new(); gnames.len()];
        for (k, c) in std::mem::take(&mut acc.counts) {
            let gid = key_gid
                .get((k & 0xfff) as usize)
                .copied()
                .unwrap_or(default_gid);
            let e = per_gid[gid].entry((k >> 12) as i64).or_insert([0; 3]);
            e[0] += c[0] as u64;
            e[1] += c[1] as u64;
            e[2] += c[2] as u64;
        }
        Groups {
            default_group,
            key_group,
            buckets: gnames.into_iter().zip(per_gid).collect(),
            empty: Buckets::new(),
        }
    }

    /// A group's buckets (empty when it had no counted request).
    pub fn of(&self, g: &str) -> &Buckets {
        self.buckets.get(g).unwrap_or(&self.empty)
    }

    /// (requests, failed) of group `g` between `a` and `b` ms; a window under 2 s is widened to
    /// 2 s around its middle (one bucket of a burst says little about its share).
    pub fn window(&self, g: &str, a: i64, b: i64) -> (u64, u64) {
        let (a, b) = if b - a < 2000 {
            let mid = (a + b) / 2;
            (mid - 1000, mid + 1000)
        } else {
            (a, b)
        };
        self.of(g)
            .range(a.div_euclid(BUCKET_MS)..=b.div_euclid(BUCKET_MS))
            .fold((0, 0), |acc, (_, c)| (acc.0 + c[0], acc.1 + c[1]))
    }
}
