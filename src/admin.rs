//! The admin HTTP listener: `/metrics` (Prometheus text), `/health`, `/ready`, `/linked`,
//! `/status`, `/window` (the last minutes, second by second), `/events` (the node's lifecycle
//! events as Server-Sent Events), the console at `/` and `/endpoints` listing them.
//!
//! Off unless `admin_listen` is set. With `admin_token` set, every request but `/health` and
//! the console's own files (which hold no data) must carry `Authorization: Bearer` with it. Metrics are read from the node's own state at each scrape
//! (pools, counters, peers), so nothing is kept twice; the dispatch latency histogram is the
//! one the dispatcher records into. Label sets are bounded by real pools and peers, and by the
//! join points the config names.

use std::convert::Infallible;
use std::sync::Arc;

use futures_util::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::console::{self, Window};
use crate::events::{lines, Subscriber};
use crate::shared::Shared;
use crate::status::{self, Standing, Status};
use crate::tls::Rotation;

type Labels = Vec<(&'static str, String)>;

/// A response body: whole, or the stream of `/events`.
type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The answer to `/endpoints`: what the admin listener serves.
const ENDPOINTS: &str = "lintel admin listener\n\
/          the console: this node, its peers, pools and workers, live\n\
/metrics   Prometheus text, read from the node's state at each scrape\n\
/health    200 while the process serves (a liveness probe)\n\
/ready     200 when the node should get traffic (a readiness probe), 503 with the reason otherwise\n\
/linked    200 when ready and linked to every member it knows, synced with each (what a rolling restart waits for); 503 with the reason\n\
/status    the node's status as JSON, as `lintel status --json` prints it, with TLS and peer consoles\n\
/window    JSON: outcome rates, p50/p99 latency, in flight and waiting, second by second\n\
/events    the node's lifecycle events as Server-Sent Events, each `data:` a `lintel watch` line\n\
/pools     JSON: the pools' current deployments, as /status lists them\n\
/endpoints this list\n\
POST /pools  JSON {namespace, task_queue, deployment}: sets (or, deployment null, clears) a pool's current deployment on every node of the mesh\n";

/// Serves admin requests on `listener` until `closing` fires.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, closing: CancellationToken) {
    let window = Arc::new(Window::default());
    tokio::spawn(Arc::clone(&window).sample(Arc::clone(&shared), closing.clone()));
    loop {
        let accepted = tokio::select! {
            () = closing.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let shared = Arc::clone(&shared);
        let window = Arc::clone(&window);
        let closing = closing.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                let window = Arc::clone(&window);
                async move {
                    if request.method() == Method::POST && request.uri().path() == "/pools" {
                        return Ok::<_, Infallible>(set_pool(&shared, request).await);
                    }
                    Ok::<_, Infallible>(answer(&shared, &window, &request))
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = closing.cancelled() => {}
            }
        });
    }
}

fn answer(shared: &Shared, window: &Window, request: &Request<Incoming>) -> Response<Body> {
    if request.method() != Method::GET {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only, but for POST /pools\n",
        );
    }
    let path = request.uri().path();
    let open = path == "/health" || (path != "/endpoints" && console::asset(path).is_some());
    if !open && !authorized(shared, request) {
        let mut response = reply(
            StatusCode::UNAUTHORIZED,
            "text/plain",
            "this admin listener needs Authorization: Bearer with its admin_token\n",
        );
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer realm=\"lintel admin\""),
        );
        return response;
    }
    match path {
        "/events" => events(shared),
        "/metrics" => match metrics(shared) {
            Ok(text) => reply(
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                text,
            ),
            Err(err) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                err.to_string(),
            ),
        },
        "/endpoints" => reply(StatusCode::OK, "text/plain", ENDPOINTS),
        "/pools" => {
            let (settings, _) = shared.dispatcher.settings().since(0);
            let current: Vec<_> = settings.iter().map(status::current_deployment).collect();
            match serde_json::to_string_pretty(&current) {
                Ok(json) => reply(StatusCode::OK, "application/json", json),
                Err(err) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    err.to_string(),
                ),
            }
        }
        "/window" => match serde_json::to_string(&window.view()) {
            Ok(json) => reply(StatusCode::OK, "application/json", json),
            Err(err) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                err.to_string(),
            ),
        },
        "/health" => reply(StatusCode::OK, "text/plain", "ok\n"),
        "/ready" => match not_ready(shared) {
            None => reply(StatusCode::OK, "text/plain", "ready\n"),
            Some(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{why}\n"),
            ),
        },
        "/linked" => match not_linked(shared) {
            None => reply(StatusCode::OK, "text/plain", "linked\n"),
            Some(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{why}\n"),
            ),
        },
        "/status" => match status_json(shared) {
            Ok(json) => reply(StatusCode::OK, "application/json", json),
            Err(err) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                err.to_string(),
            ),
        },
        path => match console::asset(path) {
            Some(asset) => {
                let mut response = reply(StatusCode::OK, asset.content_type, asset.body);
                let headers = response.headers_mut();
                for (name, value) in [
                    ("content-security-policy", console::CONTENT_SECURITY_POLICY),
                    ("x-content-type-options", "nosniff"),
                    ("referrer-policy", "no-referrer"),
                    ("cache-control", "no-cache"),
                ] {
                    headers.insert(name, hyper::header::HeaderValue::from_static(value));
                }
                response
            }
            None => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        },
    }
}

