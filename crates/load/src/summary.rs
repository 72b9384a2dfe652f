//! The run summary, built the same way live (during a run) and from result files (`load report`).

use crate::record::{ErrorKind, Record};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Percentiles of one latency distribution, microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_us: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

impl Percentiles {
    /// Read the percentiles of an HDR histogram.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Counts per status class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classes {
    /// 1xx responses.
    pub c1xx: u64,
    /// 2xx responses.
    pub c2xx: u64,
    /// 3xx responses.
    pub c3xx: u64,
    /// 4xx responses.
    pub c4xx: u64,
    /// 5xx responses.
    pub c5xx: u64,
    /// Requests without a response (any error kind, including late/dropped).
    pub errors: u64,
}

impl Classes {
    fn from_array(a: &[u64; 6]) -> Classes {
        Classes {
            c1xx: a[0],
            c2xx: a[1],
            c3xx: a[2],
            c4xx: a[3],
            c5xx: a[4],
            errors: a[5],
        }
    }
}

/// One second of the run (by scheduled time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the start of the run.
    pub t: i64,
    /// Requests scheduled in this second.
    pub requests: u64,
    /// Status classes of those requests.
    #[serde(flatten)]
    pub classes: Classes,
    /// Corrected latency median of the requests sent in this second.
    pub p50_us: u64,
    /// Corrected latency p99.
    pub p99_us: u64,
    /// Corrected latency max.
    pub max_us: u64,
    /// Uncorrected latency p99.
    pub uncorrected_p99_us: u64,
}

/// Everything `resolvelab load` prints at the end, serializable as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Open loop (a schedule) or closed loop (`--rate max`).
    pub open_loop: bool,
    /// Epoch µs of the first scheduled request.
    pub start_us: i64,
    /// Requests accounted for (every scheduled request has exactly one record).
    pub requests: u64,
    /// Requests actually sent (late/dropped ones were not).
    pub sent: u64,
    /// Requests that got a complete response (any status).
    pub responses: u64,
    /// Share of requests answered 2xx or 3xx.
    pub success_ratio: f64,
    /// Counts per HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Counts per status class.
    pub classes: Classes,
    /// Counts per error kind (only kinds that occurred).
    pub errors: BTreeMap<String, u64>,
    /// Corrected latency (done − scheduled) of every sent request.
    pub latency: Percentiles,
    /// Uncorrected latency (done − sent) of every sent request.
    pub uncorrected: Percentiles,
    /// Schedule lag (sent − scheduled) of every sent request.
    pub schedule_lag: Percentiles,
    /// Generator lag (dispatch − scheduled), measured by the scheduler; absent in `load report`.
    pub dispatch_lag: Option<Percentiles>,
    /// Rate the schedule asked for (`null` for `--rate max`).
    pub target_rps: Option<f64>,
    /// Rate at which requests actually left.
    pub achieved_rps: f64,
    /// Completed responses per second over the whole run.
    pub throughput_rps: f64,
    /// Seconds from the first scheduled request to the last completion.
    pub duration_s: f64,
    /// Response body bytes received.
    pub bytes_in: u64,
    /// Name of the captured response header.
    pub header_name: Option<String>,
    /// Counts per captured header value (e.g. which backend answered).
    pub headers: BTreeMap<String, u64>,
    /// Per-second series by scheduled time.
    pub per_second: Vec<Second>,
    /// Malformed lines skipped while reading result files (`load report`).
    pub malformed_lines: u64,
    /// Requests sent a second time on a new connection after a reused one closed before any
    /// response byte (`--retry-idempotent`), whatever their outcome.
    #[serde(default)]
    pub client_retries: u64,
}

#[derive(Default, Clone)]
struct SecAcc {
    classes: [u64; 6],
    hist: Option<Histogram<u64>>,
    /// `None` while every uncorrected latency of the second equals the corrected one.
    unc: Option<Histogram<u64>>,
}

