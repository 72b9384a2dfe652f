//! The linter's fixes applied to a copy of the user's configuration, so that the same events
//! can be played before and after (the seed report's "설정 전후 비교", on the user's file).
//!
//! A fix is a rule id and an edit of the parsed configuration; only fixes the lab can apply
//! without guessing are here. A finding whose fix needs what only the user knows (per-DC names
//! their DNS has, the backends' idle timeout) is listed on the card as not replayed, with why.

use crate::edit::{line, word};
use crate::events::Event;
use crate::find::{self, Target, Via};
use resolvelab_lint::load::Config;
use resolvelab_lint::parse::Directive;
use resolvelab_lint::{Finding, LintOptions};
use serde::Serialize;

/// A lint finding on one target, and the fixes the lab can replay for it.
#[derive(Debug, Clone, Serialize)]
pub struct OnTarget {
    /// The rule.
    pub rule: String,
    /// `file:line`.
    pub at: String,
    /// The finding's message.
    pub message: String,
    /// The fix the linter proposes.
    pub fix: String,
    /// The edits the lab replays for it (a finding may have two ways out).
    pub replays: Vec<Replay>,
    /// Why nothing is replayed, when `replays` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_replayed: Option<String>,
}

/// One replayable fix: its id and what the lab applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Replay {
    /// The fix's id (`per-dc`, `max-fails-0`, …).
    pub id: &'static str,
    /// What the lab applies.
    pub what: &'static str,
}

/// The edits: `(rule, fix id, what the lab applies)`; a rule may have several.
const EDITS: [(&str, &str, &str); 10] = [
    (
        "resolve-single-name",
        "per-dc",
        "per-DC names `dc1.NAME`, `dc2.NAME` (`resolve max_fails=2 fail_timeout=5s`), each answering one fixed address: names your DNS would have to serve",
    ),
    (
        "resolve-single-name",
        "retry-shim",
        "`error_page 502 = @resolvelab_retry;` and the named location retrying once, GET/HEAD/OPTIONS only",
    ),
    (
        "retry-shim-no-method-guard",
        "method-guard",
        "`if ($request_method !~ ^(GET|HEAD|OPTIONS)$) { return 502; }` in the retry location",
    ),
    (
        "keepalive-ineffective",
        "keepalive-http11",
        "`proxy_http_version 1.1; proxy_set_header Connection \"\";` where the upstream is proxied",
    ),
    (
        "resolve-max-fails",
        "max-fails-0",
        "`max_fails=0` on the upstream's server lines",
    ),
    (
        "backup-max-fails",
        "max-fails-0",
        "`max_fails=0` on the upstream's server lines",
    ),
    (
        "resolver-valid-long",
        "valid-5s",
        "`valid=5s` on every resolver line",
    ),
    (
        "resolve-no-zone",
        "zone-1m",
        "`zone NAME 1m;` in the upstream",
    ),
    (
        "zone-too-small",
        "zone-1m",
        "`zone NAME 1m;` in the upstream",
    ),
    (
        "resolve-once",
        "resolve",
        "`resolve` on the upstream's named server lines, with a zone and a resolver",
    ),
];

/// Which of the linter's fixes a verification replays (`--fix`, `--no-fixes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every replayable fix.
    #[default]
    All,
    /// None: the events only.
    None,
    /// These fixes, each named by its id (`max-fails-0`) or by its rule (`resolve-max-fails`,
    /// every fix of the rule); checked by [`Selection::only`].
    Only(Vec<String>),
}

impl Selection {
    /// The fixes named by `ids` (fix or rule ids), or the first name that is neither, with the
    /// names there are.
    pub fn only(ids: &[String]) -> Result<Selection, String> {
        for id in ids {
            if !EDITS.iter().any(|(rule, fix, _)| id == rule || id == fix) {
                let mut fixes: Vec<&str> = EDITS.iter().map(|(_, fix, _)| *fix).collect();
                let mut rules: Vec<&str> = EDITS.iter().map(|(rule, _, _)| *rule).collect();
                fixes.sort_unstable();
                fixes.dedup();
                rules.sort_unstable();
                rules.dedup();
                return Err(format!(
                    "--fix {id}: no replayable fix or rule of that name; fixes: {}; or a rule that has one ({})",
                    fixes.join(", "),
                    rules.join(", ")
                ));
            }
        }
        Ok(Selection::Only(ids.to_vec()))
    }

