//! Properties of the wire crate: every frame kind round-trips through the pure framing
//! functions and through `FrameCodec` however the stream is chunked, the version-2, version-3
//! and version-4 frames on their own as well as mixed with the rest; the hot kinds, version 3's
//! and 4's included, encode to postcard's bytes and decode as postcard does (a version-4
//! reader that listed nothing is written what a version-3 one is); the decoder never panics
//! and never lets its buffer grow past a bound set by the maximum frame length; channel names
//! are injective and exactly invertible.
//!
//! Each vacuity risk (a strategy that never reaches some case) has its own coverage test
//! that samples the strategy with a deterministic runner and fails if a case is never hit.

use std::collections::{BTreeSet, HashSet};

use bytes::{BufMut, Bytes, BytesMut};
use lintel_wire::channel::{dispatch_channel_name, parse_channel_name, ChannelAddress};
use lintel_wire::error::{CodecError, DecodeError};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use tokio_util::codec::Decoder;

mod reference;

/// Enough cases to shake out shallow bugs while the whole file runs in a few seconds in debug.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies for the message set
// ---------------------------------------------------------------------------------------------

/// Any Unicode scalar values, control characters and `\0` included.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter)
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text(), 0..4)
}

fn blob() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..48).prop_map(Bytes::from)
}

/// A session token, within its 16 to 64 bytes.
fn session_token() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), Session::TOKEN_LEN).prop_map(Bytes::from)
}

/// Varint edges (one byte, two bytes, the maximum) as well as uniform values.
fn n64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(u64::MAX), 0..300u64, any::<u64>()]
}

fn n32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0), Just(u32::MAX), 0..300u32, any::<u32>()]
}

fn n16() -> impl Strategy<Value = u16> {
    prop_oneof![Just(0), Just(u16::MAX), 0..300u16, any::<u16>()]
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(vec![Role::Worker, Role::Producer, Role::Peer])
}

fn refusal_code() -> impl Strategy<Value = RefusalCode> {
    use RefusalCode::*;
    prop::sample::select(vec![
        VersionMismatch,
        Unauthorized,
        RoleNotSupported,
        TooManyConnections,
        Draining,
        EmptyNamespaces,
        EmptyActivityTypes,
        ZeroCapacity,
        InvalidField,
        LimitExceeded,
        Rejected,
        Unsupported,
        Superseded,
        Cancelled,
    ])
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    use ErrorCode::*;
    prop::sample::select(vec![
        Malformed,
        Oversize,
        UnknownFrameKind,
        UnexpectedFrame,
        HandshakeTimeout,
        LivenessTimeout,
        ZeroCapacity,
        ShuttingDown,
        LimitExceeded,
        FrameTimeout,
        SlowConsumer,
        Unsupported,
    ])
}

/// The reasons a connection of `version` knows.
fn no_worker_reason(version: u16) -> impl Strategy<Value = NoWorkerReason> {
    use NoWorkerReason::*;
    let mut reasons = vec![
        PoolEmpty,
        NoActivityMatch,
        NodeFilterMatchedNobody,
        AllAtCapacity,
        AllExcluded,
    ];
    if version >= 3 {
        reasons.extend([
            AllUnreachable,
            AllInProbation,
            DeploymentMatchedNobody,
            CapabilityMatchedNobody,
        ]);
    }
    prop::sample::select(reasons)
}

/// The refusals a connection of `version` knows.
fn refused_reason(version: u16) -> impl Strategy<Value = RefusedReason> {
    use RefusedReason::*;
    let all = [
        (InvalidRequest, 1),
        (WorkerBackpressure, 1),
        (TooManyInFlight, 1),
        (DuplicateCorrelation, 1),
        (NamespaceNotGranted, 2),
        (Unsupported, 3),
        (FairnessCapReached, 3),
        (RoleNotGranted, 4),
    ];
    let known = all
        .into_iter()
        .filter(|(_, since)| *since <= version)
        .map(|(reason, _)| reason)
        .collect::<Vec<_>>();
    prop::sample::select(known)
}

prop_compose! {
    fn hello()(
        min_version in n16(),
        max_version in n16(),
        role in role(),
        name in text(),
        auth_token in opt_text(),
    ) -> Hello {
        Hello { min_version, max_version, role, name, auth_token }
    }
}

prop_compose! {
    fn limits()(
        max_frame_len in n32(),
        max_in_flight in n32(),
        ping_interval_ms in n64(),
        max_missed_pings in n32(),
        max_name_len in n32(),
        max_set_len in n32(),
    ) -> Limits {
        Limits {
            max_frame_len,
            max_in_flight,
            ping_interval_ms,
            max_missed_pings,
            max_name_len,
            max_set_len,
        }
    }
}

prop_compose! {
    /// A welcome as a version-1 or version-2 node sends it.
    fn welcome()(version in n16(), node_id in text(), pid in n64(), limits in limits())
        -> Welcome {
        Welcome { version, node_id, pid, limits, header_limits: None, features: Vec::new() }
    }
}

prop_compose! {
    fn refusal()(code in refusal_code(), reason in text()) -> Refusal {
        Refusal { code, reason }
    }
}

prop_compose! {
    fn register()(
        namespaces in texts(),
        task_queue in text(),
        node in opt_text(),
        activity_types in texts(),
        identity in text(),
        max_concurrency in n32(),
    ) -> Register {
        Register {
            namespaces,
            task_queue,
            node,
            activity_types,
            identity,
            max_concurrency,
            deployment: None,
            instance_id: None,
            extensions: Vec::new(),
        }
    }
}

prop_compose! {
    fn dispatch_request()(
        (namespace, task_queue, activity_type, node) in (text(), text(), text(), opt_text()),
        (workflow_id, ordinal, run_id, attempt) in (text(), n64(), opt_text(), n32()),
        input in blob(),
        deadline_unix_ms in prop::option::of(n64()),
    ) -> DispatchRequest {
        DispatchRequest {
            namespace,
            task_queue,
            activity_type,
            node,
            workflow_id,
            ordinal,
            run_id,
            attempt,
            input,
            deadline_unix_ms,
        }
    }
}

fn activity_outcome() -> impl Strategy<Value = ActivityOutcome> {
    prop_oneof![
        blob().prop_map(ActivityOutcome::Success),
        (text(), any::<bool>())
            .prop_map(|(message, retryable)| ActivityOutcome::Failure { message, retryable }),
    ]
}

prop_compose! {
    fn dispatch_response()(
        workflow_id in text(),
        ordinal in n64(),
        run_id in opt_text(),
        outcome in activity_outcome(),
    ) -> DispatchResponse {
        DispatchResponse { workflow_id, ordinal, run_id, outcome }
    }
}

prop_compose! {
    /// A push with no extras, as a version-2 worker is sent.
    fn push()(correlation in n64(), request in dispatch_request()) -> Push {
        Push { correlation, request, extras: RequestExtras::default() }
    }
}

prop_compose! {
    fn reply()(correlation in n64(), response in dispatch_response()) -> Reply {
        Reply { correlation, response }
    }
}

fn node_routing() -> impl Strategy<Value = NodeRouting> {
    prop_oneof![
        Just(NodeRouting::Any),
        text().prop_map(NodeRouting::Pin),
        texts().prop_map(NodeRouting::Prefer),
        texts().prop_map(NodeRouting::Require),
    ]
}

prop_compose! {
    fn submit()(
        correlation in n64(),
        request in dispatch_request(),
        wait_for_worker_ms in prop::option::of(n64()),
        reply_timeout_ms in prop::option::of(n64()),
        routing in node_routing(),
    ) -> Submit {
        Submit {
            correlation,
            request,
            extras: RequestExtras::default(),
            wait_for_worker_ms,
            reply_timeout_ms,
            routing,
        }
    }
}

