//! The expectation language of scenarios (`[expect] checks = […]`), evaluated on a diagnosis.
//!
//! ```text
//! check  := value OP literal | present("ID") | absent("ID")
//! value  := METRIC                          nlu, swaps, requery_period_ms, client_errors, …
//!         | incident("CLASS").FIELD          the largest incident of that class
//!         | all(SET).FIELD | any(SET).FIELD  every / at least one element (an empty set fails)
//!         | count(SET)
//!         | backend("NAME").FIELD           the client's view of one backend (x-backend):
//!                                          requests, errors, min_ms, p50_ms, p90_ms, p99_ms, max_ms,
//!                                          pool_wait_max_ms, pool_wait_p99_ms, pool_timeouts
//!         | probe("NAME").FIELD             readiness probes of a backend ([[probe]]):
//!                                          probes, ok, failed, timeouts, max_ms
//!         | fleet.FIELD                     a [fleet] run: instances, incidents, and of its
//!                                          largest fleet incident hit, serving, count,
//!                                          spread_ms, end_spread_ms, reading
//! SET    := nlu | internal_nlu | incidents | class("CLASS")
//! OP     := = == != < <= > >= ≈ ~=
//! literal:= NUMBER [± TOL[%]] | "text" | bare-word      (`±` may be written `+-`)
//! ```
//!
//! ```
//! use resolvelab_diagnose::expect::parse;
//! assert!(parse("incident(\"dns-nxdomain\").duration_ms ≈ 6000 ± 10%").is_ok());
//! assert!(parse("all(nlu).after_swap_ms <= 600").is_ok());
//! assert!(parse("backend(\"app-slow\").min_ms ≈ 1800 ± 15%").is_ok());
//! assert!(parse("nlu >").is_err());
//! ```

use crate::verdict::{ClientStats, Diagnosis, Incident, NluEvent};

/// A parsed expectation.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// `value OP literal`.
    Compare(Value, Op, Lit),
    /// `present("ID")` (class with an incident, or a signature seen) or its negation.
    Present(String, bool),
}

/// The left-hand side.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A named metric.
    Metric(String),
    /// A field of the largest incident of a class.
    Incident(String, String),
    /// A quantified field of a set.
    Quant(bool, Set, String),
    /// The size of a set.
    Count(Set),
    /// A field of one backend's client-side statistics.
    Backend(String, String),
    /// A field of one backend's readiness probes.
    Probe(String, String),
    /// A field of a fleet run's report.
    Fleet(String),
}

/// A set of elements.
#[derive(Debug, Clone, PartialEq)]
pub enum Set {
    /// NLU failures the client saw (the last pass of each request).
    Nlu,
    /// NLUs inside an earlier pass of a redirected request (retry shim).
    InternalNlu,
    /// All incidents.
    Incidents,
    /// Incidents of one class (counted in failed requests by `count`).
    Class(String),
}

/// Comparison operator.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Approx,
}

/// Right-hand side literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    /// A number with an optional tolerance (absolute, or relative when `pct`).
    Num(f64, Option<(f64, bool)>),
    /// Text.
    Str(String),
}

/// Metrics usable as a bare name.
pub const METRICS: &[&str] = &[
    "requests",
    "failures",
    "nlu",
    "nlu_one_hop",
    "nlu_two_hop",
    "nlu_multi_hop",
    "nlu_paired",
    "swaps",
    "requery_period_ms",
    "swap_follow_ms",
    "swap_follow_median_ms",
    "swaps_unfollowed",
    "incidents",
    "nlu_internal",
    "rescued",
    "max_passes",
    "multi_pass",
    "client_requests",
    "client_errors",
    "client_unsent",
    "client_error_share",
    "malformed",
];

/// Fields of `backend("NAME")`.
pub const BACKEND_FIELDS: &[&str] = &[
    "requests",
    "errors",
    "min_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "pool_wait_max_ms",
    "pool_wait_p99_ms",
    "pool_timeouts",
];

/// Fields of `fleet.FIELD` and whether each is a number: the fleet's instances and incidents,
/// then its largest incident's (by failed requests).
pub const FLEET_FIELDS: &[(&str, bool)] = &[
    ("instances", true),
    ("incidents", true),
    ("hit", true),
    ("serving", true),
    ("count", true),
    ("spread_ms", true),
    ("end_spread_ms", true),
    ("reading", false),
];

