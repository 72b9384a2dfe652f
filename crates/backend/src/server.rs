//! The HTTP/1.1 origin: accept loop, connection-level faults, the request handler.

use crate::db::{DbConfig, DbError, Pool, PoolStats};
use crate::fault::hooks::{AtAccept, Headers};
use crate::fault::{BackendFault, Fault, FaultStatus};
use crate::log::{LogSender, Rec};
use crate::response::{Latency, Sample, StatusMix};
use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::policy;
use resolvelab_core::time::now_us;
use resolvelab_inject::gate::FaultList;
use resolvelab_inject::net::{listen_reuse, set_reset_on_close, set_reset_on_close_fd};
use serde::Serialize;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Sleep;

/// How to start a backend.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Name in the `x-backend` header, the body, the log and metrics (empty: the bound address).
    pub name: String,
    /// Listen address (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Latency before the response headers.
    pub latency: Latency,
    /// Pad the body to this many bytes (default: just the name line).
    pub body_size: Option<usize>,
    /// Status mix of ordinary responses.
    pub status: StatusMix,
    /// Faults active from the start.
    pub faults: Vec<BackendFault>,
    /// Request log path (`resolvelab.backend/v1`).
    pub log: Option<PathBuf>,
    /// Control API address (`/metrics`, `/faults`).
    pub control: Option<SocketAddr>,
    /// Seed of the latency and status RNG.
    pub seed: u64,
    /// Slow dependency: each request makes round trips to this DB through a pool.
    pub db: Option<DbConfig>,
    /// Permit a non-loopback listen or DB address.
    pub allow_remote: bool,
    /// Speak TLS with this server side ([`crate::tls::RunCa::server_config`]); None: plain HTTP.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

impl BackendConfig {
    /// A plain, fault-free backend.
    pub fn new(name: &str, listen: SocketAddr) -> BackendConfig {
        BackendConfig {
            name: name.to_string(),
            listen,
            latency: Latency::default(),
            body_size: None,
            status: StatusMix::default(),
            faults: Vec::new(),
            log: None,
            control: None,
            seed: 0,
            db: None,
            allow_remote: false,
            tls: None,
        }
    }
}

/// Counters of a running backend.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BackendStats {
    /// Name.
    pub name: String,
    /// Listening address.
    pub listen: String,
    /// Connections accepted.
    pub connections: u64,
    /// Connections open now.
    pub open: u64,
    /// Requests answered (any status).
    pub requests: u64,
    /// Requests per status code.
    pub statuses: BTreeMap<u16, u64>,
    /// Every fault with its counters.
    pub faults: Vec<FaultStatus>,
    /// The DB pool, when `--db` is used.
    pub pool: Option<PoolStats>,
}

