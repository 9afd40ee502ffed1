//! A look at a TCP connection's first bytes before the handshake: a client that began TLS on a
//! plaintext listener, or plaintext on a TLS one, is logged once; an HTTP request is answered
//! with a plain-text hint and closed, instead of being read as an oversize frame.

use std::time::Duration;

use lintel_transport::Socket;
use lintel_wire::Foreign;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::shared::Shared;

/// How long the hint's reader may keep the connection open to read out the request, so that
/// closing on unread bytes does not reset the answer away.
const HINT_GRACE: Duration = Duration::from_secs(1);

/// Most bytes of an HTTP request read out before closing.
const HINT_READ_LIMIT: usize = 64 * 1024;

/// The answer to an HTTP request on the frame listener.
const HTTP_HINT: &str = "This is a lintel node's listener: it speaks lintel frames \
(wire/PROTOCOL.md), not HTTP.\nConnect with the lintel command or an SDK. The admin endpoints \
(/metrics, /health, /ready, /status) are on the node's admin listener: lintel serve \
--admin-listen ADDR.\n";

/// What the first bytes said.
pub(super) enum Screened {
    /// Go on with the handshake over this socket from `peer` (its address, or `unknown`);
    /// `explained` when its mismatch was logged.
    Continue {
        socket: Socket,
        explained: bool,
        peer: String,
    },
    /// It was an HTTP request, answered and closed.
    Answered,
}

/// Peeks at the first bytes of `socket` by `deadline` and deals with another protocol's.
pub(super) async fn screen(
    shared: &Shared,
    socket: Socket,
    pid: u64,
    deadline: Instant,
) -> Screened {
    let stream = match socket.into_tcp() {
        Ok(stream) => stream,
        // Not TCP (a simulated network): nothing to peek at.
        Err(socket) => {
            return Screened::Continue {
                socket,
                explained: false,
                peer: "unknown".to_owned(),
            }
        }
    };
    let mut start = [0u8; 4];
    let peeked = tokio::select! {
        peeked = tokio::time::timeout_at(deadline, stream.peek(&mut start)) => peeked,
        () = shared.closing.cancelled() => Ok(Ok(0)),
    };
    let seen = match peeked {
        Ok(Ok(len)) => start.get(..len).and_then(Foreign::recognise),
        // A timeout or an error is the handshake's to report.
        _ => None,
    };
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "unknown".to_owned(), |addr| addr.to_string());
    let tls = shared.tls.is_enabled();
    let explained = match seen {
        Some(Foreign::HttpRequest) => {
            tracing::info!(
                pid,
                %peer,
                "an HTTP request on the lintel listener, answered with a hint: the admin \
                 endpoints are on admin_listen"
            );
            answer_http(stream).await;
            return Screened::Answered;
        }
        Some(Foreign::Tls) if !tls => {
            tracing::info!(
                pid,
                %peer,
                "a client began TLS on this plaintext listener: drop its TLS settings \
                 (--tls-ca), or give the node tls_cert and tls_key"
            );
            true
        }
        None if tls && start.first() == Some(&0) => {
            tracing::info!(
                pid,
                %peer,
                "a client sent plaintext frames to this TLS listener: it needs --tls-ca (the CA \
                 of the node's certificate)"
            );
            true
        }
        _ => false,
    };
    Screened::Continue {
        socket: Socket::from(stream),
        explained,
        peer,
    }
}

/// Answers `400 Bad Request` with [`HTTP_HINT`], then reads out the request for a bounded time
/// before closing.
async fn answer_http(mut stream: TcpStream) {
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{HTTP_HINT}",
        HTTP_HINT.len()
    );
    let answered = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        let mut read = 0;
        while read < HINT_READ_LIMIT {
            match stream.read(&mut sink).await? {
                0 => break,
                len => read += len,
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(HINT_GRACE, answered).await;
}
