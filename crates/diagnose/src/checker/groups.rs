//! Upstream groups: which group each counted key (address or group name) belongs to, and the
//! per-group request counts in 100 ms buckets that shares, trickles and zooms are read from.

use super::access::{AccessPass, BUCKET_MS};
use super::failure::{Keys, Traj, is_addr};
use std::collections::HashMap;

/// Per group: 100 ms buckets in order, each with [requests, failed, nlu]. A sorted list, not a
/// map: built from counts that come in order, it costs no sort and no tree (the work after a
/// 10 M-line `lab` pass, 333 k buckets: 126 → 105 ms).
#[derive(Default)]
pub(super) struct Buckets(Vec<(i64, [u64; 3])>);

impl Buckets {
    /// The buckets in `r`, in order.
    pub fn range(&self, r: std::ops::Range<i64>) -> impl Iterator<Item = &(i64, [u64; 3])> {
        let at = |k: i64| self.0.partition_point(|e| e.0 < k);
        let (a, b) = (at(r.start), at(r.end).max(at(r.start)));
        self.0[a..b].iter()
    }
}

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
    no_sums: Sums,
}

/// Buckets in order and the (requests, failed) totals before each (one more than buckets).
#[derive(Default)]
pub(super) struct Sums {
    buckets: Vec<i64>,
    before: Vec<(u64, u64)>,
}

impl Sums {
    fn of(b: &Buckets) -> Sums {
        let mut s = Sums {
            buckets: Vec::with_capacity(b.0.len()),
            before: Vec::with_capacity(b.0.len() + 1),
        };
        let mut run = (0, 0);
        s.before.push(run);
        for &(k, c) in &b.0 {
            run = (run.0 + c[0], run.1 + c[1]);
            s.buckets.push(k);
            s.before.push(run);
        }
        s
    }

    /// A reader of windows that move forward (a group's failures in time order): each one
    /// starts its searches where the last one ended, so a window costs a few steps, not two
    /// binary searches.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            sums: self,
            lo: 0,
            hi: 0,
        }
    }

    /// (requests, failed) between `a` and `b` ms ([`Cursor::window`]).
    pub fn window(&self, a: i64, b: i64) -> (u64, u64) {
        self.cursor().window(a, b)
    }
}

/// One group's counts, several per bucket, as buckets (each summed).
fn summed_by_bucket(mut v: Vec<(i64, [u64; 3])>) -> Buckets {
    if !v.is_sorted_by_key(|e| e.0) {
        v.sort_by_key(|e| e.0);
    }
    v.dedup_by(|next, kept| {
        let same = next.0 == kept.0;
        if same {
            for (k, n) in kept.1.iter_mut().zip(next.1) {
                *k += n;
            }
        }
        same
    });
    Buckets(v)
}

/// See [`Sums::cursor`].
pub(super) struct Cursor<'a> {
    sums: &'a Sums,
    /// Where the last window's searches ended.
    lo: usize,
    hi: usize,
}

impl Cursor<'_> {
    /// (requests, failed) between `a` and `b` ms; a window under 2 s is widened to 2 s around
    /// its middle (one bucket of a burst says little about its share).
    pub fn window(&mut self, a: i64, b: i64) -> (u64, u64) {
        let (a, b) = if b - a < 2000 {
            let mid = (a + b) / 2;
            (mid - 1000, mid + 1000)
        } else {
            (a, b)
        };
        self.between(a.div_euclid(BUCKET_MS), b.div_euclid(BUCKET_MS))
    }

    /// Totals of the buckets `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> (u64, u64) {
        let ks = &self.sums.buckets;
        if ks.is_empty() {
            // A group with no counted request (its `Sums` may be the empty default).
            return (0, 0);
        }
        self.lo = partition_near(ks, self.lo, |k| k < lo);
        self.hi = partition_near(ks, self.hi, |k| k <= hi).max(self.lo);
        let (x, y) = (self.sums.before[self.lo], self.sums.before[self.hi]);
        (y.0 - x.0, y.1 - x.1)
    }
}

/// `ks.partition_point(pred)`, searched from `hint` (a few steps forward, else by bisection).
fn partition_near(ks: &[i64], hint: usize, pred: impl Fn(i64) -> bool) -> usize {
    let hint = hint.min(ks.len());
    if hint > 0 && !pred(ks[hint - 1]) {
        return ks[..hint].partition_point(|&k| pred(k));
    }
    let mut i = hint;
    for _ in 0..8 {
        if i == ks.len() || !pred(ks[i]) {
            return i;
        }
        i += 1;
    }
    i + ks[i..].partition_point(|&k| pred(k))
}

/// The group of a request nothing names, and the group of each key (indexed like
/// `Keys::names`): a key that is no address is a group; an address belongs to the group its
/// trajectories named, else to the default — `--upstream`, the only group seen, or
/// `(unknown)`.
pub(super) fn key_groups(
    trajs: &[Traj],
    keys: &Keys,
    addr_group: &HashMap<String, String>,
    upstream: Option<&str>,
) -> (String, Vec<String>) {
    let group_names: Vec<&String> = {
        let mut g: Vec<&String> = trajs.iter().filter_map(|t| t.group.as_ref()).collect();
        g.sort();
        g.dedup();
        g
    };
    let default_group = upstream
        .map(str::to_string)
        .or_else(|| (group_names.len() == 1).then(|| group_names[0].clone()))
        // No group is known (no group name in the logs, one or none in the config):
        // said so, never a made-up name.
        .unwrap_or_else(|| "(unknown)".to_string());
    let key_group: Vec<String> = keys
        .names
        .iter()
        .map(|k| {
            if !is_addr(k) {
                k.clone()
            } else {
                addr_group
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| default_group.clone())
            }
        })
        .collect();
    (default_group, key_group)
}

