//! `/status`: the status as `lintel status --json` prints it, with what only the admin
//! listener knows.

use crate::shared::Shared;
use crate::status::{self, Status};
use crate::tls::Rotation;

/// `/status`: the JSON of `lintel status --json`, with what only the admin listener knows.
#[derive(serde::Serialize)]
struct AdminStatus {
    #[serde(flatten)]
    status: Status,
    /// The listener's TLS; `null` when off.
    tls: Option<Rotation>,
    /// Each linked peer's console, by node id, as `peer_console` makes it.
    peer_consoles: std::collections::BTreeMap<String, String>,
}

/// The status document `/status` serves.
pub(super) fn json(shared: &Shared) -> Result<String, serde_json::Error> {
    let report = shared.cluster_status(0);
    let peer_consoles = report
        .peers
        .iter()
        .filter_map(|peer| {
            let url = shared
                .config
                .peer_console_url(&peer.node_id, &peer.address)?;
            Some((peer.node_id.clone(), url))
        })
        .collect();
    serde_json::to_string_pretty(&AdminStatus {
        status: status::view(report, &shared.dispatcher),
        tls: shared.tls.rotation(),
        peer_consoles,
    })
}
