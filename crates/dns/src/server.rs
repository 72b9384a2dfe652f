//! Sockets around the [`Engine`]: the UDP loop, TCP with 2-byte length framing, the query-log
//! writer, the revert ticker, the timeline and the control API.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use resolvelab_core::policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
#[cfg(not(target_os = "linux"))]
use tokio::net::UdpSocket;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::engine::{
    Engine, EngineConfig, ModeChange, NameStatus, QueryEvent, SetError, Transport,
};
use crate::zone::{Align, ModeSpec, NameConfig, Timeline, Unknown};
use resolvelab_core::spec::dns::DnsMode;

/// The schema of the query log's first line.
pub const LOG_SCHEMA: &str = resolvelab_core::evidence::schema::DNS;

/// A TCP client that sends nothing for this long is disconnected.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Everything [`DnsServer::start`] needs.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// UDP and TCP address (port 0 picks a free port, the same for both).
    pub listen: SocketAddr,
    /// The names served.
    pub names: Vec<NameConfig>,
    /// Default TTL in seconds (1 unless set).
    pub ttl: u32,
    /// How to answer names we do not serve.
    pub unknown: Unknown,
    /// Seed of the `weighted` RNGs.
    pub seed: u64,
    /// Query log (JSON Lines, schema `resolvelab.dns/v1`).
    pub log: Option<PathBuf>,
    /// Control API address (HTTP, loopback).
    pub control: Option<SocketAddr>,
    /// Bearer token the control API requires, if any.
    pub token: Option<String>,
    /// Scheduled changes, relative to the start.
    pub timeline: Option<Timeline>,
    /// Allow non-loopback listen/control addresses and answers.
    pub allow_remote: bool,
    /// Threads reading the UDP socket (batched `recvmmsg`/`sendmmsg` on Linux).
    pub udp_workers: usize,
    /// More addresses served (UDP and TCP), each a *view*: view K is `views[K - 1]` (view 0 is
    /// `listen`). A name answers the same on every view until a view gets an answer of its own
    /// ([`DnsHandle::serve_view`]) — a GSLB that answers each site's resolver its own members.
    /// The query log names the view a query arrived on.
    pub views: Vec<SocketAddr>,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            names: Vec::new(),
            ttl: 1,
            unknown: Unknown::Nxdomain,
            seed: 0,
            log: None,
            control: None,
            token: None,
            timeline: None,
            allow_remote: false,
            udp_workers: 1,
            views: Vec::new(),
        }
    }
}

/// Starts the authority.
pub struct DnsServer;

/// A running authority. Dropping it without [`DnsHandle::shutdown`] aborts its tasks but may
/// lose the tail of the query log.
pub struct DnsHandle {
    engine: Arc<Engine>,
    local: SocketAddr,
    views: Vec<SocketAddr>,
    control: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    udp_threads: Vec<std::thread::JoinHandle<()>>,
    log_thread: Option<std::thread::JoinHandle<io::Result<()>>>,
    started: Instant,
}

fn check_bind(addr: SocketAddr, what: &str, allow_remote: bool) -> anyhow::Result<()> {
    if !allow_remote && !policy::is_loopback(addr.ip()) {
        bail!(
            "{what} address {addr} is not loopback: resolvelab serves only 127.0.0.0/8 and ::1 \
             unless you pass --allow-remote"
        );
    }
    Ok(())
}

fn bind_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // A deep receive queue absorbs bursts (load tools send in bursts; drops look like faults).
    let _ = s.set_recv_buffer_size(4 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    s.bind(&addr.into())?;
    Ok(s.into())
}

type LogWriter = (
    std::sync::mpsc::SyncSender<Vec<QueryEvent>>,
    std::thread::JoinHandle<io::Result<()>>,
);

