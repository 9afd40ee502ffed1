//! The node's TLS: the certificate its listener presents, the CAs client certificates must
//! chain to, how peers are dialled, and the identity a verified client certificate names.
//!
//! TLS wraps the same byte stream as plaintext; nothing in the frames changes. A client
//! certificate's identity is its first DNS name in subjectAltName, else its first URI there;
//! the subject's common name is not read. A node that serves TLS dials its peers over TLS,
//! trusting `tls_ca` (else `tls_client_ca`) and presenting its own certificate as its client
//! certificate; a peer's certificate must name the host of the address it is dialled at.
//!
//! The files rotate: [`NodeTls::reload`] reads them again and, when they changed and load,
//! gives the listener and the peer dialler the new certificates for every later handshake;
//! connections already open keep theirs, and files that do not load leave the old in use. The
//! certificates in use sit behind std locks taken only to swap or copy an `Arc`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lintel_client::tls::{
    certificates, identity_error, private_key, provider, read_file, roots, TlsDialer,
};
use lintel_client::{ClientTls, TlsError};
use lintel_transport::{Dialer, Socket};
use rustls::pki_types::CertificateDer;
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use serde::Serialize;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use x509_cert::der::Decode;

use crate::epoch::Epoch;

/// Longest client-certificate identity taken; a longer one names no grant.
const MAX_IDENTITY_LEN: usize = 1024;

/// Why the node's TLS files could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error(transparent)]
    Load(#[from] TlsError),
    #[error("unusable client CA certificates: {0}")]
    ClientCa(#[source] VerifierBuilderError),
}

/// Why an accepted connection did not become a TLS connection.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The client's bytes were no TLS handshake, or its certificate was refused.
    #[error("TLS handshake failed: {0}")]
    Handshake(#[source] io::Error),
    /// The handshake did not finish by the handshake deadline.
    #[error("no TLS handshake within the handshake timeout")]
    Timeout,
    /// The connection is not TCP (a simulated network); TLS is not offered there.
    #[error("TLS runs over TCP connections only")]
    NotTcp,
}

/// The files TLS is set up from, as the config names them.
#[derive(Debug, Clone, Copy)]
pub struct TlsFiles<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
    pub client_ca: Option<&'a Path>,
    pub peer_ca: Option<&'a Path>,
}

/// A connection past its TLS handshake, and who its client certificate says it is.
#[derive(Debug)]
pub struct Secured {
    pub socket: Socket,
    pub identity: Option<String>,
}

/// TLS as the node's config sets it up; off by default.
#[derive(Default)]
pub struct NodeTls {
    live: Option<Live>,
}

/// TLS that is on: the files, the certificates read from them, and how reloading went.
struct Live {
    files: OwnedFiles,
    server: RwLock<Arc<ServerConfig>>,
    /// Shared with the peer dialler: replacing its certificates here reaches the next dial.
    peers: ClientTls,
    rotation: Mutex<Rotation>,
    /// Touched after every reload attempt.
    changes: Epoch,
}

/// The paths of [`TlsFiles`], kept to read them again.
#[derive(Debug, Clone)]
struct OwnedFiles {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    peer_ca: Option<PathBuf>,
}

/// The bytes of the TLS files, in [`OwnedFiles`] order; two readings compare whole.
type Contents = Vec<Option<Vec<u8>>>;

/// How reloading the TLS files went, as `/status` and `/metrics` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rotation {
    /// Reloads that put new certificates in use.
    pub reloads: u64,
    /// Reloads of changed files that did not load, the old certificates kept.
    pub failures: u64,
    /// When the certificate served now expires, in seconds since the Unix epoch.
    pub not_after_unix_s: Option<u64>,
    /// When the certificates in use were read, in milliseconds since the Unix epoch.
    pub loaded_unix_ms: u64,
    /// Why the last failed reload failed, until a reload succeeds.
    pub last_error: Option<String>,
    /// The files' bytes last read, applied or not: the same bytes are not tried twice.
    #[serde(skip)]
    seen: Contents,
}

