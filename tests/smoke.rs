mod support;

use lintel::dispatch::DispatchOptions;
use lintel::wire::{
    ActivityOutcome, DispatchResponse, DispatchResult, Frame, Registered, Reply, Role,
};
use support::{next_frame, register, request, within, RawClient, TestNode};

#[tokio::test]
async fn a_registered_raw_worker_answers_an_in_process_dispatch() {
    let node = TestNode::start().await;
    let (mut worker, pid) = RawClient::hello(node.addr, Role::Worker).await;
    worker
        .send(Frame::Register(register("ns", "echo", 1)))
        .await;
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
