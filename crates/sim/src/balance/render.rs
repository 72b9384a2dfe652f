//! Presentation of a balancing trace: a plain-text table and a self-contained HTML timeline.

use super::{BalanceInput, RequestTrace, Strategy};
use std::fmt::Write as _;

/// The trace's columns, in the text table and on the HTML page (the JSON keys of a
/// [`RequestTrace`]).
const COLUMNS: [&str; 10] = [
    "id",
    "arrival",
    "service",
    "dnsReturned",
    "dnsCacheExpiresAt",
    "selected",
    "reused",
    "connection",
    "activeBefore",
    "doneAt",
];

/// A fixed-width text table, one row per request.
pub fn render_table(rows: &[RequestTrace]) -> String {
    let header = COLUMNS;
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.arrival.to_string(),
                r.service.to_string(),
                r.dns_returned.join(","),
                r.dns_cache_expires_at.to_string(),
                r.selected.clone(),
                r.reused.to_string(),
                r.connection.clone(),
                r.active_before.to_string(),
                r.done_at.to_string(),
            ]
        })
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, items: &[&str]| {
        let mut s = String::new();
        for (i, (c, w)) in items.iter().zip(&width).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let _ = write!(s, "{c:<w$}");
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(&mut out, &header);
    for row in &cells {
        let refs: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &refs);
    }
    out
}

use resolvelab_core::text::html_escape as esc;

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

/// Pack intervals into the fewest rows (first row whose last end ≤ start).
fn pack(intervals: &[(i64, i64)]) -> (Vec<usize>, usize) {
    let mut ends: Vec<i64> = Vec::new();
    let mut row_of = Vec::with_capacity(intervals.len());
    for &(s, e) in intervals {
        match ends.iter().position(|&end| end <= s) {
            Some(r) => {
                ends[r] = e.max(s + 1);
                row_of.push(r);
            }
            None => {
                ends.push(e.max(s + 1));
                row_of.push(ends.len() - 1);
            }
        }
    }
    let n = ends.len().max(1);
    (row_of, n)
}

/// Each backend's colour, the same in the drawing and the table.
fn color_of(input: &BalanceInput, backend: &str) -> &'static str {
    let i = (input.backends.iter())
        .position(|b| b.id == backend)
        .unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

/// A self-contained HTML page through the report model (`core::doc`): what the columns mean,
/// the timeline drawing, the trace table (each selected backend with its colour) and the input.
pub fn render_html(input: &BalanceInput, strategy: Strategy, rows: &[RequestTrace]) -> String {
    use resolvelab_core::doc::{Block, Cell, Doc, Table, code, html, m, n, p};
    let trace = (rows.iter())
        .map(|r| {
            vec![
                p(&r.id).into(),
                n(r.arrival),
                n(r.service),
                p(r.dns_returned.join(",")).into(),
                n(r.dns_cache_expires_at),
                Cell::from(p(&r.selected)).swatch(color_of(input, &r.selected)),
                n(if r.reused { "yes" } else { "new" }),
                p(&r.connection).into(),
                n(r.active_before),
                n(r.done_at),
            ]
        })
        .collect();
    let page = Doc {
        title: format!("DNS vs proxy balancing — strategy {strategy}"),
        blocks: vec![
            Block::Para(vec![m(format!(
                "{} requests. **dnsReturned** is what the (cached) DNS answer said at arrival; **selected** is the \
backend the request really reached. They are different observations: the DNS cache refreshes only at \
expiry, proxy strategies ignore DNS and filter unhealthy backends, and a request rides an existing \
connection when one to the same address has a free stream (maxStreams = {}).",
                rows.len(),
                input.max_streams
            ))]),
            Block::Chart {
                id: Some("timeline"),
                svg: timeline_svg(input, rows),
                caption: None,
            },
            Block::Heading(2, vec![m("Trace")]),
            Block::Table(Table {
                id: Some("trace"),
                cols: COLUMNS.iter().map(|c| (*c, false)).collect(),
                rows: trace,
                keyed: false,
            }),
            Block::Heading(2, vec![m("Input")]),
            Block::Pre(serde_json::to_string_pretty(input).unwrap_or_default()),
            Block::Para(vec![
                m("Generated by "),
                code(format!(
                    "resolvelab sim balance --strategy {strategy} --format html"
                )),
                m("."),
            ]),
        ],
    };
    html::render(&page, CSS)
}

