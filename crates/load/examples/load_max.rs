//! Throughput probe used while tuning: `--rate max` against a URL, summary as JSON on stdout.
//!
//! ```text
//! cargo run --release -p resolvelab-load --example load_max -- http://127.0.0.30:18081/ 64 5s [threads]
//! ```
use resolvelab_load::{CancellationToken, Live, LoadConfig, Output, RatePlan, run_load};

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let url = a
        .get(1)
        .map(String::as_str)
        .unwrap_or("http://127.0.0.1:8080/");
    let conns: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let dur = resolvelab_core::dur::parse(a.get(3).map(String::as_str).unwrap_or("5s"))
        .map_err(anyhow::Error::msg)?;
    let threads: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut cfg = LoadConfig::new(url, RatePlan::Max, false)?;
    cfg.connections = conns;
    cfg.duration = Some(dur);
    // 0 threads: a current-thread runtime.
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    let s = rt.block_on(run_load(
        &cfg,
        Output::None,
        Live::new(),
        CancellationToken::new(),
    ))?;
    println!(
        "{:.0} rps, p99 {} µs, errors {:?}",
        s.throughput_rps, s.latency.p99_us, s.errors
    );
    Ok(())
}
