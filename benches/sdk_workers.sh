#!/usr/bin/env bash
# Dispatches per second through one worker of each SDK (Rust, TypeScript, Python), each an echo
# worker of concurrency 256, with `lintel bench --workers 0` as the producer at 256 in flight.
#
#   benches/sdk_workers.sh              # 5 rounds of 5 s per SDK, interleaved
#   ROUNDS=3 SECONDS_EACH=3 benches/sdk_workers.sh
#
# One `lintel serve` per SDK, each worker in its own process beside it, the bench in a third:
# every SDK is deployed alike. Rounds go Rust, TypeScript, Python, then again, so a change in
# the machine's load falls on all three; printed per SDK: each round's rate and their median.
# Needs a release build (`cargo build --release`), the TypeScript package built
# (`npm ci && npm run build` in clients/typescript) and Python 3.11+. BIN overrides the binary.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/release/lintel}
ROUNDS=${ROUNDS:-5}
SECONDS_EACH=${SECONDS_EACH:-5}
BASE_PORT=${BASE_PORT:-17800}
OUT=${OUT:-target/sdk-workers}
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
mkdir -p "$OUT"
# shellcheck source=benches/waits.sh
source "$(dirname "$0")/waits.sh"

sdks=(rust typescript python)

# Starts SDK $1's echo worker against port $2, logging to $3.
start_worker() {
    case $1 in
    rust) "$BIN" worker --connect "127.0.0.1:$2" --namespace bench --activity echo \
        --concurrency 256 >"$3" 2>&1 & ;;
    typescript) node clients/typescript/bench/worker.js "127.0.0.1:$2" >"$3" 2>&1 & ;;
    python) PYTHONPATH=clients/python/src python3 clients/python/bench/worker.py \
        --addr "127.0.0.1:$2" >"$3" 2>&1 & ;;
    esac
}

port=$BASE_PORT
declare -A ports
for sdk in "${sdks[@]}"; do
    # The node reads LINTEL_* variables as settings: none leaks in from the caller.
    env -u LINTEL_BIN "$BIN" serve --listen "127.0.0.1:$port" --node-id "$sdk" \
        >"$OUT/$sdk.node.log" 2>&1 &
    wait_port "$port"
    start_worker "$sdk" "$port" "$OUT/$sdk.worker.log"
    wait_worker "$port"
    ports[$sdk]=$port
    port=$((port + 1))
done

declare -A rates
for round in $(seq 1 "$ROUNDS"); do
    for sdk in "${sdks[@]}"; do
        "$BIN" bench --connect "127.0.0.1:${ports[$sdk]}" --workers 0 --concurrency 256 \
            --payload 64 --duration "$SECONDS_EACH" --json "$OUT/$sdk.$round.json" \
            >"$OUT/$sdk.$round.log" 2>&1
        rate=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["rps"]))' \
            "$OUT/$sdk.$round.json")
        rates[$sdk]="${rates[$sdk]:-} $rate"
    done
done

for sdk in "${sdks[@]}"; do
    # shellcheck disable=SC2086
    median=$(printf '%s\n' ${rates[$sdk]} | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "$sdk: median $median dispatches/s (rounds:${rates[$sdk]})"
done
