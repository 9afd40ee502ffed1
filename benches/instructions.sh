#!/usr/bin/env bash
# Node instructions per dispatch, counted by callgrind: load-independent, so it can be read on a
# busy machine where wall-clock figures mean nothing.
#
#   benches/instructions.sh                       # the default grid, one line per cell
#   benches/instructions.sh 65536:1:200 64:256:4000   # payload:in-flight:count cells
#   CROSS=1 benches/instructions.sh 64:1:1000     # producer on node a, worker on node b
#
# Each `lintel serve` runs under callgrind with instrumentation off; a native worker registers
# (on the last node) and a native `lintel bench --workers 0` warms up, then instrumentation is
# switched on, counters zeroed, `count` dispatches run, and the counters are dumped. Printed per
# node: instructions per dispatch, and the inclusive share of memcpy/memmove per dispatch.
# Needs a release build (`cargo build --release`); BIN overrides the binary.
set -euo pipefail

BIN=${BIN:-target/release/lintel}
OUT=${OUT:-target/instructions}
CROSS=${CROSS:-0}
BASE_PORT=${BASE_PORT:-17400}
mkdir -p "$OUT"

cells=("$@")
if [ ${#cells[@]} -eq 0 ]; then
    cells=(64:1:1000 64:256:8000 16384:1:500 16384:256:2000 65536:1:300 65536:256:1000
        1048576:1:60 1048576:64:120)
fi

wait_port() {
    for _ in $(seq 1 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "port $1 never opened" >&2
    return 1
}

# Total instructions in a callgrind dump file.
total_of() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

# Inclusive instructions of memcpy/memmove (libc and its ifunc variants) in a dump file.
copies_of() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk '/mem(cpy|move)/ { gsub(",", "", $1); if ($1 + 0 > best) best = $1 + 0 } END { print best + 0 }'
}

run_cell() {
    local payload=$1 flight=$2 count=$3
    local nodes=1 port_a=$BASE_PORT port_b=$((BASE_PORT + 1))
    [ "$CROSS" = 1 ] && nodes=2
    local pids=() ports=()
    local tag="p${payload}-c${flight}-n${count}-x${nodes}"
    rm -f "$OUT/$tag".*
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$tag.a.%p" \
        "$BIN" serve --listen "127.0.0.1:$port_a" --node-id a >"$OUT/$tag.a.log" 2>&1 &
    pids+=($!)
    ports+=("$port_a")
    wait_port "$port_a"
    local worker_port=$port_a
    if [ "$nodes" = 2 ]; then
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$tag.b.%p" \
            "$BIN" serve --listen "127.0.0.1:$port_b" --node-id b --peer "127.0.0.1:$port_a" \
            >"$OUT/$tag.b.log" 2>&1 &
        pids+=($!)
        ports+=("$port_b")
        wait_port "$port_b"
        worker_port=$port_b
    fi
    "$BIN" worker --connect "127.0.0.1:$worker_port" --namespace bench --activity echo \
        --concurrency 512 >"$OUT/$tag.worker.log" 2>&1 &
    local worker=$!
    local bench=("$BIN" bench --connect "127.0.0.1:$port_a" --workers 0 --payload "$payload"
        --concurrency "$flight")
    # Warm-up: registration and presence settle, buffers grow, code paths are touched.
    "${bench[@]}" --count $((flight * 4 > 200 ? flight * 4 : 200)) --duration 600 \
        >"$OUT/$tag.warm.log" 2>&1 || { cat "$OUT/$tag.warm.log" >&2; }
    for pid in "${pids[@]}"; do
        callgrind_control -i on "$pid" >/dev/null 2>&1
        callgrind_control -z "$pid" >/dev/null 2>&1
    done
    "${bench[@]}" --count "$count" --duration 6000 >"$OUT/$tag.run.log" 2>&1 ||
        { cat "$OUT/$tag.run.log" >&2; }
    local line="payload $payload in-flight $flight count $count nodes $nodes:"
    local index=0
    for pid in "${pids[@]}"; do
        callgrind_control -d "$tag" "$pid" >/dev/null 2>&1
        local name=a
        [ "$index" = 1 ] && name=b
        local dump
        dump=$(ls -t "$OUT/$tag.$name.$pid".* | grep -v '\.log$' | head -1)
        local total copies
        total=$(total_of "$dump")
        copies=$(copies_of "$dump")
        line+=$(printf "  node %s %d instr/dispatch (memcpy+memmove %d)" "$name" \
            $((total / count)) $((copies / count)))
        index=$((index + 1))
    done
    echo "$line"
    kill "$worker" 2>/dev/null || true
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

for cell in "${cells[@]}"; do
    IFS=: read -r payload flight count <<<"$cell"
    run_cell "$payload" "$flight" "$count"
done