/// Fields of `probe("NAME")`.
pub const PROBE_FIELDS: &[&str] = &["probes", "ok", "failed", "timeouts", "max_ms"];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Sym(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_' || cs[i] == '-') {
                i += 1;
            }
            out.push(Tok::Ident(cs[st..i].iter().collect()));
        } else if c.is_ascii_digit()
            || (c == '-' && cs.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let st = i;
            i += 1;
            while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.' || cs[i] == '_') {
                i += 1;
            }
            let t: String = cs[st..i].iter().filter(|c| **c != '_').collect();
            // `2-hop` style words are text, not numbers.
            if i < cs.len() && (cs[i].is_ascii_alphabetic() || cs[i] == '-') {
                let st2 = st;
                while i < cs.len()
                    && (cs[i].is_ascii_alphanumeric() || cs[i] == '-' || cs[i] == '+')
                {
                    i += 1;
                }
                out.push(Tok::Str(cs[st2..i].iter().collect()));
                continue;
            }
            out.push(Tok::Num(
                t.parse().map_err(|_| format!("bad number `{t}`"))?,
            ));
        } else if c == '"' {
            let st = i + 1;
            i += 1;
            while i < cs.len() && cs[i] != '"' {
                i += 1;
            }
            if i >= cs.len() {
                return Err("unclosed string: add the closing `\"`".into());
            }
            out.push(Tok::Str(cs[st..i].iter().collect()));
            i += 1;
        } else {
            let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
            let sym = match two.as_str() {
                "==" => Some("=="),
                "!=" => Some("!="),
                "<=" => Some("<="),
                ">=" => Some(">="),
                "~=" => Some("≈"),
                "+-" => Some("±"),
                _ => None,
            };
            if let Some(s) = sym {
                out.push(Tok::Sym(s));
                i += 2;
                continue;
            }
            let sym = match c {
                '=' => "=",
                '<' => "<",
                '>' => ">",
                '≈' => "≈",
                '±' => "±",
                '(' => "(",
                ')' => ")",
                '.' => ".",
                '%' => "%",
                _ => return Err(format!("unexpected `{c}`")),
            };
            out.push(Tok::Sym(sym));
            i += 1;
        }
    }
    Ok(out)
}

struct P {
    t: Vec<Tok>,
    i: usize,
}

impl P {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.t.get(self.i).cloned();
        self.i += 1;
        t
    }
    fn sym(&mut self, s: &str) -> Result<(), String> {
        match self.next() {
            Some(Tok::Sym(x)) if x == s => Ok(()),
            other => Err(format!("expected `{s}`, found {}", show(other.as_ref()))),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Str(s)) | Some(Tok::Ident(s)) => Ok(s),
            other => Err(format!(
                "expected a quoted name, found {}",
                show(other.as_ref())
            )),
        }
    }
    fn ident(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Ident(s)) => Ok(s),
            other => Err(format!(
                "expected a field name, found {}",
                show(other.as_ref())
            )),
        }
    }
    fn set(&mut self) -> Result<Set, String> {
        match self.ident()?.as_str() {
            "nlu" => Ok(Set::Nlu),
            "internal_nlu" | "nlu_internal" => Ok(Set::InternalNlu),
            "incidents" => Ok(Set::Incidents),
            "class" => {
                self.sym("(")?;
                let c = self.string()?;
                self.sym(")")?;
                Ok(Set::Class(c))
            }
            other => Err(format!(
                "unknown set `{other}` (use nlu, internal_nlu, incidents or class(\"…\"))"
            )),
        }
    }
}

fn show(t: Option<&Tok>) -> String {
    match t {
        None => "the end".into(),
        Some(Tok::Ident(s)) => format!("`{s}`"),
        Some(Tok::Str(s)) => format!("\"{s}\""),
        Some(Tok::Num(n)) => format!("`{n}`"),
        Some(Tok::Sym(s)) => format!("`{s}`"),
    }
}

/// Parse one expectation and check the ids it names (a class or signature id in `present(…)`,
/// a class in `incident(…)`): what a scenario's `[expect] checks` must pass **before** its run,
/// so a typo costs no lab run.
pub fn parse_checked(text: &str) -> Result<Check, String> {
    let c = parse(text)?;
    let is_class = |id: &str| crate::classes::CLASSES.contains(&id);
    match &c {
        Check::Present(id, _)
            if !is_class(id) && !crate::classes::SIGNATURES.iter().any(|s| s.id == id) =>
        {
            Err(format!(
                "`{id}` is neither a class id nor a signature id (classes: {})",
                crate::classes::CLASSES.join(", ")
            ))
        }
        Check::Compare(Value::Incident(id, _), ..) if !is_class(id) => Err(format!(
            "`{id}` is not a class id (classes: {})",
            crate::classes::CLASSES.join(", ")
        )),
        _ => Ok(c),
    }
}

/// The fields of an NLU event (`all(nlu).FIELD`) and whether each is a number.
pub const NLU_FIELDS: &[(&str, bool)] = &[
    ("trajectory", false),
    ("hops", true),
    ("after_swap_ms", true),
    ("class", false),
    ("t_ms", true),
    ("status", true),
];

/// The fields of an incident (`incident("C").FIELD`, `all(incidents).FIELD`) and whether each
/// is a number.
pub const INCIDENT_FIELDS: &[(&str, bool)] = &[
    ("class", false),
    ("shape", false),
    ("duration_ms", true),
    ("count", true),
    ("nlu", true),
    ("requests_in_window", true),
    ("share_failed", true),
    ("after_swap_ms", true),
    ("confidence", true),
    ("start_ms", true),
    ("end_ms", true),
];