fn spawn_log_writer(path: &PathBuf) -> io::Result<LogWriter> {
    let f = std::fs::File::create(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot create query log {}: {e}", path.display()),
        )
    })?;
    let mut w = resolvelab_core::jsonl::BufJsonl::new(f, LOG_SCHEMA)?;
    w.flush()?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<QueryEvent>>(4096);
    let t = std::thread::Builder::new()
        .name("dns-log".into())
        .spawn(move || {
            // Flush whenever the queue is empty: every event is on disk as soon as the server is
            // idle, without one syscall per query under load.
            while let Ok(batch) = rx.recv() {
                for ev in &batch {
                    w.write(ev)?;
                }
                while let Ok(batch) = rx.try_recv() {
                    for ev in &batch {
                        w.write(ev)?;
                    }
                }
                w.flush()?;
            }
            w.flush()
        })?;
    Ok((tx, t))
}

impl DnsServer {
    /// Bind the sockets and start serving on the current tokio runtime.
    pub async fn start(cfg: DnsConfig) -> anyhow::Result<DnsHandle> {
        check_bind(cfg.listen, "listen", cfg.allow_remote)?;
        for v in &cfg.views {
            check_bind(*v, "view", cfg.allow_remote)?;
        }
        if cfg.views.len() >= usize::from(u16::MAX) {
            bail!(
                "{} views: at most {} are served",
                cfg.views.len(),
                u16::MAX - 1
            );
        }
        if let Some(c) = cfg.control {
            check_bind(c, "control", cfg.allow_remote)?;
        }
        let engine = Arc::new(
            Engine::new(EngineConfig {
                names: cfg.names.clone(),
                ttl: cfg.ttl,
                unknown: cfg.unknown,
                seed: cfg.seed,
                allow_remote: cfg.allow_remote,
            })
            .map_err(anyhow::Error::msg)?,
        );
        if let Some(tl) = &cfg.timeline {
            for c in &tl.changes {
                if engine.status(&c.name).is_none() {
                    bail!(
                        "timeline changes name `{}`, which is not served: add it with --name or in the zone file",
                        c.name
                    );
                }
                if let ModeSpec::DnsMode(m) = &c.mode {
                    m.check_loopback(cfg.allow_remote)
                        .map_err(|e| anyhow::anyhow!("timeline, name `{}`: {e}", c.name))?;
                }
            }
        }

        let (udp, tcp) = bind_pair(cfg.listen).await?;
        let local = udp.local_addr()?;
        let mut tasks = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let mut udp_threads = Vec::new();
        let mut views = Vec::new();
        let mut sockets = vec![(udp, tcp, cfg.udp_workers.max(1))];
        for v in &cfg.views {
            let (u, t) = bind_pair(*v).await?;
            views.push(u.local_addr()?);
            // A view is one resolver's (an instance's): one reader is plenty.
            sockets.push((u, t, 1));
        }
        (engine.views).store(views.len() as u16, std::sync::atomic::Ordering::Relaxed);
        for (view, (udp, tcp, workers)) in sockets.into_iter().enumerate() {
            let view = view as u16;
            #[cfg(target_os = "linux")]
            for i in 0..workers {
                let sock = udp.try_clone()?;
                let (e, s, rt) = (
                    engine.clone(),
                    stop.clone(),
                    tokio::runtime::Handle::current(),
                );
                udp_threads.push(
                    std::thread::Builder::new()
                        .name(format!("dns-udp-{view}-{i}"))
                        .spawn(move || crate::udp::serve(sock, (e, view), s, rt))?,
                );
            }
            #[cfg(not(target_os = "linux"))]
            {
                udp.set_nonblocking(true)?;
                let udp = Arc::new(UdpSocket::from_std(udp)?);
                for _ in 0..workers {
                    tasks.push(tokio::spawn(udp_loop(udp.clone(), engine.clone(), view)));
                }
            }
            #[cfg(target_os = "linux")]
            drop(udp);
            tasks.push(tokio::spawn(tcp_accept(tcp, engine.clone(), view)));
        }

        let log_thread = match &cfg.log {
            Some(p) => {
                let (tx, t) = spawn_log_writer(p)?;
                *engine.sinks.log.write().unwrap_or_else(|p| p.into_inner()) = Some(tx);
                Some(t)
            }
            None => None,
        };

        {
            let e = engine.clone();
            tasks.push(tokio::spawn(async move {
                let mut iv = tokio::time::interval(Duration::from_millis(20));
                iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    iv.tick().await;
                    e.tick();
                }
            }));
        }

