//! The runner: play a scenario against a real nginx on loopback and leave the evidence in a run
//! directory (DESIGN.md: scenario.toml, fingerprint.json, nginx.conf, access.log, error.log,
//! dns.jsonl, events.jsonl, load.jsonl, run.json). Judging the evidence is the checker's job
//! (`resolvelab-diagnose`); the binary calls it after [`run`].

use crate::fleet::Proxies;
use crate::lifecycle::Lifecycle;
use crate::options::{RunOptions, RunRecord, RunStatus};
use crate::proxy::{Control, ProxyBin, Started};
use anyhow::{Context, Result, anyhow, bail};
use resolvelab_core::evidence::event_kind;
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_core::rundir::RunDir;
use resolvelab_core::spec::dns::{Align, DnsSetting, HostRef};
use resolvelab_core::spec::engine::EngineId;
use resolvelab_core::spec::fault::Fault;
use resolvelab_core::supervise::Supervisor;
use resolvelab_core::time::now_us;
use resolvelab_dns::{DnsConfig, DnsHandle, DnsServer, NameConfig};
use resolvelab_load::{CancellationToken, Live, LoadConfig, Output, run_load};
use resolvelab_scenario::Plan;
use resolvelab_scenario::format::{Route, Scenario, Specs};
use resolvelab_scenario::net::Net;
use resolvelab_scenario::timeline::{Action, Step};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Set by Ctrl-C / SIGTERM handlers (installed by the binary) to stop a run early; the run then
/// still leaves a valid directory marked `aborted`. The one flag of the process
/// (`core::supervise`), which `watch` reads too.
pub use resolvelab_core::supervise::INTERRUPTED;

/// Play `plan` on `bin` (the binary of engine `engine`) and return where its evidence is.
/// Errors before the run directory exists are returned; errors after it are recorded in
/// `run.json` as `failed` and returned as well.
pub fn run(plan: &Plan, opts: &RunOptions, engine: EngineId, bin: &ProxyBin) -> Result<RunRecord> {
    let (sc, seed) = (&plan.scenario, plan.seed);
    bin.refuse(sc)?;
    let lease = match opts.net {
        Some(ab) => NetLease::given(ab),
        None => NetLease::pick(),
    };
    let (a, b) = lease.prefix;
    let net = Net::assign(sc, a, b)?;
    let mut run = Lifecycle::begin(sc, opts, engine, (a, b), net.nginx.to_string(), seed)?;
    if let Err(e) = check_free_space(sc, &run.dir.path) {
        return Err(run.fail(e));
    }
    // Before the runtime: its threads and nginx inherit this thread's namespace.
    let netns = if sc.host.netns {
        let g = match crate::netns::enter(&sc.host.sysctl) {
            Ok(g) => g,
            Err(e) => return Err(run.fail(e)),
        };
        run.record.net = run.record.net.clone().in_namespace(&sc.host.sysctl);
        run.save()?;
        Some(g)
    } else {
        None
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(play(plan, &net, bin, &run.dir, opts, &mut run.record));
    rt.shutdown_timeout(Duration::from_secs(5));
    drop(netns);
    let (status, reason) = match &result {
        Ok(()) if INTERRUPTED.load(Ordering::SeqCst) => (
            RunStatus::Aborted,
            Some("interrupted (Ctrl-C / SIGTERM / SIGHUP)".into()),
        ),
        Ok(()) => (RunStatus::Completed, None),
        Err(e) => (RunStatus::Failed, Some(format!("{e:#}"))),
    };
    let fingerprint = resolvelab_core::rundir::Fingerprint {
        binary_sha256: Some(bin.sha256()),
        ..(run.dir).fingerprint(
            seed,
            run.record.started_us,
            engine.as_str(),
            bin.version_text(),
        )
    };
    let record = run.end(status, reason, &fingerprint)?;
    result.map(|()| record)
}

/// The loopback /24 a run plays on, held for the run's life: no two runs of this process share
/// one (tests play two at a time), and one whose DNS or nginx address another process holds
/// is passed over.
struct NetLease {
    prefix: (u8, u8),
    held: bool,
}

/// Prefixes held by this process's runs.
static HELD: std::sync::Mutex<std::collections::BTreeSet<(u8, u8)>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

impl NetLease {
    /// The prefix the caller chose (`RunOptions::net`), as it is.
    fn given(prefix: (u8, u8)) -> NetLease {
        NetLease {
            prefix,
            held: false,
        }
    }

    /// A prefix no run of this process holds and whose addresses are free now (20 tries; a
    /// machine where every one is taken gets the last, and its run says which bind failed).
    fn pick() -> NetLease {
        let mut prefix = candidate();
        for _ in 0..20 {
            if addresses_free(prefix) {
                let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
                if held.insert(prefix) {
                    return NetLease { prefix, held: true };
                }
            }
            prefix = candidate();
        }
        NetLease::given(prefix)
    }
}

impl Drop for NetLease {
    fn drop(&mut self) {
        if self.held {
            HELD.lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.prefix);
        }
    }
}

