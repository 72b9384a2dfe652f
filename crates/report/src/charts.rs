//! Inline SVG charts (plotters' SVG backend): request rate by outcome with swap markers and
//! incident bands, latency percentiles, and a zoom per incident.

use plotters::prelude::*;
use resolvelab_diagnose::fleet::Lane;
use resolvelab_diagnose::verdict::Series;

const OK: RGBColor = RGBColor(46, 139, 87);
const FAIL: RGBColor = RGBColor(230, 140, 0);
const NLU: RGBColor = RGBColor(200, 30, 30);
const SWAP: RGBColor = RGBColor(40, 90, 200);
const MAX_MARKERS: usize = 500;

fn failed_svg(msg: &str, w: u32, h: u32) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\"><text x=\"10\" y=\"20\">chart unavailable: {}</text></svg>",
        resolvelab_core::text::html_escape(msg)
    )
}

/// Draw into a fresh SVG string; a drawing error becomes a small SVG saying so, never a panic.
fn svg(
    (w, h): (u32, u32),
    draw: impl FnOnce(&mut String, (u32, u32)) -> Result<(), String>,
) -> String {
    let mut out = String::new();
    match draw(&mut out, (w, h)) {
        Ok(()) => out,
        Err(e) => failed_svg(&e, w, h),
    }
}

/// Requests per second by outcome (ok / failed / NLU), swap markers (blue verticals) and
/// incident bands (red shading). Times are epoch ms; the x axis is seconds since `t0_ms`.
pub fn rate_svg(
    s: &Series,
    t0_ms: i64,
    swaps: &[i64],
    bands: &[(i64, i64)],
    title: &str,
    (w, h): (u32, u32),
) -> String {
    svg((w, h), |out, size| {
        draw_rate(out, s, t0_ms, swaps, bands, title, size)
    })
}