/// A census as a connection of `version` is sent it: from version 3 every count, before it
/// the counts version 2 makes (compatible workers are the deployment's, exclusions as one).
fn census(version: u16) -> impl Strategy<Value = Census> {
    (
        no_worker_reason(version),
        (n32(), n32(), n32(), n32()),
        (n32(), n32(), n32(), n32()),
        prop::option::of(n64()),
    )
        .prop_map(
            move |(
                reason,
                (pool_workers, serving_activity, compatible_workers, deployment_workers),
                (at_capacity, draining, probation, unreachable),
                last_departure_ms_ago,
            )| {
                let later = version >= 3;
                Census {
                    reason,
                    pool_workers,
                    serving_activity,
                    compatible_workers,
                    deployment_workers: if later {
                        deployment_workers
                    } else {
                        compatible_workers
                    },
                    at_capacity,
                    draining,
                    probation: later.then_some(probation),
                    unreachable: later.then_some(unreachable),
                    last_departure_ms_ago,
                }
            },
        )
}

/// A result as a connection of `version` is sent it: only the variants and reasons it knows.
fn dispatch_result(version: u16) -> impl Strategy<Value = DispatchResult> {
    let mut arms = vec![
        dispatch_response()
            .prop_map(DispatchResult::Completed)
            .boxed(),
        census(version).prop_map(DispatchResult::NoWorker).boxed(),
        n64()
            .prop_map(|worker_id| DispatchResult::WorkerLost { worker_id })
            .boxed(),
        (n64(), n64())
            .prop_map(|(worker_id, after_ms)| DispatchResult::Timeout {
                worker_id,
                after_ms,
            })
            .boxed(),
        (refused_reason(version), text())
            .prop_map(|(reason, detail)| {
                DispatchResult::Refused(RefusedDispatch { reason, detail })
            })
            .boxed(),
        Just(DispatchResult::Cancelled).boxed(),
        Just(DispatchResult::Draining).boxed(),
    ];
    if version >= 2 {
        arms.push(
            (text(), n64())
                .prop_map(|(peer, after_ms)| DispatchResult::PeerLost { peer, after_ms })
                .boxed(),
        );
        arms.push(
            n64()
                .prop_map(|after_ms| DispatchResult::ShutDown { after_ms })
                .boxed(),
        );
    }
    if version >= 4 {
        arms.push(
            (n64(), n64())
                .prop_map(|(worker_id, after_ms)| DispatchResult::HeartbeatTimeout {
                    worker_id,
                    after_ms,
                })
                .boxed(),
        );
    }
    prop::strategy::Union::new(arms)
}

fn outcome(version: u16) -> impl Strategy<Value = OutcomeFrame> {
    (n64(), dispatch_result(version)).prop_map(|(correlation, result)| OutcomeFrame {
        correlation,
        result,
    })
}

prop_compose! {
    fn worker_status()(
        (worker_id, pid, identity, node) in (n64(), n64(), text(), opt_text()),
        (activity_types, max_concurrency, in_flight, draining)
            in (texts(), n32(), n32(), any::<bool>()),
    ) -> WorkerStatus {
        WorkerStatus {
            worker_id,
            pid,
            identity,
            node,
            activity_types,
            max_concurrency,
            in_flight,
            draining,
        }
    }
}

prop_compose! {
    fn pool_status()(
        namespace in text(),
        task_queue in text(),
        channel in text(),
        workers in prop::collection::vec(worker_status(), 0..3),
    ) -> PoolStatus {
        PoolStatus { namespace, task_queue, channel, workers }
    }
}

prop_compose! {
    fn waiting_status()(
        namespace in text(),
        task_queue in text(),
        activity_type in text(),
        waiting in n32(),
        census in census(2),
    ) -> WaitingStatus {
        WaitingStatus { namespace, task_queue, activity_type, waiting, census }
    }
}

prop_compose! {
    fn counters()(
        (submitted, pushed, completed, no_worker, worker_lost, timed_out)
            in (n64(), n64(), n64(), n64(), n64(), n64()),
        (refused, cancelled, draining) in (n64(), n64(), n64()),
        (late_replies, dropped_replies, reclaimed_slots) in (n64(), n64(), n64()),
    ) -> Counters {
        Counters {
            submitted,
            pushed,
            completed,
            no_worker,
            worker_lost,
            timed_out,
            refused,
            cancelled,
            draining,
            late_replies,
            dropped_replies,
            reclaimed_slots,
        }
    }
}

prop_compose! {
    fn node_status()(
        (node_id, uptime_ms, connections, draining) in (text(), n64(), n32(), any::<bool>()),
        pools in prop::collection::vec(pool_status(), 0..3),
        waiting in prop::collection::vec(waiting_status(), 0..3),
        counters in counters(),
    ) -> NodeStatus {
        NodeStatus { node_id, uptime_ms, connections, draining, pools, waiting, counters }
    }
}

prop_compose! {
    fn status_report()(correlation in n64(), status in node_status()) -> StatusReport {
        StatusReport { correlation, status }
    }
}

prop_compose! {
    fn peer_address()(node_id in text(), address in text()) -> PeerAddress {
        PeerAddress { node_id, address }
    }
}

prop_compose! {
    fn peer_hello()(
        node_id in text(),
        incarnation in n64(),
        advertise in text(),
        peers in prop::collection::vec(peer_address(), 0..4),
    ) -> PeerHello {
        PeerHello {
            node_id,
            incarnation,
            advertise,
            peers,
            features: Vec::new(),
            extensions: Vec::new(),
        }
    }
}

prop_compose! {
    /// A group as a version-2 link tells it: of no deployment, its exclusions as draining.
    fn presence_group()(
        (activity_type, node) in (text(), opt_text()),
        (workers, slots, free, full, draining) in (n32(), n32(), n32(), n32(), n32()),
    ) -> PresenceGroup {
        PresenceGroup {
            activity_type,
            node,
            deployment: None,
            workers,
            slots,
            free,
            full,
            draining,
            probation: 0,
            unreachable: 0,
        }
    }
}

prop_compose! {
    /// A pool as a version-2 link tells it: one group per (activity type, node label) pair,
    /// each group's activity type ending in its index so that neighbours never share a pair.
    fn pool_presence()(
        channel in text(),
        workers in n32(),
        groups in prop::collection::vec(presence_group(), 0..3),
    ) -> PoolPresence {
        let groups = groups
            .into_iter()
            .enumerate()
            .map(|(at, group)| PresenceGroup {
                activity_type: format!("{}{at}", group.activity_type),
                ..group
            })
            .collect();
        PoolPresence { channel, workers, groups }
    }
}

prop_compose! {
    fn presence()(
        (reset, synced, draining) in (any::<bool>(), any::<bool>(), any::<bool>()),
        pools in prop::collection::vec(pool_presence(), 0..3),
    ) -> Presence {
        Presence { reset, synced, draining, pools, extensions: Vec::new() }
    }
}

prop_compose! {
    fn relay()(
        correlation in n64(),
        request in dispatch_request(),
        routing in node_routing(),
        reply_timeout_ms in n64(),
    ) -> Relay {
        Relay { correlation, request, extras: RequestExtras::default(), routing, reply_timeout_ms }
    }
}

fn relay_outcome(version: u16) -> impl Strategy<Value = RelayOutcome> {
    (n64(), dispatch_result(version)).prop_map(|(correlation, result)| RelayOutcome {
        correlation,
        result,
    })
}

fn served_outcome(version: u16) -> impl Strategy<Value = ServedOutcome> {
    (n64(), text(), dispatch_result(version)).prop_map(|(correlation, served_by, result)| {
        ServedOutcome {
            correlation,
            served_by,
            result,
        }
    })
}

fn peer_link_state() -> impl Strategy<Value = PeerLinkState> {
    prop::sample::select(vec![PeerLinkState::Connecting, PeerLinkState::Up])
}

