"""A lintel worker with the Python SDK (clients/python): registers in a namespace and answers
``echo``, ``upper`` and ``sleep`` (input: milliseconds). Drains on SIGINT or SIGTERM, and
stops when its node drains it.

    PYTHONPATH=clients/python/src python3 examples/python/worker.py --namespace demo
"""

import argparse
import asyncio
import os
import sys

import lintel


async def handler(request: lintel.Request) -> bytes:
    if request.activity_type == "upper":
        return request.input.upper()
    if request.activity_type == "sleep":
        try:
            await asyncio.sleep(int(request.input or b"0") / 1000)
        except asyncio.CancelledError:
            print(f"cancelled activity=sleep workflow={request.workflow_id!r}", flush=True)
            raise
        return b"slept"
    return request.input


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:7400", help="the node(s), HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--namespace", default="demo")
    parser.add_argument("--activities", default="echo,upper,sleep", help="comma-separated")
    parser.add_argument("--capacity", type=int, default=4, help="requests run at once")
    parser.add_argument("--identity", default=f"py-worker-{os.getpid()}")
    parser.add_argument("--token", default=os.environ.get("LINTEL_AUTH_TOKEN"))
    parser.add_argument("--tls-ca", help="PEM CA to trust; with it the worker speaks TLS")
    parser.add_argument("--tls-cert", help="PEM client certificate, for mutual TLS")
    parser.add_argument("--tls-key", help="its PEM private key")
    args = parser.parse_args()
    tls = lintel.client_context(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None
    config = lintel.WorkerConfig(
        nodes=args.addr.split(","),
        namespaces=[args.namespace],
        activity_types=args.activities.split(","),
        identity=args.identity,
        concurrency=args.capacity,
        auth_token=args.token,
        ssl=tls,
        leave_on_node_drain=True,
    )
    worker = lintel.Worker(config, handler)
    await worker.start()
    try:
        worker_id = await worker.wait_registered(30)
    except lintel.LintelError as err:
        print(f"worker could not register: {err}", flush=True)
        return 1
    print(f"registered worker_id={worker_id} node={worker.node_id} version={worker.version}", flush=True)
    worker.drain_on_signals()
    await worker.wait_stopped()
    print("drain: the node drained this worker" if worker.drained_by_node else "drained", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