    /// Whether the fix `fix` of the finding of `rule` is replayed.
    pub fn wants(&self, rule: &str, fix: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::None => false,
            Selection::Only(ids) => ids.iter().any(|id| id == rule || id == fix),
        }
    }
}

/// The findings of `lint` on the target (inside its upstream block, on a location or pass
/// that sends to it, or on a resolver line), with their replays.
pub fn on_target(cfg: &Config, target: &Target) -> Vec<OnTarget> {
    let report = resolvelab_lint::lint_config(cfg.clone(), &LintOptions::default());
    let range = block_range(cfg, target);
    let mut out: Vec<OnTarget> = Vec::new();
    for f in &report.findings {
        if !concerns(cfg, f, range.as_ref(), target) {
            continue;
        }
        let at = format!("{}:{}", f.file, f.line);
        if out.iter().any(|o| o.rule == f.rule && o.at == at) {
            continue;
        }
        let mut replays: Vec<Replay> = EDITS
            .iter()
            .filter(|(r, _, _)| *r == f.rule)
            .map(|&(_, id, what)| Replay { id, what })
            .collect();
        let mut not_replayed = None;
        if f.rule == "resolve-once" && target.via != Via::Upstream {
            replays.clear();
            not_replayed = Some("`resolve` needs an upstream block; for a `proxy_pass` to a name the fix is a variable `proxy_pass` with a resolver (not replayed yet)".to_string());
        } else if replays.is_empty() {
            not_replayed = Some(not_replayed_why(&f.rule).to_string());
        }
        out.push(OnTarget {
            rule: f.rule.clone(),
            at,
            message: f.message.clone(),
            fix: f.fix.clone(),
            replays,
            not_replayed,
        });
    }
    out
}

/// The events a fix can act on, by the mechanism it changes: only these are replayed (the
/// others would cost a run each to show what the mechanism says, and the A/B stays within the
/// time a user waits). Per-DC names change which peers exist, so every event.
pub fn acts_on(id: &str) -> &'static [Event] {
    use Event::*;
    match id {
        // A peer disabled after failed tries: a backend failure or reused-connection failures.
        "max-fails-0" => &[SwapRace, Restart, Move],
        // When nginx asks again.
        "valid-5s" => &[Nxdomain, Servfail, Silence, Move, ReloadNxdomain],
        // Reused connections, and a retry in the next generation.
        "keepalive-http11" | "retry-shim" | "method-guard" => &[SwapRace, Restart, Move],
        // Room for the answers' peers.
        "zone-1m" => &[SwapRace, Move],
        // A name asked again while nginx runs.
        "resolve" => &[Nxdomain, Move, ReloadNxdomain],
        _ => &Event::ALL,
    }
}

/// Why a finding's fix is not replayed.
fn not_replayed_why(rule: &str) -> &'static str {
    match rule {
        "resolver-ipv6" => {
            "the lab's authority answers no AAAA record, so `ipv6=off` changes nothing here: `resolvelab run aaaa-pollution` plays what an AAAA answer costs"
        }
        "retry-shim-recursive" => {
            "not replayed yet: `resolvelab run retry-shim` plays the shim without recursion"
        }
        _ => "not replayed: the fix is a choice only you can make here",
    }
}

/// The file and line range of the target's upstream block.
fn block_range(cfg: &Config, target: &Target) -> Option<(String, u32, u32)> {
    let http = find::http(cfg)?;
    let u = upstream_block(http.children(), &target.name)?;
    let file = cfg.files.get(u.file)?.name.clone();
    Some((file, u.name.span.line, u.end_line))
}

fn upstream_block<'a>(dirs: &'a [Directive], name: &str) -> Option<&'a Directive> {
    dirs.iter().find(|d| {
        d.name.value == "upstream" && d.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(name))
    })
}

fn concerns(
    cfg: &Config,
    f: &Finding,
    range: Option<&(String, u32, u32)>,
    target: &Target,
) -> bool {
    if let Some((file, a, b)) = range
        && *file == f.file
        && (*a..=*b).contains(&f.line)
    {
        return true;
    }
    if f.rule == "resolver-ipv6" || f.rule == "resolver-valid-long" {
        return target.asks_at_run_time();
    }
    // A finding on the pass itself (resolve-once on `proxy_pass http://NAME`).
    target.via != Via::Upstream && target.at == format!("{}:{}", f.file, f.line)
        || lines_of_passes(cfg, target).contains(&(f.file.clone(), f.line))
}

