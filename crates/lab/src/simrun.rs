//! `--engine sim`: the same scenario against the deterministic model of nginx (`resolvelab-sim`).
//!
//! [`run`] maps a scenario onto [`SimConfig`] (server lines, resolver, keep-alive, retries, the
//! shim, DNS names and their timeline, backend faults, the load), runs the model and leaves a run
//! directory shaped exactly like the real runner's, so the checker judges both the same way.
//! Whatever the model cannot express is refused with one line naming the scenario field.
//!
//! ```
//! use resolvelab_lab::simrun;
//! use resolvelab_scenario::library;
//! let sc = library::get("nxdomain").unwrap();
//! let cfg = simrun::sim_config(&sc, 1, (0, 0)).unwrap();
//! assert_eq!(cfg.servers.len(), 1);
//! assert!(!cfg.ipv6, "the lab renders ipv6=off unless the scenario says otherwise");
//! // The NXDOMAIN window lands on the model's re-query: one phase and its revert.
//! assert_eq!(cfg.dns.len(), 3);
//! ```

use crate::lifecycle::Lifecycle;
use crate::options::{RunOptions, RunRecord, RunStatus};
use crate::render::http_body;
use anyhow::{Context, Result, anyhow, bail};
use resolvelab_core::evidence::{Event, event_kind};
use resolvelab_core::jsonl::Row;
use resolvelab_core::spec::dns::{Align, DnsSetting, HostRef};
use resolvelab_core::spec::engine::EngineId;
use resolvelab_core::spec::fault::Fault;
use resolvelab_core::spec::toxic::ToxicSpec;
use resolvelab_scenario::format::{Route, Specs, Spelled};
use resolvelab_scenario::net::Net;
use resolvelab_scenario::timeline::{Action, Step};
use resolvelab_scenario::{Plan, Scenario};
use resolvelab_sim::nginx::{
    BackendPool, DnsMode, DnsPhase, EphemeralPorts, FaultKind, FaultWindow, Latency, NextUpstream,
    Probe, RetryShim, ServerLine, SimConfig, SimSummary, Us, ZoneFiller, simulate,
};
use resolvelab_sim::proxies::{Policy, Proxy};
use resolvelab_thirdparty::ProxyBinary;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod fleet;
mod gslb;

/// The loopback /24 of a simulated run when `--net` is not given: fixed, so the same seed gives
/// byte-identical logs (nothing is sent anywhere; the addresses only appear in the logs).
pub const DEFAULT_NET: (u8, u8) = (0, 0);

/// The default simulated load start: 2026-11-30T06:00:00.5Z. Half a second past the second is
/// the mean phase of a real run's load start relative to nginx's one-second clock.
pub const DEFAULT_EPOCH_US: i64 = 1_796_018_400_500_000;

/// nginx start → load start. The real runner starts the load about 300 ms after nginx's first
/// DNS answer; the model resolves right at its start.
pub const WARMUP: Us = Us::ms(300);

/// Run a plan on the simulated nginx, leaving a run directory like a real run.
pub fn run(plan: &Plan, opts: &RunOptions) -> Result<RunRecord> {
    run_model(plan, opts).map(|(record, _)| record)
}

/// Why the model cannot play `sc`, if it cannot (checked without running it).
pub fn refusal(sc: &Scenario) -> Option<String> {
    refuse_unmodelled(sc).err().map(|e| e.to_string())
}

/// Play the scenario on the model of another proxy's DNS-event policy
/// (`resolvelab_sim::proxies`): the engines `sim-haproxy`, `sim-envoy`, `sim-caddy`.
pub fn run_proxy(plan: &Plan, opts: &RunOptions, proxy: Proxy) -> Result<RunRecord> {
    run_with(plan, opts, Some(proxy)).map(|(record, _)| record)
}

/// Why the model of `proxy` cannot play `sc`: what the real proxy cannot, then what the
/// proxy model does not play.
pub fn proxy_refusal(sc: &Scenario, proxy: Proxy) -> Option<String> {
    let check = || -> Result<()> {
        resolvelab_thirdparty::lab::refuse(proxy, sc)?;
        let pol = policy(sc, proxy)?;
        let plan = sc.plan(None, 1.0, Some(1))?;
        let cfg = mapping(&plan, DEFAULT_NET, DEFAULT_EPOCH_US, Some(&pol), WARMUP)?.cfg;
        resolvelab_sim::proxies::simulate_counts(
            &SimConfig {
                duration: Us(1),
                ..cfg
            },
            &pol,
        )
        .map_err(|e| anyhow!("{}: scenario `{}`: {e:#}", sc.at(&["name"]), sc.name))?;
        Ok(())
    };
    check().err().map(|e| format!("{e:#}"))
}

/// The proxy's policy as the scenario configures the real one: retries as its folder renders
/// them, and the knobs the model reads (`hold nx`/`hold other`, `timeout resolve`,
/// `retry-on`, `dns_refresh_rate`, `refresh`).
pub fn policy(sc: &Scenario, proxy: Proxy) -> Result<Policy> {
    let mut p = Policy::of(proxy);
    let timing = sc.proxy_timing(proxy)?;
    p.period = us(timing.period);
    match proxy {
        Proxy::Haproxy => {
            p.retries = resolvelab_thirdparty::retries(sc, 3);
            if let Some(h) = timing.hold_nx {
                p.hold_nx = us(h);
            }
            if let Some(h) = timing.hold_other {
                p.hold_other = us(h);
            }
            p.retry_reused = sc
                .haproxy
                .defaults
                .iter()
                .chain(&sc.haproxy.backend)
                .any(|l| {
                    // `all-retryable-errors` includes `empty-response`.
                    l.trim().starts_with("retry-on")
                        && (l.contains("empty-response") || l.contains("all-retryable-errors"))
                });
        }
        Proxy::Envoy => {
            // The model plays a STRICT_DNS cluster (hosts replaced, emptied by NXDOMAIN); a
            // LOGICAL_DNS one keeps its host, which the model does not know.
            if let Some(t) = sc.envoy.cluster.get("type").and_then(|t| t.as_str())
                && t != "STRICT_DNS"
            {
                bail!(
                    "{}: the Envoy model plays a STRICT_DNS cluster, not `{t}`; run it on `--engine envoy`",
                    sc.at(&["envoy", "cluster", "type"])
                );
            }
            p.retries = resolvelab_thirdparty::retries(sc, 1)
        }
        Proxy::Caddy => p.retries = resolvelab_thirdparty::retries(sc, 1),
    }
    Ok(p)
}

/// [`run`], also returning the model's own counts (what `sim.json` holds).
pub fn run_model(plan: &Plan, opts: &RunOptions) -> Result<(RunRecord, SimSummary)> {
    run_with(plan, opts, None)
}

/// Play the scenario on the nginx model (`proxy` None) or a proxy's, also returning the
/// model's own counts.
pub fn run_model_of(
    plan: &Plan,
    opts: &RunOptions,
    proxy: Option<Proxy>,
) -> Result<(RunRecord, SimSummary)> {
    run_with(plan, opts, proxy)
}

