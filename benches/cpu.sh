#!/usr/bin/env bash
# CPU time per dispatch of the node, of all its workers together and of the producer, read from
# /proc (user + system, in 10 ms ticks: runs are long enough for thousands of them).
#
#   benches/cpu.sh                       # 64 B, 256 in flight, 400,000 dispatches, 1 then 4 workers
#   WORKER_COUNTS="4" benches/cpu.sh 64:256:800000
#
# Per cell and worker count: a `lintel serve`, that many `lintel worker`s (each its own process,
# concurrency 512) and a `lintel bench --workers 0 --threads 1`, which warms up, then runs `count`
# dispatches while the node's and the workers' CPU is read before and after; the producer's is
# its whole run's (start-up included, under 1% at this count). Wall-clock load on the machine
# changes how work batches, so compare figures from one window. BIN overrides the binary.
set -euo pipefail

BIN=${BIN:-target/release/lintel}
OUT=${OUT:-target/cpu}
PORT=${PORT:-17650}
WORKER_COUNTS=${WORKER_COUNTS:-"1 4"}
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
mkdir -p "$OUT"
# shellcheck source=benches/waits.sh
source "$(dirname "$0")/waits.sh"

cells=("$@")
if [ ${#cells[@]} -eq 0 ]; then
    cells=(64:256:400000)
fi

# CPU ticks (user + system) process $1 has used.
ticks_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# Microseconds per dispatch of $1 ticks over $2 dispatches.
per_dispatch() { awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }'; }

run_cell() {
    local payload=$1 flight=$2 count=$3 workers=$4
    local tag="p${payload}-c${flight}-n${count}-w${workers}"
    "$BIN" serve --listen "127.0.0.1:$PORT" --node-id a >"$OUT/$tag.node.log" 2>&1 &
    local node=$!
    wait_port "$PORT"
    local pids=()
    for index in $(seq 1 "$workers"); do
        "$BIN" worker --connect "127.0.0.1:$PORT" --namespace bench --activity echo \
            --concurrency 512 >"$OUT/$tag.worker$index.log" 2>&1 &
        pids+=($!)
    done
    wait_worker "$PORT"
    wait_workers "$PORT" "$workers"
    local bench=("$BIN" bench --connect "127.0.0.1:$PORT" --workers 0 --payload "$payload"
        --concurrency "$flight" --threads 1 --duration 6000)
    "${bench[@]}" --count $((flight * 40)) >"$OUT/$tag.warm.log" 2>&1
    local node_before workers_before=0
    node_before=$(ticks_of "$node")
    for pid in "${pids[@]}"; do workers_before=$((workers_before + $(ticks_of "$pid"))); done
    /usr/bin/time -f "%U %S" -o "$OUT/$tag.producer.time" "${bench[@]}" --count "$count" \
        >"$OUT/$tag.run.log" 2>&1
    local node_after workers_after=0
    node_after=$(ticks_of "$node")
    for pid in "${pids[@]}"; do workers_after=$((workers_after + $(ticks_of "$pid"))); done
    local producer
    producer=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($1 + $2) * hz }' "$OUT/$tag.producer.time")
    printf "payload %s in-flight %s count %s workers %s:  node %s us  workers %s us  producer %s us per dispatch  (%s)\n" \
        "$payload" "$flight" "$count" "$workers" \
        "$(per_dispatch $((node_after - node_before)) "$count")" \
        "$(per_dispatch $((workers_after - workers_before)) "$count")" \
        "$(per_dispatch "$producer" "$count")" \
        "$(grep -o '[0-9]*/s' "$OUT/$tag.run.log" | head -1)"
    kill "$node" "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}

for cell in "${cells[@]}"; do
    IFS=: read -r payload flight count <<<"$cell"
    for workers in $WORKER_COUNTS; do
        run_cell "$payload" "$flight" "$count" "$workers"
    done
done
