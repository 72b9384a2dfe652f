//! Time to follow a swap: from each change of a name's answers that brought new addresses to
//! the first request the proxy sent to one of them (a try, whether it then failed or not: a
//! new address that refuses shows the proxy followed, and the failure is another finding). It is what makes engines comparable on the same DNS
//! timeline (nginx re-queries at valid+1 s, HAProxy polls every second, Caddy looks up lazily)
//! and it needs the answers' history: without a DNS log or the lab's mode events it is
//! undetermined, never zero.

use super::failure::{Keys, host_of};
use super::stale::Answers;
use super::swaps::Seg;
use crate::TimeRange;
use crate::verdict::{Followed, SwapFollow};
use std::collections::{BTreeSet, HashMap};

/// Moves listed in the verdict; the counts and the quantiles cover all of them.
pub(crate) const MAX_LISTED: usize = 1000;

/// Measure every move of a name the proxy sent to, inside the log's span `(first, last)` ms;
/// `None` when the inputs hold no answer history.
pub(super) fn measure(
    answers: &Answers,
    segs: &[Seg],
    keys: &Keys,
    span: (i64, i64),
    range: Option<TimeRange>,
) -> Option<SwapFollow> {
    if answers.is_empty() {
        return None;
    }
    // Try segments by the address's host, in time order.
    let mut by_host: HashMap<String, Vec<&Seg>> = HashMap::new();
    for s in segs {
        if let Some(addr) = keys.names.get(s.key as usize) {
            by_host.entry(host_of(addr)).or_default().push(s);
        }
    }
    by_host
        .values_mut()
        .for_each(|v| v.sort_by_key(|s| s.start));
    let used: BTreeSet<String> = by_host.keys().cloned().collect();
    let moves: Vec<_> = answers
        .moves()
        .into_iter()
        .filter(|m| m.t_ms >= span.0 && m.t_ms <= span.1)
        .filter(|m| answers.sent_to(&m.name, &used))
        .collect();
    let mut list = Vec::new();
    // A move is the range's where it happened; the next one, wherever it is, ends its wait.
    for (i, m) in moves.iter().enumerate() {
        if !TimeRange::holds(range, m.t_ms) {
            continue;
        }
        // Followed before the name moved again, or before the log ends.
        let until = moves[i + 1..]
            .iter()
            .find(|n| n.name == m.name)
            .map_or(span.1 + 1, |n| n.t_ms);
        let first = m
            .new
            .iter()
            .filter_map(|h| by_host.get(h))
            .filter_map(|segs| first_served(segs, m.t_ms, until))
            .min();
        list.push(Followed {
            t_ms: m.t_ms,
            name: m.name.clone(),
            to: m.new.iter().cloned().collect(),
            after_ms: first.map(|t| t - m.t_ms),
        });
    }
    let mut times: Vec<i64> = list.iter().filter_map(|f| f.after_ms).collect();
    times.sort_unstable();
    let moves_n = list.len() as u64;
    list.truncate(MAX_LISTED);
    Some(SwapFollow {
        moves: moves_n,
        followed: times.len() as u64,
        median_ms: (!times.is_empty()).then(|| times[(times.len() - 1) / 2]),
        max_ms: times.last().copied(),
        list,
    })
}

/// The first try in `[from, until)` among one host's segments. A segment that spans `from`
/// means the proxy was sending there already (it was in an older answer): the move took no
/// time.
fn first_served(segs: &[&Seg], from: i64, until: i64) -> Option<i64> {
    segs.iter()
        .filter(|s| s.end >= from && s.start < until)
        .map(|s| s.start.max(from))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_history::History;
    use resolvelab_history::ours::EventRecord;

    fn mode(t_ms: i64, spec: &str) -> EventRecord {
        EventRecord {
            t_us: t_ms * 1000,
            kind: "dns-mode".into(),
            target: Some("app.test.local".into()),
            spec: Some(spec.into()),
            ..EventRecord::default()
        }
    }

    fn keys(addrs: &[&str]) -> Keys {
        let mut k = Keys::default();
        for a in addrs {
            k.id(a);
        }
        k
    }

    fn seg(key: u32, start: i64, end: i64) -> Seg {
        Seg { key, start, end }
    }

    fn run(events: Vec<EventRecord>, segs: &[Seg], span: (i64, i64)) -> Option<SwapFollow> {
        let hist = History {
            events,
            ..History::default()
        };
        let k = keys(&["127.0.0.2:8080", "127.0.0.3:8080"]);
        measure(&Answers::from_history(&hist), segs, &k, span, None)
    }

    #[test]
    fn a_swap_is_followed_at_the_first_try_of_the_new_address() {
        let f = run(
            vec![
                mode(0, "static:127.0.0.2"),
                mode(10_000, "static:127.0.0.3"),
            ],
            &[seg(0, 100, 16_900), seg(1, 16_950, 30_000)],
            (100, 30_000),
        )
        .unwrap();
        assert_eq!((f.moves, f.followed), (1, 1));
        assert_eq!(f.max_ms, Some(6_950));
        assert_eq!(f.list[0].to, vec!["127.0.0.3".to_string()]);
    }

    #[test]
    fn a_move_the_proxy_never_served_before_the_next_one_is_not_followed() {
        let f = run(
            vec![
                mode(0, "static:127.0.0.2"),
                mode(10_000, "static:127.0.0.3"),
                mode(12_000, "static:127.0.0.2"),
            ],
            &[seg(0, 100, 30_000), seg(1, 20_000, 20_500)],
            (100, 30_000),
        )
        .unwrap();
        // The move to .3 was tried only after the name moved back; the move back to .2 was
        // followed at once (.2 was never left).
        assert_eq!((f.moves, f.followed), (2, 1));
        assert_eq!(f.list[0].after_ms, None);
        assert_eq!(f.list[1].after_ms, Some(0));
    }

    #[test]
    fn a_name_that_shares_one_address_with_the_proxied_name_is_not_counted() {
        let filler = |t_ms, spec: &str| EventRecord {
            target: Some("filler.test.local".into()),
            ..mode(t_ms, spec)
        };
        let f = run(
            vec![
                mode(0, "static:127.0.0.2"),
                filler(0, "static:127.0.0.3"),
                filler(3_000, "multi:20@127.0.0.3"),
                mode(7_000, "static:127.0.0.3"),
            ],
            &[seg(0, 100, 7_500), seg(1, 9_000, 14_000)],
            (100, 14_000),
        )
        .unwrap();
        assert_eq!((f.moves, f.followed), (1, 1));
        assert_eq!(f.list[0].name, "app.test.local");
        assert_eq!(f.max_ms, Some(2_000));
    }

    #[test]
    fn without_an_answer_history_it_is_undetermined() {
        assert_eq!(run(vec![], &[seg(0, 0, 10)], (0, 10)), None);
    }

    #[test]
    fn an_answer_after_nxdomain_and_a_change_outside_the_log_are_no_moves() {
        let f = run(
            vec![
                mode(0, "static:127.0.0.2"),
                mode(5_000, "nxdomain"),
                mode(8_000, "static:127.0.0.3"),
                mode(40_000, "static:127.0.0.2"),
            ],
            &[seg(0, 100, 4_000), seg(1, 9_000, 30_000)],
            (100, 30_000),
        )
        .unwrap();
        assert_eq!(f.moves, 0);
        assert_eq!(f.max_ms, None);
    }
}