fn lines_of_passes(cfg: &Config, target: &Target) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let Some(http) = find::http(cfg) else {
        return out;
    };
    for d in find::all(http.children()) {
        if d.name.value == "proxy_pass"
            && resolvelab_lint::facts::proxy_target(d)
                .is_some_and(|t| t.eq_ignore_ascii_case(&target.name))
            && let Some(file) = cfg.files.get(d.file)
        {
            out.push((file.name.clone(), d.name.span.line));
        }
    }
    out
}

/// A copy of `cfg` with the fix `id` applied to the target.
pub fn apply(cfg: &Config, target: &Target, id: &str) -> Config {
    let mut out = cfg.clone();
    let Some(http) = out.root.iter_mut().find(|d| d.name.value == "http") else {
        return out;
    };
    let kids = http.block.get_or_insert_with(Vec::new);
    match id {
        "max-fails-0" => {
            for s in servers_of(kids, &target.name) {
                set_param(s, "max_fails", "0");
            }
        }
        "ipv6-off" => each_resolver(kids, &mut |r| set_param(r, "ipv6", "off")),
        "valid-5s" => each_resolver(kids, &mut |r| set_param(r, "valid", "5s")),
        "zone-1m" => set_zone(kids, &target.name),
        "keepalive-http11" => keep_alive(kids, &target.name),
        "per-dc" => per_dc(kids, &target.name),
        "retry-shim" => crate::shim::add(kids, &target.name),
        "method-guard" => crate::shim::guard(kids),
        "resolve" => {
            for s in servers_of(kids, &target.name) {
                let named = s.arg(0).and_then(resolvelab_lint::facts::host_of).is_some();
                if named && !s.args.iter().any(|a| a.value == "resolve") {
                    s.args.push(word("resolve"));
                }
            }
            set_zone(kids, &target.name);
            let mut has = false;
            each_resolver(kids, &mut |_| has = true);
            if !has {
                let near = kids.first().cloned();
                if let Some(near) = near {
                    kids.insert(
                        0,
                        Directive {
                            name: word("resolver"),
                            args: vec![word("127.0.0.53"), word("valid=5s")],
                            block: None,
                            ..near
                        },
                    );
                }
            }
        }
        _ => {}
    }
    out
}

/// `proxy_http_version 1.1; proxy_set_header Connection "";` in every block whose
/// `proxy_pass` sends to `name` (an inherited `proxy_set_header` list is replaced by the
/// block's own, so the new one goes beside the block's others).
fn keep_alive(dirs: &mut [Directive], name: &str) {
    for d in dirs.iter_mut() {
        let Some(kids) = d.block.as_mut() else {
            continue;
        };
        let passes = kids.iter().any(|c| {
            c.name.value == "proxy_pass"
                && resolvelab_lint::facts::proxy_target(c)
                    .is_some_and(|t| t.eq_ignore_ascii_case(name))
        });
        if passes {
            let near = kids.iter().find(|c| c.name.value == "proxy_pass").cloned();
            if let Some(near) = near {
                kids.retain(|c| {
                    c.name.value != "proxy_http_version"
                        && !(c.name.value == "proxy_set_header"
                            && c.arg(0)
                                .is_some_and(|h| h.eq_ignore_ascii_case("connection")))
                });
                kids.push(line(&near, "proxy_http_version", &["1.1"]));
                kids.push(line(&near, "proxy_set_header", &["Connection", ""]));
            }
        }
        keep_alive(kids, name);
    }
}

/// The seed's recommended design (section 5-2): each primary `resolve` line of one name becomes
/// two lines of fixed per-DC names, `max_fails=2 fail_timeout=5s`.
fn per_dc(kids: &mut [Directive], name: &str) {
    for u in kids.iter_mut().filter(|d| {
        d.name.value == "upstream" && d.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(name))
    }) {
        let Some(block) = u.block.as_mut() else {
            continue;
        };
        let mut out = Vec::new();
        for d in block.drain(..) {
            let single = d.name.value == "server"
                && d.args.iter().any(|a| a.value == "resolve")
                && !d.args.iter().any(|a| a.value == "backup");
            let host = d.arg(0).and_then(resolvelab_lint::facts::host_of);
            let (true, Some(host)) = (single, host) else {
                out.push(d);
                continue;
            };
            let port = d
                .arg(0)
                .and_then(|a| a.rsplit_once(':'))
                .map(|(_, p)| format!(":{p}"))
                .unwrap_or_default();
            for dc in ["dc1", "dc2"] {
                let mut line = d.clone();
                line.args = vec![
                    word(&format!("{dc}.{host}{port}")),
                    word("resolve"),
                    word("max_fails=2"),
                    word("fail_timeout=5s"),
                ];
                out.push(line);
            }
        }
        // A name written twice (two `resolve` lines) becomes one pair.
        out.dedup_by(|a, b| a.name.value == "server" && a.args == b.args);
        *block = out;
    }
}