        let started = Instant::now();
        if let Some(tl) = cfg.timeline.clone() {
            tasks.push(tokio::spawn(run_timeline(engine.clone(), tl, started)));
        }

        let control = match cfg.control {
            Some(addr) => {
                let l = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot bind the control API on {addr}"))?;
                let bound = l.local_addr()?;
                tasks.push(tokio::spawn(crate::control::serve(
                    l,
                    engine.clone(),
                    cfg.token.clone(),
                )));
                Some(bound)
            }
            None => None,
        };

        Ok(DnsHandle {
            engine,
            local,
            views,
            control,
            tasks,
            stop,
            udp_threads,
            log_thread,
            started,
        })
    }
}

async fn bind_pair(listen: SocketAddr) -> anyhow::Result<(std::net::UdpSocket, TcpListener)> {
    // With port 0 the UDP port is picked first; TCP must get the same number, so retry if taken.
    for _ in 0..20 {
        let udp = bind_udp(listen).with_context(|| format!("cannot bind UDP {listen}"))?;
        let addr = udp.local_addr()?;
        match TcpListener::bind(addr).await {
            Ok(t) => return Ok((udp, t)),
            Err(e) if listen.port() == 0 && e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot bind TCP {addr}")),
        }
    }
    bail!(
        "could not find a port free for both UDP and TCP on {}",
        listen.ip()
    )
}

#[cfg(not(target_os = "linux"))]
async fn udp_loop(sock: Arc<UdpSocket>, engine: Arc<Engine>, view: u16) {
    let mut buf = vec![0u8; 65_535];
    loop {
        let (n, peer) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            // ICMP errors of earlier sends surface here on some systems; keep serving.
            Err(_) => continue,
        };
        let reply = engine.handle_view(&buf[..n], peer, Transport::Udp, view);
        if let Some(bytes) = reply.bytes {
            if reply.delay.is_zero() {
                let _ = sock.send_to(&bytes, peer).await;
            } else {
                let s = sock.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(reply.delay).await;
                    let _ = s.send_to(&bytes, peer).await;
                });
            }
        }
    }
}

