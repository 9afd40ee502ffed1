//! The TLS flags every client command shares, and the warning `serve` gives when it listens
//! beyond loopback in plaintext.
//!
//! Client commands read their TLS variables under `LINTEL_CLIENT_TLS_*`, apart from the node's
//! `LINTEL_TLS_*`, so one shell can hold both. The node's names are still read by client
//! commands when their own are unset, with a warning: they meant the same to a client before.

use std::path::PathBuf;

use lintel_client::{ClientTls, TlsError};

use lintel::config::NodeConfig;

/// A client TLS setting: its flag, its variable, and the node's variable it was once read from.
#[derive(Debug)]
pub(super) struct Setting {
    flag: &'static str,
    variable: &'static str,
    deprecated: &'static str,
}

const CA: Setting = Setting {
    flag: "--tls-ca",
    variable: "LINTEL_CLIENT_TLS_CA",
    deprecated: "LINTEL_TLS_CA",
};
const SERVER_NAME: Setting = Setting {
    flag: "--tls-server-name",
    variable: "LINTEL_CLIENT_TLS_SERVER_NAME",
    deprecated: "LINTEL_TLS_SERVER_NAME",
};
const CERT: Setting = Setting {
    flag: "--tls-cert",
    variable: "LINTEL_CLIENT_TLS_CERT",
    deprecated: "LINTEL_TLS_CERT",
};
const KEY: Setting = Setting {
    flag: "--tls-key",
    variable: "LINTEL_CLIENT_TLS_KEY",
    deprecated: "LINTEL_TLS_KEY",
};

/// Why the TLS settings of a client command cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum ClientTlsError {
    #[error("{} ({}) needs {} ({}) too", .given.flag, .given.variable, .needs.flag, .needs.variable)]
    Needs {
        given: &'static Setting,
        needs: &'static Setting,
    },
    #[error(transparent)]
    Load(#[from] TlsError),
}

/// How a client command speaks TLS to the node; plaintext without `--tls-ca`.
#[derive(Debug, Default, clap::Args)]
pub(super) struct ClientTlsArgs {
    /// PEM file of the CA certificates to trust; with it the connection speaks TLS.
    #[arg(long, env = "LINTEL_CLIENT_TLS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// Name the node's certificate must carry [default: the host of --connect].
    #[arg(long, env = "LINTEL_CLIENT_TLS_SERVER_NAME", value_name = "NAME")]
    tls_server_name: Option<String>,
    /// PEM client certificate chain, for nodes that require one (with --tls-key).
    #[arg(long, env = "LINTEL_CLIENT_TLS_CERT", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "LINTEL_CLIENT_TLS_KEY", value_name = "FILE")]
    tls_key: Option<PathBuf>,
}

impl ClientTlsArgs {
    /// The CA file given, if any.
    pub(super) fn ca(&self) -> Option<&std::path::Path> {
        self.tls_ca.as_deref()
    }

    /// The client certificate file given, if any.
    pub(super) fn cert(&self) -> Option<&std::path::Path> {
        self.tls_cert.as_deref()
    }

    /// The server name given, if any.
    pub(super) fn server_name(&self) -> Option<&str> {
        self.tls_server_name.as_deref()
    }

    /// The TLS settings for connecting to `connect`, or `None` for plaintext.
    ///
    /// # Errors
    /// [`ClientTlsError`] naming the setting that lacks its partner, or the file or server name
    /// that cannot be used.
    pub(super) fn load(&self) -> Result<Option<ClientTls>, ClientTlsError> {
        let ca = self
            .tls_ca
            .clone()
            .or_else(|| deprecated(&CA).map(PathBuf::from));
        let server_name = self
            .tls_server_name
            .clone()
            .or_else(|| deprecated(&SERVER_NAME));
        let cert = self
            .tls_cert
            .clone()
            .or_else(|| deprecated(&CERT).map(PathBuf::from));
        let key = self
            .tls_key
            .clone()
            .or_else(|| deprecated(&KEY).map(PathBuf::from));
        let needs = |given, needs| Err(ClientTlsError::Needs { given, needs });
        match (&ca, &server_name, &cert, &key) {
            (_, _, Some(_), None) => return needs(&CERT, &KEY),
            (_, _, None, Some(_)) => return needs(&KEY, &CERT),
            (None, _, Some(_), Some(_)) => return needs(&CERT, &CA),
            (None, Some(_), _, _) => return needs(&SERVER_NAME, &CA),
            _ => {}
        }
        let Some(ca) = ca else {
            return Ok(None);
        };
        let identity = cert.as_deref().zip(key.as_deref());
        let tls = ClientTls::from_files(&ca, identity)?;
        // Without a server name, each node's certificate is checked against the host of the
        // address it was given as.
        Ok(Some(match server_name.as_deref() {
            Some(name) => {
                tls.with_server_name(name.trim_start_matches('[').trim_end_matches(']'))?
            }
            None => tls,
        }))
    }
}

/// The value of `setting`'s old variable, with a warning, when it is set.
fn deprecated(setting: &Setting) -> Option<String> {
    let value = std::env::var(setting.deprecated).ok()?;
    tracing::warn!(
        "{} is the node's variable and deprecated for client commands: read as {} this \
         time; set {} instead",
        setting.deprecated,
        setting.flag,
        setting.variable
    );
    Some(value)
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
