//! The diagnosis document (`resolvelab.diagnosis/v1`) and the lab verdict around it.
//! Field meanings are documented in docs/diagnose.md.

use crate::classes::Class;
use resolvelab_history::FileStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema id of [`Diagnosis`].
pub const SCHEMA: &str = resolvelab_core::evidence::schema::DIAGNOSIS;
/// Schema id of [`Verdict`].
pub const VERDICT_SCHEMA: &str = resolvelab_core::evidence::schema::VERDICT;

/// What the checker read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct InputsInfo {
    /// Access logs.
    pub access: Vec<String>,
    /// Error logs.
    pub error: Vec<String>,
    /// Mixed streams (`--logs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mixed: Vec<String>,
    /// DNS logs.
    pub dns: Vec<String>,
    /// Event logs.
    pub events: Vec<String>,
    /// The access-log format text used.
    pub log_format: String,
    /// The error log's UTC offset used to join it with the access log (`+09:00`).
    pub tz_offset: String,
    /// Where that offset came from: `time_local`, `flag` or `machine`.
    pub tz_source: String,
    /// Later offsets the access log showed (daylight saving), each `+01:00 from
    /// 2026-10-25T01:00:00Z`: error-log lines are placed with the offset of their time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tz_changes: Vec<String>,
    /// `--upstream` filter, if any.
    pub upstream_filter: Option<String>,
}

/// NLU counts by trajectory.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NluCounts {
    /// All `no live upstreams` failures.
    pub total: u64,
    /// `be`: refused at the first pick.
    pub one_hop: u64,
    /// `IP:port, be`: one real try, then the retry's selection refused.
    pub two_hop: u64,
    /// Three or more hops.
    pub multi_hop: u64,
    /// Trajectory unknown (no `$upstream_addr` in the format).
    pub unknown_hops: u64,
    /// NLU failures paired with their error-log line.
    pub paired: u64,
}

impl NluCounts {
    /// Count one NLU of `hops` hops (0: unknown).
    pub fn count(&mut self, hops: u32) {
        self.count_n(hops, 1);
    }

    /// Count `n` NLUs of `hops` hops.
    pub fn count_n(&mut self, hops: u32, n: u64) {
        self.total += n;
        match hops {
            0 => self.unknown_hops += n,
            1 => self.one_hop += n,
            2 => self.two_hop += n,
            _ => self.multi_hop += n,
        }
    }
}

/// Requests that went through an `error_page … = @named` redirect (`$upstream_addr` groups
/// separated by ` : `), e.g. the `@retry_once` shim.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PassCounts {
    /// Requests with two or more passes.
    pub multi_pass: u64,
    /// Most passes seen in one request (1 when no request was redirected, 0 without
    /// `$upstream_addr`).
    pub max_passes: u64,
    /// NLUs inside a pass that was not the last one (the request was redirected after it).
    pub internal_nlu: u64,
    /// Of which paired with their own `no live upstreams` error line.
    pub internal_paired: u64,
    /// Requests with an internal NLU whose final status was a success (< 500): rescued.
    pub rescued: u64,
    /// Internal NLUs by class.
    pub internal_by_class: BTreeMap<String, u64>,
}

/// One evidence line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evidence {
    /// `file:line`.
    pub at: String,
    /// What this line shows.
    pub note: String,
    /// The line (truncated).
    pub text: String,
}

/// A time series point for charts.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Bin start, epoch ms.
    pub t_ms: i64,
    /// Requests that did not fail.
    pub ok: u64,
    /// Failures that are not NLU (502/504).
    pub failed: u64,
    /// NLU failures.
    pub nlu: u64,
    /// Latency percentiles in ms (p50, p90, p99, max); absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<[f64; 4]>,
}

/// A binned time series.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// Bin width in ms.
    pub bin_ms: i64,
    /// Points in time order.
    pub points: Vec<Point>,
}

