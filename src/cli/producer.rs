//! How `status` and `watch` connect to their node as a producer: its TLS and token, and what a
//! failure to connect says.

use std::process::ExitCode;

use lintel_client::{Client, ClientConfig};

use super::exit::fail;
use super::tls::ClientTlsArgs;

/// Connects to `connect` as the producer `name`, presenting `auth_token` and `tls`.
///
/// # Errors
/// The exit code of a failure, said on stderr with advice.
pub(super) async fn connect(
    name: &str,
    connect: &str,
    auth_token: Option<String>,
    tls: &ClientTlsArgs,
) -> Result<Client, ExitCode> {
    let tls = tls.load(connect).map_err(fail)?;
    let config = ClientConfig {
        name: name.into(),
        auth_token,
        tls,
        ..ClientConfig::default()
    };
    Client::connect(connect, config)
        .await
        .map_err(|err| fail(super::advice::cannot_connect(connect, &err)))
}
