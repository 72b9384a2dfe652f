//! Writes a large lab-format access log (and a matching error log) for the diagnose benchmark:
//! 300 rps of successes alternating between two peers every 6 s, a generation-race NLU after
//! every 50th swap and an NXDOMAIN-like burst every 20,000 s. Deterministic (no RNG).
//!
//! ```text
//! cargo xtask gen-lab-log /tmp/bench/access.log 10000000
//! ```

use std::io::{BufWriter, Write};

pub fn main(args: Vec<String>) -> std::io::Result<()> {
    let mut args = args.into_iter().skip(1);
    let path = args.next().unwrap_or_else(|| "access.log".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let err_path = std::path::Path::new(&path).with_file_name("error.log");
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
    let mut e = BufWriter::new(std::fs::File::create(err_path)?);
    let t0_ms: u64 = 1_796_018_400_000;
    let peers = ["127.0.0.20:8080", "127.0.0.30:8080"];
    for i in 0..n {
        // 300 rps: one request every 3.333 ms.
        let t = t0_ms + i * 10 / 3;
        let rel = t - t0_ms;
        let period = rel / 6000;
        let peer = peers[(period % 2) as usize];
        let conn = 1 + i % 64;
        let creq = 1 + i / 64;
        let burst = rel % 20_000_000 >= 10_000_000 && rel % 20_000_000 < 10_006_000;
        let race = period % 50 == 49 && rel % 6000 < 4 && !burst;
        let secs = t / 1000;
        let ms = t % 1000;
        if burst || race {
            let ua = if race {
                format!("{}, be", peers[((period + 1) % 2) as usize])
            } else {
                "be".to_string()
            };
            writeln!(
                w,
                "{secs}.{ms:03} 502 \"{ua}\" \"502\" 0.000 GET {conn} {creq} \"-\" \"-\" \"GET /p/{i} HTTP/1.1\" 127.0.0.1"
            )?;
            let lt = jiff::Timestamp::from_second(secs as i64).unwrap();
            writeln!(
                e,
                "{} [error] 7#7: *{conn} no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: \"GET /p/{i} HTTP/1.1\", upstream: \"http://be/p/{i}\", host: \"127.0.0.1:8080\"",
                lt.strftime("%Y/%m/%d %H:%M:%S")
            )?;
        } else {
            writeln!(
                w,
                "{secs}.{ms:03} 200 \"{peer}\" \"200\" 0.00{} GET {conn} {creq} \"0.00{}\" \"0.000\" \"GET /p/{i} HTTP/1.1\" 127.0.0.1",
                1 + i % 7,
                1 + i % 7
            )?;
        }
    }
    w.flush()?;
    e.flush()
}
