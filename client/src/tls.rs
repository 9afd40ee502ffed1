//! TLS for connections to a node: the CAs to trust, the name the node's certificate must carry,
//! and an optional client certificate; rustls on the ring provider.
//!
//! TLS wraps the same byte stream the plaintext protocol runs over; frames do not change. A
//! connection is checked against [`ClientTls::with_server_name`]'s name when set, else the host
//! of the address dialled when the SDK has it as text, else the IP address dialled.
//!
//! A [`ClientTls`] made by [`ClientTls::from_files`] reads its files again before each
//! handshake, so a reconnecting worker or a new producer presents and trusts what the files
//! hold now; a file that no longer loads is logged and the certificates read before are kept.
//! The certificates live behind a std mutex shared by every clone, locked only to swap or copy
//! an `Arc`, never across an `.await`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use lintel_transport::{Dialer, Dialing, Socket};

/// Why TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// PEM input that is not what it should hold.
    #[error("invalid PEM in {what}: {source}")]
    Pem {
        /// Which input: a file, or the text given.
        what: String,
        /// What is wrong with it.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// PEM input with no certificate in it.
    #[error("no certificate in {0}")]
    NoCertificate(String),
    /// PEM input with no private key in it.
    #[error("no private key (PKCS#8, PKCS#1 or SEC1 PEM) in {0}")]
    NoKey(String),
    /// The private key is not the key of the certificate it goes with.
    #[error("the private key in {key} does not match the certificate in {cert}")]
    KeyMismatch {
        /// Where the certificate came from.
        cert: String,
        /// Where the key came from.
        key: String,
    },
    /// rustls refused the certificates or the key (a CA certificate it cannot parse, a key
    /// type it does not support).
    #[error("unusable TLS certificates or key: {0}")]
    Config(#[source] rustls::Error),
    /// A server name that is neither a DNS name nor an IP address.
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
}

/// The crypto provider every TLS config here uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in the PEM text `pem`; `what` names it in errors.
///
/// # Errors
/// [`TlsError::Pem`] for malformed PEM, [`TlsError::NoCertificate`] when it holds none.
pub fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            what: what.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(what.to_owned()));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM text `pem`.
///
/// # Errors
/// [`TlsError::NoKey`] when it holds none, [`TlsError::Pem`] for malformed PEM.
pub fn private_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey(what.to_owned()),
        source => TlsError::Pem {
            what: what.to_owned(),
            source,
        },
    })
}

/// `err`, from pairing the certificate named `cert` with the key named `key`, naming both
/// when the key is not the certificate's.
pub fn identity_error(err: rustls::Error, cert: &str, key: &str) -> TlsError {
    match err {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            TlsError::KeyMismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
            }
        }
        err => TlsError::Config(err),
    }
}

/// The bytes of the file at `path`.
///
/// # Errors
/// [`TlsError::Read`] naming the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// A trust store holding every certificate in `pem`.
///
/// # Errors
/// As [`certificates`], and [`TlsError::Config`] for a certificate rustls cannot use as a CA.
pub fn roots(pem: &[u8], what: &str) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certificates(pem, what)? {
        store.add(cert).map_err(TlsError::Config)?;
    }
    Ok(store)
}

/// A certificate chain and its private key, as PEM text.
#[derive(Debug, Clone, Copy)]
pub struct PemIdentity<'a> {
    /// The certificate chain, leaf first.
    pub chain: &'a [u8],
    /// The private key of the leaf.
    pub key: &'a [u8],
}

/// How a connection to a node speaks TLS. Cheap to clone; clones share the certificates, so
/// [`ClientTls::replace`] on one is seen by every clone's next handshake.
#[derive(Clone)]
pub struct ClientTls {
    current: Arc<Mutex<Current>>,
    /// The files to read again before each handshake; none when made from PEM text.
    files: Option<Arc<ClientFiles>>,
    server_name: Option<ServerName<'static>>,
}

/// The certificates in use, and the bytes of the files they were last read from.
struct Current {
    config: Arc<ClientConfig>,
    read: Vec<Vec<u8>>,
}

