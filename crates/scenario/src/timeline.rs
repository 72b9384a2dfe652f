//! A scenario's `[[timeline]]` as the engines play it: each event's action as an enum and its
//! instant resolved (`at` or `after` chained on the previous event, `jitter` drawn from the
//! run's seeded stream) once, for the real-nginx runner and the model alike. Both engines so
//! land an injection at the same instant for the same seed; only alignment on a re-query is
//! left to them, because it needs the engine's own query times.
//!
//! The file form ([`crate::format::Event`], checked at load with `file:line`) stays the
//! serialised one; this is the typed plan made from it.
//!
//! ```
//! use resolvelab_scenario::{library, timeline::{Action, steps}};
//! let sc = library::get("nxdomain").unwrap();
//! let plan = steps(&sc.timeline, &sc.proxies, 1).unwrap();
//! assert!(matches!(&plan[0].action, Action::Dns { mode, .. } if mode == "nxdomain"));
//! assert_eq!(plan[0].at, std::time::Duration::from_secs(12));
//! ```

use crate::format::{Event, NginxAction, ProxySpec};
use anyhow::{Result, anyhow};
use resolvelab_core::dur::Dur;
use resolvelab_core::spec::dns::{Align, DnsSetting, HostRef};
use resolvelab_core::spec::fault::Fault;
use std::time::Duration;

/// The seed stream the timeline's jitter is drawn from (the run's seed mixed with this), apart
/// from the load's and the model's streams so that adding jitter moves nothing else.
const JITTER_STREAM: u64 = 0x7431_6d65;

/// What one timeline event does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set a DNS name's mode.
    Dns {
        /// The name.
        name: String,
        /// The mode as written (for the progress line).
        mode: String,
        /// The mode read, its `@backend` references resolved by each run (`Net::resolve`).
        setting: DnsSetting<HostRef>,
    },
    /// Add a fault to a backend or proxy.
    Fault {
        /// The backend or proxy.
        target: String,
        /// The fault spec as written (the model names a fault by its kind as written).
        spec: String,
        /// The spec read in the target's vocabulary, the event's `for` not yet applied.
        fault: Fault,
    },
    /// Remove every fault of a backend or proxy.
    Clear {
        /// The backend or proxy.
        target: String,
    },
    /// Reload nginx.
    Reload,
    /// `nginx -t` on the running configuration: would a start succeed now?
    Test,
    /// Stop nginx and start it again with the same configuration.
    Restart,
    /// Start nginx if a restart left it down.
    Start,
}

impl Action {
    /// The one action an event names (the format checks there is exactly one at load); a
    /// fault spec is read as a toxic when its target is one of `proxies`.
    fn of(e: &Event, proxies: &[ProxySpec]) -> Result<Option<Action>, String> {
        Ok(Some(
            match (&e.dns, &e.mode, &e.fault, &e.spec, &e.clear, e.nginx) {
                (Some(name), Some(mode), ..) => Action::Dns {
                    name: name.clone(),
                    mode: mode.text.clone(),
                    setting: mode.value.clone(),
                },
                (_, _, Some(target), Some(spec), ..) => Action::Fault {
                    target: target.clone(),
                    spec: spec.clone(),
                    fault: Fault::parse(spec, proxies.iter().any(|p| &p.name == target))
                        .map_err(|e| format!("fault `{spec}`: {e}"))?,
                },
                (.., Some(target), _) => Action::Clear {
                    target: target.clone(),
                },
                (.., Some(NginxAction::Reload)) => Action::Reload,
                (.., Some(NginxAction::Test)) => Action::Test,
                (.., Some(NginxAction::Restart)) => Action::Restart,
                (.., Some(NginxAction::Start)) => Action::Start,
                _ => return Ok(None),
            },
        ))
    }

    /// A few words for the live progress line.
    pub fn describe(&self) -> String {
        match self {
            Action::Dns { name, mode, .. } => format!("dns {name} → {mode}"),
            Action::Fault { target, spec, .. } => format!("fault {target} {spec}"),
            Action::Clear { target } => format!("clear {target}"),
            Action::Reload => "nginx reload".into(),
            Action::Test => "nginx -t".into(),
            Action::Restart => "nginx restart".into(),
            Action::Start => "nginx start".into(),
        }
    }
}

/// One timeline event with its instant resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// 1-based, as errors name it (`timeline event 2`).
    pub n: usize,
    /// When, after the load starts, jitter included.
    pub at: Duration,
    /// How long the change lasts before it reverts (`for`).
    pub window: Option<Duration>,
    /// Land on the engine's next re-query, or between two.
    pub align: Option<Align>,
    /// What it does.
    pub action: Action,
    /// The note for the events log.
    pub note: Option<String>,
    /// The injection is meant to miss (`expect_miss`).
    pub expect_miss: bool,
}