prop_compose! {
    fn peer_status()(
        (node_id, address, state, synced) in (text(), text(), peer_link_state(), any::<bool>()),
        (relays_sent, relays_received, relays_in_flight) in (n64(), n64(), n32()),
        pools in texts(),
    ) -> PeerStatus {
        PeerStatus {
            node_id,
            address,
            state,
            synced,
            relays_sent,
            relays_received,
            relays_in_flight,
            pools,
        }
    }
}

prop_compose! {
    fn cluster_status()(
        correlation in n64(),
        status in node_status(),
        peers in prop::collection::vec(peer_status(), 0..3),
        peer_lost in n64(),
    ) -> ClusterStatusReport {
        ClusterStatusReport { correlation, status, peers, peer_lost }
    }
}

prop_compose! {
    fn header()(name in text(), value in text()) -> Header {
        Header { name, value }
    }
}

prop_compose! {
    fn extension()(tag in n32(), critical in any::<bool>(), value in blob()) -> Extension {
        Extension { tag, critical, value }
    }
}

fn extensions() -> impl Strategy<Value = Vec<Extension>> {
    prop::collection::vec(extension(), 0..3)
}

prop_compose! {
    fn request_extras()(
        headers in prop::collection::vec(header(), 0..4),
        priority in prop::option::of(any::<u8>()),
        (fairness_key, fairness_weight) in (opt_text(), prop::option::of(n32())),
        deployment in opt_text(),
        extensions in extensions(),
    ) -> RequestExtras {
        RequestExtras { headers, priority, fairness_key, fairness_weight, deployment, extensions }
    }
}

/// Extras with at least one field: what only a version-3 kind carries.
fn some_extras() -> impl Strategy<Value = RequestExtras> {
    request_extras().prop_filter("extras with a field", |extras| !extras.view().is_none())
}

prop_compose! {
    fn submit3()(
        correlation in n64(),
        request in dispatch_request(),
        extras in some_extras(),
        wait_for_worker_ms in prop::option::of(n64()),
        reply_timeout_ms in prop::option::of(n64()),
        routing in node_routing(),
    ) -> Submit {
        Submit { correlation, request, extras, wait_for_worker_ms, reply_timeout_ms, routing }
    }
}

prop_compose! {
    fn push3()(correlation in n64(), request in dispatch_request(), extras in request_extras())
        -> Push {
        Push { correlation, request, extras }
    }
}

prop_compose! {
    fn relay3()(
        correlation in n64(),
        request in dispatch_request(),
        extras in request_extras(),
        routing in node_routing(),
        reply_timeout_ms in n64(),
    ) -> Relay {
        Relay { correlation, request, extras, routing, reply_timeout_ms }
    }
}

prop_compose! {
    fn register3()(
        register in register(),
        deployment in opt_text(),
        instance_id in opt_text(),
        extensions in extensions(),
    ) -> Register {
        Register { deployment, instance_id, extensions, ..register }
    }
}

/// A registration that needs `Register3`: a deployment identity or an extension.
fn identified_register() -> impl Strategy<Value = Register> {
    register3().prop_filter("a field of version 3", |register| {
        register.deployment.is_some()
            || register.instance_id.is_some()
            || !register.extensions.is_empty()
    })
}

prop_compose! {
    fn welcome3()(
        welcome in welcome(),
        (max_headers, max_header_bytes) in (n32(), n32()),
        features in texts(),
    ) -> Welcome {
        Welcome {
            header_limits: Some(HeaderLimits { max_headers, max_header_bytes }),
            features,
            ..welcome
        }
    }
}

prop_compose! {
    fn presence_group3()(
        (activity_type, node, deployment) in (text(), opt_text(), opt_text()),
        (workers, slots, free, full) in (n32(), n32(), n32(), n32()),
        (draining, probation, unreachable) in (n32(), n32(), n32()),
    ) -> PresenceGroup {
        PresenceGroup {
            activity_type,
            node,
            deployment,
            workers,
            slots,
            free,
            full,
            draining,
            probation,
            unreachable,
        }
    }
}

prop_compose! {
    fn presence3()(
        (reset, synced, draining) in (any::<bool>(), any::<bool>(), any::<bool>()),
        pools in prop::collection::vec(
            (text(), n32(), prop::collection::vec(presence_group3(), 0..3)).prop_map(
                |(channel, workers, groups)| PoolPresence { channel, workers, groups }
            ),
            0..3,
        ),
        extensions in extensions(),
    ) -> Presence {
        Presence { reset, synced, draining, pools, extensions }
    }
}

prop_compose! {
    fn peer_hello3()(hello in peer_hello(), features in texts(), extensions in extensions())
        -> PeerHello {
        PeerHello { features, extensions, ..hello }
    }
}

fn event_topic() -> impl Strategy<Value = EventTopic> {
    prop::sample::select(vec![EventTopic::Workers, EventTopic::Peers])
}

prop_compose! {
    fn worker_event()(
        (worker_id, identity) in (n64(), text()),
        (deployment, instance_id) in (opt_text(), opt_text()),
        channels in texts(),
    ) -> WorkerEvent {
        WorkerEvent { worker_id, identity, deployment, instance_id, channels }
    }
}

fn node_event() -> impl Strategy<Value = NodeEvent> {
    use DepartureReason::*;
    use ExclusionReason::*;
    let exclusion = prop::sample::select(vec![Unreachable, Draining, Probation]);
    let departure = prop::sample::select(vec![
        Disconnected,
        MissedPings,
        Drained,
        NodeShutdown,
        RefusedAtRegistration,
        Superseded,
        ProtocolError,
    ]);
    prop_oneof![
        worker_event().prop_map(NodeEvent::WorkerRegistered),
        (worker_event(), exclusion)
            .prop_map(|(worker, reason)| NodeEvent::WorkerExcluded { worker, reason }),
        worker_event().prop_map(NodeEvent::WorkerRestored),
        (worker_event(), departure)
            .prop_map(|(worker, reason)| NodeEvent::WorkerDeparted { worker, reason }),
        (text(), n64(), text()).prop_map(|(node_id, incarnation, address)| NodeEvent::PeerUp {
            node_id,
            incarnation,
            address
        }),
        (text(), n64(), text()).prop_map(|(node_id, incarnation, reason)| NodeEvent::PeerDown {
            node_id,
            incarnation,
            reason
        }),
        n64().prop_map(|count| NodeEvent::Missed { count }),
    ]
}

fn ids() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(n64(), 0..4)
}

prop_compose! {
    fn pool_setting()(
        (channel, current_deployment) in (text(), opt_text()),
        (set_at_unix_ms, set_by) in (n64(), text()),
    ) -> PoolSetting {
        PoolSetting { channel, current_deployment, set_at_unix_ms, set_by }
    }
}

/// The sixteen kinds appended by version 3, with equal weight, as a version-3 connection
/// sends them.
fn version_3_frame() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        submit3().prop_map(Frame::from).boxed(),
        push3().prop_map(Frame::from).boxed(),
        relay3().prop_map(Frame::from).boxed(),
        identified_register().prop_map(Frame::from).boxed(),
        welcome3().prop_map(Frame::from).boxed(),
        presence3().prop_map(Frame::Presence).boxed(),
        peer_hello3().prop_map(Frame::from).boxed(),
        (n64(), prop::collection::vec(event_topic(), 0..3))
            .prop_map(|(correlation, topics)| {
                Frame::Subscribe(Subscribe {
                    correlation,
                    topics,
                })
            })
            .boxed(),
        (n64(), n64(), n64(), node_event())
            .prop_map(|(correlation, seq, at_unix_ms, event)| {
                Frame::from(Event {
                    correlation,
                    seq,
                    at_unix_ms,
                    event,
                })
            })
            .boxed(),
        (n64(), refusal_code(), text())
            .prop_map(|(correlation, code, reason)| {
                Frame::SubscriptionEnded(SubscriptionEnded {
                    correlation,
                    code,
                    reason,
                })
            })
            .boxed(),
        (n64(), blob())
            .prop_map(|(correlation, json)| {
                Frame::StatusDocument(StatusDocument { correlation, json })
            })
            .boxed(),
        text()
            .prop_map(|reason| Frame::Farewell(Farewell { reason }))
            .boxed(),
        (n64(), ids())
            .prop_map(|(below, also)| Frame::RelayAck(RelayAck { below, also }))
            .boxed(),
        (ids(), any::<bool>())
            .prop_map(|(unanswered, last)| Frame::Resume(Resume { unanswered, last }))
            .boxed(),
        (n64(), ids(), ids(), any::<bool>())
            .prop_map(|(handled_up_to, running, unknown, last)| {
                Frame::Resumed(Resumed {
                    handled_up_to,
                    running,
                    unknown,
                    last,
                })
            })
            .boxed(),
        prop::collection::vec(pool_setting(), 0..3)
            .prop_map(|settings| Frame::PoolSettings(PoolSettings { settings }))
            .boxed(),
    ])
}

