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
    /// Per group, running totals over its buckets, so that a window costs two binary searches
    /// (clustering asks one per failure).
    sums: HashMap<String, Sums>,
    empty: Buckets,
}

/// Buckets in order and the (requests, failed) totals before each (one more than buckets).
#[derive(Default)]
struct Sums {
    buckets: Vec<i64>,
    before: Vec<(u64, u64)>,
}

impl Sums {
    fn of(b: &Buckets) -> Sums {
        let mut s = Sums {
            buckets: Vec::with_capacity(b.len()),
            before: Vec::with_capacity(b.len() + 1),
        };
        let mut run = (0, 0);
        s.before.push(run);
        for (&k, c) in b {
            run = (run.0 + c[0], run.1 + c[1]);
            s.buckets.push(k);
            s.before.push(run);
        }
        s
    }

    /// Totals of the buckets `lo..=hi`.
    fn between(&self, lo: i64, hi: i64) -> (u64, u64) {
        let a = self.buckets.partition_point(|&k| k < lo);
        let b = self.buckets.partition_point(|&k| k <= hi).max(a);
        let (x, y) = (self.before[a], self.before[b]);
        (y.0 - x.0, y.1 - x.1)
    }
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
        let buckets: HashMap<String, Buckets> = gnames.into_iter().zip(per_gid).collect();
        Groups {
            default_group,
            key_group,
            sums: buckets
                .iter()
                .map(|(g, b)| (g.clone(), Sums::of(b)))
                .collect(),
            buckets,
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
        self.sums.get(g).map_or((0, 0), |s| {
            s.between(a.div_euclid(BUCKET_MS), b.div_euclid(BUCKET_MS))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_totals_equal_summing_the_range() {
        // Sparse buckets, negative ones (times before 1970 after an offset) and gaps.
        let mut b = Buckets::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 2000) as i64 - 500;
            let e = b.entry(k).or_insert([0; 3]);
            e[0] += x % 50 + 1;
            e[1] += x % 7;
        }
        let s = Sums::of(&b);
        for (lo, hi) in [
            (-600, 2000),
            (-500, -500),
            (0, 0),
            (10, 5),
            (1499, 1600),
            (2000, 3000),
        ] {
            let want = b
                .range(lo..=hi.max(lo))
                .fold((0, 0), |a, (_, c)| (a.0 + c[0], a.1 + c[1]));
            let want = if hi < lo { (0, 0) } else { want };
            assert_eq!(s.between(lo, hi), want, "{lo}..={hi}");
        }
        assert_eq!(Sums::of(&Buckets::new()).between(0, 10), (0, 0));
    }
}
