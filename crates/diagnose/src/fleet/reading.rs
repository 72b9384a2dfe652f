//! What only a fleet shows: how the instances that served an upstream met its failure.
//!
//! One instance's logs cannot tell a DNS answer change from a dead backend when its DNS answers
//! were not logged. A fleet can, by *when* each instance began to fail:
//!
//! - the same answer change reaches each instance at its own re-query, so their windows start
//!   staggered, by up to one re-query period (and end so, when the answer comes back);
//! - a backend that dies is met by every instance at the same instant;
//! - a backend that dies behind a GSLB (or a service registry) that then answers another
//!   address is met at one instant and left at each instance's own re-query: the windows start
//!   together and end staggered, by up to one re-query period;
//! - a failure on one instance while the others served the same upstream is that instance's
//!   own (its `max_fails` marks, its resolver cache, its local ports).
//!
//! Each reading states the numbers that decide it, and is `undetermined` when they do not.

use serde::{Deserialize, Serialize};

/// Windows that start within this of each other started "at the same instant" (the lab's
/// 100 ms bins and clock skew between hosts stay well inside it; a re-query period is ≥ 1 s).
pub const SAME_INSTANT_MS: i64 = 1_000;

/// What the fleet shows about one incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadingKind {
    /// Staggered windows within one re-query period: an answer change.
    DnsAnswerChange,
    /// Every hit instance began at the same instant: what they share failed.
    SameInstant,
    /// Began at the same instant, ended staggered within one re-query period: what they share
    /// failed, and a DNS answer change (a failover) ended it at each instance's re-query.
    Failover,
    /// One instance failed while others served the upstream.
    Local,
    /// The numbers do not decide.
    Undetermined,
}

impl ReadingKind {
    /// Its name, as JSON and `fleet.reading` checks write it (`dns-answer-change`).
    pub fn id(self) -> &'static str {
        match self {
            ReadingKind::DnsAnswerChange => "dns-answer-change",
            ReadingKind::SameInstant => "same-instant",
            ReadingKind::Failover => "failover",
            ReadingKind::Local => "local",
            ReadingKind::Undetermined => "undetermined",
        }
    }
}

/// The reading and the sentence with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// What it shows.
    pub kind: ReadingKind,
    /// Why, with the numbers.
    pub text: String,
}

/// One hit instance's window on the upstream.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// First failure, epoch ms.
    pub start_ms: i64,
    /// Last failure, epoch ms.
    pub end_ms: i64,
    /// The instance's re-query period, when its logs or its configuration showed it.
    pub requery_ms: Option<f64>,
}