/// The five kinds appended by version 4, with equal weight, as a version-4 connection sends
/// them.
fn version_4_frame() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        (texts(), extensions())
            .prop_map(|(features, extensions)| {
                Frame::Features(Features {
                    features,
                    extensions,
                })
            })
            .boxed(),
        (session_token(), n64())
            .prop_map(|(token, resume_grace_ms)| {
                Frame::Session(Session {
                    token,
                    resume_grace_ms,
                })
            })
            .boxed(),
        (session_token(), ids())
            .prop_map(|(token, holding)| Frame::ResumeSession(ResumeSession { token, holding }))
            .boxed(),
        (n64(), ids(), ids())
            .prop_map(|(worker_id, attached, unknown)| {
                Frame::SessionResumed(SessionResumed {
                    worker_id,
                    attached,
                    unknown,
                })
            })
            .boxed(),
        (n64(), blob())
            .prop_map(|(correlation, details)| {
                Frame::Progress(Progress {
                    correlation,
                    details,
                })
            })
            .boxed(),
    ])
}

/// The six kinds appended by version 2, with equal weight, as a version-2 connection sends
/// them. Boxed like `prop_oneof!` boxes its arms past ten: six large strategies held inline
/// overflow a debug test thread's stack.
fn version_2_frame() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        peer_hello().prop_map(Frame::from).boxed(),
        presence().prop_map(Frame::Presence).boxed(),
        relay().prop_map(Frame::from).boxed(),
        relay_outcome(2).prop_map(Frame::RelayOutcome).boxed(),
        served_outcome(2).prop_map(Frame::from).boxed(),
        cluster_status().prop_map(Frame::from).boxed(),
    ])
}

/// The outcomes a version-3 connection is sent: every result of every version.
fn version_3_outcome() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        outcome(3).prop_map(Frame::Outcome).boxed(),
        relay_outcome(3).prop_map(Frame::RelayOutcome).boxed(),
        served_outcome(3).prop_map(Frame::from).boxed(),
    ])
}

/// The outcomes a version-4 connection is sent: every result of every version.
fn version_4_outcome() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        outcome(4).prop_map(Frame::Outcome).boxed(),
        relay_outcome(4).prop_map(Frame::RelayOutcome).boxed(),
        served_outcome(4).prop_map(Frame::from).boxed(),
    ])
}

/// The kinds read by hand on decode, with equal weight, each with the version that sends it;
/// their results and routings take every variant, so bodies the hand readers decline are
/// drawn too.
fn hot_frame() -> impl Strategy<Value = (Frame, u16)> {
    prop::strategy::Union::new(vec![
        submit().prop_map(|f| (Frame::from(f), 1)).boxed(),
        push().prop_map(|f| (Frame::from(f), 1)).boxed(),
        relay().prop_map(|f| (Frame::from(f), 2)).boxed(),
        reply().prop_map(|f| (Frame::Reply(f), 1)).boxed(),
        outcome(1).prop_map(|f| (Frame::Outcome(f), 1)).boxed(),
        relay_outcome(2)
            .prop_map(|f| (Frame::RelayOutcome(f), 2))
            .boxed(),
        served_outcome(2).prop_map(|f| (Frame::from(f), 2)).boxed(),
        submit3().prop_map(|f| (Frame::from(f), 3)).boxed(),
        push3().prop_map(|f| (Frame::from(f), 3)).boxed(),
        relay3().prop_map(|f| (Frame::from(f), 3)).boxed(),
        version_3_outcome().prop_map(|f| (f, 3)).boxed(),
        version_4_outcome().prop_map(|f| (f, 4)).boxed(),
    ])
}

/// A byte to put into a body: mostly the values tags and varints turn on.
fn bent_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        0u8..4,
        Just(0x7f),
        Just(0x80),
        Just(0x81),
        Just(0xff),
        any::<u8>()
    ]
}

/// `decode_body`'s reading of `body` and serde's, when they disagree. A kind spelled in more
/// bytes than it needs is refused before either reads it, so a refused kind is not compared.
fn disagreement(body: &[u8]) -> Option<String> {
    let by_serde = reference::decode(body);
    match decode_body(body) {
        Ok(frame) if by_serde.as_ref() == Some(&frame) => None,
        Err(DecodeError::MissingKind | DecodeError::UnknownKind { .. }) => None,
        Err(_) if by_serde.is_none() => None,
        decoded => Some(format!("decoded {decoded:?}, serde {by_serde:?}")),
    }
}

/// The twenty kinds of version 1, with equal weight, as a version-1 connection sends them.
fn version_1_frame() -> impl Strategy<Value = Frame> {
    prop::strategy::Union::new(vec![
        hello().prop_map(Frame::Hello).boxed(),
        welcome().prop_map(Frame::from).boxed(),
        refusal().prop_map(Frame::HelloRefused).boxed(),
        register().prop_map(Frame::from).boxed(),
        n64()
            .prop_map(|worker_id| Frame::Registered(Registered { worker_id }))
            .boxed(),
        refusal().prop_map(Frame::RegisterRefused).boxed(),
        n32()
            .prop_map(|max_concurrency| Frame::CapacityUpdate(CapacityUpdate { max_concurrency }))
            .boxed(),
        push().prop_map(Frame::from).boxed(),
        reply().prop_map(Frame::Reply).boxed(),
        submit().prop_map(Frame::from).boxed(),
        outcome(1).prop_map(Frame::Outcome).boxed(),
        n64()
            .prop_map(|correlation| Frame::Cancel(Cancel { correlation }))
            .boxed(),
        n64().prop_map(|nonce| Frame::Ping(Ping { nonce })).boxed(),
        n64().prop_map(|nonce| Frame::Pong(Pong { nonce })).boxed(),
        n64()
            .prop_map(|grace_ms| Frame::Drain(Drain { grace_ms }))
            .boxed(),
        n64()
            .prop_map(|completed| Frame::Drained(Drained { completed }))
            .boxed(),
        text()
            .prop_map(|reason| Frame::Goodbye(Goodbye { reason }))
            .boxed(),
        (error_code(), text())
            .prop_map(|(code, reason)| Frame::Error(ErrorFrame { code, reason }))
            .boxed(),
        n64()
            .prop_map(|correlation| Frame::StatusQuery(StatusQuery { correlation }))
            .boxed(),
        status_report().prop_map(Frame::from).boxed(),
    ])
}

/// Every one of the 47 frame kinds, each with the version of the connection that sends it, each
/// version's kinds weighted by how many there are, and the outcomes of versions 3 and 4 besides.
fn frame() -> impl Strategy<Value = (Frame, u16)> {
    prop::strategy::Union::new_weighted(vec![
        (20, version_1_frame().prop_map(|f| (f, 1)).boxed()),
        (6, version_2_frame().prop_map(|f| (f, 2)).boxed()),
        (16, version_3_frame().prop_map(|f| (f, 3)).boxed()),
        (3, version_3_outcome().prop_map(|f| (f, 3)).boxed()),
        (5, version_4_frame().prop_map(|f| (f, 4)).boxed()),
        (3, version_4_outcome().prop_map(|f| (f, 4)).boxed()),
    ])
}

