//! Binding the TCP listener and tuning accepted sockets, through socket2.

use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use tokio::net::{TcpListener, TcpStream};

/// Idle time before the kernel starts keepalive probes on an accepted socket.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Binds `addr` with address reuse and the given backlog.
///
/// # Errors
/// The socket, bind or listen error.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    TcpListener::from_std(socket.into())
}

/// Sets TCP_NODELAY and keepalive on an accepted socket.
pub(crate) fn tune(stream: &TcpStream) {
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "cannot set TCP_NODELAY");
    }
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_IDLE / 3);
    if let Err(err) = SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!(error = %err, "cannot set keepalive");
    }
}
