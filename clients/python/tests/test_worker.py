"""The Worker against a real node: registration, the threading model, cancel, drain, sessions,
heartbeats, several nodes, mutual TLS."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lintel import (
    Client,
    ClientConfig,
    Completed,
    Dispatch,
    DispatchOptions,
    EventTopic,
    NoWorker3,
    Request,
    Success,
    Worker,
    WorkerConfig,
    WorkerExcluded,
    WorkerLost,
    client_context,
)
from lintel.errors import ConnectError, LintelError, ProgressTooLarge, RegistrationTimeout, WorkerStopped
from lintel.worker import WorkerConfigError
from lintel.nodes import Backoff
from lintel.wire import frames as f
from lintel.wire import types as t
from support import FakeNode, Pki, Proxy, bounded, push, within


def config(addr: str | list[str], **kw: Any) -> WorkerConfig:
    return WorkerConfig([addr] if isinstance(addr, str) else addr, ["py"], ["run"], **kw)


class Stuck:
    """A handler that sleeps until it is cancelled: ``began`` is set when it starts and
    ``cancelled`` when it is cancelled."""

    def __init__(self) -> None:
        self.began = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, req: Request) -> bytes:
        self.began.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return b""


def test_a_worker_registers_and_answers_with_headers_and_trace_context(nodes: Any) -> None:
    node = nodes()

    async def handler(req: Request) -> bytes:
        seen = [f"{h.name}={h.value}" for h in req.headers]
        trace = req.trace_context
        seen.append(f"trace={trace.trace_id if trace else None}")
        return (req.input.decode() + "|" + ",".join(seen)).encode()

    async def scenario() -> None:
        async with Worker(config(node.addr, concurrency=4), handler) as worker:
            assert await worker.wait_registered(10) > 0
            async with await Client.connect(node.addr) as client:
                options = DispatchOptions(
                    wait_for_worker_ms=5000,
                    headers=[("x-tenant", "acme")],
                    trace_context=__import__("lintel").TraceContext.parse(
                        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                    ),
                )
                result = await client.dispatch(Dispatch("py", "run", "hi"), options)
                match result:
                    case Completed(response):
                        assert response.outcome == Success(
                            b"hi|x-tenant=acme,traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,"
                            b"trace=4bf92f3577b34da6a3ce929d0e0e4736"
                        )
                    case other:
                        pytest.fail(f"unexpected {other}")

    asyncio.run(scenario())


def test_a_handler_blocking_the_callers_loop_leaves_the_worker_eligible(nodes: Any) -> None:
    # Pings every 100 ms, unreachable after 300 ms: a blocked pong would exclude the worker.
    node = nodes("--ping-interval-ms", "100", "--worker-ping-timeout-ms", "300")
    blocking = threading.Event()
    block_over = threading.Event()
    sent_inside_block: list[bool] = []
    results: list[Any] = []
    excluded: list[Any] = []

    def handler(req: Request) -> bytes:
        if req.input == b"block":
            blocking.set()
            time.sleep(2.0)  # blocks the caller's event loop, not the connection's
            block_over.set()
        return req.input

    def producer(worker_ready: threading.Event) -> None:
        async def run() -> None:
            async with await Client.connect(node.addr) as client:
                events = await client.subscribe([EventTopic.Workers])

                async def watch() -> None:
                    async for event in events:
                        if isinstance(event.event, WorkerExcluded):
                            excluded.append(event.event)

                watcher = asyncio.ensure_future(watch())
                worker_ready.set()
                first = asyncio.ensure_future(client.dispatch(Dispatch("py", "run", "block"), DispatchOptions(wait_for_worker_ms=5000)))
                await asyncio.get_running_loop().run_in_executor(None, blocking.wait, 10)
                await asyncio.sleep(1.0)  # well past the ping timeout, inside the block
                # No wait for a worker: an excluded worker would make this NoWorker3 at once.
                sent_inside_block.append(not block_over.is_set())
                second = await client.dispatch(Dispatch("py", "run", "during"))
                results.extend([await first, second])
                watcher.cancel()

        asyncio.run(run())

    async def scenario() -> None:
        async with Worker(config(node.addr, concurrency=2), handler) as worker:
            await worker.wait_registered(10)
            ready = threading.Event()
            thread = threading.Thread(target=producer, args=(ready,))
            thread.start()
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)

    asyncio.run(scenario())
    assert sent_inside_block == [True], "the second dispatch was sent after the block ended"
    assert [type(r) for r in results] == [Completed, Completed], results
    assert [r.response.outcome for r in results] == [Success(b"block"), Success(b"during")]
    # The opening probation is the only exclusion.
    assert [e.reason.name for e in excluded] in ([], ["Probation"]), excluded


def test_cancelling_the_dispatch_cancels_the_handler(nodes: Any) -> None:
    node = nodes()
    seen: list[str] = []

    async def scenario() -> None:
        began = asyncio.Event()
        observed = asyncio.Event()

        async def handler(req: Request) -> bytes:
            began.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append(f"cancelled event set: {req.cancelled.is_set()}")
                observed.set()
                raise
            return b"late"

        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                task = asyncio.ensure_future(client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
                await bounded(10, began.wait())
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await bounded(10, observed.wait())
                # The slot is free again: the next dispatch runs.
                began.clear()
                again = asyncio.ensure_future(client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000, reply_timeout_ms=300)))
                await bounded(10, began.wait())
                assert type(await bounded(10, again)).__name__ == "Timeout"

    asyncio.run(scenario())
    assert seen[0] == "cancelled event set: True"


def test_drain_finishes_what_is_in_flight_then_stops(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        began = asyncio.Event()

        async def handler(req: Request) -> bytes:
            began.set()
            await asyncio.sleep(0.5)
            return req.input

        worker = Worker(config(node.addr), handler)
        await worker.start()
        await worker.wait_registered(10)
        async with await Client.connect(node.addr) as client:
            task = asyncio.ensure_future(client.dispatch(Dispatch("py", "run", "x"), DispatchOptions(wait_for_worker_ms=5000)))
            await bounded(10, began.wait())
            await bounded(10, worker.drain())
            result = await bounded(10, task)
            assert isinstance(result, Completed) and result.response.outcome == Success(b"x")
            after = await client.dispatch(Dispatch("py", "run", "y"))
            assert isinstance(after, NoWorker3), after

    asyncio.run(scenario())


def test_a_brief_disconnect_resumes_the_session_and_delivers_the_held_result(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        proxy = await Proxy(node.addr).start()
        began = asyncio.Event()
        release = asyncio.Event()

        async def handler(req: Request) -> bytes:
            began.set()
            await release.wait()
            return b"held"

        async with Worker(config(proxy.addr), handler) as worker:
            first_id = await worker.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                task = asyncio.ensure_future(client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
                await bounded(10, began.wait())
                accepted = proxy.accepted
                proxy.cut()
                await within(10, "the worker reconnects", lambda: proxy.accepted > accepted)
                await within(10, "the worker resumes", lambda: worker.registered)
                assert worker.worker_id == first_id  # resumed, not registered anew
                release.set()
                result = await bounded(10, task)
                assert isinstance(result, Completed) and result.response.outcome == Success(b"held"), result
        await proxy.close()

    asyncio.run(scenario())


def test_past_the_grace_the_push_is_lost_and_the_worker_registers_anew(nodes: Any) -> None:
    node = nodes(env={"LINTEL_WORKER_RESUME_GRACE_MS": "200"})

    async def scenario() -> None:
        proxy = await Proxy(node.addr).start()
        handler = Stuck()

        async with Worker(config(proxy.addr), handler) as worker:
            first_id = await worker.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                task = asyncio.ensure_future(client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000)))
                await bounded(10, handler.began.wait())
                proxy.refusing = True
                proxy.cut()
                result = await bounded(10, task)
                assert isinstance(result, WorkerLost), result
                proxy.refusing = False
                await within(20, "the worker registers anew", lambda: worker.registered and worker.worker_id != first_id)
                await bounded(10, handler.cancelled.wait())  # the held handler was dropped
        await proxy.close()

    asyncio.run(scenario())


def test_heartbeats_reach_the_producer_as_progress(nodes: Any) -> None:
    node = nodes()

    async def handler(req: Request) -> bytes:
        assert req.heartbeat_timeout_ms == 2000
        for details in ("25", "50", "75"):
            req.heartbeat(details)
            await asyncio.sleep(0.1)
        return b"done"

    async def scenario() -> None:
        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                progress: asyncio.Queue[bytes] = asyncio.Queue()
                options = DispatchOptions(wait_for_worker_ms=5000, heartbeat_timeout_ms=2000, progress=progress)
                result = await client.dispatch(Dispatch("py", "run"), options)
                assert isinstance(result, Completed) and result.response.outcome == Success(b"done")
                got = [progress.get_nowait() for _ in range(progress.qsize())]
                assert got == [b"25", b"50", b"75"]

    asyncio.run(scenario())


def test_a_worker_moves_to_another_node_when_its_node_dies(nodes: Any) -> None:
    a = nodes()
    b = nodes()

    async def scenario() -> None:
        async with Worker(config([a.addr, b.addr]), lambda req: b"ok") as worker:
            await worker.wait_registered(10)
            async with await Client.connect(a.addr) as ca, await Client.connect(b.addr) as cb:
                on_a = isinstance(await ca.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=3000)), Completed)
                first, other = (a, cb) if on_a else (b, ca)
                first.stop()
                result = await other.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=15000))
                assert isinstance(result, Completed), result

    asyncio.run(scenario())


def test_a_worker_and_a_producer_speak_mutual_tls(nodes: Any, tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    cert, key = pki.leaf("node", "DNS:localhost,IP:127.0.0.1")
    wcert, wkey = pki.leaf("py-worker", "DNS:py-worker")
    pcert, pkey = pki.leaf("py-producer", "DNS:py-producer")
    node = nodes("--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.ca)

    async def scenario() -> None:
        tls = client_context(pki.ca, wcert, wkey)
        async with Worker(config(node.addr, ssl=tls), lambda req: b"secure " + req.input) as worker:
            await worker.wait_registered(10)
            client = await Client.connect(node.addr, ClientConfig(ssl=client_context(pki.ca, pcert, pkey)))
            result = await client.dispatch(Dispatch("py", "run", "hi"), DispatchOptions(wait_for_worker_ms=5000))
            assert isinstance(result, Completed) and result.response.outcome == Success(b"secure hi")
            await client.close()
            # Without a client certificate the TLS handshake is refused.
            with pytest.raises(ConnectError):
                await Client.connect(node.addr, ClientConfig(ssl=client_context(pki.ca), handshake_timeout=5))

    asyncio.run(scenario())


def test_drain_on_a_signal(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        worker = Worker(config(node.addr), lambda req: b"")
        await worker.start()
        await worker.wait_registered(10)
        worker.drain_on_signals((signal.SIGUSR1,))
        signal.raise_signal(signal.SIGUSR1)
        await bounded(10, worker.wait_stopped())

    asyncio.run(scenario())


def test_a_push_beyond_capacity_is_refused_retryable_and_a_reused_correlation_ignored() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        release = asyncio.Event()
        ran: list[bytes] = []

        async def handler(req: Request) -> bytes:
            ran.append(req.input)
            await release.wait()
            return req.input

        async with Worker(config(node.addr, concurrency=1), handler) as worker:
            await worker.wait_registered(10)
            node.send(*(push(c, b"p%d" % c) for c in range(1, 6)))
            refused = [await node.next(f.Reply) for _ in range(4)]
            assert sorted(r.correlation for r in refused) == [2, 3, 4, 5]
            for reply in refused:
                assert reply.response.outcome == t.Failure("worker is at its capacity of 1 requests", True)
                assert reply.response.workflow_id == f"wf-{reply.correlation}"
            # The node reusing a correlation in flight is ignored, not run nor refused; the
            # refusal of the push behind it shows it was read.
            node.send(push(1, b"again"), push(7, b"p7"))
            behind = await node.next(f.Reply)
            assert behind.correlation == 7 and isinstance(behind.response.outcome, t.Failure)
            await within(10, "the first push runs", lambda: ran == [b"p1"])
            release.set()
            done = await node.next(f.Reply)
            assert done.correlation == 1 and done.response.outcome == Success(b"p1")
            # The slot is free again.
            node.send(push(6, b"p6"))
            assert (await node.next(f.Reply)).response.outcome == Success(b"p6")
            assert ran == [b"p1", b"p6"]
        await node.close()

    asyncio.run(scenario())


def test_a_drain_while_the_node_is_unreachable_stops_at_once_aborting_what_is_held() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        handler = Stuck()

        worker = Worker(config(node.addr), handler)
        await worker.start()
        await worker.wait_registered(10)
        node.send(push(1))
        await bounded(10, handler.began.wait())
        await node.close()  # no node to come back to
        await within(10, "the worker loses its node", lambda: not worker.registered)
        await bounded(10, worker.drain())
        await bounded(10, handler.cancelled.wait())

    asyncio.run(scenario())


def test_a_drain_whose_node_goes_away_before_it_finishes_stops_aborting_what_is_held() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        handler = Stuck()

        worker = Worker(config(node.addr), handler)
        await worker.start()
        await worker.wait_registered(10)
        node.send(push(1))
        await bounded(10, handler.began.wait())
        draining = asyncio.ensure_future(worker.drain())
        await node.next(f.Drain)
        await node.close()
        await bounded(10, draining)
        await bounded(10, handler.cancelled.wait())

    asyncio.run(scenario())


def test_a_drain_the_node_asked_for_ends_with_its_connection() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()

        async def handler(req: Request) -> bytes:
            if req.input == b"hold":
                await asyncio.sleep(60)
            return req.input

        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            node.send(push(1, b"hold"), f.Drain(60000))
            await within(10, "the drain is read", lambda: worker._runtime is not None and worker._runtime.draining is not None)
            node.cut()
            await within(10, "the worker registers anew", lambda: worker.worker_id == 2)
            node.send(push(2, b"after"))
            reply = await node.next(f.Reply)
            assert reply.correlation == 2 and reply.response.outcome == Success(b"after")
            # The new connection is not draining: the worker answers a ping, says no Drained.
            node.send(f.Ping(7))
            while True:
                number, frame = await bounded(10, node.received.get())
                assert not isinstance(frame, (f.Drained, f.Goodbye)), (number, frame)
                if isinstance(frame, f.Pong) and frame.nonce == 7:
                    break
            assert worker._runtime is not None and worker._runtime.draining is None
        await node.close()

    asyncio.run(scenario())


def test_connections_lost_again_and_again_are_retried_after_a_growing_backoff() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        node.close_after_welcome = True  # welcomed, then lost before it registers
        backoff = Backoff(initial=0.2, max=0.8)
        async with Worker(config(node.addr, backoff=backoff), lambda req: b""):
            await within(20, "five connections", lambda: node.accepted >= 5)
        at = node.accepted_at[:5]
        gaps = [b - a for a, b in zip(at, at[1:])]
        # Each delay is at least half its base: 0.1, 0.2, 0.4, 0.4 s after losses 1 to 4.
        for i, gap in enumerate(gaps):
            assert gap >= min(0.8, 0.2 * 2**i) / 2 - 0.02, gaps
        await node.close()

    asyncio.run(scenario())


def test_a_worker_not_registered_in_time_and_bad_arguments_raise_lintel_errors() -> None:
    async def scenario() -> None:
        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # never welcomes

        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        addr = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]
        async with Worker(config(addr, handshake_timeout=1), lambda req: b"") as worker:
            with pytest.raises(RegistrationTimeout) as caught:
                await worker.wait_registered(0.2)
            assert isinstance(caught.value, LintelError) and isinstance(caught.value, TimeoutError)
            with pytest.raises(WorkerConfigError):
                worker.set_capacity(0)
        server.close()

    asyncio.run(scenario())


def test_heartbeat_details_too_long_raise_a_lintel_error(nodes: Any) -> None:
    node = nodes()
    raised: list[BaseException] = []

    async def handler(req: Request) -> bytes:
        try:
            req.heartbeat(b"x" * 4097)
        except Exception as err:
            raised.append(err)
        return b""

    async def scenario() -> None:
        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            async with await Client.connect(node.addr) as client:
                await client.dispatch(Dispatch("py", "run"), DispatchOptions(wait_for_worker_ms=5000))

    asyncio.run(scenario())
    assert len(raised) == 1 and isinstance(raised[0], ProgressTooLarge), raised


def test_a_worker_whose_callers_loop_closed_still_stops_cleanly(nodes: Any) -> None:
    node = nodes()
    started: list[Worker] = []

    async def start() -> None:
        worker = Worker(config(node.addr), lambda req: b"")
        await worker.start()
        await worker.wait_registered(10)
        started.append(worker)

    asyncio.run(start())  # the caller's loop closes while the worker runs
    worker = started[0]
    assert worker._conn_loop is not None and worker._runtime is not None and worker._thread is not None
    errors: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        worker._conn_loop.call_soon_threadsafe(worker._runtime.request_stop)
        worker._thread.join(10)
    finally:
        threading.excepthook = previous
    assert not worker._thread.is_alive()
    assert errors == []


def test_the_body_s_exception_is_not_masked_by_the_worker_closing(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        async def refused_close() -> None:
            raise WorkerStopped("closing failed")

        worker = Worker(config(node.addr), lambda req: b"")
        real_close = worker.close
        with pytest.raises(KeyError):
            async with worker:
                await worker.wait_registered(10)
                worker.close = refused_close  # type: ignore[method-assign]
                raise KeyError("the body's")
        await bounded(10, real_close())

    asyncio.run(scenario())


def test_a_signal_after_the_worker_stopped_is_ignored(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        errors: list[Any] = []
        loop.set_exception_handler(lambda _, context: errors.append(context))
        worker = Worker(config(node.addr), lambda req: b"")
        await worker.start()
        await worker.wait_registered(10)
        worker.drain_on_signals((signal.SIGUSR1,))
        await bounded(10, worker.drain())
        signal.raise_signal(signal.SIGUSR1)
        for _ in range(10):
            await asyncio.sleep(0)  # the signal's callback runs within these turns
        loop.remove_signal_handler(signal.SIGUSR1)
        assert errors == []

    asyncio.run(scenario())


def test_replies_not_proved_read_are_kept_up_to_the_capacity() -> None:
    async def scenario() -> None:
        node = await FakeNode(answer_pings=False).start()  # nothing is proved read
        async with Worker(config(node.addr, concurrency=2), lambda req: req.input) as worker:
            await worker.wait_registered(10)
            for c in (1, 2, 3):
                node.send(push(c, b"%d" % c))
                assert (await node.next(f.Reply)).correlation == c
            runtime = worker._runtime
            assert runtime is not None
            await within(10, "the newest two are kept", lambda: list(runtime.held.unproven) == [2, 3])
        await node.close()

    asyncio.run(scenario())


def test_draining_a_worker_that_already_stopped_returns(nodes: Any) -> None:
    node = nodes()

    async def scenario() -> None:
        worker = Worker(config(node.addr), lambda req: b"")
        await worker.start()
        await worker.wait_registered(10)
        await bounded(10, worker.drain())
        await bounded(10, worker.drain())  # a signal's drain and the program's, say
        await bounded(10, worker.close())

    asyncio.run(scenario())


async def frames_until(node: FakeNode, kind: type, seconds: float = 10) -> list[Any]:
    """Every frame a worker sent up to and including the first of type ``kind``, in order."""
    seen: list[Any] = []
    while not seen or not isinstance(seen[-1], kind):
        _, frame = await asyncio.wait_for(node.received.get(), seconds)
        seen.append(frame)
    return seen


def test_a_nodes_drain_with_no_grace_aborts_what_runs_at_once_and_answers_nothing_for_it() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        handler = Stuck()

        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            node.send(push(1))
            await bounded(10, handler.began.wait())
            node.send(f.Drain(0))
            sent = await frames_until(node, f.Drained)
            assert not any(isinstance(frame, f.Reply) for frame in sent), sent
            assert sent[-1] == f.Drained(0)
            assert isinstance(await node.next(f.Goodbye), f.Goodbye)
            await bounded(10, handler.cancelled.wait())

    asyncio.run(scenario())


def test_a_nodes_drain_waits_its_grace_for_a_handler_then_aborts_it_answering_nothing() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        began = asyncio.Event()

        async def handler(req: Request) -> bytes:
            began.set()
            await asyncio.sleep(60)
            return b"late"

        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            node.send(push(1))
            await bounded(10, began.wait())
            drained_at = time.monotonic()
            node.send(f.Drain(300))
            sent = await frames_until(node, f.Drained)
            assert time.monotonic() - drained_at >= 0.3
            assert not any(isinstance(frame, f.Reply) for frame in sent), sent
            assert sent[-1] == f.Drained(0)

    asyncio.run(scenario())


def test_the_workers_own_drain_tells_the_node_its_grace() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()
        worker = Worker(config(node.addr), lambda req: b"")
        await worker.start()
        await worker.wait_registered(10)
        draining = asyncio.ensure_future(worker.drain(grace=1.5))
        assert await node.next(f.Drain) == f.Drain(1500)
        assert await node.next(f.Drained) == f.Drained(0)
        await bounded(10, draining)
        await node.close()

    asyncio.run(scenario())


def test_a_requests_deadline_sets_its_signal_and_the_handler_still_answers() -> None:
    async def scenario() -> None:
        node = await FakeNode().start()

        async def handler(req: Request) -> bytes:
            await req.cancelled.wait()
            return b"past the deadline"

        async with Worker(config(node.addr), handler) as worker:
            await worker.wait_registered(10)
            deadline = int(time.time() * 1000) + 300
            request = t.DispatchRequest("py", "", "run", None, "wf-1", 0, None, 1, b"", deadline)
            node.send(f.Push3(1, request, t.RequestExtras()))
            reply = await node.next(f.Reply)
            assert reply.correlation == 1
            assert reply.response.outcome == Success(b"past the deadline")
            assert time.time() * 1000 >= deadline

    asyncio.run(scenario())