/// A field of an NLU event or an incident, checked by name and kind against what it is compared
/// with: a typo or a text field compared as a number is refused when the check is parsed, not
/// reported as "cannot evaluate" after a whole run.
fn check_field(
    what: &str,
    fields: &[(&str, bool)],
    field: &str,
    op: Op,
    lit: &Lit,
) -> Result<(), String> {
    let Some((_, numeric)) = fields.iter().find(|(f, _)| *f == field) else {
        let known: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
        return Err(format!(
            "unknown {what} field `{field}` (known: {})",
            known.join(", ")
        ));
    };
    match (numeric, lit) {
        (true, Lit::Str(s)) => Err(format!("`{field}` is a number; `{s}` is not")),
        (false, _) if !matches!(op, Op::Eq | Op::Ne) => {
            Err(format!("`{field}` is text: compare it with = or !="))
        }
        _ => Ok(()),
    }
}

/// Parse one expectation; the error names what was expected.
pub fn parse(text: &str) -> Result<Check, String> {
    let mut p = P {
        t: lex(text)?,
        i: 0,
    };
    let head = p.ident()?;
    let value = match head.as_str() {
        "present" | "absent" => {
            p.sym("(")?;
            let id = p.string()?;
            p.sym(")")?;
            if p.peek().is_some() {
                return Err(format!("unexpected {} after {head}(…)", show(p.peek())));
            }
            return Ok(Check::Present(id, head == "present"));
        }
        "incident" => {
            p.sym("(")?;
            let c = p.string()?;
            p.sym(")")?;
            p.sym(".")?;
            Value::Incident(c, p.ident()?)
        }
        "all" | "any" => {
            p.sym("(")?;
            let s = p.set()?;
            p.sym(")")?;
            p.sym(".")?;
            Value::Quant(head == "all", s, p.ident()?)
        }
        "count" => {
            p.sym("(")?;
            let s = p.set()?;
            p.sym(")")?;
            Value::Count(s)
        }
        "backend" | "probe" => {
            p.sym("(")?;
            let name = p.string()?;
            p.sym(")")?;
            p.sym(".")?;
            let field = p.ident()?;
            let known = if head == "backend" {
                BACKEND_FIELDS
            } else {
                PROBE_FIELDS
            };
            if !known.contains(&field.as_str()) {
                return Err(format!(
                    "unknown {head} field `{field}` (known: {})",
                    known.join(", ")
                ));
            }
            if head == "backend" {
                Value::Backend(name, field)
            } else {
                Value::Probe(name, field)
            }
        }
        "fleet" => {
            p.sym(".")?;
            Value::Fleet(p.ident()?)
        }
        m if METRICS.contains(&m) => Value::Metric(m.to_string()),
        m => {
            return Err(format!(
                "unknown metric `{m}` (known: {})",
                METRICS.join(", ")
            ));
        }
    };
    let op = match p.next() {
        Some(Tok::Sym("=")) | Some(Tok::Sym("==")) => Op::Eq,
        Some(Tok::Sym("!=")) => Op::Ne,
        Some(Tok::Sym("<")) => Op::Lt,
        Some(Tok::Sym("<=")) => Op::Le,
        Some(Tok::Sym(">")) => Op::Gt,
        Some(Tok::Sym(">=")) => Op::Ge,
        Some(Tok::Sym("≈")) => Op::Approx,
        other => {
            return Err(format!(
                "expected an operator (= != < <= > >= ≈), found {}",
                show(other.as_ref())
            ));
        }
    };
    let lit = match p.next() {
        Some(Tok::Num(n)) => {
            let tol = if p.peek() == Some(&Tok::Sym("±")) {
                p.next();
                let t = match p.next() {
                    Some(Tok::Num(t)) => t,
                    other => {
                        return Err(format!(
                            "expected a tolerance after ±, found {}",
                            show(other.as_ref())
                        ));
                    }
                };
                let pct = p.peek() == Some(&Tok::Sym("%"));
                if pct {
                    p.next();
                }
                Some((t, pct))
            } else {
                None
            };
            Lit::Num(n, tol)
        }
        Some(Tok::Str(s)) | Some(Tok::Ident(s)) => Lit::Str(s),
        other => return Err(format!("expected a value, found {}", show(other.as_ref()))),
    };
    if p.peek().is_some() {
        return Err(format!("unexpected {} at the end", show(p.peek())));
    }
    if op == Op::Approx && !matches!(lit, Lit::Num(_, Some(_))) {
        return Err("≈ needs a tolerance: write e.g. `≈ 6000 ± 10%`".into());
    }
    if let Value::Fleet(f) = &value {
        check_field("fleet", FLEET_FIELDS, f, op, &lit)?;
    }
    match &value {
        Value::Incident(_, f) | Value::Quant(_, Set::Incidents | Set::Class(_), f) => {
            check_field("incident", INCIDENT_FIELDS, f, op, &lit)?
        }
        Value::Quant(_, Set::Nlu | Set::InternalNlu, f) => {
            check_field("nlu", NLU_FIELDS, f, op, &lit)?
        }
        _ => {}
    }
    Ok(Check::Compare(value, op, lit))
}

#[derive(Debug, Clone, PartialEq)]
enum V {
    N(f64),
    S(String),
    Missing,
}