/// One incident: a cluster of failures of one class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Incident {
    /// 1-based id in time order.
    pub id: usize,
    /// Failure class (docs/DESIGN.md), written as its id.
    pub class: Class,
    /// 0..1.
    pub confidence: f64,
    /// Upstream group.
    pub upstream: String,
    /// First failure (request start), epoch ms.
    pub start_ms: i64,
    /// Last failure (request end), epoch ms.
    pub end_ms: i64,
    /// `end_ms - start_ms`.
    pub duration_ms: i64,
    /// Failed requests in this incident.
    pub count: u64,
    /// Of which NLU.
    pub nlu: u64,
    /// NLU by trajectory.
    pub hops: NluCounts,
    /// Requests to the same upstream in the window (the window is at least 2 s wide, centred).
    pub requests_in_window: u64,
    /// Failed share of those.
    pub share_failed: f64,
    /// `burst` (≥ 80 % failing), `isolated` (≤ 50 %) or `mixed`.
    pub shape: String,
    /// The first failure's end (`$msec`, i.e. the failing peer selection) minus the latest
    /// peer-list change before it, ms: a swap, or peers removed by NXDOMAIN / restored after
    /// it (None without any).
    pub after_swap_ms: Option<i64>,
    /// Direction of that change (`old → new`, `old → NXDOMAIN (no peers)`).
    pub swap_direction: Option<String>,
    /// Failures by method.
    pub methods: BTreeMap<String, u64>,
    /// Evidence lines, strongest first.
    pub evidence: Vec<Evidence>,
    /// Why this class.
    pub explanation: String,
    /// The fix (DOMAIN.md §3).
    pub fix: String,
    /// Requests around the incident at fine resolution.
    pub zoom: Series,
}

/// Per-class summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassSummary {
    /// The class, written as its id.
    pub class: Class,
    /// Incidents of this class.
    pub incidents: u64,
    /// Failed requests of this class.
    pub requests: u64,
    /// What the class is.
    pub explanation: String,
    /// The fix.
    pub fix: String,
}

/// A co-occurring error-log signature.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Signature {
    /// Stable id (`resolve-nxdomain`, `peer-disabled`, …).
    pub id: String,
    /// What it matches.
    pub pattern: String,
    /// Lines.
    pub count: u64,
    /// Lines with an NLU of any upstream within ±10 s.
    pub near_nlu: u64,
    /// Failed requests this signature is the own cause of (a per-request resolution of a
    /// variable `proxy_pass`, logged with their `*cid`); 0 is not written.
    #[serde(default, skip_serializing_if = "no_count")]
    pub caused: u64,
    /// True when this signature did no harm here.
    pub harmless: bool,
    /// Interpretation.
    pub note: String,
    /// First occurrence.
    pub first: Evidence,
}

/// One swap of the peer list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Swap {
    /// Epoch ms.
    pub t_ms: i64,
    /// Name (DNS) or upstream group (inferred).
    pub name: String,
    /// `old → new`.
    pub direction: String,
}

/// How fast the proxy followed the authority's answers: from each change that brought a name
/// new addresses (a move) to the first logged request (at its log time, its end) that the
/// proxy sent to one of them. Absent from a diagnosis
/// whose inputs hold no answer history (no DNS log, no lab mode events): undetermined.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SwapFollow {
    /// Moves of a name the proxy sent to, during the log.
    pub moves: u64,
    /// Moves the proxy sent a request to a new address after, before the name moved again or
    /// the log ended.
    pub followed: u64,
    /// Median time to follow, ms, of the followed moves.
    pub median_ms: Option<i64>,
    /// Longest time to follow, ms, of the followed moves.
    pub max_ms: Option<i64>,
    /// The moves (first 1,000).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<Followed>,
}

impl SwapFollow {
    /// A table cell: the longest time to follow, and how many moves were never followed.
    pub fn short(&self) -> String {
        let unfollowed = self.moves - self.followed;
        match self.max_ms {
            _ if self.moves == 0 => "no move".into(),
            None => format!("never ({unfollowed} of {})", self.moves),
            Some(max) if unfollowed == 0 => secs(max),
            Some(max) => format!("{}, {unfollowed} of {} never", secs(max), self.moves),
        }
    }

    /// A report line: `at most 6.9 s, median 6.1 s, over 3 answer changes`.
    pub fn describe(f: Option<&SwapFollow>) -> String {
        let Some(f) = f else {
            return "undetermined (no DNS log or dns-mode events show when the answers changed)"
                .into();
        };
        if f.moves == 0 {
            return "no answer change brought a new address during the log".into();
        }
        let unfollowed = f.moves - f.followed;
        let never = if unfollowed > 0 {
            format!(" ({unfollowed} never followed before the next change or the log's end)")
        } else {
            String::new()
        };
        match (f.max_ms, f.median_ms) {
            (Some(max), Some(med)) => format!(
                "at most {}, median {}, over {} answer changes{never}",
                secs(max),
                secs(med),
                f.moves
            ),
            _ => format!("none of {} answer changes followed{never}", f.moves),
        }
    }
}

