//! A proxy with several upstreams is an L4 balancer: connections go round-robin, each staying
//! on its upstream (the lab's `[fleet]` runs its nginx instances behind one).

use resolvelab_proxy::{Proxy, ProxyConfig};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server that answers every line with its tag.
async fn tagged(tag: u8) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 1];
                while let Ok(1) = s.read(&mut b).await {
                    if s.write_all(&[tag]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn ask(s: &mut TcpStream) -> u8 {
    s.write_all(b"?").await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    b[0]
}

#[tokio::test]
async fn connections_go_round_robin_and_stay() {
    let ups = [tagged(b'a').await, tagged(b'b').await, tagged(b'c').await];
    let mut cfg = ProxyConfig::new("fleet", "127.0.0.1:0".parse().unwrap(), ups[0]);
    cfg.balance = ups[1..].to_vec();
    let p = Proxy::start(cfg).await.unwrap();
    let mut conns = Vec::new();
    let mut first = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        first.push(ask(&mut s).await);
        conns.push(s);
    }
    assert_eq!(first, b"abcabc");
    // Each connection keeps its upstream.
    for (s, want) in conns.iter_mut().zip(b"abcabc") {
        for _ in 0..3 {
            assert_eq!(ask(s).await, *want);
        }
    }
    p.shutdown().await;
}

#[tokio::test]
async fn a_balanced_address_off_loopback_is_refused() {
    let mut cfg = ProxyConfig::new("fleet", "127.0.0.1:0".parse().unwrap(), tagged(b'a').await);
    // network-safe: the policy refuses the address before any socket opens.
    cfg.balance = vec!["192.0.2.10:80".parse().unwrap()];
    let e = Proxy::start(cfg).await.err().expect("refused").to_string();
    assert!(e.contains("192.0.2.10"), "{e}");
}