pub(crate) struct Shared {
    name: Arc<str>,
    listen: SocketAddr,
    body: Bytes,
    latency: Latency,
    status: StatusMix,
    rng: Mutex<ChaCha8Rng>,
    faults: FaultList<Fault>,
    changed: Notify,
    next_conn: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
    requests: AtomicU64,
    statuses: Vec<AtomicU64>,
    log: Option<LogSender>,
    pool: Option<Arc<Pool>>,
    shutdown: watch::Sender<bool>,
    /// The last fault installed that resets established connections (`restart`): every
    /// connection task watches it.
    restart: watch::Sender<Option<Arc<Fault>>>,
    /// The TLS handshake every connection starts with (None: plain HTTP).
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Shared {
    fn current(&self) -> Arc<Vec<Arc<Fault>>> {
        self.faults.current()
    }

    fn log(&self, rec: Rec) {
        if let Some(l) = &self.log {
            l.send(rec);
        }
    }

    fn active_refuse(&self) -> Option<Arc<Fault>> {
        self.current()
            .iter()
            .find(|f| f.behaviour.refuses(&f.gate))
            .cloned()
    }
}

/// Start backends.
pub struct Backend;

impl Backend {
    /// Bind and serve on the caller's tokio runtime until [`BackendHandle::shutdown`].
    pub async fn start(mut cfg: BackendConfig) -> anyhow::Result<BackendHandle> {
        policy::check_target(cfg.listen, cfg.allow_remote).map_err(anyhow::Error::msg)?;
        let listener = listen_reuse(cfg.listen, 4096)?;
        let listen = listener.local_addr()?;
        if cfg.name.is_empty() {
            cfg.name = listen.to_string();
        }
        let mut body = format!("backend {}\n", cfg.name).into_bytes();
        if let Some(n) = cfg.body_size
            && n > body.len()
        {
            body.resize(n - 1, b'.');
            body.push(b'\n');
        }
        let log = cfg.log.as_deref().map(LogSender::create).transpose()?;
        let pool = cfg
            .db
            .clone()
            .map(|d| Pool::new(d, cfg.allow_remote))
            .transpose()?;
        let (shutdown, _) = watch::channel(false);
        let sh = Arc::new(Shared {
            name: cfg.name.as_str().into(),
            listen,
            body: Bytes::from(body),
            latency: cfg.latency,
            status: cfg.status,
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(cfg.seed)),
            faults: FaultList::default(),
            changed: Notify::new(),
            next_conn: AtomicU64::new(1),
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            statuses: (0..600).map(|_| AtomicU64::new(0)).collect(),
            log,
            pool,
            shutdown,
            restart: watch::channel(None).0,
            tls: cfg.tls.map(tokio_rustls::TlsAcceptor::from),
        });
        let mut handle = BackendHandle {
            sh: sh.clone(),
            tasks: Arc::new(Mutex::new(Vec::new())),
            control: None,
        };
        for f in cfg.faults {
            handle.add_fault(f)?;
        }
        let mut tasks = vec![tokio::spawn(accept_loop(sh.clone(), listener))];
        if let Some(addr) = cfg.control {
            policy::check_target(addr, cfg.allow_remote).map_err(anyhow::Error::msg)?;
            let l = TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on control address {addr}: {e}"))?;
            handle.control = Some(l.local_addr()?);
            let router = crate::control::router(handle.clone());
            let mut stop = sh.shutdown.subscribe();
            tasks.push(tokio::spawn(async move {
                let _ = axum::serve(l, router)
                    .with_graceful_shutdown(async move {
                        let _ = stop.changed().await;
                    })
                    .await;
            }));
        }
        *handle.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        Ok(handle)
    }
}

/// A running backend. Cheap to clone; every clone controls the same backend.
#[derive(Clone)]
pub struct BackendHandle {
    sh: Arc<Shared>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    control: Option<SocketAddr>,
}

impl BackendHandle {
    /// The name.
    pub fn name(&self) -> &str {
        &self.sh.name
    }

    /// The address it serves HTTP on.
    pub fn local_addr(&self) -> SocketAddr {
        self.sh.listen
    }

