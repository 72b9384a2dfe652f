//! Benchmarks for docs/bench/backend.md, all measured side by side in one run by one client:
//!
//! 1. HTTP requests/s (closed loop, keep-alive): the resolvelab backend vs nginx serving a
//!    static 200, and nginx proxying to the backend.
//! 2. 5,000 requests/s open loop through nginx to the backend: achieved rate and latency
//!    (is the backend ever the bottleneck?).
//! 3. TCP fault proxy with no faults: added round-trip latency (p50/p99) vs a direct connection,
//!    and throughput in MB/s vs a direct connection.
//!
//! Run: `cargo bench -p resolvelab-backend --bench backend` (or scripts/bench-backend.sh).
//! Every load is bounded in time and count and targets loopback only.

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use resolvelab_backend::{Backend, BackendConfig};
use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx, conf};
use resolvelab_proxy::{Proxy, ProxyConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CONNS: usize = 32;
const SECS: u64 = 5;

fn rt(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap()
}

struct Load {
    rps: f64,
    ok: u64,
    errors: u64,
    hist: Histogram<u64>,
}

/// Closed loop: CONNS keep-alive connections, each sends the next request when the previous
/// answer is complete, for `secs`.
async fn closed_loop(addr: SocketAddr, secs: u64) -> Load {
    let end = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let tasks: Vec<_> = (0..CONNS)
        .map(|_| tokio::spawn(async move { conn_loop(addr, end, None).await }))
        .collect();
    merge(tasks, start).await
}

/// Open loop at `rate` requests/s spread over CONNS connections; latency is measured from the
/// scheduled send time, so queueing is not hidden (no coordinated omission).
async fn open_loop(addr: SocketAddr, rate: f64, secs: u64) -> Load {
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + Duration::from_secs(secs);
    let per = Duration::from_secs_f64(CONNS as f64 / rate);
    let tasks: Vec<_> = (0..CONNS)
        .map(|i| {
            let first = start + per.mul_f64(i as f64 / CONNS as f64);
            tokio::spawn(async move { conn_loop(addr, end, Some((first, per))).await })
        })
        .collect();
    merge(tasks, start).await
}

async fn merge(
    tasks: Vec<tokio::task::JoinHandle<(u64, u64, Histogram<u64>)>>,
    start: Instant,
) -> Load {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let (mut ok, mut errors) = (0, 0);
    for t in tasks {
        let (o, e, h) = t.await.unwrap();
        ok += o;
        errors += e;
        hist.add(h).unwrap();
    }
    Load {
        rps: ok as f64 / start.elapsed().as_secs_f64(),
        ok,
        errors,
        hist,
    }
}

async fn conn_loop(
    addr: SocketAddr,
    end: Instant,
    pace: Option<(Instant, Duration)>,
) -> (u64, u64, Histogram<u64>) {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let (mut ok, mut errors) = (0u64, 0u64);
    let s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let (mut tx, c) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    tokio::spawn(c);
    let mut n = 0u32;
    loop {
        let sched = match pace {
            Some((first, per)) => {
                let t = first + per * n;
                if t >= end {
                    break;
                }
                tokio::time::sleep_until(t.into()).await;
                t
            }
            None => {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                t
            }
        };
        n += 1;
        let req = hyper::Request::get("/")
            .header("host", "lab")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let r = async {
            tx.ready().await?;
            let resp = tx.send_request(req).await?;
            let st = resp.status();
            resp.into_body().collect().await?;
            Ok::<_, hyper::Error>(st)
        }
        .await;
        match r {
            Ok(st) if st == 200 => {
                ok += 1;
                hist.saturating_record(sched.elapsed().as_micros().max(1) as u64);
            }
            _ => {
                // A closed keep-alive connection is counted and replaced.
                errors += 1;
                let s = TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                let (t2, c) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                    .await
                    .unwrap();
                tokio::spawn(c);
                tx = t2;
            }
        }
    }
    (ok, errors, hist)
}

fn us(h: &Histogram<u64>, q: f64) -> u64 {
    h.value_at_quantile(q)
}

/// One-byte ping-pong round trips on one connection.
async fn ping_pong(addr: SocketAddr, n: usize) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut b = [0u8; 1];
    for i in 0..n + 1000 {
        let t = Instant::now();
        s.write_all(b"x").await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        if i >= 1000 {
            // the first 1000 warm up
            h.saturating_record(t.elapsed().as_nanos().max(1) as u64);
        }
    }
    h
}

async fn echo_server(addr: &str) -> SocketAddr {
    let l = TcpListener::bind(addr).await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    a
}