fn run_with(
    played: &Plan,
    opts: &RunOptions,
    proxy: Option<Proxy>,
) -> Result<(RunRecord, SimSummary)> {
    let (sc, seed) = (&played.scenario, played.seed);
    let policy = proxy.map(|p| policy(sc, p)).transpose()?;
    let engine = proxy.map_or(EngineId::Sim, EngineId::SimProxy);
    let (a, b) = opts.net.unwrap_or(DEFAULT_NET);
    let lab = opts.replay.as_ref();
    let epoch = lab.map_or(DEFAULT_EPOCH_US, |l| l.load_start_us);
    let warmups = fleet::warmups(sc, lab, WARMUP);
    let warmup = warmups.iter().copied().max().unwrap_or(WARMUP);
    let mut plan = mapping(played, (a, b), epoch, policy.as_ref(), warmup)?;
    if let Some(path) = lab.and_then(|l| l.arrivals.as_deref()) {
        plan.cfg.arrivals = lab_arrivals(path, plan.cfg.duration)?;
        plan.cfg.rps = plan.cfg.arrivals.len() as f64 * 1e6 / plan.cfg.duration.0 as f64;
    }
    let mut run = Lifecycle::begin(sc, opts, engine, (a, b), plan.net.nginx.to_string(), seed)?;
    run.record.load_start_us = plan.cfg.epoch_us;
    let dir = &run.dir;
    // For reference only: the configuration the real engine would run.
    match proxy {
        // A fleet's instances each get theirs (`fleet::play`).
        None if sc.fleet.is_some() => {}
        None => std::fs::write(
            dir.file(resolvelab_core::evidence::file::NGINX_CONF),
            reference_conf(sc, &plan.net, &dir.path)?,
        )?,
        Some(p) => {
            let k = p;
            std::fs::write(
                dir.file(k.config_file()),
                resolvelab_thirdparty::lab::config(k, sc, &plan.net)?,
            )?;
        }
    }
    if opts.progress {
        resolvelab_core::progress::line(format!(
            "[{}] simulating {} rps for {} (seed {seed}); run directory {}",
            sc.name,
            plan.cfg.rps,
            resolvelab_core::dur::format(Duration::from_micros(plan.cfg.duration.0 as u64)),
            dir.path.display()
        ));
    }
    let simulated = match &policy {
        None if sc.fleet.is_some() => fleet::play(
            &fleet::Fleet {
                cfg: &plan.cfg,
                net: &plan.net,
                views: (plan.gslb.views.iter())
                    .map(|(k, v)| (*k, to_phases(v)))
                    .collect(),
                warmups: &warmups,
                conf: &|net, prefix| reference_conf(sc, net, prefix),
            },
            &dir.path,
        ),
        None => simulate(&plan.cfg, &dir.path),
        Some(p) => resolvelab_sim::proxies::simulate(&plan.cfg, p, &dir.path),
    };
    let result = simulated
        .with_context(|| format!("simulating scenario `{}`", sc.name))
        .and_then(|summary| {
            let target = proxy.map_or("nginx", |p| p.id());
            let hits = finish_events(&dir.path, &plan, &summary, target)?;
            Ok((summary, hits))
        });
    let (summary, hits) = match result {
        Ok(done) => done,
        // Like the real runner: the directory still says what happened.
        Err(e) => return Err(run.fail(e)),
    };
    run.record.requests = summary.requests;
    run.record.hits = hits;
    let fingerprint = resolvelab_core::rundir::Fingerprint {
        // The simulated error log is written in this offset's local time; the checker joins
        // the logs with it.
        utc_offset_s: Some(plan.cfg.tz_offset_s),
        ..(run.dir).fingerprint(seed, run.record.started_us, engine.as_str(), "")
    };
    // The model's own counts (ground truth for its logs, and the first-pick expectation that
    // `sim fidelity --replay` pools over every row).
    (run.dir).write_json(resolvelab_core::evidence::file::SIM, &summary)?;
    let record = run.end(RunStatus::Completed, None, &fingerprint)?;
    if opts.progress {
        resolvelab_core::progress::line(format!(
            "[{}] done: {} requests simulated, {} NLU; evidence in {}",
            sc.name,
            summary.requests,
            summary.nlu_total(),
            record.dir.display()
        ));
    }
    Ok((record, summary))
}

/// The configuration the real nginx would run, for reference, with `prefix` as its prefix.
fn reference_conf(sc: &Scenario, net: &Net, prefix: &Path) -> Result<String> {
    let body = http_body(sc, net)?;
    Ok(resolvelab_nginx::conf::lab_conf_with(
        prefix,
        &body,
        &resolvelab_nginx::conf::LabConf {
            workers: sc.nginx.workers,
            ..Default::default()
        },
    ))
}

/// The model's configuration for a (variant-merged) scenario at full scale: what [`run`]
/// simulates.
pub fn sim_config(sc: &Scenario, seed: u64, net: (u8, u8)) -> Result<SimConfig> {
    let plan = sc.plan(None, 1.0, Some(seed))?;
    let warmup = (fleet::warmups(sc, None, WARMUP).into_iter().max()).unwrap_or(WARMUP);
    Ok(mapping(&plan, net, DEFAULT_EPOCH_US, None, warmup)?.cfg)
}

/// A scenario mapped onto the model, plus what the run directory's bookkeeping needs.
struct Mapped {
    cfg: SimConfig,
    net: Net,
    /// Per fault window (same order as `cfg.faults`): the backend/proxy name (empty for an
    /// address nothing listens on) and the fault name.
    fault_names: Vec<(String, String)>,
    /// Addresses nothing listens on (standing `refuse`, not injections: no events, no hits).
    env_targets: std::collections::BTreeSet<String>,
    /// DNS injections with `for` (their `dns-mode-end` events).
    dns_windows: Vec<DnsWindow>,
    /// Names the timeline injects into (their total hits go into run.json).
    dns_injected: Vec<String>,
    /// Proxies that stand for a pool backend's link to its database, with the pools (indices
    /// into `cfg.pools`) that use them: their faults touch the pools' connections.
    links: BTreeMap<String, Vec<usize>>,
    /// Every proxy's fault specs by name.
    proxies: Vec<(String, Vec<Spelled<ToxicSpec>>)>,
    /// The answer changes of the names a GSLB answers (`gslb` events, µs from the load start),
    /// and those of resolvers with their own order (a fleet instance's).
    gslb: gslb::Played,
}

/// One DNS injection with `for`; times are µs from the load start.
struct DnsWindow {
    name: String,
    mode: String,
    from: i64,
    until: i64,
    expect_miss: bool,
}

fn us(d: Duration) -> Us {
    Us(d.as_micros() as i64)
}

/// `64k`, `1m`, `65536` → bytes.
fn size(field: &str, v: &str) -> Result<u64> {
    resolvelab_core::spec::nginx::size(v)
        .ok_or_else(|| anyhow!("{field} = {v:?}: expected a size like 64k or 1m"))
}

/// `[host] sysctl` → the model's ephemeral port pool. Only a host that never reuses TIME_WAIT
/// ports (`net.ipv4.tcp_tw_reuse = 0`) runs out: Linux's default (2) reuses them on loopback,
/// which is why the lab's plain run sees no exhaustion.
fn ephemeral_ports(
    sc: &Scenario,
    unsupported: &dyn Fn(&str, &str) -> anyhow::Error,
) -> Result<Option<EphemeralPorts>> {
    let mut reuse = 2u8;
    // Linux's default net.ipv4.ip_local_port_range: 32768 60999.
    let mut count = 60999 - 32768 + 1;
    for (k, v) in &sc.host.sysctl {
        let field = format!("[host] sysctl \"{k}\" = {v:?}");
        match k.as_str() {
            "net.ipv4.tcp_tw_reuse" => {
                reuse = match v.trim() {
                    "0" => 0,
                    "1" => 1,
                    "2" => 2,
                    _ => bail!("{field}: expected 0, 1 or 2"),
                };
            }
            "net.ipv4.ip_local_port_range" => {
                let mut it = v.split_whitespace().map(str::parse::<u32>);
                count = match (it.next(), it.next(), it.next()) {
                    (Some(Ok(lo)), Some(Ok(hi)), None) if lo <= hi && hi <= 65535 => hi - lo + 1,
                    _ => bail!(
                        "{field}: expected two port numbers \"LOW HIGH\", e.g. \"40000 40499\""
                    ),
                };
            }
            _ => {
                return Err(unsupported(
                    &field,
                    "the model only knows net.ipv4.tcp_tw_reuse and net.ipv4.ip_local_port_range",
                ));
            }
        }
    }
    if reuse != 0 {
        return Ok(None);
    }
    if sc.nginx.keepalive > 0 && !sc.nginx.keepalive_default {
        return Err(unsupported(
            &format!(
                "[host] sysctl net.ipv4.tcp_tw_reuse = 0 with nginx.keepalive = {}",
                sc.nginx.keepalive
            ),
            "the port model covers one connection per try (keepalive = 0) only",
        ));
    }
    Ok(Some(EphemeralPorts {
        count,
        time_wait: Us::s(60),
        // Measured in the lab (port-exhaustion [netns]): ports come back in batches 2.048 s
        // apart, the kernel timer wheel's granularity for a 60 s timer at HZ=250.
        granularity: Us::ms(2048),
    }))
}

