#!/usr/bin/env python3
"""A lintel producer in the Python standard library alone (see README.md).

Submits ``--count`` dispatches of one activity, keeping at most the node's ``max_in_flight``
(and at most 256) in flight. Each may wait ``--wait-for-worker-ms`` for a free worker slot,
so more dispatches than the workers' capacity queue at the node instead of ending
no-worker. Prints one line per outcome as it arrives:

    dispatch 3: completed, served by node-a: success b'HELLO-3'
    dispatch 0: no-worker, decided by node-a: reason=PoolEmpty pool_workers=0 ...

(``NODE`` is ServedOutcome's ``served_by``: the node whose worker replied, or that decided
the outcome when no reply came; a version-1 connection has no such field.)
Then ``summary: completed=N ...`` and, with ``--status``, the node's status. Exits 0 only
if every dispatch completed (a Failure is a completed dispatch: the activity's answer).
"""

import argparse
import os
import queue
import sys
import threading
import time
from collections import Counter

import lintel_wire as w

MAX_WINDOW = 256


def log(*parts) -> None:
    print(*parts, flush=True)


def describe(result) -> str:
    if isinstance(result, w.Completed):
        outcome = result.response.outcome
        if isinstance(outcome, w.Success):
            return f"success {outcome.data!r}"
        return f"failure {outcome.message!r} retryable={outcome.retryable}"
    if isinstance(result, w.NoWorker):
        c = result.census
        text = (
            f"reason={c.reason} pool_workers={c.pool_workers} "
            f"serving_activity={c.serving_activity} compatible_workers={c.compatible_workers} "
            f"at_capacity={c.at_capacity} excluded={c.excluded}"
        )
        if c.last_departure_ms_ago is not None:
            text += f" last_departure_ms_ago={c.last_departure_ms_ago}"
        return text
    if isinstance(result, w.WorkerLost):
        return f"worker_id={result.worker_id}"
    if isinstance(result, w.Timeout):
        return f"worker_id={result.worker_id} after_ms={result.after_ms}"
    if isinstance(result, w.RefusedDispatch):
        return f"reason={result.reason} detail={result.detail!r}"
    if isinstance(result, w.PeerLost):
        return f"peer={result.peer} after_ms={result.after_ms}"
    if isinstance(result, w.ShutDown):
        return f"after_ms={result.after_ms}"
    return "-"  # Cancelled, Draining


def print_status(status: w.NodeStatus) -> None:
    log(
        f"status node={status.node_id} uptime_ms={status.uptime_ms} "
        f"connections={status.connections} draining={status.draining}"
    )
    for pool in status.pools:
        log(f"status pool {pool.namespace}/{pool.task_queue} channel={pool.channel}")
        for worker in pool.workers:
            log(
                f"status   worker {worker.worker_id} identity={worker.identity} "
                f"activities={','.join(worker.activity_types)} capacity={worker.max_concurrency} "
                f"in_flight={worker.in_flight} draining={worker.draining}"
            )
    for waiting in status.waiting:
        address = f"{waiting.namespace}/{waiting.task_queue}/{waiting.activity_type}"
        log(f"status waiting {address}: {waiting.waiting}")
    log("status counters " + " ".join(f"{k}={v}" for k, v in status.counters.items()))