/// Record into an auto-resizing histogram (`saturating_record` would clamp instead of growing).
pub(crate) fn put(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

fn hist(sigfig: u8) -> Histogram<u64> {
    // Auto-resizing: latencies of hours still fit, and the common case stays small.
    Histogram::new(sigfig).expect("valid sigfig")
}

/// Accumulates records into a [`Summary`].
#[derive(Clone)]
pub struct SummaryBuilder {
    origin_us: i64,
    open_loop: bool,
    corrected: Histogram<u64>,
    uncorrected: Histogram<u64>,
    lag: Histogram<u64>,
    /// Every uncorrected latency so far equals the corrected one (always, with `--rate max`):
    /// `uncorrected` is then left empty and `corrected` stands for both, which saves two
    /// histogram updates per record where throughput matters most.
    unc_same: bool,
    /// Zero schedule lags not recorded yet (again every record of `--rate max`).
    lag_zeros: u64,
    statuses: BTreeMap<u16, u64>,
    errors: [u64; 7],
    classes: [u64; 6],
    requests: u64,
    sent: u64,
    bytes: u64,
    first_t: Option<i64>,
    last_t: Option<i64>,
    first_sent: Option<i64>,
    last_sent: Option<i64>,
    last_done: Option<i64>,
    per_sec: BTreeMap<i64, SecAcc>,
    headers: BTreeMap<String, u64>,
    header_name: Option<String>,
    dispatch_lag: Option<Percentiles>,
    malformed: u64,
    retried: u64,
}

impl SummaryBuilder {
    /// A builder whose per-second series counts from `origin_us`.
    pub fn new(origin_us: i64, open_loop: bool) -> SummaryBuilder {
        SummaryBuilder {
            origin_us,
            open_loop,
            corrected: hist(3),
            uncorrected: hist(3),
            lag: hist(3),
            unc_same: true,
            lag_zeros: 0,
            statuses: BTreeMap::new(),
            errors: [0; 7],
            classes: [0; 6],
            requests: 0,
            sent: 0,
            bytes: 0,
            first_t: None,
            last_t: None,
            first_sent: None,
            last_sent: None,
            last_done: None,
            per_sec: BTreeMap::new(),
            headers: BTreeMap::new(),
            header_name: None,
            dispatch_lag: None,
            malformed: 0,
            retried: 0,
        }
    }

    /// Name the captured header in the summary.
    pub fn header_name(&mut self, name: Option<String>) {
        self.header_name = name;
    }

    /// Attach the scheduler's own lag measurement.
    pub fn dispatch_lag(&mut self, p: Percentiles) {
        self.dispatch_lag = Some(p);
    }

    /// Count malformed input lines.
    pub fn malformed(&mut self, n: u64) {
        self.malformed += n;
    }

    /// Add one record.
    pub fn add(&mut self, r: &Record) {
        self.requests += 1;
        self.retried += r.retried as u64;
        self.first_t = Some(self.first_t.map_or(r.t_us, |x| x.min(r.t_us)));
        self.last_t = Some(self.last_t.map_or(r.t_us, |x| x.max(r.t_us)));
        let class = r.class();
        self.classes[class] += 1;
        if let Some(s) = r.status
            && r.error.is_none()
        {
            *self.statuses.entry(s).or_default() += 1;
        }
        if let Some(e) = r.error {
            self.errors[e.index()] += 1;
        }
        self.bytes += r.bytes;
        if let Some(h) = &r.header {
            // Look up before inserting: `entry` would clone the value on every record.
            match self.headers.get_mut(h) {
                Some(n) => *n += 1,
                None => {
                    self.headers.insert(h.clone(), 1);
                }
            }
        }
        let sec = (r.t_us - self.origin_us).div_euclid(1_000_000);
        let acc = self.per_sec.entry(sec).or_default();
        acc.classes[class] += 1;
        if let Some(sent) = r.sent_us {
            self.sent += 1;
            self.first_sent = Some(self.first_sent.map_or(sent, |x| x.min(sent)));
            self.last_sent = Some(self.last_sent.map_or(sent, |x| x.max(sent)));
            let lat = r.latency_us.unwrap_or(0).max(1) as u64;
            let unc = r.uncorrected_us.unwrap_or(0).max(1) as u64;
            if self.unc_same && unc != lat {
                // The first difference: from here on both are kept, starting from the
                // shared history.
                self.unc_same = false;
                self.uncorrected = self.corrected.clone();
            }
            put(&mut self.corrected, lat);
            if !self.unc_same {
                put(&mut self.uncorrected, unc);
            }
            match (sent - r.t_us).max(0) as u64 {
                0 => self.lag_zeros += 1,
                l => put(&mut self.lag, l),
            }
            let h = acc.hist.get_or_insert_with(|| hist(2));
            if acc.unc.is_none() && unc != lat {
                acc.unc = Some(h.clone());
            }
            put(h, lat);
            if let Some(u) = acc.unc.as_mut() {
                put(u, unc);
            }
            let done = r.t_us + r.latency_us.unwrap_or(0);
            self.last_done = Some(self.last_done.map_or(done, |x| x.max(done)));
        }
    }

    /// Finish.
    pub fn finish(mut self) -> Summary {
        if self.lag_zeros > 0 {
            let _ = self.lag.record_n(0, self.lag_zeros);
        }
        if self.unc_same {
            self.uncorrected = self.corrected.clone();
        }
        let rate = |n: u64, a: Option<i64>, b: Option<i64>| -> Option<f64> {
            match (a, b) {
                // n requests span n − 1 intervals.
                (Some(a), Some(b)) if b > a && n > 1 => {
                    Some((n - 1) as f64 / ((b - a) as f64 / 1e6))
                }
                _ => None,
            }
        };
        let target_rps = if self.open_loop {
            rate(self.requests, self.first_t, self.last_t)
        } else {
            None
        };
        let achieved_rps = rate(self.sent, self.first_sent, self.last_sent).unwrap_or(0.0);
        let start = self.first_t.unwrap_or(self.origin_us);
        let end = self
            .last_done
            .unwrap_or(start)
            .max(self.last_t.unwrap_or(start));
        let duration_s = (end - start) as f64 / 1e6;
        let responses: u64 = self.classes[..5].iter().sum();
        let ok = self.classes[1] + self.classes[2];
        let mut errors = BTreeMap::new();
        for k in ErrorKind::ALL {
            if self.errors[k.index()] > 0 {
                errors.insert(k.as_str().to_string(), self.errors[k.index()]);
            }
        }
        let per_second = if let (Some(first), Some(last)) =
            (self.per_sec.keys().next(), self.per_sec.keys().last())
        {
            // Every second in the span, including empty ones, so charts show gaps as zero.
            (*first..=*last)
                .map(|t| {
                    let acc = self.per_sec.get(&t);
                    let classes = acc.map(|a| a.classes).unwrap_or_default();
                    let h = acc.and_then(|a| a.hist.as_ref());
                    let u = acc.and_then(|a| a.unc.as_ref().or(a.hist.as_ref()));
                    Second {
                        t,
                        requests: classes.iter().sum(),
                        classes: Classes::from_array(&classes),
                        p50_us: h.map_or(0, |h| h.value_at_quantile(0.5)),
                        p99_us: h.map_or(0, |h| h.value_at_quantile(0.99)),
                        max_us: h.map_or(0, |h| h.max()),
                        uncorrected_p99_us: u.map_or(0, |h| h.value_at_quantile(0.99)),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        Summary {
            open_loop: self.open_loop,
            start_us: start,
            requests: self.requests,
            sent: self.sent,
            responses,
            success_ratio: if self.requests > 0 {
                ok as f64 / self.requests as f64
            } else {
                0.0
            },
            statuses: self.statuses,
            classes: Classes::from_array(&self.classes),
            errors,
            latency: Percentiles::of(&self.corrected),
            uncorrected: Percentiles::of(&self.uncorrected),
            schedule_lag: Percentiles::of(&self.lag),
            dispatch_lag: self.dispatch_lag,
            target_rps,
            achieved_rps,
            throughput_rps: if duration_s > 0.0 {
                responses as f64 / duration_s
            } else {
                0.0
            },
            duration_s,
            bytes_in: self.bytes,
            header_name: self.header_name,
            headers: self.headers,
            per_second,
            malformed_lines: self.malformed,
            client_retries: self.retried,
        }
    }
}

/// Render microseconds for humans: `850µs`, `12.3ms`, `1.204s`.
pub fn human_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.3}s", us as f64 / 1e6)
    }
}

fn pct_line(p: &Percentiles) -> String {
    format!(
        "{}, {}, {}, {}, {}, {}",
        human_us(p.p50_us),
        human_us(p.p90_us),
        human_us(p.p99_us),
        human_us(p.p999_us),
        human_us(p.max_us),
        human_us(p.mean_us.round() as u64)
    )
}

impl Summary {
    /// The text report (vegeta-like, one aspect per line).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let target = self
            .target_rps
            .map_or_else(|| "max".to_string(), |r| format!("{r:.2}/s"));
        let _ = writeln!(
            s,
            "Requests       [total, sent, target, achieved]      {}, {}, {}, {:.2}/s",
            self.requests, self.sent, target, self.achieved_rps
        );
        let _ = writeln!(
            s,
            "Duration       [first scheduled → last done]        {:.3}s  (throughput {:.2}/s)",
            self.duration_s, self.throughput_rps
        );
        let _ = writeln!(
            s,
            "Latency        [p50, p90, p99, p99.9, max, mean]    {}   corrected (from schedule)",
            pct_line(&self.latency)
        );
        let _ = writeln!(
            s,
            "Latency        [p50, p90, p99, p99.9, max, mean]    {}   uncorrected (from send)",
            pct_line(&self.uncorrected)
        );
        let _ = writeln!(
            s,
            "Schedule lag   [p50, p90, p99, p99.9, max, mean]    {}   (send − schedule)",
            pct_line(&self.schedule_lag)
        );
        if let Some(d) = &self.dispatch_lag {
            let _ = writeln!(
                s,
                "Generator lag  [p50, p90, p99, p99.9, max, mean]    {}   (dispatch − schedule)",
                pct_line(d)
            );
        }
        let _ = writeln!(
            s,
            "Bytes in       [total, mean]                        {}, {:.2}",
            self.bytes_in,
            if self.requests > 0 {
                self.bytes_in as f64 / self.requests as f64
            } else {
                0.0
            }
        );
        let _ = writeln!(
            s,
            "Success        [2xx+3xx ratio]                      {:.2}%",
            self.success_ratio * 100.0
        );
        let codes: Vec<String> = self
            .statuses
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        let _ = writeln!(
            s,
            "Status codes   [code:count]                         {}",
            codes.join("  ")
        );
        let c = &self.classes;
        let _ = writeln!(
            s,
            "Status classes [1xx 2xx 3xx 4xx 5xx errors]         {} {} {} {} {} {}",
            c.c1xx, c.c2xx, c.c3xx, c.c4xx, c.c5xx, c.errors
        );
        let errs: Vec<String> = self
            .errors
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        let _ = writeln!(
            s,
            "Errors         [kind:count]                         {}",
            if errs.is_empty() {
                "none".to_string()
            } else {
                errs.join("  ")
            }
        );
        if let Some(name) = &self.header_name {
            let vals: Vec<String> = self
                .headers
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect();
            let label = format!("Header {name}");
            let _ = writeln!(s, "{label:<15}{:<37}{}", "[value:count]", vals.join("  "));
        }
        if self.malformed_lines > 0 {
            let _ = writeln!(
                s,
                "Malformed      [lines skipped]                      {}",
                self.malformed_lines
            );
        }
        if self.client_retries > 0 {
            let _ = writeln!(
                s,
                "Retried        [sent again on a new connection]     {}",
                self.client_retries
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        seq: u64,
        t: i64,
        lat: Option<i64>,
        status: Option<u16>,
        err: Option<ErrorKind>,
    ) -> Record {
        Record {
            t_us: t,
            sent_us: lat.map(|_| t + 10),
            latency_us: lat,
            uncorrected_us: lat.map(|l| l - 10),
            status,
            bytes: 5,
            error: err,
            conn: Some(1),
            method: "GET".into(),
            header: Some("a".into()),
            seq,
            retried: false,
        }
    }

    #[test]
    fn counts_rates_and_series() {
        let mut b = SummaryBuilder::new(0, true);
        for i in 0..100 {
            let t = i * 20_000; // 50 rps over 2 s
            let (status, err) = if i % 10 == 0 {
                (None, Some(ErrorKind::Dropped))
            } else if i % 10 == 1 {
                (Some(502), None)
            } else {
                (Some(200), None)
            };
            let lat = if err.is_some() { None } else { Some(1000 + i) };
            b.add(&rec(i as u64, t, lat, status, err));
        }
        let s = b.finish();
        assert_eq!(s.requests, 100);
        assert_eq!(s.sent, 90);
        assert_eq!(s.classes.c2xx, 80);
        assert_eq!(s.classes.c5xx, 10);
        assert_eq!(s.classes.errors, 10);
        assert_eq!(s.errors["dropped"], 10);
        assert_eq!(s.statuses[&502], 10);
        assert!((s.target_rps.unwrap() - 50.0).abs() < 0.01);
        assert_eq!(s.per_second.len(), 2);
        assert_eq!(s.per_second[0].requests, 50);
        assert_eq!(s.per_second[1].classes.c5xx, 5);
        assert_eq!(s.headers["a"], 100);
        assert!(s.latency.p50_us >= 1000 && s.latency.max_us <= 1100);
        assert!(s.to_text().contains("dropped:10"));
        // Large values grow the histogram instead of being clamped.
        let mut b = SummaryBuilder::new(0, true);
        b.add(&rec(0, 0, Some(5_000_000), Some(200), None));
        assert!(b.finish().latency.max_us >= 4_990_000);
        let json = serde_json::to_string(&s).unwrap();
        let back: Summary = serde_json::from_str(&json).unwrap();
        assert_eq!(back.requests, 100);
    }

    #[test]
    fn shared_histories_split_at_the_first_difference() {
        // Closed-loop records (sent = scheduled, so corrected = uncorrected and lag 0) are
        // kept once; a later open-loop-like record must still count in every histogram.
        let closed = |seq: u64, t: i64, lat: i64| Record {
            t_us: t,
            sent_us: Some(t),
            latency_us: Some(lat),
            uncorrected_us: Some(lat),
            ..rec(seq, t, Some(lat), Some(200), None)
        };
        let mut b = SummaryBuilder::new(0, false);
        for i in 0..99 {
            b.add(&closed(i, i as i64 * 1000, 100));
        }
        let s = b.clone().finish();
        assert_eq!(s.uncorrected, s.latency);
        assert_eq!(s.schedule_lag.count, 99);
        assert_eq!(s.schedule_lag.max_us, 0);
        assert_eq!(s.per_second[0].uncorrected_p99_us, s.per_second[0].p99_us);
        // One record sent 50 ms late with a 60 ms corrected, 10 ms uncorrected latency.
        b.add(&Record {
            t_us: 99_000,
            sent_us: Some(149_000),
            latency_us: Some(60_000),
            uncorrected_us: Some(10_000),
            ..rec(99, 99_000, Some(60_000), Some(200), None)
        });
        let s = b.finish();
        assert_eq!(
            (s.latency.count, s.uncorrected.count, s.schedule_lag.count),
            (100, 100, 100)
        );
        assert!(s.latency.max_us >= 59_900 && s.uncorrected.max_us < 10_100);
        assert!(s.uncorrected.max_us >= 9_990 && s.uncorrected.min_us == 100);
        assert!(s.schedule_lag.max_us >= 49_900 && s.schedule_lag.p50_us == 0);
        let sec = &s.per_second[0];
        assert!(sec.max_us >= 59_900 && sec.uncorrected_p99_us < 10_100);
    }
}
