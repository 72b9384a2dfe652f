//! `[dns.gslb."NAME"]` on the model: the GSLB's health checks played against the run's fault
//! windows, its answer changes written as the name's DNS phases.
//!
//! The lab's GSLB (`crate::gslb`) probes its pool every `interval`, half an interval off the
//! timeline's whole seconds, and takes a member out after `down_after` failed probes in a row
//! (back in after `up_after` good ones). The model knows every fault window in advance, so each
//! probe's outcome is read off them: a member whose address is refused, or reset or failed on
//! every new connection, fails its probe; one that answers later than the probe's timeout
//! fails it; faults that act only on reused connections (`reclaim`, `stale`) do not touch a
//! probe, which opens its own. The member's health then follows the lab's own rule
//! (`crate::gslb::Health`), and the answer the lab's policy gives (`crate::gslb::mode_for`).

use crate::gslb::{Health, mode_for, mode_in};
use anyhow::{Result, anyhow};
use rand::{RngExt, SeedableRng};
use resolvelab_core::spec::dns::{DnsMode, DnsSetting};
use resolvelab_scenario::format::GslbSpec;
use resolvelab_scenario::net::Net;
use resolvelab_sim::nginx::{FaultKind, FaultWindow};
use std::collections::BTreeMap;

/// A DNS phase as the timeline writes it: from µs (after the load start), this name, this
/// setting.
pub(super) type Phase = (i64, String, DnsSetting);

/// One change of a GSLB's answer: µs from the load start, the name, the new mode (as the lab's
/// `gslb` event spells it) and what flipped (for a resolver with its own order, which one).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Change {
    pub at: i64,
    pub name: String,
    pub mode: String,
    pub note: String,
}

/// What the GSLBs are played against.
pub(super) struct Input<'a> {
    /// `[dns.gslb]`.
    pub gslb: &'a BTreeMap<String, GslbSpec>,
    /// The run's fault windows.
    pub faults: &'a [FaultWindow],
    /// Each GSLB name's setting before the GSLB acts and when its first phase starts.
    pub start: BTreeMap<String, (DnsSetting, i64)>,
    /// The run's addresses.
    pub net: &'a Net,
    /// Draws a probe's outcome against a fault that fails only some new connections.
    pub seed: u64,
    /// Probes go out from the load start until here (µs), as the lab's GSLB runs beside the
    /// load.
    pub end: i64,
}

/// Every GSLB's answer changes over a run: the names' own (the main address's) as phases, the
/// resolvers with their own order (`prefer`) by fleet instance (from 0): that instance's model
/// asks its own resolver.
#[derive(Debug, Clone, Default)]
pub(super) struct Played {
    /// The names a GSLB answers.
    pub names: Vec<String>,
    /// Every change, as `gslb` events.
    pub changes: Vec<Change>,
    /// The names' own answers, in time order.
    pub main: Vec<Phase>,
    /// Each listed instance's resolver's phases, its first one at the name's start.
    pub views: BTreeMap<usize, Vec<Phase>>,
}

/// A resolver with its own order: its instance's name and index, what it is answered, its
/// phases.
struct View {
    instance: String,
    k: usize,
    answered: DnsMode,
    phases: Vec<Phase>,
}

/// Play every GSLB over the load against the fault windows.
pub(super) fn play(input: &Input<'_>) -> Result<Played> {
    let mut out = Played::default();
    for (name, spec) in input.gslb {
        out.names.push(name.clone());
        play_name(input, name, spec, &mut out)?;
    }
    Ok(out)
}