/// The send times of a lab run's requests (offsets from its load start, in order, inside the
/// load's duration); requests the lab never sent are left out, as they never reached nginx.
fn lab_arrivals(path: &Path, duration: Us) -> Result<Vec<Us>> {
    let file = resolvelab_load::record::read_file(path)
        .with_context(|| format!("the lab's arrivals {}", path.display()))?;
    let start = file.header.start_us;
    let mut out: Vec<Us> = file
        .records
        .iter()
        .filter_map(|r| r.sent_us)
        .map(|t| Us(t - start))
        .filter(|t| t.0 >= 0 && t.0 < duration.0)
        .collect();
    out.sort_unstable();
    if out.is_empty() {
        bail!(
            "{}: no request was sent inside the scenario's load duration; \
             pass the load.jsonl of a run of this scenario",
            path.display()
        );
    }
    Ok(out)
}

fn unsupported(sc: &Scenario, field: &str, why: &str) -> anyhow::Error {
    anyhow!(
        "scenario `{}`: {field} cannot run on --engine sim ({why}); run it with --engine nginx",
        sc.name
    )
}

/// The scenario → model mapping, stage by stage; each stage refuses what the model cannot
/// express on one line naming the field.
/// `proxy`: the model of another proxy plays it, whose queries come on its own schedule.
/// `warmup`: nginx's start → the load start (a fleet's: its first instance's).
fn mapping(
    plan: &Plan,
    (a, b): (u8, u8),
    epoch_us: i64,
    proxy: Option<&Policy>,
    warmup: Us,
) -> Result<Mapped> {
    let (sc, specs, seed) = (&plan.scenario, &plan.specs, plan.seed);
    refuse_unmodelled(sc)?;
    if let (Some(f), Some(p)) = (&sc.fleet, proxy) {
        return Err(unsupported(
            sc,
            &format!("fleet.instances = {}", f.instances),
            &format!(
                "a fleet plays nginx instances; the {} model plays one proxy",
                p.proxy.id()
            ),
        ));
    }
    let net = Net::assign(sc, a, b)?;
    let mut cfg = SimConfig::new(server_lines(sc, &net)?);
    cfg.seed = seed;
    cfg.epoch_us = epoch_us;
    cfg.warmup = warmup;
    cfg.listen = net.nginx.to_string();
    cfg.uri = sc.load.path.clone();
    nginx_settings(&mut cfg, sc)?;
    load_settings(&mut cfg, sc, specs, &net)?;
    let links = pools(&mut cfg, sc, specs, &net)?;
    // Every backend answers with its name in `x-backend`, which the load records.
    cfg.names = sc
        .backends
        .iter()
        .map(|b| (net.hosts[&b.name].to_string(), b.name.clone()))
        .collect();
    let mut t = Timeline::new(&cfg, specs, &net)?;
    if let Some(p) = proxy {
        // HAProxy and Envoy poll from their start; Caddy looks up at the first request and
        // again once the answer is older than its period.
        let first = match p.proxy {
            Proxy::Caddy => 0,
            _ => -cfg.warmup.0,
        };
        t.period = p.period.0;
        t.schedule = Some(first);
    }
    standing_faults(&mut t, &cfg, sc, specs, &net, &links)?;
    for step in &plan.steps {
        t.event(&mut cfg, sc, &net, &links, step)?;
    }
    let gslb = t.gslb(sc, &net, seed, cfg.duration.0)?;
    t.settle_all();
    cfg.dns = to_phases(&t.phases);
    let env_targets = environment_refusals(&cfg, &net, sc.nginx.port, &mut t);
    cfg.faults = t.faults;
    cfg.validate()
        .map_err(|e| anyhow!("scenario `{}` mapped onto the model: {e:#}", sc.name))?;
    Ok(Mapped {
        cfg,
        net,
        fault_names: t.fault_names,
        env_targets,
        dns_windows: t.dns_windows,
        dns_injected: t.dns_injected,
        links,
        proxies: sc
            .proxies
            .iter()
            .map(|p| (p.name.clone(), p.faults.clone()))
            .collect(),
        gslb,
    })
}

/// What the model does not express at all.
fn refuse_unmodelled(sc: &Scenario) -> Result<()> {
    let n = &sc.nginx;
    let refuse = |field: &str, why: &str| Err(unsupported(sc, field, why));
    if n.inline.is_some() {
        return refuse(
            "nginx.inline",
            "the model reads the template's variables, not an inline config",
        );
    }
    if let Some(t) = &n.keepalive_timeout {
        return refuse(
            &format!("nginx.keepalive_timeout = {t:?}"),
            "idle expiry of cached connections is not modelled; the reclaim fault stands for it",
        );
    }
    if let Some(t) = &n.connect_timeout {
        return refuse(
            &format!("nginx.connect_timeout = {t:?}"),
            "proxy_connect_timeout is not modelled",
        );
    }
    if n.recursive_error_pages {
        return refuse(
            "nginx.recursive_error_pages = true",
            "the shim is modelled with nginx's default of at most 2 passes",
        );
    }
    if sc.load.max_in_flight.is_some() {
        return refuse(
            "load.max_in_flight",
            "the model's load is an uncapped open loop",
        );
    }
    if sc.load.retry_idempotent {
        return refuse(
            "load.retry_idempotent",
            "the model's client never sends a request twice",
        );
    }
    for (i, s) in n.servers.iter().enumerate() {
        if let Some(name) = s.host.strip_prefix('@')
            && sc.backends.iter().any(|b| b.name == name && b.echo_db)
        {
            return refuse(
                &format!("nginx.server[{i}] @{name}"),
                "an echo_db backend behind nginx is not modelled",
            );
        }
    }
    Ok(())
}

/// Server lines: a name without `resolve` (or in a direct proxy_pass) is resolved at start and
/// at reloads; a variable proxy_pass per request.
fn server_lines(sc: &Scenario, net: &Net) -> Result<Vec<ServerLine>> {
    let mut servers = Vec::new();
    for (i, s) in sc.nginx.servers.iter().enumerate() {
        let u = net
            .upstream_server(sc, s)
            .map_err(|e| anyhow!("nginx.server[{i}]: {e}"))?;
        let mut line = ServerLine::from_params(&u.host, u.port, &u.params);
        line.per_request = !s.host.starts_with('@') && sc.nginx.route == Route::Variable;
        servers.push(line);
    }
    Ok(servers)
}

/// `[nginx]` and `[dns]` settings beside the server lines.
fn nginx_settings(cfg: &mut SimConfig, sc: &Scenario) -> Result<()> {
    let n = &sc.nginx;
    cfg.valid = Some(us(n.valid.get()));
    cfg.ipv6 = n.ipv6;
    cfg.dns_ttl = us(sc.dns.ttl.get());
    if let Some(t) = &n.resolver_timeout {
        cfg.resolver_timeout = us(t.get());
    }
    cfg.zone_bytes = size("nginx.zone", &n.zone)?;
    // The template's `upstream filler { zone be; server NAME:PORT resolve max_fails=0; }`.
    cfg.zone_filler = n.zone_filler.as_ref().map(|name| ZoneFiller {
        name: name.clone(),
        upstream: "filler".into(),
        port: n.port,
    });
    cfg.resolver = n.resolver;
    // proxy_pass to a name (no upstream block) keeps no upstream connections; nor does the
    // model's nginx 1.28 by default (`keepalive_default`).
    cfg.keepalive = if n.route == Route::Upstream && !n.keepalive_default {
        n.keepalive
    } else {
        0
    };
    cfg.ephemeral_ports = ephemeral_ports(sc, &|f, w| unsupported(sc, f, w))?;
    // Each nginx worker keeps its own keep-alive cache: how soon a connection is reused (and
    // so how often a backend's reclaim catches a request) depends on it.
    cfg.workers = n.workers.max(1);
    cfg.next_upstream = next_upstream(&n.proxy_next_upstream).map_err(|why| {
        unsupported(
            sc,
            &format!("nginx.proxy_next_upstream = \"{}\"", n.proxy_next_upstream),
            &why,
        )
    })?;
    cfg.next_upstream.tries = n.proxy_next_upstream_tries;
    if let Some(t) = &n.read_timeout {
        cfg.read_timeout = us(t.get());
    }
    // The lab renders `keepalive_requests 100000` (crates/scenario/src/render.rs).
    cfg.keepalive_requests = 100_000;
    Ok(())
}

