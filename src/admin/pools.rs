//! `GET /pools` and `POST /pools`: the pools' current deployments, read and set.

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::reply::{reply, Body};
use crate::shared::Shared;
use crate::status;

/// `GET /pools`: the pools' current deployments, as `/status` lists them.
pub(super) fn current(shared: &Shared) -> Result<String, serde_json::Error> {
    let (settings, _) = shared.dispatcher.settings().since(0);
    let current: Vec<_> = settings.iter().map(status::current_deployment).collect();
    serde_json::to_string_pretty(&current)
}

/// Largest body `POST /pools` reads.
const MAX_POOL_BODY: usize = 64 * 1024;

/// The body of `POST /pools`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolRequest {
    namespace: String,
    #[serde(default)]
    task_queue: String,
    /// `None` when the body has no `deployment`; `Some(None)` for `null`, which clears it.
    #[serde(default, deserialize_with = "present")]
    deployment: Option<Option<String>>,
}

/// A field that is present, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    serde::Deserialize::deserialize(deserializer).map(Some)
}

/// What `POST /pools` takes, for a body that is not it.
const POOL_BODY: &str = "POST /pools takes a JSON object such as \
{\"namespace\": \"demo\", \"task_queue\": \"\", \"deployment\": \"v2\"} \
(task_queue may be left out; \"deployment\": null clears the pool's current deployment)";

/// `POST /pools`: sets a pool's current deployment, written by this node now, which every
/// node of the mesh learns.
pub(super) async fn set(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let text = |status, body: String| reply(status, "text/plain", body);
    let body = match http_body_util::Limited::new(request.into_body(), MAX_POOL_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(err) => return text(StatusCode::PAYLOAD_TOO_LARGE, format!("{err}\n")),
    };
    let asked: PoolRequest = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(err) => return text(StatusCode::BAD_REQUEST, format!("{POOL_BODY}: {err}\n")),
    };
    let Some(deployment) = asked.deployment else {
        let missing = "the body names no \"deployment\": give one to set it, or null to clear it";
        return text(StatusCode::BAD_REQUEST, format!("{POOL_BODY}: {missing}\n"));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
    let set = shared.dispatcher.settings().set(
        (&asked.namespace, &asked.task_queue),
        deployment.as_deref(),
        (now, shared.node_id()),
    );
    match set.map(|setting| serde_json::to_string(&status::current_deployment(&setting))) {
        Ok(Ok(json)) => {
            tracing::info!(namespace = %asked.namespace, task_queue = %asked.task_queue, deployment = deployment.as_deref().unwrap_or("(none)"), "pool's current deployment set");
            reply(StatusCode::OK, "application/json", json)
        }
        Ok(Err(err)) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{err}\n")),
        Err(err) => text(StatusCode::BAD_REQUEST, format!("{err}\n")),
    }
}