    /// The control API address, if one was configured.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control
    }

    /// Install a fault now (its window starts now); returns its name.
    pub fn add_fault(&self, spec: BackendFault) -> anyhow::Result<String> {
        let fault = Arc::new(Fault::new(spec));
        let name = fault.name.clone();
        self.sh.faults.add(fault.clone()).map_err(|name| {
            anyhow::anyhow!(
                "backend `{}` already has a fault named `{name}`; remove it first or add `name=OTHER`",
                self.sh.name
            )
        })?;
        let mut rec = Rec::new("fault", &self.sh.name, 0);
        rec.faults = vec![name.clone()];
        rec.detail = Some(format!("added {}", fault.spec.render()));
        self.sh.log(rec);
        if fault.behaviour.resets_established() {
            // Every open connection resets now (each one a hit); the listener refuses next.
            self.sh.restart.send_replace(Some(fault.clone()));
        }
        self.sh.changed.notify_one();
        Ok(name)
    }

    /// Parse `SPEC` and install it.
    pub fn add_fault_str(&self, spec: &str) -> anyhow::Result<String> {
        let spec: BackendFault = spec.parse().map_err(anyhow::Error::msg)?;
        self.add_fault(spec)
    }

    /// Remove one fault by name; false if there was none.
    pub fn remove_fault(&self, name: &str) -> bool {
        let removed = self.sh.faults.remove(name);
        if removed {
            let mut rec = Rec::new("fault", &self.sh.name, 0);
            rec.faults = vec![name.to_string()];
            rec.detail = Some("removed".into());
            self.sh.log(rec);
            self.sh.changed.notify_one();
        }
        removed
    }

    /// Remove every fault.
    pub fn clear_faults(&self) {
        self.sh.faults.clear();
        let mut rec = Rec::new("fault", &self.sh.name, 0);
        rec.detail = Some("cleared".into());
        self.sh.log(rec);
        self.sh.changed.notify_one();
    }

    /// Every fault with its counters.
    pub fn faults(&self) -> Vec<FaultStatus> {
        self.sh.current().iter().map(|f| f.status()).collect()
    }

    /// `(name, hits)` of every fault.
    pub fn fault_hits(&self) -> Vec<(String, u64)> {
        self.sh
            .current()
            .iter()
            .map(|f| (f.name.clone(), f.hits()))
            .collect()
    }

    /// Counters, fault hits and pool gauges.
    pub fn stats(&self) -> BackendStats {
        let sh = &self.sh;
        let statuses = sh
            .statuses
            .iter()
            .enumerate()
            .filter_map(|(c, n)| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then_some((c as u16, n))
            })
            .collect();
        BackendStats {
            name: sh.name.to_string(),
            listen: sh.listen.to_string(),
            connections: sh.connections.load(Ordering::Relaxed),
            open: sh.open.load(Ordering::Relaxed),
            requests: sh.requests.load(Ordering::Relaxed),
            statuses,
            faults: self.faults(),
            pool: sh.pool.as_ref().map(|p| p.stats()),
        }
    }

    /// Prometheus text exposition (what `/metrics` serves).
    pub fn metrics_text(&self) -> String {
        crate::control::prometheus(&self.stats())
    }

    /// Stop listening, close every connection and wait for the tasks.
    pub async fn shutdown(&self) {
        let _ = self.sh.shutdown.send(true);
        let tasks: Vec<_> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.sh.open.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn accept_loop(sh: Arc<Shared>, listener: TcpListener) {
    use resolvelab_inject::net::{ListenerEvent, refusable_accept_loop};
    refusable_accept_loop(
        listener,
        sh.listen,
        4096,
        &sh.changed,
        sh.shutdown.subscribe(),
        || sh.active_refuse(),
        |ev| {
            let mut rec = Rec::new("fault", &sh.name, 0);
            match ev {
                ListenerEvent::Closed(name) => {
                    rec.faults = vec![name.to_string()];
                    rec.detail = Some("refuse: listening socket closed".into());
                }
                ListenerEvent::Reopened => {
                    rec.detail = Some("refuse ended: listening again".into());
                }
                ListenerEvent::AcceptFailed(e) => {
                    rec.detail = Some(format!(
                        "accept failed: {e}; new connections wait (raise the file-descriptor limit, ulimit -n)"
                    ));
                }
            }
            sh.log(rec);
        },
        |s, peer| {
            tokio::spawn(handle_conn(sh.clone(), s, peer));
        },
    )
    .await
}

/// Per-connection state shared by the I/O wrapper and the request handler.
struct ConnState {
    id: u64,
    req_n: AtomicU64,
    in_flight: AtomicU64,
    doom: Mutex<Option<(Duration, Arc<Fault>)>>,
    close_reason: Mutex<&'static str>,
}

/// The next `restart` fault installed after this connection was accepted.
async fn restarted(rx: &mut watch::Receiver<Option<Arc<Fault>>>) -> Arc<Fault> {
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if let Some(f) = rx.borrow_and_update().clone() {
            return f;
        }
    }
}