/// The load (rate or staged plan, mix, connections), the shim that depends on its methods,
/// and the backends' latency.
fn load_settings(cfg: &mut SimConfig, sc: &Scenario, specs: &Specs, net: &Net) -> Result<()> {
    let n = &sc.nginx;
    cfg.duration = us(sc.load.duration.get());
    match specs.rate.constant() {
        Some(r) => cfg.rps = r,
        None => {
            // A staged plan: the request times the lab's own scheduler gives it.
            let plan = &specs.rate;
            let Some(schedule) =
                plan.schedule(Some(Duration::from_micros(cfg.duration.0 as u64)), None)
            else {
                return Err(unsupported(
                    sc,
                    &format!("load.rate = {:?}", sc.load.rate),
                    "the model's load is an open loop; give a rate or stages",
                ));
            };
            cfg.arrivals = schedule
                .map(|(_, off)| us(off))
                .take_while(|t| t.0 < cfg.duration.0)
                .collect();
            if cfg.arrivals.is_empty() {
                bail!(
                    "load.rate = {:?}: the plan schedules no request",
                    sc.load.rate
                );
            }
            cfg.rps = cfg.arrivals.len() as f64 * 1e6 / cfg.duration.0 as f64;
        }
    }
    cfg.mix = sc.load.mix.shares().to_vec();
    cfg.client_connections = sc.load.connections.max(1);
    // The real runner connects once to see nginx listening (`Instance::wait_listening`): the
    // first accept, which sends the load's first connection to the other worker.
    cfg.accepts_before_load = 1;
    if cfg.retry_shim.is_none() && n.retry_shim {
        cfg.retry_shim = Some(if n.method_guard {
            RetryShim::default()
        } else {
            // No guard: every method of the mix gets the second pass.
            RetryShim {
                methods: cfg.mix.iter().map(|(m, _)| m.clone()).collect(),
            }
        });
    }
    // Backends alike when their latencies are written alike.
    let written: std::collections::BTreeSet<Option<&str>> = sc
        .backends
        .iter()
        .map(|b| b.latency.as_ref().map(|l| l.text.as_str()))
        .collect();
    let model = |name: &str| {
        specs.backends[name]
            .latency
            .as_ref()
            .map(|l| Latency::from(&l.value))
    };
    if written.len() > 1 {
        // A slow and a fast backend: each its own distribution, loopback for the others.
        cfg.latency = LOOPBACK_LATENCY;
        for be in &sc.backends {
            if let Some(l) = model(&be.name) {
                cfg.backend_latency
                    .insert(net.hosts[&be.name].to_string(), l);
            }
        }
    } else {
        cfg.latency = sc
            .backends
            .first()
            .and_then(|b| model(&b.name))
            .unwrap_or(LOOPBACK_LATENCY);
    }
    Ok(())
}

/// Backends with a database pool: the request's service is its round trips over the link.
/// Returns the proxies that stand for a link, with the pools (indices into `cfg.pools`) using
/// them.
fn pools(
    cfg: &mut SimConfig,
    sc: &Scenario,
    specs: &Specs,
    net: &Net,
) -> Result<BTreeMap<String, Vec<usize>>> {
    let mut links: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for be in &sc.backends {
        let Some(db) = &be.db else {
            continue;
        };
        let field = |k: &str| format!("backend `{}` {k}", be.name);
        let (Some(round_trips), Some(pool), Some(acquire)) =
            (be.round_trips, be.pool, be.acquire_timeout.as_ref())
        else {
            return Err(unsupported(
                sc,
                &field("db"),
                "the model needs round_trips, pool and acquire_timeout with db",
            ));
        };
        // One round trip on loopback, plus every latency fault of a proxy in between.
        let mut round_trip = LOOPBACK_ROUND_TRIP.0;
        if let Some(px) = sc.proxies.iter().find(|p| &p.name == db) {
            for Spelled { text: f, value } in &specs.proxies[&px.name] {
                match lab_fault(&Fault::Proxy(value.clone()))
                    .map_err(|e| anyhow!("proxy `{}` fault `{f}`: {e:#}", px.name))?
                {
                    FaultKind::Delay { by } => round_trip += by.0,
                    _ => {
                        return Err(unsupported(
                            sc,
                            &format!("proxy `{}` fault `{f}`", px.name),
                            "a database link only models latency faults",
                        ));
                    }
                }
            }
            links
                .entry(px.name.clone())
                .or_default()
                .push(cfg.pools.len());
        }
        let probe = sc
            .probes
            .iter()
            .find(|p| p.target == be.name)
            .map(|p| Probe {
                interval: us(p.interval.get()),
                timeout: us(p.timeout.get()),
                path: p.path.clone(),
            });
        cfg.pools.push(BackendPool {
            target: net.hosts[&be.name].to_string(),
            name: be.name.clone(),
            pool,
            round_trips,
            round_trip: Us(round_trip),
            acquire_timeout: us(acquire.get()),
            probe,
        });
    }
    for p in &sc.probes {
        if !cfg.pools.iter().any(|b| b.name == p.target) {
            return Err(unsupported(
                sc,
                &format!("probe of `{}`", p.target),
                "the model probes backends with a database pool only",
            ));
        }
    }
    Ok(links)
}

/// Backend and proxy faults from the start (a proxy that stands for a database link is
/// folded into the pools' round trips; its hits are the pool connections it carried).
fn standing_faults(
    t: &mut Timeline,
    cfg: &SimConfig,
    sc: &Scenario,
    specs: &Specs,
    net: &Net,
    links: &BTreeMap<String, Vec<usize>>,
) -> Result<()> {
    let backends = sc.backends.iter().map(|b| {
        let faults = &specs.backends[&b.name].faults;
        let faults = faults
            .iter()
            .map(|f| (&f.text, Fault::Backend(f.value.clone())));
        (&b.name, faults.collect::<Vec<_>>(), "backend")
    });
    let proxies = sc
        .proxies
        .iter()
        .filter(|p| !links.contains_key(&p.name))
        .map(|p| {
            let faults = specs.proxies[&p.name].iter();
            let faults = faults.map(|f| (&f.text, Fault::Proxy(f.value.clone())));
            (&p.name, faults.collect::<Vec<_>>(), "proxy")
        });
    for (name, faults, what) in backends.chain(proxies) {
        for (f, fault) in faults {
            let kind =
                lab_fault(&fault).map_err(|e| anyhow!("{what} `{name}` fault `{f}`: {e:#}"))?;
            t.faults.push(FaultWindow {
                start: Us(-cfg.warmup.0),
                end: Us(t.end_all),
                target: Some(net.hosts[name].to_string()),
                fault: kind,
            });
            t.fault_names.push((name.clone(), fault_name(f)));
        }
    }
    Ok(())
}

/// The timeline, played the way the real runner plays it (same jitter stream), into DNS
/// phases and fault windows.
struct Timeline {
    /// Names some server line (or the zone filler) resolves: their phases are simulated.
    resolved: std::collections::BTreeSet<String>,
    /// Each name's current setting.
    current: BTreeMap<String, DnsSetting>,
    /// (µs, name, setting) in the order they were decided.
    phases: Vec<Phase>,
    /// Reverts still pending per name (a `for` window's end).
    reverts: BTreeMap<String, Vec<(i64, DnsSetting)>>,
    dns_windows: Vec<DnsWindow>,
    dns_injected: Vec<String>,
    faults: Vec<FaultWindow>,
    fault_names: Vec<(String, String)>,
    /// The re-query period: valid + 1 s, or the modelled proxy's.
    period: i64,
    /// A proxy model's first query (µs from the load start; then one every `period`), instead
    /// of the nginx model's trial run.
    schedule: Option<i64>,
    /// The end of the run (µs after the load start, warm-up included).
    end_all: i64,
}

