//! `analyze`: the verdict of a lab run directory (DESIGN.md "A run directory").

use crate::checker::{Options, diagnose_with_history};
use crate::expect;
use crate::verdict::*;
use resolvelab_core::evidence::Expectations;
use resolvelab_core::evidence::load::ErrorKind;
use resolvelab_core::evidence::run::{Run, RunStatus, VerdictStatus};
use resolvelab_history::logformat::{self, LogFormat};
use resolvelab_history::ours;
use std::path::{Path, PathBuf};

/// Files of one kind in a run directory: `NAME`, plus rotations `NAME.1`, `NAME.2.gz`, … .
pub(crate) fn with_rotations(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n == name
                || n.strip_prefix(name).is_some_and(|r| {
                    r.starts_with('.')
                        && r[1..]
                            .split('.')
                            .next()
                            .is_some_and(|x| x.parse::<u32>().is_ok() || x == "gz")
                })
            {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The access-log format of a run: the format its nginx.conf's `access_log` names (else
/// `log_format lab`), else the lab format.
pub fn run_log_format(dir: &Path) -> anyhow::Result<LogFormat> {
    let conf = dir.join(resolvelab_core::evidence::file::NGINX_CONF);
    let Ok(text) = std::fs::read_to_string(&conf) else {
        return Ok(LogFormat::lab());
    };
    let origin = conf.display().to_string();
    let Ok(cfg) = resolvelab_lint::load::load_text(&origin, text, None) else {
        return Ok(LogFormat::lab());
    };
    let formats = resolvelab_lint::log_formats(&cfg);
    match format_text(&formats, None, "lab") {
        Ok((name, t)) => LogFormat::compile(name, t).map_err(|e| anyhow::anyhow!("{origin}: {e}")),
        Err(_) => Ok(LogFormat::lab()),
    }
}

/// The access-log format a configuration gives: `log_format name`, else the format its first
/// `access_log` names, else `default`; nginx's predefined `combined` needs no definition.
pub fn config_log_format(
    formats: &resolvelab_lint::LogFormats,
    name: Option<&str>,
    default: &str,
) -> anyhow::Result<LogFormat> {
    let (name, text) = format_text(formats, name, default)?;
    LogFormat::compile(name, text)
}

/// The name and text of the format [`config_log_format`] picks.
fn format_text<'a>(
    formats: &'a resolvelab_lint::LogFormats,
    name: Option<&'a str>,
    default: &'a str,
) -> anyhow::Result<(&'a str, &'a str)> {
    let name = name
        .or(formats.used.first().map(String::as_str))
        .unwrap_or(default);
    let text = match formats.get(name) {
        Some(t) => t,
        None if name == "combined" => logformat::COMBINED,
        None => {
            let names = formats.names();
            anyhow::bail!(
                "no `log_format {name}` in the configuration (found: {}); pass --log-format-name with one of those",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        }
    };
    Ok((name, text))
}

/// The checker's diagnosis of a run directory's logs alone: its own `log_format`, its DNS log
/// and events when present, times in UTC; no expectations, no configuration facts. Two run
/// directories (a lab run and its replay on the model) are compared through this, so neither
/// gets evidence the other lacks.
pub fn diagnose_run_dir(dir: &Path) -> anyhow::Result<Diagnosis> {
    use resolvelab_core::evidence::file;
    let access = dir.join(file::ACCESS_LOG);
    if !access.is_file() {
        anyhow::bail!(
            "{} has no access.log: give a run directory (from `resolvelab run` or `sim nginx --out`)",
            dir.display()
        );
    }
    // A third-party proxy's run has no nginx error log.
    let error: Vec<_> = Some(dir.join(file::ERROR_LOG))
        .filter(|e| e.is_file())
        .into_iter()
        .collect();
    let mut o = Options::new(vec![access], error);
    o.log_format = run_log_format(dir)?;
    o.tz_offset_s = Some(0);
    for (f, v) in [(file::DNS, &mut o.dns), (file::EVENTS, &mut o.events)] {
        if dir.join(f).is_file() {
            v.push(dir.join(f));
        }
    }
    crate::diagnose(&o).map_err(|e| anyhow::anyhow!("diagnosing {}: {e:#}", dir.display()))
}

/// The checker's diagnosis of a run directory as production would give it: the access and
/// error logs, the configuration and the nginx version, but no DNS answer history and none of
/// the lab's events — what a user without `resolvelab dns watch` is told about the same
/// failures. Its classes may be less certain than the run's own verdict, never different in
/// kind (tests/without_dns.rs checks that on the lab fixtures).
pub fn diagnose_without_dns(dir: &Path) -> anyhow::Result<Diagnosis> {
    let opts = production_options(dir)?;
    crate::diagnose(&opts).map_err(|e| anyhow::anyhow!("diagnosing {}: {e:#}", dir.display()))
}

/// What production would give the checker of a run directory ([`diagnose_without_dns`]): the
/// access and error logs (with their rotations), the run's `log_format`, its clock, its nginx
/// version and configuration facts.
pub fn production_options(dir: &Path) -> anyhow::Result<Options> {
    use resolvelab_core::evidence::file;
    let access = with_rotations(dir, file::ACCESS_LOG);
    if access.is_empty() {
        anyhow::bail!("{} has no access.log", dir.display());
    }
    Ok(Options {
        access,
        error: with_rotations(dir, file::ERROR_LOG),
        mixed: Vec::new(),
        dns: Vec::new(),
        events: Vec::new(),
        log_format: run_log_format(dir)?,
        upstream: None,
        tz_offset_s: fingerprint_offset(dir),
        nginx_version: fingerprint_version(dir),
        config: run_config_facts(dir),
        range: None,
    })
}

/// Analyze a run directory: diagnosis, scenario expectations, injection hit counters, status.
pub fn analyze_run(dir: &Path) -> anyhow::Result<Verdict> {
    analyze_run_by(dir, None)
}

/// [`analyze_run`], judging the run by `checks` instead of its own (`expect.json`) when given:
/// an earlier run of a scenario whose expectations have changed since, judged by today's.
pub fn analyze_run_by(dir: &Path, checks: Option<&[String]>) -> anyhow::Result<Verdict> {
    if !dir.is_dir() {
        anyhow::bail!(
            "{} is not a run directory (expected runs/<scenario>-<stamp>/)",
            dir.display()
        );
    }
    let expect = Expectations::read(dir)?.unwrap_or_default();
    let scenario = (!expect.scenario.is_empty()).then(|| expect.scenario.clone());
    let checks = checks.map_or_else(|| expect.checks.clone(), <[String]>::to_vec);
    if dir
        .join(resolvelab_core::evidence::file::INSTANCES)
        .is_dir()
    {
        return crate::fleet::judge::analyze(dir, &expect, scenario, &checks);
    }
    let access = with_rotations(dir, resolvelab_core::evidence::file::ACCESS_LOG);
    let opts = Options {
        access: access.clone(),
        error: with_rotations(dir, resolvelab_core::evidence::file::ERROR_LOG),
        mixed: Vec::new(),
        dns: with_rotations(dir, resolvelab_core::evidence::file::DNS),
        events: with_rotations(dir, resolvelab_core::evidence::file::EVENTS),
        log_format: run_log_format(dir)?,
        upstream: None,
        tz_offset_s: fingerprint_offset(dir),
        nginx_version: fingerprint_version(dir),
        config: run_config_facts(dir),
        range: None,
    };
    let (diagnosis, events) = if access.is_empty() {
        let d = empty_diagnosis(&opts);
        let mut ev = Vec::new();
        for (i, p) in opts.events.iter().enumerate() {
            ev.extend(ours::read_events(p, i as u32)?.0);
        }
        (d, ev)
    } else {
        let (d, h) = diagnose_with_history(&opts)?;
        (d, h.events.clone())
    };

    let (injections, mut aborted) = injections(&events, opts.events.first(), &expect);
    aborted |= judged_aborted(dir);
    let client = read_client(dir)?;
    let expectations = evaluate(&checks, &diagnosis, client.as_ref(), None);
    let (status, summary) = run_status(dir, aborted, access.is_empty(), &injections, &expectations);
    let mut diagnosis = diagnosis;
    // One `status` in the verdict JSON: the run's.
    diagnosis.status = None;
    Ok(Verdict {
        verdict_schema: VERDICT_SCHEMA.to_string(),
        scenario,
        status,
        summary,
        injections,
        expectations,
        client,
        fleet: None,
        diagnosis,
    })
}

/// The injections of a run's events (every event with a `hits` counter but `fault-on` and
/// `phase`) and whether an event says the run was aborted.
pub(crate) fn injections(
    events: &[resolvelab_history::ours::EventRecord],
    events_file: Option<&PathBuf>,
    expect: &Expectations,
) -> (Vec<Injection>, bool) {
    let mut injections = Vec::new();
    let mut aborted = false;
    for e in events {
        if matches!(e.kind.as_str(), "aborted" | "abort" | "interrupted") {
            aborted = true;
        }
        if let Some(hits) = e.hits
            && e.kind != "fault-on"
            && e.kind != "phase"
        {
            injections.push(Injection {
                kind: e.kind.clone(),
                target: e.target.clone(),
                spec: e.spec.clone(),
                hits,
                expect_miss: e.expect_miss || meant_to_miss(expect, e),
                may_miss: e.target.as_deref().is_some_and(|t| expect.may_miss(t)),
                at: format!(
                    "{}:{}",
                    events_file
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    e.line
                ),
            });
        }
    }
    (injections, aborted)
}

/// A previous verdict of the run said `aborted` (an interrupted run stays interrupted).
pub(crate) fn judged_aborted(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(resolvelab_core::evidence::file::VERDICT_JSON))
        .ok()
        .and_then(|prev| serde_json::from_str::<serde_json::Value>(&prev).ok())
        .is_some_and(|v| v.get("status").and_then(|s| s.as_str()) == Some("aborted"))
}

/// Each check evaluated on the diagnosis (and the client's view, and a fleet's report and
/// instances); one that does not parse does not hold, and says why.
pub(crate) fn evaluate(
    checks: &[String],
    diagnosis: &Diagnosis,
    client: Option<&crate::verdict::ClientStats>,
    fleet: Option<&expect::FleetRun>,
) -> Vec<Expectation> {
    checks
        .iter()
        .map(|text| match expect::parse(text) {
            Ok(c) => {
                let (held, measured) = expect::eval_in(&c, diagnosis, client, fleet);
                Expectation {
                    text: text.clone(),
                    held,
                    measured,
                }
            }
            Err(e) => Expectation {
                text: text.clone(),
                held: false,
                measured: format!("cannot parse: {e}"),
            },
        })
        .collect()
}

/// The run's status and one-line summary: its own record first (a run that did not happen as
/// written is never `completed`), then interruption, missing evidence, injections that missed
/// (or hit when meant to miss), and only then the expectations.
pub(crate) fn run_status(
    dir: &Path,
    aborted: bool,
    no_access: bool,
    injections: &[Injection],
    expectations: &[Expectation],
) -> (VerdictStatus, String) {
    let missed: Vec<&Injection> = injections
        .iter()
        .filter(|i| i.hits == 0 && !i.expect_miss && !i.may_miss)
        .collect();
    // An injection placed to miss nginx (e.g. NXDOMAIN between re-queries) that hit anyway
    // means the run did not test what it meant to.
    let spoiled: Vec<&Injection> = injections
        .iter()
        .filter(|i| i.hits > 0 && i.expect_miss && !i.may_miss)
        .collect();
    let intended: Vec<&Injection> = injections
        .iter()
        .filter(|i| i.hits == 0 && i.expect_miss)
        .collect();
    let name = |i: &&Injection| {
        format!(
            "{} {}",
            i.target.as_deref().unwrap_or("?"),
            i.spec.as_deref().unwrap_or("")
        )
        .trim_end()
        .to_string()
    };
    let record = run_record(dir);
    if let Some((st, reason)) = record.as_ref().filter(|r| r.0 != RunStatus::Completed) {
        // The run's own integrity comes first: evidence of a run that did not happen as
        // written is never judged `completed`.
        match st {
            RunStatus::Running => (
                VerdictStatus::Aborted,
                "the run did not finish: run.json says `running` or cannot be read (killed, hung up, out of disk, or still going): partial evidence".to_string(),
            ),
            RunStatus::Failed => (
                VerdictStatus::Failed,
                format!(
                    "the run failed: {}",
                    reason.as_deref().unwrap_or("no reason recorded")
                ),
            ),
            other => (
                VerdictStatus::Aborted,
                format!(
                    "the run was {other}: {}: partial evidence",
                    reason.as_deref().unwrap_or("no reason recorded")
                ),
            ),
        }
    } else if aborted {
        (
            VerdictStatus::Aborted,
            "the run was interrupted: partial evidence".to_string(),
        )
    } else if no_access {
        (
            VerdictStatus::Incomplete,
            "no access.log in the run directory".to_string(),
        )
    } else if !missed.is_empty() {
        (
            VerdictStatus::NotInterpretable,
            format!(
                "injection did not hit — not interpretable ({})",
                missed.iter().map(name).collect::<Vec<_>>().join("; ")
            ),
        )
    } else if !spoiled.is_empty() {
        (
            VerdictStatus::NotInterpretable,
            format!(
                "injection meant to miss hit — not interpretable ({})",
                spoiled
                    .iter()
                    .map(|i| format!("{} hit {} time(s)", name(i), i.hits))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    } else {
        let held = expectations.iter().filter(|e| e.held).count();
        let mut s = format!("{held}/{} expectations held", expectations.len());
        if !intended.is_empty() {
            s += &format!(
                "; missed as intended: {}",
                intended.iter().map(name).collect::<Vec<_>>().join("; ")
            );
        }
        (VerdictStatus::Completed, s)
    }
}

/// The run's own record, `run.json` (written by the runner at start, after setup, and at the
/// end): its status and reason. None for directories without one (older fixtures, production);
/// one that cannot be read says the run never ended.
fn run_record(dir: &Path) -> Option<(RunStatus, Option<String>)> {
    if !dir.join(resolvelab_core::evidence::file::RUN).is_file() {
        return None;
    }
    Some(match Run::read(dir) {
        Ok(r) => (r.status, r.reason),
        Err(_) => (RunStatus::Running, None),
    })
}

/// The nginx version the run used (`nginx_v` of fingerprint.json; none for the simulator).
pub(crate) fn fingerprint_version(dir: &Path) -> Option<resolvelab_core::version::Version> {
    let text =
        std::fs::read_to_string(dir.join(resolvelab_core::evidence::file::FINGERPRINT)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    resolvelab_core::version::Version::from_nginx_v(v.get("nginx_v")?.as_str()?)
}

/// What the run's nginx.conf resolves at run time (none when it has no readable config).
pub(crate) fn run_config_facts(dir: &Path) -> Option<crate::evidence::RuntimeFacts> {
    let conf = dir.join(resolvelab_core::evidence::file::NGINX_CONF);
    let cfg = resolvelab_lint::load::load_path(&conf, Some(dir)).ok()?;
    Some(resolvelab_lint::runtime_facts(
        &cfg,
        &conf.display().to_string(),
    ))
}

/// The host's UTC offset recorded in `fingerprint.json` (`utc_offset: "+09:00"` or
/// `utc_offset_s: 32400`, at the top level or under `host`). Lab access logs have no
/// `$time_local`, so this is what joins the error log when the run is analyzed elsewhere.
pub(crate) fn fingerprint_offset(dir: &Path) -> Option<i32> {
    let text =
        std::fs::read_to_string(dir.join(resolvelab_core::evidence::file::FINGERPRINT)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    for o in [Some(&v), v.get("host")].into_iter().flatten() {
        if let Some(s) = o.get("utc_offset").and_then(|x| x.as_str())
            && let Some(off) = resolvelab_history::time::parse_offset(s)
        {
            return Some(off);
        }
        if let Some(n) = o.get("utc_offset_s").and_then(|x| x.as_i64()) {
            return Some(n as i32);
        }
    }
    None
}

/// Whether the event is one of the injections the scenario meant to miss.
fn meant_to_miss(expect: &Expectations, e: &resolvelab_history::ours::EventRecord) -> bool {
    e.target
        .as_deref()
        .is_some_and(|t| expect.is_meant_to_miss(t, e.spec.as_deref()))
}

/// Bins of the per-backend latency series: fine enough to show a burst's staircase, coarser for
/// long runs so the verdict stays small.
const FINE_BIN_MS: i64 = 100;
const MAX_BINS: usize = 1500;

/// `(requests, slowest ms)` per bin start, for one backend.
type Bins = std::collections::BTreeMap<i64, (u64, f64)>;

fn add_to_bin(bins: &mut Bins, t_ms: i64, requests: u64, max_ms: f64) {
    let b = bins.entry(t_ms).or_insert((0, 0.0));
    b.0 += requests;
    b.1 = b.1.max(max_ms);
}

/// Requests the load generator saw fail (status ≥ 500 or a transport error) in a run
/// directory's `load.jsonl`, `None` without one: what reached the clients, whether or not the
/// proxy logged it.
pub fn client_errors(dir: &Path) -> anyhow::Result<Option<u64>> {
    Ok(read_client(dir)?.map(|c| c.errors))
}

pub(crate) fn read_client(dir: &Path) -> anyhow::Result<Option<ClientStats>> {
    let files = with_rotations(dir, resolvelab_core::evidence::file::LOAD);
    if files.is_empty() {
        return Ok(None);
    }
    let mut c = ClientStats::default();
    let mut latency: std::collections::BTreeMap<String, (hdrhistogram::Histogram<u64>, Bins)> =
        Default::default();
    for p in &files {
        ours::for_each_load(p, |r| {
            // `late`/`dropped` records were never sent: the load generator's own failure to
            // keep its schedule (a CPU-starved run), not an answer from nginx.
            if r.sent_us.is_none()
                && r.status.is_none()
                && matches!(r.error, Some(ErrorKind::Late | ErrorKind::Dropped))
            {
                c.unsent += 1;
                return;
            }
            c.requests += 1;
            let key = match (r.status, &r.error) {
                (_, Some(_)) | (None, _) => "error".to_string(),
                (Some(s), None) => s.to_string(),
            };
            let failed = key == "error" || r.status.is_some_and(|s| s >= 500);
            if failed {
                c.errors += 1;
            }
            *c.status.entry(key).or_insert(0) += 1;
            if let (Some(be), Some(lat), Some(_)) = (&r.header, r.latency_us, r.status) {
                let b = c.backends.entry(be.clone()).or_default();
                b.requests += 1;
                b.errors += failed as u64;
                let (h, bins) = latency.entry(be.clone()).or_insert_with(|| {
                    // 1 µs .. 1 h: `new(3)` would start at 2 µs and saturate there.
                    let h = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)
                        .expect("valid bounds");
                    (h, Bins::new())
                });
                h.saturating_record(lat.max(0) as u64);
                let bin = r.t_us.div_euclid(FINE_BIN_MS * 1000) * FINE_BIN_MS;
                add_to_bin(bins, bin, 1, lat as f64 / 1000.0);
            }
        })?;
    }
    for (be, (h, mut bins)) in latency {
        let b = c.backends.entry(be).or_default();
        b.bin_ms = FINE_BIN_MS;
        if bins.len() > MAX_BINS {
            let mut coarse = Bins::new();
            for (t, (n, max)) in bins {
                add_to_bin(&mut coarse, t.div_euclid(1000) * 1000, n, max);
            }
            bins = coarse;
            b.bin_ms = 1000;
        }
        b.bins = bins
            .into_iter()
            .map(|(t_ms, (requests, max_ms))| BackendBin {
                t_ms,
                requests,
                max_ms,
            })
            .collect();
        let ms = |us: u64| us as f64 / 1000.0;
        b.min_ms = ms(h.min());
        b.p50_ms = ms(h.value_at_quantile(0.5));
        b.p90_ms = ms(h.value_at_quantile(0.9));
        b.p99_ms = ms(h.value_at_quantile(0.99));
        b.max_ms = ms(h.max());
    }
    if let Ok(text) = std::fs::read_to_string(dir.join(resolvelab_core::evidence::file::BACKENDS)) {
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}",
                dir.join(resolvelab_core::evidence::file::BACKENDS)
                    .display()
            )
        })?;
        for (name, st) in v.as_object().into_iter().flatten() {
            let pool = &st["pool"];
            if pool.is_object() {
                let b = c.backends.entry(name.clone()).or_default();
                let ms = |k: &str| pool[k].as_f64().map(|us| us / 1000.0);
                b.pool_wait_max_ms = ms("wait_us_max");
                b.pool_wait_p99_ms = ms("wait_us_p99");
                b.pool_timeouts = pool["timeouts"].as_u64();
            }
        }
    }
    for p in with_rotations(dir, resolvelab_core::evidence::file::PROBES) {
        ours::for_each_line(&p, "probes", |_, v| {
            let target = v["target"].as_str().ok_or("no `target`")?;
            let s = c.probes.entry(target.to_string()).or_default();
            s.probes += 1;
            if v["ok"].as_bool() == Some(true) {
                s.ok += 1;
            } else {
                s.failed += 1;
                s.timeouts += (v["error"].as_str() == Some("timeout")) as u64;
            }
            let ms = v["latency_us"].as_f64().unwrap_or(0.0) / 1000.0;
            s.max_ms = s.max_ms.max(ms);
            Ok(())
        })?;
    }
    Ok(Some(c))
}