fn fmt_v(v: &V) -> String {
    match v {
        V::N(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
        V::N(n) => format!("{n:.3}"),
        V::S(s) => s.clone(),
        V::Missing => "none".into(),
    }
}

fn cmp(v: &V, op: Op, lit: &Lit) -> bool {
    match (v, lit) {
        (V::N(a), Lit::Num(b, tol)) => match op {
            Op::Eq => (a - b).abs() < 1e-9,
            Op::Ne => (a - b).abs() >= 1e-9,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Approx => {
                let (t, pct) = tol.unwrap_or((0.0, false));
                let t = if pct { b.abs() * t / 100.0 } else { t };
                (a - b).abs() <= t
            }
        },
        (V::S(a), Lit::Str(b)) => match op {
            Op::Eq => a == b,
            Op::Ne => a != b,
            _ => false,
        },
        (V::S(a), Lit::Num(b, _)) => match op {
            Op::Eq => a == &fmt_v(&V::N(*b)),
            Op::Ne => a != &fmt_v(&V::N(*b)),
            _ => false,
        },
        _ => false,
    }
}

fn nlu_field(e: &NluEvent, f: &str) -> Result<V, String> {
    Ok(match f {
        "trajectory" => V::S(e.trajectory.clone()),
        "hops" => V::N(e.hops as f64),
        "after_swap_ms" => e
            .after_swap_ms
            .map(|x| V::N(x as f64))
            .unwrap_or(V::Missing),
        "class" => V::S(e.class.to_string()),
        "t_ms" => V::N(e.t_ms as f64),
        "status" => V::N(e.status as f64),
        _ => {
            return Err(format!(
                "unknown nlu field `{f}` (trajectory, hops, after_swap_ms, class, t_ms, status)"
            ));
        }
    })
}

fn inc_field(i: &Incident, f: &str) -> Result<V, String> {
    Ok(match f {
        "class" => V::S(i.class.to_string()),
        "shape" => V::S(i.shape.clone()),
        "duration_ms" => V::N(i.duration_ms as f64),
        "count" => V::N(i.count as f64),
        "nlu" => V::N(i.nlu as f64),
        "requests_in_window" => V::N(i.requests_in_window as f64),
        "share_failed" => V::N(i.share_failed),
        "after_swap_ms" => i
            .after_swap_ms
            .map(|x| V::N(x as f64))
            .unwrap_or(V::Missing),
        "confidence" => V::N(i.confidence),
        "start_ms" => V::N(i.start_ms as f64),
        "end_ms" => V::N(i.end_ms as f64),
        _ => {
            return Err(format!(
                "unknown incident field `{f}` (class, shape, duration_ms, count, nlu, requests_in_window, share_failed, after_swap_ms, confidence, start_ms, end_ms)"
            ));
        }
    })
}

/// Evaluate a check: (held, measured).
pub fn eval(c: &Check, d: &Diagnosis, client: Option<&ClientStats>) -> (bool, String) {
    eval_in(c, d, client, None)
}

/// What a `[fleet]` run's checks read beside its totals: the fleet report and each instance's
/// diagnosis by name.
pub struct FleetRun<'a> {
    /// The fleet report.
    pub fleet: &'a crate::fleet::Fleet,
    /// Each instance's diagnosis.
    pub instances: &'a std::collections::BTreeMap<String, Diagnosis>,
}

/// [`eval`] on a run that may be a fleet: `present`/`absent` and `incident("C")` then read
/// every instance, `fleet.FIELD` the fleet report, and the other terms the totals `d`.
pub fn eval_in(
    c: &Check,
    d: &Diagnosis,
    client: Option<&ClientStats>,
    fleet: Option<&FleetRun>,
) -> (bool, String) {
    let r = match fleet {
        Some(f) => eval_fleet(c, d, client, f),
        None => eval_inner(c, d, client),
    };
    match r {
        Ok(x) => x,
        Err(e) => (false, format!("cannot evaluate: {e}")),
    }
}

fn eval_fleet(
    c: &Check,
    d: &Diagnosis,
    client: Option<&ClientStats>,
    f: &FleetRun,
) -> Result<(bool, String), String> {
    match c {
        Check::Present(id, want) => {
            let mut on = Vec::new();
            for (name, inst) in f.instances {
                if presence(id, inst)?.0 {
                    on.push(name.as_str());
                }
            }
            let measured = match on.len() {
                0 => format!("absent on all {} instances", f.instances.len()),
                k => format!(
                    "present on {k} of {} instances ({})",
                    f.instances.len(),
                    on.join(", ")
                ),
            };
            Ok((on.is_empty() != *want, measured))
        }
        Check::Compare(Value::Incident(class, field), op, lit) => {
            let largest = f
                .instances
                .iter()
                .flat_map(|(n, d)| d.incidents.iter().map(move |i| (n, i)))
                .filter(|(_, i)| &i.class == class)
                .max_by_key(|(_, i)| i.count);
            Ok(match largest {
                Some((name, i)) => {
                    let v = inc_field(i, field)?;
                    (cmp(&v, *op, lit), format!("{} (on {name})", fmt_v(&v)))
                }
                None => (false, format!("no `{class}` incident on any instance")),
            })
        }
        Check::Compare(Value::Fleet(field), op, lit) => {
            let v = fleet_field(f.fleet, field)?;
            Ok((cmp(&v, *op, lit), fmt_v(&v)))
        }
        other => eval_inner(other, d, client),
    }
}

