//! The TCP fault proxy: a listener, an upstream, and a live list of toxics.

use crate::toxics::{Direction, Step, Toxic, ToxicConn, ToxicSpec};
use bytes::{Bytes, BytesMut};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_core::{policy, time::now_us};
use resolvelab_inject::gate::{FaultList, Gate, Named, sub_seed};
use resolvelab_inject::net::{listen_reuse, set_reset_on_close};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

/// Largest read per chunk: big reads keep syscalls per byte low when no toxic is active.
const MAX_CHUNK: usize = 256 * 1024;

/// Schema of the proxy connection log (first line of the file).
pub const LOG_SCHEMA: &str = resolvelab_core::evidence::schema::PROXY;

/// How to start one proxy.
#[derive(Clone)]
pub struct ProxyConfig {
    /// Name used by the control API, metrics and the log.
    pub name: String,
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Address to forward to.
    pub upstream: SocketAddr,
    /// More addresses to forward to: connections then go round-robin over `upstream` and these,
    /// in order — an L4 balancer in front of a fleet (each connection stays on its address).
    pub balance: Vec<SocketAddr>,
    /// Toxics active from the start.
    pub faults: Vec<ToxicSpec>,
    /// Connection log (`resolvelab.proxy/v1`); several proxies may share one writer.
    pub log: Option<Arc<JsonlWriter>>,
    /// Permit a non-loopback upstream (off: loopback only).
    pub allow_remote: bool,
}

impl ProxyConfig {
    /// A proxy without faults or log.
    pub fn new(name: &str, listen: SocketAddr, upstream: SocketAddr) -> ProxyConfig {
        ProxyConfig {
            name: name.to_string(),
            listen,
            upstream,
            balance: Vec::new(),
            faults: Vec::new(),
            log: None,
            allow_remote: false,
        }
    }
}

/// A toxic installed on a proxy: the spec, its gate (window, seed, hits) and its counters.
#[derive(Debug)]
pub struct ToxicEntry {
    name: String,
    spec: ToxicSpec,
    toxic: Arc<dyn Toxic>,
    gate: Gate,
    bytes: AtomicU64,
    chunks: AtomicU64,
}

impl Named for ToxicEntry {
    fn name(&self) -> &str {
        &self.name
    }
}

impl resolvelab_inject::gate::Gated for ToxicEntry {
    fn gate(&self) -> &Gate {
        &self.gate
    }
}

/// Counters of one toxic, as the control API and metrics show them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToxicStats {
    /// Toxic name.
    pub name: String,
    /// Kind (`latency`, …).
    pub kind: String,
    /// The spec, rendered back.
    pub spec: String,
    /// `upstream` or `downstream`.
    pub direction: String,
    /// Still inside its window?
    pub active: bool,
    /// Connections the toxic actually acted on (for `down`: windows in which the port was closed).
    pub hits: u64,
    /// Bytes delayed, dropped, split or cut.
    pub bytes: u64,
    /// Chunks delayed, dropped, split or cut.
    pub chunks: u64,
}

impl ToxicEntry {
    /// Connections touched (the hit counter).
    pub fn hits(&self) -> u64 {
        self.gate.hits()
    }

    fn stats(&self) -> ToxicStats {
        ToxicStats {
            name: self.name.clone(),
            kind: self.spec.kind.name().to_string(),
            spec: self.spec.render(),
            direction: self.spec.direction.as_str().to_string(),
            active: self.gate.in_window(),
            hits: self.gate.hits(),
            bytes: self.bytes.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
        }
    }
}

/// Proxy-wide counters.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProxyStats {
    /// Proxy name.
    pub name: String,
    /// Listening address.
    pub listen: String,
    /// Upstream address.
    pub upstream: String,
    /// Connections accepted.
    pub connections: u64,
    /// Connections currently open.
    pub open: u64,
    /// Upstream connects that failed.
    pub connect_errors: u64,
    /// Bytes forwarded client → upstream.
    pub bytes_upstream: u64,
    /// Bytes forwarded upstream → client.
    pub bytes_downstream: u64,
    /// Every toxic with its counters.
    pub faults: Vec<ToxicStats>,
}

