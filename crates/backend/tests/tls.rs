//! A backend that speaks TLS: the run's authority signs what it presents, a client that trusts
//! the authority is served over one keep-alive connection, one that does not is refused at the
//! handshake, and a fault at accept still acts before any handshake.

mod common;

use bytes::Bytes;
use common::Resp;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use resolvelab_backend::tls::RunCa;
use resolvelab_backend::{Backend, BackendConfig, BackendHandle};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

async fn tls_backend(
    ca: &RunCa,
    ip: &str,
    faults: &[&str],
    log: Option<std::path::PathBuf>,
) -> BackendHandle {
    let mut cfg = BackendConfig::new("b1", format!("{ip}:0").parse().unwrap());
    cfg.tls = Some(ca.server_config());
    cfg.log = log;
    for f in faults {
        cfg.faults.push(f.parse().unwrap());
    }
    Backend::start(cfg).await.unwrap()
}

fn client(trusting: &RunCa) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots.add(trusting.ca_der()).unwrap();
    #[allow(deprecated)]
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(cfg))
}

/// Two GETs on one TLS connection to `name`.
async fn two_gets(c: &TlsConnector, b: &BackendHandle, name: &str) -> Result<(Resp, Resp), String> {
    let tcp = TcpStream::connect(b.local_addr())
        .await
        .map_err(|e| e.to_string())?;
    let server = ServerName::try_from(name.to_string()).unwrap();
    let tls = c.connect(server, tcp).await.map_err(|e| e.to_string())?;
    let (tx, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut client = common::Client {
        tx,
        done: tokio::spawn(async { Ok(()) }),
    };
    Ok((client.get("/").await?, client.get("/").await?))
}

#[tokio::test]
async fn serves_over_tls_to_a_client_that_trusts_the_run_ca() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("b.jsonl");
    let ca = RunCa::new(
        &["api.example.com".into()],
        &["127.0.0.91".parse().unwrap()],
    )
    .unwrap();
    let b = tls_backend(&ca, "127.0.0.91", &[], Some(log.clone())).await;
    let c = client(&ca);
    let (r1, r2) = two_gets(&c, &b, "api.example.com").await.unwrap();
    assert_eq!((r1.status, r1.backend.as_str()), (200, "b1"));
    assert_eq!(
        (r2.conn, r2.req),
        (r1.conn, 2),
        "one keep-alive TLS connection"
    );
    // The address is in the certificate too (a `proxy_pass https://127.0.0.91`).
    two_gets(&c, &b, "127.0.0.91").await.unwrap();
    // A name the certificate does not cover fails verification, as it would in nginx.
    let e = two_gets(&c, &b, "other.example.com").await.unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    // Another run's authority is not trusted.
    let other = RunCa::new(&["api.example.com".into()], &[]).unwrap();
    let e = two_gets(&client(&other), &b, "api.example.com")
        .await
        .unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    b.shutdown().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"detail\":\"tls\""),
        "conn_open says tls: {text}"
    );
    assert!(text.contains("tls handshake failed"), "{text}");
}

#[tokio::test]
async fn a_plain_http_client_is_refused_at_the_handshake() {
    let ca = RunCa::new(&["api.example.com".into()], &[]).unwrap();
    let b = tls_backend(&ca, "127.0.0.92", &[], None).await;
    let r = common::get_once(b.local_addr(), "/").await;
    assert!(r.is_err(), "plain HTTP to a TLS backend was answered");
    assert_eq!(b.stats().requests, 0);
    b.shutdown().await;
}

#[tokio::test]
async fn a_reset_at_accept_acts_before_the_handshake() {
    let ca = RunCa::new(&["api.example.com".into()], &[]).unwrap();
    let b = tls_backend(&ca, "127.0.0.93", &["rst"], None).await;
    let e = two_gets(&client(&ca), &b, "api.example.com")
        .await
        .unwrap_err();
    assert!(!e.is_empty());
    let hits: u64 = b.fault_hits().iter().map(|(_, n)| n).sum();
    assert_eq!(hits, 1, "the rst fault hit the connection before TLS");
    b.shutdown().await;
}
