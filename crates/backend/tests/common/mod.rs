//! Test helpers: a minimal hyper client on one keep-alive connection.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub backend: String,
    pub conn: u64,
    pub req: u64,
    pub body: Result<Bytes, String>,
}

pub struct Client {
    pub tx: SendRequest<Full<Bytes>>,
    pub done: tokio::task::JoinHandle<Result<(), hyper::Error>>,
}

pub async fn connect(addr: SocketAddr) -> std::io::Result<Client> {
    let s = TcpStream::connect(addr).await?;
    let (tx, c) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(std::io::Error::other)?;
    let done = tokio::spawn(c);
    Ok(Client { tx, done })
}

impl Client {
    pub async fn request(&mut self, method: &str, path: &str, body: &str) -> Result<Resp, String> {
        self.tx.ready().await.map_err(|e| e.to_string())?;
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "lab")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let resp = self.tx.send_request(req).await.map_err(|e| e.to_string())?;
        let h = |k: &str| {
            resp.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let status = resp.status().as_u16();
        let backend = h("x-backend");
        let conn = h("x-conn").parse().unwrap_or(0);
        let req = h("x-req").parse().unwrap_or(0);
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| e.to_string());
        Ok(Resp {
            status,
            backend,
            conn,
            req,
            body,
        })
    }

    pub async fn get(&mut self, path: &str) -> Result<Resp, String> {
        self.request("GET", path, "").await
    }

    /// Wait (bounded) until the server closed this connection.
    pub async fn closed_within(&mut self, t: Duration) -> bool {
        tokio::time::timeout(t, &mut self.done).await.is_ok()
    }
}

/// GET on a fresh connection.
pub async fn get_once(addr: SocketAddr, path: &str) -> Result<Resp, String> {
    let mut c = connect(addr).await.map_err(|e| e.to_string())?;
    c.get(path).await
}

/// Poll `f` until it is true or the deadline passes.
pub async fn eventually(t: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + t;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
