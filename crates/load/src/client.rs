//! One HTTP/1.1 connection (hyper's `client::conn::http1` over a tokio `TcpStream`) and one
//! request/response exchange on it, with errors mapped to [`ErrorKind`].

use crate::record::ErrorKind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::HeaderName;
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;
use std::error::Error as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
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
    /// The header map of the last response, cleared: the next request's headers go into it.
    /// hyper parses a response into the (emptied) map of its own request, so passing the map
    /// around this loop makes the header maps of a connection cost no allocation per request
    /// instead of four (a cloned map, then its growth to hold the response's headers).
    spare: Option<HeaderMap>,
}

/// What one attempt to send a request on a connection gave.
pub(crate) enum Sent {
    /// The request went out (or failed on the way): its result.
    Done(Result<Outcome, ErrorKind>),
    /// hyper handed the request back unsent: the connection was not ready for another
    /// request yet, or had closed before the request was written. Safe to send again.
    Unsent(Box<Request<Full<Bytes>>>),
    /// The request was written (or partly) and the connection failed before any byte of a
    /// response: what a client may re-send on a new connection if the request is idempotent.
    Lost(ErrorKind),
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
            spare: None,
        })
    }

    /// Is the connection still open, as far as is known without polling it?
    pub(crate) fn is_open(&self) -> bool {
        self.driver.is_some() && !self.tx.is_closed()
    }

    /// The previous response's header map (cleared), for the next request's headers.
    pub(crate) fn take_headers(&mut self) -> Option<HeaderMap> {
        self.spare.take()
    }

    /// Drive the connection until it can take a request; `false` if it ended instead.
    pub(crate) async fn ready(&mut self) -> bool {
        let Conn { tx, driver, .. } = self;
        loop {
            match driver.as_mut() {
                Some(d) => {
                    tokio::select! {
                        biased;
                        r = tx.ready() => return r.is_ok(),
                        _ = d.as_mut() => *driver = None,
                    }
                }
                None => return false,
            }
        }
    }

    /// Send one request and read the whole response body, driving the connection meanwhile.
    ///
    /// The request is offered with `try_send_request`: if the connection turns out to be
    /// closed before the request is written (a close that arrived while it sat idle), hyper
    /// hands it back ([`Sent::Unsent`]) and the caller sends it on another connection, so a
    /// reused connection needs no poll of its own before each request to find that out.
    pub(crate) async fn exchange(
        &mut self,
        req: Request<Full<Bytes>>,
        capture: Option<&HeaderName>,
    ) -> Sent {
        let Conn {
            tx, driver, spare, ..
        } = self;
        let work = exchange(tx, req, capture, spare);
        tokio::pin!(work);
        loop {
            match driver.as_mut() {
                Some(d) => {
                    tokio::select! {
                        biased;
                        r = &mut work => return r,
                        // The connection ended (peer close or error): the request future now
                        // resolves on its own, with the response, the error or the request.
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
    spare: &mut Option<HeaderMap>,
) -> Sent {
    let resp = match tx.try_send_request(req).await {
        Ok(r) => r,
        Err(mut e) => {
            return match e.take_message() {
                Some(req) => Sent::Unsent(Box::new(req)),
                None => Sent::Lost(hyper_kind(e.error())),
            };
        }
    };
    let (parts, mut body) = resp.into_parts();
    let status = parts.status.as_u16();
    let header = capture
        .and_then(|n| parts.headers.get(n))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let reusable = !parts
        .headers
        .get(hyper::header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let mut headers = parts.headers;
    headers.clear();
    *spare = Some(headers);
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => return Sent::Done(Err(hyper_kind(&e))),
        };
        if let Some(d) = frame.data_ref() {
            bytes += d.len() as u64;
        }
    }
    Sent::Done(Ok(Outcome {
        status,
        bytes,
        header,
        reusable,
    }))
}