/// True when the node needs no admin token, or `request` carries it as a bearer token.
fn authorized(shared: &Shared, request: &Request<Incoming>) -> bool {
    let Some(token) = shared
        .config
        .admin_token
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return true;
    };
    let presented = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    bool::from(presented.ct_eq(token.as_bytes()))
}

/// `/events`: the node's events from now on as Server-Sent Events, each `id:` its `seq` and
/// each `data:` one line of `lintel watch`. A reader that falls a whole event ring behind gets
/// a `missed` line first; the connection's own write buffer is all it holds besides the ring.
fn events(shared: &Shared) -> Response<Body> {
    let subscriber = shared.dispatcher.registry().events().subscribe(&[]);
    let stream =
        futures_util::stream::unfold(subscriber, |mut subscriber: Subscriber| async move {
            let delivery = subscriber.next().await?;
            let (seq, at_unix_ms, event) = delivery.parts();
            let mut text = String::new();
            for line in lines(seq, at_unix_ms, &event) {
                text.push_str(&format!("id: {seq}\ndata: {line}\n\n"));
            }
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(text))),
                subscriber,
            ))
        });
    // A comment first, so the reader sees the stream open before the first event.
    let opened = futures_util::stream::once(async {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b": lintel events\n\n")))
    });
    let mut response = Response::new(StreamBody::new(opened.chain(stream)).boxed_unsync());
    let headers = response.headers_mut();
    for (name, value) in [
        (hyper::header::CONTENT_TYPE, "text/event-stream"),
        (hyper::header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    response
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
/// node of the mesh learns. With an `admin_token`, it needs `Authorization: Bearer` with it.
async fn set_pool(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    use http_body_util::BodyExt;
    let text = |status, body: String| reply(status, "text/plain", body);
    if !authorized(shared, &request) {
        let refused = "POST /pools needs Authorization: Bearer with the admin_token\n";
        return text(StatusCode::UNAUTHORIZED, refused.to_owned());
    }
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

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed_unsync());
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Why the node should get no traffic yet, if it should not: draining, or a linked peer's
/// presence still arriving. A peer not linked yet never holds it back, so nodes that name each
/// other as peers can start one after another, each waiting for the last to be ready.
fn not_ready(shared: &Shared) -> Option<&'static str> {
    if shared.dispatcher.is_draining() {
        return Some("draining");
    }
    if !shared.dispatcher.mesh().synced() {
        return Some("a peer's presence is still arriving");
    }
    None
}

/// Why the node is not yet linked to the whole cluster, if it is not: not ready; with peers
/// configured, none linked (unless each join point is this node itself); or a member it knows
/// without a link or whose presence is still arriving. What a rolling restart waits for before
/// it drains the next node.
fn not_linked(shared: &Shared) -> Option<String> {
    if let Some(why) = not_ready(shared) {
        return Some(why.to_owned());
    }
    let mesh = shared.dispatcher.mesh();
    let join_points = mesh.join_points();
    let only_itself = !join_points.is_empty() && join_points.iter().all(|point| point.myself);
    let alone = !shared.config.peers.is_empty() && mesh.is_empty() && !only_itself;
    if alone {
        return Some("no peer linked yet".to_owned());
    }
    let member = mesh.unlinked_member()?;
    Some(format!("not linked and synced to member {member} yet"))
}

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

fn status_json(shared: &Shared) -> Result<String, serde_json::Error> {
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

fn gauge_family(registry: &mut Registry, name: &str, help: &str, rows: Vec<(Labels, i64)>) {
    let family = Family::<Labels, Gauge>::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    registry.register(name, help, family);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let gauge = Gauge::<i64>::default();
    gauge.set(value);
    registry.register(name, help, gauge);
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let counter = Counter::<u64>::default();
    counter.inc_by(value);
    registry.register(name, help, counter);
}

fn count(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Per member: its link's state and relays, and how often links to it came up and went down;
/// and the links turned down as duplicates.
fn peer_metrics(registry: &mut Registry, shared: &Shared, peers: &[lintel_wire::PeerStatus]) {
    let mut up = Vec::new();
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut in_flight = Vec::new();
    for peer in peers {
        let labels = vec![
            ("peer", peer.node_id.clone()),
            ("address", peer.address.clone()),
        ];
        up.push((
            labels.clone(),
            i64::from(peer.state == lintel_wire::PeerLinkState::Up),
        ));
        sent.push((labels.clone(), count(peer.relays_sent)));
        received.push((labels.clone(), count(peer.relays_received)));
        in_flight.push((labels, i64::from(peer.relays_in_flight)));
    }
    gauge_family(registry, "peer_up", "1 while a link to a member is up", up);
    gauge_family(
        registry,
        "peer_relays_sent",
        "Relays sent to a member since this node started, across its links",
        sent,
    );
    gauge_family(
        registry,
        "peer_relays_received",
        "Relays a member sent here since this node started, across its links",
        received,
    );
    gauge_family(
        registry,
        "peer_relays_in_flight",
        "Relays sent to a member without an outcome yet",
        in_flight,
    );
    let mesh = shared.dispatcher.mesh();
    let ups = Family::<Labels, Counter>::default();
    let downs = Family::<Labels, Counter>::default();
    for member in mesh.tallies() {
        let labels = vec![("peer", member.node_id)];
        ups.get_or_create(&labels).inc_by(member.tally.ups);
        downs.get_or_create(&labels).inc_by(member.tally.downs);
    }
    registry.register(
        "peer_link_ups",
        "Links to a member that came up: both sides kept them and its presence arrived",
        ups,
    );
    registry.register(
        "peer_link_downs",
        "Links to a member that came up and went down again",
        downs,
    );
    join_point_metrics(registry, &mesh.join_points());
    counter(
        registry,
        "peer_duplicate_links",
        "Peer links this node turned down because another link to the same node stays",
        mesh.duplicates(),
    );
    gauge(
        registry,
        "relay_outcomes_kept_bytes",
        "Bytes of relay outcomes kept until the peer that relayed acknowledges them",
        count(shared.retention.bytes()),
    );
    counter(
        registry,
        "relay_outcomes_dropped",
        "Relay outcomes dropped unacknowledged past relay_retention_bytes: a resumption \
         answers their relays unknown",
        shared.retention.dropped(),
    );
}

/// Per join point: up or down, and its failed dials. Join points are the configured peers and
/// the addresses their names resolve to, at most
/// [`MAX_ADDRESSES`](lintel_client::transport::resolve::MAX_ADDRESSES) a name and
/// [`MAX_MEMBERS`](crate::cluster::MAX_MEMBERS) in all, so the label set is bounded by the config.
fn join_point_metrics(registry: &mut Registry, join_points: &[crate::status::JoinPoint]) {
    let up = Family::<Labels, Gauge>::default();
    let failures = Family::<Labels, Counter>::default();
    for point in join_points {
        let labels = vec![
            ("peer", point.peer.clone()),
            ("address", point.address.clone()),
        ];
        up.get_or_create(&labels)
            .set(i64::from(point.state.is_up()));
        failures.get_or_create(&labels).inc_by(point.dial_failures);
    }
    registry.register(
        "join_point_up",
        "1 while a join point (a configured peer, or an address its name resolves to) leads to a \
         linked member or to this node itself",
        up,
    );
    registry.register(
        "join_point_dial_failures",
        "Failed dials of a join point since it was added",
        failures,
    );
}

/// Waiting and served dispatches by priority and by fairness key: the keys with the most
/// waiting (served: the listed and the first seen), the rest as `other`; the capped keys.
fn fairness_metrics(registry: &mut Registry, shared: &Shared) {
    let status = shared.dispatcher.registry().fairness();
    let priority = |at: usize| vec![("priority", (at + 1).to_string())];
    let key = |key: String| vec![("key", key)];
    let waiting = status.waiting_by_priority.iter().enumerate();
    gauge_family(
        registry,
        "dispatches_waiting_by_priority",
        "Dispatches queued for a worker, by priority (1 highest)",
        waiting.map(|(at, n)| (priority(at), count(*n))).collect(),
    );
    let mut by_key: Vec<(Labels, i64)> = status
        .waiting_by_key
        .into_iter()
        .map(|(name, n)| (key(name), count(n)))
        .collect();
    by_key.push((key("other".into()), count(status.waiting_other)));
    gauge_family(
        registry,
        "dispatches_waiting_by_key",
        "Dispatches queued for a worker, by fairness key: the keys with the most waiting (the \
         shared key is \"\"), the rest as other",
        by_key,
    );
    let served = Family::<Labels, Counter>::default();
    for (at, n) in status.served.by_priority.iter().enumerate() {
        served.get_or_create(&priority(at)).inc_by(*n);
    }
    registry.register(
        "dispatches_served_by_priority",
        "Dispatches given a slot on this node's workers, by priority (1 highest)",
        served,
    );
    let served = Family::<Labels, Counter>::default();
    for (name, n) in status.served.by_key {
        served.get_or_create(&key(name)).inc_by(n);
    }
    served
        .get_or_create(&key("other".into()))
        .inc_by(status.served.other);
    registry.register(
        "dispatches_served_by_key",
        "Dispatches given a slot on this node's workers, by fairness key: the shared key \
         (\"\"), the keys of [[fairness]] entries and the first others served, the rest as other",
        served,
    );
    let mut in_flight = Vec::new();
    let mut caps = Vec::new();
    for (name, running, cap) in status.capped {
        in_flight.push((key(name.clone()), i64::from(running)));
        caps.push((key(name), i64::from(cap)));
    }
    gauge_family(
        registry,
        "fairness_key_in_flight",
        "Dispatches of a capped fairness key running on this node's workers",
        in_flight,
    );
    gauge_family(
        registry,
        "fairness_key_max_in_flight",
        "The cap of a fairness key on this node",
        caps,
    );
}

/// The node's metrics now, in the Prometheus text format.
fn metrics(shared: &Shared) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("lintel");
    let status = shared.cluster_status(0);
    let node = &status.status;
    let dispatcher = &shared.dispatcher;

    gauge(
        &mut registry,
        "connections",
        "Open connections of every role",
        count(node.connections),
    );
    gauge(
        &mut registry,
        "dispatches_in_flight",
        "Dispatches admitted without an outcome yet",
        count(dispatcher.active()),
    );
    gauge(
        &mut registry,
        "dispatches_waiting",
        "Dispatches queued for a worker",
        count(dispatcher.registry().waiting()),
    );
    gauge(
        &mut registry,
        "draining",
        "1 while the node drains",
        i64::from(node.draining),
    );
    let events = dispatcher.registry().events();
    gauge(
        &mut registry,
        "event_subscribers",
        "Subscribers to the node's lifecycle events: lintel watch, SDK subscriptions, /events",
        count(events.subscribers()),
    );
    counter(
        &mut registry,
        "events",
        "Lifecycle events the node published since it started, whoever subscribed",
        events.published(),
    );
    fairness_metrics(&mut registry, shared);

    let mut workers = Vec::new();
    let mut slots = Vec::new();
    let mut free = Vec::new();
    let mut by_state = Vec::new();
    let states = dispatcher.registry().states();
    let standing_of = |id: u64| {
        let at = states.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        states.get(at).map(|(_, standing)| *standing)
    };
    for pool in &node.pools {
        let labels = vec![("channel", pool.channel.clone())];
        for standing in Standing::ALL {
            let n = pool
                .workers
                .iter()
                .filter(|w| standing_of(w.worker_id) == Some(standing))
                .count();
            let mut labels = labels.clone();
            labels.push(("state", standing.as_str().to_owned()));
            by_state.push((labels, count(n)));
        }
        let capacity: u64 = pool
            .workers
            .iter()
            .map(|w| u64::from(w.max_concurrency))
            .sum();
        let open: u64 = pool
            .workers
            .iter()
            .filter(|w| !w.draining)
            .map(|w| u64::from(w.max_concurrency.saturating_sub(w.in_flight)))
            .sum();
        workers.push((labels.clone(), count(pool.workers.len())));
        slots.push((labels.clone(), count(capacity)));
        free.push((labels, count(open)));
    }
    gauge_family(
        &mut registry,
        "pool_workers",
        "Workers registered in each pool, by channel name",
        workers,
    );
    gauge_family(
        &mut registry,
        "pool_slots",
        "Sum of the workers' capacity in each pool",
        slots,
    );
    gauge_family(
        &mut registry,
        "pool_free_slots",
        "Slots free in each pool, excluded workers' not counted",
        free,
    );
    gauge_family(
        &mut registry,
        "pool_workers_by_state",
        "Workers in each pool by state: probation, eligible, unreachable or draining",
        by_state,
    );

    let c = &node.counters;
    let outcomes = Family::<Labels, Counter>::default();
    for (outcome, value) in dispatcher.counters().by_outcome() {
        outcomes
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc_by(value);
    }
    registry.register("dispatches", "Dispatches ended, by outcome class", outcomes);
    counter(
        &mut registry,
        "dispatches_submitted",
        "Dispatches admitted, whatever became of them",
        c.submitted,
    );
    counter(
        &mut registry,
        "pushes",
        "Pushes queued on worker connections",
        c.pushed,
    );
    counter(
        &mut registry,
        "late_replies",
        "Replies to pushes that had already ended",
        c.late_replies,
    );
    counter(
        &mut registry,
        "dropped_replies",
        "Replies naming no push on their connection",
        c.dropped_replies,
    );
    counter(
        &mut registry,
        "reclaimed_slots",
        "Slots freed because no late reply came within the grace",
        c.reclaimed_slots,
    );
    registry.register(
        "dispatch_duration_seconds",
        "Seconds from admission to outcome",
        dispatcher.counters().latency().snapshot(),
    );

    let mut connections = Vec::new();
    let mut frames = Vec::new();
    let mut bytes = Vec::new();
    for (role, load) in shared.connection_counts.by_role() {
        let labels = vec![("role", format!("{role:?}").to_ascii_lowercase())];
        connections.push((labels.clone(), count(load.connections)));
        frames.push((labels.clone(), count(load.queued_frames)));
        bytes.push((labels, count(load.queued_bytes)));
    }
    gauge_family(
        &mut registry,
        "connections_by_role",
        "Connections past their handshake, by role",
        connections,
    );
    gauge_family(
        &mut registry,
        "outbound_queued_frames",
        "Frames queued to send and not yet written, summed by role",
        frames,
    );
    gauge_family(
        &mut registry,
        "outbound_queued_bytes",
        "Bytes queued to send and not yet written, summed by role",
        bytes,
    );

    let refusals = Family::<Labels, Counter>::default();
    for ((stage, code), value) in shared.connection_counts.refusals() {
        refusals
            .get_or_create(&vec![("stage", stage.to_owned()), ("code", code)])
            .inc_by(value);
    }
    for (reason, value) in dispatcher.counters().refused_by_reason() {
        if value > 0 {
            refusals
                .get_or_create(&vec![
                    ("stage", "dispatch".to_owned()),
                    ("code", format!("{reason:?}")),
                ])
                .inc_by(value);
        }
    }
    registry.register(
        "refusals",
        "Refusals sent: at hello, at registration, or of a dispatch, by code",
        refusals,
    );
    let errors = Family::<Labels, Counter>::default();
    for (code, value) in shared.connection_counts.errors() {
        errors.get_or_create(&vec![("code", code)]).inc_by(value);
    }
    registry.register(
        "errors",
        "Error frames sent before closing a connection, by code",
        errors,
    );

    peer_metrics(&mut registry, shared, &status.peers);

    if let Some(rotation) = shared.tls.rotation() {
        counter(
            &mut registry,
            "tls_reloads",
            "Reloads of the TLS files that put new certificates in use",
            rotation.reloads,
        );
        counter(
            &mut registry,
            "tls_reload_failures",
            "Reloads of changed TLS files that did not load; the old certificates stayed",
            rotation.failures,
        );
        if let Some(not_after) = rotation.not_after_unix_s {
            gauge(
                &mut registry,
                "tls_cert_not_after_seconds",
                "When the certificate served now expires, in seconds since the Unix epoch",
                count(not_after),
            );
        }
    }

    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}