/// The CA file and the optional certificate and key files of [`ClientTls::from_files`].
struct ClientFiles {
    ca: PathBuf,
    identity: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .field("from_files", &self.files.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts the CA certificates in the PEM text `ca`, and presents `identity` to nodes that
    /// ask for a client certificate.
    ///
    /// # Errors
    /// [`TlsError`] for PEM without certificates or a key, or ones rustls refuses.
    pub fn from_pem(ca: &[u8], identity: Option<PemIdentity<'_>>) -> Result<Self, TlsError> {
        Ok(Self::with_config(
            config_from_pem(ca, identity, &Names::PEM)?,
            None,
        ))
    }

    /// Trusts `roots`, and presents `identity` (a certificate chain and its key) to nodes that
    /// ask for a client certificate.
    ///
    /// # Errors
    /// [`TlsError::Config`] when rustls refuses the certificate or key.
    pub fn new(
        roots: RootCertStore,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Self, TlsError> {
        Ok(Self::with_config(
            client_config(roots, identity, &Names::PEM)?,
            None,
        ))
    }

    /// As [`ClientTls::from_pem`], reading the CA file and the optional certificate and key
    /// files; they are read again before each handshake (see the module docs).
    ///
    /// # Errors
    /// [`TlsError::Read`] for a file that cannot be read, else as [`ClientTls::from_pem`].
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self, TlsError> {
        let files = ClientFiles {
            ca: ca.to_owned(),
            identity: identity.map(|(chain, key)| (chain.to_owned(), key.to_owned())),
        };
        let (read, config) = files.load()?;
        let tls = Self::with_config(config, Some(Arc::new(files)));
        tls.lock().read = read;
        Ok(tls)
    }

    fn with_config(config: ClientConfig, files: Option<Arc<ClientFiles>>) -> Self {
        Self {
            current: Arc::new(Mutex::new(Current {
                config: Arc::new(config),
                read: Vec::new(),
            })),
            files,
            server_name: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From the next handshake on, this and every clone of it trust and present what `fresh`
    /// does; connections already open are untouched.
    pub fn replace(&self, fresh: &ClientTls) {
        let config = Arc::clone(&fresh.lock().config);
        self.lock().config = config;
    }

    /// The certificates to shake hands with now: for one made from files, what they hold now
    /// when it loads, else what was read before.
    fn config(&self) -> Arc<ClientConfig> {
        if let Some(files) = &self.files {
            match files.read() {
                Ok(read) if read != self.lock().read => match files.build(&read) {
                    Ok(config) => {
                        let mut current = self.lock();
                        current.config = Arc::new(config);
                        current.read = read;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "TLS files changed but do not load; keeping the certificates read before");
                        self.lock().read = read;
                    }
                },
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read the TLS files again; keeping the certificates read before");
                }
            }
        }
        Arc::clone(&self.lock().config)
    }

    /// Checks the node's certificate against `name` (a DNS name or an IP address) whatever
    /// address is dialled.
    ///
    /// # Errors
    /// [`TlsError::ServerName`] for a name that is neither.
    pub fn with_server_name(mut self, name: &str) -> Result<Self, TlsError> {
        let parsed = ServerName::try_from(name.to_owned())
            .map_err(|_| TlsError::ServerName(name.to_owned()))?;
        self.server_name = Some(parsed);
        Ok(self)
    }

    /// Runs the TLS handshake over `stream`, checking the node's certificate against the
    /// server name, else `host`, else the IP address `stream` is connected to.
    ///
    /// # Errors
    /// The handshake's error; a refused certificate is an [`io::Error`] whose inner error is
    /// the [`rustls::Error`] (see [`rustls_error`]).
    pub async fn secure(&self, stream: TcpStream, host: Option<&str>) -> io::Result<Socket> {
        let name = match (&self.server_name, host.and_then(host_name)) {
            (Some(name), _) => name.clone(),
            (None, Some(name)) => name,
            (None, None) => ServerName::IpAddress(stream.peer_addr()?.ip().into()),
        };
        let local_addr = stream.local_addr().ok();
        let tls = TlsConnector::from(self.config())
            .connect(name, stream)
            .await?;
        let (read, write) = tokio::io::split(tls);
        Ok(Socket::from_io(read, write, local_addr))
    }
}

/// What errors call the CA, the certificate and the key: their files, or their PEM text.
struct Names {
    ca: String,
    cert: String,
    key: String,
}

impl Names {
    const PEM: Names = Names {
        ca: String::new(),
        cert: String::new(),
        key: String::new(),
    };

    fn ca(&self) -> &str {
        Self::or(&self.ca, "the CA certificates")
    }

    fn cert(&self) -> &str {
        Self::or(&self.cert, "the client certificate")
    }

    fn key(&self) -> &str {
        Self::or(&self.key, "the client key")
    }

    fn or<'a>(named: &'a str, otherwise: &'a str) -> &'a str {
        if named.is_empty() {
            otherwise
        } else {
            named
        }
    }
}

/// A client config trusting the CA certificates in `ca` and presenting `identity`.
fn config_from_pem(
    ca: &[u8],
    identity: Option<PemIdentity<'_>>,
    names: &Names,
) -> Result<ClientConfig, TlsError> {
    let roots = roots(ca, names.ca())?;
    let identity = match identity {
        None => None,
        Some(identity) => Some((
            certificates(identity.chain, names.cert())?,
            private_key(identity.key, names.key())?,
        )),
    };
    client_config(roots, identity, names)
}

fn client_config(
    roots: RootCertStore,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    names: &Names,
) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|err| identity_error(err, names.cert(), names.key())),
    }
}