/// The drawing's own styles.
const CSS: &str = "svg text.lane{font-size:12px;font-weight:600} svg text.bar{font-size:10px;fill:#fff;pointer-events:none} \
svg text.dark{fill:#222} svg text.tick{font-size:10px;fill:#666;text-anchor:middle} pre{background:#f6f6f6;padding:8px;font-size:12px}";

/// The drawing's coordinate system and what is drawn so far: x of a time, the next lane's y.
struct Canvas {
    t0: i64,
    scale: f64,
    svg: String,
    y: f64,
}

const LABEL_W: f64 = 200.0;
const PLOT_W: f64 = 900.0;
const ROW_H: f64 = 18.0;
const LANE_GAP: f64 = 8.0;

impl Canvas {
    fn x(&self, t: i64) -> f64 {
        LABEL_W + (t - self.t0) as f64 * self.scale
    }

    /// A lane of `subrows` rows titled `title`; returns the y of its first row.
    fn lane(&mut self, title: &str, subrows: usize) -> f64 {
        let y = self.y;
        let h = subrows as f64 * ROW_H + 4.0;
        let _ = write!(
            self.svg,
            r##"<rect x="0" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="#f6f6f6"/><text x="6" y="{ty:.1}" class="lane">{t}</text>"##,
            w = LABEL_W + PLOT_W + 10.0,
            ty = y + 13.0,
            t = esc(title)
        );
        self.y += h + LANE_GAP;
        y + 2.0
    }

    /// A bar from `s` to `e` in row `sub` of the lane at `top`, with its label and tooltip.
    #[allow(clippy::too_many_arguments)]
    fn bar(&mut self, top: f64, sub: usize, s: i64, e: i64, fill: &str, text: &str, tip: &str) {
        let x0 = self.x(s);
        let w = (self.x(e.max(s)) - x0).max(3.0);
        let yy = top + sub as f64 * ROW_H;
        let _ = write!(
            self.svg,
            r##"<g><title>{tip}</title><rect x="{x0:.1}" y="{yy:.1}" width="{w:.1}" height="{h:.1}" rx="3" fill="{fill}" stroke="#333" stroke-width="0.5"/><text x="{tx:.1}" y="{ty:.1}" class="{cls}">{text}</text></g>"##,
            h = ROW_H - 3.0,
            tx = x0 + 3.0,
            ty = yy + 11.5,
            tip = esc(tip),
            text = esc(text),
            // Light fills (the DNS lanes) need dark text.
            cls = if fill.starts_with("#c") || fill.starts_with("#d") {
                "bar dark"
            } else {
                "bar"
            }
        );
    }
}

/// The SVG timeline: one lane for the DNS authority, one for the DNS cache, one per backend and
/// one per connection (streams stacked inside).
fn timeline_svg(input: &BalanceInput, rows: &[RequestTrace]) -> String {
    let t_end = rows
        .iter()
        .map(|r| r.done_at.max(r.dns_cache_expires_at))
        .chain(input.dns.iter().map(|a| a.at + 1))
        .max()
        .unwrap_or(1)
        .max(1);
    let t0 = rows
        .first()
        .map(|r| r.arrival)
        .unwrap_or(0)
        .min(input.dns[0].at);
    let mut c = Canvas {
        t0,
        scale: PLOT_W / (t_end - t0).max(1) as f64,
        svg: String::new(),
        y: 30.0,
    };
    dns_lanes(&mut c, input, rows, t_end);
    backend_lanes(&mut c, input, rows);
    connection_lanes(&mut c, input, rows);
    // Time axis.
    let mut axis = String::new();
    for t in t0..=t_end {
        let xx = c.x(t);
        let y = c.y;
        let _ = write!(
            axis,
            r##"<line x1="{xx:.1}" y1="24" x2="{xx:.1}" y2="{y:.1}" stroke="#ccc" stroke-width="0.5"/><text x="{xx:.1}" y="18" class="tick">{t}</text>"##
        );
    }
    let height = c.y + 10.0;
    let width = LABEL_W + PLOT_W + 20.0;
    let svg = c.svg;
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}">
{axis}{svg}
</svg>"##
    )
}

