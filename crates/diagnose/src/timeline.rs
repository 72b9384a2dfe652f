//! Bounded-memory time series of requests by outcome with latency histograms: bins start at 1 s
//! and double in width whenever the span would need more than [`MAX_BINS`] bins.

use crate::verdict::{Point, Series};
use hdrhistogram::Histogram;

/// Most bins kept; beyond that the bin width doubles.
pub const MAX_BINS: usize = 1024;
const MAX_LATENCY_MS: u64 = 3_600_000;

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

/// The adaptive timeline.
pub struct Timeline {
    origin_ms: Option<i64>,
    bin_ms: i64,
    bins: Vec<Bin>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            origin_ms: None,
            bin_ms: 1000,
            bins: Vec::new(),
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
        let origin = *self.origin_ms.get_or_insert(t_ms - t_ms.rem_euclid(1000));
        let mut idx = ((t_ms - origin).max(0) / self.bin_ms) as usize;
        while idx >= MAX_BINS {
            self.coarsen();
            idx = ((t_ms - origin).max(0) / self.bin_ms) as usize;
        }
        if idx >= self.bins.len() {
            self.bins.resize_with(idx + 1, Bin::new);
        }
        let b = &mut self.bins[idx];
        match outcome {
            Outcome::Ok => b.ok += 1,
            Outcome::Failed => b.failed += 1,
            Outcome::Nlu => b.nlu += 1,
        }
        if let Some(us) = latency_us {
            let h = b.hist.get_or_insert_with(|| {
                Histogram::new_with_max(MAX_LATENCY_MS, 2).expect("static bounds")
            });
            h.saturating_record(((us.max(0) as u64) / 1000).min(MAX_LATENCY_MS));
        }
    }

    fn coarsen(&mut self) {
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
    pub fn series(&self) -> Series {
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
}
