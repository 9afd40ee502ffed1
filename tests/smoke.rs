use lintel_test_support as support;

use lintel::dispatch::DispatchOptions;
use lintel::wire::{
    ActivityOutcome, DispatchResponse, DispatchResult, Frame, Registered, Reply, Role,
};
use support::{next_frame, register, request, within, RawClient, TestNode};

#[tokio::test]
async fn a_registered_raw_worker_answers_an_in_process_dispatch() {
    let node = TestNode::start().await;
    let (mut worker, pid) = RawClient::hello(node.addr, Role::Worker).await;
    worker.send(Frame::from(register("ns", "echo", 1))).await;
    assert!(matches!(
        worker.recv().await,
        Some(Frame::Registered(Registered { .. }))
    ));
    assert_eq!(node.events.registered(pid), 1);

    let dispatcher = std::sync::Arc::clone(node.node.dispatcher());
    let dispatch = tokio::spawn(async move {
        dispatcher
            .dispatch(request("ns", "echo", "hi"), &DispatchOptions::default())
            .await
    });
    let Some(Frame::Push(push)) = next_frame(&mut worker).await else {
        panic!("expected a push");
    };
    assert_eq!(&push.request.input[..], b"hi");
    worker
        .send(Frame::Reply(Reply {
            correlation: push.correlation,
            response: DispatchResponse {
                workflow_id: push.request.workflow_id.clone(),
                ordinal: push.request.ordinal,
                run_id: push.request.run_id.clone(),
                outcome: ActivityOutcome::Success(push.request.input.clone()),
            },
        }))
        .await;
    let result = within("dispatch", dispatch).await.unwrap();
    match result {
        DispatchResult::Completed(response) => {
            assert_eq!(response.outcome, ActivityOutcome::Success("hi".into()))
        }
        other => panic!("expected completed, got {other:?}"),
    }
    drop(worker);
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.events.unregistered(pid), 1);
    node.shutdown().await;
}

/// `lintel demo --nodes 3` links three nodes, relays every dispatch entering at node-1 to the
/// workers on node-2 and node-3, prints what each node served and exits 0.
#[tokio::test]
async fn the_three_node_demo_relays_every_dispatch_and_exits_zero() {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_lintel"))
        .args(["demo", "--nodes", "3", "--dispatches", "300"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the lintel binary starts");
    // An unoptimised build with three nodes: a wider bound than `within`, still bounded.
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the demo ends within 60 s")
        .expect("the demo's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let served = |id: &str| -> u64 {
        let prefix = format!("served by {id}: ");
        stdout
            .lines()
            .find_map(|line| line.trim().strip_prefix(prefix.as_str()))
            .and_then(|count| count.parse().ok())
            .unwrap_or_else(|| panic!("no served count for {id} in:\n{stdout}"))
    };
    assert_eq!(served("node-1"), 0, "node-1 runs no workers");
    assert!(served("node-2") > 0 && served("node-3") > 0, "{stdout}");
    assert_eq!(served("node-2") + served("node-3"), 300, "{stdout}");
    assert!(stdout.contains("completed: 300"), "{stdout}");
}
