//! The diagnose benchmark's measured program: the full pipeline that `resolvelab diagnose` runs
//! (parse + join + classify + render JSON, Markdown and HTML), timed, with lines per second.
//!
//! ```text
//! cargo xtask bench-pipeline access.log error.log [PRESET]
//! ```

use resolvelab_diagnose::{Options, diagnose};
use resolvelab_history::logformat::LogFormat;
use resolvelab_report::{Format, render_diagnosis};
use std::time::Instant;

pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let mut args = args.into_iter().skip(1);
    let access = args.next().unwrap_or_else(|| "access.log".into());
    let error = args.next();
    let mut o = Options::new(
        vec![access.into()],
        error.into_iter().map(Into::into).collect(),
    );
    o.log_format = match args.next() {
        Some(p) => LogFormat::from_arg(&p)?,
        None => LogFormat::lab(),
    };
    o.tz_offset_s = Some(0);
    let t = Instant::now();
    let d = diagnose(&o)?;
    let parse_s = t.elapsed().as_secs_f64();
    let json = render_diagnosis(&d, Format::Json)?;
    let md = render_diagnosis(&d, Format::Md)?;
    let html = render_diagnosis(&d, Format::Html)?;
    let total_s = t.elapsed().as_secs_f64();
    println!(
        "lines={} seconds={total_s:.3} diagnose_seconds={parse_s:.3} lines_per_s={:.0} nlu={} incidents={} json_bytes={} md_bytes={} html_bytes={}",
        d.requests,
        d.requests as f64 / total_s,
        d.nlu.total,
        d.incidents.len(),
        json.len(),
        md.len(),
        html.len()
    );
    Ok(())
}
