//! Throughput probe used while tuning: `--rate max` against a URL, summary as JSON on stdout.
//!
//! ```text
//! cargo xtask load-max http://127.0.0.30:18081/ 64 5s [threads]
//! ```
use resolvelab_load::{CancellationToken, Live, LoadConfig, Output, RatePlan, run_load};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counts allocations, to report allocations per request (`ALLOCS=1`; off by default, since
/// the counter itself costs an atomic per allocation). It is every xtask tool's allocator; off,
/// it costs one relaxed load per allocation.
struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static COUNT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNT.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNT.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let a: Vec<String> = args.into_iter().collect();
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
    COUNT.store(std::env::var_os("ALLOCS").is_some(), Relaxed);
    let s = rt.block_on(run_load(
        &cfg,
        Output::None,
        Live::new(),
        CancellationToken::new(),
    ))?;
    println!(
        "{:.0} rps, {} requests, p99 {} µs, errors {:?}",
        s.throughput_rps, s.requests, s.latency.p99_us, s.errors
    );
    if COUNT.load(Relaxed) {
        eprintln!(
            "{:.2} allocations per request",
            ALLOCS.load(Relaxed) as f64 / s.requests.max(1) as f64
        );
    }
    Ok(())
}