/// The kind `frame` goes as at `version`.
fn kind_of(frame: &Frame, version: u16) -> FrameKind {
    frame
        .kind_at(version)
        .expect("the version carries the frame")
}

/// Draws `count` values from `strategy` with a fixed seed, for coverage checks.
fn sample<S: Strategy>(strategy: S, count: usize) -> Vec<S::Value> {
    let mut runner = TestRunner::deterministic();
    (0..count)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("strategy generates")
                .current()
        })
        .collect()
}

/// A connection of `version` whose reader listed every feature it could: from version 4,
/// every variant goes as itself.
fn listing(version: u16) -> Dialect {
    Dialect::new(version, FeatureSet::ALL)
}

/// `frame` as a connection of `version` writes it to a reader that listed everything.
fn encode(frame: &Frame, version: u16) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_frame(frame, listing(version), &mut buf, DEFAULT_MAX_FRAME_LEN).expect("frame encodes");
    buf
}

// ---------------------------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------------------------

#[test]
fn a_version_2_census_reads_as_the_one_no_worker_with_later_counts_absent_and_writes_back_unchanged(
) {
    let census = body::Census {
        reason: NoWorkerReason::AllAtCapacity,
        pool_workers: 5,
        serving_activity: 4,
        compatible_workers: 3,
        at_capacity: 2,
        excluded: 1,
        last_departure_ms_ago: Some(300),
    };
    // The outcome as a version-2 node writes it, laid out by serde from its own mirror.
    let mut body = postcard::to_stdvec(&FrameKind::Outcome.discriminant()).expect("a varint");
    body.extend(
        postcard::to_stdvec(&reference::OutcomeFrame {
            correlation: 7,
            result: reference::DispatchResult::NoWorker(census),
        })
        .expect("serde encodes"),
    );
    let read = decode_body(&body).expect("a version-2 outcome decodes");
    let Frame::Outcome(outcome) = &read else {
        panic!("expected an outcome, got {read:?}");
    };
    assert_eq!(
        outcome.result,
        DispatchResult::NoWorker(Census {
            reason: NoWorkerReason::AllAtCapacity,
            pool_workers: 5,
            serving_activity: 4,
            compatible_workers: 3,
            deployment_workers: 3,
            at_capacity: 2,
            draining: 1,
            probation: None,
            unreachable: None,
            last_departure_ms_ago: Some(300),
        })
    );
    assert_eq!(
        &encode(&read, 2)[LENGTH_PREFIX_LEN..],
        &body[..],
        "written back to version 2 byte for byte"
    );
}

#[test]
fn the_frame_strategy_reaches_every_kind() {
    let kinds: HashSet<FrameKind> = sample(frame(), 1000)
        .iter()
        .map(|(frame, version)| kind_of(frame, *version))
        .collect();
    for kind in FrameKind::ALL {
        assert!(kinds.contains(&kind), "{kind} is never generated");
    }
}

/// The wire index of a result's variant as a connection of `version` is sent it. The `match`
/// makes a new variant a compile error here until the strategy covers it.
fn result_variant(result: &DispatchResult, dialect: Dialect) -> usize {
    match reference::result_on_wire(result, dialect) {
        reference::DispatchResult::Completed(_) => 0,
        reference::DispatchResult::NoWorker(_) => 1,
        reference::DispatchResult::WorkerLost { .. } => 2,
        reference::DispatchResult::Timeout { .. } => 3,
        reference::DispatchResult::Refused(_) => 4,
        reference::DispatchResult::Cancelled => 5,
        reference::DispatchResult::Draining => 6,
        reference::DispatchResult::PeerLost { .. } => 7,
        reference::DispatchResult::ShutDown { .. } => 8,
        reference::DispatchResult::NoWorker3(_) => 9,
        reference::DispatchResult::HeartbeatTimeout { .. } => 10,
    }
}

#[test]
fn the_result_strategies_reach_every_variant_of_every_version() {
    let seen: BTreeSet<usize> = (1..=4)
        .flat_map(|version| {
            sample(dispatch_result(version), 500)
                .iter()
                .map(|result| result_variant(result, listing(version)))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen, (0..11).collect());
}

#[test]
fn the_version_4_strategy_reaches_every_appended_kind() {
    let kinds: HashSet<FrameKind> = sample(version_4_frame(), 300)
        .iter()
        .map(|frame| kind_of(frame, 4))
        .collect();
    let appended: HashSet<FrameKind> = FrameKind::ALL
        .into_iter()
        .filter(|kind| kind.version() == 4)
        .collect();
    assert_eq!(kinds, appended);
}

#[test]
fn the_version_4_outcomes_reach_the_variants_a_listing_reader_is_sent() {
    let results: Vec<DispatchResult> = sample(version_4_outcome(), 600)
        .into_iter()
        .filter_map(|frame| match frame {
            Frame::Outcome(outcome) => Some(outcome.result),
            Frame::ServedOutcome(outcome) => Some(outcome.result),
            Frame::RelayOutcome(outcome) => Some(outcome.result),
            _ => None,
        })
        .collect();
    assert!(results
        .iter()
        .any(|result| matches!(result, DispatchResult::HeartbeatTimeout { .. })));
    assert!(results.iter().any(|result| matches!(
        result,
        DispatchResult::Refused(RefusedDispatch {
            reason: RefusedReason::RoleNotGranted,
            ..
        })
    )));
}

#[test]
fn the_version_2_strategy_reaches_every_appended_kind() {
    let kinds: HashSet<FrameKind> = sample(version_2_frame(), 300)
        .iter()
        .map(|frame| kind_of(frame, 2))
        .collect();
    let appended: HashSet<FrameKind> = FrameKind::ALL
        .into_iter()
        .filter(|kind| kind.version() == 2)
        .collect();
    assert_eq!(kinds, appended);
}

#[test]
fn the_version_3_strategy_reaches_every_appended_kind() {
    let kinds: HashSet<FrameKind> = sample(version_3_frame(), 600)
        .iter()
        .map(|frame| kind_of(frame, 3))
        .collect();
    let appended: HashSet<FrameKind> = FrameKind::ALL
        .into_iter()
        .filter(|kind| kind.version() == 3)
        .collect();
    assert_eq!(kinds, appended);
}

#[test]
fn every_one_byte_bend_of_a_hot_body_decodes_as_serde_decodes_it() {
    for (frame, version) in sample(hot_frame(), 96) {
        let body = encode(&frame, version)[LENGTH_PREFIX_LEN..].to_vec();
        for at in 0..body.len() {
            for byte in [0, 1, 2, 3, 0x7f, 0x80, 0x81, 0xff] {
                let mut bent = body.clone();
                bent[at] = byte;
                if let Some(disagreement) = disagreement(&bent) {
                    panic!(
                        "{} with byte {at} set to {byte:#x}: {disagreement}",
                        frame.name()
                    );
                }
            }
            if let Some(disagreement) = disagreement(&body[..at]) {
                panic!("{} cut at {at}: {disagreement}", frame.name());
            }
        }
    }
}

/// Checks that `frame`, sent on a connection of `version`, encodes to serde's postcard bytes
/// of its kind's body (the hot kinds are written by hand) and survives `encode_frame`,
/// `decode_body` and `decode_frame` unchanged, that its prefix states its body length and that
/// its body starts with its kind.
fn assert_round_trip(frame: &Frame, version: u16) -> Result<(), TestCaseError> {
    let mut buf = encode(frame, version);
    if let Some(serde_body) = reference::encode(frame, listing(version)) {
        prop_assert_eq!(&buf[LENGTH_PREFIX_LEN..], &serde_body[..]);
    }
    let encoded_len = buf.len();
    let prefix = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    prop_assert_eq!(prefix, encoded_len - LENGTH_PREFIX_LEN);
    prop_assert_eq!(
        u32::from(buf[LENGTH_PREFIX_LEN]),
        kind_of(frame, version).discriminant()
    );
    prop_assert_eq!(
        decode_body(&buf[LENGTH_PREFIX_LEN..]).ok(),
        Some(frame.clone())
    );
    let decoded = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN);
    prop_assert!(matches!(&decoded, Ok(Some(f)) if f == frame), "{decoded:?}");
    prop_assert!(buf.is_empty(), "{} bytes left over", buf.len());
    Ok(())
}

