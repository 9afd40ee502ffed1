"""The producer Client: every dispatch option, outcomes as a matchable union, cancel,
failover and retry rules, events, and a newer node's unknown outcome."""

from __future__ import annotations

import asyncio
import signal
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from lintel import (
    Client,
    ClientConfig,
    Completed,
    Dispatch,
    DispatchOptions,
    EventTopic,
    Failure,
    HeartbeatTimeout,
    NoWorker3,
    NoWorkerReason,
    Refused,
    RefusedReason,
    Request,
    RetryPolicy,
    RetryReason,
    Success,
    Timeout,
    Worker,
    WorkerConfig,
    WorkerRegistered,
)
from lintel.errors import AnswerTimeout, ConnectionLost, InvalidDispatch, LintelError, UnknownOutcome
from lintel.wire import FrameDecoder, encode_frame
from lintel.wire import frames as f
from lintel.wire import types as t
from support import bounded, within


async def producer_frames(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> AsyncIterator[Any]:
    """The frames a producer sends a fake version-4 node, its ``Hello`` answered with a
    ``Welcome3``; ends with the stream."""
    decoder = FrameDecoder()
    limits = t.Limits(1 << 22, 1024, 60000, 3, 255, 64)
    while data := await reader.read(65536):
        decoder.feed(data)
        while (frame := decoder.next_frame()) is not None:
            if isinstance(frame, f.Hello):
                writer.write(encode_frame(f.Welcome3(4, "fake", 1, limits, t.HeaderLimits(32, 8192), [])))
            else:
                yield frame


async def fake_node_at(serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]) -> tuple[asyncio.Server, str]:
    """A fake node serving each connection with ``serve`` on an ephemeral loopback port."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, "127.0.0.1:%d" % server.sockets[0].getsockname()[1]


def worker(addr: str, handler: Any, **kw: Any) -> Worker:
    return Worker(WorkerConfig([addr], ["py"], ["run"], **kw), handler)


def output(result: Any) -> bytes:
    match result:
        case Completed(t.DispatchResponse(outcome=Success(data))):
            return data
        case other:
            raise AssertionError(f"not a success: {other}")


def test_every_option_reaches_the_node_and_the_worker(nodes: Any) -> None:
    node = nodes()

    async def echo_extras(req: Request) -> bytes:
        e = req.extras
        return repr((e.priority, e.fairness_key, e.fairness_weight, e.deployment, req.header("x-a"))).encode()

    async def scenario() -> None:
        async with worker(node.addr, echo_extras, label="box-1", deployment="v2", concurrency=2) as w:
            await w.wait_registered(10)
            async with await Client.connect([node.addr]) as client:
                base = dict(wait_for_worker_ms=5000, reply_timeout_ms=5000, deployment="v2")
                full = DispatchOptions(
                    headers=[("x-a", "1")], priority=2, fairness_key="acme", fairness_weight=2000, **base
                )
                assert output(await client.dispatch(Dispatch("py", "run"), full)) == b"(2, 'acme', 2000, 'v2', '1')"
                for routing in (dict(pin="box-1"), dict(prefer=["box-9", "box-1"]), dict(require=["box-1"])):
                    assert output(await client.dispatch(Dispatch("py", "run"), DispatchOptions(**routing, **base)))
                nobody = await client.dispatch(Dispatch("py", "run"), DispatchOptions(require=["box-9"], deployment="v2"))
                match nobody:
                    case NoWorker3(census) if census.reason == NoWorkerReason.NodeFilterMatchedNobody:
                        pass
                    case other:
                        pytest.fail(f"unexpected {other}")
                other_deployment = await client.dispatch(Dispatch("py", "run"), DispatchOptions(deployment="v3"))
                assert isinstance(other_deployment, NoWorker3)
                assert other_deployment.census.reason == NoWorkerReason.DeploymentMatchedNobody
                with pytest.raises(InvalidDispatch):
                    await client.dispatch(Dispatch("py", "run"), DispatchOptions(priority=9))
                with pytest.raises(InvalidDispatch):
                    await client.dispatch(Dispatch("py", "run"), DispatchOptions(headers=[("bad name", "x")]))

    asyncio.run(scenario())


def test_waiting_for_a_worker_timeouts_and_heartbeat_timeouts_are_their_own_outcomes(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        async with await Client.connect(node.addr) as client:
            none = await client.dispatch(Dispatch("py", "run"))
            assert isinstance(none, NoWorker3) and none.census.reason == NoWorkerReason.PoolEmpty
            waiting = asyncio.ensure_future(client.dispatch(Dispatch("py", "run", "w"), DispatchOptions(wait_for_worker_ms=10000)))

            async def slow(req: Request) -> bytes:
                if req.input == b"w":
                    return b"waited"
                await asyncio.sleep(30)
                return b""

            async with worker(node.addr, slow, concurrency=4) as w:
                await w.wait_registered(10)
                assert output(await bounded(15, waiting)) == b"waited"
                timed = await client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000, reply_timeout_ms=300))
                assert isinstance(timed, Timeout) and timed.after_ms == 300
                beat = await client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000, heartbeat_timeout_ms=300))
                assert isinstance(beat, HeartbeatTimeout), beat

    asyncio.run(scenario())


def test_a_handlers_failure_is_a_completed_failure(nodes: Any) -> None:
    node = nodes()

    def broken(req: Request) -> bytes:
        raise ValueError("no such order")

    async def scenario() -> None:
        async with worker(node.addr, broken) as w:
            await w.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                result = await client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000))
                assert isinstance(result, Completed)
                assert result.response.outcome == Failure("ValueError: no such order", False)

    asyncio.run(scenario())


def test_a_draining_node_is_left_and_the_dispatch_retried_on_another(nodes: Any) -> None:
    a = nodes()
    b = nodes()

    async def scenario() -> None:
        holding = asyncio.Event()

        async def hold(req: Request) -> bytes:
            holding.set()
            await asyncio.sleep(30)
            return b""

        async with worker(a.addr, hold) as wa, worker(b.addr, lambda req: b"from b") as wb:
            await wa.wait_registered(10)
            await wb.wait_registered(10)
            holder = await Client.connect(a.addr)
            # A dispatch in flight keeps node a draining (not stopped) once interrupted.
            held = asyncio.ensure_future(holder.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
            await bounded(10, holding.wait())
            # A client of both nodes, on a (the first node of a round is chosen at random).
            for _ in range(40):
                client = await Client.connect([a.addr, b.addr])
                if client.node_addr == a.addr:
                    break
                await client.close()
            assert client.node_addr == a.addr
            a.signal(signal.SIGINT)
            await within(10, "node a drains", lambda: any("draining" in line for line in a.lines))
            dispatched = await client.submit(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000))
            assert output(dispatched.result) == b"from b"
            assert dispatched.node == b.addr
            assert [r.reason for r in dispatched.retried] == [RetryReason.DRAINING]
            assert dispatched.retried[0].node == a.addr
            held.cancel()
            await client.close()
            await holder.close()

    asyncio.run(scenario())


def test_dispatches_pending_on_a_draining_node_still_complete_after_the_client_moves_on(nodes: Any) -> None:
    a = nodes()
    b = nodes()

    async def scenario() -> None:
        holding = asyncio.Event()
        release = asyncio.Event()

        async def hold(req: Request) -> bytes:
            holding.set()
            await release.wait()
            return b"from a"

        async with worker(a.addr, hold) as wa, worker(b.addr, lambda req: b"from b") as wb:
            await wa.wait_registered(10)
            await wb.wait_registered(10)
            for _ in range(40):
                client = await Client.connect([a.addr, b.addr])
                if client.node_addr == a.addr:
                    break
                await client.close()
            assert client.node_addr == a.addr
            never = DispatchOptions(wait_for_worker_ms=5000, retry=RetryPolicy.never())
            first = asyncio.ensure_future(client.submit(Dispatch("py", "run"), never))
            await bounded(10, holding.wait())
            a.signal(signal.SIGINT)
            await within(10, "node a drains", lambda: any("draining" in line for line in a.lines))
            second = await bounded(10, client.submit(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
            assert second.node == b.addr and output(second.result) == b"from b"
            assert [r.reason for r in second.retried] == [RetryReason.DRAINING]
            # The node answers what it took before draining: the old connection stays for it.
            release.set()
            held = await bounded(10, first)
            assert held.node == a.addr and output(held.result) == b"from a"
            await client.close()

    asyncio.run(scenario())


def test_a_connection_lost_after_the_submission_says_it_may_have_run(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        began = asyncio.Event()

        async def hold(req: Request) -> bytes:
            began.set()
            await asyncio.sleep(30)
            return b""

        async with worker(node.addr, hold) as w:
            await w.wait_registered(10)
            client = await Client.connect(node.addr, ClientConfig(handshake_timeout=2))
            task = asyncio.ensure_future(client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
            await bounded(10, began.wait())
            node.stop()
            with pytest.raises(ConnectionLost) as caught:
                await bounded(10, task)
            assert caught.value.may_have_run is True
            await client.close()

    asyncio.run(scenario())


def test_the_retry_policy_retries_only_what_proves_nothing_ran() -> None:
    policy = RetryPolicy()
    assert policy.retries(t.Draining()) is RetryReason.DRAINING
    assert policy.retries(Refused(t.RefusedDispatch(RefusedReason.TooManyInFlight, ""))) is RetryReason.REFUSED
    assert policy.retries(Refused(t.RefusedDispatch(RefusedReason.InvalidRequest, ""))) is None
    assert policy.retries(t.WorkerLost(1)) is None
    assert RetryPolicy(idempotent=True).retries(t.WorkerLost(1)) is RetryReason.MAY_HAVE_RUN
    assert policy.retries(NoWorker3(t.Census3(NoWorkerReason.PoolEmpty, 0, 0, 0, 0, 0, 0, 0, 0, None))) is None
    assert RetryPolicy(no_worker=True).retries(NoWorker3(t.Census3(NoWorkerReason.PoolEmpty, 0, 0, 0, 0, 0, 0, 0, 0, None))) is RetryReason.NO_WORKER
    assert RetryPolicy.never().max_unsent_attempts() == 1


def test_a_subscription_sees_a_worker_register(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        async with await Client.connect(node.addr) as client:
            events = await client.subscribe([EventTopic.Workers])
            async with worker(node.addr, lambda req: b"", identity="py-events") as w:
                await w.wait_registered(10)

                async def first_registered() -> Any:
                    async for event in events:
                        if isinstance(event.event, WorkerRegistered):
                            return event.event.worker
                    return None

                seen = await bounded(10, first_registered())
                assert seen.identity == "py-events"
            await events.close()

    asyncio.run(scenario())


def test_an_unknown_outcome_variant_fails_that_dispatch_and_the_connection_goes_on() -> None:
    async def fake_node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered = 0
        async for frame in producer_frames(reader, writer):
            if isinstance(frame, f.Submit3):
                if answered == 0:
                    # ServedOutcome with DispatchResult variant 11, from a newer node.
                    body = bytes([24]) + bytes([frame.correlation]) + b"\x04fake" + bytes([11, 42])
                    writer.write(len(body).to_bytes(4, "big") + body)
                else:
                    done = f.ServedOutcome(frame.correlation, "fake", Completed(t.DispatchResponse("", 0, None, Success(b"ok"))))
                    writer.write(encode_frame(done))
                answered += 1
        writer.close()

    async def scenario() -> None:
        server, addr = await fake_node_at(fake_node)
        async with await Client.connect(addr) as client:
            with pytest.raises(UnknownOutcome) as caught:
                await bounded(10, client.dispatch(Dispatch("py", "run")))
            assert caught.value.index == 11 and caught.value.may_have_run
            assert output(await bounded(10, client.dispatch(Dispatch("py", "run")))) == b"ok"
        server.close()

    asyncio.run(scenario())


def test_a_node_closing_mid_frame_fails_the_dispatch_without_a_hang() -> None:
    async def fake_node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for frame in producer_frames(reader, writer):
            if isinstance(frame, f.Submit3):
                done = f.ServedOutcome(frame.correlation, "fake", Completed(t.DispatchResponse("", 0, None, Success(b"ok"))))
                writer.write(encode_frame(done)[:9])  # half the frame, then the close
                await writer.drain()
                writer.close()
                return

    async def scenario() -> None:
        server, addr = await fake_node_at(fake_node)
        client = await Client.connect(addr)
        with pytest.raises(ConnectionLost) as caught:
            await bounded(10, client.dispatch(Dispatch("py", "run"), DispatchOptions(retry=RetryPolicy.never())))
        assert caught.value.may_have_run
        assert "the stream ended 9 bytes into a frame" in caught.value.reason, caught.value.reason
        await client.close()
        server.close()

    asyncio.run(scenario())


def test_the_frame_bound_is_the_one_negotiated_with_the_node(nodes: Any) -> None:
    node = nodes(env={"LINTEL_MAX_FRAME_LEN": "65536"})

    async def scenario() -> None:
        async with await Client.connect(node.addr) as client:
            assert client.welcome.limits.max_frame_len == 65536
            assert client._link.conn.read_limit == 65536
            with pytest.raises(InvalidDispatch):
                await client.dispatch(Dispatch("py", "run", b"x" * (65536 - 16384 + 1)))
            fits = await client.dispatch(Dispatch("py", "run", b"x" * 1000))
            assert isinstance(fits, NoWorker3)

    asyncio.run(scenario())


def test_calls_without_an_answer_in_time_and_bad_options_raise_lintel_errors() -> None:
    async def silent_node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for _ in producer_frames(reader, writer):
            pass  # answers nothing
        writer.close()

    async def scenario() -> None:
        server, addr = await fake_node_at(silent_node)
        async with await Client.connect(addr) as client:
            with pytest.raises(AnswerTimeout) as status:
                await bounded(10, client.status(timeout=0.2))
            assert isinstance(status.value, LintelError) and isinstance(status.value, TimeoutError)
            with pytest.raises(AnswerTimeout):
                await bounded(10, client.subscribe(timeout=0.2))
            assert client._link.subscriptions == {}  # the timed-out subscription is gone
            with pytest.raises(InvalidDispatch):
                await client.dispatch(Dispatch("py", "run"), DispatchOptions(pin="a", require=["b"]))
        server.close()

    asyncio.run(scenario())
