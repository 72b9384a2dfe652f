//! The models' results as text tables for a terminal: `sim nginx`'s summary, `sim predict`'s
//! per-day predictions for nginx and the proxies, and the stale-address cost of each setup.
//! JSON is the results' own serialisation; these are the human view of the same numbers.
//!
//! ```
//! let t = resolvelab_sim::text::columns(&[vec!["a".into(), "bb".into()], vec!["ccc".into(), "d".into()]]);
//! assert_eq!(t, "a    bb\nccc  d\n");
//! ```

use crate::nginx::SimSummary;
use crate::nginx::moves::{MovePrediction, MovesInput};
use crate::nginx::predict::{PerDay, PredictInput, Prediction};

/// `sim nginx`'s summary: requests, failures by class, the model's counters.
pub fn summary(s: &SimSummary) -> String {
    let mut out = format!(
        "requests {}  ok {}  502 {} (no live upstreams {}, upstream failures {})\n",
        s.requests,
        s.ok,
        s.status_502,
        s.nlu_total(),
        s.upstream_failures
    );
    for (c, n) in s.nlu.iter().filter(|(_, n)| *n > 0) {
        out.push_str(&format!("  {:<28} {n}\n", c.id()));
    }
    out.push_str(&format!(
        "failed tries {}  retries {}  shim passes {}  requeries {}  swaps {}  resolver errors {}  disabled warnings {}  memory exhausted {}\n",
        s.try_failures,
        s.retries,
        s.shim_passes,
        s.requeries,
        s.swaps,
        s.dns_errors,
        s.disabled_warnings,
        s.memory_exhausted
    ));
    if !s.fault_hits.is_empty() {
        out.push_str(&format!("fault hits {:?}\n", s.fault_hits));
        if s.fault_hits.contains(&0) {
            out.push_str(
                "warning: a fault window hit nothing — that injection is not interpretable\n",
            );
        }
    }
    out
}

/// `sim predict --moves-per-day`: the stale-address cost of each setup, as a text table.
pub fn moves_table(m: &MovesInput, rows: &[MovePrediction]) -> String {
    let mut out = format!(
        "Failed requests per day when the backend moves {} times a day at {} rps (the old address refuses {} s after the move; {} moves simulated per setup, random phase, seed {}; 95 % interval).\n\n",
        m.moves_per_day,
        m.rps,
        m.grace.0 as f64 / 1e6,
        m.samples,
        m.seed
    );
    let fleet = m.instances > 1;
    if fleet {
        out.insert_str(
            out.len() - 2,
            &format!(
                " A fleet of {} instances at {} rps each: a move reaches them all at once, each follows at its own phase; the last follows after the time shown.",
                m.instances,
                m.rps / f64::from(m.instances)
            ),
        );
    }
    let mut header = vec![
        "setup".to_string(),
        "failed/day".into(),
        "per move".into(),
        "outage per move".into(),
    ];
    if fleet {
        header.push("last instance follows".into());
    }
    header.push("configuration".into());
    let mut table = vec![header];
    for r in rows {
        let mut row = vec![
            r.setup.clone(),
            per_day(&r.per_day),
            format!("{:.0}", r.per_move),
            format!("{:.1} s", r.outage_s),
        ];
        if fleet {
            row.push(format!("{:.1} s", r.last_followed_s));
        }
        row.push(r.config.clone());
        table.push(row);
    }
    out.push_str(&columns(&table));
    out
}
/// Left-aligned columns, two spaces apart.
pub fn columns(table: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..table[0].len())
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in table {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn per_day(p: &PerDay) -> String {
    if p.count == 0 {
        format!("0 (< {:.0})", p.hi)
    } else {
        format!("{:.0} ({:.0}–{:.0})", p.per_day, p.lo, p.hi)
    }
}

/// `sim predict --engine haproxy|envoy|caddy`: client errors a day on a proxy's policy, per
/// variant.
pub fn proxy_table(
    engine: &str,
    input: &PredictInput,
    rows: &[crate::proxies::ProxyPrediction],
) -> String {
    let mut out = format!(
        "Expected client errors per day on {engine}'s policy at {:.0} rps, the answer changing every {} s (95 % interval; {} s simulated per variant, seed {}).\n\n",
        rows[0].requests as f64 / (input.sample.0 as f64 / 1e6),
        input.swap_interval.0 / 1_000_000,
        input.sample.0 / 1_000_000,
        input.seed
    );
    let mut table = vec![
        [
            "variant",
            "errors/day",
            "502/day (failed try)",
            "503/day (no server)",
            "closed/day",
            "change",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in rows {
        table.push(vec![
            r.variant.clone(),
            per_day(&r.total),
            per_day(&r.failed_try),
            per_day(&r.no_server),
            per_day(&r.closed),
            r.change.clone(),
        ]);
    }
    out.push_str(&columns(&table));
    out
}

/// `sim predict`: client-visible `no live upstreams` a day on nginx, per variant and class.
pub fn predict_table(input: &PredictInput, rows: &[Prediction]) -> String {
    let mut out = format!(
        "Expected client-visible `no live upstreams` per day at {:.0} rps (95 % interval; {} s simulated per variant, seed {}).\n\n",
        rows[0].requests as f64 / (input.sample.0 as f64 / 1e6),
        input.sample.0 / 1_000_000,
        input.seed
    );
    let fleet = rows[0].instances > 1;
    if fleet {
        out.insert_str(
            out.len() - 2,
            &format!(
                " Summed over a fleet of {} instances at {:.0} rps each, every one with its own re-query phase and races; per instance: lowest–median–highest.",
                rows[0].instances,
                rows[0].requests as f64 / (input.sample.0 as f64 / 1e6) / f64::from(rows[0].instances)
            ),
        );
    }
    // Only the classes that occur somewhere.
    let classes: Vec<usize> = (0..rows[0].classes.len())
        .filter(|&i| rows.iter().any(|r| r.classes[i].1.count > 0))
        .collect();
    let mut header = vec!["variant".to_string(), "NLU/day".to_string()];
    header.extend(classes.iter().map(|&i| rows[0].classes[i].0.clone()));
    header.push("other 502/day".into());
    if fleet {
        header.push("per instance".into());
    }
    header.push("change".into());
    let mut table: Vec<Vec<String>> = vec![header];
    for r in rows {
        let mut row = vec![r.variant.clone(), per_day(&r.total)];
        row.extend(classes.iter().map(|&i| per_day(&r.classes[i].1)));
        row.push(per_day(&r.upstream_failures));
        if let Some(sp) = &r.per_instance {
            row.push(format!("{:.0}–{:.0}–{:.0}", sp.min, sp.median, sp.max));
        }
        row.push(r.change.clone());
        table.push(row);
    }
    out.push_str(&columns(&table));
    out
}