impl Step {
    /// `timeline event N` (with `: what` appended), how errors name this step.
    pub fn field(&self, what: &str) -> String {
        match what {
            "" => format!("timeline event {}", self.n),
            w => format!("timeline event {}: {w}", self.n),
        }
    }
}

/// The timeline's steps in order, their instants resolved with `seed`'s jitter stream (one draw
/// per event that has `jitter`, in order: the draws the lab and the model share), their fault
/// specs read for their targets (`proxies` are the scenario's TCP proxies).
pub fn steps(timeline: &[Event], proxies: &[ProxySpec], seed: u64) -> Result<Vec<Step>> {
    let mut rng =
        <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed ^ JITTER_STREAM);
    let mut prev = Duration::ZERO;
    let mut out = Vec::with_capacity(timeline.len());
    for (i, e) in timeline.iter().enumerate() {
        let n = i + 1;
        let mut at = match (&e.at, &e.after) {
            (Some(a), _) => a.get(),
            (None, Some(a)) => prev + a.get(),
            (None, None) => prev,
        };
        if let Some(j) = &e.jitter {
            at += j.get().mul_f64(rand::RngExt::random::<f64>(&mut rng));
        }
        prev = at;
        let action = Action::of(e, proxies)
            .map_err(|err| anyhow!("timeline event {n}: {err}"))?
            .ok_or_else(|| {
                anyhow!(
                    "timeline event {n}: exactly one of `dns`, `fault`, `clear`, `nginx` is needed"
                )
            })?;
        out.push(Step {
            n,
            at,
            window: e.for_.as_ref().map(Dur::get),
            align: e.align,
            action,
            note: e.note.clone(),
            expect_miss: e.expect_miss,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(toml: &str) -> Event {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn after_chains_and_jitter_follows_the_seed() {
        let tl = vec![
            ev("at = \"10s\"\ndns = \"a\"\nmode = \"nxdomain\"\nfor = \"2s\""),
            ev("after = \"5s\"\njitter = \"1s\"\nfault = \"b1\"\nspec = \"rst\""),
            ev("clear = \"b1\""),
            ev("at = \"1s\"\nnginx = \"reload\""),
        ];
        let a = steps(&tl, &[], 7).unwrap();
        assert_eq!(a[0].at, Duration::from_secs(10));
        assert_eq!(a[0].window, Some(Duration::from_secs(2)));
        let j = a[1].at - Duration::from_secs(15);
        assert!(j < Duration::from_secs(1), "{j:?}");
        // `clear` without a time comes with the previous event; `at` is absolute.
        assert_eq!(a[2].at, a[1].at);
        assert_eq!(a[3].at, Duration::from_secs(1));
        assert_eq!(
            a.iter().map(|s| s.action.clone()).collect::<Vec<_>>(),
            [
                Action::Dns {
                    name: "a".into(),
                    mode: "nxdomain".into(),
                    setting: "nxdomain".parse().unwrap()
                },
                Action::Fault {
                    target: "b1".into(),
                    spec: "rst".into(),
                    fault: Fault::parse("rst", false).unwrap()
                },
                Action::Clear {
                    target: "b1".into()
                },
                Action::Reload
            ]
        );
        // Same seed, same instants; another seed draws another jitter.
        assert_eq!(steps(&tl, &[], 7).unwrap(), a);
        assert_ne!(steps(&tl, &[], 8).unwrap()[1].at, a[1].at);
    }

    #[test]
    fn an_event_without_an_action_names_its_number() {
        let e = steps(&[ev("at = \"1s\"")], &[], 1).unwrap_err().to_string();
        assert!(e.starts_with("timeline event 1: exactly one of"), "{e}");
    }

    #[test]
    fn a_fault_is_read_in_its_targets_vocabulary() {
        let tl = [ev(
            "at = \"1s\"\nfault = \"link\"\nspec = \"latency:delay=200ms\"",
        )];
        let link: ProxySpec = toml::from_str("name = \"link\"\nupstream = \"b1\"").unwrap();
        let proxy = steps(&tl, &[link], 1).unwrap();
        assert!(matches!(
            &proxy[0].action,
            Action::Fault { fault: Fault::Proxy(t), .. } if t.name() == "latency_downstream"
        ));
        // `latency` is no backend fault: on a backend the same spec names its event.
        let e = steps(&tl, &[], 1).unwrap_err().to_string();
        assert!(
            e.starts_with("timeline event 1: fault `latency:delay=200ms`: "),
            "{e}"
        );
    }
}