/// What a reload did.
#[derive(Debug)]
pub enum Reload {
    /// TLS is off: there is nothing to reload.
    Off,
    /// The files hold what was read last time.
    Unchanged,
    /// The new certificates are in use for every later handshake.
    Reloaded,
    /// The files changed but do not load; the certificates in use stay.
    Failed(TlsSetupError),
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls")
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

/// The certificates made from one reading of the files.
struct Built {
    server: Arc<ServerConfig>,
    peers: ClientTls,
    not_after_unix_s: Option<u64>,
}

impl NodeTls {
    /// Loads the certificate, key and CAs `files` names.
    ///
    /// # Errors
    /// [`TlsSetupError`] naming the file that cannot be read or used.
    pub fn load(files: TlsFiles<'_>) -> Result<Self, TlsSetupError> {
        let files = OwnedFiles {
            cert: files.cert.to_owned(),
            key: files.key.to_owned(),
            client_ca: files.client_ca.map(Path::to_owned),
            peer_ca: files.peer_ca.map(Path::to_owned),
        };
        let contents = files.read()?;
        let built = files.build(&contents)?;
        Ok(Self {
            live: Some(Live {
                files,
                server: RwLock::new(built.server),
                peers: built.peers,
                rotation: Mutex::new(Rotation {
                    not_after_unix_s: built.not_after_unix_s,
                    loaded_unix_ms: unix_ms(),
                    seen: contents,
                    ..Rotation::default()
                }),
                changes: Epoch::default(),
            }),
        })
    }

    /// Reads the files again and, when they changed and load, puts them in use for every later
    /// handshake, the listener's and the peer dialler's; logs what it did. With `forced`, files
    /// that failed before are tried again, and an unchanged reading is logged too.
    pub fn reload(&self, forced: bool) -> Reload {
        let Some(live) = &self.live else {
            return Reload::Off;
        };
        let reload = live.reload(forced);
        match &reload {
            Reload::Reloaded => {
                let rotation = live.rotation();
                tracing::info!(
                    cert = %live.files.cert.display(),
                    not_after_unix_s = rotation.not_after_unix_s,
                    "TLS files reloaded: new connections get the new certificates"
                );
            }
            Reload::Failed(err) => tracing::warn!(
                error = %err,
                "TLS files changed but do not load; the certificates in use stay"
            ),
            Reload::Unchanged if forced => tracing::info!("TLS files unchanged; nothing to reload"),
            Reload::Unchanged | Reload::Off => {}
        }
        live.changes.touch();
        reload
    }

    /// Reads the files every `every` until `closing` fires, reloading when they changed.
    pub async fn watch(&self, every: Duration, closing: CancellationToken) {
        if self.live.is_none() {
            return;
        }
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                _ = ticks.tick() => {
                    self.reload(false);
                }
            }
        }
    }

    /// How reloading went so far; `None` when TLS is off.
    pub fn rotation(&self) -> Option<Rotation> {
        self.live.as_ref().map(Live::rotation)
    }

    /// Touched after every reload attempt, for whoever waits on one.
    pub fn changes(&self) -> Option<&Epoch> {
        self.live.as_ref().map(|live| &live.changes)
    }

    /// True when connections speak TLS.
    pub fn is_enabled(&self) -> bool {
        self.live.is_some()
    }

    /// `dialer`, with TLS over its connections when TLS is on.
    pub fn peer_dialer(&self, dialer: Arc<dyn Dialer>) -> Arc<dyn Dialer> {
        match &self.live {
            Some(live) => Arc::new(TlsDialer::new(dialer, live.peers.clone())),
            None => dialer,
        }
    }

    /// Runs the server side of the TLS handshake over `socket`, finishing by `deadline`; without
    /// TLS the socket passes through unchanged.
    ///
    /// # Errors
    /// [`AcceptError`] saying why the connection is not usable.
    pub async fn accept(&self, socket: Socket, deadline: Instant) -> Result<Secured, AcceptError> {
        let Some(live) = &self.live else {
            return Ok(Secured {
                socket,
                identity: None,
            });
        };
        let acceptor = TlsAcceptor::from(live.server());
        let stream = socket.into_tcp().map_err(|_| AcceptError::NotTcp)?;
        let local_addr = stream.local_addr().ok();
        let tls = tokio::time::timeout_at(deadline, acceptor.accept(stream))
            .await
            .map_err(|_| AcceptError::Timeout)?
            .map_err(AcceptError::Handshake)?;
        let identity = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(<[_]>::first)
            .and_then(identity_of);
        let (read, write) = tokio::io::split(tls);
        Ok(Secured {
            socket: Socket::from_io(read, write, local_addr),
            identity,
        })
    }
}

