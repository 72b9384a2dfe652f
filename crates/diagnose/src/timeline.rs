//! Bounded-memory time series of requests by outcome with latency histograms: bins start at 1 s
//! and double in width whenever the span would need more than [`MAX_BINS`] bins, always on the
//! epoch's grid of their width, so that the series of adjacent time ranges [`merge`].

use crate::verdict::{Point, Series};
use hdrhistogram::Histogram;

/// Most bins kept; beyond that the bin width doubles.
pub const MAX_BINS: usize = 1024;
const MAX_LATENCY_MS: u64 = 3_600_000;

#[derive(Clone)]
struct Bin {
    ok: u64,
    failed: u64,
    nlu: u64,
    hist: Option<Histogram<u32>>,
}

impl Bin {
    fn new() -> Bin {
        Bin {
            ok: 0,
            failed: 0,
            nlu: 0,
            hist: None,
        }
    }
}

fn new_hist() -> Histogram<u32> {
    Histogram::new_with_max(MAX_LATENCY_MS, 2).expect("static bounds")
}

/// Latencies (ms) below this are counted in [`Pending`] before their histogram.
const PENDING_MS: usize = 1024;

/// The latencies of the bin being filled, counted per millisecond and recorded in its
/// histogram when another bin is filled: a count costs a few instructions, a record several
/// dozen, and a histogram's state does not depend on the order of its records.
#[derive(Default, Clone)]
struct Pending {
    bin: usize,
    counts: Vec<u32>,
    /// The latencies counted, each once.
    seen: Vec<u16>,
}

impl Pending {
    fn count(&mut self, ms: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; PENDING_MS];
        }
        let c = &mut self.counts[ms as usize];
        if *c == 0 {
            self.seen.push(ms as u16);
        }
        *c += 1;
    }

    /// Record the counts in `h` (`take`: and zero them).
    fn record(&mut self, h: &mut Histogram<u32>) {
        for &ms in &self.seen {
            let n = std::mem::take(&mut self.counts[ms as usize]);
            h.saturating_record_n(ms as u64, n);
        }
        self.seen.clear();
    }

    /// Record the counts in their bin's histogram.
    fn flush(&mut self, bins: &mut [Bin]) {
        if !self.seen.is_empty() {
            let h = bins[self.bin].hist.get_or_insert_with(new_hist);
            self.record(h);
        }
    }
}

/// The adaptive timeline.
#[derive(Clone)]
pub struct Timeline {
    origin_ms: Option<i64>,
    bin_ms: i64,
    bins: Vec<Bin>,
    pending: Pending,
    /// The times `lo..hi` of the bin last added to and its index: the lines of a bin come
    /// together, and they need no 64-bit division each to find it.
    last: (i64, i64, usize),
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            origin_ms: None,
            bin_ms: 1000,
            bins: Vec::new(),
            pending: Pending::default(),
            last: (0, 0, 0),
        }
    }
}

/// Outcome of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a failure.
    Ok,
    /// 502/504 without NLU.
    Failed,
    /// No live upstreams.
    Nlu,
}

impl Timeline {
    /// Add one request ending at `t_ms` with latency `latency_us`.
    #[inline]
    pub fn add(&mut self, t_ms: i64, outcome: Outcome, latency_us: Option<i64>) {
        let (lo, hi, last) = self.last;
        let idx = if lo <= t_ms && t_ms < hi {
            last
        } else {
            self.bin_of(t_ms)
        };
        let b = &mut self.bins[idx];
        // Counted without a branch: the outcomes of a log's lines come in no order a branch
        // predictor could learn.
        b.ok += (outcome == Outcome::Ok) as u64;
        b.failed += (outcome == Outcome::Failed) as u64;
        b.nlu += (outcome == Outcome::Nlu) as u64;
        let Some(us) = latency_us else {
            return;
        };
        let ms = ((us.max(0) as u64) / 1000).min(MAX_LATENCY_MS);
        if ms as usize >= PENDING_MS {
            b.hist.get_or_insert_with(new_hist).saturating_record(ms);
            return;
        }
        if idx != self.pending.bin {
            self.pending.flush(&mut self.bins);
            self.pending.bin = idx;
        }
        self.pending.count(ms);
    }