/// The DNS authority's answers over time, and each fill of the DNS cache with how long it is kept.
fn dns_lanes(c: &mut Canvas, input: &BalanceInput, rows: &[RequestTrace], t_end: i64) {
    let top = c.lane("DNS authority", 1);
    for (i, a) in input.dns.iter().enumerate() {
        let end = input.dns.get(i + 1).map(|n| n.at).unwrap_or(t_end);
        c.bar(
            top,
            0,
            a.at,
            end,
            "#ddd",
            &format!("[{}] ttl {}", a.addresses.join(","), a.ttl),
            &format!(
                "from t={} the authority answers [{}]",
                a.at,
                a.addresses.join(",")
            ),
        );
    }
    let top = c.lane("DNS cache", 1);
    let mut last_fill: Option<(i64, i64, String)> = None;
    let mut fills = Vec::new();
    for r in rows {
        let key = (r.dns_cache_expires_at, r.dns_returned.join(","));
        if last_fill.as_ref().map(|(_, e, a)| (*e, a.clone())) != Some(key.clone()) {
            fills.push((r.arrival, key.0, key.1.clone()));
            last_fill = Some((r.arrival, key.0, key.1));
        }
    }
    for (s, e, a) in &fills {
        c.bar(
            top,
            0,
            *s,
            *e,
            "#cfe3f7",
            &format!("[{a}] until {e}"),
            &format!("cache filled at t={s} with [{a}], expires at t={e}"),
        );
    }
}

/// One lane per backend: the requests it really served.
fn backend_lanes(c: &mut Canvas, input: &BalanceInput, rows: &[RequestTrace]) {
    for b in &input.backends {
        let mine: Vec<&RequestTrace> = rows.iter().filter(|r| r.selected == b.id).collect();
        let spans: Vec<(i64, i64)> = mine.iter().map(|r| (r.arrival, r.done_at)).collect();
        let (row_of, n) = pack(&spans);
        let title = format!(
            "backend {} (w={}{})",
            b.id,
            b.weight,
            if b.healthy { "" } else { ", unhealthy" }
        );
        let top = c.lane(&title, n);
        for (r, sub) in mine.iter().zip(row_of) {
            c.bar(
                top,
                sub,
                r.arrival,
                r.done_at,
                color_of(input, &b.id),
                &r.id,
                &format!(
                    "{} t={}..{} on {} ({}), dns returned [{}], activeBefore {}",
                    r.id,
                    r.arrival,
                    r.done_at,
                    r.connection,
                    if r.reused { "reused" } else { "new" },
                    r.dns_returned.join(","),
                    r.active_before
                ),
            );
        }
    }
}

/// One lane per connection: its streams, stacked up to maxStreams.
fn connection_lanes(c: &mut Canvas, input: &BalanceInput, rows: &[RequestTrace]) {
    let mut conn_ids: Vec<(String, String)> = input
        .connections
        .iter()
        .map(|c| (c.id.clone(), c.address.clone()))
        .collect();
    for r in rows {
        if !conn_ids.iter().any(|(id, _)| id == &r.connection) {
            conn_ids.push((r.connection.clone(), r.selected.clone()));
        }
    }
    for (cid, addr) in &conn_ids {
        let mine: Vec<&RequestTrace> = rows.iter().filter(|r| &r.connection == cid).collect();
        let spans: Vec<(i64, i64)> = mine.iter().map(|r| (r.arrival, r.done_at)).collect();
        let (row_of, n) = pack(&spans);
        let supplied = input.connections.iter().any(|c| &c.id == cid);
        let title = format!(
            "{cid} → {addr}{}",
            if supplied { " (pre-existing)" } else { "" }
        );
        let top = c.lane(&title, n.max(1));
        for (r, sub) in mine.iter().zip(row_of) {
            c.bar(
                top,
                sub,
                r.arrival,
                r.done_at,
                color_of(input, addr),
                &format!("{} s{}", r.id, sub + 1),
                &format!(
                    "{} stream {} on {cid}, t={}..{}{}",
                    r.id,
                    sub + 1,
                    r.arrival,
                    r.done_at,
                    if r.reused {
                        ", reused"
                    } else {
                        ", opened the connection"
                    }
                ),
            );
        }
    }
}
