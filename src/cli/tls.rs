//! The TLS flags every client command shares, and the warning `serve` gives when it listens
//! beyond loopback in plaintext.

use std::path::PathBuf;

use lintel_client::tls::host_of;
use lintel_client::{ClientTls, TlsError};

use lintel::config::NodeConfig;

/// How a client command speaks TLS to the node; plaintext without `--tls-ca`.
#[derive(Debug, Default, clap::Args)]
pub(super) struct ClientTlsArgs {
    /// PEM file of the CA certificates to trust; with it the connection speaks TLS.
    #[arg(long, env = "LINTEL_TLS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// Name the node's certificate must carry [default: the host of --connect].
    #[arg(long, env = "LINTEL_TLS_SERVER_NAME", requires = "tls_ca")]
    tls_server_name: Option<String>,
    /// PEM client certificate chain, for nodes that require one (with --tls-key).
    #[arg(long, env = "LINTEL_TLS_CERT", value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(
        long,
        env = "LINTEL_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
}

impl ClientTlsArgs {
    /// The TLS settings for connecting to `connect`, or `None` for plaintext.
    ///
    /// # Errors
    /// [`TlsError`] naming the file or server name that cannot be used.
    pub(super) fn load(&self, connect: &str) -> Result<Option<ClientTls>, TlsError> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = self.tls_cert.as_deref().zip(self.tls_key.as_deref());
        let tls = ClientTls::from_files(ca, identity)?;
        let name = self
            .tls_server_name
            .as_deref()
            .unwrap_or_else(|| host_of(connect));
        tls.with_server_name(name.trim_start_matches('[').trim_end_matches(']'))
            .map(Some)
    }
}

/// Says loudly, on stderr, that a node listening beyond loopback without TLS is readable and
/// forgeable by anyone on the way.
pub(super) fn warn_if_exposed(config: &NodeConfig) {
    if config.listen.ip().is_loopback() || config.tls_enabled() {
        return;
    }
    tracing::warn!(
        listen = %config.listen,
        "PLAINTEXT ON THE NETWORK: listening beyond loopback without TLS; anyone on the path \
         can read and forge every frame and token. Set tls_cert and tls_key (README: Securing \
         a node)"
    );
}