/// Read the windows of the `hit` instances (one window each) out of `serving` instances that
/// served requests while the incident lasted.
pub fn read(upstream: &str, windows: &[Window], serving: usize) -> Reading {
    let k = windows.len();
    let n = serving.max(k);
    let first = windows.iter().map(|w| w.start_ms).min().unwrap_or(0);
    let spread = windows.iter().map(|w| w.start_ms).max().unwrap_or(0) - first;
    let say = |kind, text: String| Reading { kind, text };
    if k == 1 {
        return if n >= 2 {
            say(
                ReadingKind::Local,
                format!(
                    "1 of the {n} instances logging requests then failed on `{upstream}`, the others not: a cause inside that instance (its max_fails marks, its resolver cache, its ports), not the backend or a DNS answer they all got"
                ),
            )
        } else {
            say(
                ReadingKind::Undetermined,
                "no other instance served requests then: a fleet reading needs two".into(),
            )
        };
    }
    let mut periods: Vec<f64> = windows.iter().filter_map(|w| w.requery_ms).collect();
    periods.sort_by(f64::total_cmp);
    let period = periods.get(periods.len() / 2).copied();
    let last_end = windows.iter().map(|w| w.end_ms).max().unwrap_or(0);
    let end_spread = last_end - windows.iter().map(|w| w.end_ms).min().unwrap_or(0);
    if spread <= SAME_INSTANT_MS
        && let Some(p) = period
        && end_spread > SAME_INSTANT_MS
        && end_spread as f64 <= p
    {
        return say(
            ReadingKind::Failover,
            format!(
                "{k} of {n} instances began failing on `{upstream}` within {spread} ms of each other and stopped staggered over {end_spread} ms, within one re-query period ({} ms): what they share failed at one instant, and a DNS answer change — a GSLB or a registry failing over — ended it at each instance's own re-query",
                p.round() as i64
            ),
        );
    }
    if spread <= SAME_INSTANT_MS {
        return say(
            ReadingKind::SameInstant,
            format!(
                "{k} of {n} instances began failing on `{upstream}` within {spread} ms of each other: what they share failed at one instant — the backend, or a DNS change they re-queried in step (their DNS answers decide which)"
            ),
        );
    }
    let Some(period) = period else {
        return say(
            ReadingKind::Undetermined,
            format!(
                "{k} of {n} instances began failing on `{upstream}` staggered over {spread} ms, but no instance's re-query period is known: a DNS log (--dns), swaps in $upstream_addr or the resolver's `valid=` (--nginx-conf) show it, and decide whether the stagger is each instance's own re-query"
            ),
        );
    };
    let period_ms = period.round() as i64;
    // Each instance meets the change at its first re-query after it: within one period.
    if spread as f64 <= period {
        say(
            ReadingKind::DnsAnswerChange,
            format!(
                "{k} of {n} instances began failing on `{upstream}` staggered over {spread} ms, within one re-query period ({period_ms} ms), and ended staggered over {end_spread} ms: one DNS answer change met at each instance's own re-query"
            ),
        )
    } else {
        say(
            ReadingKind::Undetermined,
            format!(
                "{k} of {n} instances began failing on `{upstream}` staggered over {spread} ms, more than one re-query period ({period_ms} ms): not one answer change met at each re-query; the instances' DNS answers decide"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_json_names() {
        for k in [
            ReadingKind::DnsAnswerChange,
            ReadingKind::SameInstant,
            ReadingKind::Failover,
            ReadingKind::Local,
            ReadingKind::Undetermined,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.id());
        }
    }

    fn w(start_ms: i64, len: i64, requery_ms: Option<f64>) -> Window {
        Window {
            start_ms,
            end_ms: start_ms + len,
            requery_ms,
        }
    }

    #[test]
    fn staggered_within_a_period_is_an_answer_change() {
        let p = Some(5_000.0);
        let ws = [w(0, 4_900, p), w(1_300, 5_000, p), w(3_800, 4_700, p)];
        let r = read("be", &ws, 4);
        assert_eq!(r.kind, ReadingKind::DnsAnswerChange, "{}", r.text);
        assert!(r.text.starts_with("3 of 4 instances"), "{}", r.text);
        assert!(r.text.contains("staggered over 3800 ms, within one re-query period (5000 ms), and ended staggered over 3600 ms"), "{}", r.text);
    }

    #[test]
    fn the_same_instant_points_at_what_they_share() {
        let ws = [w(0, 9_000, None), w(400, 9_000, None), w(900, 8_000, None)];
        assert_eq!(read("be", &ws, 3).kind, ReadingKind::SameInstant);
    }

    #[test]
    fn together_in_and_staggered_out_is_a_failover() {
        let p = Some(6_000.0);
        // Start within 300 ms, end over 4.8 s: a failover met at each re-query.
        let ws = [
            w(0, 3_000, p),
            w(100, 4_400, p),
            w(300, 6_200, p),
            w(200, 7_600, p),
        ];
        let r = read("be", &ws, 4);
        assert_eq!(r.kind, ReadingKind::Failover, "{}", r.text);
        assert!(r.text.contains("within 300 ms of each other and stopped staggered over 4800 ms, within one re-query period (6000 ms)"), "{}", r.text);
        // Ends staggered over more than a period: not one answer change; the start still decides.
        let ws = [w(0, 3_000, p), w(100, 12_000, p)];
        assert_eq!(read("be", &ws, 2).kind, ReadingKind::SameInstant);
        // Ends together (the backend came back): what they share.
        let ws = [w(0, 8_000, p), w(400, 7_700, p)];
        assert_eq!(read("be", &ws, 2).kind, ReadingKind::SameInstant);
        // No period known: the stagger cannot be tied to re-queries.
        let ws = [w(0, 3_000, None), w(100, 6_000, None)];
        assert_eq!(read("be", &ws, 2).kind, ReadingKind::SameInstant);
    }

    #[test]
    fn one_instance_of_several_is_local() {
        assert_eq!(read("be", &[w(0, 100, None)], 4).kind, ReadingKind::Local);
        assert_eq!(
            read("be", &[w(0, 100, None)], 1).kind,
            ReadingKind::Undetermined
        );
    }

    #[test]
    fn no_period_or_too_long_is_undetermined() {
        let ws = [w(0, 4_000, None), w(2_000, 4_000, None)];
        let r = read("be", &ws, 2);
        assert_eq!(r.kind, ReadingKind::Undetermined);
        assert!(r.text.contains("re-query period is known"), "{}", r.text);
        let p = Some(1_000.0);
        let ws = [w(0, 60_000, p), w(2_000, 60_000, p)];
        let r = read("be", &ws, 2);
        assert_eq!(r.kind, ReadingKind::Undetermined);
        assert!(
            r.text.contains("more than one re-query period (1000 ms)"),
            "{}",
            r.text
        );
    }
}