struct Inner {
    name: String,
    listen: SocketAddr,
    upstream: SocketAddr,
    /// `upstream` and the balanced addresses (round-robin by connection id).
    upstreams: Vec<SocketAddr>,
    toxics: FaultList<ToxicEntry>,
    version: AtomicU64,
    changed: Notify,
    next_conn: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
    connect_errors: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    log: Option<Arc<JsonlWriter>>,
    shutdown: watch::Sender<bool>,
}

/// Start proxies.
pub struct Proxy;

impl Proxy {
    /// Bind the listener and start forwarding; the proxy runs on the caller's tokio runtime until
    /// [`ProxyHandle::shutdown`].
    pub async fn start(cfg: ProxyConfig) -> anyhow::Result<ProxyHandle> {
        for a in std::iter::once(&cfg.upstream).chain(&cfg.balance) {
            policy::check_target(*a, cfg.allow_remote).map_err(anyhow::Error::msg)?;
        }
        policy::check_target(cfg.listen, cfg.allow_remote).map_err(anyhow::Error::msg)?;
        let listener = listen_reuse(cfg.listen, 1024)?;
        let listen = listener.local_addr()?;
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            name: cfg.name,
            listen,
            upstream: cfg.upstream,
            upstreams: std::iter::once(cfg.upstream).chain(cfg.balance).collect(),
            toxics: FaultList::default(),
            version: AtomicU64::new(0),
            changed: Notify::new(),
            next_conn: AtomicU64::new(1),
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            log: cfg.log,
            shutdown,
        });
        let handle = ProxyHandle {
            inner: inner.clone(),
            task: Arc::new(std::sync::Mutex::new(None)),
        };
        for f in cfg.faults {
            handle.add_fault(f)?;
        }
        let task = tokio::spawn(accept_loop(inner, listener));
        *handle.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Ok(handle)
    }
}

/// A running proxy. Cheap to clone; every clone controls the same proxy.
#[derive(Clone)]
pub struct ProxyHandle {
    inner: Arc<Inner>,
    task: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
}

