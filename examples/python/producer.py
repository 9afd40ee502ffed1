"""A lintel producer with the Python SDK (clients/python): submits dispatches and prints how
each ended; exits 1 unless every one completed.

    PYTHONPATH=clients/python/src python3 examples/python/producer.py --namespace demo --activity upper
"""

import argparse
import asyncio
import os
import sys

import lintel
from lintel import Completed, Failure, NoWorker3, Success, Timeout


def describe(i: int, dispatched: lintel.Dispatched) -> str:
    by = dispatched.served_by
    match dispatched.result:
        case Completed(response):
            match response.outcome:
                case Success(data):
                    return f"completed, served by {by}: success {data!r}"
                case Failure(message, retryable):
                    return f"completed, served by {by}: failure {message!r} retryable={retryable}"
        case NoWorker3(c):
            return (
                f"no-worker, decided by {by}: reason={c.reason.name} pool_workers={c.pool_workers} "
                f"serving_activity={c.serving_activity} compatible_workers={c.compatible_workers}"
            )
        case Timeout(worker_id, after_ms):
            return f"timeout, decided by {by}: worker_id={worker_id} after_ms={after_ms}"
    return f"{type(dispatched.result).__name__}, decided by {by}: {dispatched.result}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:7400", help="the node(s), HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--namespace", default="demo")
    parser.add_argument("--activity", default="echo")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--input", help="the input of every dispatch (default: hello-N)")
    parser.add_argument("--wait-for-worker-ms", type=int, default=5000)
    parser.add_argument("--reply-timeout-ms", type=int)
    parser.add_argument("--timeout", type=float, default=10, help="seconds to connect")
    parser.add_argument("--status", action="store_true", help="print the node's status at the end")
    parser.add_argument("--token", default=os.environ.get("LINTEL_AUTH_TOKEN"))
    parser.add_argument("--tls-ca", help="PEM CA to trust; with it the producer speaks TLS")
    parser.add_argument("--tls-cert", help="PEM client certificate, for mutual TLS")
    parser.add_argument("--tls-key", help="its PEM private key")
    args = parser.parse_args()
    tls = lintel.client_context(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None
    config = lintel.ClientConfig(auth_token=args.token, ssl=tls, handshake_timeout=args.timeout)
    try:
        client = await lintel.Client.connect(args.addr.split(","), config)
    except lintel.LintelError as err:
        print(f"producer could not connect: {err}", flush=True)
        return 1
    options = lintel.DispatchOptions(wait_for_worker_ms=args.wait_for_worker_ms, reply_timeout_ms=args.reply_timeout_ms)
    dispatches = [
        lintel.Dispatch(args.namespace, args.activity, args.input or f"hello-{i}", workflow_id=f"py-{i}", ordinal=i)
        for i in range(args.count)
    ]
    results = await asyncio.gather(*(client.submit(d, options) for d in dispatches))
    tally: dict[str, int] = {}
    for i, dispatched in enumerate(results):
        line = describe(i, dispatched)
        print(f"dispatch {i}: {line}", flush=True)
        kind = line.split(",")[0]
        tally[kind] = tally.get(kind, 0) + 1
    print("summary: " + " ".join(f"{k}={v}" for k, v in sorted(tally.items())), flush=True)
    if args.status:
        status = await client.status()
        for pool in status.get("pools", []):
            for w in pool.get("workers", []):
                print(f"status   worker identity={w.get('identity')} activities={','.join(w.get('activity_types', []))}")
        counters = status.get("counters", {})
        print("status counters " + " ".join(f"{k}={v}" for k, v in counters.items()), flush=True)
    await client.close()
    return 0 if tally == {"completed": args.count} else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