/// The borrowed form of `frame` when [`FrameRef`] has a variant of its own for its message.
fn borrowed(frame: &Frame) -> Option<FrameRef<'_>> {
    match frame {
        Frame::Submit(submit) => Some(FrameRef::Submit(submit.view())),
        Frame::Push(push) => Some(FrameRef::Push(push.view())),
        Frame::Relay(relay) => Some(FrameRef::Relay(relay.view())),
        Frame::Reply(reply) => Some(FrameRef::Reply(reply.view())),
        Frame::Outcome(outcome) => Some(FrameRef::Outcome(outcome.view())),
        Frame::ServedOutcome(outcome) => Some(FrameRef::ServedOutcome(outcome.view())),
        Frame::RelayOutcome(outcome) => Some(FrameRef::RelayOutcome(outcome.view())),
        _ => None,
    }
}

/// Checks that `frame` encodes to the same bytes borrowed as owned, whole and spliced, that
/// its borrowed form goes as the same kind and reports the same payload and body length, and
/// that it reads back in place as itself.
fn assert_borrowed_encodes_alike(frame: &Frame, version: u16) -> Result<(), TestCaseError> {
    let forms = [Some(FrameRef::Frame(frame)), borrowed(frame)];
    let kind = kind_of(frame, version);
    for form in forms.into_iter().flatten() {
        prop_assert_eq!(form.kind_at(version).ok(), Some(kind));
        prop_assert_eq!(
            form.payload().map(|payload| payload.as_slice().to_vec()),
            frame.payload().map(|payload| payload.as_slice().to_vec())
        );
        let mut buf = BytesMut::from(&b"kept"[..]);
        encode_frame_ref(&form, listing(version), &mut buf, DEFAULT_MAX_FRAME_LEN)
            .expect("frame encodes");
        prop_assert_eq!(&buf[4..], &encode(frame, version)[..]);
        if let Some(len) = form.encoded_len(listing(version)) {
            prop_assert_eq!(len, buf.len() - 4 - LENGTH_PREFIX_LEN, "encoded_len");
        }
        let mut slots = FrameSlots::default();
        let body = &buf[4 + LENGTH_PREFIX_LEN..];
        let read =
            decode_body_ref(body, version, None, &mut slots, |err| err).expect("decodes in place");
        prop_assert_eq!(read.kind_at(version).ok(), Some(kind));
        if let Some(len) = read.encoded_len(listing(version)) {
            prop_assert_eq!(
                len,
                buf.len() - 4 - LENGTH_PREFIX_LEN,
                "encoded_len read in place"
            );
        }
        prop_assert_eq!(&read.into_owned(), frame);
        let mut owned = BytesMut::new();
        let owned_splice = encode_frame_spliced(
            &FrameRef::Frame(frame),
            listing(version),
            &mut owned,
            DEFAULT_MAX_FRAME_LEN,
        );
        let mut buf = BytesMut::new();
        let splice = encode_frame_spliced(&form, listing(version), &mut buf, DEFAULT_MAX_FRAME_LEN);
        prop_assert_eq!(splice.ok(), owned_splice.ok());
        prop_assert_eq!(buf, owned);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn version_2_frames_round_trip(frame in version_2_frame()) {
        assert_borrowed_encodes_alike(&frame, 2)?;
        assert_round_trip(&frame, 2)?;
    }

    #[test]
    fn version_3_frames_round_trip(frame in version_3_frame()) {
        assert_borrowed_encodes_alike(&frame, 3)?;
        assert_round_trip(&frame, 3)?;
    }

    #[test]
    fn version_4_frames_round_trip(frame in version_4_frame()) {
        assert_borrowed_encodes_alike(&frame, 4)?;
        assert_round_trip(&frame, 4)?;
    }

    /// A version-4 reader that listed nothing is written what a version-3 reader is, and one
    /// that listed everything what serde's reference writes for it.
    #[test]
    fn a_version_4_reader_that_listed_nothing_reads_what_a_version_3_reader_reads(
        frame in version_4_outcome(),
    ) {
        let mut unlisted = BytesMut::new();
        encode_frame(&frame, 4, &mut unlisted, DEFAULT_MAX_FRAME_LEN).expect("encodes");
        prop_assert_eq!(&unlisted, &encode(&frame, 3));
        prop_assert_eq!(
            reference::encode(&frame, 4),
            Some(unlisted[LENGTH_PREFIX_LEN..].to_vec())
        );
    }

    #[test]
    fn a_version_2_stream_decodes_to_the_same_frames_in_order(
        frames in prop::collection::vec(version_2_frame(), 1..6),
        chunk_sizes in prop::collection::vec(1usize..64, 1..16),
    ) {
        let mut stream = BytesMut::new();
        for frame in &frames {
            stream.extend_from_slice(&encode(frame, 2));
        }
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        let mut rest = &stream[..];
        for &size in chunk_sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, tail) = rest.split_at(size.min(rest.len()));
            rest = tail;
            buf.extend_from_slice(chunk);
            while let Some(frame) = codec.decode(&mut buf).expect("valid stream") {
                decoded.push(frame);
            }
        }
        prop_assert_eq!(decoded, frames);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn a_hot_body_decodes_as_serde_decodes_it_however_it_is_bent(
        (frame, version) in hot_frame(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), bent_byte()), 0..3),
        cut in prop::option::of(any::<prop::sample::Index>()),
        extra in prop::collection::vec(any::<u8>(), 0..2),
    ) {
        let mut body = encode(&frame, version)[LENGTH_PREFIX_LEN..].to_vec();
        for (at, byte) in edits {
            let at = at.index(body.len());
            body[at] = byte;
        }
        if let Some(cut) = cut {
            body.truncate(cut.index(body.len() + 1));
        }
        body.extend_from_slice(&extra);
        prop_assert_eq!(disagreement(&body), None);
    }

    #[test]
    fn every_frame_kind_round_trips((frame, version) in frame()) {
        assert_round_trip(&frame, version)?;
        assert_borrowed_encodes_alike(&frame, version)?;
    }

    #[test]
    fn encoding_honours_the_maximum_exactly((frame, version) in frame(), slack in 0usize..3) {
        let body_len = encode(&frame, version).len() - LENGTH_PREFIX_LEN;
        // At the exact body length and above it encodes; one below, it is refused untouched.
        let mut buf = BytesMut::from(&b"kept"[..]);
        prop_assert!(encode_frame(&frame, listing(version), &mut buf, body_len + slack).is_ok());
        prop_assert_eq!(
            decode_frame(&mut buf.split_off(4), body_len).ok().flatten(),
            Some(frame.clone())
        );
        let mut buf = BytesMut::from(&b"kept"[..]);
        prop_assert!(encode_frame(&frame, listing(version), &mut buf, body_len - 1).is_err());
        prop_assert_eq!(&buf[..], b"kept");
    }

    #[test]
    fn chunked_streams_decode_to_the_same_frames_in_order(
        sent in prop::collection::vec(frame(), 0..6),
        chunk_sizes in prop::collection::vec(1usize..64, 1..16),
    ) {
        let mut stream = BytesMut::new();
        for (frame, version) in &sent {
            stream.extend_from_slice(&encode(frame, *version));
        }
        let frames: Vec<Frame> = sent.into_iter().map(|(frame, _)| frame).collect();

        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        let mut rest = &stream[..];
        for &size in chunk_sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, tail) = rest.split_at(size.min(rest.len()));
            rest = tail;
            buf.extend_from_slice(chunk);
            while let Some(frame) = codec.decode(&mut buf).expect("valid stream") {
                decoded.push(frame);
            }
        }
        while let Some(frame) = codec.decode_eof(&mut buf).expect("clean end of stream") {
            decoded.push(frame);
        }
        prop_assert_eq!(decoded, frames);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn a_body_with_bytes_after_the_frame_is_refused(
        (frame, version) in frame(),
        extra in prop::collection::vec(any::<u8>(), 1..8),
    ) {
        let mut body = encode(&frame, version).split_off(LENGTH_PREFIX_LEN).to_vec();
        body.extend_from_slice(&extra);
        let result = decode_body(&body);
        let sent = kind_of(&frame, version);
        prop_assert!(
            matches!(
                result,
                Err(DecodeError::TrailingBytes { kind, extra: n }) if kind == sent && n == extra.len()
            ),
            "{result:?}"
        );
    }

    #[test]
    fn a_body_cut_short_is_refused(
        (frame, version) in frame(),
        cut in any::<prop::sample::Index>(),
    ) {
        // Postcard is self-delimiting, so no strict prefix of a frame body is a frame body.
        let body = encode(&frame, version).split_off(LENGTH_PREFIX_LEN);
        let cut = cut.index(body.len());
        let result = decode_body(&body[..cut]);
        let sent = kind_of(&frame, version);
        if cut == 0 {
            prop_assert!(matches!(result, Err(DecodeError::MissingKind)), "{result:?}");
        } else {
            prop_assert!(
                matches!(result, Err(DecodeError::Malformed { kind, .. }) if kind == sent),
                "{result:?}"
            );
        }
    }

    #[test]
    fn a_stream_cut_mid_frame_ends_truncated(
        sent in prop::collection::vec(frame(), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut stream = BytesMut::new();
        let mut boundaries = vec![0];
        for (frame, version) in &sent {
            stream.extend_from_slice(&encode(frame, *version));
            boundaries.push(stream.len());
        }
        let frames: Vec<Frame> = sent.into_iter().map(|(frame, _)| frame).collect();
        let cut = cut.index(stream.len() + 1);
        let whole = boundaries.iter().filter(|&&b| b <= cut).count() - 1;
        let last_boundary = boundaries[whole];

        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&stream[..cut]);
        let mut decoded = Vec::new();
        let end = loop {
            match codec.decode_eof(&mut buf) {
                Ok(Some(frame)) => decoded.push(frame),
                other => break other,
            }
        };
        prop_assert_eq!(&decoded[..], &frames[..whole]);
        if cut == last_boundary {
            prop_assert!(matches!(end, Ok(None)), "{end:?}");
        } else {
            let expected = cut - last_boundary;
            prop_assert!(
                matches!(end, Err(CodecError::Truncated { buffered }) if buffered == expected),
                "{end:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The decoder on hostile input
// ---------------------------------------------------------------------------------------------

/// A piece of a hostile stream. Uniform random bytes nearly always start with an oversize
/// prefix, so most pieces are shaped to get past the length check first.
fn noise_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Raw noise.
        prop::collection::vec(any::<u8>(), 0..32),
        // A small stated length, a plausible kind, then arbitrary (often too few) bytes.
        // Kinds past the last known one are included, so unknown kinds come up often.
        (0u32..96, 0u8..32, prop::collection::vec(any::<u8>(), 0..64)).prop_map(
            |(len, kind, body)| {
                let mut piece = len.to_be_bytes().to_vec();
                piece.push(kind);
                piece.extend(body);
                piece
            }
        ),
        // A valid frame with one byte overwritten.
        (frame(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
            |((frame, version), at, byte)| {
                let mut piece = encode(&frame, version).to_vec();
                let at = at.index(piece.len());
                piece[at] = byte;
                piece
            }
        ),
        // A valid frame.
        frame().prop_map(|(frame, version)| encode(&frame, version).to_vec()),
    ]
}

fn noisy_stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(noise_piece(), 0..8).prop_map(|pieces| pieces.concat())
}

/// How one call to `decode_frame` ended, for coverage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Frame,
    NeedMore,
    Oversize,
    MissingKind,
    UnknownKind,
    Malformed,
    TrailingBytes,
}