fn fleet_field(f: &crate::fleet::Fleet, field: &str) -> Result<V, String> {
    let largest = f.incidents.iter().max_by_key(|i| i.count);
    let of = |g: &dyn Fn(&crate::fleet::FleetIncident) -> V| largest.map_or(V::Missing, g);
    Ok(match field {
        "instances" => V::N(f.instances.len() as f64),
        "incidents" => V::N(f.incidents.len() as f64),
        "hit" => of(&|i| V::N(i.hit as f64)),
        "serving" => of(&|i| V::N(i.serving as f64)),
        "count" => of(&|i| V::N(i.count as f64)),
        "spread_ms" => of(&|i| V::N(i.start_spread_ms as f64)),
        "end_spread_ms" => of(&|i| V::N(i.end_spread_ms as f64)),
        "reading" => of(&|i| V::S(i.reading.kind.id().to_string())),
        _ => return Err(format!("unknown fleet field `{field}`")),
    })
}

fn eval_inner(
    c: &Check,
    d: &Diagnosis,
    client: Option<&ClientStats>,
) -> Result<(bool, String), String> {
    let (value, op, lit) = match c {
        Check::Present(id, want) => {
            let (present, measured) = presence(id, d)?;
            return Ok((present == *want, measured));
        }
        Check::Compare(v, op, lit) => (v, *op, lit),
    };
    let scalar = |v: V| -> (bool, String) { (cmp(&v, op, lit), fmt_v(&v)) };
    Ok(match value {
        Value::Fleet(_) => {
            return Err("`fleet.…` reads a [fleet] run; this run has one proxy".into());
        }
        Value::Metric(m) => scalar(metric(m, d, client)?),
        Value::Incident(class, field) => {
            match d
                .incidents
                .iter()
                .filter(|i| &i.class == class)
                .max_by_key(|i| i.count)
            {
                Some(i) => scalar(inc_field(i, field)?),
                None => (false, format!("no `{class}` incident")),
            }
        }
        Value::Backend(name, field) => match backend_field(name, field, client)? {
            Ok(v) => scalar(v),
            Err(why) => (false, why),
        },
        Value::Probe(name, field) => match probe_field(name, field, client)? {
            Ok(v) => scalar(v),
            Err(why) => (false, why),
        },
        Value::Count(set) => {
            let n = match set {
                Set::Nlu => d.nlu.total,
                Set::InternalNlu => d.passes.internal_nlu,
                Set::Incidents => d.incidents.len() as u64,
                Set::Class(c) => d
                    .incidents
                    .iter()
                    .filter(|i| &i.class == c)
                    .map(|i| i.count)
                    .sum(),
            };
            scalar(V::N(n as f64))
        }
        Value::Quant(all, set, field) => quantified(*all, set, field, op, lit, d)?,
    })
}

/// Is class or signature `id` present, and what shows it (`present (N failed requests, …)`).
fn presence(id: &str, d: &Diagnosis) -> Result<(bool, String), String> {
    let n_class: u64 = d
        .incidents
        .iter()
        .filter(|i| i.class == id)
        .map(|i| i.count)
        .sum();
    let n_sig = d
        .signatures
        .iter()
        .find(|s| s.id == id)
        .map(|s| s.count)
        .unwrap_or(0);
    let known = crate::classes::CLASSES.contains(&id)
        || crate::classes::SIGNATURES.iter().any(|s| s.id == id);
    if !known {
        return Err(format!("`{id}` is neither a class id nor a signature id"));
    }
    let n_internal = d.passes.internal_by_class.get(id).copied().unwrap_or(0);
    let is_class = crate::classes::CLASSES.contains(&id);
    let present = n_class > 0 || n_sig > 0 || (is_class && n_internal > 0);
    let measured = if !present {
        "absent".to_string()
    } else if is_class {
        // The evidence behind the class: its NLUs paired with their own error line
        // (an NLU's `no live upstreams`) and the failures with a first-try line.
        let paired: u64 = d
            .incidents
            .iter()
            .filter(|i| i.class == id)
            .map(|i| i.hops.paired)
            .sum();
        let nlu: u64 = d
            .incidents
            .iter()
            .filter(|i| i.class == id)
            .map(|i| i.nlu)
            .sum();
        let mut m = format!("present ({n_class} failed requests");
        if nlu > 0 {
            m += &format!(", {paired}/{nlu} NLU paired with their error line");
        }
        if n_internal > 0 {
            let rescued = d
                .nlu_events
                .iter()
                .filter(|e| e.internal && e.class == id && e.status < 500)
                .count();
            m += &format!(
                ", {n_internal} internal NLU in earlier passes, {rescued}{} rescued",
                if d.nlu_events_truncated { "+" } else { "" }
            );
        }
        m + ")"
    } else {
        format!("present ({n_sig} error lines)")
    };
    Ok((present, measured))
}