impl ProxyHandle {
    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.listen
    }

    /// The address it forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.inner.upstream
    }

    /// Install a toxic (it also applies to connections already open); returns its name.
    pub fn add_fault(&self, spec: ToxicSpec) -> anyhow::Result<String> {
        let name = spec.name();
        let entry = Arc::new(ToxicEntry {
            name: name.clone(),
            gate: Gate::new(spec.common.clone()),
            toxic: crate::toxics::behaviour(&spec.kind),
            spec,
            bytes: AtomicU64::new(0),
            chunks: AtomicU64::new(0),
        });
        self.inner.toxics.add(entry.clone()).map_err(|name| {
            anyhow::anyhow!(
                "proxy `{}` already has a fault named `{name}`; remove it first or add `name=OTHER`",
                self.inner.name
            )
        })?;
        self.log_event(
            "fault_added",
            serde_json::json!({"fault": name, "spec": entry.spec.render()}),
        );
        self.bump();
        Ok(name)
    }

    /// Parse `SPEC` and install it.
    pub fn add_fault_str(&self, spec: &str) -> anyhow::Result<String> {
        let spec: ToxicSpec = spec.parse().map_err(anyhow::Error::msg)?;
        self.add_fault(spec)
    }

    /// Remove a toxic by name; false if there was none.
    pub fn remove_fault(&self, name: &str) -> bool {
        let removed = self.inner.toxics.remove(name);
        if removed {
            self.log_event("fault_removed", serde_json::json!({"fault": name}));
            self.bump();
        }
        removed
    }

    /// Remove every toxic.
    pub fn clear_faults(&self) {
        self.inner.toxics.clear();
        self.log_event("faults_cleared", serde_json::json!({}));
        self.bump();
    }

    /// Every toxic with its counters.
    pub fn faults(&self) -> Vec<ToxicStats> {
        self.inner.current().iter().map(|t| t.stats()).collect()
    }

    /// `(name, hits)` of every toxic.
    pub fn fault_hits(&self) -> Vec<(String, u64)> {
        self.inner
            .current()
            .iter()
            .map(|t| (t.name.clone(), t.hits()))
            .collect()
    }

    /// Proxy-wide counters and every toxic's counters.
    pub fn stats(&self) -> ProxyStats {
        let i = &self.inner;
        ProxyStats {
            name: i.name.clone(),
            listen: i.listen.to_string(),
            upstream: i.upstream.to_string(),
            connections: i.connections.load(Ordering::Relaxed),
            open: i.open.load(Ordering::Relaxed),
            connect_errors: i.connect_errors.load(Ordering::Relaxed),
            bytes_upstream: i.bytes_up.load(Ordering::Relaxed),
            bytes_downstream: i.bytes_down.load(Ordering::Relaxed),
            faults: self.faults(),
        }
    }

    /// Stop listening and close every connection.
    pub async fn shutdown(&self) {
        let _ = self.inner.shutdown.send(true);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = task {
            let _ = t.await;
        }
        // Connections observe the same signal; give them a moment to finish their log lines.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.inner.open.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn bump(&self) {
        self.inner.version.fetch_add(1, Ordering::Release);
        self.inner.changed.notify_one();
    }

    fn log_event(&self, event: &str, extra: serde_json::Value) {
        self.inner.log_event(event, extra);
    }
}

impl Inner {
    fn current(&self) -> Arc<Vec<Arc<ToxicEntry>>> {
        self.toxics.current()
    }

    fn active_down(&self) -> Option<Arc<ToxicEntry>> {
        self.current()
            .iter()
            .find(|t| t.spec.kind.on_listener() && t.gate.in_window())
            .cloned()
    }