pub(crate) fn empty_diagnosis(o: &Options) -> Diagnosis {
    Diagnosis {
        schema: SCHEMA.to_string(),
        inputs: InputsInfo {
            log_format: o.log_format.text.clone(),
            ..Default::default()
        },
        range: o.range,
        read_ms: None,
        start_ms: None,
        end_ms: None,
        status: None,
        requests: 0,
        http_status: Default::default(),
        upstream_requests: Default::default(),
        failures: 0,
        nlu: Default::default(),
        passes: Default::default(),
        swaps: 0,
        swap_source: "none".into(),
        swap_directions: Default::default(),
        nlu_by_swap_direction: Default::default(),
        swap_list: Vec::new(),
        requery_period_ms: None,
        requery_source: "none".into(),
        swap_follow: None,
        incidents: Vec::new(),
        classes: Vec::new(),
        signatures: Vec::new(),
        nlu_events: Vec::new(),
        nlu_events_truncated: false,
        timeline: Default::default(),
        parse: Default::default(),
        evidence: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_gives_its_access_logs_format_or_says_which_it_has() {
        let conf = "http {\n  # comment log_format x 'y';\n  log_format main escape=json '$remote_addr [$time_local] '\n     '\"$request\" $status';\n  access_log /var/log/a.log main;\n}";
        let cfg = resolvelab_lint::load::load_text("t.conf", conf.into(), None).unwrap();
        let f = resolvelab_lint::log_formats(&cfg);
        assert_eq!(
            format_text(&f, None, "combined").unwrap(),
            ("main", "$remote_addr [$time_local] \"$request\" $status")
        );
        assert_eq!(
            format_text(&f, Some("combined"), "x").unwrap().1,
            logformat::COMBINED
        );
        let e = config_log_format(&f, Some("nope"), "combined")
            .unwrap_err()
            .to_string();
        assert!(e.contains("found: main"), "{e}");
    }
}
