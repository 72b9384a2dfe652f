//! Stale addresses: failures to an address that the name's DNS answers no longer hold — the
//! backend moved, and nginx still sends to where it was (a name resolved once, at start; or a
//! cache or re-query that has not caught up yet).
//!
//! The answer history is what the inputs show of each name's answers over time: the answers in
//! a DNS log (the lab authority's, or `resolvelab dns watch` in production) and, in a lab run,
//! the authority's mode changes in events.jsonl (a name resolved once at start is never asked
//! again, so only the mode change shows that its answer moved).

use super::failure::host_of;
use resolvelab_core::spec::dns::DnsMode;
use resolvelab_history::History;
use std::collections::{BTreeSet, HashMap};

/// One name's answers from `t_ms` on.
struct State {
    t_ms: i64,
    ips: BTreeSet<String>,
}

/// Each name's answer sets over time, and which names ever returned each address.
#[derive(Default)]
pub(super) struct Answers {
    by_name: HashMap<String, Vec<State>>,
    names_of: HashMap<String, Vec<String>>,
}

/// A failure's address that its name no longer returned.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stale {
    /// The name that returned the address before.
    pub name: String,
    /// When the name's answers stopped holding it (ms).
    pub since_ms: i64,
}

impl Answers {
    /// From the DNS log (NOERROR/NXDOMAIN answers to A and AAAA queries; SERVFAIL, REFUSED and
    /// timeouts say nothing of the records) and the lab's `dns-mode` events.
    pub fn from_history(hist: &History) -> Answers {
        let mut seen: Vec<(i64, String, BTreeSet<String>)> = Vec::new();
        // A and AAAA answers are separate record sets: an address is returned while either
        // holds it, so each is tracked on its own and merged by time below.
        let mut last: HashMap<(String, String), BTreeSet<String>> = HashMap::new();
        for r in &hist.dns {
            let rcode = r.rcode.to_ascii_uppercase();
            if !matches!(r.qtype.as_str(), "A" | "AAAA")
                || !matches!(rcode.as_str(), "NOERROR" | "NXDOMAIN")
            {
                continue;
            }
            let name = r.qname.trim_end_matches('.').to_ascii_lowercase();
            last.insert(
                (name.clone(), r.qtype.clone()),
                r.answer_texts().into_iter().collect(),
            );
            let ips = last
                .iter()
                .filter(|((n, _), _)| *n == name)
                .flat_map(|(_, s)| s.iter().cloned())
                .collect();
            seen.push((r.t_us / 1000, name, ips));
        }
        let mut before: HashMap<String, Vec<BTreeSet<String>>> = HashMap::new();
        for e in &hist.events {
            let Some(name) = e.target.as_deref().map(str::to_ascii_lowercase) else {
                continue;
            };
            let t = e.t_us / 1000;
            match e.kind.as_str() {
                "dns-mode" => {
                    let Some(ips) = e.spec.as_deref().and_then(mode_ips) else {
                        continue;
                    };
                    let prev = current(&seen, &name, t).unwrap_or_default();
                    before.entry(name.clone()).or_default().push(prev);
                    seen.push((t, name, ips));
                }
                // A window (`for`) ended: the mode before it is back.
                "dns-mode-end" => {
                    if let Some(prev) = before.get_mut(&name).and_then(Vec::pop) {
                        seen.push((t, name, prev));
                    }
                }
                _ => {}
            }
        }
        seen.sort_by_key(|s| s.0);
        let mut a = Answers::default();
        for (t_ms, name, ips) in seen {
            for ip in &ips {
                let names = a.names_of.entry(ip.clone()).or_default();
                if !names.contains(&name) {
                    names.push(name.clone());
                }
            }
            a.by_name.entry(name).or_default().push(State { t_ms, ips });
        }
        a
    }

