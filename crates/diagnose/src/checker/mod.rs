//! The checker: stream the access logs once, pair failures with error-log lines, find swaps,
//! cluster failures into incidents and classify each one (DOMAIN.md §3–§4).
//!
//! The stages, one module each, in the order [`diagnose_with_stats`] runs them:
//!
//! | stage | module | yields |
//! |---|---|---|
//! | access pass | [`access`] | per-key 100 ms counts, timeline, success segments, the clock; each failure handed to pairing |
//! | pairing | [`pairing`] (+ [`errors`]) | while the access pass runs: each failure's own error lines, then its 48-byte record ([`failure`]); every error line's signature |
//! | groups | [`groups`] | each key's upstream group, per-group counts |
//! | peer-list changes | [`swaps`] | swaps, NXDOMAIN changes, the re-query period |
//! | classes, incidents | [`incidents`] (+ `crate::classify`) | each failure's class, the incidents |
//! | totals | [`totals`] (+ [`refusal`]) | NLU counts, class and signature summaries (after a refused configuration: serving on, or down) |
//!
//! The stages after the pairing read only what the pass kept (`conclude`), so the same
//! checker also runs fed from memory: [`incremental::Incremental`] keeps the pass across
//! chunks of lines and concludes on a copy of its state at any moment.

mod access;
mod errors;
mod failure;
mod follow;
mod groups;
mod incidents;
pub mod incremental;
mod pairing;
mod refusal;
mod stale;
mod swaps;
pub mod tally;
mod totals;

pub use errors::MAX_BUFFERED;
pub(crate) use follow::MAX_LISTED as MAX_MOVES_LISTED;
pub(crate) use incidents::{CLUSTER_GAP_MS, MAX_ZOOMS};
pub(crate) use totals::{MAX_NLU_EVENTS, class_summaries, judged};

/// The error log's UTC offset (seconds east) as a diagnosis takes it: the access log's
/// `$time_local` offset (`seen`), else `--tz-offset` (`flag`), else the machine's offset at
/// `at_ms` (epoch ms; none: the epoch). Error-log times are local and carry none.
pub fn error_log_offset_s(seen: Option<i32>, flag: Option<i32>, at_ms: Option<i64>) -> i32 {
    access::Clock::of(seen, flag, at_ms).offset_s
}

use crate::evidence::{self, Observability, Present, Race, RuntimeFacts};
use crate::verdict::*;
use resolvelab_history::logformat::{Field, LogFormat};
use resolvelab_history::{History, Sources, time};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What to diagnose.
#[derive(Debug, Clone)]
pub struct Options {
    /// Access logs.
    pub access: Vec<PathBuf>,
    /// Error logs.
    pub error: Vec<PathBuf>,
    /// Mixed streams (access, error and other lines in one file: `kubectl logs`, `docker
    /// compose logs`, journald).
    pub mixed: Vec<PathBuf>,
    /// `dns.jsonl` files.
    pub dns: Vec<PathBuf>,
    /// `events.jsonl` files.
    pub events: Vec<PathBuf>,
    /// The access-log format.
    pub log_format: LogFormat,
    /// Only this upstream group's failures.
    pub upstream: Option<String>,
    /// The error log's UTC offset when `$time_local` is not in the access log (seconds east).
    pub tz_offset_s: Option<i32>,
    /// The nginx version, when known: below 1.27.3 no generation race is possible.
    pub nginx_version: Option<resolvelab_core::version::Version>,
    /// What the configuration resolves at run time, when it was read.
    pub config: Option<RuntimeFacts>,
    /// The time the diagnosis speaks for ([`TimeRange`]); the lines outside it are context.
    pub range: Option<TimeRange>,
}

impl Options {
    /// Options for access + error logs in the `combined` format.
    pub fn new(access: Vec<PathBuf>, error: Vec<PathBuf>) -> Options {
        Options {
            access,
            error,
            mixed: Vec::new(),
            dns: Vec::new(),
            events: Vec::new(),
            log_format: LogFormat::combined(),
            upstream: None,
            tz_offset_s: None,
            nginx_version: None,
            config: None,
            range: None,
        }
    }
}

/// The first and last time the inputs hold (access lines, DNS answers, events): how far the
/// logs given to a time slice reach around it.
fn read_span(acc: &access::AccessPass, hist: &History) -> Option<(i64, i64)> {
    let times = (acc.requests > 0)
        .then_some([acc.first_ms, acc.last_ms])
        .into_iter()
        .flatten()
        .chain(hist.dns.iter().map(|q| q.t_us / 1000))
        .chain(hist.events.iter().map(|e| e.t_us / 1000));
    let (lo, hi) = times.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    (lo <= hi).then_some((lo, hi))
}

/// Requests by upstream group and status class, from the access pass's counts per key.
fn upstream_requests(
    acc: &access::AccessPass,
    groups: &groups::Groups,
) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (k, by_class) in acc.key_status.iter().enumerate() {
        let g = groups.key_group.get(k).unwrap_or(&groups.default_group);
        for (c, &n) in by_class.iter().enumerate().filter(|(_, n)| **n > 0) {
            *out.entry(g.clone())
                .or_default()
                .entry(access::STATUS_CLASSES[c].to_string())
                .or_default() += n;
        }
    }
    out
}

/// Swaps listed one by one (the count covers all).
pub(crate) const MAX_SWAPS_LISTED: usize = 1000;

