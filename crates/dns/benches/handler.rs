//! Cost of one query in the packet handler, without sockets: `cargo bench -p resolvelab-dns`.
//! (The loopback qps comparison with dnsmasq is scripts/bench-dns.sh.)

use std::time::Instant;

use resolvelab_dns::client::build_query;
use resolvelab_dns::engine::EngineConfig;
use resolvelab_dns::{Engine, NameConfig, Transport, Unknown};

fn main() {
    let engine = Engine::new(EngineConfig {
        names: vec![
            NameConfig::parse_cli("bench.test.local=static:127.0.0.20").unwrap(),
            NameConfig::parse_cli("alt.test.local=alternate:127.0.0.20,127.0.0.30").unwrap(),
        ],
        ttl: 1,
        unknown: Unknown::Nxdomain,
        seed: 0,
        allow_remote: false,
    })
    .unwrap();
    let client = "127.0.0.1:5555".parse().unwrap();
    for name in ["bench.test.local", "alt.test.local", "unknown.test.local"] {
        let q = build_query(name, "A", 7, None).unwrap();
        let n = 1_000_000;
        let t0 = Instant::now();
        let mut bytes = 0usize;
        for _ in 0..n {
            bytes += engine
                .handle(&q, client, Transport::Udp)
                .bytes
                .map_or(0, |b| b.len());
        }
        let dt = t0.elapsed();
        println!(
            "{name:<20} {:>7.0} ns/query  {:>9.0} queries/s on one core  ({} bytes out)",
            dt.as_nanos() as f64 / n as f64,
            n as f64 / dt.as_secs_f64(),
            bytes / n
        );
    }
}
