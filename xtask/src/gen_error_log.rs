//! Writes a large nginx error log for the diagnose benchmark: the lines of an existing error
//! log (e.g. the `no live upstreams` lines of `gen_lab_log`) merged in time order with N noise
//! lines spread evenly over the span — resolver timeouts, first-try failures on client
//! connections (`upstream prematurely closed`, `connect() failed (111…)`, `upstream timed out`),
//! `upstream server temporarily disabled` warnings and `client prematurely closed` infos, in
//! nginx's own line format. Deterministic (no RNG).
//!
//! ```text
//! cargo xtask gen-error-log \
//!     nlu-error.log big-error.log 1000000 [START_EPOCH_S] [SPAN_S]
//! ```

use std::io::{BufRead, BufReader, BufWriter, Write};

pub fn main(args: Vec<String>) -> std::io::Result<()> {
    let mut args = args.into_iter().skip(1);
    let input = args.next().unwrap_or_else(|| "error.log".into());
    let output = args.next().unwrap_or_else(|| "big-error.log".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    // Defaults: the span of `gen_lab_log`'s 10 M lines (300 rps from 2026-11-30T06:00:00Z).
    let start: i64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_796_018_400);
    let span: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(33_334);
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&output)?);
    let mut lines = BufReader::new(std::fs::File::open(&input)?).lines();
    let mut pending = lines.next().transpose()?;
    let stamp = |t: i64| {
        jiff::Timestamp::from_second(t)
            .map(|ts| ts.strftime("%Y/%m/%d %H:%M:%S").to_string())
            .unwrap_or_default()
    };
    let (mut last_t, mut last_stamp) = (i64::MIN, String::new());
    let mut written = 0u64;
    for k in 0..n {
        let t = start + (k as i128 * span as i128 / n.max(1) as i128) as i64;
        if t != last_t {
            last_t = t;
            last_stamp = stamp(t);
        }
        // The input's lines of earlier seconds go first (their stamps sort as text).
        while let Some(l) = &pending {
            if l.get(..19).is_some_and(|s| s <= last_stamp.as_str()) {
                writeln!(out, "{l}")?;
                written += 1;
                pending = lines.next().transpose()?;
            } else {
                break;
            }
        }
        let cid = 100 + k % 997;
        let ctx = format!(
            ", client: 127.0.0.1, server: , request: \"GET /n/{k} HTTP/1.1\", upstream: \"http://127.0.0.{}:8080/n/{k}\", host: \"127.0.0.1:8080\"",
            20 + 10 * (k % 2)
        );
        let line = match k % 20 {
            0..=7 => format!(
                "{last_stamp} [error] 8#8: be.lab could not be resolved (110: Operation timed out)"
            ),
            8..=11 => format!(
                "{last_stamp} [error] 7#7: *{cid} upstream prematurely closed connection while reading response header from upstream{ctx}"
            ),
            12..=14 => format!(
                "{last_stamp} [error] 7#7: *{cid} connect() failed (111: Connection refused) while connecting to upstream{ctx}"
            ),
            15 | 16 => format!(
                "{last_stamp} [warn] 7#7: *{cid} upstream server temporarily disabled while connecting to upstream{ctx}"
            ),
            17 | 18 => format!(
                "{last_stamp} [info] 7#7: *{cid} client prematurely closed connection while reading upstream{ctx}"
            ),
            _ => format!(
                "{last_stamp} [error] 7#7: *{cid} upstream timed out (110: Connection timed out) while reading response header from upstream{ctx}"
            ),
        };
        writeln!(out, "{line}")?;
        written += 1;
    }
    while let Some(l) = pending {
        writeln!(out, "{l}")?;
        written += 1;
        pending = lines.next().transpose()?;
    }
    out.flush()?;
    eprintln!("wrote {written} lines to {output}");
    Ok(())
}
