//! Socket helpers shared with the backend crate.

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Bind a listening socket with SO_REUSEADDR, so that a port closed for a `refuse`/`down`
/// window can be bound again while its old connections are still in TIME_WAIT.
pub fn listen_reuse(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    socket.listen(backlog)?;
    TcpListener::from_std(socket.into())
}

/// Make the next close of this socket send a RST instead of a FIN (SO_LINGER 0).
pub fn set_reset_on_close(stream: &TcpStream) -> io::Result<()> {
    SockRef::from(stream).set_linger(Some(Duration::ZERO))
}

/// [`set_reset_on_close`] through another descriptor of the same socket (a `dup` kept while
/// the stream itself is owned by a server's connection task): the socket resets (RST) when its
/// last descriptor closes.
pub fn set_reset_on_close_fd(fd: &impl std::os::fd::AsFd) -> io::Result<()> {
    SockRef::from(fd).set_linger(Some(Duration::ZERO))
}

/// What a [`refusable_accept_loop`] tells its server, for the server's own log.
#[derive(Debug, Clone, Copy)]
pub enum ListenerEvent<'a> {
    /// The listening socket was closed for this fault (connects are now refused by the kernel).
    Closed(&'a str),
    /// The fault's window ended and the socket listens again.
    Reopened,
    /// `accept` failed (most often EMFILE: the process is at its file-descriptor limit); new
    /// connections wait in the backlog meanwhile. Reported at most once a second.
    AcceptFailed(&'a io::Error),
}

/// The accept loop of a server whose listening socket a fault can close (the backend's
/// `refuse`, the proxy's `down`): while `refusing()` returns a fault in its window the socket
/// stays closed (one hit per closing), and it is bound again (SO_REUSEADDR) when the window
/// ends or the fault is removed. `changed` is notified when faults are added or removed; the
/// loop returns when `shutdown` turns true.
#[allow(clippy::too_many_arguments)]
pub async fn refusable_accept_loop<T: crate::gate::Gated>(
    listener: TcpListener,
    addr: SocketAddr,
    backlog: i32,
    changed: &tokio::sync::Notify,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    refusing: impl Fn() -> Option<std::sync::Arc<T>>,
    mut on_event: impl FnMut(ListenerEvent<'_>),
    mut on_accept: impl FnMut(TcpStream, SocketAddr),
) {
    let mut listener = Some(listener);
    let mut last_reported: Option<std::time::Instant> = None;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if let Some(f) = refusing() {
            if listener.take().is_some() {
                f.gate().hit();
                on_event(ListenerEvent::Closed(f.name()));
            }
            let wake = f
                .gate()
                .window_end()
                .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = shutdown.changed() => return,
            }
            continue;
        }
        let l = match &listener {
            Some(l) => l,
            None => match listen_reuse(addr, backlog) {
                Ok(l) => {
                    on_event(ListenerEvent::Reopened);
                    listener.insert(l)
                }
                Err(_) => {
                    // The port may still be held briefly; try again shortly.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        tokio::select! {
            r = l.accept() => match r {
                Ok((s, peer)) => on_accept(s, peer),
                Err(e) => {
                    if last_reported.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        last_reported = Some(std::time::Instant::now());
                        on_event(ListenerEvent::AcceptFailed(&e));
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
            },
            _ = changed.notified() => {}
            _ = shutdown.changed() => return,
        }
    }
}
