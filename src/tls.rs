//! The node's TLS: the certificate its listener presents, the CAs client certificates must
//! chain to, how peers are dialled, and the identity a verified client certificate names.
//!
//! TLS wraps the same byte stream as plaintext; nothing in the frames changes. A client
//! certificate's identity is its first DNS name in subjectAltName, else its first URI there;
//! the subject's common name is not read. A node that serves TLS dials its peers over TLS,
//! trusting `tls_ca` (else `tls_client_ca`) and presenting its own certificate as its client
//! certificate; a peer's certificate must name the host of the address it is dialled at.

use std::io;
use std::path::Path;
use std::sync::Arc;

use lintel_client::tls::{certificates, private_key, provider, read_file, roots, TlsDialer};
use lintel_client::transport::{Dialer, Socket};
use lintel_client::{ClientTls, TlsError};
use rustls::pki_types::CertificateDer;
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

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
    acceptor: Option<TlsAcceptor>,
    peers: Option<ClientTls>,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls")
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

impl NodeTls {
    /// Loads the certificate, key and CAs `files` names.
    ///
    /// # Errors
    /// [`TlsSetupError`] naming the file that cannot be read or used.
    pub fn load(files: TlsFiles<'_>) -> Result<Self, TlsSetupError> {
        let chain = certificates(&read_file(files.cert)?, &files.cert.display().to_string())?;
        let key = private_key(&read_file(files.key)?, &files.key.display().to_string())?;
        let client_roots = files.client_ca.map(load_roots).transpose()?;
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
        let server = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(TlsError::Config)?;
        let peer_roots = match files.peer_ca.map(load_roots).transpose()? {
            Some(roots) => roots,
            None => client_roots.unwrap_or_else(RootCertStore::empty),
        };
        let peers = ClientTls::new(peer_roots, Some((chain, key)))?;
        Ok(Self {
            acceptor: Some(TlsAcceptor::from(Arc::new(server))),
            peers: Some(peers),
        })
    }

    /// True when connections speak TLS.
    pub fn is_enabled(&self) -> bool {
        self.acceptor.is_some()
    }

    /// `dialer`, with TLS over its connections when TLS is on.
    pub fn peer_dialer(&self, dialer: Arc<dyn Dialer>) -> Arc<dyn Dialer> {
        match &self.peers {
            Some(tls) => Arc::new(TlsDialer::new(dialer, tls.clone())),
            None => dialer,
        }
    }

    /// Runs the server side of the TLS handshake over `socket`, finishing by `deadline`; without
    /// TLS the socket passes through unchanged.
    ///
    /// # Errors
    /// [`AcceptError`] saying why the connection is not usable.
    pub async fn accept(&self, socket: Socket, deadline: Instant) -> Result<Secured, AcceptError> {
        let Some(acceptor) = &self.acceptor else {
            return Ok(Secured {
                socket,
                identity: None,
            });
        };
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

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    roots(&read_file(path)?, &path.display().to_string())
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
