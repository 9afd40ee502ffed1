//! How a connection is dialled: TCP with `TCP_NODELAY` by default, or whatever a
//! [`Dialer`] returns, so a node or a test can run its links over another network.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::net::TcpStream;

use super::socket::Socket;

/// The future a [`Dialer`] returns.
pub type Dialing<'a> = Pin<Box<dyn Future<Output = io::Result<Socket>> + Send + 'a>>;

/// Opens connections to addresses given as `host:port`.
pub trait Dialer: Send + Sync {
    /// Connects to `address`.
    ///
    /// # Errors
    /// Whatever stopped the connection: unresolvable, refused, unreachable.
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a>;

    /// Connects to `at`, one of the addresses `name` (`host:port`) resolved to; a dialer that
    /// checks whom it reached (TLS) checks `name`. By default, dials `at`.
    ///
    /// # Errors
    /// As [`Dialer::dial`].
    fn dial_resolved<'a>(&'a self, name: &'a str, at: SocketAddr) -> Dialing<'a> {
        let _ = name;
        Box::pin(async move { self.dial(&at.to_string()).await })
    }
}

/// Dials over TCP and sets `TCP_NODELAY`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let stream = TcpStream::connect(address).await?;
            stream.set_nodelay(true)?;
            Ok(Socket::from(stream))
        })
    }
}