/// Memory accounting of the streamed error-log pass (what a test or a benchmark asserts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Error lines read (every file, merged).
    pub error_lines: u64,
    /// Lines that came after a later line of their file (several workers share a file).
    pub late_lines: u64,
    /// The most error lines buffered at once for pairing.
    pub max_buffered: usize,
    /// Lines dropped from a full pairing window (over its safety cap).
    pub dropped: u64,
    /// Those in the diagnosis's range, and the failures that may have lost their line.
    pub loss: PairingLoss,
    /// Error lines read a second time to quote them as evidence.
    pub fetched: usize,
}

/// Run the checker; also returns the loaded history (events, DNS) for the lab verdict.
pub fn diagnose_with_history(opts: &Options) -> anyhow::Result<(Diagnosis, History)> {
    diagnose_with_stats(opts).map(|(d, h, _)| (d, h))
}

/// Run the checker.
pub fn diagnose(opts: &Options) -> anyhow::Result<Diagnosis> {
    diagnose_with_history(opts).map(|x| x.0)
}

/// Run the checker; also returns the loaded history and the memory accounting of the streamed
/// error-log pass.
pub fn diagnose_with_stats(opts: &Options) -> anyhow::Result<(Diagnosis, History, StreamStats)> {
    check_inputs(opts)?;
    let hist = History::load(&Sources {
        access: opts.access.clone(),
        error: opts.error.clone(),
        mixed: opts.mixed.clone(),
        dns: opts.dns.clone(),
        events: opts.events.clone(),
    })?;
    let (acc, pairer) = access::read(&hist, &opts.log_format, opts.tz_offset_s, opts.range)?;
    conclude(opts, hist, acc, pairer)
}

/// Everything after the access pass: the stages that read what it kept (groups, swaps,
/// incidents, totals, the cited lines), for a whole history read ([`diagnose_with_stats`]) or
/// for the lines fed so far ([`incremental::Incremental::snapshot`]).
fn conclude(
    opts: &Options,
    hist: History,
    mut acc: access::AccessPass,
    mut pairer: pairing::Pairer,
) -> anyhow::Result<(Diagnosis, History, StreamStats)> {
    let clock = acc.clock.expect("decided by the access pass");
    // Access lines were read (a mixed stream may hold none): else the failures are those the
    // error log shows.
    let access_read = !opts.access.is_empty() || acc.requests > 0;
    if !access_read {
        let mut fs = errors::failures_from_errors(&hist, clock.offset_s, &mut pairer.store)?;
        fs.sort_by_key(|f| f.t_ms);
        for f in fs {
            pairer.push(f);
        }
    }
    let groups = groups::Groups::build(&mut acc, opts.upstream.as_deref());
    let (mut store, errs) = pairer.finish(Some(&hist), clock.offset_s, &acc.trajs)?;
    store.resolve_groups(&groups.default_group, &acc.addr_group);
    let peers = swaps::PeerChanges::find(
        &hist,
        &acc.segs,
        &acc.keys,
        &groups.key_group,
        (acc.first_ms, acc.last_ms),
        &errs.ix,
    );
    if let Some(u) = &opts.upstream {
        store.retain_group(u);
    }
    let read = Read {
        access: access_read,
        error: !opts.error.is_empty() || errs.stats.error_lines > 0,
        seen: acc.seen,
    };
    let (mut observability, race, by_cid) = observe(opts, &peers, read);
    if acc.unknown_addr > 0 {
        observability.missing.push(evidence::Missing {
            what: format!(
                "addresses in `$upstream_addr` ({} requests logged a redacted or non-address token)",
                acc.unknown_addr
            ),
            decides: "those requests' trajectories (which peer failed, 1-hop vs 2-hop, NLU or not): a redaction is never read as an upstream group".into(),
            add: "the log as nginx wrote it, or the addresses replaced consistently (one fake address per real one)".into(),
        });
    }
    if !errs.stats.loss.is_empty() {
        let m = evidence::pairing_missing(&errs.stats.loss);
        observability.missing.push(m);
    }
    if !hist.per_view.is_empty() {
        observability
            .missing
            .push(evidence::per_view_missing(&hist.per_view));
    }
    let cx = incidents::Ctx {
        hist: &hist,
        trajs: &acc.trajs,
        groups: &groups,
        peers: &peers,
        ix: &errs.ix,
        swaps: peers.source,
        race,
        by_cid,
        dns_nx: (0..hist.dns.len())
            .filter(|&i| hist.dns[i].rcode.eq_ignore_ascii_case("NXDOMAIN"))
            .collect(),
        answers: stale::Answers::from_history(&hist),
        first_ok: first_successes(&acc),
        resolved_once: opts.config.as_ref().map(|c| c.resolved_once),
    };
    let mut cites = errors::Cites::default();
    let mut incidents = incidents::build(&mut store, &cx, &mut cites);
    // An incident is the range's where it starts, whole: classed with all it read.
    incidents.retain(|i| TimeRange::holds(opts.range, i.start_ms));
    incidents::number_and_zoom(&mut incidents, &groups);
    let swap_follow = follow::measure(
        &cx.answers,
        &acc.tried,
        &acc.keys,
        (acc.first_ms, acc.last_ms),
        opts.range,
    );
    let nlu = totals::nlu_totals(&store, &peers, &hist, &mut acc.passes, opts.range);
    let timeline = acc.timeline.series();
    let mut signatures = totals::summarize_signatures(
        &hist,
        &errs.ix,
        &mut cites,
        &nlu.times,
        &nlu.caused,
        &timeline,
        opts.range,
    );
    // Evidence text of the cited lines: read again, only those lines.
    let stream_stats = StreamStats {
        fetched: cites.fill(
            &hist,
            &opts.log_format,
            &mut incidents,
            &mut signatures,
            &acc.files,
        )?,
        ..errs.stats
    };
    let swaps_in: Vec<&Swap> = peers
        .swaps
        .iter()
        .filter(|s| TimeRange::holds(opts.range, s.t_ms))
        .collect();
    let mut files = std::mem::take(&mut acc.files);
    files.extend(errs.files);
    files.extend(hist.stats.iter().cloned());
    let d = Diagnosis {
        schema: SCHEMA.to_string(),
        inputs: inputs_info(opts, &clock, &errs.offset_changes),
        range: opts.range,
        read_ms: opts.range.and(read_span(&acc, &hist)),
        start_ms: acc.counted.span().map(|s| s.0),
        end_ms: acc.counted.span().map(|s| s.1),
        status: Some(if files.iter().any(|f| f.error.is_some()) {
            DiagnosisStatus::Partial
        } else {
            DiagnosisStatus::Completed
        }),
        requests: acc.counted.requests,
        http_status: acc
            .statuses()
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        upstream_requests: upstream_requests(&acc, &groups),
        failures: nlu.client_failures,
        nlu: nlu.nlu,
        passes: acc.passes.clone(),
        swaps: swaps_in.len() as u64,
        swap_source: peers.source.id().to_string(),
        swap_directions: swap_directions(&swaps_in),
        nlu_by_swap_direction: nlu.by_swap_direction,
        swap_list: swaps_in
            .iter()
            .take(MAX_SWAPS_LISTED)
            .map(|s| (*s).clone())
            .collect(),
        requery_period_ms: peers.requery.map(|p| (p * 10.0).round() / 10.0),
        requery_source: peers.requery_source.to_string(),
        swap_follow,
        classes: totals::class_summaries(&incidents, race),
        incidents,
        signatures,
        nlu_events_truncated: !nlu.complete,
        nlu_events: nlu.events,
        timeline,
        parse: ParseInfo {
            malformed: files.iter().map(|f| f.malformed).sum(),
            files,
            pairing_loss: (!errs.stats.loss.is_empty()).then_some(errs.stats.loss),
        },
        evidence: observability,
    };
    Ok((d, hist, stream_stats))
}

