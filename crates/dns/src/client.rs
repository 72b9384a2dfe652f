//! A minimal stub-resolver query (UDP or TCP) for tests, readiness checks and tools.
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! use resolvelab_dns::{Transport, client};
//! use std::time::Duration;
//! let a = client::query("127.0.0.1:5300".parse()?, "app.test.local", "A", Transport::Udp,
//!                       Duration::from_secs(1)).await?;
//! println!("{} {:?}", a.rcode, a.answers);
//! # Ok(()) }
//! ```

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::engine::Transport;

/// What a server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// `NOERROR`, `NXDOMAIN`, …
    pub rcode: String,
    /// A and AAAA addresses of the answer section, in order.
    pub answers: Vec<IpAddr>,
    /// TTLs of the answer records, in order.
    pub ttls: Vec<u32>,
    /// The TC bit.
    pub truncated: bool,
    /// The AA bit.
    pub authoritative: bool,
    /// The message id (matches the query's).
    pub id: u16,
}

/// Build a query message (`qtype` like `A`, `AAAA`, `TXT`); `edns` adds an OPT record
/// advertising `edns` bytes.
pub fn build_query(name: &str, qtype: &str, id: u16, edns: Option<u16>) -> anyhow::Result<Vec<u8>> {
    let rt = RecordType::from_str(&qtype.to_ascii_uppercase())
        .map_err(|_| anyhow::anyhow!("unknown query type `{qtype}`"))?;
    let name = Name::from_ascii(name).with_context(|| format!("`{name}` is not a DNS name"))?;
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name, rt));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    Ok(m.to_vec()?)
}

/// Decode an answer.
pub fn parse_answer(bytes: &[u8]) -> anyhow::Result<Answer> {
    let m = Message::from_vec(bytes).context("undecodable DNS answer")?;
    let mut answers = Vec::new();
    let mut ttls = Vec::new();
    for r in &m.answers {
        match &r.data {
            RData::A(a) => answers.push(IpAddr::V4(a.0)),
            RData::AAAA(a) => answers.push(IpAddr::V6(a.0)),
            _ => continue,
        }
        ttls.push(r.ttl);
    }
    Ok(Answer {
        rcode: crate::engine::rcode_str(m.metadata.response_code).to_string(),
        answers,
        ttls,
        truncated: m.metadata.truncation,
        authoritative: m.metadata.authoritative,
        id: m.metadata.id,
    })
}

/// Send one query to `server` and wait up to `timeout` for the answer. `server` must be
/// loopback (this is a lab tool).
pub async fn query(
    server: SocketAddr,
    name: &str,
    qtype: &str,
    transport: Transport,
    timeout: Duration,
) -> anyhow::Result<Answer> {
    query_checked(server, name, qtype, transport, timeout, false).await
}

/// [`query`], to a non-loopback server too when `allow_remote` (`--allow-remote`).
pub async fn query_checked(
    server: SocketAddr,
    name: &str,
    qtype: &str,
    transport: Transport,
    timeout: Duration,
    allow_remote: bool,
) -> anyhow::Result<Answer> {
    resolvelab_core::policy::check_target(server, allow_remote).map_err(anyhow::Error::msg)?;
    let id: u16 = rand::random();
    let q = build_query(name, qtype, id, None)?;
    let fut = async {
        match transport {
            Transport::Udp => {
                let bind: SocketAddr = match (server.is_ipv4(), server.ip().is_loopback()) {
                    (true, true) => ([127, 0, 0, 1], 0).into(),
                    (true, false) => ([0, 0, 0, 0], 0).into(),
                    (false, true) => "[::1]:0".parse().expect("literal"),
                    (false, false) => "[::]:0".parse().expect("literal"),
                };
                let s = tokio::net::UdpSocket::bind(bind).await?;
                s.send_to(&q, server).await?;
                let mut buf = vec![0u8; 65_535];
                loop {
                    let (n, from) = s.recv_from(&mut buf).await?;
                    if from == server && n >= 2 && buf[..2] == id.to_be_bytes() {
                        return parse_answer(&buf[..n]);
                    }
                }
            }
            Transport::Tcp => {
                let mut s = tokio::net::TcpStream::connect(server).await?;
                let mut framed = (q.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&q);
                s.write_all(&framed).await?;
                let n = s.read_u16().await?;
                let mut buf = vec![0u8; usize::from(n)];
                s.read_exact(&mut buf).await?;
                parse_answer(&buf)
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => bail!("no answer from {server} within {timeout:?}"),
    }
}
