//! The event library played on one target: each event is a scenario file of the lab's own
//! format, written beside its run (`resolvelab run FILE` plays it again), with the user's
//! configuration as its `[nginx] inline` body. Timelines are those of the library's scenarios
//! (`nxdomain`, `dns-silent`, `generation-race`, `dual-resolve`, `stale-address`,
//! `reload-nxdomain`), placed by the target's own re-query period.

use crate::find::Target;
use crate::rewrite::LabConfig;
use serde::Serialize;
use std::time::Duration;
use toml::{Table, Value};

/// One event of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// NXDOMAIN for 3 s, landing on a re-query.
    Nxdomain,
    /// SERVFAIL for 3 s, landing on a re-query.
    Servfail,
    /// The DNS server silent for two re-query periods.
    Silence,
    /// The answer alternating between two addresses while backends close idle keep-alive
    /// connections as they are reused (everyday first-try failures): the generation race.
    SwapRace,
    /// The backend restarts: established connections reset, new ones refused for 2 s.
    Restart,
    /// The backend moves: the name answers a new address, the old one is gone.
    Move,
    /// The name stops resolving; nginx is reloaded, then restarted while it does not resolve.
    ReloadNxdomain,
}

impl Event {
    /// Every event, in the card's order.
    pub const ALL: [Event; 7] = [
        Event::Nxdomain,
        Event::Servfail,
        Event::Silence,
        Event::SwapRace,
        Event::Restart,
        Event::Move,
        Event::ReloadNxdomain,
    ];

    /// The id (`swap-race`).
    pub fn id(self) -> &'static str {
        match self {
            Event::Nxdomain => "nxdomain",
            Event::Servfail => "servfail",
            Event::Silence => "silence",
            Event::SwapRace => "swap-race",
            Event::Restart => "restart",
            Event::Move => "move",
            Event::ReloadNxdomain => "reload-nxdomain",
        }
    }

    /// What it does, in one line.
    pub fn describe(self) -> &'static str {
        match self {
            Event::Nxdomain => "the name answers NXDOMAIN for 3 s, from a re-query on",
            Event::Servfail => "the name answers SERVFAIL for 3 s, from a re-query on",
            Event::Silence => "the DNS server answers nothing for two re-query periods",
            Event::SwapRace => {
                "the answer alternates between two addresses; the backends close 30 % of reused idle connections"
            }
            Event::Restart => "the backend restarts: connections reset, new ones refused for 2 s",
            Event::Move => "the backend moves to a new address; the old one resets and refuses",
            Event::ReloadNxdomain => {
                "the name stops resolving for 10 s; 4 s in nginx is reloaded, 6 s in restarted (stopped and started again), and started again 12 s in if that start failed"
            }
        }
    }

    /// Only nginx's run-time resolution sees it: a name resolved at start is never asked again
    /// until a reload.
    pub fn needs_run_time(self) -> bool {
        matches!(
            self,
            Event::Nxdomain | Event::Servfail | Event::Silence | Event::SwapRace
        )
    }
}

impl std::str::FromStr for Event {
    type Err = String;
    fn from_str(s: &str) -> Result<Event, String> {
        Event::ALL.into_iter().find(|e| e.id() == s).ok_or_else(|| {
            let ids: Vec<&str> = Event::ALL.iter().map(|e| e.id()).collect();
            format!("no event `{s}` (events: {})", ids.join(", "))
        })
    }
}

/// What every event's run shares.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Requests per second.
    pub rate: u32,
    /// The answers' TTL, which decides nginx's re-query period when no `valid=` is set.
    pub ttl: Duration,
    /// The configuration names fixed per-DC names, not a GSLB name: `swap-race` keeps the
    /// everyday first-try failures but nothing alternates (set for the per-DC fix's replay).
    pub fixed_names: bool,
    /// The method mix (`GET=0.8,POST=0.2`), as the load reads it; None: GET only.
    pub mix: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            rate: 200,
            ttl: Duration::from_secs(10),
            fixed_names: false,
            mix: None,
        }
    }
}