impl Groups {
    /// Group the access pass's counts (which it consumes).
    pub fn build(acc: &mut AccessPass, upstream: Option<&str>) -> Groups {
        let (default_group, key_group) =
            key_groups(&acc.trajs, &acc.keys, &acc.addr_group, upstream);
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
        // Counts come nearly in bucket order: sorting each group's list and summing runs of one
        // bucket costs far less than a map insertion per count.
        let mut per_gid: Vec<Vec<(i64, [u64; 3])>> = vec![Vec::new(); gnames.len()];
        for (k, c) in std::mem::take(&mut acc.counts) {
            let gid = key_gid
                .get((k & 0xfff) as usize)
                .copied()
                .unwrap_or(default_gid);
            per_gid[gid].push(((k >> 12) as i64, c.map(u64::from)));
        }
        let buckets: HashMap<String, Buckets> = gnames
            .into_iter()
            .zip(per_gid.into_iter().map(summed_by_bucket))
            .collect();
        Groups {
            default_group,
            key_group,
            sums: buckets
                .iter()
                .map(|(g, b)| (g.clone(), Sums::of(b)))
                .collect(),
            buckets,
            empty: Buckets::default(),
            no_sums: Sums::default(),
        }
    }

    /// A group's buckets (empty when it had no counted request).
    pub fn of(&self, g: &str) -> &Buckets {
        self.buckets.get(g).unwrap_or(&self.empty)
    }

    /// Group `g`'s running totals (none when it had no counted request): look them up once
    /// per group, then read windows with a [`Sums::cursor`].
    pub fn sums(&self, g: &str) -> &Sums {
        self.sums.get(g).unwrap_or(&self.no_sums)
    }

    /// (requests, failed) of group `g` between `a` and `b` ms ([`Cursor::window`]).
    pub fn window(&self, g: &str, a: i64, b: i64) -> (u64, u64) {
        self.sums(g).window(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn running_totals_equal_summing_the_range() {
        // Sparse buckets, negative ones (times before 1970 after an offset) and gaps.
        let mut m = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 2000) as i64 - 500;
            let e = m.entry(k).or_insert([0u64; 3]);
            e[0] += x % 50 + 1;
            e[1] += x % 7;
        }
        let b = Buckets(m.iter().map(|(&k, &c)| (k, c)).collect());
        let s = Sums::of(&b);
        let summed = |lo: i64, hi: i64| {
            let sum = m
                .range(lo..=hi.max(lo))
                .fold((0, 0), |a, (_, c)| (a.0 + c[0], a.1 + c[1]));
            if hi < lo { (0, 0) } else { sum }
        };
        for (lo, hi) in [
            (-600, 2000),
            (-500, -500),
            (0, 0),
            (10, 5),
            (1499, 1600),
            (2000, 3000),
        ] {
            let want = summed(lo, hi);
            assert_eq!(s.cursor().between(lo, hi), want, "{lo}..={hi}");
        }
        assert_eq!(
            Sums::of(&Buckets::default()).cursor().between(0, 10),
            (0, 0)
        );
        assert_eq!(Sums::default().cursor().window(0, 10), (0, 0));
        // One cursor over windows that mostly move forward, with jumps back and far ahead.
        let mut c = s.cursor();
        let mut y: u64 = 7;
        let mut lo = -700;
        for n in 0..3000 {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo += (y >> 60) as i64 - 3;
            if n % 500 == 0 {
                lo += 400 - (y >> 54) as i64;
            }
            let hi = lo + (y >> 58) as i64 - 2;
            let want = summed(lo, hi);
            assert_eq!(c.between(lo, hi), want, "cursor at {lo}..={hi}");
        }
    }

    #[test]
    fn counts_in_any_order_sum_to_the_buckets_of_a_map() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut counts = Vec::new();
        let mut m: BTreeMap<i64, [u64; 3]> = BTreeMap::new();
        for i in 0..5000i64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Nearly in order, some counts late, some buckets before 0.
            let k = i / 7
                - 40
                - if x.is_multiple_of(9) {
                    (x % 30) as i64
                } else {
                    0
                };
            let c = [x % 5 + 1, x % 3, x % 2];
            counts.push((k, c));
            let e = m.entry(k).or_default();
            for (a, n) in e.iter_mut().zip(c) {
                *a += n;
            }
        }
        for sorted in [false, true] {
            let mut v = counts.clone();
            if sorted {
                v.sort_by_key(|e| e.0);
            }
            let b = summed_by_bucket(v);
            let want: Vec<(i64, [u64; 3])> = m.iter().map(|(&k, &c)| (k, c)).collect();
            assert_eq!(b.0, want);
            for (lo, hi) in [(-100, 0), (-41, -40), (10, 10), (200, 100), (700, 900)] {
                let got: Vec<_> = b.range(lo..hi).copied().collect();
                let want: Vec<_> = match lo < hi {
                    true => m.range(lo..hi).map(|(&k, &c)| (k, c)).collect(),
                    false => Vec::new(),
                };
                assert_eq!(got, want, "{lo}..{hi}");
            }
        }
    }
}
