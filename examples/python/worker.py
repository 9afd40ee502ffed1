#!/usr/bin/env python3
"""A lintel worker in the Python standard library alone (see README.md).

Registers in a namespace for some activity types with a capacity, then answers every Push:

- ``echo``:  the input, as is.
- ``upper``: the input with ASCII letters upper-cased.
- ``sleep``: waits the number of milliseconds written in the input, then answers ``slept``;
  a Cancel cuts the wait short.
- anything else registered: a non-retryable Failure.

It answers Ping with Pong and Cancel with an immediate Reply (the node drops it and frees the
slot, as PROTOCOL.md section 7 asks). On the node's Drain it finishes what is in flight, sends
Drained and Goodbye, and exits 0; on Goodbye it exits 0. On Ctrl-C (or SIGTERM) it drains
itself: Drain, then its in-flight replies, Drained, Goodbye, exit 0; a second Ctrl-C leaves
at once with Goodbye.

Prints one line per event on stdout: ``registered worker_id=N ...`` once registered.
"""

import argparse
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import lintel_wire as w

# Threads running activities; the node never has more than `capacity` pushes in flight here.
MAX_THREADS = 64
# The nonce of the Ping sent after our own Drain: its Pong means every Push the node sent
# before reading the Drain has arrived.
DRAIN_BARRIER_NONCE = (1 << 64) - 1


def log(*parts) -> None:
    print(*parts, flush=True)


def run_activity(request: w.DispatchRequest, cancelled: threading.Event):
    if request.activity_type == "echo":
        return w.Success(request.input)
    if request.activity_type == "upper":
        return w.Success(request.input.upper())
    if request.activity_type == "sleep":
        try:
            millis = int(request.input.decode("ascii") or "0")
        except (UnicodeDecodeError, ValueError):
            return w.Failure(f"sleep wants milliseconds, got {request.input[:32]!r}", False)
        if cancelled.wait(millis / 1000):
            return w.Failure("cancelled", False)
        return w.Success(b"slept")
    return w.Failure(f"no activity {request.activity_type!r} in this worker", False)


class Worker:
    def __init__(self, conn: w.Connection, capacity: int):
        self.conn = conn
        self.pool = ThreadPoolExecutor(max_workers=min(capacity, MAX_THREADS))
        self.lock = threading.Condition()
        # correlation -> (request, cancel event), for pushes not yet answered.
        self.in_flight = {}
        self.draining = False  # a Drain was sent or received: replies are counted
        self.finishing = False  # the thread that sends Drained and Goodbye is started
        self.replies_since_drain = 0
        self.leaving = False  # Goodbye sent: the close that follows is ours

    def answer(self, correlation: int, request: w.DispatchRequest, outcome) -> None:
        """Sends the one Reply for this push, unless a Cancel already answered it."""
        with self.lock:
            if self.in_flight.pop(correlation, None) is None or self.leaving:
                self.lock.notify_all()
                return
            if self.draining:
                self.replies_since_drain += 1
            self.lock.notify_all()
        try:
            self.conn.send(w.Reply(correlation, w.DispatchResponse.to(request, outcome)))
        except OSError:
            pass  # the read loop sees the close

    def on_push(self, push: w.Push) -> None:
        cancelled = threading.Event()
        with self.lock:
            self.in_flight[push.correlation] = (push.request, cancelled)

        def task():
            try:
                outcome = run_activity(push.request, cancelled)
            except Exception as err:  # an activity's bug is its failure, not the worker's
                outcome = w.Failure(f"activity raised {err!r}", False)
            self.answer(push.correlation, push.request, outcome)

        self.pool.submit(task)

    def on_cancel(self, cancel: w.Cancel) -> None:
        with self.lock:
            entry = self.in_flight.get(cancel.correlation)
        if entry is None:
            return  # already answered: the reply crossed the cancel
        request, cancelled = entry
        cancelled.set()
        log(f"cancel correlation={cancel.correlation} activity={request.activity_type}")
        # Answer at once so the slot is freed; the activity's own answer is then skipped.
        self.answer(cancel.correlation, request, w.Failure("cancelled", False))

    def finish_drain(self, grace_s) -> None:
        """Waits for the replies in flight (at most ``grace_s`` seconds when given), then
        Drained, Goodbye and close."""
        with self.lock:
            self.lock.wait_for(lambda: not self.in_flight, timeout=grace_s)
            completed, left = self.replies_since_drain, len(self.in_flight)
            if self.leaving:
                return
        log(f"drained completed={completed} abandoned={left}")
        self.leave([w.Drained(completed), w.Goodbye("drained")])

    def leave(self, frames) -> None:
        with self.lock:
            if self.leaving:
                return
            self.leaving = True
            # Interpreter exit joins the activity threads: wake the ones still waiting.
            for _, cancelled in self.in_flight.values():
                cancelled.set()
        try:
            for frame in frames:
                self.conn.send(frame)
        except OSError:
            pass
        self.conn.close()

    def begin_drain(self) -> bool:
        """Starts counting replies for Drained; False if a drain had already begun."""
        with self.lock:
            began = not self.draining
            self.draining = True
            return began

    def start_finishing(self, grace_s) -> None:
        with self.lock:
            if self.finishing:
                return
            self.finishing = True
        threading.Thread(target=self.finish_drain, args=(grace_s,), daemon=True).start()

    def run(self) -> int:
        interrupted = False
        while True:
            try:
                frame = self.conn.recv()
            except KeyboardInterrupt:
                if interrupted or not self.begin_drain():
                    self.leave([w.Goodbye("interrupted")])
                    log("interrupted: goodbye")
                    return 0
                interrupted = True
                log("interrupted: draining (Ctrl-C again to leave at once)")
                try:
                    self.conn.send(w.Drain(0))
                    self.conn.send(w.Ping(DRAIN_BARRIER_NONCE))
                except OSError:
                    pass
                continue
            except w.WireError as err:
                if self.leaving:
                    return 0
                log(f"bad frame from the node: {err}")
                self.leave([w.Error(err.code, str(err)[:200])])
                return 1
            except OSError as err:
                if self.leaving:
                    return 0
                log(f"connection lost: {err}")
                return 1
            if frame is None:
                if self.leaving:
                    return 0
                log("the node closed the connection")
                return 1
            if isinstance(frame, w.Push):
                self.on_push(frame)
            elif isinstance(frame, w.Ping):
                try:
                    self.conn.send(w.Pong(frame.nonce))
                except OSError:
                    pass  # closed by a drain that just finished: the next read says so
            elif isinstance(frame, w.Pong):
                if frame.nonce == DRAIN_BARRIER_NONCE and interrupted:
                    self.start_finishing(None)
            elif isinstance(frame, w.Cancel):
                self.on_cancel(frame)
            elif isinstance(frame, w.Drain):
                log(f"drain grace_ms={frame.grace_ms}")
                self.begin_drain()
                self.start_finishing(frame.grace_ms / 1000)
            elif isinstance(frame, w.Goodbye):
                log(f"goodbye from the node: {frame.reason}")
                self.leave([])
                return 0
            elif isinstance(frame, w.Error):
                log(f"error from the node: {frame.code}: {frame.reason}")
                self.leave([])
                return 1
            else:
                log(f"unexpected {type(frame).__name__} from the node")
                self.leave([w.Error("UnexpectedFrame", type(frame).__name__)])
                return 1


