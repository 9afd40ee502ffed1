"""The Python agent of the feature matrix (tests/feature_matrix.rs), per the SDK contract:

    python3 -m lintel_matrix worker   --addr HOST:PORT --scenario NAME [--deployment D] [--identity ID]
    python3 -m lintel_matrix producer --addr HOST:PORT --scenario NAME [--deployment D] [--identity ID]

Namespace ``matrix``, task queue the scenario, activity ``run``. Lines on stdout: the worker
says ``ready``, ``started``, ``cancelled``, ``drained``; the producer ``ready`` where the
scenario waits for the runner, then ``pass`` (exit 0) or ``fail: REASON`` (exit 1). Every run
ends by itself within 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from lintel import (
    Client,
    Completed,
    Dispatch,
    DispatchOptions,
    EventTopic,
    NoWorker,
    NoWorker3,
    NoWorkerReason,
    Request,
    Success,
    Timeout,
    TraceContext,
    Worker,
    WorkerConfig,
    WorkerLost,
    WorkerRegistered,
)

NAMESPACE = "matrix"
ACTIVITY = "run"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SCENARIOS = ("echo", "no-worker", "worker-lost", "timeout", "cancel", "drain", "headers", "deployment", "events", "heartbeat")
#: Every agent is gone by then (the contract's bound is 30 s).
LIFETIME = 27.0
#: Dispatches a worker answers before it leaves by itself, per scenario (None: until stopped).
WORK = {"echo": 1, "headers": 1, "deployment": 1, "heartbeat": 1, "drain": 1, "timeout": 1, "cancel": 1}


def say(line: str) -> None:
    print(line, flush=True)


class Failed(Exception):
    pass


# Worker ----------------------------------------------------------------------------------------


async def run_worker(args: argparse.Namespace) -> int:
    scenario = args.scenario
    done = asyncio.Event()
    finished = 0

    def one_done() -> None:
        nonlocal finished
        finished += 1
        if WORK.get(scenario) is not None and finished >= WORK[scenario]:
            done.set()

    async def handler(req: Request) -> bytes:
        say("started")
        try:
            if scenario in ("worker-lost", "timeout", "cancel"):
                await asyncio.Event().wait()  # until cancelled (or killed)
            if scenario == "drain":
                await asyncio.sleep(0.5)
                return req.input
            if scenario == "headers":
                lines = sorted(f"{h.name}={h.value}\n" for h in req.headers)
                return "".join(lines).encode()
            if scenario == "deployment":
                return (args.deployment or "").encode()
            if scenario == "heartbeat":
                for details in ("25", "50", "75"):
                    req.heartbeat(details)
                    await asyncio.sleep(0.1)
                return b"done"
            return req.input
        except asyncio.CancelledError:
            say("cancelled")
            raise
        finally:
            asyncio.get_running_loop().call_soon(one_done)

    config = WorkerConfig(
        [args.addr], [NAMESPACE], [ACTIVITY], task_queue=scenario,
        identity=args.identity or f"matrix-python-{scenario}", concurrency=4,
        deployment=args.deployment,
    )  # fmt: skip
    worker = Worker(config, handler)
    await worker.start()
    await worker.wait_registered(10)
    # The SDK's own signal handling drains the worker on SIGTERM or SIGINT.
    worker.drain_on_signals((signal.SIGTERM, signal.SIGINT), grace=1.5)
    say("ready")
    finished_all = asyncio.ensure_future(done.wait())
    stopped = asyncio.ensure_future(worker.wait_stopped())
    await asyncio.wait([finished_all, stopped], timeout=LIFETIME - 2, return_when=asyncio.FIRST_COMPLETED)
    finished_all.cancel()
    if stopped.done():
        await stopped  # raises what stopped the worker, if not a drain
        say("drained")
        return 0
    stopped.cancel()
    if done.is_set():
        await asyncio.wait_for(worker.drain(grace=1.5), 5)
        say("drained")
    else:
        await worker.close()
    return 0


# Producer --------------------------------------------------------------------------------------


def expect_output(result: Any, wanted: bytes) -> None:
    match result:
        case Completed(response) if response.outcome == Success(wanted):
            return
        case other:
            raise Failed(f"expected Success({wanted!r}), got {other}")


async def run_producer(args: argparse.Namespace) -> int:
    scenario = args.scenario
    client = await Client.connect(args.addr)
    wait = DispatchOptions(wait_for_worker_ms=10000)
    try:
        dispatch = Dispatch(NAMESPACE, ACTIVITY, f"matrix-{scenario}", task_queue=scenario)
        if scenario == "echo":
            dispatch.input = "matrix-echo"
            expect_output(await client.dispatch(dispatch, wait), b"matrix-echo")
        elif scenario == "no-worker":
            result = await client.dispatch(dispatch, DispatchOptions(wait_for_worker_ms=0))
            match result:
                case NoWorker3(census) | NoWorker(census) if census.reason == NoWorkerReason.PoolEmpty:
                    pass
                case other:
                    raise Failed(f"expected no worker (PoolEmpty), got {other}")
        elif scenario == "worker-lost":
            result = await client.dispatch(dispatch, DispatchOptions(wait_for_worker_ms=10000, reply_timeout_ms=25000))
            if not isinstance(result, WorkerLost):
                raise Failed(f"expected WorkerLost, got {result}")
        elif scenario == "timeout":
            result = await client.dispatch(dispatch, DispatchOptions(wait_for_worker_ms=10000, reply_timeout_ms=500))
            if not isinstance(result, Timeout):
                raise Failed(f"expected Timeout, got {result}")
        elif scenario == "cancel":
            task = asyncio.ensure_future(client.dispatch(dispatch, DispatchOptions(wait_for_worker_ms=10000, reply_timeout_ms=20000)))
            say("ready")
            line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            if line.strip() != "go":
                raise Failed(f"expected go on stdin, read {line!r}")
            if task.done():
                raise Failed(f"the dispatch ended before its cancel: {task.result()}")
            task.cancel()
            try:
                await task
                raise Failed("the dispatch did not report cancelled")
            except asyncio.CancelledError:
                pass
        elif scenario == "drain":
            expect_output(await client.dispatch(dispatch, wait), dispatch.input.encode())  # type: ignore[union-attr]
        elif scenario == "headers":
            options = DispatchOptions(
                wait_for_worker_ms=10000,
                headers=[("x-matrix", "one"), ("x-tenant", "acme")],
                trace_context=TraceContext.parse(TRACEPARENT),
            )
            wanted = f"traceparent={TRACEPARENT}\nx-matrix=one\nx-tenant=acme\n".encode()
            expect_output(await client.dispatch(dispatch, options), wanted)
        elif scenario == "deployment":
            for name in ("green", "blue"):
                options = DispatchOptions(wait_for_worker_ms=10000, deployment=name)
                expect_output(await client.dispatch(dispatch, options), name.encode())
        elif scenario == "events":
            events = await client.subscribe([EventTopic.Workers])
            say("ready")
            identity = args.identity or "matrix-events"

            async def registered() -> None:
                async for event in events:
                    if isinstance(event.event, WorkerRegistered) and event.event.worker.identity == identity:
                        return
                raise Failed("the subscription ended")

            try:
                await asyncio.wait_for(registered(), 10)
            except asyncio.TimeoutError:
                raise Failed(f"no worker-registered event for {identity} within 10 s") from None
        elif scenario == "heartbeat":
            progress: asyncio.Queue[bytes] = asyncio.Queue()
            options = DispatchOptions(wait_for_worker_ms=10000, heartbeat_timeout_ms=2000, progress=progress)
            result = await client.dispatch(dispatch, options)
            got = [progress.get_nowait() for _ in range(progress.qsize())]
            if got != [b"25", b"50", b"75"]:
                raise Failed(f"expected progress 25, 50, 75, got {got}")
            expect_output(result, b"done")
        else:
            raise Failed(f"unknown scenario {scenario}")
    finally:
        await client.close()
    say("pass")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="lintel_matrix")
    parser.add_argument("role", choices=("worker", "producer"))
    parser.add_argument("--addr", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--deployment")
    parser.add_argument("--identity")
    args = parser.parse_args()
    if args.scenario not in SCENARIOS:
        say(f"unsupported: scenario {args.scenario}")
        return 3
    run = run_worker if args.role == "worker" else run_producer

    async def bounded() -> int:
        return await asyncio.wait_for(run(args), LIFETIME)

    try:
        return asyncio.run(bounded())
    except Failed as err:
        say(f"fail: {err}")
    except asyncio.TimeoutError:
        say(f"fail: {args.role} did not finish within {LIFETIME} s")
    except Exception as err:  # every other error is this agent's failure, said on one line
        say(f"fail: {type(err).__name__}: {err}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
