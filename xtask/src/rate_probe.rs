//! Rate-accuracy probe used while tuning: an open-loop run at a fixed rate, the way
//! `resolvelab load --rate R --threads 1 [--realtime]` runs it, summary as one line.
//!
//! ```text
//! cargo xtask rate-probe http://127.0.0.20:18080/ 5000 10s 512 [rt]
//! NO_SHORT_SLICE=1 cargo run ... # the same without the lanes' short scheduler slice
//! OUT=rate.jsonl cargo run ...    # and keep the per-request records
//! ```
use resolvelab_load::{CancellationToken, Live, LoadConfig, Output, RatePlan, run_load};

pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let a: Vec<String> = args.into_iter().collect();
    let url = a
        .get(1)
        .map(String::as_str)
        .unwrap_or("http://127.0.0.1:8080/");
    let rate = a.get(2).map(String::as_str).unwrap_or("5000");
    let dur = resolvelab_core::dur::parse(a.get(3).map(String::as_str).unwrap_or("10s"))
        .map_err(anyhow::Error::msg)?;
    let conns: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(512);
    let realtime = a.get(5).is_some_and(|s| s == "rt");
    let mut cfg = LoadConfig::new(
        url,
        RatePlan::parse(rate).map_err(anyhow::Error::msg)?,
        false,
    )?;
    cfg.connections = conns;
    cfg.duration = Some(dur);
    cfg.realtime = realtime;
    // NO_SHORT_SLICE=1: measure without the short scheduler slice of the lane threads.
    cfg.short_slice = std::env::var_os("NO_SHORT_SLICE").is_none();
    // One worker: one lane, like `resolvelab load --threads 1`. LANES=n for more.
    let lanes: usize = std::env::var("LANES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(lanes.max(1))
        .enable_all()
        .build()?;
    // OUT=file.jsonl: keep the per-request records (to see when the lag happens).
    let out = std::env::var_os("OUT").map_or(Output::None, |p| Output::File(p.into()));
    let s = rt.block_on(run_load(&cfg, out, Live::new(), CancellationToken::new()))?;
    let d = s.dispatch_lag.clone().unwrap_or_default();
    println!(
        "achieved {:+.3} %, schedule lag p50 {} p99 {} µs, generator lag p50 {} p99 {} max {} µs",
        (s.achieved_rps / s.target_rps.unwrap_or(1.0) - 1.0) * 100.0,
        s.schedule_lag.p50_us,
        s.schedule_lag.p99_us,
        d.p50_us,
        d.p99_us,
        d.max_us
    );
    Ok(())
}