fn secs(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// One move and when the proxy followed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Followed {
    /// When the answers changed, epoch ms.
    pub t_ms: i64,
    /// The name.
    pub name: String,
    /// The addresses the change brought.
    pub to: Vec<String>,
    /// The change to the first request sent to a new address; absent when none was before the
    /// name moved again or the log ended.
    pub after_ms: Option<i64>,
}

/// One NLU failure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NluEvent {
    /// Request end, epoch ms.
    pub t_ms: i64,
    /// Hops in the last pass (0 = unknown).
    pub hops: u32,
    /// `1-hop`, `2-hop`, `3+-hop`, `unknown`.
    pub trajectory: String,
    /// Request end minus the latest peer-list change before it (as `Incident::after_swap_ms`).
    pub after_swap_ms: Option<i64>,
    /// The class given to it.
    pub class: Class,
    /// Access-log line.
    pub at: String,
    /// True for an NLU inside an earlier pass of a redirected request (the response came
    /// from a later pass: `status` says whether it was rescued).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub internal: bool,
    /// The request's final status.
    #[serde(default)]
    pub status: u16,
}

/// Parse accounting.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ParseInfo {
    /// Per file.
    pub files: Vec<FileStats>,
    /// Sum of malformed lines.
    pub malformed: u64,
    /// Error-log lines the pairing window could not hold, and what they may have cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairing_loss: Option<PairingLoss>,
}

/// Error-log lines dropped from the pairing window — more than
/// [`MAX_BUFFERED`](crate::checker::MAX_BUFFERED) lines within one request's span —, counted
/// where their time falls in the diagnosis's range, and the failures that may have lost their
/// line with them, counted where they fall. Both add up over time slices and instances.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PairingLoss {
    /// Lines dropped before any failure took them.
    pub lines: u64,
    /// The first and the last dropped line's time, epoch ms (none: no line here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_ms: Option<(i64, i64)>,
    /// Failures that paired with no error line although a line of their time span had been
    /// dropped: each may have lost its own (the others found theirs).
    pub unpaired: u64,
}

impl std::ops::Add for PairingLoss {
    type Output = PairingLoss;

    /// Both losses: counts summed, the widest span.
    fn add(self, o: PairingLoss) -> PairingLoss {
        PairingLoss {
            lines: self.lines + o.lines,
            span_ms: match (self.span_ms, o.span_ms) {
                (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                (a, b) => a.or(b),
            },
            unpaired: self.unpaired + o.unpaired,
        }
    }
}

impl PairingLoss {
    /// Nothing lost here.
    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.unpaired == 0
    }
}

/// The time a diagnosis speaks for, `[since, until)` in epoch ms, whole seconds (error-log lines
/// carry seconds): the lines around it are read as context only. A request counts where its
/// line's time falls, an error line where its second falls, a swap or an answer change where
/// it happened, and an incident — kept whole, with its context — where it starts; so the
/// diagnoses of adjacent ranges over the same lines add up to the diagnosis of their union.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// The first millisecond in the range.
    pub since_ms: i64,
    /// The first millisecond after it.
    pub until_ms: i64,
}

impl TimeRange {
    /// Every time: the range of a diagnosis with no `--since` and no `--until`.
    pub const ALL: TimeRange = TimeRange {
        since_ms: i64::MIN,
        until_ms: i64::MAX,
    };

