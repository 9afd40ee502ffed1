#!/usr/bin/env bash
# Instructions per dispatch of the node (or the worker, or the producer), counted by callgrind: load-independent, so it can be read on a
# busy machine where wall-clock figures mean nothing.
#
#   benches/instructions.sh                       # the default grid, one line per cell
#   benches/instructions.sh 65536:1:200 64:256:4000   # payload:in-flight:count cells
#   CROSS=1 benches/instructions.sh 64:1:1000     # producer on node a, worker on node b
#   ROLE=worker benches/instructions.sh 64:256:8000     # the worker instead of the node(s)
#   ROLE=producer benches/instructions.sh 64:256:8000   # the producer instead of the node(s)
#   WORKERS=4 benches/instructions.sh 64:256:8000       # four workers share the load
#
# Each `lintel serve` runs under callgrind with instrumentation off; a native worker registers
# (on the last node) and a native `lintel bench --workers 0` warms up, then instrumentation is
# switched on, counters zeroed, `count` dispatches run, and the counters are dumped. Printed per
# node: instructions per dispatch, and the inclusive share of memcpy/memmove per dispatch.
# ROLE=worker counts every `lintel worker` the same way instead, and their sum. ROLE=producer
# runs the bench itself (`--threads 1`) under callgrind for `count` and for twice `count`
# dispatches and prints the difference per dispatch, so start-up and the first dispatches
# cancel out.
# Needs a release build (`cargo build --release`); BIN overrides the binary.
set -euo pipefail

BIN=${BIN:-target/release/lintel}
OUT=${OUT:-target/instructions}
CROSS=${CROSS:-0}
WORKERS=${WORKERS:-1}
ROLE=${ROLE:-node}
# Whatever this script started goes with it, also when it fails half-way.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
BASE_PORT=${BASE_PORT:-17400}
mkdir -p "$OUT"
# shellcheck source=benches/waits.sh
source "$(dirname "$0")/waits.sh"

cells=("$@")
if [ ${#cells[@]} -eq 0 ]; then
    cells=(64:1:1000 64:256:8000 16384:1:500 16384:256:2000 65536:1:300 65536:256:1000
        1048576:1:60 1048576:64:120)
fi

# Total instructions in a callgrind dump file.
total_of() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

# Inclusive instructions of memcpy/memmove (libc and its ifunc variants) in a dump file.
copies_of() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk '/mem(cpy|move)/ { gsub(",", "", $1); if ($1 + 0 > best) best = $1 + 0 } END { print best + 0 }'
}

# Runs "$@" under callgrind with instrumentation off when its role ($1) is the one measured.
start_as() {
    local role=$1 out=$2
    shift 2
    if [ "$role" = "$ROLE" ]; then
        exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.%p" "$@"
    else
        exec "$@"
    fi
}

run_cell() {
    local payload=$1 flight=$2 count=$3
    local nodes=1 port_a=$BASE_PORT port_b=$((BASE_PORT + 1))
    [ "$CROSS" = 1 ] && nodes=2
    local pids=() names=() others=()
    local tag="p${payload}-c${flight}-n${count}-x${nodes}-w${WORKERS}-${ROLE}"
    rm -f "$OUT/$tag".*
    start_as node "$OUT/$tag.a" "$BIN" serve --listen "127.0.0.1:$port_a" --node-id a \
        >"$OUT/$tag.a.log" 2>&1 &
    if [ "$ROLE" = node ]; then pids+=($!); names+=("node a"); else others+=($!); fi
    wait_port "$port_a"
    local worker_port=$port_a
    if [ "$nodes" = 2 ]; then
        start_as node "$OUT/$tag.b" "$BIN" serve --listen "127.0.0.1:$port_b" --node-id b \
            --peer "127.0.0.1:$port_a" >"$OUT/$tag.b.log" 2>&1 &
        if [ "$ROLE" = node ]; then pids+=($!); names+=("node b"); else others+=($!); fi
        wait_port "$port_b"
        worker_port=$port_b
    fi
    # With ROLE=worker every worker is counted: all run under callgrind alike, so the node
    # spreads the load over them as it would natively.
    for index in $(seq 1 "$WORKERS"); do
        start_as worker "$OUT/$tag.w$index" "$BIN" worker --connect "127.0.0.1:$worker_port" \
            --namespace bench --activity echo --concurrency 512 \
            >"$OUT/$tag.worker$index.log" 2>&1 &
        if [ "$ROLE" = worker ]; then pids+=($!); names+=("worker$index"); else others+=($!); fi
    done
    wait_worker "$port_a"
    wait_workers "$worker_port" "$WORKERS"
    local bench=("$BIN" bench --connect "127.0.0.1:$port_a" --workers 0 --payload "$payload"
        --concurrency "$flight")
    # Warm-up: registration and presence settle, buffers grow, code paths are touched.
    "${bench[@]}" --count $((flight * 4 > 200 ? flight * 4 : 200)) --duration 600 \
        >"$OUT/$tag.warm.log" 2>&1 || { cat "$OUT/$tag.warm.log" >&2; }
    local line="payload $payload in-flight $flight count $count nodes $nodes:"
    if [ "$ROLE" = producer ]; then
        local totals=() copies=()
        for n in "$count" $((2 * count)); do
            valgrind --tool=callgrind --callgrind-out-file="$OUT/$tag.p$n" "${bench[@]}" \
                --threads 1 --count "$n" --duration 6000 >"$OUT/$tag.run$n.log" 2>&1 ||
                { cat "$OUT/$tag.run$n.log" >&2; }
            totals+=("$(total_of "$OUT/$tag.p$n")")
            copies+=("$(copies_of "$OUT/$tag.p$n")")
        done
        line+=$(printf "  producer %d instr/dispatch (memcpy+memmove %d)" \
            $(((totals[1] - totals[0]) / count)) $(((copies[1] - copies[0]) / count)))
    else
        for pid in "${pids[@]}"; do
            callgrind_control -i on "$pid" >/dev/null 2>&1
            callgrind_control -z "$pid" >/dev/null 2>&1
        done
        "${bench[@]}" --count "$count" --duration 6000 >"$OUT/$tag.run.log" 2>&1 ||
            { cat "$OUT/$tag.run.log" >&2; }
        local index=0 sum=0 sum_copied=0
        for pid in "${pids[@]}"; do
            callgrind_control -d "$tag" "$pid" >/dev/null 2>&1
            local dump="" candidate
            for candidate in "$OUT/$tag".*."$pid".*; do
                case $candidate in *.log) continue ;; esac
                [ -z "$dump" ] || [ "$candidate" -nt "$dump" ] && dump=$candidate
            done
            local total copied
            total=$(total_of "$dump")
            copied=$(copies_of "$dump")
            line+=$(printf "  %s %d instr/dispatch (memcpy+memmove %d)" "${names[$index]}" \
                $((total / count)) $((copied / count)))
            sum=$((sum + total)) sum_copied=$((sum_copied + copied))
            index=$((index + 1))
        done
        if [ "${#pids[@]}" -gt 1 ] && [ "$ROLE" = worker ]; then
            line+=$(printf "  workers together %d instr/dispatch (memcpy+memmove %d)" \
                $((sum / count)) $((sum_copied / count)))
        fi
    fi
    echo "$line"
    for pid in "${others[@]}" "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

for cell in "${cells[@]}"; do
    IFS=: read -r payload flight count <<<"$cell"
    run_cell "$payload" "$flight" "$count"
done
