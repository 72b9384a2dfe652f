//! The report card: per target × event what the user's configuration did (client errors, NLU,
//! the longest incident and its class, whether a reload was refused), each fix before → after,
//! and every change the lab made to play it. One value ([`Card`], the JSON), rendered as
//! Markdown and HTML through `core::doc`, so the formats say the same.

use crate::Planned;
use crate::events::{self, Event, Settings};
use crate::find::Target;
use crate::fixes::{OnTarget, Replay};
use crate::rewrite::Change;
use resolvelab_core::doc::{Block, Cell, Doc, Table, code, m, n, p};
use resolvelab_lab::judge::Judged;
use serde::Serialize;
use std::path::Path;

/// The whole card (`--format json`, schema `resolvelab.verify/v1`).
#[derive(Debug, Clone, Serialize)]
pub struct Card {
    /// `resolvelab.verify/v1`.
    pub schema: String,
    /// The configuration verified (a path, or `-`).
    pub source: String,
    /// The nginx that played it (`nginx 1.28.3 (…)`), or `none (--plan)`.
    pub nginx: String,
    /// Requests per second of every run.
    pub rate: u32,
    /// The answers' TTL, seconds.
    pub ttl_s: u64,
    /// The events asked for.
    pub events: Vec<Event>,
    /// Runs per event (`--repeat`), seeds 1 to N.
    pub repeat: u32,
    /// One entry per DNS-fed target.
    pub targets: Vec<TargetCard>,
}

/// One target's part of the card.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCard {
    /// The target.
    pub target: Target,
    /// Why it could not be played (`file:line: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// nginx's re-query period for it, seconds.
    pub period_s: u64,
    /// Every change the lab made to your configuration.
    pub changes: Vec<Change>,
    /// The configuration the lab ran (placeholders: `{dns}`, `{listen}`, `{port}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lab_config: Option<String>,
    /// Each event's outcome.
    pub outcomes: Vec<Outcome>,
    /// The linter's findings on it.
    pub findings: Vec<OnTarget>,
    /// Each replayable fix, before → after.
    pub fixes: Vec<FixAb>,
    /// With `--per-day RPS`: the model's day at that traffic, and each mitigation's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_day: Option<PerDay>,
    /// `https://` played over TLS: the names the backends' certificate covers besides the
    /// served ones (None: plain HTTP, the changes say why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Vec<String>>,
}

/// A target's day at one traffic, predicted by the model (`verify --per-day`).
#[derive(Debug, Clone, Serialize)]
pub struct PerDay {
    /// Requests per second.
    pub rps: f64,
    /// Probability that a try on a reused connection fails.
    pub first_try_failure: f64,
    /// Seconds of traffic simulated per variant.
    pub sample_s: i64,
    /// Baseline first, then one mitigation each; empty when the model cannot play it.
    pub rows: Vec<resolvelab_sim::nginx::predict::Prediction>,
    /// Why the model cannot play it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl TargetCard {
    /// Before anything is played.
    pub fn planned(p: &Planned, s: &Settings) -> TargetCard {
        TargetCard {
            target: p.target.clone(),
            refused: p.lab.as_ref().err().cloned(),
            period_s: p.lab.as_ref().map_or(0, |l| events::period(l, s).as_secs()),
            changes: p
                .lab
                .as_ref()
                .map(|l| l.changes.clone())
                .unwrap_or_default(),
            lab_config: p.lab.as_ref().ok().map(|l| l.body.clone()),
            outcomes: Vec::new(),
            findings: p.findings.clone(),
            fixes: Vec::new(),
            per_day: None,
            tls: p.lab.as_ref().ok().and_then(|l| l.tls.clone()),
        }
    }
}