    /// `[since, until)` from `--since`/`--until` values (RFC 3339 timestamps; either may be
    /// missing: the range is then open on that side). Refuses fractions of a second and an
    /// empty range.
    pub fn parse(since: Option<&str>, until: Option<&str>) -> Result<TimeRange, String> {
        let read = |flag: &str, v: Option<&str>, open: i64| -> Result<i64, String> {
            let Some(v) = v else { return Ok(open) };
            let t: jiff::Timestamp = v.parse().map_err(|e| {
                format!("{flag} {v}: not an RFC 3339 time ({e}); write e.g. 2026-12-06T02:00:00Z")
            })?;
            if t.subsec_nanosecond() != 0 {
                return Err(format!(
                    "{flag} {v}: a range is whole seconds (error-log lines carry seconds); drop the fraction"
                ));
            }
            Ok(t.as_millisecond())
        };
        let r = TimeRange {
            since_ms: read("--since", since, i64::MIN)?,
            until_ms: read("--until", until, i64::MAX)?,
        };
        if r.since_ms >= r.until_ms {
            return Err(format!(
                "--since {} is not before --until {}: the range holds no time",
                since.unwrap_or("-"),
                until.unwrap_or("-")
            ));
        }
        Ok(r)
    }

    /// Whether a time (epoch ms) is in the range.
    #[inline]
    pub fn contains(&self, t_ms: i64) -> bool {
        self.since_ms <= t_ms && t_ms < self.until_ms
    }

    /// Whether a time is in an optional range (none: everything is).
    #[inline]
    pub fn holds(range: Option<TimeRange>, t_ms: i64) -> bool {
        range.is_none_or(|r| r.contains(t_ms))
    }
}

/// Whether a diagnosis read all of its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiagnosisStatus {
    /// Every input was read to its end.
    Completed,
    /// An input could not be read to its end (see `parse.files[].error`).
    Partial,
}

/// The whole diagnosis.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diagnosis {
    /// `resolvelab.diagnosis/v1`.
    pub schema: String,
    /// Inputs.
    pub inputs: InputsInfo,
    /// The time this diagnosis speaks for (`--since`/`--until`); none: all it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<TimeRange>,
    /// With a range: the first and last request read, context included (epoch ms) — how far
    /// the logs given reach around the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ms: Option<(i64, i64)>,
    /// First request, epoch ms.
    pub start_ms: Option<i64>,
    /// Last request, epoch ms.
    pub end_ms: Option<i64>,
    /// `completed`, or `partial` when an input file could not be read to its end. None (and
    /// not serialized) inside a [`Verdict`], whose own `status` is the run status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DiagnosisStatus>,
    /// Requests read.
    pub requests: u64,
    /// Requests by HTTP status.
    pub http_status: BTreeMap<String, u64>,
    /// Requests by upstream group, then status class (`2xx` … `5xx`, `other`): the requests
    /// that went to (or were refused by) an upstream; the others are in `http_status` only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstream_requests: BTreeMap<String, BTreeMap<String, u64>>,
    /// Failed requests (502/504 or NLU).
    pub failures: u64,
    /// NLU counts (the NLU that decided the response; see `passes` for earlier passes).
    pub nlu: NluCounts,
    /// Redirected requests (retry shim): passes, internal NLUs, rescues.
    #[serde(default)]
    pub passes: PassCounts,
    /// Number of peer-list swaps.
    pub swaps: u64,
    /// `dns`, `inferred` or `none`.
    pub swap_source: String,
    /// Swaps by direction.
    pub swap_directions: BTreeMap<String, u64>,
    /// NLU failures within 1 s after a swap, by that swap's direction (a generation race hits
    /// both directions alike; a one-sided count points at one backend).
    #[serde(default)]
    pub nlu_by_swap_direction: BTreeMap<String, u64>,
    /// The swaps (first 1,000).
    pub swap_list: Vec<Swap>,
    /// Median re-query period, ms.
    pub requery_period_ms: Option<f64>,
    /// `dns`, `inferred` (swap intervals), `error-log` (`could not be resolved` intervals) or `none`.
    pub requery_source: String,
    /// Time to follow the authority's answer changes; absent when the inputs hold no answer
    /// history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_follow: Option<SwapFollow>,
    /// Incidents in time order.
    pub incidents: Vec<Incident>,
    /// Per-class summaries.
    pub classes: Vec<ClassSummary>,
    /// Error-log signatures.
    pub signatures: Vec<Signature>,
    /// NLU failures (first 5,000).
    pub nlu_events: Vec<NluEvent>,
    /// True when `nlu_events` was cut.
    pub nlu_events_truncated: bool,
    /// Requests per bin by outcome, with latency percentiles.
    pub timeline: Series,
    /// Parse accounting.
    pub parse: ParseInfo,
    /// What these inputs can show, and what is missing (printed at the top of every report).
    #[serde(default)]
    pub evidence: crate::evidence::Observability,
}

