//! Simulator throughput: simulated requests per second of wall time, one core.
//!
//! `cargo bench -p resolvelab-sim --bench sim` (add `-- day` for the full simulated day at
//! 5,000 rps). Results and the rerun command are in docs/bench/sim.md.

use resolvelab_sim::nginx::predict::{PredictInput, baseline_config};
use resolvelab_sim::nginx::{FaultKind, Us, simulate, simulate_counts};
use std::time::Instant;

/// CPU time of this thread: on a shared machine, wall time measures the neighbours too.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn main() {
    let day = std::env::args().any(|a| a == "day");
    let p = PredictInput {
        rps: 5000.0,
        ..PredictInput::default()
    };
    println!(
        "| case | simulated requests | wall (s) | CPU (s) | simulated req/s per CPU-second | × real time |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    // `lab`: the lab's shape instead of predict's: two workers (one keep-alive cache each) and
    // the backend's reclaim race (a close decided per response, caught only inside its gap).
    let run = |name: &str, sample_s: i64, logs: bool, lab: bool| -> f64 {
        let mut cfg = baseline_config(&p);
        cfg.poisson = false;
        cfg.duration = Us::s(sample_s);
        if lab {
            cfg.workers = 2;
            for f in &mut cfg.faults {
                f.fault = FaultKind::Reclaim {
                    p: 0.001,
                    delay_min: Us(0),
                    delay_max: Us::ms(50),
                };
            }
        }
        let t0 = Instant::now();
        let c0 = thread_cpu_s();
        let s = if logs {
            let dir = tempfile::tempdir().expect("tempdir");
            simulate(&cfg, dir.path()).expect("simulate")
        } else {
            simulate_counts(&cfg).expect("simulate")
        };
        let cpu = thread_cpu_s() - c0;
        let wall = t0.elapsed().as_secs_f64();
        let rate = s.requests as f64 / cpu;
        println!(
            "| {name} | {} | {wall:.2} | {cpu:.2} | {:.0} | {:.0} |",
            s.requests,
            rate,
            sample_s as f64 / cpu
        );
        assert!(
            s.swaps > 0 && s.try_failures > 0,
            "the benchmark must exercise swaps and failures"
        );
        rate
    };
    let counting = run("count only, 1 h at 5,000 rps", 3600, false, false);
    let lab = run(
        "count only, 1 h at 5,000 rps, 2 workers + lab reclaim",
        3600,
        false,
        true,
    );
    let logging = run("full logs, 10 min at 5,000 rps", 600, true, false);
    println!();
    println!(
        "ratio count-only / full-logs: {:.1}×; count-only vs the 5,000,000 req/s target: {:.2}× \
         (2 workers + lab reclaim: {:.2}×)",
        counting / logging,
        counting / 5e6,
        lab / 5e6
    );
    if day {
        let d = run("count only, 1 day at 5,000 rps", 86_400, false, false);
        println!("one simulated day: {:.2}× the target", d / 5e6);
    }
}