/// The re-query period of a target: `valid=` (else the TTL) + 1 s (DOMAIN.md §3).
pub fn period(lab: &LabConfig, s: &Settings) -> Duration {
    let valid = lab
        .valid
        .as_deref()
        .and_then(|v| v.parse::<resolvelab_core::spec::nginx::NginxTime>().ok())
        .map_or(s.ttl, |t| t.get());
    valid + Duration::from_secs(1)
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn string(s: &str) -> Value {
    Value::String(s.to_string())
}

/// The scenario file (TOML) that plays `event` on `target` on real nginx: the user's
/// configuration as the `[nginx] inline` body.
pub fn scenario(target: &Target, lab: &LabConfig, event: Event, s: &Settings) -> String {
    let mut nginx = Table::new();
    let valid = lab.valid.clone().unwrap_or_else(|| secs(s.ttl));
    nginx.insert("valid".into(), string(&valid));
    nginx.insert("inline".into(), string(&lab.body));
    nginx.insert("workers".into(), Value::Integer(i64::from(lab.workers)));
    if lab.resolves_at_start {
        nginx.insert("resolves_at_start".into(), Value::Boolean(true));
    }
    let engines = ["nginx", "nginx-1.31", "nginx-1.22"];
    assemble(target, lab, event, s, nginx, &lab.statics, &engines)
}

/// The scenario file that plays `event` on the model (`verify --quick`): the target read as the
/// template's variables ([`crate::model`]); or why the model cannot play it.
pub fn model_scenario(
    cfg: &resolvelab_lint::Config,
    target: &Target,
    lab: &LabConfig,
    event: Event,
    s: &Settings,
) -> Result<String, String> {
    let (mut nginx, statics) = crate::model::nginx_table(cfg, target)?;
    if !nginx.contains_key("valid") {
        nginx.insert("valid".into(), string(&secs(s.ttl)));
    }
    nginx.insert("workers".into(), Value::Integer(i64::from(lab.workers)));
    Ok(assemble(target, lab, event, s, nginx, &statics, &["sim"]))
}

/// The scenario around an `[nginx]` table: names, backends, load, timeline.
fn assemble(
    target: &Target,
    lab: &LabConfig,
    event: Event,
    s: &Settings,
    nginx: Table,
    statics: &[String],
    engines: &[&str],
) -> String {
    let p = period(lab, s);
    let name = target.names.first().map_or("", |n| n.host.as_str());
    let primary = lab
        .served
        .iter()
        .find(|x| x.name.host == name)
        .map_or("b1", |x| x.backend.as_str())
        .to_string();
    let warm = Duration::from_secs(10);
    let (duration, mut names, faults, timeline) = plan(event, name, &primary, p, warm);
    if s.fixed_names {
        names.clear();
    }
    let mut sc = Table::new();
    sc.insert("version".into(), Value::Integer(1));
    sc.insert(
        "name".into(),
        string(&format!("verify-{}-{}", slug(&target.name), event.id())),
    );
    sc.insert(
        "description".into(),
        string(&format!(
            "Your configuration's `{}` ({}): {}.",
            target.name,
            target.at,
            event.describe()
        )),
    );
    sc.insert(
        "question".into(),
        string(&format!(
            "What does `{}` do when {}?",
            target.name,
            event.describe()
        )),
    );
    sc.insert(
        "engines".into(),
        Value::Array(engines.iter().map(|e| string(e)).collect()),
    );
    sc.insert("nginx".into(), Value::Table(nginx));
    let mut dns = Table::new();
    dns.insert("ttl".into(), string(&secs(s.ttl)));
    let mut table = Table::new();
    for served in &lab.served {
        let mode = names
            .iter()
            .find(|(n, _)| *n == served.name.host)
            .map_or_else(|| format!("static:@{}", served.backend), |(_, m)| m.clone());
        table.insert(served.name.host.clone(), string(&mode));
    }
    dns.insert("names".into(), Value::Table(table));
    sc.insert("dns".into(), Value::Table(dns));
    let mut backends: Vec<String> = lab.served.iter().map(|x| x.backend.clone()).collect();
    backends.extend(statics.iter().cloned());
    backends.push("spare".into());
    let backends = backends
        .into_iter()
        .map(|b| {
            let mut t = Table::new();
            // With fixed names nothing alternates to the spare: a fault there could never hit.
            let unused = s.fixed_names && b == "spare";
            if let Some((_, f)) = faults
                .iter()
                .find(|(n, _)| *n == b || (n == "*" && !unused))
            {
                t.insert("faults".into(), Value::Array(vec![string(f)]));
            }
            t.insert("name".into(), string(&b));
            if let Some(names) = &lab.tls {
                // `https://` played: each backend presents the run authority's certificate.
                let mut tls = Table::new();
                tls.insert(
                    "names".into(),
                    Value::Array(names.iter().map(|n| string(n)).collect()),
                );
                t.insert("tls".into(), Value::Table(tls));
            }
            Value::Table(t)
        })
        .collect();
    sc.insert("backend".into(), Value::Array(backends));
    let mut load = Table::new();
    load.insert("rate".into(), string(&s.rate.to_string()));
    load.insert("duration".into(), string(&secs(duration)));
    load.insert("path".into(), string(&lab.path));
    if let Some(mix) = &s.mix {
        load.insert("mix".into(), string(mix));
    }
    sc.insert("load".into(), Value::Table(load));
    if !timeline.is_empty() {
        sc.insert(
            "timeline".into(),
            Value::Array(timeline.into_iter().map(Value::Table).collect()),
        );
    }
    let mut out = String::from(
        "# Written by `resolvelab verify`: your configuration played on one event of the library.\n# `resolvelab run THIS_FILE` plays it again.\n",
    );
    out.push_str(&toml::to_string(&sc).unwrap_or_default());
    out
}

type Plan = (
    Duration,
    Vec<(String, String)>,
    Vec<(String, String)>,
    Vec<Table>,
);

/// Load duration, DNS modes by name, standing faults by backend, the timeline.
fn plan(event: Event, name: &str, primary: &str, p: Duration, warm: Duration) -> Plan {
    let step = |at: Duration, kv: &[(&str, Value)]| {
        let mut t = Table::new();
        t.insert("at".into(), string(&secs(at)));
        for (k, v) in kv {
            t.insert((*k).into(), v.clone());
        }
        t
    };
    let dns_step = |mode: &str, lasting: Option<Duration>, align: bool| {
        let mut kv = vec![("dns", string(name)), ("mode", string(mode))];
        if let Some(d) = lasting {
            kv.push(("for", string(&secs(d))));
        }
        if align {
            kv.push(("align", string("next-requery")));
        }
        step(warm, &kv)
    };
    let tail = Duration::from_secs(8);
    match event {
        Event::Nxdomain | Event::Servfail => {
            let mode = if event == Event::Nxdomain {
                "nxdomain"
            } else {
                "servfail"
            };
            // Shorter than half a period, so the revert cannot race the next re-query.
            let short = Duration::from_secs(3).min(p / 2);
            let t = dns_step(mode, Some(short), true);
            (warm + p * 2 + tail, vec![], vec![], vec![t])
        }
        Event::Silence => {
            let t = dns_step("drop", Some(p * 2), false);
            (warm + p * 3 + tail, vec![], vec![], vec![t])
        }
        Event::SwapRace => {
            let reclaim = "reclaim:toxicity=0.3,delay=0ms..50ms".to_string();
            (
                Duration::from_secs(40).max(p * 4),
                vec![(name.to_string(), format!("alternate:@{primary},@spare"))],
                // Every backend closes reused idle connections: the everyday failure.
                vec![("*".to_string(), reclaim)],
                vec![],
            )
        }
        Event::Restart => {
            let t = step(
                warm,
                &[
                    ("fault", string(primary)),
                    ("spec", string("restart")),
                    ("for", string("2s")),
                ],
            );
            (warm + Duration::from_secs(20), vec![], vec![], vec![t])
        }
        Event::Move => {
            let moved = dns_step("static:@spare", None, false);
            let gone = step(
                warm,
                &[("fault", string(primary)), ("spec", string("restart"))],
            );
            (warm + p * 2 + tail, vec![], vec![], vec![moved, gone])
        }
        Event::ReloadNxdomain => {
            let s = Duration::from_secs;
            let nx = dns_step("nxdomain", Some(s(10)), false);
            let reload = step(warm + s(4), &[("nginx", string("reload"))]);
            // A restart (a new container, a node reboot) resolves what a start resolves; a
            // restart policy tries again once the name is back.
            let restart = step(warm + s(6), &[("nginx", string("restart"))]);
            let again = step(warm + s(12), &[("nginx", string("start"))]);
            (
                warm + s(22),
                vec![],
                vec![],
                vec![nx, reload, restart, again],
            )
        }
    }
}

/// A name usable in a scenario and a file name.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{find, rewrite};

    #[test]
    fn every_event_is_a_scenario_the_lab_reads() {
        let text = "http {\n resolver 10.0.0.53 valid=5s;\n upstream be { zone be 64k; server api.example.com:443 resolve; }\n server { listen 80; location /api/ { proxy_pass https://be; } }\n}\n";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let t = &find::targets(&cfg)[0];
        let lab = rewrite::lab_config(&cfg, t, &rewrite::Options::default()).unwrap();
        assert_eq!(period(&lab, &Settings::default()), Duration::from_secs(6));
        for e in Event::ALL {
            let toml = scenario(t, &lab, e, &Settings::default());
            let sc = resolvelab_scenario::Scenario::from_toml(&toml, "verify.toml")
                .unwrap_or_else(|err| panic!("{}: {err:#}\n{toml}", e.id()));
            assert_eq!(sc.load.path, "/api/");
            resolvelab_lab::judge::check_targets(&sc).unwrap_or_else(|err| panic!("{err:#}"));
        }
    }
}