/// A loopback /24 drawn from the time, the process and a counter (two draws in one
/// microsecond differ).
fn candidate() -> (u8, u8) {
    static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let x = (now_us() as u64) ^ ((std::process::id() as u64) << 20) ^ (n << 44);
    let x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (100 + ((x >> 32) % 100) as u8, ((x >> 8) % 250) as u8 + 1)
}

/// Whether the prefix's DNS authority (UDP .53, ports 53 and 5353) and nginx (TCP .1:8080)
/// addresses can be bound now.
fn addresses_free((a, b): (u8, u8)) -> bool {
    let ip = |h| std::net::Ipv4Addr::new(127, a, b, h);
    std::net::UdpSocket::bind((ip(53), 5353)).is_ok()
        && std::net::TcpListener::bind((ip(1), 8080)).is_ok()
}

/// Anything faults can be injected into: a backend or a TCP proxy.
enum FaultTarget {
    Backend(resolvelab_backend::BackendHandle),
    Proxy(resolvelab_proxy::ProxyHandle),
}

impl FaultTarget {
    fn add(&self, fault: &Fault) -> Result<String> {
        match (self, fault) {
            (FaultTarget::Backend(b), Fault::Backend(f)) => b.add_fault(f.clone()),
            (FaultTarget::Proxy(p), Fault::Proxy(t)) => p.add_fault(t.clone()),
            // The timeline reads a spec for its target's kind: only a mistake here gets this.
            _ => Err(anyhow!(
                "a backend's fault for a proxy, or a proxy's for a backend"
            )),
        }
    }
    fn clear(&self) {
        match self {
            FaultTarget::Backend(b) => b.clear_faults(),
            FaultTarget::Proxy(p) => p.clear_faults(),
        }
    }
    fn hits(&self) -> Vec<(String, u64)> {
        match self {
            FaultTarget::Backend(b) => b.fault_hits(),
            FaultTarget::Proxy(p) => p.fault_hits(),
        }
    }
    async fn shutdown(self) {
        match self {
            FaultTarget::Backend(b) => b.shutdown().await,
            FaultTarget::Proxy(p) => p.shutdown().await,
        }
    }
}

fn ev(
    log: &JsonlWriter,
    kind: &str,
    target: &str,
    spec: Option<&str>,
    hits: Option<u64>,
    note: Option<&str>,
) {
    let _ = log.write(&resolvelab_core::evidence::Event {
        spec: spec.map(str::to_string),
        hits,
        note: note.map(str::to_string),
        ..resolvelab_core::evidence::Event::new(now_us(), kind, target)
    });
}