impl Timeline {
    /// The initial mode of every name a server line uses, from nginx's start.
    fn new(cfg: &SimConfig, specs: &Specs, net: &Net) -> Result<Timeline> {
        let resolved: std::collections::BTreeSet<String> = cfg
            .servers
            .iter()
            .filter(|s| s.host.parse::<std::net::IpAddr>().is_err())
            .map(|s| s.host.clone())
            .chain(cfg.zone_filler.iter().map(|f| f.name.clone()))
            .collect();
        let mut current = BTreeMap::new();
        let mut phases = Vec::new();
        for (name, setting) in &specs.dns {
            let setting = net
                .resolve(setting)
                .map_err(|e| anyhow!("[dns.names] {name}: {e}"))?;
            current.insert(name.clone(), setting.clone());
            if resolved.contains(name) {
                phases.push((-cfg.warmup.0, name.clone(), setting));
            }
        }
        Ok(Timeline {
            resolved,
            current,
            phases,
            reverts: BTreeMap::new(),
            dns_windows: Vec::new(),
            dns_injected: Vec::new(),
            faults: Vec::new(),
            fault_names: Vec::new(),
            period: cfg.valid_us() + 1_000_000,
            schedule: None,
            end_all: cfg.duration.0 + cfg.warmup.0,
        })
    }

    /// One timeline step.
    fn event(
        &mut self,
        cfg: &mut SimConfig,
        sc: &Scenario,
        net: &Net,
        links: &BTreeMap<String, Vec<usize>>,
        step: &Step,
    ) -> Result<()> {
        let field = step.field("");
        let at = us(step.at).0;
        let for_ = step.window.map(us);
        let link_only = |what: String| {
            Err(unsupported(
                sc,
                &what,
                "a database link's faults are modelled from the start of the run only",
            ))
        };
        match &step.action {
            Action::Dns { name, setting, .. } => self.dns_event(cfg, net, step, name, setting),
            Action::Fault { target: t, .. } | Action::Clear { target: t }
                if links.contains_key(t) =>
            {
                let what = if matches!(step.action, Action::Clear { .. }) {
                    "clear"
                } else {
                    "fault on"
                };
                link_only(format!("{field}: {what} `{t}`"))
            }
            Action::Fault {
                target: t,
                spec,
                fault,
            } => {
                let kind =
                    lab_fault(fault).map_err(|err| anyhow!("{field}: fault `{spec}`: {err:#}"))?;
                let end = match for_ {
                    Some(len) => at + len.0,
                    None => self.end_all,
                };
                if end > at {
                    self.faults.push(FaultWindow {
                        start: Us(at),
                        end: Us(end),
                        target: Some(net.hosts[t].to_string()),
                        fault: kind,
                    });
                    self.fault_names.push((t.clone(), fault_name(spec)));
                }
                Ok(())
            }
            Action::Clear { target: t } => {
                let addr = net.hosts[t].to_string();
                for f in self.faults.iter_mut() {
                    if f.target.as_deref() == Some(addr.as_str()) && f.start.0 < at && f.end.0 > at
                    {
                        f.end = Us(at);
                    }
                }
                Ok(())
            }
            Action::Reload | Action::Test | Action::Restart | Action::Start => {
                let times = match step.action {
                    Action::Reload => &mut cfg.reloads,
                    Action::Test => &mut cfg.tests,
                    Action::Restart => &mut cfg.restarts,
                    _ => &mut cfg.starts,
                };
                times.push(Us(at));
                Ok(())
            }
        }
    }

    /// A DNS change (aligned on a re-query when asked), with its revert after the window.
    fn dns_event(
        &mut self,
        cfg: &SimConfig,
        net: &Net,
        step: &Step,
        name: &String,
        setting: &DnsSetting<HostRef>,
    ) -> Result<()> {
        let field = step.field("");
        let at = us(step.at).0;
        let for_ = step.window.map(us);
        let setting = net
            .resolve(setting)
            .map_err(|err| anyhow!("{field}: {err}"))?;
        let tracked = self.resolved.contains(name);
        let when = if tracked && step.align.is_some() {
            self.aligned(cfg, &field, at, for_, name, step.align)?
        } else {
            at
        };
        settle(
            &mut self.reverts,
            &mut self.phases,
            &mut self.current,
            name,
            when,
        );
        let before = self
            .current
            .get(name)
            .cloned()
            .ok_or_else(|| anyhow!("{field}: dns name `{name}` is not in [dns.names]"))?;
        match for_ {
            Some(len) => self
                .reverts
                .entry(name.clone())
                .or_default()
                .push((when + len.0, before)),
            None => {
                self.reverts.remove(name);
            }
        }
        self.current.insert(name.clone(), setting.clone());
        if tracked {
            self.phases.push((when, name.clone(), setting.clone()));
        }
        if !self.dns_injected.contains(name) {
            self.dns_injected.push(name.clone());
        }
        if let Some(len) = for_ {
            // The real runner counts this injection's hits once its window is certainly
            // over: `for`, plus one period when it waited for the re-query.
            let until = if step.align == Some(Align::NextQuery) {
                at + len.0 + self.period
            } else {
                when + len.0
            };
            self.dns_windows.push(DnsWindow {
                name: name.clone(),
                mode: setting.to_string(),
                from: when,
                until: until.max(when + len.0),
                expect_miss: step.expect_miss,
            });
        }
        Ok(())
    }

    /// When an aligned injection lands: the next re-query of `name` after `at`, or the middle
    /// of a gap between two re-queries, like the real runner.
    fn aligned(
        &self,
        cfg: &SimConfig,
        field: &str,
        at: i64,
        for_: Option<Us>,
        name: &String,
        align: Option<Align>,
    ) -> Result<i64> {
        // The trial run needs the reverts still pending, without committing them.
        let mut trial = self.phases.clone();
        for (w, m) in self.reverts.get(name).into_iter().flatten() {
            trial.push((*w, name.clone(), m.clone()));
        }
        let period = self.period;
        let horizon = at + 2 * period + 2_000_000;
        let queries = match self.schedule {
            Some(first) => (0..)
                .map(|k| first + k * period)
                .take_while(|&q| q <= horizon)
                .collect(),
            None => query_times(cfg, &trial, name, horizon)?,
        };
        Ok(match align {
            Some(Align::NextQuery) => queries
                .iter()
                .copied()
                .find(|&q| q >= at)
                .ok_or_else(|| anyhow!("{field}: no re-query of {name} after {at} µs"))?,
            _ => {
                let len = for_.map_or(0, |f| f.0);
                match queries.iter().copied().rfind(|&q| q <= at) {
                    Some(last) => {
                        // A window as long as the period starts just after a query, as the
                        // real runner's does (it sets the mode once it saw the query).
                        let mut start = last + ((period - len).max(0) / 2).max(1);
                        while start < at {
                            start += period;
                        }
                        start
                    }
                    None => at,
                }
            }
        })
    }

    /// Play the scenario's GSLBs against the fault windows so far; the names' own answer
    /// changes become their phases.
    fn gslb(&mut self, sc: &Scenario, net: &Net, seed: u64, end: i64) -> Result<gslb::Played> {
        let mut start = BTreeMap::new();
        for name in sc.dns.gslb.keys() {
            let setting = (self.current.get(name).cloned())
                .ok_or_else(|| anyhow!("[dns.gslb] `{name}` is not a [dns.names] entry"))?;
            let first = self.phases.iter().find(|p| p.1 == *name).map_or(0, |p| p.0);
            start.insert(name.clone(), (setting, first));
        }
        let played = gslb::play(&gslb::Input {
            gslb: &sc.dns.gslb,
            faults: &self.faults,
            start,
            net,
            seed,
            end,
        })?;
        for (at, name, setting) in &played.main {
            self.current.insert(name.clone(), setting.clone());
            if self.resolved.contains(name) {
                self.phases.push((*at, name.clone(), setting.clone()));
            }
        }
        Ok(played)
    }

    /// Apply every revert still pending.
    fn settle_all(&mut self) {
        let names: Vec<String> = self.reverts.keys().cloned().collect();
        for name in names {
            settle(
                &mut self.reverts,
                &mut self.phases,
                &mut self.current,
                &name,
                i64::MAX,
            );
        }
    }
}