/// One event played on one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The event.
    pub event: Event,
    /// Why it was not played (it cannot reach this target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The verdict's status (`completed`, `not-interpretable`, …).
    pub status: String,
    /// The verdict's one line (why a run is not interpretable: an injection that did not hit).
    pub summary: String,
    /// Requests the client sent.
    pub requests: u64,
    /// Of them, answered ≥ 500 or not at all.
    pub client_errors: u64,
    /// `no live upstreams` failures in the access log.
    pub nlu: u64,
    /// The longest incident, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage_ms: Option<i64>,
    /// The checker's classes, by incidents.
    pub classes: Vec<String>,
    /// Failed requests by method, over the incidents (a retry shim rescues GETs, not POSTs).
    pub failed_methods: std::collections::BTreeMap<String, u64>,
    /// nginx refused a reload (`[emerg] host not found in upstream`).
    pub reload_refused: bool,
    /// How the restart's start went while the name did not resolve (its `nginx-start`
    /// event): `ok`, or `refused: ` and nginx's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// How long the restart left nginx down — every server of it refusing connections, not
    /// only this upstream's — from its stop to the next start that listened, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_ms: Option<i64>,
    /// The run directory.
    pub run_dir: String,
    /// The scenario file that plays it again.
    pub scenario: String,
    /// With `--repeat N`: every run, in seed order. The fields above are then the median run's
    /// (by failed requests, among the runs that tested what they meant to), and `status` is
    /// `completed` only when every run was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
}

/// One run of a repeated event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// Its seed.
    pub seed: u64,
    /// The verdict's status.
    pub status: String,
    /// Client errors.
    pub client_errors: u64,
    /// `no live upstreams` failures.
    pub nlu: u64,
    /// The longest incident, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage_ms: Option<i64>,
    /// The run directory.
    pub run_dir: String,
}

impl Outcome {
    /// An event that cannot reach the target.
    pub fn skipped(event: Event, why: String) -> Outcome {
        Outcome {
            event,
            skipped: Some(why),
            status: "skipped".into(),
            summary: String::new(),
            requests: 0,
            client_errors: 0,
            nlu: 0,
            outage_ms: None,
            classes: Vec::new(),
            failed_methods: Default::default(),
            reload_refused: false,
            start: None,
            down_ms: None,
            run_dir: String::new(),
            scenario: String::new(),
            runs: Vec::new(),
        }
    }

    /// The runs of one event, one per seed: one run as it is; several as their median run
    /// with every run listed.
    pub fn of_runs(event: Event, runs: &[(u64, Judged)], scenario: &Path) -> Outcome {
        let each: Vec<Outcome> = runs
            .iter()
            .map(|(_, j)| Outcome::of(event, j, scenario))
            .collect();
        Outcome::median_of(each, runs.iter().map(|(s, _)| *s).collect())
    }

    /// Several runs' outcomes (with their seeds) as one: the median run, every run listed.
    fn median_of(each: Vec<Outcome>, seeds: Vec<u64>) -> Outcome {
        if each.len() == 1 {
            return each.into_iter().next().expect("one run");
        }
        let bad = |o: &Outcome| o.client_errors.max(o.nlu);
        let mut order: Vec<usize> = (0..each.len())
            .filter(|&i| each[i].interpretable())
            .collect();
        if order.is_empty() {
            order = (0..each.len()).collect();
        }
        order.sort_by_key(|&i| bad(&each[i]));
        let mut out = each[order[order.len() / 2]].clone();
        if let Some(spoiled) = each.iter().find(|o| !o.interpretable()) {
            out.status.clone_from(&spoiled.status);
            out.summary = format!(
                "{} of {} runs did not test what they meant to: {}",
                each.iter().filter(|o| !o.interpretable()).count(),
                each.len(),
                spoiled.summary
            );
        }
        out.reload_refused = each.iter().any(|o| o.reload_refused);
        out.runs = seeds
            .into_iter()
            .zip(&each)
            .map(|(seed, o)| Run {
                seed,
                status: o.status.clone(),
                client_errors: o.client_errors,
                nlu: o.nlu,
                outage_ms: o.outage_ms,
                run_dir: o.run_dir.clone(),
            })
            .collect();
        out
    }

