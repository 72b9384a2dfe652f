//! Your nginx configuration in the lab (`resolvelab verify`): every upstream whose peers come
//! from DNS is found with the linter's parser ([`find`]), the configuration is made playable
//! with each change listed ([`rewrite`]), the library's events are played on real nginx as
//! scenario files of the lab's own format ([`events`]), the linter's fixes are applied to a copy
//! and the same events played again ([`fixes`]), and everything lands on a report card
//! ([`card`]: Markdown, JSON, HTML).
//!
//! Planning needs no nginx and runs nothing:
//!
//! ```
//! use resolvelab_verify::{Request, prepare};
//! let conf = "http {\n resolver 10.0.0.53 valid=5s;\n upstream be { zone be 64k; server api.example.com:443 resolve; }\n server { listen 80; location / { proxy_pass https://be; } }\n}\n";
//! let cfg = resolvelab_lint::load::load_text("nginx.conf", conf.into(), None).unwrap();
//! let plans = prepare(&cfg, &Request::default());
//! assert_eq!(plans[0].target.name, "be");
//! let lab = plans[0].lab.as_ref().unwrap();
//! assert!(lab.body.contains("resolver \"{dns}\" valid=5s;"));
//! ```

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod card;
mod edit;
pub mod events;
pub mod find;
pub mod fixes;
pub mod model;
pub mod perday;
pub mod rewrite;
pub mod shim;

use card::{Card, FixAb, Outcome, TargetCard};
use events::{Event, Settings};
use find::Target;
use resolvelab_core::progress;
use resolvelab_lab::engine::Engine;
use resolvelab_lab::options::RunOptions;
use resolvelab_lint::load::Config;
use rewrite::LabConfig;
use std::path::Path;

/// What to verify and how.
#[derive(Debug, Clone)]
pub struct Request {
    /// The events to play (default: all).
    pub events: Vec<Event>,
    /// Only these targets (upstream names or hosts); empty: every DNS-fed target.
    pub only: Vec<String>,
    /// Load and DNS settings shared by every run.
    pub settings: Settings,
    /// The rewrite's choices (`--path`, `--drop`).
    pub rewrite: rewrite::Options,
    /// Which of the linter's fixes to replay on the events that failed.
    pub fixes: fixes::Selection,
    /// Play on the model (`--quick`) instead of real nginx.
    pub model: bool,
    /// Runs per event (seeds 1 to N): a cell's spread, a fix judged run by run.
    pub repeat: u32,
    /// Also predict a day at this traffic on the model (`--per-day`).
    pub per_day: Option<perday::Traffic>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            events: Event::ALL.to_vec(),
            only: Vec::new(),
            settings: Settings::default(),
            rewrite: rewrite::Options::default(),
            fixes: fixes::Selection::All,
            model: false,
            repeat: 1,
            per_day: None,
        }
    }
}

/// One target, planned: its lab configuration (or why it cannot be played) and its findings.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The target.
    pub target: Target,
    /// The lab's configuration, or the refusal (`file:line: why`).
    pub lab: Result<LabConfig, String>,
    /// The linter's findings on it.
    pub findings: Vec<fixes::OnTarget>,
}

/// Every DNS-fed target of `cfg` (read in its context: a conf.d fragment as `http {}`),
/// planned. Nothing runs.
pub fn prepare(cfg: &Config, req: &Request) -> Vec<Planned> {
    find::targets(cfg)
        .into_iter()
        .filter(|t| req.only.is_empty() || req.only.iter().any(|o| o.eq_ignore_ascii_case(&t.name)))
        .map(|target| Planned {
            lab: if target.locations.is_empty() {
                Err(format!(
                    "{}: no location sends to `{}`: nginx resolves it, but no request reaches it — nothing to play",
                    target.at, target.name
                ))
            } else {
                rewrite::lab_config(cfg, &target, &req.rewrite).map_err(|e| e.to_string())
            },
            findings: fixes::on_target(cfg, &target),
            target,
        })
        .collect()
}

