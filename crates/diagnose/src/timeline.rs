//! Bounded-memory time series of requests by outcome with latency histograms: bins start at 1 s
//! and double in width whenever the span would need more than [`MAX_BINS`] bins.

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
    /// `last` when the time is past the origin (earlier times all go to the first bin).
    fn bin_of(&mut self, t_ms: i64) -> usize {
        let origin = *self.origin_ms.get_or_insert(t_ms - t_ms.rem_euclid(1000));
        let mut idx = ((t_ms - origin).max(0) / self.bin_ms) as usize;
        while idx >= MAX_BINS {
            self.coarsen();
            idx = ((t_ms - origin).max(0) / self.bin_ms) as usize;
        }
        if idx >= self.bins.len() {
            self.bins.resize_with(idx + 1, Bin::new);
        }
        let lo = origin + idx as i64 * self.bin_ms;
        self.last = match t_ms >= origin {
            true => (lo, lo + self.bin_ms, idx),
            false => (0, 0, 0),
        };
        idx
    }

    fn coarsen(&mut self) {
        self.pending.flush(&mut self.bins);
        self.bin_ms *= 2;
        let old = std::mem::take(&mut self.bins);
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
        // Out-of-order lines revisit earlier bins (some before the first line's second), some
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
        // The first line's second.
        let origin = all[0].0 - all[0].0.rem_euclid(1000);
        let mut want: Vec<Option<Histogram<u32>>> = vec![None; s.points.len()];
        let mut counts = vec![[0u64; 3]; s.points.len()];
        for (t_ms, ms, outcome) in all {
            let i = ((t_ms - origin).max(0) / s.bin_ms) as usize;
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
}