    /// Each run's (tested what it meant to, failed requests): one, or every repeat's.
    fn per_run(&self) -> PerRun {
        if self.runs.is_empty() {
            return vec![(self.interpretable(), self.client_errors.max(self.nlu))];
        }
        self.runs
            .iter()
            .map(|r| (r.status == "completed", r.client_errors.max(r.nlu)))
            .collect()
    }

    /// `1201`, or with repeats `1201 (1180–1230)`: the median and the runs' range.
    fn spread(&self, f: fn(&Run) -> u64, value: u64) -> String {
        let (lo, hi) = (self.runs.iter().map(f).min(), self.runs.iter().map(f).max());
        match (lo, hi) {
            (Some(lo), Some(hi)) => format!("{value} ({lo}–{hi})"),
            _ => value.to_string(),
        }
    }

    /// A judged run.
    pub fn of(event: Event, j: &Judged, scenario: &Path) -> Outcome {
        let restart = restart(&j.record.dir);
        let v = &j.verdict;
        let d = &v.diagnosis;
        Outcome {
            event,
            skipped: None,
            status: v.status.as_str().to_string(),
            summary: v.summary.clone(),
            requests: v.client.as_ref().map_or(d.requests, |c| c.requests),
            client_errors: v.client.as_ref().map_or(d.failures, |c| c.errors),
            nlu: d.nlu.total,
            outage_ms: resolvelab_lab::judge::longest_incident_ms(j),
            classes: d.classes.iter().map(|c| c.class.to_string()).collect(),
            failed_methods: d.incidents.iter().fold(Default::default(), |mut acc, i| {
                for (k, v) in &i.methods {
                    *acc.entry(k.clone()).or_default() += v;
                }
                acc
            }),
            reload_refused: d
                .signatures
                .iter()
                .any(|s| s.id == "host-not-found-in-upstream" && s.count > 0),
            start: restart.0,
            down_ms: restart.1,
            run_dir: j.record.dir.display().to_string(),
            scenario: scenario.display().to_string(),
            runs: Vec::new(),
        }
    }

    /// It was played.
    pub fn played(&self) -> bool {
        self.skipped.is_none()
    }

    /// The run tested what it meant to.
    pub fn interpretable(&self) -> bool {
        self.status == "completed"
    }
}

/// How the run's restart went (its `nginx-restart` and `nginx-start` events): the start's
/// outcome — `ok`, or `refused: ` and nginx's words — and how long nginx was down, from the
/// stop to the first start that listened; none when the run had no restart.
fn restart(dir: &Path) -> (Option<String>, Option<i64>) {
    use resolvelab_core::evidence::{Event, event_kind};
    let Ok(text) = std::fs::read_to_string(dir.join(resolvelab_core::evidence::file::EVENTS))
    else {
        return (None, None);
    };
    let events: Vec<Event> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Event>(l).ok())
        .skip_while(|e| e.kind != event_kind::NGINX_RESTART)
        .collect();
    let Some(stop) = events.first() else {
        return (None, None);
    };
    let mut starts = events.iter().filter(|e| e.kind == event_kind::NGINX_START);
    let said = starts.clone().next().map(|e| match e.spec.as_deref() {
        Some("ok") => "ok".to_string(),
        _ => format!("refused: {}", e.note.clone().unwrap_or_default()),
    });
    let up = starts.find(|e| e.spec.as_deref() == Some("ok"));
    (said, up.map(|e| (e.t_us - stop.t_us) / 1000))
}

/// One fix, before → after on the events that failed before.
#[derive(Debug, Clone, Serialize)]
pub struct FixAb {
    /// The rule whose fix it is.
    pub rule: String,
    /// The fix (`per-dc`, `retry-shim`, …).
    pub fix: String,
    /// What the lab applied.
    pub applied: String,
    /// `helps`, `no-change`, `worse` (over the rows interpretable before and after; with
    /// repeats, run by run: `mixed` when the runs disagree),
    /// `not-needed` (nothing failed before), `refused`, `left-out` (not named by `--fix`), or
    /// `not-interpretable` (no such row).
    pub verdict: String,
    /// Why, when it was not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Per event: before, after.
    pub rows: Vec<(Outcome, Outcome)>,
}