/// One GSLB's probe rounds: each member's health from its probes, and every answer (the
/// name's, and each resolver's with its own order) that changes with it.
fn play_name(input: &Input<'_>, name: &str, spec: &GslbSpec, out: &mut Played) -> Result<()> {
    let net = input.net;
    let addrs: Vec<String> = (spec.pool.iter())
        .map(|m| {
            net.hosts
                .get(m)
                .map(|a| a.to_string())
                .ok_or_else(|| anyhow!("[dns.gslb] member `{m}` is not a backend"))
        })
        .collect::<Result<_>>()?;
    let (start, first) = input
        .start
        .get(name)
        .cloned()
        .ok_or_else(|| anyhow!("[dns.gslb] `{name}` is not a [dns.names] entry"))?;
    let setting = |mode| DnsSetting {
        mode,
        ..start.clone()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(input.seed ^ 0x6a09_e667_f3bc_c908);
    let mut health = vec![Health::new(); addrs.len()];
    let mut serving = mode_for(spec, &health, net)?;
    let mut views = Vec::new();
    for inst in spec.prefer.keys() {
        let answered = mode_in(spec, &spec.order_for(inst), &health, net)?;
        views.push(View {
            instance: inst.clone(),
            k: usize::from(crate::gslb::view_of(inst)?) - 1,
            phases: vec![(first, name.to_string(), setting(answered.clone()))],
            answered,
        });
    }
    let micros = |d: std::time::Duration| d.as_micros() as i64;
    let (interval, timeout) = (micros(spec.interval.get()), micros(spec.timeout.get()));
    let mut at = interval / 2;
    while at < input.end {
        let mut flipped = Vec::new();
        for (k, addr) in addrs.iter().enumerate() {
            let outcome = probe(input.faults, addr, at, timeout, &mut rng);
            if health[k].observe(outcome.is_ok(), spec) {
                flipped.push(crate::gslb::flip_note(spec, k, health[k], &outcome));
            }
        }
        let changed = |mode: &DnsMode, note: String| Change {
            at,
            name: name.to_string(),
            mode: mode.to_string(),
            note,
        };
        if !flipped.is_empty() {
            for v in views.iter_mut() {
                let mode = mode_in(spec, &spec.order_for(&v.instance), &health, net)?;
                if mode != v.answered {
                    let note = format!("{}'s resolver: {}", v.instance, flipped.join("; "));
                    out.changes.push(changed(&mode, note));
                    v.phases.push((at, name.to_string(), setting(mode.clone())));
                    v.answered = mode;
                }
            }
            let mode = mode_for(spec, &health, net)?;
            if mode != serving {
                out.changes.push(changed(&mode, flipped.join("; ")));
                out.main.push((at, name.to_string(), setting(mode.clone())));
                serving = mode;
            }
        }
        at += interval;
    }
    for v in views {
        out.views.entry(v.k).or_default().extend(v.phases);
    }
    Ok(())
}

/// One probe of `addr` at `at`: its status, or why it failed, from the fault windows open then.
fn probe(
    faults: &[FaultWindow],
    addr: &str,
    at: i64,
    timeout: i64,
    rng: &mut impl rand::Rng,
) -> std::result::Result<u16, String> {
    let open = faults
        .iter()
        .filter(|f| f.target.as_deref() == Some(addr) && f.start.0 <= at && at < f.end.0);
    for f in open {
        let failed = match f.fault {
            FaultKind::Refuse => Some("connect: Connection refused (simulated)"),
            FaultKind::Rst { p } if rng.random::<f64>() < p => {
                Some("Connection reset by peer (simulated)")
            }
            FaultKind::Fail { p } if rng.random::<f64>() < p => {
                Some("connection closed before the response (simulated)")
            }
            FaultKind::Delay { by } if by.0 >= timeout => Some("timeout (simulated)"),
            _ => None,
        };
        if let Some(why) = failed {
            return Err(why.to_string());
        }
    }
    Ok(200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_sim::nginx::Us;

    fn window(addr: &str, from_s: i64, to_s: i64, fault: FaultKind) -> FaultWindow {
        FaultWindow {
            start: Us::s(from_s),
            end: Us::s(to_s),
            target: Some(addr.to_string()),
            fault,
        }
    }

    #[test]
    fn a_probe_fails_on_what_fails_a_new_connection_only() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let a = "127.0.0.20:8080";
        let f = [
            window(a, 10, 20, FaultKind::Refuse),
            window(
                a,
                30,
                40,
                FaultKind::Reclaim {
                    p: 1.0,
                    delay_min: Us(0),
                    delay_max: Us(1000),
                },
            ),
            window(a, 50, 60, FaultKind::Delay { by: Us::s(5) }),
            window(a, 70, 80, FaultKind::Delay { by: Us::ms(10) }),
        ];
        let s = |t: i64| Us::s(t).0 + 500_000;
        let timeout = Us::s(1).0;
        let mut ok = |t| probe(&f, a, s(t), timeout, &mut rng).is_ok();
        assert!(ok(9));
        assert!(!ok(10), "refused inside the window");
        assert!(ok(20), "the window's end is open");
        assert!(ok(35), "reclaim acts on reused connections");
        assert!(!ok(55), "an answer later than the timeout");
        assert!(ok(75), "a short delay");
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        assert!(probe(&f, "127.0.0.30:8080", s(10), timeout, &mut rng).is_ok());
    }
}