async fn handle_conn(sh: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    // Subscribed before anything else: a restart from now on reaches this connection.
    let mut restart = sh.restart.subscribe();
    restart.mark_unchanged();
    // The socket's descriptor, to make it reset while hyper owns the stream (used only while
    // the serving future that owns it is alive).
    let raw_fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let id = sh.next_conn.fetch_add(1, Ordering::Relaxed);
    sh.connections.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let faults = sh.current();
    let mut open = Rec::new("conn_open", &sh.name, id);
    open.peer = Some(peer.to_string());
    if sh.tls.is_some() {
        open.detail = Some("tls".into());
    }
    sh.log(open);
    for f in faults.iter() {
        match f.behaviour.at_accept(&f.gate) {
            AtAccept::Reset => {
                f.gate.hit();
                let _ = set_reset_on_close(&stream);
                drop(stream);
                let mut rec = Rec::new("conn_close", &sh.name, id);
                rec.faults = vec![f.name.clone()];
                rec.detail = Some("rst".into());
                sh.log(rec);
                return;
            }
            AtAccept::Hang => {
                f.gate.hit();
                let mut rec = Rec::new("fault", &sh.name, id);
                rec.faults = vec![f.name.clone()];
                rec.detail = Some("hang: connection accepted, never answered".into());
                sh.log(rec);
                hang(&sh, stream).await;
                let mut rec = Rec::new("conn_close", &sh.name, id);
                rec.detail = Some("hang ended".into());
                sh.log(rec);
                return;
            }
            AtAccept::Serve => {}
        }
    }
    let idle = faults
        .iter()
        .filter_map(|f| Some((f.behaviour.idle_close(&f.gate)?, f.clone())))
        .min_by_key(|(after, _)| *after);
    sh.open.fetch_add(1, Ordering::Relaxed);
    let conn = Arc::new(ConnState {
        id,
        req_n: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        doom: Mutex::new(None),
        close_reason: Mutex::new("client"),
    });
    let io = FaultIo {
        inner: stream,
        conn: conn.clone(),
        sh: sh.clone(),
        doom: None,
        caught: false,
        read_waker: None,
        idle: idle.map(|(after, f)| IdleTimer {
            after,
            fault: f,
            deadline: None,
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }),
    };
    match sh.tls.clone() {
        None => serve_io(&sh, &conn, io, raw_fd, &mut restart).await,
        Some(acceptor) => {
            // Connection-level faults (`rst`, `hang`, `refuse`) acted before the handshake, as
            // they do on a real server's socket; the others act on the bytes below TLS.
            let mut shutdown = sh.shutdown.subscribe();
            tokio::select! {
                r = acceptor.accept(io) => match r {
                    Ok(tls) => serve_io(&sh, &conn, tls, raw_fd, &mut restart).await,
                    Err(e) => {
                        let mut rec = Rec::new("conn_close", &sh.name, id);
                        rec.detail = Some(format!("tls handshake failed: {e}"));
                        sh.log(rec);
                        sh.open.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                },
                _ = shutdown.changed() => {
                    *conn.close_reason.lock().unwrap_or_else(|p| p.into_inner()) = "shutdown";
                }
            }
        }
    }
    let mut rec = Rec::new("conn_close", &sh.name, id);
    rec.req = Some(conn.req_n.load(Ordering::Relaxed));
    rec.detail = Some((*conn.close_reason.lock().unwrap_or_else(|p| p.into_inner())).to_string());
    sh.log(rec);
    sh.open.fetch_sub(1, Ordering::Relaxed);
}

/// Serve HTTP/1.1 on one accepted connection (plain, or TLS over it) until it closes, the
/// backend stops or a `restart` fault resets it.
async fn serve_io<I>(
    sh: &Arc<Shared>,
    conn: &Arc<ConnState>,
    io: I,
    raw_fd: std::os::fd::RawFd,
    restart: &mut watch::Receiver<Option<Arc<Fault>>>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let sh2 = sh.clone();
    let conn2 = conn.clone();
    let svc = hyper::service::service_fn(move |req| serve(sh2.clone(), conn2.clone(), req));
    let mut builder = hyper::server::conn::http1::Builder::new();
    // No header-read timeout: hyper's default (30 s) would also close idle keep-alive
    // connections, an unrequested idle-timeout that would contaminate experiments. Idle closes
    // happen only when a fault asks for them.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .keep_alive(true);
    let fut = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(fut);
    let mut shutdown = sh.shutdown.subscribe();
    tokio::select! {
        r = &mut fut => {
            if r.is_err() {
                let mut reason = conn.close_reason.lock().unwrap_or_else(|p| p.into_inner());
                if *reason == "client" {
                    *reason = "error";
                }
            }
        }
        _ = shutdown.changed() => {
            *conn.close_reason.lock().unwrap_or_else(|p| p.into_inner()) = "shutdown";
        }
        f = restarted(restart) => {
            // SAFETY: `fut`, which owns the stream and so this descriptor, is alive until the
            // end of this function; the socket resets (RST) when it closes.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw_fd) };
            if set_reset_on_close_fd(&fd).is_ok() {
                f.gate.hit();
            }
            *conn.close_reason.lock().unwrap_or_else(|p| p.into_inner()) = "restart";
        }
    }
}

/// Read and discard until the client gives up or the backend stops.
async fn hang(sh: &Shared, mut stream: TcpStream) {
    let mut shutdown = sh.shutdown.subscribe();
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            r = stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = shutdown.changed() => return,
        }
    }
}

struct IdleTimer {
    after: Duration,
    fault: Arc<Fault>,
    deadline: Option<Instant>,
    sleep: Pin<Box<Sleep>>,
}