/// Play every planned target's events on `engine`, the fixes' A/B too, writing each event's
/// scenario file under `dir/scenarios/` and its run directory under `opts.out`.
pub fn run(
    cfg: &Config,
    plans: &[Planned],
    req: &Request,
    engine: &dyn Engine,
    opts: &RunOptions,
    dir: &Path,
) -> anyhow::Result<Vec<TargetCard>> {
    std::fs::create_dir_all(dir.join("scenarios"))?;
    let mut cards = Vec::new();
    for p in plans {
        let mut card = TargetCard::planned(p, &req.settings);
        let Ok(lab) = &p.lab else {
            cards.push(card);
            continue;
        };
        let player = Player {
            req,
            engine,
            opts,
            dir,
        };
        match player.play_all(cfg, (&p.target, lab), &req.events, &req.settings, "") {
            Ok(o) => card.outcomes = o,
            Err(e) => {
                card.refused = Some(match e.downcast_ref::<EngineRefused>() {
                    // The engine names the lab configuration's line: the user's is the target's.
                    Some(EngineRefused(why)) => format!(
                        "{}: {}: verify it with `--engine nginx` (1.28.3) or `nginx-1.31` — nothing was run",
                        p.target.at,
                        engine_reason(why)
                    ),
                    None => explain(cfg, &e),
                });
                cards.push(card);
                continue;
            }
        }
        if req.fixes != fixes::Selection::None {
            card.fixes = replay_fixes(&player, cfg, p, &card.outcomes)?;
        }
        if let Some(t) = &req.per_day {
            progress::line(format!(
                "verify: `{}`: a day at {} requests/s on the model",
                p.target.name, t.rps
            ));
            let got = perday::predict(cfg, &p.target, lab, &req.settings, t);
            card.per_day = Some(card::PerDay {
                rps: t.rps,
                first_try_failure: t.first_try_failure,
                sample_s: t.sample.0 / 1_000_000,
                refused: got.as_ref().err().cloned(),
                rows: got.unwrap_or_default(),
            });
        }
        cards.push(card);
    }
    Ok(cards)
}

/// Why nginx would not play the configuration, in the user's terms: a directive the lab's
/// nginx does not know is named at its line, with the way to play without it.
fn explain(cfg: &Config, e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let unknown = text
        .split("unknown directive \"")
        .nth(1)
        .and_then(|r| r.split('"').next());
    if let Some(name) = unknown
        && let Some(http) = find::http(cfg)
        && let Some(d) = find::all(http.children())
            .into_iter()
            .find(|d| d.name.value == name)
    {
        return format!(
            "{}: `{name}` is not a directive of the lab's nginx (a third-party module's?): pass `--drop {name}` to play without it (the card lists it) — nothing was run",
            find::at(cfg, d)
        );
    }
    text
}

/// The engine cannot play the configuration at all (nginx 1.22 and `resolve`): a target's card
/// says so, and a fix that needs it is refused rather than the verification stopped.
#[derive(Debug)]
struct EngineRefused(String);

impl std::fmt::Display for EngineRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineRefused {}

/// The engine's reason without the scenario's field before it or the scenario-format advice
/// after it (`nginx.inline line 4: nginx 1.22.1 has no … ; on 1.22 …`): the user's words.
fn engine_reason(why: &str) -> &str {
    let reason = why.split_once(": ").map_or(why, |(_, r)| r);
    reason.split(';').next().unwrap_or(reason).trim()
}

/// What every run of one verification shares.
struct Player<'a> {
    req: &'a Request,
    engine: &'a dyn Engine,
    opts: &'a RunOptions,
    dir: &'a Path,
}

impl Player<'_> {
    /// Each event on one configuration (`cfg`, as the lab runs it: `lab`); `tag` names a fix's
    /// replay in file names.
    fn play_all(
        &self,
        cfg: &Config,
        (target, lab): (&Target, &LabConfig),
        wanted: &[Event],
        settings: &Settings,
        tag: &str,
    ) -> anyhow::Result<Vec<Outcome>> {
        let mut out = Vec::new();
        for (i, &event) in wanted.iter().enumerate() {
            if resolvelab_lab::runner::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
                anyhow::bail!("interrupted: the card holds what ran before");
            }
            if event.needs_run_time() && !target.asks_at_run_time() {
                out.push(Outcome::skipped(
                    event,
                    format!(
                        "nginx asks for `{}` only when it starts and at each reload: a DNS change reaches it only through a reload (see reload-nxdomain and move)",
                        target.names.first().map_or("", |n| n.host.as_str())
                    ),
                ));
                continue;
            }
            progress::line(format!(
                "verify: `{}`{tag}: {} ({}/{})",
                target.name,
                event.id(),
                i + 1,
                wanted.len()
            ));
            let text = if self.req.model {
                events::model_scenario(cfg, target, lab, event, settings)
                    .map_err(|e| anyhow::anyhow!("{}: the model cannot play it: {e}", target.at))?
            } else {
                events::scenario(target, lab, event, settings)
            };
            let file = self.dir.join("scenarios").join(format!(
                "{}{}-{}.toml",
                events::slug(&target.name),
                tag.replace(' ', "-"),
                event.id()
            ));
            std::fs::write(&file, &text)?;
            let sc = resolvelab_scenario::Scenario::from_toml(&text, &file.display().to_string())?;
            if let Some(why) = self.engine.refuses(&sc) {
                return Err(EngineRefused(why).into());
            }
            let mut runs = Vec::new();
            for seed in 1..=u64::from(self.req.repeat.max(1)) {
                // One run keeps the caller's seed; repeats take seeds 1 to N.
                let opts = RunOptions {
                    seed: if self.req.repeat > 1 {
                        Some(seed)
                    } else {
                        self.opts.seed
                    },
                    ..self.opts.clone()
                };
                runs.push((
                    seed,
                    resolvelab_lab::judge::run_and_judge(&sc, &opts, self.engine)?,
                ));
            }
            out.push(Outcome::of_runs(event, &runs, &file));
        }
        Ok(out)
    }
}