impl Diagnosis {
    /// Why nothing could be diagnosed, or why the diagnosis is partial (`resolvelab diagnose`
    /// exits 3 then): no error-log line read, no nginx line in a mixed stream, no access-log
    /// line matched, or an input cut short. None when the diagnosis stands.
    pub fn unusable(&self) -> Option<String> {
        unusable(
            self.requests,
            self.status,
            (
                !self.inputs.access.is_empty(),
                !self.inputs.mixed.is_empty(),
            ),
            self.parse.files.iter().map(|f| FileFacts {
                path: &f.path,
                kind: &f.kind,
                parsed: f.parsed,
                error: f.error.as_deref(),
            }),
        )
    }

    /// Rewrite the `file:line` references (`at`) and the input paths (`path`) that the
    /// functions map (None keeps one): logs read through a temporary file — one instance of a
    /// log-store export — name the user's file and record instead.
    pub fn relabel(
        &mut self,
        at: &dyn Fn(&str) -> Option<String>,
        path: &dyn Fn(&str) -> Option<String>,
    ) {
        let set = |s: &mut String, f: &dyn Fn(&str) -> Option<String>| {
            if let Some(n) = f(s) {
                *s = n;
            }
        };
        for i in &mut self.incidents {
            for e in &mut i.evidence {
                set(&mut e.at, at);
            }
        }
        for g in &mut self.signatures {
            set(&mut g.first.at, at);
        }
        for e in &mut self.nlu_events {
            set(&mut e.at, at);
        }
        for f in &mut self.parse.files {
            set(&mut f.path, path);
        }
        let inputs = &mut self.inputs;
        for p in inputs
            .access
            .iter_mut()
            .chain(&mut inputs.error)
            .chain(&mut inputs.mixed)
        {
            set(p, path);
        }
    }

    /// Those of `classes` this diagnosis found (for `--fail-on`).
    pub fn found<'a>(&self, classes: &'a [String]) -> Vec<&'a str> {
        classes
            .iter()
            .filter(|c| self.classes.iter().any(|s| &&s.class == c))
            .map(String::as_str)
            .collect()
    }
}

/// What [`unusable`] reads of one input file's parse accounting.
pub struct FileFacts<'a> {
    /// The file.
    pub path: &'a str,
    /// `access`, `error`, …
    pub kind: &'a str,
    /// Lines parsed.
    pub parsed: u64,
    /// The error that stopped reading it.
    pub error: Option<&'a str>,
}

/// [`Diagnosis::unusable`] from the few facts it reads (a fleet's merge reads only those): the
/// requests, the status, whether access logs and mixed streams were given, and each file's
/// parse accounting.
pub fn unusable<'a>(
    requests: u64,
    status: Option<DiagnosisStatus>,
    (access, mixed): (bool, bool),
    files: impl Iterator<Item = FileFacts<'a>> + Clone,
) -> Option<String> {
    let error_lines: u64 = files
        .clone()
        .filter(|f| f.kind == "error")
        .map(|f| f.parsed)
        .sum();
    if !mixed && !access && error_lines == 0 {
        return Some("no error-log line could be read (nginx's `YYYY/MM/DD HH:MM:SS [level]` lines); see the Parsing section".into());
    }
    if mixed && requests == 0 && error_lines == 0 {
        return Some(
            "no access or error line of nginx was found in the --logs stream; see the Parsing section"
                .into(),
        );
    }
    if requests == 0 && access {
        return Some(
            "no access-log line matched the format; see the Parsing section (nearest guess included)"
                .into(),
        );
    }
    if status == Some(DiagnosisStatus::Partial) {
        let cut: Vec<String> = files
            .filter_map(|f| f.error.map(|e| format!("{}: {e}", f.path)))
            .collect();
        return Some(format!("an input was cut short: {}", cut.join("; ")));
    }
    None
}

/// One injection and its hit counter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Injection {
    /// Event kind (`fault-off`, `dns-mode`, …).
    pub kind: String,
    /// Target.
    pub target: Option<String>,
    /// Spec.
    pub spec: Option<String>,
    /// Hits at the end of the injection.
    pub hits: u64,
    /// The scenario meant this injection to miss nginx: 0 hits is the expected finding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expect_miss: bool,
    /// The scenario says this injection reaches some engines only: neither 0 hits nor a hit
    /// makes the run uninterpretable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_miss: bool,
    /// `events.jsonl:line`.
    pub at: String,
}