/// An upper bound on `buf.capacity()` after `fed` bytes of a stream have been appended and
/// decoded with `max`.
///
/// The decoder's only allocation decision is to reserve the missing part of a partial frame
/// whose stated length already passed the limit, so it never asks for more than
/// `LENGTH_PREFIX_LEN + max` bytes in all; our appends never ask for more than `fed`. Let
/// `n = max(LENGTH_PREFIX_LEN + max, fed)`. `BytesMut` grows amortized: a new allocation is
/// the larger of twice the old one and what was asked for (offset included, itself at most
/// `fed`), and it only reallocates when the old allocation was smaller than `2 * n` (it
/// reuses the old one by shifting data back when the consumed prefix is at least the live
/// data). Hence no allocation exceeds `4 * n`, plus `Vec`'s minimum of 8 bytes. A decoder
/// reserving a stated length before checking it against `max` breaks this at once.
///
/// A per-call bound (capacity before the call, or the frame's own size) does NOT hold:
/// `reserve` may double an allocation, and reclaiming the consumed prefix raises
/// `capacity()` to the whole old allocation without allocating anything.
fn capacity_bound(max: usize, fed: usize) -> usize {
    4 * (LENGTH_PREFIX_LEN + max).max(fed) + 8
}

/// Feeds `stream` to `decode_frame` in chunks and checks each call against the contract:
/// what it consumes, when it waits, what it refuses, and the capacity bound above.
/// Stops at the first error, as a connection would.
fn feed(stream: &[u8], chunk_sizes: &[usize], max: usize) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut rest = stream;
    let mut sizes = chunk_sizes.iter().cycle();
    loop {
        match sizes.next() {
            Some(&size) if !rest.is_empty() => {
                let (chunk, tail) = rest.split_at(size.min(rest.len()));
                rest = tail;
                buf.extend_from_slice(chunk);
                fed += chunk.len();
            }
            _ => return outcomes,
        }
        loop {
            let capacity_before = buf.capacity();
            let len_before = buf.len();
            let stated = buf
                .get(..LENGTH_PREFIX_LEN)
                .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize);
            let whole_frame = stated.filter(|&s| s <= max && len_before >= LENGTH_PREFIX_LEN + s);
            // The version of the kind read: a frame goes back as a connection of it sends it,
            // to a reader that listed every feature (a version-4 kind may need one).
            let version = listing(
                buf.get(LENGTH_PREFIX_LEN)
                    .and_then(|&kind| FrameKind::from_discriminant(u32::from(kind)))
                    .map_or(PROTOCOL_VERSION, FrameKind::version),
            );
            let result = decode_frame(&mut buf, max);

            assert!(
                buf.capacity() <= capacity_bound(max, fed),
                "capacity {} > bound {} (max {max}, fed {fed}, before {capacity_before})",
                buf.capacity(),
                capacity_bound(max, fed),
            );
            let outcome = match &result {
                Ok(Some(_)) => Outcome::Frame,
                Ok(None) => Outcome::NeedMore,
                Err(DecodeError::Oversize { .. }) => Outcome::Oversize,
                Err(DecodeError::MissingKind) => Outcome::MissingKind,
                Err(DecodeError::UnknownKind { .. }) => Outcome::UnknownKind,
                Err(DecodeError::Malformed { .. }) => Outcome::Malformed,
                Err(DecodeError::TrailingBytes { .. }) => Outcome::TrailingBytes,
                Err(DecodeError::KindTooNew { .. }) => unreachable!("every kind is read"),
            };
            outcomes.push(outcome);
            match result {
                Ok(None) => {
                    // Waiting is only for a short prefix or an admissible, incomplete frame.
                    match stated {
                        None => {}
                        Some(s) => assert!(s <= max && whole_frame.is_none()),
                    }
                    assert_eq!(buf.len(), len_before, "a partial frame consumes nothing");
                    break;
                }
                Err(DecodeError::Oversize { len, max: limit }) => {
                    assert_eq!((Some(len), limit), (stated, max));
                    assert!(len > max);
                    assert_eq!(
                        buf.capacity(),
                        capacity_before,
                        "a refusal reserves nothing"
                    );
                    return outcomes;
                }
                other => {
                    // A frame or a body error: exactly one whole admissible frame was taken.
                    let body_len = whole_frame.expect("decoded without a whole frame");
                    assert_eq!(buf.len(), len_before - LENGTH_PREFIX_LEN - body_len);
                    match other {
                        Ok(Some(frame)) => {
                            // What decodes goes back in no more bytes (the encoder is
                            // canonical, the decoder at most more lenient; a version-2
                            // presence merges what it can), and from then on round-trips.
                            let mut again = BytesMut::new();
                            encode_frame(&frame, version, &mut again, max).expect("re-encodes");
                            assert!(again.len() <= LENGTH_PREFIX_LEN + body_len);
                            let once = again.clone();
                            let read = decode_frame(&mut again, max).ok().flatten();
                            let mut twice = BytesMut::new();
                            if let Some(read) = &read {
                                encode_frame(read, version, &mut twice, max).expect("re-encodes");
                            }
                            assert_eq!(twice, once);
                        }
                        Err(DecodeError::UnknownKind { discriminant }) => {
                            assert!(FrameKind::from_discriminant(discriminant).is_none());
                            return outcomes;
                        }
                        Err(DecodeError::TrailingBytes { extra, .. }) => {
                            assert!(extra > 0 && extra < body_len);
                            return outcomes;
                        }
                        _ => return outcomes,
                    }
                }
            }
        }
    }
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![1usize..8, 1usize..512], 1..8)
}