async fn play(
    plan: &Plan,
    net: &Net,
    bin: &ProxyBin,
    dir: &RunDir,
    opts: &RunOptions,
    record: &mut RunRecord,
) -> Result<()> {
    let (sc, specs, seed) = (&plan.scenario, &plan.specs, plan.seed);
    let events = Arc::new(JsonlWriter::create(
        &dir.file(resolvelab_core::evidence::file::EVENTS),
        resolvelab_core::evidence::schema::EVENTS,
    )?);
    let say = |msg: &str| {
        if opts.progress {
            resolvelab_core::progress::line(format!("[{}] {msg}", sc.name));
        }
    };

    let (dns, first_queries) = start_dns(sc, specs, net, seed, dir).await?;
    let dns = Arc::new(dns);

    let tls = run_ca(sc, net, dir)?;
    let (targets, echo_dbs) = start_targets(sc, specs, net, seed, dir, tls.as_ref()).await?;

    // The proxy.
    let sup = Arc::new(Supervisor::new()?);
    let nx = Proxies::start(bin, sc, net, dir, &sup, &say).await?;
    let listen = net.nginx;
    ev(&events, "phase", bin.kind(), None, None, Some("listening"));
    say(&format!(
        "{} listening on {listen}; run directory {}",
        bin.short(),
        dir.path.display()
    ));

    await_first_queries(sc, bin, dir, first_queries).await?;
    ev(
        &events,
        "phase",
        "dns",
        None,
        None,
        Some("first answers given"),
    );

    record_start_faults(&targets, &events);

    // Load + timeline.
    let cfg = load_config(sc, specs, net, seed)?;
    let live = Live::new();
    let cancel = CancellationToken::new();
    let total = cfg.duration.unwrap_or_default();
    record.load_start_us = now_us();
    ev(&events, "phase", "load", None, None, Some("start"));
    say(&format!(
        "load {} rps for {}",
        sc.load.rate,
        resolvelab_core::dur::format(total)
    ));

    let t0 = Instant::now();
    let targets = Arc::new(targets);
    let next = Arc::new(std::sync::Mutex::new(String::new()));
    let timeline = tokio::spawn(run_timeline(
        plan.steps.clone(),
        bin.requery_period(sc)?,
        dns.clone(),
        targets.clone(),
        net.clone(),
        events.clone(),
        t0,
        cancel.clone(),
        next.clone(),
        nx.first().control(),
        nx.first().tester(),
    ));
    let probers = spawn_probers(sc, net, dir, t0, &cancel)?;
    let gslbs: Vec<_> = (sc.dns.gslb.iter())
        .map(|(name, g)| {
            let (name, g, net) = (name.clone(), g.clone(), net.clone());
            tokio::spawn(crate::gslb::run(
                name,
                g,
                net,
                (dns.clone(), events.clone()),
                t0,
                cancel.clone(),
            ))
        })
        .collect();
    let engine_watches = watch_all(&nx, dir, &events, t0, &cancel);
    let watcher = tokio::spawn(watch(
        live.clone(),
        cancel.clone(),
        t0,
        total,
        opts.progress,
        sc.name.clone(),
        next,
    ));
    let summary = run_load(
        &cfg,
        Output::File(dir.file(resolvelab_core::evidence::file::LOAD)),
        live.clone(),
        cancel.clone(),
    )
    .await;
    cancel.cancel();
    let _ = watcher.await;
    let mut engine_fault = None;
    for w in engine_watches {
        engine_fault = engine_fault.or(w.await.unwrap_or(None));
    }
    for p in probers {
        p.await.map_err(|e| anyhow!("probe task: {e}"))??;
    }
    for g in gslbs {
        g.await.map_err(|e| anyhow!("gslb task: {e}"))??;
    }
    let timeline_result = timeline.await.map_err(|e| anyhow!("timeline task: {e}"))?;
    ev(&events, "phase", "load", None, None, Some("end"));
    if INTERRUPTED.load(Ordering::SeqCst) {
        ev(
            &events,
            "aborted",
            "run",
            None,
            None,
            Some("interrupted (Ctrl-C / SIGTERM / SIGHUP)"),
        );
    }

    final_hits(&dns, sc, &targets, &events, record);

    // The backends' own counters (DB pool waits and timeouts) next to the client's view.
    let stats: BTreeMap<&String, resolvelab_backend::BackendStats> = targets
        .iter()
        .filter_map(|(n, t)| match t {
            FaultTarget::Backend(b) => Some((n, b.stats())),
            FaultTarget::Proxy(_) => None,
        })
        .collect();
    dir.write_json(resolvelab_core::evidence::file::BACKENDS, &stats)?;

    shut_down(nx, sup, dir, targets, echo_dbs, dns).await?;
    let summary = summary?;
    record.requests = summary.requests;
    timeline_result?;
    if let Some(fault) = engine_fault {
        bail!("{fault}: the run did not happen as written (see events.jsonl)");
    }
    say(&format!(
        "done: {} requests; evidence in {}",
        summary.requests,
        dir.path.display()
    ));
    Ok(())
}