    /// The index of the bin of `t_ms`, made (and the bins coarsened) as needed; remembered in
    /// `last`.
    fn bin_of(&mut self, t_ms: i64) -> usize {
        let mut origin = *self.origin_ms.get_or_insert(t_ms - t_ms.rem_euclid(1000));
        if t_ms < origin {
            // A line earlier than every line before it: the bins grow back to it.
            let k = (origin - t_ms + self.bin_ms - 1) / self.bin_ms;
            self.bins.splice(0..0, (0..k).map(|_| Bin::new()));
            self.pending.bin += k as usize;
            origin -= k * self.bin_ms;
            self.origin_ms = Some(origin);
        }
        let mut idx = ((t_ms - origin) / self.bin_ms) as usize;
        while idx.max(self.bins.len().saturating_sub(1)) >= MAX_BINS {
            self.coarsen();
            origin = self.origin_ms.expect("set above");
            idx = ((t_ms - origin) / self.bin_ms) as usize;
        }
        if idx >= self.bins.len() {
            self.bins.resize_with(idx + 1, Bin::new);
        }
        let lo = origin + idx as i64 * self.bin_ms;
        self.last = (lo, lo + self.bin_ms, idx);
        idx
    }

    fn coarsen(&mut self) {
        self.pending.flush(&mut self.bins);
        let mut old = std::mem::take(&mut self.bins);
        // Bins stay on the epoch's grid of their width, so that timelines of adjacent time
        // ranges merge bin for bin ([`merge`]): an origin off the wider grid starts one bin
        // earlier, with an empty first half.
        let origin = self.origin_ms.unwrap_or(0);
        if origin.rem_euclid(self.bin_ms * 2) != 0 {
            old.insert(0, Bin::new());
            self.origin_ms = Some(origin - self.bin_ms);
        }
        self.bin_ms *= 2;
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.ok += b.ok;
                a.failed += b.failed;
                a.nlu += b.nlu;
                match (&mut a.hist, b.hist) {
                    (Some(ha), Some(hb)) => {
                        let _ = ha.add(&hb);
                    }
                    (None, Some(hb)) => a.hist = Some(hb),
                    _ => {}
                }
            }
            self.bins.push(a);
        }
    }

    /// The series (requests per bin; rates are counts / bin width).
    pub fn series(&mut self) -> Series {
        self.pending.flush(&mut self.bins);
        let origin = self.origin_ms.unwrap_or(0);
        Series {
            bin_ms: self.bin_ms,
            points: self
                .bins
                .iter()
                .enumerate()
                .map(|(i, b)| Point {
                    t_ms: origin + i as i64 * self.bin_ms,
                    ok: b.ok,
                    failed: b.failed,
                    nlu: b.nlu,
                    latency_ms: b.hist.as_ref().filter(|h| !h.is_empty()).map(|h| {
                        [
                            h.value_at_quantile(0.5) as f64,
                            h.value_at_quantile(0.9) as f64,
                            h.value_at_quantile(0.99) as f64,
                            h.max() as f64,
                        ]
                    }),
                })
                .collect(),
        }
    }
}

