#!/usr/bin/env bash
# System calls per dispatch of the node, each worker and the producer, counted by `strace -c`.
#
#   benches/syscalls.sh                     # 64 B, 256 in flight, 20,000 dispatches, 1 worker
#   WORKERS=4 benches/syscalls.sh           # four workers share the load
#   benches/syscalls.sh 64:256:20000 64:1:2000   # payload:in-flight:count cells
#
# A `lintel serve` and WORKERS native `lintel worker`s start, a `lintel bench --workers 0` warms
# up, then strace attaches to every thread of the node and of each worker (and follows new
# ones) while the bench runs `count` dispatches; the bench itself runs under strace for `count`
# and for twice `count` dispatches, and the difference is its share, so start-up cancels out.
# Printed per process: system calls per dispatch, and the three most frequent with theirs.
# strace stops each call, so everything runs slower and wakes up for bigger batches than
# natively: read the figures as an upper bound's shape, not a rate. Needs a release build
# (`cargo build --release`) and strace; BIN overrides the binary.
set -euo pipefail

BIN=${BIN:-target/release/lintel}
OUT=${OUT:-target/syscalls}
WORKERS=${WORKERS:-1}
PORT=${PORT:-17600}
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
mkdir -p "$OUT"
# shellcheck source=benches/waits.sh
source "$(dirname "$0")/waits.sh"

cells=("$@")
if [ ${#cells[@]} -eq 0 ]; then
    cells=(64:256:20000)
fi

# Calls in an `strace -c` summary: the total, or syscall $2's.
calls_of() {
    awk -v want="${2:-total}" '$NF == want && $4 ~ /^[0-9]+$/ { print $4; found = 1; exit }
        END { if (!found) print 0 }' "$1"
}

# The three most frequent calls of a summary, as "name calls" lines.
top_of() {
    awk '$NF != "total" && $NF != "syscall" && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$1" |
        sort -k2,2nr | head -3
}

# Starts strace on every thread of process $1, writing the summary to $2; adds its pid to
# `tracers`.
attach() {
    local tasks=()
    for task in /proc/"$1"/task/*; do tasks+=(-p "${task##*/}"); done
    strace -c -f -o "$2" "${tasks[@]}" >/dev/null 2>&1 &
    tracers+=($!)
}

# "per dispatch" figures of summary $1 over $2 dispatches, after $3 (the process's name).
report() {
    local total
    total=$(calls_of "$1")
    printf "  %s %s/dispatch (" "$3" "$(awk -v t="$total" -v n="$2" 'BEGIN { printf "%.2f", t / n }')"
    top_of "$1" | awk -v n="$2" '{ printf "%s%s %.2f", (NR > 1 ? ", " : ""), $1, $2 / n }'
    printf ")"
}

run_cell() {
    local payload=$1 flight=$2 count=$3
    local tag="p${payload}-c${flight}-n${count}-w${WORKERS}"
    "$BIN" serve --listen "127.0.0.1:$PORT" --node-id a >"$OUT/$tag.node.log" 2>&1 &
    local node=$!
    wait_port "$PORT"
    local workers=()
    for index in $(seq 1 "$WORKERS"); do
        "$BIN" worker --connect "127.0.0.1:$PORT" --namespace bench --activity echo \
            --concurrency 512 >"$OUT/$tag.worker$index.log" 2>&1 &
        workers+=($!)
    done
    wait_worker "$PORT"
    wait_workers "$PORT" "$WORKERS"
    local bench=("$BIN" bench --connect "127.0.0.1:$PORT" --workers 0 --payload "$payload"
        --concurrency "$flight" --threads 1 --duration 6000)
    "${bench[@]}" --count $((flight * 4 > 200 ? flight * 4 : 200)) >"$OUT/$tag.warm.log" 2>&1

    local tracers=() summaries=(node) files=("$OUT/$tag.node.strace")
    attach "$node" "$OUT/$tag.node.strace"
    for index in $(seq 1 "$WORKERS"); do
        attach "${workers[$((index - 1))]}" "$OUT/$tag.worker$index.strace"
        summaries+=("worker$index")
        files+=("$OUT/$tag.worker$index.strace")
    done
    sleep 1 # strace attaches to each thread before the measured run starts
    strace -c -f -o "$OUT/$tag.p1.strace" "${bench[@]}" --count "$count" >"$OUT/$tag.run1.log" 2>&1
    for tracer in "${tracers[@]}"; do kill -INT "$tracer" 2>/dev/null || true; done
    for tracer in "${tracers[@]}"; do wait "$tracer" 2>/dev/null || true; done
    strace -c -f -o "$OUT/$tag.p2.strace" "${bench[@]}" --count $((2 * count)) \
        >"$OUT/$tag.run2.log" 2>&1

    local line="payload $payload in-flight $flight count $count workers $WORKERS:"
    local index=0
    for file in "${files[@]}"; do
        line+=$(report "$file" "$count" "${summaries[$index]}")
        index=$((index + 1))
    done
    # The producer's share: the longer run less the shorter, per extra dispatch.
    local p1 p2
    p1=$(calls_of "$OUT/$tag.p1.strace")
    p2=$(calls_of "$OUT/$tag.p2.strace")
    line+=$(printf "  producer %s/dispatch" \
        "$(awk -v a="$p1" -v b="$p2" -v n="$count" 'BEGIN { printf "%.2f", (b - a) / n }')")
    echo "$line"
    kill "$node" "${workers[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}

for cell in "${cells[@]}"; do
    IFS=: read -r payload flight count <<<"$cell"
    run_cell "$payload" "$flight" "$count"
done
