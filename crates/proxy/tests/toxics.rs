//! Every toxic: its effect on real loopback traffic and its counter.

use resolvelab_proxy::{Proxy, ProxyConfig, ProxyHandle};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo server on a loopback address; `close_after_eof` mirrors the client's close.
async fn echo(ip: &str) -> SocketAddr {
    let l = TcpListener::bind(format!("{ip}:0")).await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn proxy(ip: &str, faults: &[&str]) -> ProxyHandle {
    let up = echo(ip).await;
    let mut cfg = ProxyConfig::new("t", format!("{ip}:0").parse().unwrap(), up);
    for f in faults {
        cfg.faults.push(f.parse().unwrap());
    }
    Proxy::start(cfg).await.unwrap()
}

async fn read_exact_timeout(s: &mut TcpStream, n: usize, t: Duration) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    tokio::time::timeout(t, s.read_exact(&mut buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "timeout"))??;
    Ok(buf)
}

fn hits(p: &ProxyHandle, name: &str) -> u64 {
    p.fault_hits()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|x| x.1)
        .unwrap()
}

#[tokio::test]
async fn clean_proxy_forwards_and_counts_bytes() {
    let p = proxy("127.0.0.61", &[]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(b"hello").await.unwrap();
    assert_eq!(
        read_exact_timeout(&mut c, 5, Duration::from_secs(5))
            .await
            .unwrap(),
        b"hello"
    );
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.stats().open > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = p.stats();
    assert_eq!(
        (s.connections, s.bytes_upstream, s.bytes_downstream),
        (1, 5, 5)
    );
    p.shutdown().await;
}

#[tokio::test]
async fn latency_delays_one_direction_and_counts() {
    let p = proxy("127.0.0.62", &["latency:delay=400ms,direction=downstream"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    let t = Instant::now();
    c.write_all(b"x").await.unwrap();
    read_exact_timeout(&mut c, 1, Duration::from_secs(5))
        .await
        .unwrap();
    let rtt = t.elapsed();
    assert!(rtt >= Duration::from_millis(400), "{rtt:?}");
    assert!(rtt < Duration::from_secs(3), "{rtt:?}");
    assert_eq!(hits(&p, "latency_downstream"), 1);
    let f = &p.faults()[0];
    assert_eq!((f.chunks, f.bytes), (1, 1));
    // Removing the toxic speeds up the connection that is already open.
    p.remove_fault("latency_downstream");
    let t = Instant::now();
    c.write_all(b"y").await.unwrap();
    read_exact_timeout(&mut c, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    p.shutdown().await;
}

#[tokio::test]
async fn bandwidth_paces_bytes() {
    let p = proxy("127.0.0.63", &["bandwidth:rate=200"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    let t = Instant::now();
    c.write_all(&[7u8; 60_000]).await.unwrap();
    read_exact_timeout(&mut c, 60_000, Duration::from_secs(10))
        .await
        .unwrap();
    // 60 kB at 200 kB/s is 300 ms.
    assert!(
        t.elapsed() >= Duration::from_millis(280),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&p, "bandwidth_downstream"), 1);
    assert_eq!(p.faults()[0].bytes, 60_000);
    p.shutdown().await;
}

#[tokio::test]
async fn slicer_splits_into_small_reads() {
    let p = proxy(
        "127.0.0.64",
        &["slicer:average_size=10,size_variation=0,delay=50ms"],
    )
    .await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(&[1u8; 100]).await.unwrap();
    let mut first = [0u8; 100];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut first))
        .await
        .unwrap()
        .unwrap();
    assert!(
        n < 100 && n % 10 == 0,
        "the first read sees whole slices, not the chunk: {n}"
    );
    let rest = read_exact_timeout(&mut c, 100 - n, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(rest.len(), 100 - n);
    assert_eq!(hits(&p, "slicer_downstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn timeout_blackholes_then_closes() {
    let p = proxy("127.0.0.65", &["timeout:timeout=300ms,direction=upstream"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    let t = Instant::now();
    c.write_all(b"lost").await.unwrap();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "nothing comes back, then the connection closes");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&p, "timeout_upstream"), 1);
    assert!(p.faults()[0].bytes >= 4);
    // timeout=0 never closes: data is dropped while the toxic is there.
    p.clear_faults();
    p.add_fault_str("timeout:timeout=0,direction=upstream")
        .unwrap();
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(b"lost").await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.read(&mut buf))
            .await
            .is_err()
    );
    assert_eq!(hits(&p, "timeout_upstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn reset_peer_resets() {
    let p = proxy("127.0.0.66", &["reset_peer:timeout=50ms"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    let mut buf = [0u8; 8];
    let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionReset);
    assert_eq!(hits(&p, "reset_peer_downstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn limit_data_cuts_the_stream() {
    let p = proxy("127.0.0.67", &["limit_data:bytes=10"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(&[5u8; 100]).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got))
        .await
        .unwrap();
    assert_eq!(got.len(), 10);
    assert_eq!(hits(&p, "limit_data_downstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn slow_close_holds_the_fin() {
    let p = proxy("127.0.0.68", &["slow_close:delay=300ms"]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(b"bye").await.unwrap();
    read_exact_timeout(&mut c, 3, Duration::from_secs(5))
        .await
        .unwrap();
    let t = Instant::now();
    c.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(280),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&p, "slow_close_downstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn down_refuses_for_a_window() {
    let p = proxy("127.0.0.69", &["down:for=400ms"]).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    while hits(&p, "down_downstream") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = TcpStream::connect(p.local_addr()).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(hits(&p, "down_downstream"), 1);
    // It comes back by itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if TcpStream::connect(p.local_addr()).await.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "proxy never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.shutdown().await;
}

#[tokio::test]
async fn toxicity_is_per_connection_and_seeded() {
    let mut counts = Vec::new();
    for ip in ["127.0.0.70", "127.0.0.71"] {
        let p = proxy(ip, &["reset_peer:timeout=0,toxicity=0.5,seed=9"]).await;
        let mut reset = 0;
        for _ in 0..40 {
            let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
            c.write_all(b"x").await.unwrap();
            let mut b = [0u8; 1];
            match tokio::time::timeout(Duration::from_secs(5), c.read(&mut b))
                .await
                .unwrap()
            {
                Ok(1) => {}
                _ => reset += 1,
            }
        }
        assert_eq!(hits(&p, "reset_peer_downstream"), reset);
        counts.push(reset);
        p.shutdown().await;
    }
    // Same seed, same connection ids: the same connections are hit.
    assert_eq!(counts[0], counts[1]);
    assert!((8..=32).contains(&counts[0]), "{counts:?}");
}

#[tokio::test]
async fn clean_connections_carry_large_streams_unchanged() {
    // Megabytes both ways, byte for byte, with the buffers the proxy reuses and grows.
    let p = proxy("127.0.0.74", &[]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let (mut r, mut w) = c.split();
    let send = async {
        w.write_all(&data).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let mut back = Vec::new();
    let recv = tokio::time::timeout(Duration::from_secs(30), r.read_to_end(&mut back));
    let ((), got) = tokio::join!(send, recv);
    got.expect("the echo ends after the client's close")
        .unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "bytes changed on the way");
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.stats().open > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = p.stats();
    assert_eq!(
        (s.bytes_upstream, s.bytes_downstream),
        (4_000_000, 4_000_000)
    );
    p.shutdown().await;
}

#[tokio::test]
async fn a_toxic_added_to_an_open_clean_connection_applies_to_its_next_bytes() {
    let p = proxy("127.0.0.75", &[]).await;
    let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
    c.write_all(b"fast").await.unwrap();
    assert_eq!(
        read_exact_timeout(&mut c, 4, Duration::from_secs(5))
            .await
            .unwrap(),
        b"fast"
    );
    p.add_fault_str("latency:delay=300ms,direction=downstream")
        .unwrap();
    let t = Instant::now();
    c.write_all(b"slow").await.unwrap();
    assert_eq!(
        read_exact_timeout(&mut c, 4, Duration::from_secs(5))
            .await
            .unwrap(),
        b"slow"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(290),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&p, "latency_downstream"), 1);
    p.shutdown().await;
}

#[tokio::test]
async fn a_reset_reaches_the_client_as_a_reset_whatever_the_other_direction_runs() {
    // The direction that resets tells the other one to end; that one's reader may notice
    // first and end its stream, which must not turn the reset into a FIN (it did, at random).
    for (i, other) in [
        "latency:delay=0ms,direction=downstream",
        "slicer:direction=downstream",
        "bandwidth:rate=1000000,direction=downstream",
    ]
    .into_iter()
    .enumerate()
    {
        for round in 0..5 {
            let p = proxy(
                &format!("127.0.0.{}", 76 + i),
                &[other, "reset_peer:timeout=20ms,direction=upstream"],
            )
            .await;
            let mut c = TcpStream::connect(p.local_addr()).await.unwrap();
            let mut buf = [0u8; 8];
            let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
                .await
                .expect("the reset arrives");
            assert!(
                matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
                "{other}, round {round}: {r:?}"
            );
            p.shutdown().await;
        }
    }
}