/// One expectation of the scenario and its outcome.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Expectation {
    /// As written in the scenario.
    pub text: String,
    /// Held or not (false when it cannot be evaluated).
    pub held: bool,
    /// What was measured (or why it cannot be evaluated).
    pub measured: String,
}

/// A lab run's verdict: the diagnosis plus run status, expectations and injections.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// `resolvelab.verdict/v1`.
    pub verdict_schema: String,
    /// Scenario name.
    pub scenario: Option<String>,
    /// `completed`, `aborted`, `failed`, `incomplete`, `not-interpretable`.
    pub status: resolvelab_core::evidence::run::VerdictStatus,
    /// Human one-liner (e.g. "injection did not hit — not interpretable").
    pub summary: String,
    /// Injections with their hit counters.
    pub injections: Vec<Injection>,
    /// Expectations held / not held.
    pub expectations: Vec<Expectation>,
    /// Client-side requests (load.jsonl) and their errors.
    pub client: Option<ClientStats>,
    /// A `[fleet]` run: the fleet report and each instance's diagnosis; the flattened
    /// diagnosis then holds the instances' totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::judge::FleetVerdict>,
    /// The diagnosis (flattened into the same JSON object).
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
}

impl Verdict {
    /// True when the run completed and every expectation held.
    pub fn passed(&self) -> bool {
        self.status == resolvelab_core::evidence::run::VerdictStatus::Completed
            && self.expectations.iter().all(|e| e.held)
    }
}

/// Client-side view from `load.jsonl`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClientStats {
    /// Requests sent.
    pub requests: u64,
    /// Sent requests that got status ≥ 500 or a transport error.
    pub errors: u64,
    /// Requests the load generator never sent (`late`/`dropped`: it could not keep its
    /// schedule); they say nothing about nginx and are not in `requests` or `errors`.
    pub unsent: u64,
    /// By status (`error` for transport errors).
    pub status: BTreeMap<String, u64>,
    /// Per backend that answered (the captured `x-backend` header): what the client saw of it.
    /// Answers without the header (nginx's own 502s, transport errors) belong to no backend.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub backends: BTreeMap<String, BackendStats>,
    /// Readiness probes (`probes.jsonl`) per probed backend.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub probes: BTreeMap<String, ProbeStats>,
}

/// The client's view of one backend: requests it answered and their latency from the scheduled
/// send (corrected for coordinated omission), in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BackendStats {
    /// Requests answered by this backend.
    pub requests: u64,
    /// Of them with status ≥ 500.
    pub errors: u64,
    /// Fastest answer.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest answer.
    pub max_ms: f64,
    /// The backend's own DB-pool counters (`backends.json` of a lab run), when it has a pool:
    /// the longest wait for a pool connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_wait_max_ms: Option<f64>,
    /// 99th percentile of the pool wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_wait_p99_ms: Option<f64>,
    /// Requests that gave up waiting for a pool connection (answered 503).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_timeouts: Option<u64>,
    /// Width of the bins of `bins` (100 ms, or 1 s for long runs).
    #[serde(skip_serializing_if = "is_zero")]
    pub bin_ms: i64,
    /// Answers and their slowest latency per bin of scheduled time: a burst queued behind a
    /// slow dependency's pool shows as a staircase here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<BackendBin>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// Whether a count is 0 (not written).
fn no_count(n: &u64) -> bool {
    *n == 0
}

/// One bin of one backend's answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BackendBin {
    /// Start of the bin (scheduled time), epoch ms.
    pub t_ms: i64,
    /// Answers of requests scheduled in this bin.
    pub requests: u64,
    /// Their slowest latency.
    pub max_ms: f64,
}

/// Readiness probes of one backend.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProbeStats {
    /// Probes sent.
    pub probes: u64,
    /// Answered 2xx within the timeout.
    pub ok: u64,
    /// Timed out, failed to connect or answered non-2xx.
    pub failed: u64,
    /// Of the failures, timeouts.
    pub timeouts: u64,
    /// Slowest probe (a timed-out probe counts its timeout).
    pub max_ms: f64,
}
