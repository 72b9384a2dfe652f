//! The GSLB of `[dns.gslb."NAME"]`: health checks of a pool of backends on a fixed cycle, and
//! the name's answer in the run's DNS authority following them.
//!
//! What a global load balancer (or a service registry) does to a proxy that asks it: a backend
//! that dies stays in the answer until `down_after` probes in a row have failed, then the
//! answer moves to the next healthy member; every resolver meets the new answer at its own
//! re-query. So a backend's death reaches a fleet at one instant, and the fleet's recovery at
//! each instance's own re-query — the shape `diagnose` reads as a failover. Each change of the
//! answer is an event (`gslb`, not an injection: the answer is the name's own) in
//! `events.jsonl`, and the DNS log shows the answers.

use crate::probe;
use anyhow::{Result, anyhow};
use resolvelab_core::evidence::{Event, event_kind};
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_core::spec::dns::DnsMode;
use resolvelab_core::time::now_us;
use resolvelab_dns::DnsHandle;
use resolvelab_load::CancellationToken;
use resolvelab_scenario::format::GslbSpec;
use resolvelab_scenario::net::Net;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::time::Instant;

/// One member's health as the GSLB sees it: up or down, and how many probes in a row have
/// disagreed with that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    /// In the answer.
    pub up: bool,
    /// Probes in a row that said the opposite of `up`.
    pub streak: u32,
}

impl Health {
    /// A member starts up, as the name's starting answer has it.
    pub fn new() -> Health {
        Health {
            up: true,
            streak: 0,
        }
    }