impl FixAb {
    /// Nothing failed before: nothing to compare.
    pub fn not_needed(f: &OnTarget, r: &Replay) -> FixAb {
        FixAb {
            rule: f.rule.clone(),
            fix: r.id.to_string(),
            applied: r.what.to_string(),
            verdict: "not-needed".into(),
            note: Some(
                "no event it acts on failed (or missed its injection) before the fix".into(),
            ),
            rows: Vec::new(),
        }
    }

    /// Not named by `--fix`: not played.
    pub fn left_out(f: &OnTarget, r: &Replay) -> FixAb {
        FixAb {
            rule: f.rule.clone(),
            fix: r.id.to_string(),
            applied: r.what.to_string(),
            verdict: "left-out".into(),
            note: Some("not played: `--fix` names the fixes to replay".into()),
            rows: Vec::new(),
        }
    }

    /// The fixed configuration could not be played.
    pub fn refused(f: &OnTarget, r: &Replay, why: String) -> FixAb {
        FixAb {
            rule: f.rule.clone(),
            fix: r.id.to_string(),
            applied: r.what.to_string(),
            verdict: "refused".into(),
            note: Some(why),
            rows: Vec::new(),
        }
    }

    /// Before and after, event by event.
    pub fn compared(f: &OnTarget, r: &Replay, before: &[Outcome], after: Vec<Outcome>) -> FixAb {
        let rows: Vec<(Outcome, Outcome)> = after
            .into_iter()
            .filter_map(|a| {
                before
                    .iter()
                    .find(|b| b.event == a.event)
                    .map(|b| (b.clone(), a))
            })
            .collect();
        FixAb {
            rule: f.rule.clone(),
            fix: r.id.to_string(),
            applied: r.what.to_string(),
            verdict: judge(&rows).to_string(),
            note: None,
            rows,
        }
    }
}

/// The fix's effect over its rows, run by run (the k-th run before against the k-th after,
/// the same seed): a clear drop (to half or less of the failed requests, counting NLU) helps;
/// a clear rise is worse; anything between says no change. Runs that disagree in direction
/// are `mixed`.
fn judge(rows: &[(Outcome, Outcome)]) -> &'static str {
    let pairs: Vec<(PerRun, PerRun)> = rows
        .iter()
        .map(|(b, a)| (b.per_run(), a.per_run()))
        .collect();
    let k = pairs
        .iter()
        .map(|(b, a)| b.len().min(a.len()))
        .min()
        .unwrap_or(0);
    let verdicts: Vec<&str> = (0..k)
        .map(|i| judge_one(pairs.iter().map(|(b, a)| (b[i], a[i]))))
        .filter(|v| *v != "not-interpretable")
        .collect();
    match verdicts.first() {
        None => "not-interpretable",
        Some(v) if verdicts.iter().all(|x| x == v) => v,
        Some(_) => "mixed",
    }
}

/// Each run's (tested what it meant to, failed requests).
type PerRun = Vec<(bool, u64)>;

/// One run's rows: only rows that tested what they meant to, on both sides, decide.
fn judge_one(rows: impl Iterator<Item = ((bool, u64), (bool, u64))>) -> &'static str {
    let (mut before, mut after, mut any) = (0u64, 0u64, false);
    for ((bi, b), (ai, a)) in rows {
        if bi && ai {
            before += b;
            after += a;
            any = true;
        }
    }
    if !any {
        "not-interpretable"
    } else if after * 2 <= before {
        "helps"
    } else if after >= before * 2 + 10 {
        "worse"
    } else {
        "no-change"
    }
}