def register(conn: w.Connection, args) -> int:
    """Sends Register and waits for the answer, answering pings meanwhile."""
    conn.send(
        w.Register(
            namespaces=args.namespace,
            activity_types=args.activities.split(","),
            max_concurrency=args.capacity,
            identity=args.identity,
            task_queue=args.task_queue,
            node=args.label,
        )
    )
    while True:
        frame = conn.recv()
        if isinstance(frame, w.Registered):
            return frame.worker_id
        if isinstance(frame, w.Ping):
            conn.send(w.Pong(frame.nonce))
        elif isinstance(frame, w.RegisterRefused):
            raise w.Refused(frame.code, frame.reason)
        elif isinstance(frame, (w.Goodbye, w.Error)) or frame is None:
            raise w.Refused("Closed", f"the node ended the connection: {frame}")
        else:
            raise w.UnexpectedFrame(f"{type(frame).__name__} before Registered")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:7400", help="the node, HOST:PORT")
    parser.add_argument(
        "--namespace", action="append", help="repeatable (default: demo)", default=None
    )
    parser.add_argument("--activities", default="echo,upper,sleep", help="comma-separated")
    parser.add_argument("--capacity", type=int, default=4, help="pushes in flight at most")
    parser.add_argument("--task-queue", default="", help="empty means default")
    parser.add_argument(
        "--label",
        "--node",
        dest="label",
        default=None,
        help="the placement label dispatches may pin, prefer or require (not a node id)",
    )
    parser.add_argument("--identity", default=f"py-worker-{os.getpid()}")
    parser.add_argument("--token", default=os.environ.get("LINTEL_AUTH_TOKEN"))
    w.add_tls_arguments(parser)
    args = parser.parse_args()
    args.namespace = args.namespace or ["demo"]
    if args.capacity < 1:
        parser.error("--capacity must be at least 1")

    # Ctrl-C drains even when started in the background (where SIGINT begins ignored);
    # SIGTERM drains the same way.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        conn = w.connect(
            args.addr,
            "Worker",
            args.identity,
            args.token,
            tls=w.tls_from_arguments(args),
            server_name=args.tls_server_name,
        )
        worker_id = register(conn, args)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError, w.Refused, w.WireError) as err:
        log(f"worker could not start: {err}")
        return 1
    welcome = conn.welcome
    log(
        f"registered worker_id={worker_id} node={welcome.node_id} version={conn.version} "
        f"namespaces={','.join(args.namespace)} activities={args.activities} "
        f"capacity={args.capacity}"
    )
    worker = Worker(conn, args.capacity)
    try:
        return worker.run()
    except KeyboardInterrupt:  # arrived outside the read, while handling a frame
        worker.leave([w.Goodbye("interrupted")])
        log("interrupted: goodbye")
        return 0
    finally:
        worker.pool.shutdown(wait=False, cancel_futures=True)


if __name__ == "__main__":
    sys.exit(main())
