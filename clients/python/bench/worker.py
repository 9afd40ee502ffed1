"""An echo worker at concurrency 256 for measuring the Python SDK with ``lintel bench``:

    lintel serve &
    PYTHONPATH=clients/python/src python3 clients/python/bench/worker.py --addr 127.0.0.1:7400 &
    lintel bench --connect 127.0.0.1:7400 --workers 0 --concurrency 256 --duration 10

It registers in namespace ``bench`` for activity ``echo`` (what ``lintel bench`` dispatches),
prints ``ready`` once registered and drains on SIGINT or SIGTERM.
"""

import argparse
import asyncio
import sys

import lintel


async def echo(request: lintel.Request) -> bytes:
    return request.input


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:7400")
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    config = lintel.WorkerConfig([args.addr], [args.namespace], ["echo"], concurrency=args.concurrency, identity="py-bench")
    worker = lintel.Worker(config, echo)
    await worker.start()
    await worker.wait_registered(30)
    print("ready", flush=True)
    worker.drain_on_signals()
    await worker.wait_stopped()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