fn draw_rate(
    out: &mut String,
    s: &Series,
    t0: i64,
    swaps: &[i64],
    bands: &[(i64, i64)],
    title: &str,
    (w, h): (u32, u32),
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let bin = s.bin_ms.max(1) as f64;
    let per_s = 1000.0 / bin;
    let x = |t: i64| (t - t0) as f64 / 1000.0;
    let x0 = s.points.first().map(|p| x(p.t_ms)).unwrap_or(0.0);
    let x1 = s
        .points
        .last()
        .map(|p| x(p.t_ms) + bin / 1000.0)
        .unwrap_or(1.0)
        .max(x0 + 0.001);
    let ymax = legend_headroom(
        s.points
            .iter()
            .map(|p| (p.ok.max(p.failed).max(p.nlu)) as f64 * per_s)
            .fold(1.0, f64::max),
        4,
        h,
    );
    let root = SVGBackend::with_string(out, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, 0f64..ymax)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("requests / s")
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(bands.iter().map(|(a, b)| {
            let (a, b) = (x(*a), x(*b).max(x(*a) + bin / 2000.0));
            Rectangle::new([(a, 0.0), (b, ymax)], NLU.mix(0.15).filled())
        }))
        .map_err(|x| e(&x))?;
    chart
        .draw_series(
            swaps
                .iter()
                .take(MAX_MARKERS)
                .map(|t| PathElement::new(vec![(x(*t), 0.0), (x(*t), ymax)], SWAP.mix(0.45))),
        )
        .map_err(|x| e(&x))?
        .label("swap")
        .legend(|(a, b)| PathElement::new(vec![(a, b), (a + 16, b)], SWAP));
    let mid = |t: i64| x(t) + bin / 2000.0;
    for (name, color, get) in [
        (
            "ok",
            OK,
            (|p: &resolvelab_diagnose::verdict::Point| p.ok) as fn(&_) -> u64,
        ),
        ("failed (502/504)", FAIL, |p| p.failed),
        ("no live upstreams", NLU, |p| p.nlu),
    ] {
        chart
            .draw_series(LineSeries::new(
                s.points
                    .iter()
                    .map(|p| (mid(p.t_ms), get(p) as f64 * per_s)),
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(name)
            .legend(move |(a, b)| {
                PathElement::new(vec![(a, b), (a + 16, b)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Latency percentiles (p50, p90, p99, max) per bin, ms.
pub fn latency_svg(s: &Series, t0_ms: i64, title: &str, (w, h): (u32, u32)) -> String {
    svg((w, h), |out, size| draw_latency(out, s, t0_ms, title, size))
}

fn draw_latency(
    out: &mut String,
    s: &Series,
    t0: i64,
    title: &str,
    size: (u32, u32),
) -> Result<(), String> {
    let bin = s.bin_ms.max(1) as f64;
    let x = |t: i64| (t - t0) as f64 / 1000.0 + bin / 2000.0;
    let pts: Vec<(f64, [f64; 4])> = s
        .points
        .iter()
        .filter_map(|p| p.latency_ms.map(|l| (x(p.t_ms), l)))
        .collect();
    let x0 = s.points.first().map(|p| x(p.t_ms)).unwrap_or(0.0) - bin / 2000.0;
    let x1 = s.points.last().map(|p| x(p.t_ms)).unwrap_or(1.0) + bin / 2000.0;
    // Not the rate chart's colours: red there means `no live upstreams`, orange failures.
    let colors = [
        RGBColor(60, 60, 60),
        RGBColor(40, 90, 200),
        RGBColor(150, 80, 170),
        RGBColor(20, 150, 160),
    ];
    let lines: Vec<Line> = ["p50", "p90", "p99", "max"]
        .iter()
        .enumerate()
        .map(|(k, name)| Line {
            name: name.to_string(),
            color: colors[k],
            points: pts.iter().map(|p| (p.0, p.1[k])).collect(),
        })
        .collect();
    lines_chart(
        out,
        title,
        size,
        (x0, x1),
        ("seconds", "latency (ms)"),
        &lines,
    )
}

/// One named line of a [`lines_chart`].
struct Line {
    name: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// The top of the y axis: the highest point plus room above it for a legend of `entries`
/// lines at the upper right (~18 px each), so the legend sits over empty space, never over
/// data.
fn legend_headroom(top: f64, entries: usize, h: u32) -> f64 {
    // The plot area is the chart less the caption, the x labels and the margins.
    let plot = (h as f64 - 72.0).max(60.0);
    // Capped so that the data keeps a quarter of a small chart (the report draws 260–360 px).
    let legend = (entries as f64 * 18.0 + 14.0).min(plot * 0.75);
    top * 1.05 * plot / (plot - legend)
}

/// Lines over `x0..x1` (seconds) from 0 to the highest point, with room for the legend above.
fn lines_chart(
    out: &mut String,
    title: &str,
    (w, h): (u32, u32),
    (x0, x1): (f64, f64),
    (x_desc, y_desc): (&str, &str),
    lines: &[Line],
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let ymax = legend_headroom(
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(1.0, f64::max),
        lines.len(),
        h,
    );
    let root = SVGBackend::with_string(out, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1.max(x0 + 0.001), 0f64..ymax)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|x| e(&x))?;
    for l in lines {
        let c = l.color;
        chart
            .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(l.name.clone())
            .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 16, b)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The slowest answer per bin for each backend (by `x-backend`), ms: a slow dependency's
/// queueing staircase next to its control.
pub fn backend_latency_svg(
    backends: &[(&str, &[resolvelab_diagnose::verdict::BackendBin])],
    t0_ms: i64,
    title: &str,
    (w, h): (u32, u32),
) -> String {
    svg((w, h), |out, size| {
        draw_backend_latency(out, backends, t0_ms, title, size)
    })
}

fn draw_backend_latency(
    out: &mut String,
    backends: &[(&str, &[resolvelab_diagnose::verdict::BackendBin])],
    t0: i64,
    title: &str,
    size: (u32, u32),
) -> Result<(), String> {
    let x = |t: i64| (t - t0) as f64 / 1000.0;
    let all = || backends.iter().flat_map(|(_, s)| s.iter());
    let x0 = all().map(|p| x(p.t_ms)).fold(f64::INFINITY, f64::min);
    let x1 = all().map(|p| x(p.t_ms)).fold(f64::NEG_INFINITY, f64::max) + 1.0;
    let (x0, x1) = if x0.is_finite() { (x0, x1) } else { (0.0, 1.0) };
    let colors = [SWAP, FAIL, OK, NLU, RGBColor(60, 60, 60)];
    let lines: Vec<Line> = backends
        .iter()
        .enumerate()
        .map(|(k, (name, bins))| Line {
            name: name.to_string(),
            color: colors[k % colors.len()],
            points: bins.iter().map(|p| (x(p.t_ms), p.max_ms)).collect(),
        })
        .collect();
    lines_chart(
        out,
        title,
        size,
        (x0, x1),
        ("seconds (scheduled send)", "slowest answer (ms)"),
        &lines,
    )
}

/// A zoom on one incident: its fine-resolution series with the incident band and swaps.
pub fn incident_svg(
    zoom: &Series,
    start_ms: i64,
    end_ms: i64,
    swaps: &[i64],
    title: &str,
    size: (u32, u32),
) -> String {
    let lo = zoom.points.first().map(|p| p.t_ms).unwrap_or(start_ms);
    let hi = zoom
        .points
        .last()
        .map(|p| p.t_ms + zoom.bin_ms)
        .unwrap_or(end_ms);
    let near: Vec<i64> = swaps
        .iter()
        .copied()
        .filter(|t| *t >= lo && *t <= hi)
        .collect();
    rate_svg(zoom, start_ms, &near, &[(start_ms, end_ms)], title, size)
}

/// Instances' failures on one time axis: one lane per instance, a mark per bin with failed
/// requests (red when NLU, orange otherwise), darker the larger the bin's failed share.
pub fn lanes_svg(lanes: &[(&str, &Lane)], t0_ms: i64, size: (u32, u32)) -> String {
    svg(size, |out, size| draw_lanes(out, lanes, t0_ms, size))
}

fn draw_lanes(
    out: &mut String,
    lanes: &[(&str, &Lane)],
    t0: i64,
    (w, h): (u32, u32),
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let x = |t: i64| (t - t0) as f64 / 1000.0;
    let x1 = lanes
        .iter()
        .filter_map(|(_, s)| s.points.last().map(|p| x(p.t_ms + s.bin_ms)))
        .fold(0.001, f64::max);
    let root = SVGBackend::with_string(out, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    // One segment per lane: its name is the label at the segment's centre.
    let mut chart = ChartBuilder::on(&root)
        .caption("failed requests per instance", ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(180)
        .build_cartesian_2d(0f64..x1, (0..lanes.len()).into_segmented())
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_labels(lanes.len() + 1)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => lanes.get(*i).map_or(String::new(), |l| l.0.to_string()),
            _ => String::new(),
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|x| e(&x))?;
    for (k, (_, s)) in lanes.iter().enumerate() {
        let marks = s.points.iter().filter(|p| p.failed + p.nlu > 0).map(|p| {
            let all = (p.ok + p.failed + p.nlu).max(1) as f64;
            let share = (p.failed + p.nlu) as f64 / all;
            let c = if p.nlu > 0 { NLU } else { FAIL };
            Rectangle::new(
                [
                    (x(p.t_ms), SegmentValue::Exact(k)),
                    (x(p.t_ms + s.bin_ms), SegmentValue::Exact(k + 1)),
                ],
                c.mix(0.25 + 0.75 * share).filled(),
            )
        });
        chart.draw_series(marks).map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{latency_svg, rate_svg};
    use resolvelab_diagnose::verdict::{Point, Series};

    /// `name="value"` of one SVG element's text.
    fn attr<'a>(el: &'a str, name: &str) -> Option<&'a str> {
        let at = el.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(&el[at..at + el[at..].find('"')?])
    }

    /// The elements of one kind in the drawing, as their tag text.
    fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
        let open = format!("<{tag} ");
        svg.match_indices(&open)
            .map(|(i, _)| &svg[i..i + svg[i..].find('>').unwrap()])
            .collect()
    }

    /// The legend's frame (x0, y0, x1, y1) and every data point (the 2-px series lines that
    /// are not legend samples), in SVG pixels, as the rendered drawing has them.
    /// A rectangle as (x0, y0, x1, y1), SVG pixels.
    type Frame = (f64, f64, f64, f64);

    fn legend_and_points(svg: &str) -> (Frame, Vec<(f64, f64)>) {
        let num = |el: &str, n: &str| attr(el, n).unwrap().parse::<f64>().unwrap();
        let frame = elements(svg, "rect")
            .into_iter()
            .find(|r| attr(r, "fill") == Some("none") && attr(r, "stroke") == Some("#000000"))
            .expect("a legend frame");
        let (x0, y0) = (num(frame, "x"), num(frame, "y"));
        let b = (x0, y0, x0 + num(frame, "width"), y0 + num(frame, "height"));
        let inside = |(x, y): (f64, f64)| x >= b.0 && x <= b.2 && y >= b.1 && y <= b.3;
        let mut data = Vec::new();
        for l in elements(svg, "polyline") {
            if attr(l, "stroke-width") != Some("2") {
                continue;
            }
            let pts: Vec<(f64, f64)> = attr(l, "points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            if !pts.iter().all(|p| inside(*p)) {
                data.extend(pts);
            }
        }
        (b, data)
    }

    /// Every point of the data under the legend's x span lies below the legend's frame.
    fn assert_legend_clear(svg: &str, what: &str) {
        let (b, data) = legend_and_points(svg);
        let under: Vec<_> = data.iter().filter(|p| p.0 >= b.0 && p.0 <= b.2).collect();
        assert!(
            !under.is_empty(),
            "{what}: no data under the legend to check"
        );
        for p in under {
            assert!(
                p.1 > b.3,
                "{what}: point {p:?} drawn inside the legend {b:?}"
            );
        }
    }

    /// A series that peaks in its last bins, right under the upper-right legend.
    fn peak_at_the_end(n: usize) -> Series {
        Series {
            bin_ms: 1000,
            points: (0..n)
                .map(|k| Point {
                    t_ms: k as i64 * 1000,
                    ok: 10,
                    failed: if k + 3 >= n { 500 } else { 0 },
                    nlu: if k + 2 >= n { 800 } else { 1 },
                    latency_ms: Some([1.0, 2.0, 3.0, if k + 2 >= n { 900.0 } else { 4.0 }]),
                })
                .collect(),
        }
    }

    #[test]
    fn the_legend_never_covers_the_data_in_the_rendered_drawing() {
        // The report's sizes (260–360 px) and a smaller one.
        for (n, h) in [(40, 360), (12, 260), (20, 200), (60, 280)] {
            let s = peak_at_the_end(n);
            let rate = rate_svg(&s, 0, &[], &[], "t", (1200, h));
            assert_legend_clear(&rate, &format!("rate {n}x{h}"));
            let lat = latency_svg(&s, 0, "t", (1200, h));
            assert_legend_clear(&lat, &format!("latency {n}x{h}"));
        }
    }
}