    fn log_event(&self, event: &str, extra: serde_json::Value) {
        if let Some(log) = &self.log {
            let mut v = serde_json::json!({"t_us": now_us(), "event": event, "proxy": self.name});
            if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            // A log that cannot be written must not take the proxy down.
            let _ = log.write(&v);
        }
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    use resolvelab_inject::net::{ListenerEvent, refusable_accept_loop};
    refusable_accept_loop(
        listener,
        inner.listen,
        1024,
        &inner.changed,
        inner.shutdown.subscribe(),
        || inner.active_down(),
        |ev| match ev {
            ListenerEvent::Closed(name) => {
                inner.log_event("down", serde_json::json!({"fault": name}))
            }
            ListenerEvent::Reopened => inner.log_event("up", serde_json::json!({})),
            ListenerEvent::AcceptFailed(e) => {
                inner.log_event("accept-failed", serde_json::json!({"error": e.to_string()}))
            }
        },
        |client, peer| {
            tokio::spawn(handle_conn(inner.clone(), client, peer));
        },
    )
    .await
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    None,
    Close,
    Reset,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
enum End {
    Eof,
    Closed,
    Reset,
    Error,
    Shutdown,
}

struct PumpOut {
    bytes: u64,
    touched: Vec<String>,
    end: End,
}

async fn handle_conn(inner: Arc<Inner>, client: TcpStream, peer: SocketAddr) {
    let id = inner.next_conn.fetch_add(1, Ordering::Relaxed);
    inner.connections.fetch_add(1, Ordering::Relaxed);
    let open_us = now_us();
    // Connection ids start at 1: the first connection goes to `upstream`.
    let to = inner.upstreams[((id - 1) % inner.upstreams.len() as u64) as usize];
    let upstream = match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(to)).await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            inner.connect_errors.fetch_add(1, Ordering::Relaxed);
            inner.log_event("connect_failed", serde_json::json!({"conn": id, "client": peer.to_string(), "upstream": to.to_string(), "error": e.to_string()}));
            // Mirror the failure to the client as a reset, like a refused backend behind the proxy.
            let _ = set_reset_on_close(&client);
            return;
        }
        Err(_) => {
            inner.connect_errors.fetch_add(1, Ordering::Relaxed);
            inner.log_event("connect_failed", serde_json::json!({"conn": id, "client": peer.to_string(), "upstream": to.to_string(), "error": "timeout"}));
            let _ = set_reset_on_close(&client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    inner.open.fetch_add(1, Ordering::Relaxed);
    inner.log_event(
        "open",
        serde_json::json!({"conn": id, "client": peer.to_string(), "upstream": to.to_string()}),
    );
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let (kill_tx, _) = watch::channel(Kill::None);
    let kill_tx = Arc::new(kill_tx);
    let up = pump(
        inner.clone(),
        id,
        Direction::Upstream,
        cr,
        uw,
        kill_tx.clone(),
    );
    let down = pump(
        inner.clone(),
        id,
        Direction::Downstream,
        ur,
        cw,
        kill_tx.clone(),
    );
    let (up, down) = tokio::join!(up, down);
    inner.bytes_up.fetch_add(up.bytes, Ordering::Relaxed);
    inner.bytes_down.fetch_add(down.bytes, Ordering::Relaxed);
    let mut faults = up.touched.clone();
    for t in down.touched {
        if !faults.contains(&t) {
            faults.push(t);
        }
    }
    let end = [up.end, down.end]
        .into_iter()
        .find(|e| *e != End::Eof)
        .unwrap_or(End::Eof);
    inner.log_event(
        "close",
        serde_json::json!({"conn": id, "client": peer.to_string(), "open_us": open_us, "close_us": now_us(),
            "bytes_up": up.bytes, "bytes_down": down.bytes, "faults": faults, "end": end}),
    );
    inner.open.fetch_sub(1, Ordering::Relaxed);
}

/// One toxic's state on this direction of this connection (`None`: the toxicity coin said no).
struct Lane {
    entry: Arc<ToxicEntry>,
    conn: Option<Box<dyn ToxicConn>>,
    rng: ChaCha8Rng,
    touched: bool,
}

fn refresh(inner: &Inner, lanes: &mut Vec<Lane>, id: u64, dir: Direction) {
    let current = inner.current();
    let mut next = Vec::with_capacity(current.len());
    for entry in current.iter() {
        if entry.spec.direction != dir || entry.spec.kind.on_listener() {
            continue;
        }
        if let Some(pos) = lanes.iter().position(|l| Arc::ptr_eq(&l.entry, entry)) {
            next.push(lanes.swap_remove(pos));
            continue;
        }
        let lane_id = match dir {
            Direction::Upstream => 1,
            Direction::Downstream => 2,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(entry.spec.common.seed, id, lane_id));
        let on =
            entry.spec.common.toxicity >= 1.0 || rng.random::<f64>() < entry.spec.common.toxicity;
        next.push(Lane {
            conn: on.then(|| entry.toxic.connect(Instant::now())),
            entry: entry.clone(),
            rng,
            touched: false,
        });
    }
    *lanes = next;
}

fn mark(lane: &mut Lane, bytes: u64) {
    mark_parts(&lane.entry, &mut lane.touched, bytes);
}

fn mark_parts(entry: &ToxicEntry, touched: &mut bool, bytes: u64) {
    entry.chunks.fetch_add(1, Ordering::Relaxed);
    entry.bytes.fetch_add(bytes, Ordering::Relaxed);
    if !*touched {
        *touched = true;
        entry.gate.hit();
    }
}

enum Msg {
    Data(Bytes, Instant),
    Eof,
}

// Over 150 lines on purpose: one direction's reader and writer halves, which share the
// channel, the returned buffers and the kill/shutdown watches; the toxics act between them.
async fn pump(
    inner: Arc<Inner>,
    id: u64,
    dir: Direction,
    mut src: OwnedReadHalf,
    mut dst: OwnedWriteHalf,
    kill_tx: Arc<watch::Sender<Kill>>,
) -> PumpOut {
    let (tx, mut rx) = mpsc::channel::<Msg>(64);
    let mut kill_r = kill_tx.subscribe();
    let mut shut_r = inner.shutdown.subscribe();
    // Buffers come back from the writer once written, so a busy connection reuses a few buffers
    // instead of allocating (and page-faulting) a fresh one per chunk.
    let (ret_tx, mut ret_rx) = mpsc::channel::<BytesMut>(8);
    let reader = async move {
        // Start small (many idle connections stay cheap) and grow while reads fill the buffer.
        let mut size = 16 * 1024;
        loop {
            let mut buf = match ret_rx.try_recv() {
                Ok(mut b) if b.capacity() >= size => {
                    b.clear();
                    b
                }
                _ => BytesMut::with_capacity(size),
            };
            tokio::select! {
                r = src.read_buf(&mut buf) => match r {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Msg::Eof).await;
                        return;
                    }
                    Ok(n) => {
                        if n == buf.capacity() && size < MAX_CHUNK {
                            size *= 2;
                        }
                        if tx.send(Msg::Data(buf.freeze(), Instant::now())).await.is_err() {
                            return;
                        }
                    }
                },
                _ = kill_r.changed() => return,
                _ = shut_r.changed() => return,
            }
        }
    };
    let mut kill_w = kill_tx.subscribe();
    let mut shut_w = inner.shutdown.subscribe();
    let writer = async move {
        let mut lanes: Vec<Lane> = Vec::new();
        let mut seen = u64::MAX;
        let mut bytes = 0u64;
        let mut steps: Vec<Step> = Vec::new();
        let mut next: Vec<Step> = Vec::new();
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let end = loop {
            let v = inner.version.load(Ordering::Acquire);
            if v != seen {
                seen = v;
                refresh(&inner, &mut lanes, id, dir);
            }
            // The earliest timer of an active toxic (timeout close, reset_peer).
            let mut deadline: Option<(Instant, usize)> = None;
            for (i, l) in lanes.iter().enumerate() {
                if let (Some(c), true) = (&l.conn, l.entry.gate.in_window())
                    && let Some((t, _)) = c.deadline()
                    && deadline.is_none_or(|(d, _)| t < d)
                {
                    deadline = Some((t, i));
                }
            }
            for st in steps.drain(..) {
                if let Step::Data(b) = st
                    && let Ok(m) = b.try_into_mut()
                {
                    let _ = ret_tx.try_send(m);
                }
            }
            tokio::select! {
                m = rx.recv() => match m {
                    Some(Msg::Data(data, arrived)) => {
                        // Faults added or removed while we waited apply to this chunk already.
                        let v = inner.version.load(Ordering::Acquire);
                        if v != seen {
                            seen = v;
                            refresh(&inner, &mut lanes, id, dir);
                        }
                        steps.push(Step::Data(data));
                        for lane in lanes.iter_mut() {
                            let Lane { entry, conn, rng, touched } = lane;
                            let Some(conn) = conn.as_mut() else { continue };
                            if !entry.gate.in_window() {
                                continue;
                            }
                            next.clear();
                            for s in steps.drain(..) {
                                match s {
                                    Step::Data(d) => {
                                        let n = d.len() as u64;
                                        if conn.data(d, arrived, rng, &mut next) {
                                            mark_parts(entry, touched, n);
                                        }
                                    }
                                    other => next.push(other),
                                }
                            }
                            std::mem::swap(&mut steps, &mut next);
                        }
                    }
                    None if kill_val(&kill_w) != Kill::None => {
                        // The reader stopped because the connection is being killed, not at
                        // the end of the stream: end as the kill says (a reset must not turn
                        // into a FIN because the reader noticed first).
                        break on_kill(&dst, kill_val(&kill_w));
                    }
                    Some(Msg::Eof) | None => {
                        for lane in lanes.iter_mut() {
                            let Some(conn) = lane.conn.as_mut() else { continue };
                            if lane.entry.gate.in_window() && conn.eof(&mut steps) {
                                mark(lane, 0);
                            }
                        }
                        match exec(&mut dst, &steps, &mut bytes, &kill_tx, &mut kill_w).await {
                            Some(e) => break e,
                            None => {
                                let _ = dst.shutdown().await;
                                break End::Eof;
                            }
                        }
                    }
                },
                _ = tokio::time::sleep_until(deadline.map_or(far, |d| d.0).into()), if deadline.is_some() => {
                    let (_, i) = deadline.expect("guarded by the branch condition");
                    let step = lanes[i].conn.as_ref().and_then(|c| c.deadline()).map(|d| d.1);
                    mark(&mut lanes[i], 0);
                    // Fire once: the toxic's timer is spent for this connection.
                    lanes[i].conn = None;
                    if let Some(s) = step {
                        steps.push(s);
                    }
                }
                _ = kill_w.changed() => {
                    break on_kill(&dst, kill_val(&kill_w));
                }
                _ = shut_w.changed() => break End::Shutdown,
            }
            if let Some(e) = exec(&mut dst, &steps, &mut bytes, &kill_tx, &mut kill_w).await {
                break e;
            }
        };
        let touched: Vec<String> = lanes
            .iter()
            .filter(|l| l.touched)
            .map(|l| l.entry.name.clone())
            .collect();
        (bytes, touched, end, dst)
    };
    let ((), (bytes, touched, end, dst)) = tokio::join!(reader, writer);
    if end == End::Reset {
        // Dropping a write half sends a FIN first; forgetting it lets the close (with
        // SO_LINGER 0) happen when the read half goes, which sends the RST we want.
        dst.forget();
    }
    PumpOut {
        bytes,
        touched,
        end,
    }
}