/// The socket as hyper sees it, with the connection-level faults that act between requests:
/// `reclaim` (a silent close a little after a response) and `idle-timeout`.
struct FaultIo {
    inner: TcpStream,
    conn: Arc<ConnState>,
    sh: Arc<Shared>,
    doom: Option<(Pin<Box<Sleep>>, Arc<Fault>)>,
    caught: bool,
    idle: Option<IdleTimer>,
    read_waker: Option<std::task::Waker>,
}

impl FaultIo {
    fn fault_log(&self, f: &Fault, detail: &str) {
        let mut rec = Rec::new("fault", &self.sh.name, self.conn.id);
        rec.req = Some(self.conn.req_n.load(Ordering::Relaxed));
        rec.faults = vec![f.name.clone()];
        rec.detail = Some(detail.to_string());
        self.sh.log(rec);
    }
}

impl AsyncRead for FaultIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some((sleep, fault)) = &mut this.doom {
            // The server has decided to close: whatever the client sends now is swallowed,
            // exactly like a request racing a keep-alive reclaim.
            let mut scratch = [0u8; 4096];
            loop {
                let mut rb = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(Ok(())),
                    Poll::Ready(Ok(())) => {
                        if !this.caught {
                            this.caught = true;
                            fault.caught.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => break,
                }
            }
            return match sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    fault.gate.hit();
                    let fault = fault.clone();
                    let detail = if this.caught {
                        "reclaim: closed; a request arrived in the gap and was dropped"
                    } else {
                        "reclaim: closed idle connection"
                    };
                    this.fault_log(&fault, detail);
                    *this
                        .conn
                        .close_reason
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = "reclaim";
                    // EOF: hyper closes the connection with a FIN and no bytes.
                    Poll::Ready(Ok(()))
                }
                Poll::Pending => Poll::Pending,
            };
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before
                    && let Some(t) = &mut this.idle
                {
                    t.deadline = None;
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                // Remembered so that a flush (the end of a response) can make hyper look at
                // this socket again: that is when reclaim and idle timers start.
                this.read_waker = Some(cx.waker().clone());
                let idle_now = this.conn.in_flight.load(Ordering::Acquire) == 0;
                if let (Some(t), true) = (&mut this.idle, idle_now) {
                    let deadline = *t.deadline.get_or_insert_with(|| {
                        let d = Instant::now() + t.after;
                        t.sleep.as_mut().reset(d.into());
                        d
                    });
                    let _ = deadline;
                    if t.sleep.as_mut().poll(cx).is_ready() {
                        t.fault.gate.hit();
                        let f = t.fault.clone();
                        this.fault_log(&f, "idle-timeout: closed idle keep-alive connection");
                        *this
                            .conn
                            .close_reason
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = "idle-timeout";
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for FaultIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            // A response has left: a reclaim decided for it starts its delay now, never before
            // the client could have received the response.
            let decided = this
                .conn
                .doom
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let (None, Some((delay, f))) = (&this.doom, decided) {
                this.doom = Some((Box::pin(tokio::time::sleep(delay)), f));
                if let Some(w) = this.read_waker.take() {
                    w.wake();
                }
            } else if this.idle.is_some()
                && let Some(w) = this.read_waker.take()
            {
                w.wake();
            }
        }
        r
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A body that promises `len` bytes and fails before sending any: the headers go out, then
/// the connection is cut (`close-after-headers`).
struct CutBody {
    len: u64,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Body for CutBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        // A short pause first, so hyper flushes the headers before the body fails.
        let s = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(5))));
        match s.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(io::Error::other("close-after-headers")))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

type RespBody = Either<Full<Bytes>, CutBody>;

struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Release);
    }
}