/// What got worse since an earlier card (`--baseline OLD.json`): per target × event played and
/// interpretable in both, the failed requests (client errors or NLU, the larger) at least
/// doubled and 10 more — beyond what one run's noise moves. One line each; an error when `old`
/// is not a card.
pub fn regressions(card: &Card, old: &serde_json::Value) -> Result<Vec<String>, String> {
    if old["schema"] != card.schema.as_str() {
        return Err(format!(
            "not a `resolvelab verify --format json` card (schema {}, expected {})",
            old["schema"], card.schema
        ));
    }
    let empty = Vec::new();
    let mut out = Vec::new();
    for t in &card.targets {
        let Some(was) = old["targets"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .find(|o| o["target"]["name"] == t.target.name.as_str())
        else {
            continue;
        };
        for o in t.outcomes.iter().filter(|o| o.interpretable()) {
            let Some(before) = was["outcomes"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .find(|b| b["event"] == o.event.id() && b["status"] == "completed")
            else {
                continue;
            };
            let n = |k: &str| before[k].as_u64().unwrap_or(0);
            let before = n("client_errors").max(n("nlu"));
            let now = o.client_errors.max(o.nlu);
            if now >= before * 2 + 10 {
                out.push(format!(
                    "`{}` {}: {before} → {now} failed requests",
                    t.target.name,
                    o.event.id()
                ));
            }
        }
    }
    Ok(out)
}

/// The card as a document (Markdown and HTML).
pub fn doc(c: &Card) -> Doc {
    let mut blocks = vec![Block::Para(vec![
        m("Configuration "),
        code(&c.source),
        m(format!(
            ", played on {} at {} requests/s; names answered with TTL {} s. {}",
            c.nginx,
            c.rate,
            c.ttl_s,
            if c.repeat > 1 {
                format!(
                    "{} runs per cell (seeds 1–{}): the median run, the runs' range in brackets; a fix is judged run by run, `mixed` when the runs disagree.",
                    c.repeat, c.repeat
                )
            } else {
                "One run per cell: `--repeat 3` gives each cell its spread.".to_string()
            }
        )),
    ])];
    if c.targets.is_empty() {
        blocks.push(Block::Status(
            true,
            vec![m(
                "No upstream of this configuration gets its peers from DNS: nothing to verify.",
            )],
        ));
    }
    for t in &c.targets {
        target_blocks(t, &c.events, &mut blocks);
    }
    Doc {
        title: "resolvelab verify".into(),
        blocks,
    }
}

fn target_blocks(t: &TargetCard, events: &[Event], out: &mut Vec<Block>) {
    let names: Vec<String> = t
        .target
        .names
        .iter()
        .map(|n| {
            format!(
                "{} ({})",
                n.host,
                if n.at_run_time {
                    "asked while running"
                } else {
                    "resolved at start and reload"
                }
            )
        })
        .collect();
    out.push(Block::Heading(
        2,
        vec![code(&t.target.name), p(format!(" — {}", t.target.at))],
    ));
    out.push(Block::Para(vec![
        m("Names: "),
        p(names.join(", ")),
        m(format!(". Re-query period: {} s.", t.period_s)),
    ]));
    if let Some(names) = &t.tls {
        out.push(Block::Para(vec![
            m("TLS to the backends is played: they present a certificate for the served names"),
            p(if names.is_empty() {
                String::new()
            } else {
                format!(" and {}", names.join(", "))
            }),
            m(", signed by an authority the run makes; your `proxy_ssl_*` lines are kept, except those the changes below list."),
        ]));
    }
    if let Some(why) = &t.refused {
        out.push(Block::Status(false, vec![m("Not played: "), p(why)]));
        return;
    }
    out.push(Block::Heading(3, vec![m("Events")]));
    if t.outcomes.is_empty() {
        out.push(Block::List(
            events
                .iter()
                .map(|e| {
                    let skip = e.needs_run_time() && !t.target.asks_at_run_time();
                    vec![
                        code(e.id()),
                        m(if skip {
                            " (not played: no name is asked for while nginx runs): "
                        } else {
                            ": "
                        }),
                        m(e.describe()),
                    ]
                })
                .collect(),
        ));
    } else {
        out.push(Block::Table(outcome_table(&t.outcomes)));
    }
    for o in t.outcomes.iter().filter(|o| o.skipped.is_some()) {
        out.push(Block::Para(vec![
            code(o.event.id()),
            m(" not played: "),
            p(o.skipped.clone().unwrap_or_default()),
        ]));
    }
    if !t.findings.is_empty() {
        out.push(Block::Heading(3, vec![m("Fixes, before → after")]));
        out.push(Block::Table(fix_table(t)));
    }
    if let Some(d) = &t.per_day {
        per_day_blocks(d, out);
    }
    out.push(Block::Heading(
        3,
        vec![m("What the lab changed to play it")],
    ));
    out.push(Block::Table(changes_table(&t.changes)));
    if let Some(body) = &t.lab_config {
        out.push(Block::Details(
            vec![m("The configuration the lab ran")],
            body.clone(),
        ));
    }
}

fn outcome_table(rows: &[Outcome]) -> Table {
    Table {
        id: Some("events"),
        cols: vec![
            ("event", false),
            ("client errors", true),
            ("of requests", true),
            ("NLU", true),
            ("longest incident", true),
            ("classes", false),
            ("status", false),
        ],
        rows: rows
            .iter()
            .filter(|o| o.played())
            .map(|o| {
                let mut status = o.status.clone();
                if !o.interpretable() && !o.summary.is_empty() {
                    status = format!("{status}: {}", o.summary);
                }
                if o.reload_refused {
                    status.push_str("; reload refused");
                } else if o.event == Event::ReloadNxdomain {
                    status.push_str("; reload accepted");
                }
                match (o.start.as_deref(), o.down_ms) {
                    (Some("ok"), _) => status.push_str("; the restart started"),
                    (Some(no), down) => status.push_str(&format!(
                        "; the restart's start failed ({}): nginx down {}, every server refusing",
                        no.trim_start_matches("refused: "),
                        down.map_or("to the end".into(), |ms| format!(
                            "{:.1} s",
                            ms as f64 / 1000.0
                        ))
                    )),
                    (None, _) => {}
                }
                vec![
                    Cell::from(code(o.event.id())).link(o.run_dir.clone()),
                    n(o.spread(|r| r.client_errors, o.client_errors)),
                    n(o.requests),
                    n(o.spread(|r| r.nlu, o.nlu)),
                    n(o.outage_ms
                        .map_or("—".into(), |ms| format!("{:.1} s", ms as f64 / 1000.0))),
                    p(if o.classes.is_empty() {
                        "—".into()
                    } else {
                        o.classes.join(", ")
                    })
                    .into(),
                    n(status),
                ]
            })
            .collect(),
        keyed: false,
    }
}

fn fix_table(t: &TargetCard) -> Table {
    let mut rows = Vec::new();
    for f in &t.findings {
        if let Some(why) = &f.not_replayed {
            rows.push(vec![
                code(&f.rule).into(),
                p(&f.at).into(),
                m(why).into(),
                n("—"),
            ]);
        }
        for r in &f.replays {
            let ab = t.fixes.iter().find(|x| x.fix == r.id && x.rule == f.rule);
            let what = match ab {
                None => format!("{}: not played", r.what),
                Some(ab) if ab.rows.is_empty() => {
                    format!("{}: {}", ab.applied, ab.note.clone().unwrap_or_default())
                }
                Some(ab) => {
                    let cells: Vec<String> = ab.rows.iter().map(|(b, a)| ab_cell(b, a)).collect();
                    format!("{}; {}", ab.applied, cells.join("; "))
                }
            };
            rows.push(vec![
                code(&f.rule).into(),
                p(&f.at).into(),
                m(what).into(),
                n(ab.map_or("—".to_string(), |a| a.verdict.clone())),
            ]);
        }
    }
    Table {
        id: Some("fixes"),
        cols: vec![
            ("rule", false),
            ("at", false),
            ("replayed", false),
            ("verdict", false),
        ],
        rows,
        keyed: false,
    }
}

/// `event: errors B → A, NLU B → A` (and the failed methods after, when not all GET).
fn ab_cell(b: &Outcome, a: &Outcome) -> String {
    let mut s = format!(
        "{}: errors {} → {}, NLU {} → {}",
        b.event.id(),
        b.spread(|r| r.client_errors, b.client_errors),
        a.spread(|r| r.client_errors, a.client_errors),
        b.spread(|r| r.nlu, b.nlu),
        a.spread(|r| r.nlu, a.nlu)
    );
    if !a.interpretable() {
        s.push_str(" (after: not interpretable)");
    }
    if a.failed_methods.keys().any(|k| k != "GET") {
        let by: Vec<String> = a
            .failed_methods
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s.push_str(&format!(" (failed after: {})", by.join(", ")));
    }
    s
}

/// `--per-day`: the model's day, a row per variant.
fn per_day_blocks(d: &PerDay, out: &mut Vec<Block>) {
    out.push(Block::Heading(
        3,
        vec![m(format!("A day at {} requests/s (the model)", d.rps))],
    ));
    if let Some(why) = &d.refused {
        out.push(Block::Para(vec![m("Not predicted: "), p(why)]));
        return;
    }
    out.push(Block::Para(vec![m(format!(
        "Your upstream on the model under production's churn: the answer changes at every re-query and a reused connection's first try fails with probability {}; {} s of traffic per variant scaled to a day (95 % interval). `resolvelab sim predict` explains the variants.",
        d.first_try_failure, d.sample_s
    ))]));
    let per_day = |x: &resolvelab_sim::nginx::predict::PerDay| {
        if x.count == 0 {
            format!("0 (< {:.0})", x.hi)
        } else {
            format!("{:.0} ({:.0}–{:.0})", x.per_day, x.lo, x.hi)
        }
    };
    out.push(Block::Table(Table {
        id: Some("per-day"),
        cols: vec![
            ("variant", false),
            ("NLU per day", true),
            ("other 502 per day", true),
            ("change", false),
        ],
        rows: d
            .rows
            .iter()
            .map(|r| {
                vec![
                    code(&r.variant).into(),
                    n(per_day(&r.total)),
                    n(per_day(&r.upstream_failures)),
                    m(&r.change).into(),
                ]
            })
            .collect(),
        keyed: false,
    }));
}

fn changes_table(changes: &[Change]) -> Table {
    Table {
        id: Some("changes"),
        cols: vec![
            ("at", false),
            ("change", false),
            ("was", false),
            ("now", false),
            ("why", false),
        ],
        rows: changes
            .iter()
            .map(|c| {
                vec![
                    p(&c.at).into(),
                    n(format!("{:?}", c.kind).to_lowercase()),
                    code(&c.was).into(),
                    c.now.as_ref().map_or_else(|| n("—"), |x| code(x).into()),
                    m(&c.why).into(),
                ]
            })
            .collect(),
        keyed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find::{Name, Via};

    fn card(errors: u64, nlu: u64) -> Card {
        let mut o = Outcome::skipped(Event::Nxdomain, String::new());
        o.skipped = None;
        o.status = "completed".into();
        o.client_errors = errors;
        o.nlu = nlu;
        Card {
            schema: resolvelab_core::evidence::schema::VERIFY.into(),
            source: "nginx.conf".into(),
            nginx: "nginx".into(),
            rate: 200,
            ttl_s: 10,
            events: vec![Event::Nxdomain],
            repeat: 1,
            targets: vec![TargetCard {
                target: Target {
                    name: "be".into(),
                    via: Via::Upstream,
                    at: "nginx.conf:3".into(),
                    names: vec![Name {
                        host: "api.example.com".into(),
                        at_run_time: true,
                    }],
                    locations: vec!["/".into()],
                },
                refused: None,
                period_s: 6,
                changes: Vec::new(),
                lab_config: None,
                outcomes: vec![o],
                findings: Vec::new(),
                fixes: Vec::new(),
                per_day: None,
                tls: None,
            }],
        }
    }

    #[test]
    fn a_baseline_flags_only_what_got_clearly_worse() {
        let old = serde_json::to_value(card(1200, 1200)).unwrap();
        assert!(regressions(&card(1500, 1500), &old).unwrap().is_empty());
        assert!(regressions(&card(0, 0), &old).unwrap().is_empty());
        let worse = regressions(&card(1200, 2410), &old).unwrap();
        assert_eq!(worse, vec!["`be` nxdomain: 1200 → 2410 failed requests"]);
        // From nothing, ten failures are beyond one run's noise.
        let zero = serde_json::to_value(card(0, 0)).unwrap();
        assert_eq!(regressions(&card(10, 0), &zero).unwrap().len(), 1);
        assert_eq!(regressions(&card(9, 0), &zero).unwrap().len(), 0);
        assert!(regressions(&card(1, 1), &serde_json::json!({"schema": "x"})).is_err());
    }

    fn outcome(status: &str, errors: u64) -> Outcome {
        let mut o = Outcome::skipped(Event::Restart, String::new());
        o.skipped = None;
        o.status = status.into();
        o.client_errors = errors;
        o
    }

    fn repeated(runs: &[(&str, u64)]) -> Outcome {
        let each = runs.iter().map(|(s, e)| outcome(s, *e)).collect();
        Outcome::median_of(each, (1..=runs.len() as u64).collect())
    }

    #[test]
    fn repeats_show_the_median_run_and_judge_run_by_run() {
        // The median of the runs that tested what they meant to; a spoiled run spoils the cell.
        let o = repeated(&[("completed", 400), ("completed", 10), ("completed", 390)]);
        assert_eq!((o.client_errors, o.status.as_str()), (390, "completed"));
        assert_eq!(
            o.spread(|r| r.client_errors, o.client_errors),
            "390 (10–400)"
        );
        assert_eq!(o.runs.iter().map(|r| r.seed).collect::<Vec<_>>(), [1, 2, 3]);
        let spoiled = repeated(&[("completed", 400), ("not-interpretable", 0)]);
        assert_eq!(spoiled.client_errors, 400);
        assert_eq!(spoiled.status, "not-interpretable");
        assert!(
            spoiled.summary.starts_with("1 of 2 runs did not test"),
            "{}",
            spoiled.summary
        );
        // Run by run: all agree → that verdict; disagreeing directions → mixed.
        let before = repeated(&[("completed", 400), ("completed", 400), ("completed", 400)]);
        let helps = repeated(&[("completed", 0), ("completed", 10), ("completed", 150)]);
        assert_eq!(judge(&[(before.clone(), helps)]), "helps");
        let mixed = repeated(&[("completed", 0), ("completed", 900), ("completed", 0)]);
        assert_eq!(judge(&[(before.clone(), mixed)]), "mixed");
        // A run not interpretable on one side leaves the others to decide.
        let one_spoiled = repeated(&[
            ("completed", 0),
            ("not-interpretable", 900),
            ("completed", 0),
        ]);
        assert_eq!(judge(&[(before, one_spoiled)]), "helps");
        // One run each: as before.
        assert_eq!(
            judge(&[(outcome("completed", 400), outcome("completed", 400))]),
            "no-change"
        );
        assert_eq!(
            judge(&[(outcome("completed", 0), outcome("completed", 10))]),
            "worse"
        );
    }

    #[test]
    fn markdown_and_json_say_the_same_numbers() {
        let c = card(1200, 1100);
        let md = resolvelab_core::doc::markdown::render(&doc(&c));
        assert!(md.contains("| `nxdomain` | 1200 | 0 | 1100 |"), "{md}");
        let html = resolvelab_core::doc::html::render(&doc(&c), "");
        assert!(html.contains("1200") && html.contains("api.example.com"));
    }
}