/// A bare metric's value.
fn metric(m: &str, d: &Diagnosis, client: Option<&ClientStats>) -> Result<V, String> {
    Ok(match m {
        "requests" => V::N(d.requests as f64),
        "failures" => V::N(d.failures as f64),
        "nlu" => V::N(d.nlu.total as f64),
        "nlu_one_hop" => V::N(d.nlu.one_hop as f64),
        "nlu_two_hop" => V::N(d.nlu.two_hop as f64),
        "nlu_multi_hop" => V::N(d.nlu.multi_hop as f64),
        "nlu_paired" => V::N(d.nlu.paired as f64),
        "swaps" => V::N(d.swaps as f64),
        "requery_period_ms" => d.requery_period_ms.map(V::N).unwrap_or(V::Missing),
        "swap_follow_ms" | "swap_follow_median_ms" | "swaps_unfollowed" => {
            let Some(f) = &d.swap_follow else {
                return Err("no answer history (DNS log or dns-mode events)".into());
            };
            match m {
                "swap_follow_ms" => f.max_ms.map(|v| V::N(v as f64)),
                "swap_follow_median_ms" => f.median_ms.map(|v| V::N(v as f64)),
                _ => Some(V::N((f.moves - f.followed) as f64)),
            }
            .unwrap_or(V::Missing)
        }
        "incidents" => V::N(d.incidents.len() as f64),
        "malformed" => V::N(d.parse.malformed as f64),
        "nlu_internal" => V::N(d.passes.internal_nlu as f64),
        "rescued" => V::N(d.passes.rescued as f64),
        "max_passes" => V::N(d.passes.max_passes as f64),
        "multi_pass" => V::N(d.passes.multi_pass as f64),
        "client_requests" | "client_errors" | "client_unsent" | "client_error_share" => {
            let c = client.ok_or_else(|| "no load.jsonl in this run".to_string())?;
            V::N(match m {
                "client_errors" => c.errors as f64,
                "client_unsent" => c.unsent as f64,
                // A share holds at any `--scale` (times and rates shrink together).
                "client_error_share" => c.errors as f64 / c.requests.max(1) as f64,
                _ => c.requests as f64,
            })
        }
        _ => return Err(format!("unknown metric `{m}`")),
    })
}

/// `backend("NAME").FIELD`: its value, or why the run has none (`Ok(Err(why))`, which does not
/// hold); `Err` for a field the language does not have.
fn backend_field(
    name: &str,
    field: &str,
    client: Option<&ClientStats>,
) -> Result<Result<V, String>, String> {
    let c = client.ok_or("no load.jsonl in this run")?;
    let Some(b) = c.backends.get(name) else {
        let seen: Vec<&str> = c.backends.keys().map(String::as_str).collect();
        return Ok(Err(format!(
            "no answers from `{name}` (answered: {})",
            seen.join(", ")
        )));
    };
    Ok(Ok(V::N(match field {
        "requests" => b.requests as f64,
        "errors" => b.errors as f64,
        "min_ms" => b.min_ms,
        "p50_ms" => b.p50_ms,
        "p90_ms" => b.p90_ms,
        "p99_ms" => b.p99_ms,
        "max_ms" => b.max_ms,
        "pool_wait_max_ms" | "pool_wait_p99_ms" | "pool_timeouts" => {
            let v = match field {
                "pool_wait_max_ms" => b.pool_wait_max_ms,
                "pool_wait_p99_ms" => b.pool_wait_p99_ms,
                _ => b.pool_timeouts.map(|n| n as f64),
            };
            match v {
                Some(v) => v,
                None => {
                    return Ok(Err(format!("`{name}` has no DB pool (backends.json)")));
                }
            }
        }
        f => return Err(format!("unknown backend field `{f}`")),
    })))
}

/// `probe("NAME").FIELD`, as [`backend_field`].
fn probe_field(
    name: &str,
    field: &str,
    client: Option<&ClientStats>,
) -> Result<Result<V, String>, String> {
    let c = client.ok_or("no load.jsonl in this run")?;
    let Some(p) = c.probes.get(name) else {
        return Ok(Err(format!("no probes of `{name}` (probes.jsonl)")));
    };
    Ok(Ok(V::N(match field {
        "probes" => p.probes as f64,
        "ok" => p.ok as f64,
        "failed" => p.failed as f64,
        "timeouts" => p.timeouts as f64,
        "max_ms" => p.max_ms,
        f => return Err(format!("unknown probe field `{f}`")),
    })))
}