class Reader(threading.Thread):
    """Reads every frame from the node: answers pings, hands outcomes and statuses over."""

    def __init__(self, conn: w.Connection, window: threading.Semaphore):
        super().__init__(daemon=True)
        self.conn = conn
        self.window = window
        self.frames = queue.Queue()
        self.closing = False

    def run(self) -> None:
        while True:
            try:
                frame = self.conn.recv()
            except w.WireError as err:
                if not self.closing:
                    self.conn.report(err)
                self.frames.put(("closed", f"bad frame from the node: {err}"))
                return
            except OSError as err:
                self.frames.put(("closed", f"connection lost: {err}"))
                return
            if frame is None:
                self.frames.put(("closed", "the node closed the connection"))
                return
            if isinstance(frame, w.Ping):
                try:
                    self.conn.send(w.Pong(frame.nonce))
                except OSError:
                    pass
            elif isinstance(frame, (w.Outcome, w.ServedOutcome)):
                self.window.release()
                self.frames.put(("outcome", frame))
            elif isinstance(frame, (w.Status, w.ClusterStatus)):
                self.frames.put(("status", frame))
            elif isinstance(frame, w.Goodbye):
                self.frames.put(("closed", f"goodbye from the node: {frame.reason}"))
                return
            elif isinstance(frame, w.Error):
                self.frames.put(("closed", f"error from the node: {frame.code}: {frame.reason}"))
                return
            elif not isinstance(frame, w.Pong):
                self.conn.report(w.UnexpectedFrame(type(frame).__name__))
                self.frames.put(("closed", f"unexpected {type(frame).__name__} from the node"))
                return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:7400", help="the node, HOST:PORT")
    parser.add_argument("--namespace", default="demo")
    parser.add_argument("--task-queue", default="", help="empty means default")
    parser.add_argument("--activity", default="echo")
    parser.add_argument("--count", type=int, default=10, help="dispatches to submit")
    parser.add_argument(
        "--input", default="hello-{i}", help="the input; {i} stands for the dispatch's number"
    )
    parser.add_argument(
        "--wait-for-worker-ms",
        type=int,
        default=5000,
        help="how long a dispatch may wait for a free worker; 0 sends none: no-worker at once",
    )
    parser.add_argument("--reply-timeout-ms", type=int, default=None)
    parser.add_argument(
        "--protocol", type=int, choices=(1, 2), default=2, help="the highest version to speak"
    )
    parser.add_argument("--status", action="store_true", help="print the node's status at the end")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for everything, at most"
    )
    parser.add_argument("--token", default=os.environ.get("LINTEL_AUTH_TOKEN"))
    w.add_tls_arguments(parser)
    args = parser.parse_args()
    if args.count < 0:
        parser.error("--count must not be negative")

    try:
        name = f"py-producer-{os.getpid()}"
        conn = w.connect(
            args.addr,
            "Producer",
            name,
            args.token,
            max_version=args.protocol,
            tls=w.tls_from_arguments(args),
            server_name=args.tls_server_name,
        )
    except (OSError, ValueError, w.Refused, w.WireError) as err:
        log(f"producer could not connect: {err}")
        return 1
    window = threading.Semaphore(min(conn.welcome.limits.max_in_flight, MAX_WINDOW))
    reader = Reader(conn, window)
    reader.start()
    deadline = time.monotonic() + args.timeout
    classes = Counter()
    try:
        code = run(conn, reader, window, args, deadline, classes)
    except KeyboardInterrupt:
        log("interrupted")
        code = 130
    reader.closing = True
    try:
        conn.send(w.Goodbye("done"))
    except OSError:
        pass
    conn.close()
    return code


def next_frame(reader: Reader, deadline: float):
    try:
        return reader.frames.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        return ("closed", "timed out waiting for the node")


def run(conn, reader, window, args, deadline, classes) -> int:
    for i in range(args.count):
        if not window.acquire(timeout=max(0.0, deadline - time.monotonic())):
            log("timed out waiting for room in the window")
            return 1
        request = w.DispatchRequest(
            namespace=args.namespace,
            task_queue=args.task_queue,
            activity_type=args.activity,
            workflow_id=f"py-{i}",
            ordinal=i,
            input=args.input.replace("{i}", str(i)).encode("utf-8"),
        )
        wait = args.wait_for_worker_ms or None
        conn.send(w.Submit(i + 1, request, wait, args.reply_timeout_ms))

    received = 0
    while received < args.count:
        what, frame = next_frame(reader, deadline)
        if what == "closed":
            log(f"stopped after {received} of {args.count} outcomes: {frame}")
            return 1
        if what != "outcome":
            continue
        received += 1
        i = frame.correlation - 1
        if frame.served_by is None:
            by = ""
        elif frame.result.label == "completed":
            by = f", served by {frame.served_by}"
        else:
            by = f", decided by {frame.served_by}"
        classes[frame.result.label] += 1
        log(f"dispatch {i}: {frame.result.label}{by}: {describe(frame.result)}")
    counts = " ".join(f"{label}={n}" for label, n in sorted(classes.items()))
    log(f"summary: {counts or 'nothing submitted'}")
    code = 0 if classes["completed"] == args.count else 1

    if args.status:
        conn.send(w.StatusQuery(0))
        while True:
            what, frame = next_frame(reader, deadline)
            if what == "closed":
                log(f"no status: {frame}")
                return 1
            if what == "status":
                print_status(frame.status)
                break
    return code


if __name__ == "__main__":
    sys.exit(main())