/// Addresses the DNS answers but nothing listens on (an unintended AAAA `::1`, the other
/// addresses of `multi:`): in the lab nginx's connect() is refused there, so the model gets a
/// standing `refuse` on them. They are the lab's surroundings, not injections.
fn environment_refusals(
    cfg: &SimConfig,
    net: &Net,
    port: u16,
    t: &mut Timeline,
) -> std::collections::BTreeSet<String> {
    let listening: std::collections::BTreeSet<String> =
        net.hosts.values().map(|a| a.to_string()).collect();
    let mut env_targets = std::collections::BTreeSet::new();
    for p in &cfg.dns {
        let mut ips: Vec<std::net::IpAddr> = match p.mode.answered() {
            DnsMode::Static(v) | DnsMode::Alternate(v) => {
                v.iter().map(|&i| std::net::IpAddr::V4(i)).collect()
            }
            DnsMode::Multi { n: k, base } => (0..*k)
                .map(|i| {
                    std::net::IpAddr::V4(std::net::Ipv4Addr::from(u32::from(*base).wrapping_add(i)))
                })
                .collect(),
            _ => Vec::new(),
        };
        if cfg.ipv6 {
            ips.extend(p.aaaa.iter().map(|&i| std::net::IpAddr::V6(i)));
        }
        for ip in ips {
            let target = std::net::SocketAddr::new(ip, port).to_string();
            if !listening.contains(&target) && env_targets.insert(target.clone()) {
                t.faults.push(FaultWindow {
                    start: Us(-cfg.warmup.0),
                    end: Us(t.end_all),
                    target: Some(target.clone()),
                    fault: FaultKind::Refuse,
                });
                t.fault_names.push((String::new(), "refuse".into()));
            }
        }
    }
    env_targets
}

/// Apply the reverts of `name` due at or before `t`, as the lab DNS does.
fn settle(
    reverts: &mut BTreeMap<String, Vec<(i64, DnsSetting)>>,
    phases: &mut Vec<Phase>,
    current: &mut BTreeMap<String, DnsSetting>,
    name: &str,
    t: i64,
) {
    let Some(list) = reverts.get_mut(name) else {
        return;
    };
    list.sort_by_key(|r| r.0);
    let due: Vec<(i64, DnsSetting)> = list.iter().filter(|r| r.0 <= t).cloned().collect();
    list.retain(|r| r.0 > t);
    for (when, mode) in due {
        phases.push((when, name.to_string(), mode.clone()));
        current.insert(name.to_string(), mode);
    }
}

/// A DNS phase as the timeline decides it: from µs, this name, this setting.
type Phase = (i64, String, DnsSetting);

fn to_phases(phases: &[Phase]) -> Vec<DnsPhase> {
    let mut v: Vec<&Phase> = phases.iter().collect();
    v.sort_by_key(|p| p.0);
    v.into_iter()
        .map(|(at, name, setting)| DnsPhase::new(Us(*at), name, setting.clone()))
        .collect()
}

/// When the model's nginx queries `name` (µs from the load start), with the DNS timeline known
/// so far: a trial run up to `horizon`. The schedule before a phase does not depend on later
/// phases (DNS ids and timer jitter come from their own RNG stream), so the trial's query times
/// are the real run's.
fn query_times(cfg: &SimConfig, phases: &[Phase], name: &str, horizon: i64) -> Result<Vec<i64>> {
    let mut trial = cfg.clone();
    trial.dns = to_phases(phases);
    trial.faults = Vec::new();
    trial.duration = Us(horizon.max(1_000_000));
    // The load does not move the DNS schedule; a light one keeps the trial cheap.
    trial.rps = 1.0;
    resolvelab_sim::nginx::query_times(&trial, name).context("trial run for the timeline alignment")
}

fn for_each_json(path: &Path, mut f: impl FnMut(&Value)) -> Result<()> {
    let (_, lines) = resolvelab_core::jsonl::read_values(path)?;
    for v in lines.into_iter().filter_map(|(_, v)| v.ok()) {
        f(&v);
    }
    Ok(())
}

/// The scenario's `proxy_next_upstream` as the model plays it: error, timeout and
/// non_idempotent; the rest (`invalid_header`, `http_NNN`) is not modelled.
fn next_upstream(
    n: &resolvelab_core::spec::nginx::NextUpstream,
) -> std::result::Result<NextUpstream, String> {
    if n.invalid_header || !n.statuses.is_empty() {
        return Err(
            "only error, timeout, non_idempotent and off are modelled (not invalid_header or http_NNN)"
                .into(),
        );
    }
    Ok(NextUpstream {
        error: n.error,
        timeout: n.timeout,
        non_idempotent: n.non_idempotent,
        tries: 0,
    })
}

/// The backends' latency as the model's (one distribution for every backend).
/// The lab backend's timer resolution: tokio fires a sleep on the next 1 ms tick, so a
/// `reclaim` close comes 0–1 ms after its drawn delay (measured on the lab's backup
/// [max_fails=0] run: `delay=0ms..50ms` fails tries 0.6 ms later on average than a uniform
/// 0–50 ms, and up to 52 ms). The model shifts the range by half a tick.
const LAB_TIMER_HALF_TICK: Us = Us(500);

/// A lab fault spec — a proxy's toxic, or a backend's fault — as the model plays it, with the
/// lab's timer resolution on `reclaim`.
fn lab_fault(fault: &Fault) -> Result<FaultKind> {
    let kind = match fault {
        Fault::Proxy(t) => FaultKind::from_toxic(t)?,
        Fault::Backend(f) => FaultKind::from_backend(f)?,
    };
    Ok(match kind {
        FaultKind::Reclaim {
            p,
            delay_min,
            delay_max,
        } => FaultKind::Reclaim {
            p,
            delay_min: Us(delay_min.0 + LAB_TIMER_HALF_TICK.0),
            delay_max: Us(delay_max.0 + LAB_TIMER_HALF_TICK.0),
        },
        other => other,
    })
}

/// One database round trip on loopback (the lab's app-fast: 9 round trips in about 2 ms).
pub const LOOPBACK_ROUND_TRIP: Us = Us(200);

/// A try's latency on loopback when the scenario gives the backends none: the lab's
/// `$upstream_response_time` is below 1 ms for > 90 % of tries.
pub const LOOPBACK_LATENCY: Latency = Latency::Uniform {
    min: Us(100),
    max: Us(400),
};

/// A fault's kind as written, which is how the lab's events name it.
fn fault_name(spec: &str) -> String {
    spec.split(':').next().unwrap_or(spec).trim().to_string()
}