    /// Does the history show any answer, at or after `t_ms`, of a name that ever returned
    /// `addr`? Without one it cannot tell whether the address was still answered then.
    pub fn covers(&self, addr: &str, t_ms: i64) -> bool {
        // Without an answer history (every production run) skip parsing the address.
        if self.names_of.is_empty() {
            return false;
        }
        self.names_of.get(&host_of(addr)).is_some_and(|names| {
            names
                .iter()
                .any(|n| self.by_name[n].last().is_some_and(|s| s.t_ms >= t_ms))
        })
    }

    /// Was `addr` (`IP:port` or `IP`) at `t_ms` an address that a name returned before and no
    /// longer returned then?
    pub fn stale(&self, addr: &str, t_ms: i64) -> Option<Stale> {
        if self.names_of.is_empty() {
            return None;
        }
        let ip = host_of(addr);
        let names = self.names_of.get(&ip)?;
        for name in names {
            let states = &self.by_name[name];
            let i = states.partition_point(|s| s.t_ms <= t_ms);
            let Some(now) = i.checked_sub(1).map(|j| &states[j]) else {
                continue;
            };
            // Returned before (some earlier state), not returned now.
            if now.ips.contains(&ip) || !states[..i].iter().any(|s| s.ips.contains(&ip)) {
                continue;
            }
            let since = states[..i]
                .iter()
                .rposition(|s| s.ips.contains(&ip))
                .map_or(now.t_ms, |j| states[j + 1].t_ms);
            return Some(Stale {
                name: name.clone(),
                since_ms: since,
            });
        }
        None
    }
}

/// A change of a name's answers that brought addresses the previous answer did not hold.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Move {
    /// The name.
    pub name: String,
    /// When the answers changed (ms).
    pub t_ms: i64,
    /// The addresses the new answer brought.
    pub new: BTreeSet<String>,
}

impl Answers {
    /// Every move of every name, in time order. A first answer is no move, and nor is an
    /// answer after an empty one (NXDOMAIN ending): there was nothing to move from.
    pub fn moves(&self) -> Vec<Move> {
        let mut out = Vec::new();
        for (name, states) in &self.by_name {
            for w in states.windows(2) {
                let new: BTreeSet<String> = w[1].ips.difference(&w[0].ips).cloned().collect();
                if !w[0].ips.is_empty() && !new.is_empty() {
                    out.push(Move {
                        name: name.clone(),
                        t_ms: w[1].t_ms,
                        new,
                    });
                }
            }
        }
        out.sort_by(|a, b| (a.t_ms, &a.name).cmp(&(b.t_ms, &b.name)));
        out
    }

    /// Did the proxy send to `name`, given the hosts it tried? An address only this name
    /// returned decides; an address several names returned counts only when none of those
    /// names has one of its own among `tried` (a filler name sharing one address with the
    /// proxied name is not proxied).
    pub fn sent_to(&self, name: &str, tried: &BTreeSet<String>) -> bool {
        let own = |n: &str| {
            self.by_name.get(n).is_some_and(|st| {
                st.iter()
                    .flat_map(|s| &s.ips)
                    .any(|ip| tried.contains(ip) && self.names_of[ip].len() == 1)
            })
        };
        if own(name) {
            return true;
        }
        self.by_name.get(name).is_some_and(|st| {
            st.iter().flat_map(|s| &s.ips).any(|ip| {
                tried.contains(ip) && self.names_of[ip].iter().all(|n| n == name || !own(n))
            })
        })
    }

