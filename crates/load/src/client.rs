//! One HTTP/1.1 connection (hyper's `client::conn::http1` over a tokio `TcpStream`) and one
//! request/response exchange on it, with errors mapped to [`ErrorKind`].

use crate::record::ErrorKind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::HeaderName;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::error::Error as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Context;
use tokio::net::TcpStream;

type Driver = Pin<Box<Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// An open connection and its id (unique within a run).
///
/// The connection future (`driver`) is polled by whichever task is using the connection, not
/// by a task of its own: a request then costs no wake-ups across tasks, which is most of the
/// difference between a hyper client and wrk at high rates.
pub(crate) struct Conn {
    pub(crate) id: u64,
    tx: SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended.
    driver: Option<Driver>,
}

/// A complete response.
pub(crate) struct Outcome {
    pub(crate) status: u16,
    pub(crate) bytes: u64,
    pub(crate) header: Option<String>,
    /// The server did not ask to close the connection.
    pub(crate) reusable: bool,
}

pub(crate) fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => ErrorKind::Reset,
        io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    }
}

fn hyper_kind(e: &hyper::Error) -> ErrorKind {
    // An underlying socket error says more than hyper's own category.
    let mut src = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return io_kind(io);
        }
        src = s.source();
    }
    if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        ErrorKind::Closed
    } else {
        ErrorKind::Other
    }
}

impl Conn {
    /// Connect and perform the HTTP/1.1 handshake.
    pub(crate) async fn open(addr: SocketAddr, id: u64) -> Result<Conn, ErrorKind> {
        let stream = TcpStream::connect(addr).await.map_err(|e| io_kind(&e))?;
        // Small requests must leave now, not when Nagle decides.
        let _ = stream.set_nodelay(true);
        let (tx, conn) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| hyper_kind(&e))?;
        Ok(Conn {
            id,
            tx,
            driver: Some(Box::pin(conn)),
        })
    }

    /// Poll the driver once without waiting, so a close that arrived while the connection
    /// sat idle is noticed before it is reused.
    fn poll_idle(&mut self) {
        if let Some(d) = self.driver.as_mut() {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            if d.as_mut().poll(&mut cx).is_ready() {
                self.driver = None;
            }
        }
    }

    /// Has the peer (or hyper) closed this connection?
    pub(crate) fn is_closed(&mut self) -> bool {
        self.poll_idle();
        self.driver.is_none() || self.tx.is_closed()
    }

    /// Can a pooled connection take a request? (A closed one is discarded before anything is
    /// sent, so it costs no error.)
    pub(crate) fn usable(&mut self) -> bool {
        !self.is_closed() && self.tx.is_ready()
    }

    /// Send one request and read the whole response body, driving the connection meanwhile.
    pub(crate) async fn exchange(
        &mut self,
        req: Request<Full<Bytes>>,
        capture: Option<&HeaderName>,
    ) -> Result<Outcome, ErrorKind> {
        let Conn { tx, driver, .. } = self;
        let work = exchange(tx, req, capture);
        tokio::pin!(work);
        loop {
            match driver.as_mut() {
                Some(d) => {
                    tokio::select! {
                        biased;
                        r = &mut work => return r,
                        // The connection ended (peer close or error): the request future now
                        // resolves on its own, with the response or the error.
                        _ = d.as_mut() => *driver = None,
                    }
                }
                None => return work.await,
            }
        }
    }
}

async fn exchange(
    tx: &mut SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
    capture: Option<&HeaderName>,
) -> Result<Outcome, ErrorKind> {
    let resp: Response<hyper::body::Incoming> =
        tx.send_request(req).await.map_err(|e| hyper_kind(&e))?;
    let status = resp.status().as_u16();
    let header = capture
        .and_then(|n| resp.headers().get(n))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let reusable = !resp
        .headers()
        .get(hyper::header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| hyper_kind(&e))?;
        if let Some(d) = frame.data_ref() {
            bytes += d.len() as u64;
        }
    }
    Ok(Outcome {
        status,
        bytes,
        header,
        reusable,
    })
}
