//! Relays between two incarnations outlive the link they went out on, over real sockets on
//! 127.0.0.1: correlations continue across links to one incarnation; an origin acknowledges
//! the outcomes it holds; a serving node sends again an outcome not acknowledged and says which
//! relays it never read, runs still or cannot account for.
//!
//! Hand-written peers (listing `relay-resume`) state exactly what crosses the link.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use lintel::sdk::DispatchOptions;
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{
    feature, DispatchRequest, DispatchResult, Frame, NodeRouting, PeerHello3, PoolPresence,
    Presence, PresenceGroup, Relay3, RelayAck, RequestExtras, Resume, Resumed,
};
use support::{
    cluster_config, hand_peer, next_frame, plain, request, spawn_dispatch, within, RawClient,
    RawWorker, TestNode,
};

const NAMESPACE: &str = "ns";
const ACTIVITY: &str = "work";

fn pool() -> String {
    dispatch_channel_name(NAMESPACE, "default", None)
}

/// A hand-written peer named `hand`, incarnation `incarnation`, listing `relay-resume`, on a
/// version-3 link it dialled to `node`, past the hellos, having announced `pools`.
async fn resuming_peer(node: SocketAddr, incarnation: u64, pools: Vec<PoolPresence>) -> RawClient {
    let hello = Frame::from(PeerHello3 {
        node_id: "hand".into(),
        incarnation,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: vec![feature::FAREWELL.into(), feature::RELAY_RESUME.into()],
        extensions: Vec::new(),
    });
    let mut raw = hand_peer(node, 3, hello).await;
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools,
    }))
    .await;
    raw
}

/// The pool with `free` slots for the activity, as a peer announces it.
fn offering(free: u32) -> PoolPresence {
    PoolPresence {
        channel: pool(),
        workers: 1,
        groups: vec![PresenceGroup {
            activity_type: ACTIVITY.into(),
            node: None,
            workers: 1,
            slots: free,
            free,
            full: 0,
            draining: 0,
        }],
    }
}

/// The next frame from the node `wanted` picks, answering pings and skipping the rest.
async fn next_of(raw: &mut RawClient, wanted: fn(&Frame) -> bool) -> Frame {
    within("a frame from the node", async {
        loop {
            match next_frame(raw).await {
                Some(frame) if wanted(&frame) => return frame,
                Some(_) => {}
                None => panic!("the node closed the peer link"),
            }
        }
    })
    .await
}

fn relay3(correlation: u64, workflow_id: &str) -> Frame {
    Frame::from(Relay3 {
        correlation,
        request: DispatchRequest {
            workflow_id: workflow_id.into(),
            ..request(NAMESPACE, ACTIVITY, "")
        },
        extras: RequestExtras::default(),
        routing: NodeRouting::Any,
        reply_timeout_ms: 30_000,
    })
}

fn resume(unanswered: Vec<u64>) -> Frame {
    Frame::Resume(Resume {
        unanswered,
        last: true,
    })
}

async fn next_outcome(raw: &mut RawClient) -> (u64, DispatchResult) {
    match next_of(raw, |f| matches!(f, Frame::RelayOutcome(_))).await {
        Frame::RelayOutcome(outcome) => (outcome.correlation, outcome.result),
        _ => unreachable!("filtered"),
    }
}

async fn next_resumed(raw: &mut RawClient) -> Resumed {
    match next_of(raw, |f| matches!(f, Frame::Resumed(_))).await {
        Frame::Resumed(resumed) => resumed,
        _ => unreachable!("filtered"),
    }
}

#[tokio::test]
async fn a_serving_node_sends_again_an_outcome_not_acknowledged_and_says_what_it_never_read() {
    let node = TestNode::with_config(cluster_config("n", &[])).await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 4, "w")).await;
    let mut hand = resuming_peer(node.addr, 1, Vec::new()).await;
    hand.send(relay3(1, "one")).await;
    let push = worker.next_push().await;
    worker.reply(&push, "w").await;
    let (correlation, first) = next_outcome(&mut hand).await;
    assert_eq!(correlation, 1);

    // Not acknowledged: sent again; 2 was never read; nothing else is listed.
    hand.send(resume(vec![1, 2])).await;
    assert_eq!(next_outcome(&mut hand).await, (1, first));
    let resumed = next_resumed(&mut hand).await;
    assert_eq!(
        resumed,
        Resumed {
            handled_up_to: 1,
            running: Vec::new(),
            unknown: Vec::new(),
            last: true
        }
    );

    // One that runs is said to run; once acknowledged, an outcome is let go and unknown.
    hand.send(relay3(3, "three")).await;
    let _running = worker.next_push().await;
    hand.send(Frame::RelayAck(RelayAck {
        below: 2,
        also: Vec::new(),
    }))
    .await;
    hand.send(resume(vec![1, 3])).await;
    let resumed = next_resumed(&mut hand).await;
    assert_eq!(
        (resumed.handled_up_to, resumed.running, resumed.unknown),
        (3, vec![3], vec![1])
    );
}

#[tokio::test]
async fn an_origin_acknowledges_outcomes_and_numbers_relays_on_across_links_to_one_incarnation() {
    let node = TestNode::with_config(cluster_config("a", &[])).await;
    let mut seen = Vec::new();
    for (incarnation, relays) in [(1, 2), (1, 1), (2, 1)] {
        let mut hand = resuming_peer(node.addr, incarnation, vec![offering(4)]).await;
        node.wait_announced("hand", &pool()).await;
        for _ in 0..relays {
            let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
            let relay = match next_of(&mut hand, |f| matches!(f, Frame::Relay3(_))).await {
                Frame::Relay3(relay) => relay,
                _ => unreachable!("filtered"),
            };
            seen.push((incarnation, relay.correlation));
            hand.send(completed(relay.correlation, &relay.request))
                .await;
            within("the dispatch", dispatch)
                .await
                .expect("dispatch task");
            // The outcome is acknowledged, at the latest with the next ping.
            let ack = match next_of(&mut hand, |f| matches!(f, Frame::RelayAck(_))).await {
                Frame::RelayAck(ack) => ack,
                _ => unreachable!("filtered"),
            };
            let held = ack.below > relay.correlation || ack.also.contains(&relay.correlation);
            assert!(held, "{ack:?} leaves out {}", relay.correlation);
        }
        drop(hand);
        node.wait_peers("the hand's link down", |peers| {
            peers
                .iter()
                .all(|peer| peer.node_id != "hand" || peer.pools.is_empty())
        })
        .await;
    }
    assert_eq!(seen, [(1, 1), (1, 2), (1, 3), (2, 1)]);
}

fn options() -> DispatchOptions {
    DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(30))
        .reply_timeout(Duration::from_secs(30))
}

/// The outcome a serving node sends for a relay of `request` it completed.
fn completed(correlation: u64, request: &DispatchRequest) -> Frame {
    Frame::from(lintel::wire::RelayOutcome {
        correlation,
        result: DispatchResult::Completed(lintel::wire::DispatchResponse {
            workflow_id: request.workflow_id.clone(),
            ordinal: request.ordinal,
            run_id: request.run_id.clone(),
            outcome: lintel::wire::ActivityOutcome::Success(bytes::Bytes::from_static(b"hand")),
        }),
    })
}