    /// One probe's outcome; true when it flipped the member.
    pub fn observe(&mut self, ok: bool, spec: &GslbSpec) -> bool {
        if ok == self.up {
            self.streak = 0;
            return false;
        }
        self.streak += 1;
        let need = if self.up {
            spec.down_after
        } else {
            spec.up_after
        };
        if self.streak < need {
            return false;
        }
        self.up = ok;
        self.streak = 0;
        true
    }
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

/// The DNS mode of the members `spec` answers for `health`: `static:` their addresses, or
/// NXDOMAIN.
pub fn mode_for(spec: &GslbSpec, health: &[Health], net: &Net) -> Result<DnsMode> {
    let order: Vec<&str> = spec.pool.iter().map(String::as_str).collect();
    mode_in(spec, &order, health, net)
}

/// [`mode_for`] in the order `order` of pool members: what the GSLB answers a resolver with
/// its own preference (`prefer`).
pub fn mode_in(spec: &GslbSpec, order: &[&str], health: &[Health], net: &Net) -> Result<DnsMode> {
    let up: Vec<bool> = health.iter().map(|h| h.up).collect();
    let Some(members) = spec.answer_in(order, &up) else {
        return Ok(DnsMode::NxDomain);
    };
    let ips = members
        .iter()
        .map(|m| match net.hosts.get(*m).map(SocketAddr::ip) {
            Some(IpAddr::V4(ip)) => Ok(ip),
            _ => Err(anyhow!("[dns.gslb] member `{m}` has no IPv4 address")),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DnsMode::Static(ips))
}

/// The authority's view of fleet instance `instance` (`nginx-3` → 3: view K is the resolver
/// address of the K-th instance, `Net::instance_dns`).
pub fn view_of(instance: &str) -> Result<u16> {
    instance
        .strip_prefix("nginx-")
        .and_then(|k| k.parse().ok())
        .ok_or_else(|| anyhow!("[dns.gslb] prefer: `{instance}` is not a fleet instance"))
}

/// Before the proxies start (they resolve at their start): each resolver with a `prefer`
/// order of its own answered in it, every member up.
pub(crate) fn serve_views(
    dns: &DnsHandle,
    sc: &resolvelab_scenario::Scenario,
    net: &Net,
) -> Result<()> {
    for (name, spec) in &sc.dns.gslb {
        let health = vec![Health::new(); spec.pool.len()];
        for inst in spec.prefer.keys() {
            let mode = mode_in(spec, &spec.order_for(inst), &health, net)?;
            dns.serve_view(name, view_of(inst)?, Some(mode))
                .map_err(|e| anyhow!("[dns.gslb] {name}: {e}"))?;
        }
    }
    Ok(())
}

/// Probe `spec`'s pool every `interval` ([`probe_offset`] from `t0`, the start of the run's
/// timeline) until `cancel`, and serve the answer its health gives for `name`. Returns how
/// many times the answer changed.
pub(crate) async fn run(
    name: String,
    spec: GslbSpec,
    net: Net,
    (dns, events): (Arc<DnsHandle>, Arc<JsonlWriter>),
    t0: std::time::Instant,
    cancel: CancellationToken,
) -> Result<u64> {
    let t0 = Instant::from_std(t0);
    let addrs: Vec<SocketAddr> = spec
        .pool
        .iter()
        .map(|m| {
            net.hosts
                .get(m)
                .copied()
                .ok_or_else(|| anyhow!("[dns.gslb] member `{m}` is not a backend"))
        })
        .collect::<Result<_>>()?;
    for a in &addrs {
        resolvelab_core::policy::check_target(*a, false).map_err(anyhow::Error::msg)?;
    }
    let mut health = vec![Health::new(); addrs.len()];
    let mut serving = mode_for(&spec, &health, &net)?;
    // Each resolver with its own order, and what it is answered.
    let mut views: Vec<(String, u16, DnsMode)> = Vec::new();
    for inst in spec.prefer.keys() {
        let mode = mode_in(&spec, &spec.order_for(inst), &health, &net)?;
        views.push((inst.clone(), view_of(inst)?, mode));
    }
    let (interval, timeout) = (spec.interval.get(), spec.timeout.get());
    let mut changes = 0u64;
    for round in 0u32.. {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(t0 + probe_offset(interval, round)) => {}
        }
        let outcomes = probe_all(&addrs, &spec.path, timeout).await;
        let mut flipped = Vec::new();
        for (k, outcome) in outcomes.iter().enumerate() {
            if health[k].observe(outcome.is_ok(), &spec) {
                flipped.push(flip_note(&spec, k, health[k], outcome));
            }
        }
        if flipped.is_empty() {
            continue;
        }
        for (inst, view, answered) in views.iter_mut() {
            let mode = mode_in(&spec, &spec.order_for(inst), &health, &net)?;
            if mode == *answered {
                continue;
            }
            dns.serve_view(&name, *view, Some(mode.clone()))
                .map_err(|e| anyhow!("[dns.gslb] {name}: {e}"))?;
            let _ = events.write(&Event {
                spec: Some(mode.to_string()),
                note: Some(format!("{inst}'s resolver: {}", flipped.join("; "))),
                ..Event::new(now_us(), event_kind::GSLB, &name)
            });
            *answered = mode;
            changes += 1;
        }
        let mode = mode_for(&spec, &health, &net)?;
        if mode == serving {
            continue;
        }
        dns.serve(&name, mode.clone(), "gslb")
            .map_err(|e| anyhow!("[dns.gslb] {name}: {e}"))?;
        let _ = events.write(&Event {
            spec: Some(mode.to_string()),
            note: Some(flipped.join("; ")),
            ..Event::new(now_us(), event_kind::GSLB, &name)
        });
        serving = mode;
        changes += 1;
    }
    Ok(changes)
}

/// When probe `round` goes out, from the start of the run's timeline: half an interval off its
/// whole seconds. A timeline's faults fall on whole seconds, and a probe at the same instant
/// raced the fault by a millisecond or two: the member went out of the answer one interval
/// sooner or later from run to run (2.00 or 3.00 s after the fault in `gslb-failover`, and one
/// instance's re-query fell between the two). In production the probe's phase against a
/// failure is anyone's; the lab takes the middle, the same in every run.
fn probe_offset(interval: std::time::Duration, round: u32) -> std::time::Duration {
    interval / 2 + interval * round
}

/// Every member probed at once; each outcome is the status or why there was none.
async fn probe_all(
    addrs: &[SocketAddr],
    path: &str,
    timeout: std::time::Duration,
) -> Vec<Result<u16, String>> {
    let mut set = tokio::task::JoinSet::new();
    for (k, a) in addrs.iter().enumerate() {
        let (a, path) = (*a, path.to_string());
        set.spawn(async move {
            let r = match tokio::time::timeout(timeout, probe::get(a, &path)).await {
                Err(_) => Err("timeout".to_string()),
                Ok(Ok(s)) if (200..300).contains(&s) => Ok(s),
                Ok(Ok(s)) => Err(format!("status {s}")),
                Ok(Err(e)) => Err(e),
            };
            (k, r)
        });
    }
    let mut out = vec![Err("not probed".to_string()); addrs.len()];
    while let Some(Ok((k, r))) = set.join_next().await {
        out[k] = r;
    }
    out
}

/// `b1 down after 3 failed probes (connect: Connection refused)`, `b1 up after 3 good probes`.
pub(crate) fn flip_note(
    spec: &GslbSpec,
    k: usize,
    h: Health,
    last: &Result<u16, String>,
) -> String {
    let m = &spec.pool[k];
    match (h.up, last) {
        (false, Err(why)) => format!("{m} down after {} failed probes ({why})", spec.down_after),
        _ => format!("{m} up after {} good probes", spec.up_after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_scenario::format::{GslbAllDown, GslbAnswer};

    fn spec(answer: GslbAnswer, all_down: GslbAllDown) -> GslbSpec {
        let toml = format!(
            "pool = [\"b1\", \"b2\"]\nanswer = \"{}\"\nall_down = \"{}\"\ndown_after = 3\nup_after = 2\n",
            match answer {
                GslbAnswer::First => "first",
                GslbAnswer::All => "all",
            },
            match all_down {
                GslbAllDown::Pool => "pool",
                GslbAllDown::Nxdomain => "nxdomain",
            }
        );
        toml::from_str(&toml).unwrap()
    }

    #[test]
    fn probes_go_out_half_an_interval_off_the_timeline_seconds() {
        let s = std::time::Duration::from_secs(1);
        let at: Vec<u128> = (0..3).map(|r| probe_offset(s, r).as_millis()).collect();
        assert_eq!(at, [500, 1500, 2500]);
    }

    #[test]
    fn a_member_flips_only_after_its_threshold_in_a_row() {
        let s = spec(GslbAnswer::First, GslbAllDown::Pool);
        let mut h = Health::new();
        // Two failures, a success (the streak restarts), then three failures: down at the third.
        let flips: Vec<bool> = [false, false, true, false, false, false]
            .iter()
            .map(|ok| h.observe(*ok, &s))
            .collect();
        assert_eq!(flips, [false, false, false, false, false, true]);
        assert!(!h.up);
        // Back up after up_after = 2 good probes.
        assert!(!h.observe(true, &s));
        assert!(h.observe(true, &s));
        assert!(h.up);
    }

    #[test]
    fn the_answer_follows_health_and_policy() {
        let (up, down) = (
            Health::new(),
            Health {
                up: false,
                streak: 0,
            },
        );
        let first = spec(GslbAnswer::First, GslbAllDown::Pool);
        assert_eq!(first.answer_for(&[true, true]), Some(vec!["b1"]));
        assert_eq!(first.answer_for(&[false, true]), Some(vec!["b2"]));
        assert_eq!(first.answer_for(&[false, false]), Some(vec!["b1"]));
        let all = spec(GslbAnswer::All, GslbAllDown::Nxdomain);
        assert_eq!(all.answer_for(&[true, true]), Some(vec!["b1", "b2"]));
        assert_eq!(all.answer_for(&[true, false]), Some(vec!["b1"]));
        assert_eq!(all.answer_for(&[false, false]), None);
        let sc = resolvelab_scenario::library::get("fleet-nxdomain").unwrap();
        let mut net = Net::assign(&sc, 10, 1).unwrap();
        // network-safe: loopback addresses of the run's /24, nothing is sent.
        net.hosts
            .insert("b2".into(), "127.10.1.30:8080".parse().unwrap());
        net.hosts
            .insert("b1".into(), "127.10.1.20:8080".parse().unwrap());
        assert_eq!(
            mode_for(&first, &[down, up], &net).unwrap().to_string(),
            "static:127.10.1.30"
        );
        assert_eq!(
            mode_for(&all, &[down, down], &net).unwrap(),
            DnsMode::NxDomain
        );
    }
}