/// Refuse what cannot be diagnosed before reading anything.
fn check_inputs(opts: &Options) -> anyhow::Result<()> {
    if opts.access.is_empty() && opts.error.is_empty() && opts.mixed.is_empty() {
        anyhow::bail!(
            "no log given: pass --access FILE and --error FILE (several allowed, .gz ok), or --logs FILE for a mixed stream; an error log alone also works"
        );
    }
    for p in opts
        .access
        .iter()
        .chain(&opts.error)
        .chain(&opts.mixed)
        .chain(&opts.dns)
        .chain(&opts.events)
    {
        if p.is_dir() {
            anyhow::bail!(
                "{} is a directory: pass the log files themselves (e.g. {}/access.log)",
                p.display(),
                p.display()
            );
        }
    }
    let fmt = &opts.log_format;
    let reads_access = !opts.access.is_empty() || !opts.mixed.is_empty();
    if reads_access
        && fmt.fields_known()
        && !fmt.has(Field::Msec)
        && !fmt.has(Field::TimeLocal)
        && !fmt.has(Field::TimeIso8601)
    {
        anyhow::bail!(
            "log_format `{}` has no $msec, $time_local or $time_iso8601, so requests cannot be placed in time; add $msec to the format",
            fmt.text
        );
    }
    Ok(())
}

/// What the inputs can show, whether this nginx can race, and whether pairing was by `*cid`.
/// What was read, where the options alone cannot say (mixed streams, a bare `json` format).
struct Read {
    access: bool,
    error: bool,
    /// The fields the access lines held (`1 << Field`).
    seen: u32,
}

/// Each address's first success in the access log (ms), from its success segments.
fn first_successes(acc: &access::AccessPass) -> std::collections::HashMap<String, i64> {
    let mut first = std::collections::HashMap::new();
    for s in &acc.segs {
        if let Some(name) = acc.keys.names.get(s.key as usize) {
            let t = first.entry(name.clone()).or_insert(s.start);
            *t = (*t).min(s.start);
        }
    }
    first
}

fn observe(opts: &Options, peers: &swaps::PeerChanges, read: Read) -> (Observability, Race, bool) {
    let seen = read.seen;
    let fmt = &opts.log_format;
    // A format that names its fields says what is logged; the bare `json` format, its lines.
    let has = |f: Field| {
        if fmt.fields_known() {
            fmt.has(f)
        } else {
            seen & (1 << f as u32) != 0
        }
    };
    let present = Present {
        access_log: read.access,
        upstream_addr: has(Field::UpstreamAddr),
        connection: has(Field::Connection),
        msec: has(Field::Msec),
        request_time: has(Field::RequestTime),
        upstream_name: has(Field::ProxyUpstreamName),
        error_log: read.error,
        dns_log: !opts.dns.is_empty(),
    };
    let version = opts.nginx_version.or_else(|| {
        opts.config
            .as_ref()
            .and_then(|c| c.version.as_deref())
            .and_then(resolvelab_core::version::Version::parse)
    });
    let (observability, race) =
        evidence::observe(present, peers.source, version, opts.config.as_ref());
    // Pairing is by `*cid` when the access log has `$connection` (or there is none: the
    // failures are the error lines themselves).
    let by_cid = present.connection || !present.access_log;
    (observability, race, by_cid)
}

