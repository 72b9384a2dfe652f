//! A `[fleet]` on the model: one model nginx per instance, laid out as the lab lays out a
//! fleet's run (`instances/nginx-K/` with each instance's configuration, access and error log;
//! the client's `load.jsonl`, the authority's `dns.jsonl` and the run's `events.jsonl` at the
//! top), so the checker's fleet judge reads a model fleet exactly as it reads a lab one.
//!
//! What makes a fleet a fleet, and how the model plays it:
//! - **phases**: instance `k` starts `stagger` after instance `k − 1` (or when the lab run being
//!   replayed saw it start, [`crate::replay::instance_starts`]) and re-queries on its own phase
//!   from there: each instance's model has its own warm-up before the load;
//! - **the L4 balancer**: the lab's client opens a connection per request and the balancer
//!   sends connections round-robin, so request `i` of the load goes to instance `i mod N`;
//! - **one authority, one timeline**: every instance sees the same DNS phases and backend fault
//!   windows (their times are the run's, not the instance's); a timeline's reload, restart or
//!   test acts on the first instance only, as the lab's runner does;
//! - **independent races**: each instance draws from its own seed
//!   (`resolvelab_sim::nginx::predict::instance_seed`, as `sim predict --instances` does).

use anyhow::{Context, Result, bail};
use resolvelab_core::evidence::file;
use resolvelab_load::record::{JsonlSink, RecordSink};
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use resolvelab_sim::nginx::predict::instance_seed;
use resolvelab_sim::nginx::{DnsPhase, SimConfig, SimSummary, Us, simulate};
use std::collections::BTreeMap;
use std::path::Path;

use crate::fleet::instance_name;
use crate::options::LabInputs;

/// Each instance's warm-up (its start → the load start), in start order, the last one
/// `last`'s; one value for a scenario without a fleet. A replay takes the lab's instances'
/// starts when it has them.
pub(super) fn warmups(sc: &Scenario, lab: Option<&LabInputs>, last: Us) -> Vec<Us> {
    let (Some(f), Some(stagger)) = (&sc.fleet, sc.fleet_stagger()) else {
        return vec![last];
    };
    let n = f.instances as usize;
    let stagger = stagger.as_micros() as i64;
    match lab.map(|l| &l.instance_starts_us) {
        Some(starts) if starts.len() == n => starts.iter().map(|&s| Us(s)).collect(),
        _ => (0..n)
            .map(|k| Us(last.0 + (n - 1 - k) as i64 * stagger))
            .collect(),
    }
}

/// What a fleet's models share: the one-instance model of the scenario, the run's addresses,
/// the phases of the resolvers a GSLB answers in their own order (by instance, from 0), each
/// instance's warm-up, and how the configuration the real nginx would run is written.
pub(super) struct Fleet<'a> {
    pub cfg: &'a SimConfig,
    pub net: &'a Net,
    pub views: BTreeMap<usize, Vec<DnsPhase>>,
    pub warmups: &'a [Us],
    pub conf: &'a dyn Fn(&Net, &Path) -> Result<String>,
}

/// The load's request times (µs from its start), as the model's one-instance run would draw
/// them: the explicit arrivals, else the constant rate's grid.
fn all_arrivals(cfg: &SimConfig) -> Result<Vec<Us>> {
    if !cfg.arrivals.is_empty() {
        return Ok(cfg.arrivals.clone());
    }
    if cfg.poisson {
        bail!("a fleet on the model takes the lab's constant-rate load, not Poisson arrivals");
    }
    let n = (cfg.duration.0 as f64 * cfg.rps / 1e6).floor() as u64;
    let interval = 1e6 / cfg.rps;
    Ok((0..n).map(|k| Us((k as f64 * interval) as i64)).collect())
}

/// Instance `k`'s model: its start, its share of the requests, its seed and listen address;
/// the timeline's nginx actions on the first instance only.
fn instance_cfg(f: &Fleet<'_>, arrivals: &[Us], k: usize) -> Result<SimConfig> {
    let n = f.warmups.len();
    let mut c = f.cfg.clone();
    c.warmup = f.warmups[k];
    c.seed = instance_seed(f.cfg.seed, k as u32);
    c.arrivals = arrivals.iter().skip(k).step_by(n).copied().collect();
    if c.arrivals.is_empty() {
        bail!(
            "the load sends {} requests to {n} instances: instance {} would get none",
            arrivals.len(),
            k + 1
        );
    }
    c.rps = c.arrivals.len() as f64 * 1e6 / c.duration.0 as f64;
    // A resolver the GSLB answers in its own order: its phases replace the name's.
    if let Some(own) = f.views.get(&k) {
        c.dns.retain(|p| own.iter().all(|o| o.name != p.name));
        c.dns.extend(own.iter().cloned());
        c.dns.sort_by_key(|p| p.at);
    }
    c.listen = f.net.instance(k as u32).to_string();
    c.pid = f.cfg.pid + k as u32;
    // The lab's client opens a connection per request to a fleet (crates/lab/src/runner.rs).
    c.keepalive_requests = 1;
    if k > 0 {
        c.reloads.clear();
        c.tests.clear();
        c.restarts.clear();
        c.starts.clear();
    }
    Ok(c)
}