    /// The history holds no answer at all.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// The latest answer set of `name` at or before `t` among those seen so far.
fn current(
    seen: &[(i64, String, BTreeSet<String>)],
    name: &str,
    t: i64,
) -> Option<BTreeSet<String>> {
    seen.iter()
        .filter(|s| s.1 == name && s.0 <= t)
        .max_by_key(|s| s.0)
        .map(|s| s.2.clone())
}

/// The addresses a lab mode answers (`static:…`, `alternate:…`, …; NXDOMAIN and NODATA answer
/// none); `None` for a mode that says nothing of the records (SERVFAIL, REFUSED, no answer).
fn mode_ips(spec: &str) -> Option<BTreeSet<String>> {
    let mode: DnsMode = spec.split(';').next()?.parse().ok()?;
    match mode.answered() {
        DnsMode::NxDomain | DnsMode::NoData => Some(BTreeSet::new()),
        DnsMode::ServFail | DnsMode::Refused | DnsMode::Drop => None,
        m => Some(m.addresses().iter().map(|ip| ip.to_string()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_history::ours::{DnsRecord, EventRecord};

    fn dns(t_ms: i64, qtype: &str, rcode: &str, answers: &[&str]) -> DnsRecord {
        DnsRecord {
            t_us: t_ms * 1000,
            qname: "app.test.local".into(),
            qtype: qtype.into(),
            rcode: rcode.into(),
            answers: answers.iter().map(|s| s.parse().unwrap()).collect(),
            ..DnsRecord::default()
        }
    }

    fn event(t_ms: i64, kind: &str, spec: &str) -> EventRecord {
        EventRecord {
            t_us: t_ms * 1000,
            kind: kind.into(),
            target: Some("app.test.local".into()),
            spec: Some(spec.into()),
            ..EventRecord::default()
        }
    }

    fn answers(dns: Vec<DnsRecord>, events: Vec<EventRecord>) -> Answers {
        Answers::from_history(&History {
            dns,
            events,
            ..History::default()
        })
    }

    #[test]
    fn an_address_the_answers_dropped_is_stale_from_then_on() {
        let a = answers(
            vec![
                dns(0, "A", "NOERROR", &["10.0.0.1"]),
                dns(1, "AAAA", "NOERROR", &[]),
                dns(5_000, "A", "SERVFAIL", &[]),
                dns(10_000, "A", "NOERROR", &["10.0.0.2"]),
            ],
            vec![],
        );
        assert_eq!(a.stale("10.0.0.1:8080", 9_999), None, "still answered");
        assert_eq!(
            a.stale("10.0.0.1:8080", 12_000),
            Some(Stale {
                name: "app.test.local".into(),
                since_ms: 10_000
            })
        );
        assert_eq!(a.stale("10.0.0.2:8080", 12_000), None, "the new address");
        assert_eq!(a.stale("10.0.0.9:8080", 12_000), None, "never answered");
        // An AAAA NODATA after the move does not erase the A answer.
        let a = answers(
            vec![
                dns(0, "A", "NOERROR", &["10.0.0.1"]),
                dns(2_000, "AAAA", "NOERROR", &[]),
            ],
            vec![],
        );
        assert_eq!(a.stale("10.0.0.1:80", 3_000), None);
    }

    #[test]
    fn lab_mode_changes_move_a_name_resolved_once() {
        // nginx asked once at start; the authority's mode changed at 10 s and back at 16 s.
        let a = answers(
            vec![dns(0, "A", "NOERROR", &["127.0.0.20"])],
            vec![
                event(10_000, "dns-mode", "static:127.0.0.30"),
                event(16_000, "dns-mode-end", "static:127.0.0.30"),
                event(20_000, "dns-mode", "servfail"),
            ],
        );
        assert!(a.stale("127.0.0.20:8080", 9_000).is_none());
        assert_eq!(a.stale("127.0.0.20:8080", 11_000).unwrap().since_ms, 10_000);
        assert!(
            a.stale("127.0.0.20:8080", 17_000).is_none(),
            "back after the window"
        );
        assert!(
            a.stale("127.0.0.20:8080", 21_000).is_none(),
            "SERVFAIL says nothing"
        );
        // The last answer seen is the revert at 16 s (the SERVFAIL shows no records).
        assert!(a.covers("127.0.0.20:8080", 16_000));
        assert!(
            !a.covers("127.0.0.20:8080", 16_001),
            "no answer seen after 16 s"
        );
        assert!(!answers(vec![], vec![]).covers("127.0.0.20:8080", 0));
    }
}