/// `all(SET).FIELD OP LIT` / `any(…)`: how many elements hold, and their range.
fn quantified(
    all: bool,
    set: &Set,
    field: &str,
    op: Op,
    lit: &Lit,
    d: &Diagnosis,
) -> Result<(bool, String), String> {
    let vals: Vec<V> = match set {
        Set::Nlu => d
            .nlu_events
            .iter()
            .filter(|e| !e.internal)
            .map(|e| nlu_field(e, field))
            .collect::<Result<_, _>>()?,
        Set::InternalNlu => d
            .nlu_events
            .iter()
            .filter(|e| e.internal)
            .map(|e| nlu_field(e, field))
            .collect::<Result<_, _>>()?,
        Set::Incidents => d
            .incidents
            .iter()
            .map(|i| inc_field(i, field))
            .collect::<Result<_, _>>()?,
        Set::Class(c) => d
            .incidents
            .iter()
            .filter(|i| &i.class == c)
            .map(|i| inc_field(i, field))
            .collect::<Result<_, _>>()?,
    };
    if vals.is_empty() {
        return Ok((false, "no elements".into()));
    }
    let ok = vals.iter().filter(|v| cmp(v, op, lit)).count();
    let held = if all { ok == vals.len() } else { ok > 0 };
    let nums: Vec<f64> = vals
        .iter()
        .filter_map(|v| if let V::N(n) = v { Some(*n) } else { None })
        .collect();
    let range = if nums.len() == vals.len() {
        let lo = nums.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = nums.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        format!(", range {}..{}", fmt_v(&V::N(lo)), fmt_v(&V::N(hi)))
    } else {
        let mut kinds: Vec<String> = vals.iter().map(fmt_v).collect();
        kinds.sort();
        kinds.dedup();
        format!(", values {}", kinds.join("/"))
    };
    let trunc = if matches!(set, Set::Nlu) && d.nlu_events_truncated {
        " (first 5000)"
    } else {
        ""
    };
    Ok((held, format!("{ok}/{} hold{range}{trunc}", vals.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::Class;

    #[test]
    fn grammar_examples_parse() {
        for s in [
            "nlu = 0",
            "nlu > 0",
            "swaps >= 5",
            "client_errors = 0",
            "requery_period_ms ≈ 6000 ± 2%",
            "requery_period_ms ~= 6000 +- 120",
            "incident(\"dns-nxdomain\").duration_ms ≈ 6000 ± 10%",
            "all(nlu).trajectory = \"2-hop\"",
            "all(nlu).trajectory = 2-hop",
            "all(nlu).after_swap_ms <= 600",
            "count(class(\"generation-race-retry\")) > 0",
            "absent(\"maxfails-wipeout\")",
            "present(\"dns-nxdomain\")",
            "any(incidents).shape = burst",
        ] {
            parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        assert_eq!(
            parse("all(nlu).trajectory = 2-hop").unwrap(),
            Check::Compare(
                Value::Quant(true, Set::Nlu, "trajectory".into()),
                Op::Eq,
                Lit::Str("2-hop".into())
            )
        );
        for bad in [
            "nlu",
            "nlu >",
            "bogus = 1",
            "nlu ≈ 5",
            "count(x) = 1",
            "present(\"x\") = 1",
            "nlu = \"x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// Fields, and what they are compared with, are checked when the check is parsed (before
    /// a run), not reported as "cannot evaluate" after it (issue #43: `all(nlu).hopz = 1`).
    #[test]
    fn fleet_terms_read_a_fleet_run_and_only_one() {
        let c = parse("fleet.reading = dns-answer-change").unwrap();
        let (held, why) = eval(&c, &diag(), None);
        assert!(!held && why.contains("reads a [fleet] run"), "{why}");
        for f in FLEET_FIELDS {
            let text = if f.1 {
                format!("fleet.{} >= 0", f.0)
            } else {
                format!("fleet.{} = x", f.0)
            };
            assert!(parse(&text).is_ok(), "{text}");
        }
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused_at_parse() {
        for (bad, says) in [
            ("all(nlu).hopz = 1", "unknown nlu field `hopz`"),
            ("any(internal_nlu).hopz = 1", "unknown nlu field `hopz`"),
            (
                "incident(\"dns-nxdomain\").durration_ms > 1",
                "unknown incident field",
            ),
            (
                "all(class(\"dns-nxdomain\")).trajectory = 1-hop",
                "unknown incident field",
            ),
            ("all(nlu).hops = two", "`hops` is a number"),
            ("any(incidents).shape > 3", "`shape` is text"),
            ("all(nlu).trajectory <= 2-hop", "`trajectory` is text"),
            ("fleet.hitt = 4", "unknown fleet field `hitt`"),
            ("fleet.reading > 2", "`reading` is text"),
            ("fleet.spread_ms = wide", "`spread_ms` is a number"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // Every field of the two lists parses, and evaluates on a diagnosis (with NLU events
        // and an incident, so every field is read) without an "unknown field": the lists and
        // the evaluators agree.
        let mut d = diag();
        d.incidents.push(Incident {
            id: 1,
            class: Class::DnsNxdomain,
            confidence: 0.95,
            upstream: "be".into(),
            start_ms: 0,
            end_ms: 6000,
            duration_ms: 6000,
            count: 3,
            nlu: 3,
            hops: Default::default(),
            requests_in_window: 3,
            share_failed: 1.0,
            shape: "burst".into(),
            after_swap_ms: None,
            swap_direction: None,
            methods: Default::default(),
            evidence: Vec::new(),
            explanation: String::new(),
            fix: String::new(),
            zoom: Default::default(),
        });
        for (set, fields) in [("nlu", NLU_FIELDS), ("incidents", INCIDENT_FIELDS)] {
            for (f, numeric) in fields {
                let rhs = if *numeric { ">= 0" } else { "= x" };
                let c = format!("any({set}).{f} {rhs}");
                let (_, m) = eval(&parse(&c).unwrap(), &d, None);
                assert!(!m.contains("cannot evaluate"), "{c}: {m}");
            }
        }
    }

    fn diag() -> Diagnosis {
        let mut d: Diagnosis = serde_json::from_value(serde_json::json!({
            "schema": "resolvelab.diagnosis/v1", "inputs": {}, "start_ms": 0, "end_ms": 1,
            "requests": 100, "http_status": {}, "failures": 3,
            "nlu": {"total": 3, "one_hop": 1, "two_hop": 2, "multi_hop": 0, "unknown_hops": 0, "paired": 3},
            "swaps": 6, "swap_source": "dns", "swap_directions": {}, "swap_list": [],
            "requery_period_ms": 6001.0, "requery_source": "dns", "incidents": [], "classes": [],
            "signatures": [], "nlu_events": [], "nlu_events_truncated": false,
            "timeline": {"bin_ms": 1000, "points": []}, "parse": {"files": [], "malformed": 0}
        }))
        .unwrap();
        for (t, hops, after) in [(1, 2, 12), (2, 2, 480), (3, 1, 3)] {
            d.nlu_events.push(NluEvent {
                t_ms: t,
                hops,
                trajectory: if hops == 2 { "2-hop" } else { "1-hop" }.into(),
                after_swap_ms: Some(after),
                class: Class::GenerationRaceRetry,
                at: "access.log:1".into(),
                internal: false,
                status: 502,
            });
        }
        d
    }

    #[test]
    fn evaluation_reports_what_was_measured() {
        let d = diag();
        let ev = |s: &str| eval(&parse(s).unwrap(), &d, None);
        assert_eq!(ev("nlu = 3"), (true, "3".into()));
        assert_eq!(ev("swaps >= 5"), (true, "6".into()));
        assert_eq!(ev("requery_period_ms ≈ 6000 ± 2%"), (true, "6001".into()));
        assert_eq!(
            ev("all(nlu).after_swap_ms <= 600"),
            (true, "3/3 hold, range 3..480".into())
        );
        assert_eq!(
            ev("all(nlu).trajectory = 2-hop"),
            (false, "2/3 hold, values 1-hop/2-hop".into())
        );
        assert!(ev("any(nlu).trajectory = 1-hop").0);
        assert_eq!(ev("count(nlu) = 3"), (true, "3".into()));
        assert_eq!(
            ev("incident(\"dns-nxdomain\").duration_ms ≈ 6000 ± 10%"),
            (false, "no `dns-nxdomain` incident".into())
        );
        assert_eq!(ev("absent(\"maxfails-wipeout\")"), (true, "absent".into()));
        assert!(ev("client_errors = 0").1.contains("no load.jsonl"));
        assert!(
            ev("present(\"nope\")")
                .1
                .contains("neither a class id nor a signature id")
        );
        assert_eq!(
            ev("all(incidents).duration_ms > 0"),
            (false, "no elements".into())
        );
    }

    #[test]
    fn backend_and_probe_terms() {
        let d = diag();
        let mut c = ClientStats::default();
        c.backends.insert(
            "app-slow".into(),
            crate::verdict::BackendStats {
                requests: 20,
                min_ms: 1830.0,
                max_ms: 9400.0,
                ..Default::default()
            },
        );
        c.probes.insert(
            "app-fast".into(),
            crate::verdict::ProbeStats {
                probes: 30,
                ok: 30,
                ..Default::default()
            },
        );
        let ev = |s: &str| eval(&parse(s).unwrap(), &d, Some(&c));
        assert_eq!(
            ev("backend(\"app-slow\").min_ms ≈ 1800 ± 15%"),
            (true, "1830".into())
        );
        assert!(!ev("backend(\"app-slow\").max_ms < 5400").0);
        assert_eq!(ev("probe(\"app-fast\").failed = 0"), (true, "0".into()));
        let (held, m) = ev("backend(\"nope\").requests > 0");
        assert!(!held && m.contains("answered: app-slow"), "{m}");
        assert!(!ev("probe(\"app-slow\").ok > 0").0);
        assert!(
            eval(&parse("backend(\"x\").errors = 0").unwrap(), &d, None)
                .1
                .contains("no load.jsonl")
        );
        let e = parse("backend(\"x\").p42_ms = 0").unwrap_err();
        assert!(e.contains("p99_ms"), "{e}");
        assert!(parse("probe(\"x\").latency = 0").is_err());
    }

    #[test]
    fn approx_and_relations() {
        let l = Lit::Num(6000.0, Some((10.0, true)));
        assert!(cmp(&V::N(6008.0), Op::Approx, &l));
        assert!(!cmp(&V::N(6700.0), Op::Approx, &l));
        assert!(cmp(&V::N(3.0), Op::Ge, &Lit::Num(3.0, None)));
        assert!(!cmp(&V::Missing, Op::Le, &Lit::Num(600.0, None)));
    }
}