fn on_kill(dst: &OwnedWriteHalf, k: Kill) -> End {
    match k {
        Kill::Reset => {
            let _ = set_reset_on_close(dst.as_ref());
            End::Reset
        }
        _ => End::Closed,
    }
}

/// Run the steps of one chunk; `Some(end)` when the connection must end.
async fn exec(
    dst: &mut OwnedWriteHalf,
    steps: &[Step],
    bytes: &mut u64,
    kill_tx: &watch::Sender<Kill>,
    kill_rx: &mut watch::Receiver<Kill>,
) -> Option<End> {
    for s in steps {
        match s {
            Step::Data(d) => {
                tokio::select! {
                    r = dst.write_all(d) => {
                        if r.is_err() {
                            return Some(End::Error);
                        }
                        *bytes += d.len() as u64;
                    }
                    _ = kill_rx.changed() => return Some(on_kill(dst, kill_val(kill_rx))),
                }
            }
            Step::Until(t) => {
                if *t > Instant::now() {
                    tokio::select! {
                        _ = tokio::time::sleep_until((*t).into()) => {}
                        _ = kill_rx.changed() => return Some(on_kill(dst, kill_val(kill_rx))),
                    }
                }
            }
            Step::Wait(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(*d) => {}
                    _ = kill_rx.changed() => return Some(on_kill(dst, kill_val(kill_rx))),
                }
            }
            Step::Close => {
                let _ = kill_tx.send(Kill::Close);
                let _ = dst.shutdown().await;
                return Some(End::Closed);
            }
            Step::Reset => {
                let _ = kill_tx.send(Kill::Reset);
                let _ = set_reset_on_close(dst.as_ref());
                return Some(End::Reset);
            }
        }
    }
    None
}

fn kill_val(rx: &watch::Receiver<Kill>) -> Kill {
    *rx.borrow()
}