impl Live {
    fn server(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.server.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn rotation(&self) -> Rotation {
        self.rotation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn reload(&self, forced: bool) -> Reload {
        let contents = self.files.read();
        let mut rotation = self.rotation.lock().unwrap_or_else(PoisonError::into_inner);
        // Files read as before, or unreadable as before, are tried again only when forced;
        // files read as before and in use are never tried again.
        let tried = match &contents {
            Ok(contents) => *contents == rotation.seen,
            Err(err) => rotation.last_error.as_deref() == Some(&err.to_string()),
        };
        if tried && (!forced || rotation.last_error.is_none()) {
            return Reload::Unchanged;
        }
        let built = contents.and_then(|contents| {
            rotation.seen.clone_from(&contents);
            self.files.build(&contents)
        });
        match built {
            Ok(built) => {
                *self.server.write().unwrap_or_else(PoisonError::into_inner) = built.server;
                self.peers.replace(&built.peers);
                rotation.reloads += 1;
                rotation.not_after_unix_s = built.not_after_unix_s;
                rotation.loaded_unix_ms = unix_ms();
                rotation.last_error = None;
                Reload::Reloaded
            }
            Err(err) => {
                rotation.failures += 1;
                rotation.last_error = Some(err.to_string());
                Reload::Failed(err)
            }
        }
    }
}

impl OwnedFiles {
    fn paths(&self) -> [Option<&Path>; 4] {
        [
            Some(self.cert.as_path()),
            Some(self.key.as_path()),
            self.client_ca.as_deref(),
            self.peer_ca.as_deref(),
        ]
    }

    fn read(&self) -> Result<Contents, TlsSetupError> {
        let mut contents = Vec::with_capacity(4);
        for path in self.paths() {
            contents.push(path.map(read_file).transpose()?);
        }
        Ok(contents)
    }

    /// The listener's and the peer dialler's certificates from `contents`.
    fn build(&self, contents: &Contents) -> Result<Built, TlsSetupError> {
        let named = |at: usize| -> Option<(&[u8], String)> {
            let bytes = contents.get(at)?.as_deref()?;
            let path = self.paths().get(at).copied().flatten()?;
            Some((bytes, path.display().to_string()))
        };
        let (cert, cert_name) =
            named(0).ok_or_else(|| TlsError::NoCertificate("tls_cert".into()))?;
        let (key, key_name) = named(1).ok_or_else(|| TlsError::NoCertificate("tls_key".into()))?;
        let chain = certificates(cert, &cert_name)?;
        let key = private_key(key, &key_name)?;
        let client_roots = named(2).map(|(pem, name)| roots(pem, &name)).transpose()?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match &client_roots {
            None => builder.with_no_client_auth(),
            Some(roots) => builder.with_client_cert_verifier(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots.clone()), provider())
                    .build()
                    .map_err(TlsSetupError::ClientCa)?,
            ),
        };
        let not_after_unix_s = chain.first().and_then(not_after_unix_s);
        let server = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|err| identity_error(err, &cert_name, &key_name))?;
        let peer_roots = match named(3).map(|(pem, name)| roots(pem, &name)).transpose()? {
            Some(roots) => roots,
            None => client_roots.unwrap_or_else(RootCertStore::empty),
        };
        Ok(Built {
            server: Arc::new(server),
            peers: ClientTls::new(peer_roots, Some((chain, key)))?,
            not_after_unix_s,
        })
    }
}

/// When `cert` expires, in seconds since the Unix epoch.
fn not_after_unix_s(cert: &CertificateDer<'_>) -> Option<u64> {
    let cert = x509_cert::Certificate::from_der(cert).ok()?;
    Some(
        cert.tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs(),
    )
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The identity a verified certificate names: its first DNS name, else its first URI.
pub fn identity_of(cert: &CertificateDer<'_>) -> Option<String> {
    let cert = webpki::EndEntityCert::try_from(cert).ok()?;
    let name = cert
        .valid_dns_names()
        .next()
        .or_else(|| cert.valid_uri_names().next())?;
    (name.len() <= MAX_IDENTITY_LEN).then(|| name.to_owned())
}