/// A sink that counts bytes and reports the total when the client closes.
async fn sink_server(addr: &str) -> (SocketAddr, tokio::sync::mpsc::Receiver<(u64, Instant)>) {
    let l = TcpListener::bind(addr).await.unwrap();
    let a = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let mut total = 0u64;
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                let _ = tx.send((total, Instant::now())).await;
            });
        }
    });
    (a, rx)
}

async fn throughput(
    addr: SocketAddr,
    rx: &mut tokio::sync::mpsc::Receiver<(u64, Instant)>,
    bytes: u64,
) -> f64 {
    let chunk = vec![7u8; 64 * 1024];
    let mut s = TcpStream::connect(addr).await.unwrap();
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        s.write_all(&chunk).await.unwrap();
        sent += chunk.len() as u64;
    }
    s.shutdown().await.unwrap();
    let (got, at) = rx.recv().await.unwrap();
    assert_eq!(got, sent);
    got as f64 / 1e6 / (at - t).as_secs_f64()
}

/// `wrk` requests/s against `addr`, if wrk is on PATH.
fn wrk(sup: &Supervisor, addr: SocketAddr) -> Option<f64> {
    let mut cmd = std::process::Command::new("wrk");
    cmd.args([
        "-t1",
        &format!("-c{CONNS}"),
        &format!("-d{SECS}s"),
        &format!("http://{addr}/"),
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null());
    let child = sup.spawn(&mut cmd).ok()?;
    let out = child.wait_with_output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let server_rt = rt(1);
    let client_rt = rt(1);
    println!("# resolvelab backend & proxy benchmarks\n");
    println!("load average at start: {}", loadavg());
    println!(
        "machine: {} cores, client and server pinned to one tokio worker / one nginx worker each; \
         {CONNS} keep-alive connections; {SECS} s per measurement\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    bench_http(&server_rt, &client_rt);
    bench_tcp_proxy(&server_rt, &client_rt);
    println!("\nload average at end: {}", loadavg());
}

/// The backend against nginx: closed-loop throughput and open-loop latency, direct and
/// through nginx.
fn bench_http(server_rt: &tokio::runtime::Runtime, client_rt: &tokio::runtime::Runtime) {
    // --- HTTP -------------------------------------------------------------------------------
    let backend = server_rt
        .block_on(Backend::start(BackendConfig::new(
            "b1",
            "127.0.0.150:0".parse().unwrap(),
        )))
        .unwrap();
    let baddr = backend.local_addr();
    let nginx = Nginx::obtain(None).expect("nginx (resolvelab nginx build)");
    let dir = tempfile::tempdir().unwrap();
    let static_addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.151:0").unwrap();
        l.local_addr().unwrap()
    };
    let proxy_addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.152:0").unwrap();
        l.local_addr().unwrap()
    };
    let http = format!(
        "upstream be {{\n  server {baddr};\n  keepalive 64;\n}}\n\
         keepalive_requests 1000000;\n\
         server {{\n  listen {static_addr};\n  access_log off;\n  location / {{\n    return 200 \"backend b1\\n\";\n  }}\n}}\n\
         server {{\n  listen {proxy_addr};\n  access_log off;\n  location / {{\n    proxy_pass http://be;\n    proxy_http_version 1.1;\n    proxy_set_header Connection \"\";\n  }}\n}}\n"
    );
    let opts = conf::LabConf {
        workers: 1,
        error_level: "error".into(),
    };
    let text = conf::lab_conf_with(dir.path(), &http, &opts);
    let sup = Supervisor::new().unwrap();
    let mut nx = Instance::start(&nginx, dir.path(), &text, &sup).unwrap();
    nx.wait_listening(static_addr, Duration::from_secs(10))
        .unwrap();
    nx.wait_listening(proxy_addr, Duration::from_secs(10))
        .unwrap();

    // Two alternating rounds: the machine is shared, so the order and the noise are visible.
    println!("## HTTP requests/s (closed loop, same client, one run, two alternating rounds)\n");
    println!(
        "| round | target | requests/s | p50 µs | p99 µs | errors |\n|---|---|---:|---:|---:|---:|"
    );
    let (mut sum_b, mut sum_n) = (0.0, 0.0);
    for round in 1..=2 {
        let b = client_rt.block_on(closed_loop(baddr, SECS));
        let n = client_rt.block_on(closed_loop(static_addr, SECS));
        let p = client_rt.block_on(closed_loop(proxy_addr, SECS));
        sum_b += b.rps;
        sum_n += n.rps;
        for (name, l) in [
            ("resolvelab backend (direct)", &b),
            ("nginx `return 200` (static)", &n),
            ("nginx → resolvelab backend", &p),
        ] {
            println!(
                "| {round} | {name} | {:.0} | {} | {} | {} |",
                l.rps,
                us(&l.hist, 0.5),
                us(&l.hist, 0.99),
                l.errors
            );
        }
    }
    println!(
        "\n**backend / nginx static = {:.2}×** (mean of the rounds; target ≥ 0.5×)\n",
        sum_b / sum_n
    );
    // A second opinion from an independent load tool, when it is installed.
    if let (Some(wb), Some(wn)) = (wrk(&sup, baddr), wrk(&sup, static_addr)) {
        println!(
            "Cross-check with `wrk -t1 -c{CONNS} -d{SECS}s` (same run): backend {wb:.0} req/s, \
             nginx static {wn:.0} req/s, **ratio {:.2}×**\n",
            wb / wn
        );
    }

    println!("## 5,000 requests/s open loop (latency from the scheduled send time, two rounds)\n");
    println!(
        "nginx static at the same rate is the reference: when it suffers too, the machine (not the \
         backend) is the bottleneck.\n"
    );
    println!(
        "| round | path | achieved rps | ok | errors | p50 µs | p99 µs | max µs |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for round in 1..=2 {
        let s = client_rt.block_on(open_loop(static_addr, 5000.0, SECS));
        let o = client_rt.block_on(open_loop(proxy_addr, 5000.0, SECS));
        let od = client_rt.block_on(open_loop(baddr, 5000.0, SECS));
        for (name, l) in [
            ("nginx `return 200` (static)", &s),
            ("nginx → resolvelab backend", &o),
            ("resolvelab backend (direct)", &od),
        ] {
            println!(
                "| {round} | {name} | {:.0} | {} | {} | {} | {} | {} |",
                l.rps,
                l.ok,
                l.errors,
                us(&l.hist, 0.5),
                us(&l.hist, 0.99),
                l.hist.max()
            );
        }
    }
    println!();
    drop(nx);

    server_rt.block_on(backend.shutdown());
}