/// The series of two adjacent (or any disjoint) time ranges as one: each bin's counts summed
/// on the wider grid, widened again while the span needs more than [`MAX_BINS`] bins — the
/// series one timeline over both ranges' requests gives. A bin's latency figures are exact
/// where one range's bin is the whole merged bin; where bins of both or several narrower bins
/// meet, each figure is the highest of theirs (the histograms are not kept).
pub fn merge(a: &Series, b: &Series) -> Series {
    let points = || a.points.iter().chain(&b.points);
    let Some(first) = points().map(|p| p.t_ms).min() else {
        return Series {
            bin_ms: a.bin_ms.max(b.bin_ms),
            points: Vec::new(),
        };
    };
    let last = points().map(|p| p.t_ms).max().unwrap_or(first);
    let mut w = a.bin_ms.max(b.bin_ms).max(1000);
    let origin = |w: i64| first - first.rem_euclid(w);
    while (last - origin(w)) / w >= MAX_BINS as i64 {
        w *= 2;
    }
    let o = origin(w);
    let n = ((last - o) / w) as usize + 1;
    let mut out: Vec<Point> = (0..n)
        .map(|i| Point {
            t_ms: o + i as i64 * w,
            ..Point::default()
        })
        .collect();
    for p in points() {
        let q = &mut out[((p.t_ms - o) / w) as usize];
        q.ok += p.ok;
        q.failed += p.failed;
        q.nlu += p.nlu;
        q.latency_ms = match (q.latency_ms, p.latency_ms) {
            (Some(x), Some(y)) => Some(std::array::from_fn(|k| x[k].max(y[k]))),
            (x, y) => x.or(y),
        };
    }
    Series {
        bin_ms: w,
        points: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_instead_of_growing() {
        let mut t = Timeline::default();
        for s in 0..5000i64 {
            t.add(1_000_000 + s * 1000, Outcome::Ok, Some(2000));
        }
        t.add(1_000_000 + 4999 * 1000, Outcome::Nlu, None);
        let s = t.series();
        assert!(s.points.len() <= MAX_BINS);
        assert_eq!(s.bin_ms, 8000);
        assert_eq!(s.points.iter().map(|p| p.ok).sum::<u64>(), 5000);
        assert_eq!(s.points.iter().map(|p| p.nlu).sum::<u64>(), 1);
        assert_eq!(s.points[0].latency_ms.unwrap()[0], 2.0);
    }

    #[test]
    fn latencies_counted_first_give_the_histograms_of_every_record() {
        // Out-of-order lines revisit earlier bins (some before the first line's bin), some
        // latencies pass the counted range, and the span forces the bins to double: each bin's
        // figures must still be those of a histogram that recorded its latencies one by one,
        // and its counts those of its lines.
        let mut t = Timeline::default();
        let mut all: Vec<(i64, u64, Outcome)> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..40_000i64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let back = if x.is_multiple_of(10) { 1500 } else { 0 };
            let t_ms = 1_000_000 + i * 75 - back;
            let ms = match x % 100 {
                0 => 5_000 + x % 100_000,
                1..=3 => PENDING_MS as u64 - 1 + x % 3,
                _ => x % 40,
            };
            let outcome = [Outcome::Ok, Outcome::Failed, Outcome::Nlu][(x >> 20) as usize % 3];
            t.add(t_ms, outcome, Some(ms as i64 * 1000));
            all.push((t_ms, ms, outcome));
        }
        let s = t.series();
        assert!(s.bin_ms > 1000, "the span doubled the bins");
        // The earliest line's bin, on the grid of the bins' width.
        let earliest = all.iter().map(|x| x.0).min().unwrap();
        let origin = earliest - earliest.rem_euclid(s.bin_ms);
        let mut want: Vec<Option<Histogram<u32>>> = vec![None; s.points.len()];
        let mut counts = vec![[0u64; 3]; s.points.len()];
        for (t_ms, ms, outcome) in all {
            let i = ((t_ms - origin) / s.bin_ms) as usize;
            want[i].get_or_insert_with(new_hist).record(ms).unwrap();
            counts[i][outcome as usize] += 1;
        }
        for ((p, h), c) in s.points.iter().zip(&want).zip(&counts) {
            let h = h.as_ref().expect("every bin has requests");
            let q = |v: f64| h.value_at_quantile(v) as f64;
            let expected = [q(0.5), q(0.9), q(0.99), h.max() as f64];
            assert_eq!(p.latency_ms, Some(expected), "bin at {}", p.t_ms);
            assert_eq!([p.ok, p.failed, p.nlu], *c, "bin at {}", p.t_ms);
        }
    }

    #[test]
    fn series_of_adjacent_ranges_merge_into_the_series_of_both() {
        // Spans short and long (no doubling, doubling in one range only, in both), split at
        // seconds on and off the wider grids.
        for (n, step, split_at) in [(900, 900, 300), (3000, 700, 1234), (9000, 500, 4001)] {
            let (mut a, mut b, mut whole) = (
                Timeline::default(),
                Timeline::default(),
                Timeline::default(),
            );
            let t0 = 1_700_000_123_456i64;
            let split = (t0 / 1000 + split_at) * 1000;
            for i in 0..n as i64 {
                let t = t0 + i * step;
                let o = [Outcome::Ok, Outcome::Failed, Outcome::Nlu][(i % 7 % 3) as usize];
                let lat = Some(1000 * (i % 50));
                whole.add(t, o, lat);
                if t < split {
                    a.add(t, o, lat)
                } else {
                    b.add(t, o, lat)
                }
            }
            let (sa, sb, sw) = (a.series(), b.series(), whole.series());
            let m = merge(&sa, &sb);
            assert_eq!(m.bin_ms, sw.bin_ms, "{n} lines");
            let counts = |s: &Series| -> Vec<(i64, u64, u64, u64)> {
                s.points
                    .iter()
                    .map(|p| (p.t_ms, p.ok, p.failed, p.nlu))
                    .collect()
            };
            assert_eq!(counts(&m), counts(&sw), "{n} lines");
            assert_eq!(counts(&merge(&sb, &sa)), counts(&sw));
            // Latency is exact where one range's bin is the merged bin.
            if sa.bin_ms == sw.bin_ms && sb.bin_ms == sw.bin_ms {
                for (p, q) in m.points.iter().zip(&sw.points) {
                    if p.t_ms + sw.bin_ms <= split || p.t_ms >= split {
                        assert_eq!(p.latency_ms, q.latency_ms, "bin at {}", p.t_ms);
                    }
                }
            }
        }
    }
}
