//! Names to addresses: a `host:port` resolved to every address it names, and resolved again
//! and again ([`Watch`]), so a name that stands for several nodes (a Kubernetes headless
//! service) is dialled at each of them as they come and go.
//!
//! The node resolves its `--peer` names here, and the SDKs their node addresses. The lookup is
//! a trait ([`Lookup`]), the system's resolver by default, so a test can script the answers.

use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::dial::{Dialer, Dialing};

/// Most addresses kept for one name; a lookup naming more keeps the lowest, in address order.
pub const MAX_ADDRESSES: usize = 64;

/// The future a [`Lookup`] returns.
pub type Looking<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send + 'a>>;

/// Looks up the addresses a `host:port` names.
pub trait Lookup: Send + Sync {
    /// The addresses `target` (`host:port`) names now.
    ///
    /// # Errors
    /// Whatever the lookup reports: no such name, no answer.
    fn lookup<'a>(&'a self, target: &'a str) -> Looking<'a>;
}

/// The system's resolver, `getaddrinfo` through [`tokio::net::lookup_host`]: `/etc/hosts`, DNS
/// and whatever else `nsswitch.conf` names.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup<'a>(&'a self, target: &'a str) -> Looking<'a> {
        Box::pin(async move { Ok(tokio::net::lookup_host(target).await?.collect()) })
    }
}

/// Why a name gave no addresses.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The text is not `host:port`.
    #[error("{0:?} is not host:port")]
    NotHostPort(String),
    /// The lookup failed.
    #[error("cannot resolve {target}: {source}")]
    Lookup {
        /// The name looked up.
        target: String,
        /// The lookup's error.
        #[source]
        source: io::Error,
    },
    /// The lookup succeeded with no address.
    #[error("{0} resolves to no address")]
    NoAddress(String),
}

/// Resolves `host:port` names through a [`Lookup`]. Cheap to clone.
#[derive(Clone)]
pub struct Resolver {
    lookup: Arc<dyn Lookup>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Self::system()
    }
}

impl Resolver {
    /// Resolves through the system's resolver ([`SystemLookup`]).
    pub fn system() -> Self {
        Self::with_lookup(Arc::new(SystemLookup))
    }

    /// Resolves through `lookup`.
    pub fn with_lookup(lookup: Arc<dyn Lookup>) -> Self {
        Self { lookup }
    }

    /// Every address `target` names, in address order, each once, at most [`MAX_ADDRESSES`];
    /// an `ip:port` is its own address, looked up nowhere.
    ///
    /// # Errors
    /// [`ResolveError::NotHostPort`] for text that is not `host:port`,
    /// [`ResolveError::Lookup`] when the lookup fails, [`ResolveError::NoAddress`] when it
    /// finds nothing.
    pub async fn resolve(&self, target: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        if let Ok(address) = target.parse::<SocketAddr>() {
            return Ok(vec![address]);
        }
        if !is_host_port(target) {
            return Err(ResolveError::NotHostPort(target.to_owned()));
        }
        let found = self
            .lookup
            .lookup(target)
            .await
            .map_err(|source| ResolveError::Lookup {
                target: target.to_owned(),
                source,
            })?;
        let addresses: Vec<SocketAddr> = found
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .take(MAX_ADDRESSES)
            .collect();
        if addresses.is_empty() {
            return Err(ResolveError::NoAddress(target.to_owned()));
        }
        Ok(addresses)
    }

    /// Resolves `target` now and then every `every`; see [`Watch`].
    pub fn watch(&self, target: &str, every: Duration) -> Watch {
        Watch {
            resolver: self.clone(),
            target: target.to_owned(),
            every,
            current: Vec::new(),
            due: None,
        }
    }
}

/// True when `text` is `host:port` with a host and a port number; `[v6]:port` included.
pub fn is_host_port(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok(),
        None => false,
    }
}

/// One name resolved again and again: the addresses it names now, and what changed at each
/// resolution.
#[derive(Debug)]
pub struct Watch {
    resolver: Resolver,
    target: String,
    every: Duration,
    /// In address order.
    current: Vec<SocketAddr>,
    /// When the next resolution is due; `None` before the first.
    due: Option<Instant>,
}

/// What one resolution changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// Addresses named now and not before, in address order.
    pub added: Vec<SocketAddr>,
    /// Addresses named before and not now, in address order.
    pub removed: Vec<SocketAddr>,
}

impl Change {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

impl Watch {
    /// Waits until the next resolution is due (the first at once, then one every interval,
    /// counted from the last one's start), resolves and returns what changed. A failed
    /// resolution changes nothing: the addresses resolved last stand, so a DNS outage does not
    /// take a node's peers away.
    ///
    /// Cancel-safe: dropped before it returns, it changes nothing, and the next call waits
    /// for the same moment.
    ///
    /// # Errors
    /// What [`Resolver::resolve`] reports.
    pub async fn changed(&mut self) -> Result<Change, ResolveError> {
        if let Some(due) = self.due {
            tokio::time::sleep_until(due).await;
        }
        let started = Instant::now();
        let resolved = self.resolver.resolve(&self.target).await;
        self.due = Some(started + self.every);
        let now = resolved?;
        let change = Change {
            added: now
                .iter()
                .filter(|address| self.current.binary_search(address).is_err())
                .copied()
                .collect(),
            removed: self
                .current
                .iter()
                .filter(|address| now.binary_search(address).is_err())
                .copied()
                .collect(),
        };
        self.current = now;
        Ok(change)
    }

