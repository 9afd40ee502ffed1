//! How a client command reaches its node: the address, the token and the TLS files it is
//! given, and what a failure to connect says.

use std::process::ExitCode;

use lintel_client::{Client, ClientConfig};

use super::exit::fail;
use super::tls::{ClientTlsArgs, ClientTlsError};

/// The node a client command connects to and the credentials it presents.
#[derive(Debug, clap::Args)]
pub(super) struct NodeArgs {
    /// Node address, or several separated by commas: the command uses one and moves to
    /// another when it drains or is lost. A name resolving to several addresses counts as each.
    #[arg(long, default_value = "127.0.0.1:7400", env = "LINTEL_CONNECT")]
    pub(super) connect: String,
    /// Auth token for nodes that require one.
    #[arg(long, env = "LINTEL_AUTH_TOKEN", hide_env_values = true)]
    pub(super) auth_token: Option<String>,
    #[command(flatten)]
    pub(super) tls: ClientTlsArgs,
}

impl NodeArgs {
    /// A producer's config named `name`, with the token and the TLS files read.
    ///
    /// # Errors
    /// What is wrong with the TLS settings or files.
    pub(super) fn config(&self, name: &str) -> Result<ClientConfig, ClientTlsError> {
        let mut config = ClientConfig::default().name(name);
        config.auth_token.clone_from(&self.auth_token);
        config.tls = self.tls.load()?;
        Ok(config)
    }

    /// The addresses `--connect` names.
    pub(super) fn nodes(&self) -> Vec<String> {
        self.connect
            .split(',')
            .map(str::trim)
            .filter(|node| !node.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Connects as the producer `name`.
    ///
    /// # Errors
    /// The exit code of a failure, said on stderr with advice.
    pub(super) async fn producer(&self, name: &str) -> Result<Client, ExitCode> {
        let config = self.config(name).map_err(fail)?;
        Client::connect_nodes(self.nodes(), config)
            .await
            .map_err(|err| fail(self.cannot_connect(&err)))
    }

    /// What a failure to connect to the node says: what happened, and what to do.
    pub(super) fn cannot_connect(&self, err: &lintel_client::ConnectError) -> String {
        super::advice::cannot_connect(&self.connect, &self.tls, err)
    }
}