/// The TCP fault proxy without faults: added round-trip latency and throughput.
fn bench_tcp_proxy(server_rt: &tokio::runtime::Runtime, client_rt: &tokio::runtime::Runtime) {
    // --- TCP proxy --------------------------------------------------------------------------
    let echo = client_rt.block_on(echo_server("127.0.0.153:0"));
    let proxy = server_rt
        .block_on(Proxy::start(ProxyConfig::new(
            "bench",
            "127.0.0.154:0".parse().unwrap(),
            echo,
        )))
        .unwrap();
    let direct = client_rt.block_on(ping_pong(echo, 20_000));
    let via = client_rt.block_on(ping_pong(proxy.local_addr(), 20_000));
    println!(
        "## TCP proxy, no faults: round-trip latency (1-byte ping-pong, 20,000 round trips)\n"
    );
    println!("| path | p50 µs | p99 µs |\n|---|---:|---:|");
    for (name, h) in [("direct", &direct), ("through proxy", &via)] {
        println!(
            "| {name} | {:.1} | {:.1} |",
            us(h, 0.5) as f64 / 1e3,
            us(h, 0.99) as f64 / 1e3
        );
    }
    println!(
        "\n**added by the proxy: p50 {:.1} µs, p99 {:.1} µs** (target < 100 µs p50; a round trip crosses the proxy twice)\n",
        (us(&via, 0.5) as f64 - us(&direct, 0.5) as f64) / 1e3,
        (us(&via, 0.99) as f64 - us(&direct, 0.99) as f64) / 1e3
    );
    let (sink, mut rx) = client_rt.block_on(sink_server("127.0.0.155:0"));
    let sproxy = server_rt
        .block_on(Proxy::start(ProxyConfig::new(
            "sink",
            "127.0.0.156:0".parse().unwrap(),
            sink,
        )))
        .unwrap();
    // Three alternating rounds of 1 GiB each; on a shared machine the best round of each path
    // is the least disturbed one.
    let bytes = 1u64 << 30;
    println!(
        "## TCP proxy, no faults: throughput (1 GiB, one connection, three alternating rounds)\n"
    );
    println!("| round | direct MB/s | through proxy MB/s | ratio |\n|---|---:|---:|---:|");
    let (mut best_d, mut best_v) = (0f64, 0f64);
    for round in 1..=3 {
        let d = client_rt.block_on(throughput(sink, &mut rx, bytes));
        let v = client_rt.block_on(throughput(sproxy.local_addr(), &mut rx, bytes));
        best_d = best_d.max(d);
        best_v = best_v.max(v);
        println!("| {round} | {d:.0} | {v:.0} | {:.2}× |", v / d);
    }
    println!(
        "\n**best rounds: direct {best_d:.0} MB/s, proxy {best_v:.0} MB/s = {:.2}× of direct; \
         {:.2}× of Toxiproxy's published ~1000 MB/s**",
        best_v / best_d,
        best_v / 1000.0
    );
    server_rt.block_on(async {
        proxy.shutdown().await;
        sproxy.shutdown().await;
    });
}
