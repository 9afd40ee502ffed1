//! `/metrics`: the node's metrics in the Prometheus text format, read from its state at each
//! scrape.
//!
//! Per-pool series carry `pool`, the pool's channel name, for at most `metrics_max_pools`
//! pools plus `pool="other"` summing the rest: 42 series each, so a scrape's per-pool series
//! number at most `(metrics_max_pools + 1) * 42`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{
    EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::dispatch::latency::LatencySnapshot;
use crate::dispatch::outcome::CLASSES;
use crate::shared::Shared;
use crate::status::Standing;

/// A label value, its backslashes, double quotes and newlines escaped as the text format
/// requires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Value(String);

impl From<String> for Value {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl EncodeLabelValue for Value {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

type Labels = Vec<(&'static str, Value)>;

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
            ("peer", peer.node_id.clone().into()),
            ("address", peer.address.clone().into()),
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
        let labels: Labels = vec![("peer", member.node_id.into())];
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
/// [`MAX_ADDRESSES`](lintel_transport::resolve::MAX_ADDRESSES) a name and
/// [`MAX_MEMBERS`](crate::cluster::MAX_MEMBERS) in all, so the label set is bounded by the config.
fn join_point_metrics(registry: &mut Registry, join_points: &[crate::status::JoinPoint]) {
    let up = Family::<Labels, Gauge>::default();
    let failures = Family::<Labels, Counter>::default();
    for point in join_points {
        let labels = vec![
            ("peer", point.peer.clone().into()),
            ("address", point.address.clone().into()),
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
    let priority = |at: usize| -> Labels { vec![("priority", (at + 1).to_string().into())] };
    let key = |key: String| -> Labels { vec![("key", key.into())] };
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

/// What one label of the per-pool series sums: the pools it stands for.
#[derive(Debug, Default)]
struct PoolRow {
    workers: usize,
    slots: u64,
    free: u64,
    in_flight: u64,
    by_state: [usize; Standing::ALL.len()],
    waiting: usize,
    oldest: Option<Instant>,
}

/// Labelled histograms, one per pool: prometheus-client's `Family` holds live metrics, these
/// are readings.
#[derive(Debug)]
struct Histograms(Vec<(Labels, LatencySnapshot)>);

impl TypedMetric for Histograms {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, snapshot) in &self.0 {
            snapshot.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Per pool, labelled by channel name for the pools the registry's meters name and as `other`
/// for the rest: outcomes, push-to-reply latency, waiting and the oldest wait, in flight,
/// workers, slots, free slots and workers by state.
/// Lost worker connections' sessions: kept now, and what became of them.
fn session_metrics(registry: &mut Registry, shared: &Shared) {
    let tally = shared.sessions.tally();
    gauge(
        registry,
        "worker_sessions_parked",
        "Sessions of lost worker connections kept now for a resume",
        count(tally.parked),
    );
    let ended = Family::<Labels, Counter>::default();
    for (result, value) in [
        ("resumed", tally.resumed),
        ("expired", tally.expired),
        ("refused", tally.refused),
    ] {
        ended
            .get_or_create(&vec![("result", result.into())])
            .inc_by(value);
    }
    registry.register(
        "worker_sessions",
        "Lost worker connections' sessions: resumed, expired with no resume (their pushes \
         ended worker-lost), or refused (past worker_resume_max_sessions or _max_pushes)",
        ended,
    );
    counter(
        registry,
        "worker_sessions_kept",
        "Lost worker connections whose session was kept for a resume",
        tally.kept,
    );
}

fn pool_metrics(registry: &mut Registry, shared: &Shared, pools: &[lintel_wire::PoolStatus]) {
    let dispatcher = &shared.dispatcher;
    let meters = dispatcher.registry().meters();
    let snapshots = dispatcher.pool_snapshots();
    let mut rows: HashMap<String, PoolRow> = HashMap::with_capacity(snapshots.len());
    let states = dispatcher.registry().states();
    let standing_of = |id: u64| {
        let at = states.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        states.get(at).map(|(_, standing)| *standing)
    };
    for pool in pools {
        let row = rows
            .entry(meters.label_of(&pool.namespace, &pool.task_queue))
            .or_default();
        row.workers += pool.workers.len();
        for worker in &pool.workers {
            row.slots += u64::from(worker.max_concurrency);
            row.in_flight += u64::from(worker.in_flight);
            if !worker.draining {
                row.free += u64::from(worker.max_concurrency.saturating_sub(worker.in_flight));
            }
            let at = standing_of(worker.worker_id)
                .and_then(|standing| Standing::ALL.iter().position(|s| *s == standing));
            if let Some(n) = at.and_then(|at| row.by_state.get_mut(at)) {
                *n += 1;
            }
        }
    }
    for (label, (count, oldest)) in dispatcher.registry().waiting_by_pool() {
        let row = rows.entry(label).or_default();
        row.waiting += count;
        row.oldest = Some(row.oldest.map_or(oldest, |at| at.min(oldest)));
    }
    let now = Instant::now();
    let outcomes = Family::<Labels, Counter>::default();
    let mut latency = Vec::with_capacity(snapshots.len());
    let waiting = Family::<Labels, Gauge>::default();
    let oldest = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let in_flight = Family::<Labels, Gauge>::default();
    let workers = Family::<Labels, Gauge>::default();
    let slots = Family::<Labels, Gauge>::default();
    let free = Family::<Labels, Gauge>::default();
    let by_state = Family::<Labels, Gauge>::default();
    for snapshot in snapshots {
        let row = rows.remove(&snapshot.pool).unwrap_or_default();
        let labels: Labels = vec![("pool", snapshot.pool.into())];
        for (class, n) in CLASSES.iter().zip(snapshot.outcomes) {
            let mut labels = labels.clone();
            labels.push(("outcome", (*class).into()));
            outcomes.get_or_create(&labels).inc_by(n);
        }
        latency.push((labels.clone(), snapshot.push_to_reply));
        waiting.get_or_create(&labels).set(count(row.waiting));
        let age = row
            .oldest
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        oldest.get_or_create(&labels).set(age);
        in_flight.get_or_create(&labels).set(count(row.in_flight));
        workers.get_or_create(&labels).set(count(row.workers));
        slots.get_or_create(&labels).set(count(row.slots));
        free.get_or_create(&labels).set(count(row.free));
        for (standing, n) in Standing::ALL.iter().zip(row.by_state) {
            let mut labels = labels.clone();
            labels.push(("state", standing.as_str().into()));
            by_state.get_or_create(&labels).set(count(n));
        }
    }
    registry.register(
        "pool_dispatches",
        "Dispatches of each pool ended here, by outcome class",
        outcomes,
    );
    registry.register(
        "pool_push_to_reply_seconds",
        "Seconds from a completed dispatch's first push or relay to its reply, by pool",
        Histograms(latency),
    );
    registry.register(
        "pool_dispatches_waiting",
        "Dispatches of each pool queued for a worker",
        waiting,
    );
    registry.register(
        "pool_oldest_waiting_seconds",
        "Seconds the oldest dispatch of each pool queued for a worker has waited; 0 when none",
        oldest,
    );
    registry.register(
        "pool_dispatches_in_flight",
        "Slots taken on each pool's workers: dispatches pushed and not yet let go (a worker in \
         several pools counts its own in each)",
        in_flight,
    );
    registry.register("pool_workers", "Workers registered in each pool", workers);
    registry.register(
        "pool_slots",
        "Sum of the workers' capacity in each pool",
        slots,
    );
    registry.register(
        "pool_free_slots",
        "Slots free in each pool, excluded workers' not counted",
        free,
    );
    registry.register(
        "pool_workers_by_state",
        "Workers in each pool by state: probation, eligible, unreachable or draining",
        by_state,
    );
}

/// The node's metrics now, in the Prometheus text format.
pub(super) fn text(shared: &Shared) -> Result<String, std::fmt::Error> {
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
    session_metrics(&mut registry, shared);
    fairness_metrics(&mut registry, shared);

    pool_metrics(&mut registry, shared, &node.pools);

    let c = &node.counters;
    let outcomes = Family::<Labels, Counter>::default();
    for (outcome, value) in dispatcher.counters().by_outcome() {
        outcomes
            .get_or_create(&vec![("outcome", outcome.into())])
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
        "dropped_progress",
        "Workers' Progress frames past the per-push rate bound, not passed on",
        dispatcher.counters().dropped_progress(),
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
        let labels: Labels = vec![("role", format!("{role:?}").to_ascii_lowercase().into())];
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
            .get_or_create(&vec![("stage", stage.into()), ("code", code.into())])
            .inc_by(value);
    }
    for (reason, value) in dispatcher.counters().refused_by_reason() {
        if value > 0 {
            refusals
                .get_or_create(&vec![
                    ("stage", "dispatch".into()),
                    ("code", format!("{reason:?}").into()),
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
        errors
            .get_or_create(&vec![("code", code.into())])
            .inc_by(value);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::latency::BUCKETS;

    #[test]
    fn a_labelled_pool_has_the_42_series_the_docs_state() {
        // Outcome classes, the histogram's buckets with its sum and count, waiting, oldest
        // wait, in flight, workers, slots, free slots, and workers by state.
        assert_eq!(CLASSES.len() + BUCKETS + 2 + 6 + Standing::ALL.len(), 42);
    }

    #[test]
    fn label_values_are_escaped_as_the_text_format_requires() {
        let family = Family::<Labels, Gauge>::default();
        family
            .get_or_create(&vec![("pool", Value::from("a\\b\"c\nd"))])
            .set(1);
        let mut registry = Registry::default();
        registry.register("g", "A gauge", family);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("g{pool=\"a\\\\b\\\"c\\nd\"} 1\n"), "{text}");
    }
}