fn servers_of<'a>(kids: &'a mut [Directive], name: &str) -> Vec<&'a mut Directive> {
    kids.iter_mut()
        .filter(|d| {
            d.name.value == "upstream" && d.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
        .flat_map(|u| u.block.iter_mut().flatten())
        .filter(|s| s.name.value == "server")
        .collect()
}

fn each_resolver(dirs: &mut [Directive], f: &mut dyn FnMut(&mut Directive)) {
    for d in dirs {
        if d.name.value == "resolver" {
            f(d);
        }
        if let Some(kids) = d.block.as_mut() {
            each_resolver(kids, f);
        }
    }
}

fn set_param(d: &mut Directive, key: &str, value: &str) {
    let prefix = format!("{key}=");
    let w = word(&format!("{key}={value}"));
    match d.args.iter_mut().find(|a| a.value.starts_with(&prefix)) {
        Some(a) => *a = w,
        None => d.args.push(w),
    }
}

fn set_zone(kids: &mut [Directive], name: &str) {
    for u in kids.iter_mut().filter(|d| {
        d.name.value == "upstream" && d.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(name))
    }) {
        let file = u.file;
        let line = u.end_line;
        let block = u.block.get_or_insert_with(Vec::new);
        let zone = Directive {
            name: word("zone"),
            args: vec![word(&format!("{name}_verify")), word("1m")],
            file,
            end_line: line,
            block: None,
        };
        match block.iter_mut().find(|d| d.name.value == "zone") {
            Some(z) => {
                let zname = z.arg(0).unwrap_or(name).to_string();
                z.args = vec![word(&zname), word("1m")];
            }
            None => block.insert(0, zone),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_selection_names_fixes_by_their_id_or_their_rule() {
        let only =
            |ids: &[&str]| Selection::only(&ids.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let s = only(&["resolve-single-name", "valid-5s"]).unwrap();
        assert!(
            s.wants("resolve-single-name", "per-dc")
                && s.wants("resolve-single-name", "retry-shim")
        );
        assert!(s.wants("resolver-valid-long", "valid-5s"));
        assert!(!s.wants("resolve-max-fails", "max-fails-0"));
        let err = only(&["max-fail-0"]).unwrap_err();
        assert!(
            err.starts_with("--fix max-fail-0: no replayable fix"),
            "{err}"
        );
        assert_eq!(err.matches("max-fails-0").count(), 1, "{err}");
        assert!(Selection::All.wants("x", "y") && !Selection::None.wants("x", "y"));
    }

    use super::*;

    #[test]
    fn the_seed_findings_and_their_edits() {
        let text = "http {\n resolver 10.0.0.53 valid=30s;\n upstream be {\n  zone be 128k;\n  server api.example.com:443 resolve;\n  server api.example.com:443 resolve;\n }\n server { location / { proxy_pass http://be; } }\n}\n";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let t = &find::targets(&cfg)[0];
        let found = on_target(&cfg, t);
        let rules: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
        for r in ["resolve-max-fails", "resolver-ipv6", "resolver-valid-long"] {
            assert!(rules.contains(&r), "{r} in {rules:?}");
        }
        let fixed = apply(&cfg, t, "max-fails-0");
        let fixed_rules: Vec<String> = on_target(&fixed, t).into_iter().map(|f| f.rule).collect();
        assert!(
            !fixed_rules.contains(&"resolve-max-fails".to_string()),
            "{fixed_rules:?}"
        );
        let v = on_target(&apply(&cfg, t, "valid-5s"), t);
        assert!(!v.iter().any(|f| f.rule == "resolver-valid-long"));
        let ipv6 = found.iter().find(|f| f.rule == "resolver-ipv6").unwrap();
        assert!(ipv6.replays.is_empty());
        assert!(ipv6.not_replayed.as_deref().unwrap().contains("AAAA"));
    }
}
