//! The nodes an SDK connection may use: each `host:port` resolved to every address it names
//! ([`lintel_transport::resolve`]), tried in turn from a rotating start, one round within the
//! handshake timeout.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::connect::{connect, connect_tls, Attempt, ConnectError, Connection, Handshake};
use crate::tls::{host_of, ClientTls};
use lintel_transport::resolve::{ResolveError, Resolver};

/// A deadline for a timeout too long to add to now: as good as never.
const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Most node addresses one client or worker is given.
pub const MAX_NODES: usize = 64;

/// One address to dial, and the host its certificate is checked against.
#[derive(Debug, Clone)]
struct Candidate {
    /// The `host:port` it came from.
    target: String,
    address: SocketAddr,
}

/// The addresses given, and where the next round starts.
#[derive(Debug)]
pub(crate) struct Nodes {
    targets: Vec<String>,
    resolver: Resolver,
    /// Rotates the first candidate of each round, so clients spread over the nodes.
    start: AtomicUsize,
}

impl Nodes {
    /// The nodes at `targets`, each `host:port`, at most [`MAX_NODES`].
    ///
    /// # Errors
    /// [`ConnectError::NoNodes`] when `targets` is empty.
    pub(crate) fn new<I, S>(targets: I) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let targets: Vec<String> = targets
            .into_iter()
            .map(Into::into)
            .filter(|target| !target.trim().is_empty())
            .take(MAX_NODES)
            .collect();
        if targets.is_empty() {
            return Err(ConnectError::NoNodes);
        }
        Ok(Self {
            targets,
            resolver: Resolver::system(),
            start: AtomicUsize::new(fastrand::usize(..MAX_NODES)),
        })
    }

    /// The addresses as given.
    pub(crate) fn targets(&self) -> &[String] {
        &self.targets
    }

    /// Connects to one of the nodes: every address of every target in turn, `avoid` last (or,
    /// with `prefer`, that address first), the whole round within `handshake.timeout`; the
    /// first to welcome us wins.
    ///
    /// # Errors
    /// With one address, its error; with several, [`ConnectError::AllFailed`] naming each
    /// address tried (or not resolved) and its error.
    pub(crate) async fn connect(
        &self,
        handshake: &Handshake,
        tls: Option<&ClientTls>,
        avoid: Option<SocketAddr>,
        prefer: Option<SocketAddr>,
    ) -> Result<(Connection, SocketAddr), ConnectError> {
        let now = Instant::now();
        let deadline = now.checked_add(handshake.timeout).unwrap_or(now + FAR);
        let mut failed = Vec::new();
        let mut candidates = Vec::new();
        for target in &self.targets {
            let resolved = tokio::time::timeout_at(deadline, self.resolver.resolve(target))
                .await
                .unwrap_or_else(|_| {
                    Err(ResolveError::Lookup {
                        target: target.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the lookup outlasted the handshake timeout",
                        ),
                    })
                });
            match resolved {
                Ok(addresses) => {
                    candidates.extend(addresses.into_iter().map(|address| Candidate {
                        target: target.clone(),
                        address,
                    }))
                }
                Err(err) => failed.push(Attempt {
                    address: target.clone(),
                    error: ConnectError::Resolve(err),
                }),
            }
        }
        if !candidates.is_empty() {
            let start = self.start.fetch_add(1, Ordering::Relaxed) % candidates.len();
            candidates.rotate_left(start);
        }
        // The node just left goes last: it is draining or gone, and the others may not be.
        if let Some(avoid) = avoid {
            candidates.sort_by_key(|candidate| candidate.address == avoid);
        }
        // The node that keeps a session goes first: only it can resume it.
        if let Some(prefer) = prefer {
            candidates.sort_by_key(|candidate| candidate.address != prefer);
        }
        let total = failed.len() + candidates.len();
        let mut waiting = candidates.into_iter().peekable();
        let mut dialling = FuturesUnordered::new();
        let attempt = |candidate: Candidate| {
            let handshake = Handshake {
                timeout: deadline.saturating_duration_since(Instant::now()),
                ..handshake.clone()
            };
            async move {
                let result = dial(&candidate, &handshake, tls).await;
                (candidate, result)
            }
        };
        // Staggered: the next address is dialled when the last fails, or after
        // [`STAGGER`] without an answer, so one silent node costs the others nothing.
        loop {
            if dialling.is_empty() {
                match waiting.next() {
                    Some(candidate) => dialling.push(attempt(candidate)),
                    None => break,
                }
            }
            let more = waiting.peek().is_some();
            // Cancel-safe: dropping a dial closes its socket, and a sleep holds nothing.
            tokio::select! {
                Some((candidate, result)) = dialling.next() => match result {
                    Ok(connection) => return Ok((connection, candidate.address)),
                    Err(error) => {
                        failed.push(Attempt { address: named(&candidate), error });
                        if let Some(next) = waiting.next() {
                            dialling.push(attempt(next));
                        }
                    }
                },
                () = tokio::time::sleep(STAGGER), if more => {
                    if let Some(next) = waiting.next() {
                        dialling.push(attempt(next));
                    }
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        // What the deadline left undialled, or unanswered, timed out.
        for candidate in waiting {
            failed.push(Attempt {
                address: named(&candidate),
                error: ConnectError::Timeout(handshake.timeout),
            });
        }
        while let Some((candidate, result)) = dialling.next().await {
            match result {
                Ok(connection) => return Ok((connection, candidate.address)),
                Err(error) => failed.push(Attempt {
                    address: named(&candidate),
                    error,
                }),
            }
        }
        match failed.pop() {
            Some(only) if total == 1 => Err(only.error),
            Some(last) => {
                failed.push(last);
                Err(ConnectError::AllFailed(failed))
            }
            None => Err(ConnectError::NoNodes),
        }
    }
}

/// How long a dial may go unanswered before the next address is dialled beside it.
const STAGGER: Duration = Duration::from_millis(250);

/// A candidate as an error names it: as given, and the address dialled when a name resolved.
fn named(candidate: &Candidate) -> String {
    if candidate.target == candidate.address.to_string() {
        candidate.target.clone()
    } else {
        format!("{} ({})", candidate.target, candidate.address)
    }
}

/// Dials one candidate; with TLS its certificate is checked against the server name, else the
/// host of the address it came from, else the IP address dialled.
async fn dial(
    candidate: &Candidate,
    handshake: &Handshake,
    tls: Option<&ClientTls>,
) -> Result<Connection, ConnectError> {
    match tls {
        None => connect(candidate.address, handshake).await,
        Some(tls) => {
            let host = host_of(&candidate.target);
            connect_tls(candidate.address, Some(host), tls, handshake).await
        }
    }
}