/// Play the fleet into the run directory `dir`; the instances' summaries summed.
pub(super) fn play(f: &Fleet<'_>, dir: &Path) -> Result<SimSummary> {
    let arrivals = all_arrivals(f.cfg)?;
    let mut total = SimSummary {
        seed: f.cfg.seed,
        ..SimSummary::default()
    };
    let mut dirs = Vec::new();
    for k in 0..f.warmups.len() {
        let at = dir.join(file::INSTANCES).join(instance_name(k as u32));
        let c = instance_cfg(f, &arrivals, k)?;
        let s = simulate(&c, &at).with_context(|| format!("instance {}", k + 1))?;
        std::fs::write(
            at.join(file::NGINX_CONF),
            (f.conf)(&f.net.for_instance(k as u32), &at)?,
        )?;
        total.absorb(&s);
        dirs.push(at);
    }
    merge_load(&dirs, &dir.join(file::LOAD))?;
    // Each instance asks on its own view of the authority, as in the lab.
    merge_by_time(
        &dirs,
        file::DNS,
        &dir.join(file::DNS),
        |k, line| match line.strip_suffix('}') {
            Some(open) => format!("{open},\"view\":{}}}", k + 1),
            None => line.to_string(),
        },
    )?;
    merge_events(&dirs, &dir.join(file::EVENTS))?;
    for d in &dirs {
        for f in [file::LOAD, file::DNS, file::EVENTS] {
            let _ = std::fs::remove_file(d.join(f));
        }
    }
    Ok(total)
}

/// The run's events: the injections are the run's, and every instance's model logged them
/// alike, so the first instance's events are the run's — with each fault window's hits (its
/// `fault-off`) summed over the instances, as the lab's backend counts every instance's
/// connections.
fn merge_events(dirs: &[std::path::PathBuf], out: &Path) -> Result<()> {
    let read = |d: &Path| -> Result<(String, Vec<String>)> {
        let path = d.join(file::EVENTS);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut lines = text.lines().map(str::to_string);
        Ok((lines.next().unwrap_or_default(), lines.collect()))
    };
    let off = |line: &str| -> Option<resolvelab_core::evidence::Event> {
        let e: resolvelab_core::evidence::Event = serde_json::from_str(line).ok()?;
        (e.kind == resolvelab_core::evidence::event_kind::FAULT_OFF).then_some(e)
    };
    // Each instance's `fault-off` hits, in the order its model wrote them (the windows' order).
    let mut sums: Vec<u64> = Vec::new();
    for d in dirs {
        let lines = read(d)?.1;
        let hits = lines
            .iter()
            .filter_map(|l| off(l))
            .map(|e| e.hits.unwrap_or(0));
        for (j, h) in hits.enumerate() {
            if sums.len() <= j {
                sums.push(0);
            }
            sums[j] += h;
        }
    }
    let (header, lines) = read(&dirs[0])?;
    let mut text = header + "\n";
    let mut j = 0;
    for line in lines {
        match off(&line) {
            Some(mut e) => {
                e.hits = Some(sums[j]);
                j += 1;
                text.push_str(&serde_json::to_string(&e)?);
            }
            None => text.push_str(&line),
        }
        text.push('\n');
    }
    std::fs::write(out, text).with_context(|| format!("cannot write {}", out.display()))
}

/// The client's view: every instance's requests in one `load.jsonl`, numbered as the load sent
/// them (instance `k`'s `j`-th request was the load's `j·N + k`-th).
fn merge_load(dirs: &[std::path::PathBuf], out: &Path) -> Result<()> {
    let n = dirs.len() as u64;
    let mut header = None;
    let mut all = Vec::new();
    for (k, d) in dirs.iter().enumerate() {
        let f = resolvelab_load::record::read_file(&d.join(file::LOAD))?;
        header.get_or_insert(f.header);
        all.extend(f.records.into_iter().map(|mut r| {
            r.seq = r.seq * n + k as u64;
            r
        }));
    }
    all.sort_by_key(|r| r.seq);
    let Some(header) = header else {
        bail!("a fleet of no instance");
    };
    let mut sink = JsonlSink::create(out, &header)?;
    for r in &all {
        sink.record(r)?;
    }
    sink.flush()?;
    Ok(())
}

/// One JSON Lines file from each instance's `name`, its lines (as written, then passed through
/// `tag` with the instance's index) in `t_us` order, stable, under the first file's schema line.
fn merge_by_time(
    dirs: &[std::path::PathBuf],
    name: &str,
    out: &Path,
    tag: impl Fn(usize, &str) -> String,
) -> Result<()> {
    let mut header = None;
    let mut rows: Vec<(i64, String)> = Vec::new();
    for (k, d) in dirs.iter().enumerate() {
        let path = d.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        header.get_or_insert_with(|| first.to_string());
        for (n, line) in lines.enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).with_context(|| {
                format!("{}:{}: the model wrote a bad line", path.display(), n + 2)
            })?;
            let t = v
                .get("t_us")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0);
            rows.push((t, tag(k, line)));
        }
    }
    rows.sort_by_key(|r| r.0);
    let mut text = header.map(|h| h + "\n").unwrap_or_default();
    for (_, line) in &rows {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(out, text).with_context(|| format!("cannot write {}", out.display()))
}
