//! `resolvelab load report FILE…`: re-read result files, merge them, and render text, JSON,
//! vegeta-compatible CSV or a self-contained HTML page with inline SVG charts.

use crate::record::{Header, Record, read_file};
use crate::summary::{Summary, SummaryBuilder};
use base64::Engine as _;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Output formats of `load report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human text (the same as the end of `resolvelab load`).
    Text,
    /// The [`Summary`] as JSON.
    Json,
    /// vegeta `encode --to csv` columns, one row per request.
    Csv,
    /// A self-contained HTML page with inline SVG charts.
    Html,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "html" => Ok(Format::Html),
            _ => Err(format!(
                "unknown report format `{s}`: use text, json, csv or html"
            )),
        }
    }
}

/// Result files merged into one time-ordered set.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Each input file and its header.
    pub files: Vec<(PathBuf, Header)>,
    /// `(file index, record)`, ordered by scheduled time.
    pub records: Vec<(usize, Record)>,
    /// The summary over all records.
    pub summary: Summary,
}

/// Read and merge result files. Malformed lines are counted in the summary, never fatal.
pub fn merge(paths: &[PathBuf]) -> anyhow::Result<Merged> {
    if paths.is_empty() {
        anyhow::bail!("no result files given: `resolvelab load report FILE…`");
    }
    let mut files = Vec::new();
    let mut records = Vec::new();
    let mut malformed = 0u64;
    for (i, p) in paths.iter().enumerate() {
        let f = read_file(p)?;
        malformed += f.malformed as u64;
        for (line, err) in &f.malformed_samples {
            resolvelab_core::progress::line(format!(
                "warning: {}:{line}: skipped a malformed record ({err})",
                p.display()
            ));
        }
        records.extend(f.records.into_iter().map(|r| (i, r)));
        files.push((p.clone(), f.header));
    }
    records.sort_by_key(|(_, r)| (r.t_us, r.seq));
    let origin = records.first().map_or(0, |(_, r)| r.t_us);
    let open_loop = files.iter().all(|(_, h)| h.plan != "max");
    let mut b = SummaryBuilder::new(origin, open_loop);
    let names: Vec<&str> = files
        .iter()
        .filter_map(|(_, h)| h.header_capture.as_deref())
        .collect();
    b.header_name(names.first().map(|s| s.to_string()));
    b.malformed(malformed);
    for (_, r) in &records {
        b.add(r);
    }
    Ok(Merged {
        files,
        records,
        summary: b.finish(),
    })
}

/// Render merged results in a format.
pub fn render(m: &Merged, f: Format) -> anyhow::Result<String> {
    Ok(match f {
        Format::Text => {
            let mut s = String::new();
            for (p, h) in &m.files {
                let _ = writeln!(s, "# {}  target {}  plan {}", p.display(), h.target, h.plan);
            }
            s.push_str(&m.summary.to_text());
            s
        }
        Format::Json => serde_json::to_string_pretty(&m.summary)? + "\n",
        Format::Csv => to_csv(m),
        Format::Html => to_html(m)?,
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// vegeta's CSV columns (no header row): timestamp (ns), code, latency (ns), bytes out,
/// bytes in, error, base64 body, attack, seq, method, url, base64 headers. Our timestamp is
/// the *scheduled* time and our latency the corrected one; the attack name is the file name;
/// the body is not kept (empty) and the headers hold the captured header, if any.
pub fn to_csv(m: &Merged) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut s = String::with_capacity(m.records.len() * 96);
    for (fi, r) in &m.records {
        let (path, h) = &m.files[*fi];
        let attack = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let headers = match (&h.header_capture, &r.header) {
            (Some(n), Some(v)) => b64.encode(format!("{n}: {v}\r\n")),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            // The body column (7th) stays empty: bodies are not kept.
            "{},{},{},{},{},{},,{},{},{},{},{}",
            r.t_us as i128 * 1000,
            r.status.filter(|_| r.error.is_none()).unwrap_or(0),
            r.latency_us.unwrap_or(0).max(0) as i128 * 1000,
            0,
            r.bytes,
            r.error.map(|e| e.as_str()).unwrap_or(""),
            csv_field(&attack),
            r.seq,
            csv_field(&r.method),
            csv_field(&h.target),
            headers
        );
    }
    s
}

type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

fn line_chart(title: &str, y_label: &str, series: &[Series<'_>]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        let x_max = series
            .iter()
            .flat_map(|s| s.2.iter().map(|p| p.0))
            .fold(1.0f64, f64::max);
        let y_max = series
            .iter()
            .flat_map(|s| s.2.iter().map(|p| p.1))
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("seconds since start")
            .y_desc(y_label)
            .draw()
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        for (name, color, pts) in series {
            let c = *color;
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("chart: {e}"))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    }
    Ok(svg)
}

/// The HTML page: summary, latency over time, status classes per second; no external assets.
pub fn to_html(m: &Merged) -> anyhow::Result<String> {
    let s = &m.summary;
    let ms = |us: u64| us as f64 / 1000.0;
    let sec = |t: i64| t as f64;
    let latency = line_chart(
        "Latency per second (by scheduled time)",
        "milliseconds",
        &[
            (
                "p50 corrected",
                RGBColor(31, 119, 180),
                s.per_second
                    .iter()
                    .map(|x| (sec(x.t), ms(x.p50_us)))
                    .collect(),
            ),
            (
                "p99 corrected",
                RGBColor(255, 127, 14),
                s.per_second
                    .iter()
                    .map(|x| (sec(x.t), ms(x.p99_us)))
                    .collect(),
            ),
            (
                "max corrected",
                RGBColor(214, 39, 40),
                s.per_second
                    .iter()
                    .map(|x| (sec(x.t), ms(x.max_us)))
                    .collect(),
            ),
            (
                "p99 uncorrected",
                RGBColor(44, 160, 44),
                s.per_second
                    .iter()
                    .map(|x| (sec(x.t), ms(x.uncorrected_p99_us)))
                    .collect(),
            ),
        ],
    )?;
    let cls = |f: fn(&crate::summary::Second) -> u64| -> Vec<(f64, f64)> {
        s.per_second
            .iter()
            .map(|x| (sec(x.t), f(x) as f64))
            .collect()
    };
    let classes = line_chart(
        "Status classes per second",
        "requests",
        &[
            ("2xx", RGBColor(44, 160, 44), cls(|x| x.classes.c2xx)),
            ("3xx", RGBColor(148, 103, 189), cls(|x| x.classes.c3xx)),
            ("4xx", RGBColor(255, 127, 14), cls(|x| x.classes.c4xx)),
            ("5xx", RGBColor(214, 39, 40), cls(|x| x.classes.c5xx)),
            ("errors", RGBColor(0, 0, 0), cls(|x| x.classes.errors)),
        ],
    )?;
    use resolvelab_core::doc::{self, Block, Doc, Table, code, html, n};
    let files = (m.files.iter())
        .map(|(p, hd)| {
            vec![
                code(p.display().to_string()),
                doc::m(" — target "),
                code(&hd.target),
                doc::m(", plan "),
                code(&hd.plan),
            ]
        })
        .collect();
    let cols = [
        "t (s)", "requests", "2xx", "3xx", "4xx", "5xx", "errors", "p50", "p99", "max",
    ];
    let human = crate::summary::human_us;
    let rows = (s.per_second.iter())
        .map(|x| {
            vec![
                n(x.t),
                n(x.requests),
                n(x.classes.c2xx),
                n(x.classes.c3xx),
                n(x.classes.c4xx),
                n(x.classes.c5xx),
                n(x.classes.errors),
                n(human(x.p50_us)),
                n(human(x.p99_us)),
                n(human(x.max_us)),
            ]
        })
        .collect();
    let chart = |id, svg| Block::Chart {
        id: Some(id),
        svg,
        caption: None,
    };
    let h2 = |t: &str| Block::Heading(2, vec![doc::m(t)]);
    let page = Doc {
        title: "resolvelab load report".into(),
        blocks: vec![
            Block::List(files),
            h2("Summary"),
            Block::Pre(s.to_text()),
            h2("Latency over time"),
            chart("chart-latency", latency),
            h2("Status classes per second"),
            chart("chart-classes", classes),
            h2("Per second"),
            Block::Table(Table {
                id: Some("per-second"),
                cols: cols.iter().map(|c| (*c, true)).collect(),
                rows,
                keyed: false,
            }),
        ],
    };
    let css = "pre{background:#f6f6f6;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere}";
    Ok(html::render(&page, css))
}

/// Write `text` to `out` (`None` or `-`: standard output).
pub fn write_out(out: Option<&Path>, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match out {
        Some(p) if p.as_os_str() != "-" => std::fs::write(p, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display())),
        _ => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())?;
            o.flush()?;
            Ok(())
        }
    }
}