/// Complete events.jsonl like the real runner's: phase markers, fault targets by name,
/// `dns-mode-end` with the injection's hits; returns run.json's hit counters.
/// `proxy`: the target of the proxy's own events (`nginx`, `haproxy`, …).
fn finish_events(
    dir: &Path,
    plan: &Mapped,
    summary: &SimSummary,
    proxy: &str,
) -> Result<BTreeMap<String, u64>> {
    let epoch = plan.cfg.epoch_us;
    let path = dir.join(resolvelab_core::evidence::file::EVENTS);
    let mut header = r#"{"schema":"resolvelab.events/v1"}"#.to_string();
    let mut read: Vec<(usize, Result<Event, String>)> = Vec::new();
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    resolvelab_core::jsonl::for_each(std::io::BufReader::new(file), |row| match row {
        Row::Header { line, .. } => header = line.to_string(),
        Row::Line { n, value, .. } => read.push((n, value)),
    })
    .with_context(|| format!("cannot read {}", path.display()))?;
    let by_addr: BTreeMap<String, String> = plan
        .net
        .hosts
        .iter()
        .map(|(n, a)| (a.to_string(), n.clone()))
        .collect();
    let mut events: Vec<Event> = Vec::new();
    for (n, e) in read {
        let mut e = e.map_err(|e| {
            anyhow!(
                "{}:{n}: the simulator wrote a bad line: {e}",
                path.display()
            )
        })?;
        let target = e.target.as_deref().unwrap_or_default();
        if plan.env_targets.contains(target) {
            continue;
        }
        // A GSLB's answer is the name's own, not an injection: its changes are `gslb` events.
        if e.kind == event_kind::DNS_MODE && plan.gslb.names.iter().any(|n| n == target) {
            continue;
        }
        if let Some(name) = by_addr.get(target) {
            e.target = Some(name.clone());
        }
        events.push(e);
    }
    let phase =
        |t: i64, target: &str, note: &str| Event::new(t, event_kind::PHASE, target).note(note);
    // A database link's faults touched every pool connection opened through it.
    let mut link_hits = BTreeMap::new();
    for (name, pools) in &plan.links {
        let h: u64 = pools
            .iter()
            .map(|&i| summary.pool_connections.get(i).copied().unwrap_or(0))
            .sum();
        let Some(px) = plan.proxies.iter().find(|(n, _)| n == name) else {
            continue;
        };
        for spec in &px.1 {
            let fname = spec.value.name();
            let at = |t: i64, kind: &str| Event::new(t, kind, name).spec(&fname);
            events.push(at(epoch - plan.cfg.warmup.0, event_kind::FAULT_ON).note("from start"));
            events.push(
                at(epoch + plan.cfg.duration.0, event_kind::FAULT_OFF)
                    .hits(h)
                    .note("end of run"),
            );
            link_hits.insert(format!("fault:{name}:{fname}"), h);
        }
    }
    events.push(phase(
        epoch - plan.cfg.warmup.0,
        proxy,
        "listening (simulated)",
    ));
    events.push(phase(epoch, "load", "start"));
    for c in &plan.gslb.changes {
        events.push(
            Event::new(epoch + c.at, event_kind::GSLB, &c.name)
                .spec(&c.mode)
                .note(&c.note),
        );
    }
    events.push(phase(epoch + plan.cfg.duration.0, "load", "end"));

    // DNS hits: queries answered under an injected mode, like the lab DNS counts them.
    let mut injected: Vec<(String, i64)> = Vec::new();
    for_each_json(&dir.join(resolvelab_core::evidence::file::DNS), |v| {
        if v.get("injected").and_then(Value::as_bool) == Some(true)
            && let (Some(n), Some(t)) = (
                v.get("qname").and_then(Value::as_str),
                v.get("t_us").and_then(Value::as_i64),
            )
        {
            injected.push((n.to_string(), t - epoch));
        }
    })?;
    for w in &plan.dns_windows {
        let hits = injected
            .iter()
            .filter(|(n, t)| *n == w.name && *t >= w.from && *t < w.until)
            .count() as u64;
        events.push(Event {
            expect_miss: w.expect_miss,
            ..Event::new(epoch + w.until, event_kind::DNS_MODE_END, &w.name)
                .spec(&w.mode)
                .hits(hits)
        });
    }
    // Stable: events of one instant keep the order they were written in.
    events.sort_by_key(|e| e.t_us);
    let mut out = header;
    out.push('\n');
    for e in &events {
        out.push_str(&serde_json::to_string(e)?);
        out.push('\n');
    }
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;

    let mut hits = link_hits;
    for name in &plan.dns_injected {
        let n = injected.iter().filter(|(q, _)| q == name).count() as u64;
        hits.insert(format!("dns:{name}"), n);
    }
    for ((target, fname), h) in plan.fault_names.iter().zip(&summary.fault_hits) {
        if target.is_empty() {
            continue;
        }
        *hits.entry(format!("fault:{target}:{fname}")).or_insert(0) += h;
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_scenario::library;

    fn cfg(name: &str, variant: Option<&str>) -> SimConfig {
        let mut sc = library::get(name).unwrap();
        if let Some(v) = variant {
            sc = sc.variant(v).unwrap();
        }
        sim_config(&sc, 1, (0, 0)).unwrap()
    }

    #[test]
    fn lab_arrivals_are_the_sent_times_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("load.jsonl");
        // Completion order, one request never sent, one after the load's end.
        let rec = |t: i64, sent: Option<i64>| {
            format!(
                "{{\"t_us\":{t},\"sent_us\":{},\"latency_us\":null,\"uncorrected_us\":null,\
                 \"status\":200,\"bytes\":3,\"error\":null,\"conn\":1,\"method\":\"GET\",\
                 \"header\":null,\"seq\":0}}\n",
                sent.map_or("null".to_string(), |s| s.to_string())
            )
        };
        let start = 1_000_000_000;
        let text = format!(
            "{{\"schema\":\"resolvelab.load/v1\",\"target\":\"http://127.0.0.1:8080/\",\
             \"plan\":\"100\",\"start_us\":{start},\"seed\":1}}\n{}{}{}{}",
            rec(start + 20_000, Some(start + 27_800)),
            rec(start + 10_000, Some(start + 27_750)),
            rec(start + 30_000, None),
            rec(start + 2_000_000, Some(start + 2_000_100)),
        );
        std::fs::write(&path, text).unwrap();
        let a = lab_arrivals(&path, Us::s(1)).unwrap();
        assert_eq!(a, vec![Us(27_750), Us(27_800)]);
        // A file with nothing inside the duration is refused on one line.
        let e = lab_arrivals(&path, Us::ms(10)).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("load.jsonl") && !msg.contains('\n'), "{msg}");
    }

    #[test]
    fn haproxy_retries_a_reused_connection_only_with_empty_response() {
        let sc = library::get("generation-race").unwrap();
        let with = |line: &str| {
            let mut s = sc.clone();
            s.haproxy.backend = vec![line.to_string()];
            policy(&s, Proxy::Haproxy).unwrap().retry_reused
        };
        assert!(
            !policy(&sc, Proxy::Haproxy).unwrap().retry_reused,
            "not by default"
        );
        assert!(with("retry-on conn-failure empty-response"));
        assert!(with("retry-on all-retryable-errors"));
        assert!(!with("retry-on conn-failure"));
    }

    #[test]
    fn every_library_scenario_maps() {
        // Every library scenario and variant runs on the model, fleets included; a proxy's
        // model plays one proxy and refuses a fleet by its field.
        for sc in library::all().unwrap() {
            sim_config(&sc, 1, (0, 0)).unwrap_or_else(|e| panic!("{}: {e:#}", sc.name));
            for v in sc.variant_names() {
                sim_config(&sc.variant(&v).unwrap(), 1, (0, 0))
                    .unwrap_or_else(|e| panic!("{} {v}: {e:#}", sc.name));
            }
            if sc.fleet.is_some() {
                let e = proxy_refusal(&sc, Proxy::Haproxy).expect("refused");
                assert!(e.contains("a fleet plays nginx instances"), "{e}");
            }
        }
    }

    #[test]
    fn a_gslb_answer_follows_its_probes_as_dns_phases() {
        // The failover scenario without its fleet: one nginx asking the GSLB. b1 is down from
        // 12 s to 28 s; probes at x.5 s take it out at the third failure (14.5 s) and back at
        // the third success (30.5 s).
        let mut sc = library::get("gslb-failover").unwrap();
        sc.fleet = None;
        let c = sim_config(&sc, 1, (0, 0)).unwrap();
        let moves: Vec<(i64, String)> = c
            .dns
            .iter()
            .filter(|p| p.at.0 >= 0)
            .map(|p| (p.at.0, p.mode.to_string()))
            .collect();
        assert_eq!(
            moves,
            [
                (14_500_000, "static:127.0.0.30".to_string()),
                (30_500_000, "static:127.0.0.20".to_string())
            ]
        );
    }

    #[test]
    fn servers_resolver_and_faults() {
        let c = cfg("dual-resolve", None);
        assert_eq!(c.servers.len(), 2);
        assert!(c.servers.iter().all(|s| s.resolve && s.max_fails == 1));
        assert_eq!(c.keepalive, 0);
        assert_eq!(c.valid, Some(Us::s(5)));
        assert_eq!(c.faults.len(), 1);
        assert_eq!(c.faults[0].start, Us::s(10));
        assert_eq!(c.faults[0].end, Us::s(12));
        assert_eq!(c.faults[0].target.as_deref(), Some("127.0.0.20:8080"));
        let m = cfg("dual-resolve", Some("max_fails=0"));
        assert!(m.servers.iter().all(|s| s.max_fails == 0));
        let b = cfg("backup", None);
        assert!(b.servers[1].backup && !b.servers[1].resolve);
        assert_eq!(b.faults.len(), 3, "standing faults of every backend");
        assert!(b.faults.iter().all(|f| f.start.0 < 0));
        let a = cfg("aaaa-pollution", None);
        assert!(a.ipv6);
        assert_eq!(a.dns[0].aaaa.len(), 1);
        assert!(!cfg("aaaa-pollution", Some("ipv6=off")).ipv6);
        let s = cfg("retry-shim", None);
        assert_eq!(s.retry_shim, Some(RetryShim::default()));
    }

    #[test]
    fn slow_dependency_maps_onto_pools_probes_and_the_staged_load() {
        let c = cfg("slow-dependency", None);
        assert_eq!(c.arrivals.len(), 99, "2@14s + 80@500ms + 2@15.5s");
        assert!(c.arrivals.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(c.pools.len(), 2);
        let slow = c.pools.iter().find(|p| p.name == "app-slow").unwrap();
        assert_eq!((slow.pool, slow.round_trips), (4, 9));
        assert_eq!(slow.round_trip, Us(200_000 + LOOPBACK_ROUND_TRIP.0));
        assert_eq!(slow.acquire_timeout, Us::s(20));
        assert_eq!(slow.probe.as_ref().unwrap().timeout, Us::s(1));
        let fast = c.pools.iter().find(|p| p.name == "app-fast").unwrap();
        assert_eq!(fast.round_trip, LOOPBACK_ROUND_TRIP);
        // The link's latency is in the round trips, not a fault window nginx would see.
        assert!(c.faults.is_empty(), "{:?}", c.faults);
        assert_eq!(c.names.len(), 3);
        // A fault the link cannot stand for is refused on one line.
        let mut sc = library::get("slow-dependency").unwrap();
        sc.proxies[0].faults = vec!["reset_peer:timeout=0".to_string().try_into().unwrap()];
        let e = sim_config(&sc, 1, (0, 0)).unwrap_err().to_string();
        assert!(
            e.contains("db-link") && e.contains("only models latency"),
            "{e}"
        );
    }

    #[test]
    fn zone_filler_and_per_backend_latency_map() {
        let c = cfg("zone-exhaustion", None);
        let f = c.zone_filler.as_ref().unwrap();
        assert_eq!(
            (f.name.as_str(), f.upstream.as_str()),
            ("filler.test.local", "filler")
        );
        assert_eq!(c.zone_bytes, 32 * 1024);
        // The filler's own timeline: its initial answer and the fill at 3 s.
        let filler: Vec<_> = c.dns.iter().filter(|p| p.name == f.name).collect();
        assert_eq!(filler.len(), 2, "{:?}", c.dns);
        assert_eq!(filler[1].at, Us::s(3));
        // b1 answers in 100 ms, b2 in 1 ms: one distribution each.
        assert_eq!(
            c.backend_latency.get("127.0.0.20:8080"),
            Some(&Latency::Fixed { value: Us::ms(100) })
        );
        assert_eq!(c.backend_latency.len(), 2);
        assert_eq!(cfg("zone-exhaustion", Some("zone=1m")).zone_bytes, 1 << 20);
    }

    #[test]
    fn host_sysctl_maps_onto_the_port_pool_or_is_refused() {
        // Plain loopback reuses TIME_WAIT ports: no limit.
        assert!(cfg("port-exhaustion", None).ephemeral_ports.is_none());
        let c = cfg("port-exhaustion", Some("netns"));
        let p = c.ephemeral_ports.as_ref().unwrap();
        assert_eq!((p.count, p.time_wait), (500, Us::s(60)));
        assert_eq!(c.rps, 300.0);
        let mut sc = library::get("port-exhaustion")
            .unwrap()
            .variant("netns")
            .unwrap();
        sc.host
            .sysctl
            .insert("net.ipv4.tcp_fin_timeout".into(), "30".into());
        let e = format!("{:#}", sim_config(&sc, 1, (0, 0)).unwrap_err());
        assert!(
            e.contains("net.ipv4.tcp_fin_timeout") && !e.contains('\n'),
            "{e}"
        );
        sc.host.sysctl.remove("net.ipv4.tcp_fin_timeout");
        sc.host
            .sysctl
            .insert("net.ipv4.ip_local_port_range".into(), "40000".into());
        let e = format!("{:#}", sim_config(&sc, 1, (0, 0)).unwrap_err());
        assert!(
            e.contains("ip_local_port_range") && e.contains("LOW HIGH"),
            "{e}"
        );
        sc.host
            .sysctl
            .insert("net.ipv4.ip_local_port_range".into(), "40000 40499".into());
        sc.nginx.keepalive = 8;
        let e = format!("{:#}", sim_config(&sc, 1, (0, 0)).unwrap_err());
        assert!(e.contains("keepalive = 8") && !e.contains('\n'), "{e}");
        // tcp_tw_reuse = 2 (Linux's default) reuses ports on loopback: no limit.
        sc.nginx.keepalive = 0;
        sc.host
            .sysctl
            .insert("net.ipv4.tcp_tw_reuse".into(), "2".into());
        assert!(
            sim_config(&sc, 1, (0, 0))
                .unwrap()
                .ephemeral_ports
                .is_none()
        );
    }

    #[test]
    fn aligned_injection_lands_on_a_requery() {
        let c = cfg("nxdomain", None);
        // initial, nxdomain at a re-query after 12 s, revert `for` (3 s) later.
        assert_eq!(c.dns.len(), 3);
        let nx = &c.dns[1];
        assert_eq!(nx.mode.to_string(), "nxdomain");
        assert!(nx.at.0 >= 12_000_000 && nx.at.0 < 18_100_000, "{:?}", nx.at);
        assert_eq!(c.dns[2].at.0 - nx.at.0, 3_000_000);
        let q = query_times(
            &c,
            &[(
                c.dns[0].at.0,
                "app.test.local".into(),
                c.dns[0].spec().parse().unwrap(),
            )],
            "app.test.local",
            30_000_000,
        )
        .unwrap();
        assert!(q.contains(&nx.at.0), "{q:?} vs {:?}", nx.at);
        // Unaligned with valid=30s: the window sits between two re-queries.
        let u = cfg("nxdomain", Some("valid30-unaligned"));
        let q = query_times(
            &u,
            &[(
                u.dns[0].at.0,
                "app.test.local".into(),
                u.dns[0].spec().parse().unwrap(),
            )],
            "app.test.local",
            75_000_000,
        )
        .unwrap();
        let (from, to) = (u.dns[1].at.0, u.dns[2].at.0);
        assert!(q.iter().all(|&t| t < from || t >= to), "{q:?} {from}..{to}");
    }

    #[test]
    fn jitter_follows_the_seed_and_refusals_name_the_field() {
        let sc = library::get("rto").unwrap();
        let a = sim_config(&sc, 1, (0, 0)).unwrap();
        let b = sim_config(&sc, 2, (0, 0)).unwrap();
        assert_ne!(a.faults[0].start, b.faults[0].start);
        assert!(a.faults[0].start.0 >= 10_000_000 && a.faults[0].start.0 < 16_000_000);
        assert_eq!(a.dns.last().unwrap().at, a.faults[0].start);
        let mut bad = library::get("swap-only").unwrap();
        bad.nginx.connect_timeout = Some("1s".parse().unwrap());
        let e = sim_config(&bad, 1, (0, 0)).unwrap_err().to_string();
        assert!(e.contains("nginx.connect_timeout"), "{e}");
        bad.nginx.connect_timeout = None;
        bad.load.rate = "max".to_string().try_into().unwrap();
        let e = sim_config(&bad, 1, (0, 0)).unwrap_err().to_string();
        assert!(e.contains("load.rate"), "{e}");
        // Stages are the lab scheduler's request times.
        bad.load.rate = "100@10s,500@30s".to_string().try_into().unwrap();
        let staged = sim_config(&bad, 1, (0, 0)).unwrap();
        assert_eq!(staged.arrivals.len(), 100 * 10 + 500 * 30);
        assert_eq!(size("z", "64k").unwrap(), 65536);
        assert!(next_upstream(&"error http_502".parse().unwrap()).is_err());
        assert!(next_upstream(&"error timeout non_idempotent".parse().unwrap()).is_ok());
    }
}