async fn serve(
    sh: Arc<Shared>,
    conn: Arc<ConnState>,
    req: Request<Incoming>,
) -> Result<Response<RespBody>, Infallible> {
    let t0 = Instant::now();
    let t_us = now_us();
    conn.in_flight.fetch_add(1, Ordering::Release);
    let _in_flight = InFlight(conn.clone());
    let n = conn.req_n.fetch_add(1, Ordering::Relaxed) + 1;
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    // Read the request body so the connection can be reused.
    let _ = req.into_body().collect().await;
    let faults = sh.current();
    let mut applied: Vec<String> = Vec::new();
    let mut pool_wait = None;
    let mut cut = false;
    let (status, body): (u16, Bytes) = match path.as_str() {
        "/health" => (200, Bytes::from_static(b"ok\n")),
        "/ready" => match &sh.pool {
            None => (200, Bytes::from_static(b"ready\n")),
            Some(pool) => match pool.acquire().await {
                Ok((mut c, waited)) => {
                    pool_wait = Some(waited);
                    match c.round_trip(0).await {
                        Ok(()) => (200, Bytes::from_static(b"ready\n")),
                        Err(e) => (503, Bytes::from(format!("not ready: db: {}\n", db_err(&e)))),
                    }
                }
                Err(e) => {
                    if let DbError::Timeout(w) = &e {
                        pool_wait = Some(*w);
                    }
                    (503, Bytes::from(format!("not ready: {}\n", db_err(&e))))
                }
            },
        },
        _ => {
            let mut h = Headers::default();
            for f in faults.iter() {
                if f.behaviour.before_headers(&f.gate, &mut h) {
                    f.gate.hit();
                    applied.push(f.name.clone());
                }
            }
            let (forced, slow) = (h.status, h.delay);
            cut = h.cut;
            let (lat, mixed) = if sh.latency.is_zero() && sh.status.fixed().is_some() {
                (Duration::ZERO, sh.status.fixed().unwrap_or(200))
            } else {
                let mut rng = sh.rng.lock().unwrap_or_else(|p| p.into_inner());
                (sh.latency.sample(&mut rng), sh.status.sample(&mut rng))
            };
            let wait = lat + slow;
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            match &sh.pool {
                None => (forced.unwrap_or(mixed), sh.body.clone()),
                Some(pool) => match db_work(pool).await {
                    Ok(waited) => {
                        pool_wait = Some(waited);
                        (forced.unwrap_or(mixed), sh.body.clone())
                    }
                    Err((e, waited)) => {
                        pool_wait = waited;
                        let code = if matches!(e, DbError::Timeout(_)) {
                            503
                        } else {
                            502
                        };
                        (
                            code,
                            Bytes::from(format!("backend {}: db: {}\n", sh.name, db_err(&e))),
                        )
                    }
                },
            }
        }
    };
    // Decide now whether this connection will be reclaimed after this response.
    for f in faults.iter() {
        if let Some(d) = f.behaviour.after_response(&f.gate) {
            *conn.doom.lock().unwrap_or_else(|p| p.into_inner()) = Some((d, f.clone()));
            applied.push(f.name.clone());
            break;
        }
    }
    sh.requests.fetch_add(1, Ordering::Relaxed);
    if let Some(c) = sh.statuses.get(status as usize) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    let len = body.len() as u64;
    let resp_body = if cut {
        Either::Right(CutBody { len, sleep: None })
    } else {
        Either::Left(Full::new(body))
    };
    let mut resp = Response::new(resp_body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
    if let Ok(v) = header::HeaderValue::from_str(&sh.name) {
        h.insert("x-backend", v);
    }
    h.insert("x-conn", header::HeaderValue::from(conn.id));
    h.insert("x-req", header::HeaderValue::from(n));
    if sh.log.is_some() {
        let mut rec = Rec::new("request", &sh.name, conn.id);
        rec.t_us = t_us;
        rec.req = Some(n);
        rec.method = Some(method);
        rec.path = Some(path);
        rec.status = Some(status);
        rec.dur_us = Some(t0.elapsed().as_micros() as u64);
        rec.pool_wait_us = pool_wait.map(|w| w.as_micros() as u64);
        rec.faults = applied;
        sh.log(rec);
    }
    Ok(resp)
}

fn db_err(e: &DbError) -> String {
    match e {
        DbError::Timeout(w) => format!(
            "pool wait timed out after {}",
            resolvelab_core::dur::format(*w)
        ),
        DbError::Io(m) => m.clone(),
    }
}

async fn db_work(pool: &Arc<Pool>) -> Result<Duration, (DbError, Option<Duration>)> {
    let (mut c, waited) = pool.acquire().await.map_err(|e| {
        let w = match &e {
            DbError::Timeout(w) => Some(*w),
            _ => None,
        };
        (e, w)
    })?;
    for i in 0..pool.round_trips() {
        c.round_trip(i).await.map_err(|e| (e, Some(waited)))?;
    }
    Ok(waited)
}