async fn tcp_accept(listener: TcpListener, engine: Arc<Engine>, view: u16) {
    // Connection tasks live in this set, so aborting the accept task closes them all.
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            acc = listener.accept() => {
                if let Ok((stream, peer)) = acc {
                    let _ = stream.set_nodelay(true);
                    conns.spawn(tcp_conn(stream, peer, engine.clone(), view));
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn tcp_conn(mut stream: TcpStream, peer: SocketAddr, engine: Arc<Engine>, view: u16) {
    let mut buf = Vec::new();
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Ok(Ok(n)) => usize::from(n),
            _ => return,
        };
        buf.resize(len, 0);
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut buf)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let reply = engine.handle_view(&buf, peer, Transport::Tcp, view);
        let Some(bytes) = reply.bytes else { continue };
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        let Ok(n) = u16::try_from(bytes.len()) else {
            continue;
        };
        let mut framed = Vec::with_capacity(bytes.len() + 2);
        framed.extend_from_slice(&n.to_be_bytes());
        framed.extend_from_slice(&bytes);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}

async fn run_timeline(engine: Arc<Engine>, tl: Timeline, started: Instant) {
    for c in tl.changes {
        tokio::time::sleep_until((started + c.at).into()).await;
        if let Err(e) = engine.set_mode(&c.name, c.mode.clone(), c.for_, c.align) {
            resolvelab_core::progress::line(format!(
                "dns: timeline change at {:?} for {}: {e}",
                c.at, c.name
            ));
        }
    }
}

impl DnsHandle {
    /// The UDP/TCP address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The control API address actually bound, if enabled.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control
    }

    /// When the server started (the zero of timeline offsets).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Set `name`'s mode (see [`Engine::set_mode`]). A wrapper set alone (`delay:200ms`,
    /// `truncate`) applies to the mode in force when it takes effect.
    pub fn set_mode(
        &self,
        name: &str,
        mode: DnsMode,
        for_: Option<Duration>,
        align_next_query: bool,
    ) -> Result<NameStatus, SetError> {
        let align = if align_next_query {
            Align::NextQuery
        } else {
            Align::Now
        };
        self.engine
            .set_mode(name, ModeSpec::DnsMode(mode), for_, align)
    }

    /// Answer `name` with `mode` as its configured mode (see [`Engine::serve`]: a GSLB's
    /// answer after its health checks, not an injection).
    pub fn serve(&self, name: &str, mode: DnsMode, reason: &str) -> Result<NameStatus, SetError> {
        self.engine.serve(name, mode, reason)
    }

    /// Answer `name` with `mode` on view `view` only, or (`None`) as on the main address again
    /// (see [`Engine::serve_view`]).
    pub fn serve_view(
        &self,
        name: &str,
        view: u16,
        mode: Option<DnsMode>,
    ) -> Result<NameStatus, SetError> {
        self.engine.serve_view(name, view, mode)
    }

    /// The views' addresses actually bound (view K is element K − 1; see [`DnsConfig::views`]).
    pub fn view_addrs(&self) -> &[SocketAddr] {
        &self.views
    }

    /// Put `name` back to its configured mode now (cancelling pending reverts).
    pub fn reset(&self, name: &str) -> Result<NameStatus, SetError> {
        self.engine
            .set_mode(name, ModeSpec::Default, None, Align::Now)
    }

    /// The mode in force for `name`.
    pub fn mode(&self, name: &str) -> Option<DnsMode> {
        self.engine.mode(name)
    }

    /// Injection hits over all names.
    pub fn hits(&self) -> u64 {
        self.engine.hits()
    }

    /// Injection hits of one name.
    pub fn hits_for(&self, name: &str) -> Option<u64> {
        self.engine.status(name).map(|s| s.hits)
    }

    /// Every name's status.
    pub fn names(&self) -> Vec<NameStatus> {
        self.engine.list()
    }

    /// Every query as it is answered (a lagging receiver gets `RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<QueryEvent> {
        self.engine.sinks.events.subscribe()
    }

    /// Every mode change as it happens.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<ModeChange> {
        self.engine.sinks.changes.subscribe()
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics(&self) -> String {
        self.engine.metrics()
    }

    /// The engine (for in-process callers that need more than this handle offers).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Stop serving, close the sockets and flush the query log.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
        let threads: Vec<_> = self.udp_threads.drain(..).collect();
        tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await
        .context("UDP threads")?;
        self.engine
            .sinks
            .log
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = self.log_thread.take() {
            tokio::task::spawn_blocking(move || t.join())
                .await
                .context("query log writer")?
                .map_err(|_| anyhow::anyhow!("query log writer panicked"))?
                .context("writing the query log")?;
        }
        Ok(())
    }
}

impl Drop for DnsHandle {
    fn drop(&mut self) {
        // The UDP threads see this within their 100 ms read timeout and exit.
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_bind;

    /// The bind policy as a function: nothing is bound, so a wrong policy exposes nothing.
    #[test]
    fn only_loopback_binds_without_allow_remote() {
        for ok in ["127.0.0.1:53", "127.53.0.9:0", "[::1]:53"] {
            check_bind(ok.parse().unwrap(), "listen", false).unwrap();
        }
        for bad in [
            "0.0.0.0:0",
            "[::]:53",
            "10.0.0.1:53",
            "192.0.2.1:53",
            "[2001:db8::1]:53",
            "[::ffff:10.0.0.1]:53",
        ] {
            let e = check_bind(bad.parse().unwrap(), "control", false)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("control address") && e.contains("--allow-remote"),
                "{bad}: {e}"
            );
            check_bind(bad.parse().unwrap(), "listen", true).unwrap();
        }
    }
}