/// For each finding with a replayable fix: the fixed copy, played on the events that had
/// client errors or NLU before, or did not test what they meant to.
fn replay_fixes(
    player: &Player,
    cfg: &Config,
    p: &Planned,
    before: &[Outcome],
) -> anyhow::Result<Vec<FixAb>> {
    let failed: Vec<Event> = before
        .iter()
        // Also what did not test what it meant to: a fix may make it reachable (keep-alive
        // made effective lets the backends' idle-connection closes hit).
        .filter(|o| o.played() && (o.client_errors > 0 || o.nlu > 0 || !o.interpretable()))
        .map(|o| o.event)
        .collect();
    let mut out: Vec<FixAb> = Vec::new();
    for f in &p.findings {
        for r in &f.replays {
            if out.iter().any(|x| x.fix == r.id) {
                continue;
            }
            if !player.req.fixes.wants(&f.rule, r.id) {
                out.push(FixAb::left_out(f, r));
                continue;
            }
            let on: Vec<Event> = failed
                .iter()
                .copied()
                .filter(|e| fixes::acts_on(r.id).contains(e))
                .collect();
            out.push(if on.is_empty() {
                FixAb::not_needed(f, r)
            } else {
                replay_one(player, cfg, p, (f, r), before, &on)?
            });
        }
    }
    Ok(out)
}

/// One fix on a copy of the configuration, played on `failed`.
fn replay_one(
    player: &Player,
    cfg: &Config,
    p: &Planned,
    (f, r): (&fixes::OnTarget, &fixes::Replay),
    before: &[Outcome],
    failed: &[Event],
) -> anyhow::Result<FixAb> {
    let fixed = fixes::apply(cfg, &p.target, r.id);
    // The fixed configuration's own target (per-DC names replace the GSLB name).
    let target = find::targets(&fixed)
        .into_iter()
        .find(|t| t.name.eq_ignore_ascii_case(&p.target.name))
        .unwrap_or_else(|| p.target.clone());
    let lab = match rewrite::lab_config(&fixed, &target, &player.req.rewrite) {
        Ok(l) => l,
        Err(e) => return Ok(FixAb::refused(f, r, e.to_string())),
    };
    let mut settings = player.req.settings.clone();
    settings.fixed_names |= r.id == "per-dc";
    let tag = format!(" fix {}", r.id);
    match player.play_all(&fixed, (&target, &lab), failed, &settings, &tag) {
        Ok(after) => Ok(FixAb::compared(f, r, before, after)),
        Err(e) => match e.downcast_ref::<EngineRefused>() {
            Some(why) => Ok(FixAb::refused(
                f,
                r,
                format!(
                    "the nginx verified cannot play the fix: {}",
                    engine_reason(&why.0)
                ),
            )),
            None => Err(e),
        },
    }
}

/// The card of a whole verification.
pub fn card(source: &str, nginx: &str, req: &Request, targets: Vec<TargetCard>) -> Card {
    Card {
        schema: resolvelab_core::evidence::schema::VERIFY.to_string(),
        source: source.to_string(),
        nginx: nginx.to_string(),
        rate: req.settings.rate,
        ttl_s: req.settings.ttl.as_secs(),
        events: req.events.clone(),
        repeat: req.repeat.max(1),
        targets,
    }
}