fn inputs_info(opts: &Options, clock: &access::Clock, changes: &[(i64, i32)]) -> InputsInfo {
    let names = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
    InputsInfo {
        access: names(&opts.access),
        error: names(&opts.error),
        mixed: names(&opts.mixed),
        dns: names(&opts.dns),
        events: names(&opts.events),
        log_format: opts.log_format.text.clone(),
        tz_offset: time::format_offset(clock.offset_s),
        tz_source: clock.source.to_string(),
        tz_changes: changes
            .iter()
            .map(|&(t, o)| {
                let at = jiff::Timestamp::from_second(t).map_or(t.to_string(), |t| t.to_string());
                format!("{} from {at}", time::format_offset(o))
            })
            .collect(),
        upstream_filter: opts.upstream.clone(),
    }
}

fn swap_directions(swaps: &[&Swap]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in swaps {
        *m.entry(s.direction.clone()).or_insert(0) += 1;
    }
    m
}

/// `1-hop`, `2-hop`, `3+-hop` or `unknown`.
pub fn traj_label(hops: u32) -> &'static str {
    match hops {
        0 => "unknown",
        1 => "1-hop",
        2 => "2-hop",
        _ => "3+-hop",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start of the tests' synthetic logs (epoch ms: 2026-11-30 06:00 UTC).
    const T0_MS: i64 = 1_796_018_400_000;

    fn lab_line(t_ms: i64, st: u16, ua: &str, conn: u64, creq: u64) -> String {
        format!(
            "{}.{:03} {st} \"{ua}\" \"{st}\" 0.000 GET {conn} {creq} \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n",
            t_ms / 1000,
            t_ms % 1000
        )
    }

    /// `access.log` + `error.log` in `dir`, read with the lab format at UTC.
    fn lab_options(dir: &std::path::Path, acc: &str, err: &str) -> Options {
        let a = dir.join("access.log");
        let e = dir.join("error.log");
        std::fs::write(&a, acc).unwrap();
        std::fs::write(&e, err).unwrap();
        let mut o = Options::new(vec![a], vec![e]);
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        o
    }

    fn nlu_err(t_s: i64, cid: u64) -> String {
        err_line(t_s, cid, "no live upstreams while connecting to upstream")
    }

    fn err_line(t_s: i64, cid: u64, msg: &str) -> String {
        let ts = jiff::Timestamp::from_second(t_s).unwrap();
        format!(
            "{} [error] 1#1: *{cid} {msg}, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://be/\", host: \"x\"\n",
            ts.strftime("%Y/%m/%d %H:%M:%S")
        )
    }

    /// A snapshot pairs the failures still pending as the end of the logs pairs them: an
    /// NLU line answers one of two NLUs of its connection and second, not both — and the pass
    /// reads on with the line still there for the second.
    #[test]
    fn a_snapshot_pairs_an_nlu_line_once() {
        use incremental::Incremental;
        use tally::Stream;
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        // An NLU 20 s before opens the error stream; then two NLUs of connection 7 in one
        // second, with one line, pending when the snapshot is taken.
        let acc = [
            lab_line(t0, 502, "be", 3, 1),
            lab_line(t0 + 20_200, 502, "be", 7, 1),
            lab_line(t0 + 20_300, 502, "be", 7, 2),
        ];
        let err = [nlu_err(t0 / 1000, 3), nlu_err(t0 / 1000 + 20, 7)];
        let o = lab_options(dir.path(), &acc.concat(), &err.concat());
        let streams = [
            (Stream::Error, o.error[0].clone()),
            (Stream::Access, o.access[0].clone()),
        ];
        let mut c = Incremental::new(&o, &streams).unwrap();
        let trim = |l: &String| l.trim_end().as_bytes().to_vec();
        let err: Vec<Vec<u8>> = err.iter().map(trim).collect();
        let acc: Vec<Vec<u8>> = acc.iter().map(trim).collect();
        c.feed(0, err.iter().map(Vec::as_slice), 1).unwrap();
        let json = |d: &Diagnosis| serde_json::to_string(d).unwrap();
        let want = diagnose(&o).unwrap();
        assert_eq!((want.nlu.total, want.nlu.paired), (3, 2));
        c.feed(1, acc.iter().map(Vec::as_slice), 1).unwrap();
        assert_eq!(json(&c.snapshot().unwrap()), json(&want));
        // Again: what the snapshot paired was put back.
        assert_eq!(json(&c.snapshot().unwrap()), json(&want));
    }

    /// Between failures the pairing reads the error lines as the access log goes: fed from
    /// memory, they do not wait as text for the next failure (a minute of them here), nor
    /// for the access log to pass them — once the stream is open, the lines fed before an
    /// access line are read when it is fed.
    #[test]
    fn error_lines_do_not_wait_for_a_failure() {
        let (most, fed) = most_waiting(true, 20);
        assert_eq!(most, 0, "{most} bytes waiting of {fed} fed");
    }

    /// Nor before the first failure's pairing: the stream opens once an access line has set
    /// the clock that places its lines (`watch` held an outage's first 10 s of error lines
    /// as text when it opened at the first pairing).
    #[test]
    fn error_lines_do_not_wait_for_the_first_pairing() {
        let (most, fed) = most_waiting(false, 0);
        assert_eq!(most, 0, "{most} bytes waiting of {fed} fed");
    }

    /// Feed 70 s of one unpaired error line and ten access lines a second (the first one a
    /// 502 when `fail_first`): the most error-line bytes waiting as text after a second past
    /// `from_s`, and the bytes fed.
    fn most_waiting(fail_first: bool, from_s: i64) -> (usize, usize) {
        use incremental::Incremental;
        use tally::Stream;
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let o = lab_options(dir.path(), "", "");
        let streams = [
            (Stream::Error, o.error[0].clone()),
            (Stream::Access, o.access[0].clone()),
        ];
        let mut c = Incremental::new(&o, &streams).unwrap();
        let (mut e_no, mut a_no) = (1, 1);
        let (mut fed, mut most) = (0, 0);
        for s in 0..70i64 {
            let err = err_line(t0 / 1000 + s, 100 + s as u64, "upstream timed out");
            fed += err.len();
            c.feed(0, [err.trim_end().as_bytes()], e_no).unwrap();
            e_no += 1;
            for k in 0..10 {
                let st = if fail_first && s == 0 && k == 0 {
                    502
                } else {
                    200
                };
                let l = lab_line(t0 + s * 1000 + k * 100, st, "127.0.0.20:8080", 1, 1);
                c.feed(1, [l.trim_end().as_bytes()], a_no).unwrap();
                a_no += 1;
            }
            if s > from_s {
                most = most.max(c.waiting_bytes());
            }
        }
        (most, fed)
    }

    /// A mixed stream's lines that cannot be error lines are handed to the error reader as
    /// empty lines (by the tally and by the incremental pass): both count what a diagnosis of
    /// the file counts, blank lines (not counted) among them.
    #[test]
    fn a_mixed_stream_fed_from_memory_counts_as_its_file() {
        use incremental::Incremental;
        use tally::{Stream, Tally};
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let mut text = String::new();
        for s in 0..30i64 {
            let st = if s % 7 == 3 { 502 } else { 200 };
            if st == 502 {
                text += &err_line(
                    t0 / 1000 + s,
                    10 + s as u64,
                    "connect() failed (111: Connection refused) while connecting to upstream",
                );
            }
            text += &lab_line(t0 + s * 1000, st, "127.0.0.20:8080", 10 + s as u64, 1);
            text += if s % 5 == 0 {
                "\n\r\nsome other process\n"
            } else {
                ""
            };
        }
        let path = dir.path().join("pod.log");
        std::fs::write(&path, &text).unwrap();
        let mut o = Options::new(Vec::new(), Vec::new());
        o.mixed = vec![path.clone()];
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        let want = diagnose(&o).unwrap();
        let err = want.parse.files.iter().find(|f| f.kind == "error").unwrap();
        let lines: Vec<&[u8]> = text.split_terminator('\n').map(str::as_bytes).collect();
        let mut t = Tally::new(&o);
        let k = t.add_stream(Stream::Mixed, "pod.log");
        t.feed(k, lines.iter().copied(), 1);
        assert_eq!(
            t.take().lines["error"],
            [err.parsed, err.malformed, err.skipped]
        );
        let mut c = Incremental::new(&o, &[(Stream::Mixed, path)]).unwrap();
        c.feed(0, lines[..40].iter().copied(), 1).unwrap();
        c.feed(0, lines[40..].iter().copied(), 41).unwrap();
        let json = |d: &Diagnosis| serde_json::to_string(d).unwrap();
        assert_eq!(json(&c.snapshot().unwrap()), json(&want));
    }

    #[test]
    fn hop_labels() {
        assert_eq!(traj_label(2), "2-hop");
        assert_eq!(traj_label(5), "3+-hop");
    }

    #[test]
    fn a_steady_trickle_is_not_one_long_incident() {
        // 100 rps for 60 s with one ordinary 502 every 900 ms: the failures are < 1 s apart all
        // along, but most requests succeed — no incident spans more than ~10 s.
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let mut acc = String::new();
        for k in 0..6000i64 {
            let t = t0 + k * 10;
            let st = if k % 90 == 0 { 502 } else { 200 };
            acc += &lab_line(t, st, "127.0.0.20:8080", 1000 + k as u64, 1);
        }
        let d = diagnose(&lab_options(dir.path(), &acc, "")).unwrap();
        assert_eq!(d.failures, 67);
        let longest = d.incidents.iter().map(|i| i.duration_ms).max().unwrap();
        assert!(d.incidents.len() >= 5, "{}", d.incidents.len());
        assert!(longest <= 11_000, "{longest} ms");
        assert_eq!(d.incidents.iter().map(|i| i.count).sum::<u64>(), 67);
    }

    #[test]
    fn pairs_by_cid_and_time_on_a_keepalive_connection() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let mut acc = String::new();
        // One keep-alive connection (*7): success, NLU at +10 s, success, NLU at +12 s; and an
        // NLU on connection *8 whose error line is 5 s away (must not pair).
        acc += &lab_line(t0 + 9_000, 200, "127.0.0.20:8080", 7, 1);
        acc += &lab_line(t0 + 10_500, 502, "be", 7, 2);
        acc += &lab_line(t0 + 11_000, 200, "127.0.0.20:8080", 7, 3);
        acc += &lab_line(t0 + 12_200, 502, "be", 7, 4);
        acc += &lab_line(t0 + 20_100, 502, "be", 8, 1);
        let mut err = String::new();
        err += &nlu_err(t0 / 1000 + 10, 7);
        err += &nlu_err(t0 / 1000 + 12, 7);
        err += &nlu_err(t0 / 1000 + 15, 8);
        let o = lab_options(dir.path(), &acc, &err);
        let d = diagnose(&o).unwrap();
        assert_eq!(d.nlu.total, 3);
        assert_eq!(d.nlu.paired, 2, "the *8 line is 5 s away from its request");
        let paired: Vec<&str> = d
            .incidents
            .iter()
            .filter_map(|i| i.evidence.iter().find(|e| e.note.starts_with("paired")))
            .map(|e| e.at.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(
            paired,
            ["1", "2"],
            "each NLU paired with the line of its own second"
        );
    }

    /// A long run: 36,000 requests over an hour, 3,600 2-hop NLUs each with a first-try line
    /// and an NLU line on its own keep-alive connection, plus resolver noise every second and
    /// peer-disabled warnings, in two error_log files (the second gzipped). Every NLU pairs,
    /// and the error lines buffered at once stay a tiny fraction of the log: a materialised
    /// error log would hold all of them.
    #[test]
    fn error_logs_are_streamed_with_a_bounded_window() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let (mut acc, mut err, mut noise) = (String::new(), String::new(), String::new());
        let n = 36_000i64;
        for i in 0..n {
            let t = t0 + i * 100;
            let conn = 1 + (i % 40) as u64;
            if i % 10 == 3 {
                acc += &lab_line(t, 502, "127.0.0.20:8080, be", conn, 1 + i as u64);
                let ts = jiff::Timestamp::from_second(t / 1000)
                    .unwrap()
                    .strftime("%Y/%m/%d %H:%M:%S")
                    .to_string();
                err += &format!(
                    "{ts} [error] 1#1: *{conn} upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"\n"
                );
                err += &err_line(
                    t / 1000,
                    conn,
                    "no live upstreams while connecting to upstream",
                );
            } else {
                acc += &lab_line(t, 200, "127.0.0.20:8080", conn, 1 + i as u64);
            }
            if i % 10 == 0 {
                let ts = jiff::Timestamp::from_second(t / 1000)
                    .unwrap()
                    .strftime("%Y/%m/%d %H:%M:%S")
                    .to_string();
                noise += &format!(
                    "{ts} [error] 2#2: be.lab could not be resolved (110: Operation timed out)\n"
                );
                if i % 50 == 0 {
                    noise += &format!(
                        "{ts} [warn] 2#2: *{conn} upstream server temporarily disabled while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.30:8080/\", host: \"x\"\n"
                    );
                }
            }
        }
        let a = dir.path().join("access.log");
        let e = dir.path().join("error.log");
        let z = dir.path().join("noise.log.gz");
        std::fs::write(&a, acc).unwrap();
        std::fs::write(&e, err).unwrap();
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&z).unwrap(),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(&mut gz, noise.as_bytes()).unwrap();
        gz.finish().unwrap();
        let mut o = Options::new(vec![a], vec![e, z]);
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        let (d, _, st) = diagnose_with_stats(&o).unwrap();
        assert_eq!(d.requests, n as u64);
        assert_eq!(d.nlu.total, 3600);
        assert_eq!(d.nlu.paired, 3600, "every NLU found its own line");
        assert_eq!(st.error_lines, 3600 * 2 + 3600 + 720);
        assert_eq!((st.late_lines, st.dropped), (0, 0));
        // One request every 100 ms, lines of one second, 5 s read ahead: a few dozen at most.
        assert!(
            st.max_buffered > 0 && st.max_buffered <= 100,
            "buffered {} of {} error lines",
            st.max_buffered,
            st.error_lines
        );
        // Evidence is quoted from the lines read again: at most eight per incident, not the log
        // (a steady trickle of one NLU a second is cut into incidents of ~10 s).
        assert!(
            st.fetched > 0 && st.fetched <= 8 * d.incidents.len() && st.fetched * 10 < 11520,
            "{st:?}, {} incidents",
            d.incidents.len()
        );
        let te = d
            .incidents
            .iter()
            .flat_map(|i| &i.evidence)
            .find(|e| e.note.starts_with("paired"))
            .unwrap();
        assert!(te.text.contains("no live upstreams"), "{te:?}");
        let sig = d
            .signatures
            .iter()
            .find(|s| s.id == "resolve-timeout")
            .unwrap();
        assert_eq!(sig.count, 3600);
        assert!(sig.first.at.ends_with("noise.log.gz:1"), "{:?}", sig.first);
        assert!(sig.first.text.contains("could not be resolved"));
        assert_eq!(d.requery_source, "error-log");
        assert_eq!(d.requery_period_ms, Some(1000.0));
    }

    /// Several workers share one error_log: a request's NLU line written after a line of a
    /// later second (out of order in the file) still pairs, and is counted as late.
    #[test]
    fn an_out_of_order_error_line_still_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let mut acc = String::new();
        acc += &lab_line(t0 + 1_500, 502, "127.0.0.20:8080, be", 4, 1);
        acc += &lab_line(t0 + 3_200, 502, "127.0.0.20:8080, be", 5, 1);
        let mut err = String::new();
        err += &nlu_err(t0 / 1000 + 3, 5);
        // Written after the line of second 3, for second 1.
        err += &nlu_err(t0 / 1000 + 1, 4);
        let o = lab_options(dir.path(), &acc, &err);
        let (d, _, st) = diagnose_with_stats(&o).unwrap();
        assert_eq!((d.nlu.total, d.nlu.paired), (2, 2));
        assert_eq!(st.late_lines, 1);
        let ats: Vec<&str> = d
            .incidents
            .iter()
            .flat_map(|i| &i.evidence)
            .filter(|e| e.note.starts_with("paired"))
            .map(|e| e.at.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(ats, ["2", "1"]);
    }

    /// A DNS log whose authority answered one name per view (two resolvers, two orders): read
    /// as one history, the views' answers interleaved would be swaps; the name's lines are left
    /// out and the diagnosis says which, and what would decide it.
    #[test]
    fn a_name_answered_per_view_is_no_answer_history() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = T0_MS;
        let acc: String = (0..20)
            .map(|k| lab_line(t0 + k * 1000, 200, "127.0.0.20:8080", k as u64 + 1, 1))
            .collect();
        let mut o = lab_options(dir.path(), &acc, "");
        let dns = dir.path().join("dns.jsonl");
        let mut text = String::from("{\"schema\":\"resolvelab.dns/v1\"}\n");
        for k in 0..20i64 {
            let (view, addr) = match k % 2 {
                0 => (String::new(), "127.0.0.20"),
                _ => (",\"view\":1".to_string(), "127.0.0.30"),
            };
            text += &format!(
                "{{\"t_us\":{},\"client\":\"127.0.0.1:5000\",\"qname\":\"app.test.local\",\"qtype\":\"A\",\"rcode\":\"NOERROR\",\"answers\":[\"{addr}\"]{view}}}\n",
                (t0 + k * 1000) * 1000
            );
        }
        std::fs::write(&dns, &text).unwrap();
        o.dns = vec![dns.clone()];
        let d = diagnose(&o).unwrap();
        assert_eq!(d.swaps, 0, "the views' answers are no swaps");
        let said: Vec<&evidence::Missing> = (d.evidence.missing.iter())
            .filter(|m| m.what.contains("per view"))
            .collect();
        assert_eq!(said.len(), 1, "{:?}", d.evidence.missing);
        assert!(
            said[0].what.contains("app.test.local (2 views)"),
            "{}",
            said[0].what
        );
        // One view only: an answer history like any other.
        std::fs::write(&dns, text.replace(",\"view\":1", "")).unwrap();
        let d = diagnose(&o).unwrap();
        assert!(d.swaps > 0);
        assert!(
            !d.evidence
                .missing
                .iter()
                .any(|m| m.what.contains("per view"))
        );
    }

    /// More error lines within one request's span than the pairing window holds: the oldest
    /// are dropped — among them a long request's own line, so that request pairs with none —,
    /// and the diagnosis says so (lines, span, the failure that found no line) in its missing
    /// evidence; two time slices' losses add up to the whole's.
    #[test]
    fn lines_dropped_from_a_full_pairing_window_are_reported_with_what_they_cost() {
        let dir = tempfile::tempdir().unwrap();
        let (t0, s0) = (T0_MS, T0_MS / 1000);
        let stamp = |s: i64| {
            let ts = jiff::Timestamp::from_second(s).unwrap();
            ts.strftime("%Y/%m/%d %H:%M:%S").to_string()
        };
        let line = |s: &str, cid: u64, msg: &str| {
            format!(
                "{s} [error] 1#1: *{cid} {msg} while connecting to upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"\n"
            )
        };
        let refused = "connect() failed (111: Connection refused)";
        // A 50 s request (cid 1) refused at its start; then more lines of other connections
        // than the window holds, while it is still pending; then a short one with its line.
        let mut err = line(&stamp(s0 + 6), 1, refused);
        let extra = MAX_BUFFERED as u64 + 10;
        for k in 0..extra {
            let s = stamp(s0 + 7 + (k * 40 / extra) as i64);
            err += &line(&s, 10 + k, "upstream timed out (110: Connection timed out)");
        }
        err += &line(&stamp(s0 + 55), 5, refused);
        let long = format!(
            "{}.000 502 \"127.0.0.20:8080\" \"502\" 50.000 GET 1 1 \"50.000\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n",
            s0 + 55
        );
        let acc = long + &lab_line(t0 + 55_500, 502, "127.0.0.20:8080", 5, 1);
        let mut o = lab_options(dir.path(), &acc, &err);
        let (d, _, st) = diagnose_with_stats(&o).unwrap();
        // Every line was read; the oldest twelve (the long request's, ten others, and one more
        // once the short request's line came) went over the cap.
        assert_eq!(st.dropped, 12);
        let loss = d.parse.pairing_loss.expect("a loss");
        assert_eq!((loss.lines, loss.unpaired), (12, 1));
        assert_eq!(loss.span_ms.map(|s| s.0), Some(t0 + 6_000));
        let said: Vec<&evidence::Missing> = (d.evidence.missing.iter())
            .filter(|m| m.what.contains("pairing window"))
            .collect();
        assert_eq!(said.len(), 1);
        assert!(said[0].what.contains(": 12 lines from"), "{}", said[0].what);
        assert!(said[0].what.contains("; 1 failures"), "{}", said[0].what);
        // The short request found its line: it is not among the failures that lost one.
        assert_eq!(d.failures, 2);
        // Slices [.., t0+30 s) and [t0+30 s, ..): the lines dropped are the first's, the failure
        // that lost its line the second's; joined, the whole's loss and one note.
        let mut slice = |r: TimeRange| {
            o.range = Some(r);
            diagnose(&o).unwrap()
        };
        let cut = t0 + 30_000;
        let a = slice(TimeRange {
            since_ms: i64::MIN,
            until_ms: cut,
        });
        let b = slice(TimeRange {
            since_ms: cut,
            until_ms: i64::MAX,
        });
        assert_eq!(
            a.parse.pairing_loss.map(|l| (l.lines, l.unpaired)),
            Some((12, 0))
        );
        assert_eq!(
            b.parse
                .pairing_loss
                .map(|l| (l.lines, l.unpaired, l.span_ms)),
            Some((0, 1, None))
        );
        let both = crate::fleet::slices::join(b, a).unwrap();
        assert_eq!(both.parse.pairing_loss, Some(loss));
        assert_eq!(both.evidence.missing, d.evidence.missing);
    }

    /// A log across the change back from summer time (Europe, 2026-10-25 01:00Z): the access
    /// log's `$time_local` shows both offsets; the error log's local times repeat an hour. The
    /// failures after the change still pair with their own lines.
    #[test]
    fn error_lines_follow_a_daylight_saving_change() {
        let dir = tempfile::tempdir().unwrap();
        let line = |local: &str, off: &str, st: u16, path: &str| {
            format!(
                "10.0.0.7 - - [25/Oct/2026:{local} {off}] \"GET {path} HTTP/1.1\" {st} 0 \"-\" \"curl\"\n"
            )
        };
        let err = |local: &str, path: &str| {
            format!(
                "2026/10/25 {local} [error] 7#7: *1 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.0.7, server: x, request: \"GET {path} HTTP/1.1\", upstream: \"http://10.0.0.5:80{path}\", host: \"x\"\n"
            )
        };
        let mut acc = String::new();
        let mut el = String::new();
        // 02:30 CEST (00:30Z), then after the change 02:20 CET (01:20Z) and 03:10 CET (02:10Z).
        for (local, off, path) in [
            ("02:30:00", "+0200", "/a"),
            ("02:59:00", "+0200", "/ok"),
            ("02:01:00", "+0100", "/ok"),
            ("02:20:00", "+0100", "/b"),
            ("03:10:00", "+0100", "/c"),
        ] {
            let st = if path == "/ok" { 200 } else { 502 };
            acc += &line(local, off, st, path);
            if st == 502 {
                el += &err(local, path);
            }
        }
        let a = dir.path().join("access.log");
        let e = dir.path().join("error.log");
        std::fs::write(&a, acc).unwrap();
        std::fs::write(&e, el).unwrap();
        let d = diagnose(&Options::new(vec![a], vec![e])).unwrap();
        assert_eq!(d.failures, 3);
        let paired: Vec<&str> = d
            .incidents
            .iter()
            .flat_map(|i| &i.evidence)
            .filter(|e| e.note.starts_with("first-try"))
            .map(|e| e.at.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(paired, ["1", "2", "3"], "{:#?}", d.incidents);
        assert_eq!(d.inputs.tz_offset, "+02:00");
        assert_eq!(d.inputs.tz_changes, ["+01:00 from 2026-10-25T01:00:00Z"]);
    }

    /// ingress-nginx logs the group of every request (`$proxy_upstream_name`): failures are
    /// grouped by it, not by an address no NLU trajectory names.
    #[test]
    fn ingress_upstream_names_are_the_groups() {
        let dir = tempfile::tempdir().unwrap();
        let line = |t: &str, st: u16, name: &str, addr: &str| {
            format!(
                "10.0.0.7 - - [25/Nov/2026:10:00:{t} +0000] \"GET / HTTP/1.1\" {st} 0 \"-\" \"curl\" 80 0.001 [{name}] [] {addr} 0 0.001 {st} abc\n"
            )
        };
        let acc = line("01", 200, "shop-web-80", "10.1.0.5:80")
            + &line("02", 502, "shop-web-80", "10.1.0.5:80")
            + &line("03", 200, "shop-api-80", "10.1.0.9:80")
            + &line("30", 502, "shop-api-80", "10.1.0.9:80");
        let a = dir.path().join("access.log");
        std::fs::write(&a, acc).unwrap();
        let mut o = Options::new(vec![a], Vec::new());
        o.log_format = LogFormat::from_arg("upstreaminfo").unwrap();
        let d = diagnose(&o).unwrap();
        let groups: Vec<(&str, u64)> = d
            .incidents
            .iter()
            .map(|i| (i.upstream.as_str(), i.requests_in_window))
            .collect();
        assert_eq!(groups, [("shop-web-80", 2), ("shop-api-80", 1)]);
        assert!(d.evidence.inputs.upstream_name);
    }
}
