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
