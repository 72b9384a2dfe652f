//! After nginx refused its configuration (`[emerg] host not found in upstream`): did it go on
//! serving — a refused reload, the running configuration unchanged — or log nothing for
//! seconds it had traffic for — a start or restart that failed, nginx down? Read from the access
//! log's timeline around each such line; where the traffic before it is too thin for a silence
//! to mean anything, or there is no access log, the reading is undetermined and says what
//! would decide it.

use crate::verdict::Series;

/// The traffic before the line that sets the rate a silence is measured against.
const BEFORE_MS: i64 = 10_000;
/// A silence read as down lasts at least this long after the line's second…
const SILENCE_MS: i64 = 2_000;
/// …and misses at least this many requests at the rate before it.
const MIN_MISSED: f64 = 20.0;
/// Timeline bins wider than this cannot place a silence of [`SILENCE_MS`].
const MAX_BIN_MS: i64 = 1_000;
/// Lines read one by one (the rest are counted).
const MAX_READ: usize = 5;

/// What the access log shows after one refusal.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum After {
    /// Requests went on being logged: these many in the [`SILENCE_MS`] after its second.
    Serving(u64),
    /// Nothing logged from its second on, where about `expected` requests would have been in
    /// the first [`SILENCE_MS`]; up again at `until_ms` (none: not before the log ends).
    Down {
        until_ms: Option<i64>,
        expected: f64,
    },
    /// The timeline cannot tell; why.
    Undetermined(String),
}

/// Read the access log's timeline after a refusal logged in the second starting at `t_ms`.
pub(super) fn read(series: &Series, t_ms: i64) -> After {
    let bin = series.bin_ms;
    if series.points.is_empty() {
        return After::Undetermined("no access log was read".into());
    }
    if bin > MAX_BIN_MS {
        return After::Undetermined(format!(
            "the access log's timeline has {} s bins here (a long log): diagnose the hour around it",
            bin / 1000
        ));
    }
    let n = |p: &crate::verdict::Point| p.ok + p.failed + p.nlu;
    let from = t_ms - t_ms.rem_euclid(1000) + 1000;
    let before: Vec<_> = (series.points.iter())
        .filter(|p| p.t_ms >= from - 1000 - BEFORE_MS && p.t_ms + bin <= from - 1000)
        .collect();
    let rate_per_ms = match before.len() {
        0 => 0.0,
        k => before.iter().map(|p| n(p)).sum::<u64>() as f64 / (k as i64 * bin) as f64,
    };
    let window: Vec<_> = (series.points.iter())
        .filter(|p| p.t_ms >= from && p.t_ms < from + SILENCE_MS)
        .collect();
    let logged: u64 = window.iter().map(|p| n(p)).sum();
    if logged > 0 {
        return After::Serving(logged);
    }
    let expected = rate_per_ms * SILENCE_MS as f64;
    if expected < MIN_MISSED {
        return After::Undetermined(format!(
            "{:.1} requests/s were logged in the {} s before it: too few for a silence to mean nginx was down",
            rate_per_ms * 1000.0,
            BEFORE_MS / 1000
        ));
    }
    let until_ms = (series.points.iter())
        .find(|p| p.t_ms >= from && n(p) > 0)
        .map(|p| p.t_ms);
    After::Down { until_ms, expected }
}

/// One sentence per refusal (the first [`MAX_READ`]), for the signature's note.
pub(super) fn note(series: &Series, times_ms: &[i64]) -> String {
    let at = |t: i64| {
        jiff::Timestamp::from_millisecond(t).map_or(t.to_string(), |ts| {
            ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
        })
    };
    let mut parts: Vec<String> = (times_ms.iter().take(MAX_READ))
        .map(|&t| match read(series, t) {
            After::Serving(k) => format!(
                "{}: the access log goes on ({k} requests in the next {} s) — a refused reload; the running configuration kept serving",
                at(t),
                SILENCE_MS / 1000
            ),
            After::Down { until_ms, expected } => format!(
                "{}: nothing logged {} where ~{expected:.0} requests would have been in its first {} s — nginx was down: a start or restart that failed",
                at(t),
                until_ms.map_or("to the end of the log".to_string(), |u| format!(
                    "for about {:.0} s",
                    (u - t).max(0) as f64 / 1000.0
                )),
                SILENCE_MS / 1000
            ),
            After::Undetermined(why) => format!(
                "{}: undetermined, {why} (what decides it: the access log around it, or nginx's notice lines `reconfiguring` / `start worker processes`)",
                at(t)
            ),
        })
        .collect();
    if times_ms.len() > MAX_READ {
        parts.push(format!("{} more", times_ms.len() - MAX_READ));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Point;

    /// One-second bins from `t0`, `per_s[i]` requests in second `i`.
    fn series(t0: i64, per_s: &[u64]) -> Series {
        Series {
            bin_ms: 1000,
            points: (per_s.iter().enumerate())
                .map(|(i, &ok)| Point {
                    t_ms: t0 + i as i64 * 1000,
                    ok,
                    failed: 0,
                    nlu: 0,
                    latency_ms: None,
                })
                .collect(),
        }
    }

    #[test]
    fn serving_down_and_too_thin_to_tell() {
        let t0 = 1_796_018_400_000;
        // 200/s for 20 s, then nothing for 6 s, then 200/s again.
        let mut per_s = vec![200; 20];
        per_s.extend([0; 6]);
        per_s.extend([200; 5]);
        let s = series(t0, &per_s);
        // A refusal at 12 s: traffic goes on.
        assert_eq!(read(&s, t0 + 12_000), After::Serving(400));
        // A refusal in second 19 (logged at 19.4 s): silent from 20 s to 26 s.
        assert_eq!(
            read(&s, t0 + 19_400),
            After::Down {
                until_ms: Some(t0 + 26_000),
                expected: 400.0
            }
        );
        let n = note(&s, &[t0 + 12_000, t0 + 19_400]);
        assert!(
            n.contains("a refused reload") && n.contains("for about 7 s"),
            "{n}"
        );
        // One request a second: a silence of 2 s says nothing.
        let thin = series(t0, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]);
        assert!(matches!(read(&thin, t0 + 11_000), After::Undetermined(_)));
        assert!(matches!(
            read(&Series::default(), t0),
            After::Undetermined(_)
        ));
    }
}