/// One [`watch_run`] per proxy (a fleet's every instance): each ends with the first fault it saw.
fn watch_all(
    nx: &Proxies,
    dir: &RunDir,
    events: &Arc<JsonlWriter>,
    t0: Instant,
    cancel: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<Option<String>>> {
    nx.watched()
        .into_iter()
        .map(|control| {
            tokio::spawn(watch_run(
                control,
                dir.path.clone(),
                events.clone(),
                t0,
                cancel.clone(),
            ))
        })
        .collect()
}

/// Faults configured from the start are injections too: record them so their hits count.
fn record_start_faults(targets: &BTreeMap<String, FaultTarget>, events: &JsonlWriter) {
    for (name, t) in targets {
        for (fname, _) in t.hits() {
            ev(
                events,
                "fault-on",
                name,
                Some(&fname),
                None,
                Some("from start"),
            );
        }
    }
}

/// The readiness probes of `[[probe]]`, each writing into `probes.jsonl` until `cancel`.
fn spawn_probers(
    sc: &Scenario,
    net: &Net,
    dir: &RunDir,
    t0: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<tokio::task::JoinHandle<Result<u64>>>> {
    let mut probers = Vec::new();
    if !sc.probes.is_empty() {
        let out = Arc::new(JsonlWriter::create(
            &dir.file(resolvelab_core::evidence::file::PROBES),
            crate::probe::SCHEMA,
        )?);
        for p in &sc.probes {
            probers.push(tokio::spawn(crate::probe::run(
                p.clone(),
                net.hosts[&p.target],
                out.clone(),
                tokio::time::Instant::from_std(t0),
                cancel.clone(),
            )));
        }
    }
    Ok(probers)
}

/// The run's DNS authority, and a subscription to its queries (the first ones are awaited).
async fn start_dns(
    sc: &Scenario,
    specs: &Specs,
    net: &Net,
    seed: u64,
    dir: &RunDir,
) -> Result<(
    DnsHandle,
    tokio::sync::broadcast::Receiver<resolvelab_dns::QueryEvent>,
)> {
    let mut names = Vec::new();
    for (name, setting) in &specs.dns {
        let setting = net
            .resolve(setting)
            .map_err(|e| anyhow!("[dns.names] {name}: {e}"))?;
        names.push(NameConfig::new(name, setting).map_err(|e| anyhow!("[dns.names] {name}: {e}"))?);
    }
    let ttl = sc.dns.ttl.get().as_secs().max(1) as u32;
    // A fleet's instances each ask on a resolver address of their own (a view).
    let views = (0..sc.fleet.as_ref().map_or(0, |f| f.instances))
        .map(|k| net.instance_dns(k))
        .collect();
    let dns = DnsServer::start(DnsConfig {
        listen: net.dns,
        names,
        ttl,
        seed,
        log: Some(dir.file(resolvelab_core::evidence::file::DNS)),
        views,
        ..DnsConfig::default()
    })
    .await
    .context("starting the DNS authority")?;
    crate::gslb::serve_views(&dns, sc, net)?;
    let first_queries = dns.subscribe();
    Ok((dns, first_queries))
}

/// DB stand-ins, then proxies (which point at backends), then the backends that use them
/// (their pools connect lazily, but their addresses must exist).
async fn start_targets(
    sc: &Scenario,
    specs: &Specs,
    net: &Net,
    seed: u64,
    dir: &RunDir,
    tls: Option<&resolvelab_backend::tls::RunCa>,
) -> Result<(
    BTreeMap<String, FaultTarget>,
    Vec<resolvelab_backend::EchoDb>,
)> {
    let mut targets: BTreeMap<String, FaultTarget> = BTreeMap::new();
    let mut echo_dbs = Vec::new();
    for be in sc.backends.iter().filter(|b| b.echo_db) {
        let addr = net.hosts[&be.name];
        echo_dbs.push(
            resolvelab_backend::EchoDb::start(addr)
                .await
                .with_context(|| format!("starting echo DB `{}` on {addr}", be.name))?,
        );
    }
    for p in &sc.proxies {
        let mut cfg =
            resolvelab_proxy::ProxyConfig::new(&p.name, net.hosts[&p.name], net.hosts[&p.upstream]);
        cfg.faults
            .extend(specs.proxies[&p.name].iter().map(|f| f.value.clone()));
        let h = resolvelab_proxy::Proxy::start(cfg).await?;
        targets.insert(p.name.clone(), FaultTarget::Proxy(h));
    }
    for be in sc.backends.iter().filter(|b| !b.echo_db) {
        let handle = start_backend(be, &specs.backends[&be.name], net, seed, dir, tls).await?;
        targets.insert(be.name.clone(), FaultTarget::Backend(handle));
    }
    Ok((targets, echo_dbs))
}

/// A resolve upstream is empty until its first answer: wait for the proxy's first query of
/// every resolve name, then a little for the answer to be applied.
async fn await_first_queries(
    sc: &Scenario,
    bin: &ProxyBin,
    dir: &RunDir,
    mut first_queries: tokio::sync::broadcast::Receiver<resolvelab_dns::QueryEvent>,
) -> Result<()> {
    let resolve_names: Vec<String> = match &sc.nginx.inline {
        // An inline config names its own upstreams: wait for the served names its `server …
        // resolve` lines mention (a name resolved at start was asked before nginx listened, and a
        // variable `proxy_pass` asks inside the first request).
        Some(text) => sc
            .dns
            .names
            .keys()
            .filter(|n| {
                text.lines().any(|l| {
                    let w: Vec<&str> = l.split(|c: char| c.is_whitespace() || c == ';').collect();
                    w.contains(&"server") && w.contains(&"resolve") && l.contains(n.as_str())
                })
            })
            .map(|n| n.to_lowercase())
            .collect(),
        // A name in proxy_pass is resolved at start or per request, and a proxy that looks names
        // up inside requests (Caddy) asks first when the load begins: no query to wait for.
        None if sc.nginx.route != Route::Upstream || bin.looks_up_in_requests() => Vec::new(),
        None => sc
            .nginx
            .servers
            .iter()
            .filter(|s| s.resolve && !s.host.starts_with('@'))
            .map(|s| s.host.as_str())
            .chain(sc.nginx.zone_filler.as_deref())
            .map(str::to_lowercase)
            .collect(),
    };
    let mut seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while seen.len()
        < resolve_names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    {
        match tokio::time::timeout_at(deadline, first_queries.recv()).await {
            Ok(Ok(q)) => {
                if resolve_names.contains(&q.qname) {
                    seen.insert(q.qname.clone());
                }
            }
            Ok(Err(_)) => continue,
            Err(_) => bail!(
                "{} never queried the DNS authority for {:?} within 15 s (see {})",
                bin.short(),
                resolve_names,
                dir.file(bin.log_file()).display()
            ),
        }
    }
    drop(first_queries);
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

/// The lab's load: the scenario's `[load]` against the proxy's listen address.
fn load_config(sc: &Scenario, specs: &Specs, net: &Net, seed: u64) -> Result<LoadConfig> {
    let listen = net.nginx;
    let mut cfg = LoadConfig::new(
        &format!("http://{listen}{}", sc.load.path),
        specs.rate.clone(),
        false,
    )?;
    cfg.duration = Some(sc.load.duration.get());
    cfg.connections = sc.load.connections as usize;
    cfg.timeout = sc.load.timeout.get();
    cfg.mix =
        resolvelab_load::Mix::from_shares(&sc.load.mix).map_err(|e| anyhow!("load.mix: {e}"))?;
    cfg.retry_idempotent = sc.load.retry_idempotent;
    cfg.header_capture = Some("x-backend".parse()?);
    cfg.seed = seed;
    // One keep-alive pool, as the lab's evidence was gathered and as the simulator models it.
    cfg.lanes = Some(1);
    // A fleet's balancer spreads connections, not requests: one client's keep-alive pool would
    // reuse one connection, one instance. A connection per request stands for the many clients
    // behind a production balancer.
    if sc.fleet.is_some() {
        cfg.keepalive = false;
    }
    if let Some(m) = sc.load.max_in_flight {
        cfg.max_in_flight = m as usize;
    }
    Ok(cfg)
}

/// Final hit counters of every injection, into `events.jsonl` and the run record.
fn final_hits(
    dns: &DnsHandle,
    sc: &Scenario,
    targets: &BTreeMap<String, FaultTarget>,
    events: &JsonlWriter,
    record: &mut RunRecord,
) {
    if let Some(h) = dns_hits(dns, sc) {
        for (name, hits) in h {
            record.hits.insert(format!("dns:{name}"), hits);
        }
    }
    for (name, t) in targets.iter() {
        for (fname, hits) in t.hits() {
            ev(
                events,
                "fault-off",
                name,
                Some(&fname),
                Some(hits),
                Some("end of run"),
            );
            record.hits.insert(format!("fault:{name}:{fname}"), hits);
        }
    }
}

/// Stop the proxy first (it owns connections to the backends), then the rest.
async fn shut_down(
    nx: Proxies,
    sup: Arc<Supervisor>,
    dir: &RunDir,
    targets: Arc<BTreeMap<String, FaultTarget>>,
    echo_dbs: Vec<resolvelab_backend::EchoDb>,
    dns: Arc<DnsHandle>,
) -> Result<()> {
    nx.stop(dir).await?;
    drop(sup);
    let targets = Arc::try_unwrap(targets).map_err(|_| anyhow!("fault targets still in use"))?;
    for (_, t) in targets {
        t.shutdown().await;
    }
    for db in echo_dbs {
        db.shutdown();
    }
    // The timeline's bookkeeping tasks end on `cancel`; give them a moment to drop their handles.
    let mut dns = dns;
    for _ in 0..200 {
        match Arc::try_unwrap(dns) {
            Ok(d) => {
                d.shutdown().await?;
                break;
            }
            Err(still_shared) => {
                dns = still_shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    Ok(())
}

fn dns_hits(dns: &DnsHandle, sc: &Scenario) -> Option<Vec<(String, u64)>> {
    let injected: std::collections::BTreeSet<&String> =
        sc.timeline.iter().filter_map(|e| e.dns.as_ref()).collect();
    if injected.is_empty() {
        return None;
    }
    Some(
        injected
            .into_iter()
            .map(|n| (n.clone(), dns.hits_for(n).unwrap_or(0)))
            .collect(),
    )
}

async fn start_backend(
    be: &resolvelab_scenario::format::BackendSpec,
    specs: &resolvelab_scenario::format::BackendSpecs,
    net: &Net,
    seed: u64,
    dir: &RunDir,
    tls: Option<&resolvelab_backend::tls::RunCa>,
) -> Result<resolvelab_backend::BackendHandle> {
    let mut cfg = resolvelab_backend::BackendConfig::new(&be.name, net.hosts[&be.name]);
    cfg.seed = seed ^ fxhash(&be.name);
    cfg.tls = be.tls.as_ref().and(tls).map(|ca| ca.server_config());
    if let Some(l) = &specs.latency {
        cfg.latency = l.value.clone();
    }
    cfg.faults
        .extend(specs.faults.iter().map(|f| f.value.clone()));
    if let Some(db) = &be.db {
        cfg.db = Some(resolvelab_backend::DbConfig {
            addr: net.hosts[db],
            round_trips: be.round_trips.unwrap_or(1),
            pool: be.pool.unwrap_or(10) as usize,
            acquire_timeout: (be.acquire_timeout.as_ref())
                .map_or(Duration::from_secs(30), resolvelab_core::dur::Dur::get),
        });
    }
    cfg.log = Some(dir.file(&format!("backend-{}.jsonl", be.name)));
    resolvelab_backend::Backend::start(cfg)
        .await
        .with_context(|| format!("starting backend `{}` on {}", be.name, net.hosts[&be.name]))
}

/// The run's certificate authority when a backend speaks TLS, its certificate written into the
/// run directory ([`crate::render::TLS_CA_FILE`]) for the proxy to trust. The leaf covers every
/// name the authority serves, the backends' `tls.names` and every address of the run.
fn run_ca(
    sc: &Scenario,
    net: &Net,
    dir: &RunDir,
) -> Result<Option<resolvelab_backend::tls::RunCa>> {
    if sc.backends.iter().all(|b| b.tls.is_none()) {
        return Ok(None);
    }
    let mut names: Vec<String> = sc.dns.names.keys().cloned().collect();
    names.extend(
        sc.backends
            .iter()
            .filter_map(|b| b.tls.as_ref())
            .flat_map(|t| t.names.clone()),
    );
    names.sort();
    names.dedup();
    let mut ips: Vec<std::net::IpAddr> = net.hosts.values().map(|a| a.ip()).collect();
    ips.sort();
    ips.dedup();
    let ca = resolvelab_backend::tls::RunCa::new(&names, &ips)?;
    std::fs::write(dir.file(crate::render::TLS_CA_FILE), ca.ca_pem())?;
    Ok(Some(ca))
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
    })
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `Z` …), None when the process is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S …`: the command may hold spaces and parentheses; the state follows the last `)`.
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The worker processes of an nginx master (its children).
fn children(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Refuse a run the disk cannot hold: ~1 KiB of evidence per planned request (load.jsonl,
/// access.log, a share of error.log) plus a fixed 16 MiB, checked before anything starts.
fn check_free_space(sc: &Scenario, dir: &Path) -> Result<()> {
    let requests = sc
        .planned_requests()
        .map_err(anyhow::Error::msg)?
        .unwrap_or(1_000_000);
    let need = requests * 1024 + (16 << 20);
    let free = resolvelab_core::rundir::free_bytes(dir)
        .with_context(|| format!("cannot read the free space of {}", dir.display()))?;
    if free < need {
        bail!(
            "not enough free space under {}: {} MiB free, the run needs about {} MiB ({requests} requests); free space or use --out elsewhere",
            dir.display(),
            free >> 20,
            need >> 20
        );
    }
    Ok(())
}

/// Below this much free space under the run directory the run stops: the evidence would be
/// cut mid-line.
const MIN_FREE: u64 = 1 << 20;

/// Watch the run while the load plays. The nginx master exiting, its worker set changing (a
/// worker died and was respawned; the workers a timeline reload replaces excepted), or the run
/// directory's disk filling up is recorded in events.jsonl with its time, stops the load, and
/// makes the run `failed` — its evidence no longer shows the run the scenario describes. A
/// master the timeline restarted is followed to its successor; while a start failed, there is
/// no master to watch.
async fn watch_run(
    control: Control,
    dir: PathBuf,
    events: Arc<JsonlWriter>,
    t0: Instant,
    cancel: CancellationToken,
) -> Option<String> {
    let mut restarts = control.restarts();
    let mut master = control.master();
    let mut workers = children(master);
    // Workers a reload replaces: their going is the reload, not a crash.
    let mut retiring: Vec<u32> = Vec::new();
    let mut seen_reloads = control.reloads();
    let mut fault = None;
    let stop = |what: String, kind: &str| {
        ev(&events, kind, "run", None, None, Some(&what));
        cancel.cancel();
        Some(what)
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = cancel.cancelled() => return fault,
        }
        let at = t0.elapsed().as_secs_f64();
        if let Ok(free) = resolvelab_core::rundir::free_bytes(&dir)
            && free < MIN_FREE
        {
            return stop(
                format!(
                    "disk full at +{at:.1} s: {free} bytes left under {}; free space and run again",
                    dir.display()
                ),
                "disk-full",
            );
        }
        if control.restarts() != restarts || master == 0 {
            // Restarted on purpose (or down after a start that failed): a new master to follow.
            restarts = control.restarts();
            master = control.master();
            workers = children(master);
            retiring.clear();
            continue;
        }
        if !matches!(proc_state(master), Some(c) if c != 'Z' && c != 'X') {
            if control.restarts() != restarts {
                continue;
            }
            return stop(
                format!("nginx master (pid {master}) exited mid-run at +{at:.1} s"),
                "engine-died",
            );
        }
        let now = children(master);
        // Workers still starting only add pids; a pid that goes is a worker that died.
        if now.is_empty() {
            // Unreadable (no CONFIG_PROC_CHILDREN): only the master is watched.
            continue;
        }
        if control.reloads() != seen_reloads {
            seen_reloads = control.reloads();
            retiring.extend(&workers);
        }
        if fault.is_none()
            && workers
                .iter()
                .any(|w| !now.contains(w) && !retiring.contains(w))
        {
            let what = format!(
                "nginx's workers changed mid-run at +{at:.1} s ({workers:?} → {now:?}): a worker died and was respawned"
            );
            fault = stop(what, "engine-restarted");
        } else if fault.is_none() {
            workers = now;
        }
    }
}

async fn watch(
    live: Arc<Live>,
    cancel: CancellationToken,
    t0: Instant,
    total: Duration,
    show: bool,
    name: String,
    next: Arc<std::sync::Mutex<String>>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_sent = 0u64;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            cancel.cancel();
            break;
        }
        if show {
            let s = live.snapshot();
            let rps = s.sent.saturating_sub(last_sent);
            last_sent = s.sent;
            let next = next.lock().unwrap_or_else(|p| p.into_inner()).clone();
            resolvelab_core::progress::status(format!(
                "[{name}] load {:>4.0}/{:.0} s  {rps:>5} rps  2xx {}  5xx {}  errors {}  {next}",
                t0.elapsed().as_secs_f64(),
                total.as_secs_f64(),
                s.classes.c2xx,
                s.classes.c5xx,
                s.classes.errors,
            ));
        }
    }
    if show {
        resolvelab_core::progress::end_status();
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_timeline(
    steps: Vec<Step>,
    period: Duration,
    dns: Arc<DnsHandle>,
    targets: Arc<BTreeMap<String, FaultTarget>>,
    net: Net,
    events: Arc<JsonlWriter>,
    t0: Instant,
    cancel: CancellationToken,
    next: Arc<std::sync::Mutex<String>>,
    nginx: Control,
    tester: Option<resolvelab_nginx::instance::Tester>,
) -> Result<()> {
    let set_next = |text: String| *next.lock().unwrap_or_else(|p| p.into_inner()) = text;
    let last_query = last_queries(&dns, &cancel);
    let act = Act {
        dns: dns.clone(),
        targets,
        net,
        events,
        cancel: cancel.clone(),
        nginx,
        tester,
        period,
    };
    for step in &steps {
        let aligned = if step.align.is_some() {
            " (aligned)"
        } else {
            ""
        };
        set_next(format!(
            "next: {} at {:.0} s{aligned}",
            step.action.describe(),
            step.at.as_secs_f64()
        ));
        let mut when = t0 + step.at;
        if let (Some(Align::BetweenQueries), Action::Dns { name, .. }) = (step.align, &step.action)
        {
            // Place the window in the middle of a gap between two re-queries, so that no
            // re-query falls inside it.
            sleep_until(when, &cancel).await;
            let last = last_query
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&name.to_lowercase())
                .copied();
            if let Some(last) = last {
                let slack = period.saturating_sub(step.window.unwrap_or_default()) / 2;
                let mut start = last + slack;
                while start < Instant::now() {
                    start += period;
                }
                when = start;
            }
        }
        if !sleep_until(when, &cancel).await {
            return Ok(());
        }
        act.apply(step)?;
    }
    set_next("timeline done".into());
    Ok(())
}

/// The last query time per name, kept up to date from the DNS authority until `cancel`.
fn last_queries(dns: &DnsHandle, cancel: &CancellationToken) -> LastQueries {
    let last_query: LastQueries = Default::default();
    let mut rx = dns.subscribe();
    let lq = last_query.clone();
    let cancel = cancel.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                q = rx.recv() => match q {
                    Ok(q) => { lq.lock().unwrap_or_else(|p| p.into_inner()).insert(q.qname.clone(), Instant::now()); }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => break,
                }
            }
        }
    });
    last_query
}

/// When each name was last asked, read live from the DNS authority.
type LastQueries = Arc<std::sync::Mutex<BTreeMap<String, Instant>>>;

/// What the timeline acts on: the DNS authority, the fault targets, the proxy under test.
struct Act {
    dns: Arc<DnsHandle>,
    targets: Arc<BTreeMap<String, FaultTarget>>,
    net: Net,
    events: Arc<JsonlWriter>,
    cancel: CancellationToken,
    nginx: Control,
    tester: Option<resolvelab_nginx::instance::Tester>,
    period: Duration,
}

impl Act {
    /// Carry out one timeline step.
    fn apply(&self, step: &Step) -> Result<()> {
        let for_ = step.window;
        let note = step.note.as_deref();
        let target = |t: &str| {
            (self.targets.get(t)).ok_or_else(|| anyhow!("{}: no target `{t}`", step.field("")))
        };
        match &step.action {
            Action::Dns { name, setting, .. } => self.set_mode(step, name, setting)?,
            Action::Fault {
                target: t, fault, ..
            } => {
                let fname = target(t)?
                    .add(&fault.clone().lasting(for_))
                    .map_err(|err| anyhow!("{}: {err:#}", step.field("")))?;
                ev(&self.events, "fault-on", t, Some(&fname), None, note);
            }
            Action::Reload => {
                self.save_state();
                self.nginx
                    .reload()
                    .map_err(|err| anyhow!("{}: {err:#}", step.field("")))?;
                ev(&self.events, "nginx-reload", "nginx", None, None, note);
            }
            Action::Test => {
                let t = (self.tester.as_ref())
                    .ok_or_else(|| anyhow!("{}: `nginx -t` tests nginx only", step.field("")))?;
                let (spec, said) = match tokio::task::block_in_place(|| t.test()) {
                    Ok(()) => ("ok", "a start now would succeed".to_string()),
                    Err(why) => ("refused", why),
                };
                ev(
                    &self.events,
                    event_kind::NGINX_TEST,
                    "nginx",
                    Some(spec),
                    None,
                    Some(&said),
                );
            }
            Action::Restart | Action::Start => self.start(step)?,
            Action::Clear { target: t } => {
                let target = target(t)?;
                for (fname, hits) in target.hits() {
                    let f = Some(fname.as_str());
                    ev(&self.events, "fault-off", t, f, Some(hits), Some("cleared"));
                }
                target.clear();
            }
        }
        Ok(())
    }

    /// The proxy's state saved before a reload or restart, when the scenario keeps it: a
    /// `server-state` event, `saved` with what, or `failed` with why (the step goes on).
    fn save_state(&self) {
        let Some(saved) = tokio::task::block_in_place(|| self.nginx.save_state()) else {
            return;
        };
        let (spec, note) = match saved {
            Ok(what) => ("saved", what),
            Err(e) => ("failed", format!("{e:#}")),
        };
        ev(
            &self.events,
            event_kind::SERVER_STATE,
            self.nginx.proc().name(),
            Some(spec),
            None,
            Some(&note),
        );
    }

    /// `nginx = "restart"` (stop, then start) or `"start"`: the start's outcome is an
    /// `nginx-start` event, `ok` or `refused` with the proxy's words (it stays down then).
    fn start(&self, step: &Step) -> Result<()> {
        let p = self.nginx.proc();
        let restart = step.action == Action::Restart;
        let started = tokio::task::block_in_place(|| {
            if restart {
                self.save_state();
                ev(
                    &self.events,
                    event_kind::NGINX_RESTART,
                    "nginx",
                    None,
                    None,
                    step.note.as_deref(),
                );
                p.restart()
            } else {
                p.start()
            }
        })
        .map_err(|err| anyhow!("{}: {err:#}", step.field("")))?;
        let (spec, said) = match started {
            Started::Listening => ("ok", "listening".to_string()),
            Started::Refused(words) => ("refused", words),
            Started::Running => ("ok", "was running".to_string()),
        };
        let note = match (&step.note, restart) {
            (Some(n), false) => format!("{n}: {said}"),
            _ => said,
        };
        ev(
            &self.events,
            event_kind::NGINX_START,
            "nginx",
            Some(spec),
            None,
            Some(&note),
        );
        Ok(())
    }

    /// A DNS step: set the mode (armed for the next query when aligned), and record the
    /// injection's hits once its window is certainly over.
    fn set_mode(&self, step: &Step, name: &str, setting: &DnsSetting<HostRef>) -> Result<()> {
        let m = self
            .net
            .resolve(setting)
            .map_err(|err| anyhow!("{}: {err}", step.field(&format!("mode `{setting}`"))))?
            .mode;
        let mode_text = m.to_string();
        let align = step.align == Some(Align::NextQuery);
        let before = self.dns.hits_for(name).unwrap_or(0);
        self.dns
            .set_mode(name, m, step.window, align)
            .map_err(|err| anyhow!("{}: {err}", step.field("")))?;
        let note = if align {
            "armed: takes effect at the proxy's next query"
        } else {
            "now"
        };
        ev(
            &self.events,
            "dns-mode",
            name,
            Some(&mode_text),
            None,
            Some(note),
        );
        let Some(len) = step.window else {
            return Ok(());
        };
        let dns = self.dns.clone();
        let events = self.events.clone();
        let name = name.to_string();
        let wait = len + if align { self.period } else { Duration::ZERO };
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancel.cancelled() => {}
            }
            let hits = dns.hits_for(&name).unwrap_or(0).saturating_sub(before);
            ev(
                &events,
                "dns-mode-end",
                &name,
                Some(&mode_text),
                Some(hits),
                None,
            );
        });
        Ok(())
    }
}

/// Sleep until `when` unless cancelled; false when cancelled.
async fn sleep_until(when: Instant, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(when)) => true,
        _ = cancel.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_at_once_never_share_a_prefix_and_a_finished_run_frees_its_own() {
        let leases: Vec<NetLease> = (0..50).map(|_| NetLease::pick()).collect();
        let prefixes: std::collections::BTreeSet<(u8, u8)> =
            leases.iter().map(|l| l.prefix).collect();
        assert_eq!(prefixes.len(), 50);
        assert!(leases.iter().all(|l| l.held));
        let first = leases[0].prefix;
        drop(leases);
        assert!(!HELD.lock().unwrap().contains(&first));
        // A prefix whose nginx address another socket holds is passed over.
        let (a, b) = candidate();
        let _busy = std::net::TcpListener::bind((std::net::Ipv4Addr::new(127, a, b, 1), 8080));
        assert!(!addresses_free((a, b)));
    }
}