fn small_max() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..64, 0usize..4096]
}

#[test]
fn hostile_streams_reach_every_decoder_outcome() {
    let cases = sample((noisy_stream(), chunk_sizes(), small_max()), 2000);
    let seen: BTreeSet<Outcome> = cases
        .iter()
        .flat_map(|(stream, sizes, max)| feed(stream, sizes, *max))
        .collect();
    let all = BTreeSet::from([
        Outcome::Frame,
        Outcome::NeedMore,
        Outcome::Oversize,
        Outcome::MissingKind,
        Outcome::UnknownKind,
        Outcome::Malformed,
        Outcome::TrailingBytes,
    ]);
    assert_eq!(seen, all);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_decoder_survives_hostile_streams_within_its_limit(
        stream in noisy_stream(),
        chunk_sizes in chunk_sizes(),
        max in small_max(),
    ) {
        feed(&stream, &chunk_sizes, max);
    }

    #[test]
    fn the_decoder_survives_uniform_noise(
        stream in prop::collection::vec(any::<u8>(), 0..2048),
        chunk_sizes in chunk_sizes(),
        max in small_max(),
    ) {
        feed(&stream, &chunk_sizes, max);
    }

    #[test]
    fn a_refused_length_reserves_nothing(len in any::<u32>(), max in small_max()) {
        prop_assume!(len as usize > max);
        let mut buf = BytesMut::with_capacity(LENGTH_PREFIX_LEN);
        buf.put_u32(len);
        let capacity = buf.capacity();
        let result = decode_frame(&mut buf, max);
        prop_assert!(matches!(result, Err(DecodeError::Oversize { .. })), "{result:?}");
        prop_assert_eq!(buf.capacity(), capacity);
    }
}

// ---------------------------------------------------------------------------------------------
// Channel names
// ---------------------------------------------------------------------------------------------

/// Short strings over the characters that escaping is about.
fn escapey() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(".%2Eabc".chars().collect::<Vec<_>>()),
        0..8,
    )
    .prop_map(String::from_iter)
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), escapey()]
}

type Triple = (String, String, Option<String>);

fn triple() -> impl Strategy<Value = Triple> {
    (segment(), segment(), prop::option::of(segment()))
}

fn name_of((namespace, task_queue, node): &Triple) -> String {
    dispatch_channel_name(namespace, task_queue, node.as_deref())
}

/// Candidate names: mostly the real prefix followed by escape-heavy text, sometimes anything.
///
/// Names are built from tokens so that canonical escapes (`%25`, `%2E`) occur as often as
/// broken ones (`%`, `%2`, `%2e`, `%5`, `%252`...).
fn candidate_name() -> impl Strategy<Value = String> {
    let tokens = vec![
        "aion", "dispatch", ".", ".", "%", "%25", "%2E", "%2e", "%5", "2", "5", "E", "e", "a",
    ];
    let body = prop::collection::vec(prop::sample::select(tokens), 0..10).prop_map(|t| t.concat());
    prop_oneof![
        3 => body.clone().prop_map(|body| format!("aion.dispatch.{body}")),
        1 => body,
        1 => any::<String>(),
    ]
}

#[test]
fn candidate_names_both_parse_and_fail() {
    let parsed: Vec<bool> = sample(candidate_name(), 500)
        .iter()
        .map(|name| parse_channel_name(name).is_ok())
        .collect();
    let escaped_ok = sample(candidate_name(), 500)
        .iter()
        .filter(|name| name.contains('%') && parse_channel_name(name).is_ok())
        .count();
    assert!(parsed.contains(&true) && parsed.contains(&false));
    assert!(escaped_ok > 0, "no accepted name contains an escape");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn channel_names_round_trip(triple in triple()) {
        let name = name_of(&triple);
        let (namespace, task_queue, node) = triple;
        prop_assert_eq!(
            parse_channel_name(&name),
            Ok(ChannelAddress { namespace, task_queue, node })
        );
    }

    #[test]
    fn distinct_triples_have_distinct_names(a in triple(), b in triple()) {
        prop_assert_eq!(a == b, name_of(&a) == name_of(&b));
    }

    #[test]
    fn triples_differing_by_escapes_have_distinct_names(
        a in (escapey(), escapey(), prop::option::of(escapey())),
        b in (escapey(), escapey(), prop::option::of(escapey())),
    ) {
        prop_assert_eq!(a == b, name_of(&a) == name_of(&b));
    }

    #[test]
    fn only_canonical_names_parse(name in candidate_name()) {
        if let Ok(address) = parse_channel_name(&name) {
            let again = dispatch_channel_name(
                &address.namespace,
                &address.task_queue,
                address.node.as_deref(),
            );
            prop_assert_eq!(again, name);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// A request kept with its names inline reads as the request it was made from, a large
    /// input shared where it lay instead of copied.
    #[test]
    fn a_compact_request_reads_as_the_request_it_copies(request in dispatch_request()) {
        let compact = request.view().to_compact();
        let names = |name: &Option<CompactString>| name.as_deref().map(str::to_owned);
        let copied = DispatchRequest {
            namespace: compact.namespace.to_string(),
            task_queue: compact.task_queue.to_string(),
            activity_type: compact.activity_type.to_string(),
            node: names(&compact.node),
            workflow_id: compact.workflow_id.to_string(),
            ordinal: compact.ordinal,
            run_id: names(&compact.run_id),
            attempt: compact.attempt,
            input: compact.input.clone(),
            deadline_unix_ms: compact.deadline_unix_ms,
        };
        prop_assert_eq!(&copied, &request);
        let large = Bytes::from(vec![1u8; SHARE_MIN]);
        let lent = RequestRef::new(DispatchRequest {
            input: PayloadRef::of(&large),
            ..(*request.view()).clone()
        });
        prop_assert_eq!(lent.to_compact().input.as_ptr(), large.as_ptr());
    }
}