    /// The addresses the name resolved to last, in address order; empty before the first
    /// resolution succeeded.
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.current
    }

    /// The name watched.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// A [`Dialer`] for one address a name resolved to: whatever it is asked to dial, it dials
/// `at` through `inner`'s [`Dialer::dial_resolved`], so TLS checks the certificate against
/// `name`.
pub struct DialResolved<'r> {
    inner: &'r dyn Dialer,
    name: &'r str,
    at: SocketAddr,
}

impl<'r> DialResolved<'r> {
    /// Dials `at`, an address `name` resolved to, through `inner`.
    pub fn new(inner: &'r dyn Dialer, name: &'r str, at: SocketAddr) -> Self {
        Self { inner, name, at }
    }
}

impl Dialer for DialResolved<'_> {
    fn dial<'a>(&'a self, _address: &'a str) -> Dialing<'a> {
        self.inner.dial_resolved(self.name, self.at)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// Answers each name with what the test set last; no answer is a failed lookup.
    #[derive(Default)]
    struct Scripted(Mutex<HashMap<String, Vec<SocketAddr>>>);

    impl Scripted {
        fn set(&self, name: &str, addresses: &[SocketAddr]) {
            let mut names = self.0.lock().unwrap();
            names.insert(name.to_owned(), addresses.to_vec());
        }

        fn forget(&self, name: &str) {
            self.0.lock().unwrap().remove(name);
        }
    }

    impl Lookup for Scripted {
        fn lookup<'a>(&'a self, target: &'a str) -> Looking<'a> {
            let answer = self.0.lock().unwrap().get(target).cloned();
            Box::pin(async move {
                answer.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))
            })
        }
    }

    fn at(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 7400))
    }

    #[tokio::test]
    async fn a_name_resolves_to_every_address_in_order_each_once_and_bounded() {
        let script = Arc::new(Scripted::default());
        script.set("peers:7400", &[at(3), at(1), at(2), at(1)]);
        let resolver = Resolver::with_lookup(script.clone());
        assert_eq!(
            resolver.resolve("peers:7400").await.unwrap(),
            [at(1), at(2), at(3)]
        );
        let many: Vec<SocketAddr> = (0..200)
            .map(|port| SocketAddr::from(([198, 18, 0, 1], port)))
            .collect();
        script.set("many:1", &many);
        assert_eq!(
            resolver.resolve("many:1").await.unwrap().len(),
            MAX_ADDRESSES
        );
        script.set("empty:1", &[]);
        assert!(matches!(
            resolver.resolve("empty:1").await,
            Err(ResolveError::NoAddress(_))
        ));
        assert!(matches!(
            resolver.resolve("nowhere:1").await,
            Err(ResolveError::Lookup { .. })
        ));
        for bad in ["peers", "peers:", ":7400", "peers:port"] {
            assert!(
                matches!(
                    resolver.resolve(bad).await,
                    Err(ResolveError::NotHostPort(_))
                ),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn an_address_is_its_own_answer() {
        let resolver = Resolver::with_lookup(Arc::new(Scripted::default()));
        assert_eq!(resolver.resolve("198.18.0.1:7400").await.unwrap(), [at(1)]);
        let v6: SocketAddr = "[::1]:7400".parse().unwrap();
        assert_eq!(resolver.resolve("[::1]:7400").await.unwrap(), [v6]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_tells_addresses_appearing_and_disappearing_once_each_interval() {
        let script = Arc::new(Scripted::default());
        script.set("peers:7400", &[at(1), at(2)]);
        let every = Duration::from_secs(5);
        let mut watch = Resolver::with_lookup(script.clone()).watch("peers:7400", every);
        let started = Instant::now();

        let first = watch.changed().await.unwrap();
        assert_eq!(first.added, [at(1), at(2)]);
        assert!(first.removed.is_empty());
        assert_eq!(started.elapsed(), Duration::ZERO, "the first at once");

        script.set("peers:7400", &[at(2), at(3)]);
        let second = watch.changed().await.unwrap();
        assert_eq!(started.elapsed(), every, "then once an interval");
        assert_eq!((second.added, second.removed), (vec![at(3)], vec![at(1)]));
        assert_eq!(watch.addresses(), [at(2), at(3)]);

        assert!(watch.changed().await.unwrap().is_empty(), "nothing changed");

        // A failed lookup keeps what was resolved last; the next success is compared with it.
        script.forget("peers:7400");
        assert!(watch.changed().await.is_err());
        assert_eq!(watch.addresses(), [at(2), at(3)]);
        script.set("peers:7400", &[at(3)]);
        let after = watch.changed().await.unwrap();
        assert_eq!((after.added, after.removed), (vec![], vec![at(2)]));
        assert_eq!(started.elapsed(), every * 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_dropped_while_waiting_waits_for_the_same_moment_again() {
        let script = Arc::new(Scripted::default());
        script.set("peers:7400", &[at(1)]);
        let every = Duration::from_secs(5);
        let mut watch = Resolver::with_lookup(script.clone()).watch("peers:7400", every);
        let started = Instant::now();
        watch.changed().await.unwrap();
        let cut = tokio::time::timeout(Duration::from_secs(2), watch.changed()).await;
        assert!(cut.is_err(), "still waiting");
        script.set("peers:7400", &[at(2)]);
        let change = watch.changed().await.unwrap();
        assert_eq!(started.elapsed(), every);
        assert_eq!((change.added, change.removed), (vec![at(2)], vec![at(1)]));
    }
}