impl ClientFiles {
    /// The bytes of each file: the CA's, then the certificate's and the key's.
    fn read(&self) -> Result<Vec<Vec<u8>>, TlsError> {
        let mut read = vec![read_file(&self.ca)?];
        if let Some((chain, key)) = &self.identity {
            read.push(read_file(chain)?);
            read.push(read_file(key)?);
        }
        Ok(read)
    }

    /// The config the bytes of [`ClientFiles::read`] make.
    fn build(&self, read: &[Vec<u8>]) -> Result<ClientConfig, TlsError> {
        let (cert, key) = self
            .identity
            .as_ref()
            .map_or_else(Default::default, |(c, k)| {
                (c.display().to_string(), k.display().to_string())
            });
        let names = Names {
            ca: self.ca.display().to_string(),
            cert,
            key,
        };
        match read {
            [ca, chain, key] => config_from_pem(ca, Some(PemIdentity { chain, key }), &names),
            [ca, ..] => config_from_pem(ca, None, &names),
            [] => Err(TlsError::NoCertificate(names.ca)),
        }
    }

    fn load(&self) -> Result<(Vec<Vec<u8>>, ClientConfig), TlsError> {
        let read = self.read()?;
        let config = self.build(&read)?;
        Ok((read, config))
    }
}

/// `host` as a server name: an IP address as one, else a DNS name; `None` when it is neither.
fn host_name(host: &str) -> Option<ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(bare.to_owned()).ok()
}

/// The host of a `host:port` address, brackets of an IPv6 literal kept.
pub fn host_of(address: &str) -> &str {
    address
        .rsplit_once(':')
        .map_or(address, |(host, _port)| host)
}

/// The TLS error inside an I/O error from a TLS stream, if that is what it is.
pub fn rustls_error(err: &io::Error) -> Option<&rustls::Error> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// Dials through another [`Dialer`] and runs TLS over the TCP connection it opens, checking
/// each node's certificate against the host of the address dialled (of the name resolved, for
/// [`Dialer::dial_resolved`]).
pub struct TlsDialer {
    inner: Arc<dyn Dialer>,
    tls: ClientTls,
}

impl TlsDialer {
    /// TLS over the connections `inner` opens, which must be TCP.
    pub fn new(inner: Arc<dyn Dialer>, tls: ClientTls) -> Self {
        Self { inner, tls }
    }
}

impl TlsDialer {
    /// TLS over `socket`, which must be TCP, checking the certificate against `host`.
    async fn secure_tcp(&self, socket: Socket, host: &str) -> io::Result<Socket> {
        let stream = socket.into_tcp().map_err(|_| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "TLS runs over TCP connections only",
            )
        })?;
        self.tls.secure(stream, Some(host)).await
    }
}

impl Dialer for TlsDialer {
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let socket = self.inner.dial(address).await?;
            self.secure_tcp(socket, host_of(address)).await
        })
    }

    /// Checks the certificate against `name`'s host, not the address dialled.
    fn dial_resolved<'a>(&'a self, name: &'a str, at: SocketAddr) -> Dialing<'a> {
        Box::pin(async move {
            let socket = self.inner.dial_resolved(name, at).await?;
            self.secure_tcp(socket, host_of(name)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_addresses() {
        assert_eq!(host_of("node.example:7400"), "node.example");
        assert_eq!(host_of("127.0.0.1:7400"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7400"), "[::1]");
        assert!(matches!(host_name("[::1]"), Some(ServerName::IpAddress(_))));
        assert!(matches!(
            host_name("node.example"),
            Some(ServerName::DnsName(_))
        ));
        assert!(host_name("not a name").is_none());
    }

    #[test]
    fn pem_without_certificates_is_refused() {
        assert!(matches!(
            ClientTls::from_pem(b"nothing here", None),
            Err(TlsError::NoCertificate(_))
        ));
    }
}
