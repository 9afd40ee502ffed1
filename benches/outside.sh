#!/usr/bin/env bash
# The outside layout: lintel and NATS request-reply side by side, deployed as a user would deploy
# them and orchestrated by this script alone, with none of the vs_nats harness's code. If the
# harness had a bias, its figures and these would disagree.
#
#   lintel: `lintel serve`, WORKERS `lintel worker` (echo) and `lintel bench --workers 0` as the
#           producer: the user's CLI, target/release/lintel.
#   NATS:   nats-server with a minimal config, WORKERS responders and one requester, the
#           `outside_nats_peer` bench binary (benches/outside/nats_peer.rs, async-nats alone).
#
# Every server, worker and producer is a process of its own, and every one of them, for both
# systems alike, is started fresh in each round and stopped after it. Rounds are interleaved:
# in each round, for each cell, lintel then NATS. The CPU time of each middle (lintel serve,
# nats-server) is read from /proc/PID/stat around the producer's run and divided by its
# requests; it counts in ticks of 1/CLK_TCK s (10 ms), so read it from long rounds.
#
# Usage:
#   bash benches/outside.sh
#   CELLS="256:1:64 1:1:64" ROUNDS=3 DURATION=5 bash benches/outside.sh
# Variables:
#   CELLS     IN_FLIGHT:WORKERS:PAYLOAD_BYTES ... [256:1:64 256:4:64 1:1:64]
#   ROUNDS    rounds per cell [5]
#   DURATION  seconds each producer runs [5]
#   WARMUP    seconds a producer runs first, unmeasured, on the fresh pieces of each round [2]
#   BUILD     1: run `cargo build --release` even when target/release/lintel exists [0]
#   OUT       where the JSON goes [bench-results/outside-<shortcommit>.json]
# Prints markdown tables on stdout; progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

CELLS=${CELLS:-"256:1:64 256:4:64 1:1:64"}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
# Fresh processes run slower for their first seconds (nats-server's most: with 5 s rounds and no
# warm-up, four responders carried about a tenth less than warm ones).
WARMUP=${WARMUP:-2}
BUILD=${BUILD:-0}

# Capacity of each lintel worker: the harness's (WORKER_CAPACITY in benches/vs_nats/lintel.rs).
WORKER_CAPACITY=1024
NAMESPACE=bench
SUBJECT=bench.echo
QUEUE=workers
# Bounded waits, in seconds.
START_WAIT=10
REGISTER_WAIT=30
STOP_WAIT=15
# nats-server's default max_payload, which the minimal config keeps.
NATS_MAX_PAYLOAD=1048576

die() {
    echo "outside.sh: $*" >&2
    exit 1
}

# ---- the arguments ----------------------------------------------------------------------------

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, not '$ROUNDS'"
if [[ ! $DURATION =~ ^[0-9]+([.][0-9]+)?$ || $DURATION =~ ^0+([.]0+)?$ ]]; then
    die "DURATION must be a positive number of seconds, not '$DURATION'"
fi
[[ $WARMUP =~ ^[0-9]+([.][0-9]+)?$ ]] || die "WARMUP must be a number of seconds, not '$WARMUP'"
read -r -a cells <<<"$CELLS"
((${#cells[@]} > 0)) || die "CELLS names no cell"
for cell in "${cells[@]}"; do
    [[ $cell =~ ^([1-9][0-9]*):([1-9][0-9]*):([0-9]+)$ ]] ||
        die "a cell is IN_FLIGHT:WORKERS:PAYLOAD (256:4:64), not '$cell'"
    ((BASH_REMATCH[3] <= NATS_MAX_PAYLOAD)) ||
        die "cell $cell: a payload over $NATS_MAX_PAYLOAD bytes exceeds nats-server's default max_payload"
done
# The producer's run plus a minute for connecting, the tail and the report.
PRODUCER_LIMIT=$(awk -v d="$DURATION" 'BEGIN { printf "%d", d + 60 }')

# Every process runs with its defaults: the node refuses LINTEL_* variables it does not know,
# and RUST_LOG would change what each logs.
while IFS= read -r name; do
    unset "$name"
done < <(compgen -e | grep '^LINTEL_' || true)
unset RUST_LOG

command -v python3 >/dev/null || die "python3 is needed for the JSON and the medians"
CLK_TCK=$(getconf CLK_TCK) || die "getconf CLK_TCK failed"

# ---- processes --------------------------------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/lintel-outside.XXXXXX")
pids=()

# Whether PID runs (a child that exited but is not yet reaped does not).
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# Sends PID SIGTERM, waits up to STOP_WAIT seconds, then SIGKILL; reaps it.
stop_pid() {
    local pid=$1 deadline=$((SECONDS + STOP_WAIT))
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        while alive "$pid" && ((SECONDS < deadline)); do
            sleep 0.05
        done
        if alive "$pid"; then
            echo "outside.sh: pid $pid ignored SIGTERM for ${STOP_WAIT}s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

# Stops every process started, the last started first.
stop_all() {
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop_pid "${pids[i]}"
    done
    pids=()
}

cleanup() {
    local code=$?
    trap - EXIT INT TERM
    stop_all
    rm -f "$work/lintel"
    if ((code == 0)); then
        rm -rf "$work"
    else
        echo "outside.sh: failed; the processes' logs are in $work" >&2
    fi
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the binaries -----------------------------------------------------------------------------

LINTEL=$root/target/release/lintel
if [[ $BUILD == 1 || ! -x $LINTEL ]]; then
    echo "building target/release/lintel (cargo build --release)" >&2
    cargo build --release >&2 || die "cargo build --release failed"
fi
[[ -x $LINTEL ]] || die "$LINTEL is missing after the build"
stale=false
if [[ -n $(find src client/src wire/src transport/src Cargo.toml Cargo.lock -newer "$LINTEL" -print -quit) ]]; then
    stale=true
    echo "outside.sh: warning: $LINTEL is older than the sources; BUILD=1 rebuilds it" >&2
fi
# `cargo bench` builds the package's binaries too, with the dev-dependencies' features, and puts
# its own `lintel` at target/release/lintel. The binary measured is the one found there now: a
# copy of it runs, and it is put back in place once the peer is built.
cp "$LINTEL" "$work/lintel" || die "cannot copy $LINTEL"

echo "building the NATS peer (cargo bench --bench outside_nats_peer --no-run)" >&2
PEER=$(cargo bench --bench outside_nats_peer --no-run --message-format=json |
    python3 -c '
import json, sys
found = ""
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if (msg.get("reason") == "compiler-artifact" and msg.get("executable")
            and msg.get("target", {}).get("name") == "outside_nats_peer"):
        found = msg["executable"]
print(found)
') || die "cargo bench --bench outside_nats_peer --no-run failed"
[[ -n $PEER && -x $PEER ]] || die "cargo named no outside_nats_peer executable"
if ! cmp -s "$work/lintel" "$LINTEL"; then
    # A new file renamed over it: cargo's hard link to its own build keeps that build intact.
    cp "$work/lintel" "$LINTEL.outside" || die "cannot put $LINTEL back"
    mv -f "$LINTEL.outside" "$LINTEL" || die "cannot put $LINTEL back"
fi
LINTEL=$work/lintel

NATS_SERVER=$(command -v nats-server || true)
for dir in /usr/sbin /usr/local/sbin /sbin; do
    [[ -z $NATS_SERVER && -x $dir/nats-server ]] && NATS_SERVER=$dir/nats-server
done
if [[ -z $NATS_SERVER ]]; then
    echo "nats-server not found; running scripts/install-nats.sh" >&2
    bash scripts/install-nats.sh >&2 || die "nats-server is missing and scripts/install-nats.sh failed"
    NATS_SERVER=$(command -v nats-server || true)
    [[ -n $NATS_SERVER ]] || die "nats-server is still not on PATH after scripts/install-nats.sh"
fi
NATS_VERSION=$("$NATS_SERVER" --version 2>&1 | head -n 1)

# Waits until FILE holds a line matching PATTERN, while PID lives, for at most SECS seconds.
wait_for_line() {
    local file=$1 pattern=$2 pid=$3 what=$4 secs=$5
    local deadline=$((SECONDS + secs))
    until grep -q -- "$pattern" "$file" 2>/dev/null; do
        alive "$pid" || die "$what exited before it was ready: $(tail -n 5 "$file" 2>/dev/null)"
        ((SECONDS < deadline)) || die "$what was not ready within ${secs}s: $(tail -n 5 "$file" 2>/dev/null)"
        sleep 0.05
    done
}

# utime + stime of PID, in ticks.
cpu_ticks() {
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || die "pid $1 is gone: cannot read its CPU time"
    stat=${stat##*) }
    read -r -a fields <<<"$stat"
    # Fields 14 and 15 of /proc/PID/stat; fields[0] is field 3, the state.
    echo $((fields[11] + fields[12]))
}

# Runs a producer command in the background (so the traps can stop it), bounded by
# PRODUCER_LIMIT; stdout to OUT, stderr to ERR; sets `status`.
run_producer() {
    local out=$1 err=$2
    shift 2
    timeout --kill-after=10 "$PRODUCER_LIMIT" "$@" >"$out" 2>"$err" &
    local pid=$!
    pids+=("$pid")
    status=0
    wait "$pid" || status=$?
    unset 'pids[${#pids[@]}-1]'
}

# Runs a producer command for WARMUP seconds first, its report discarded; "$@" ends with the
# duration flag's name, which this appends the value to.
warm_up() {
    local dir=$1 what=$2
    shift 2
    awk -v w="$WARMUP" 'BEGIN { exit !(w > 0) }' || return 0
    run_producer "$dir/warm.out" "$dir/warm.err" "$@" "$WARMUP"
    ((status == 0)) || die "$what's warm-up exited with status $status: $(tail -n 5 "$dir/warm.err")"
}

# Checks a producer's report and appends one line to rounds.jsonl:
# SYSTEM ROUND CELL OUT ERR STATUS TICKS_BEFORE TICKS_AFTER.
record() {
    python3 - "$@" "$CLK_TCK" "$work/rounds.jsonl" <<'EOF' || exit 1
import json, sys
system, rnd, cell, out, err, status, before, after, clk_tck, rounds = sys.argv[1:]
def fail(why):
    with open(err, errors="replace") as f:
        tail = "".join(f.readlines()[-5:]).strip()
    sys.exit(f"outside.sh: round {rnd}, cell {cell}, {system}: {why}" + (f"\n{tail}" if tail else ""))
try:
    with open(out) as f:
        # `lintel bench --json -` prints its report pretty; the requester on one line.
        report = json.loads(f.read())
    fields = [report[k] for k in ("dispatches", "elapsed_s", "rps", "p50_us", "p99_us")]
except (ValueError, KeyError, TypeError):
    fail(f"the producer printed no report (exit status {status})")
dispatches = int(report["dispatches"])
if system == "lintel":
    failures = dispatches - int(report.get("outcomes", {}).get("completed", 0))
else:
    failures = int(report["errors"])
if failures:
    fail(f"{failures} of {dispatches} requests were not answered (exit status {status})")
if status != "0":
    fail(f"the producer exited with status {status}")
if dispatches == 0:
    fail("the producer ended no request")
ticks = int(after) - int(before)
line = {
    "round": int(rnd), "cell": cell, "system": system,
    "dispatches": dispatches, "elapsed_s": report["elapsed_s"], "rps": report["rps"],
    "p50_us": report["p50_us"], "p99_us": report["p99_us"],
    "middle_cpu_ticks": ticks,
    "middle_cpu_us_per_request": ticks * 1e6 / int(clk_tck) / dispatches,
}
with open(rounds, "a") as f:
    f.write(json.dumps(line) + "\n")
print(f"  {system:6} {report['rps']:>10.0f} rps  p50 {report['p50_us']:>8.1f} us  "
      f"middle CPU {line['middle_cpu_us_per_request']:.2f} us/request", file=sys.stderr)
EOF
}

# ---- one round of each system -----------------------------------------------------------------

# lintel serve, WORKERS lintel worker, then lintel bench --workers 0 as the producer.
run_lintel() {
    local rnd=$1 cell=$2 in_flight=$3 workers=$4 payload=$5
    local dir=$work/r$rnd-$cell-lintel i addr deadline server before after
    mkdir -p "$dir"
    "$LINTEL" serve --listen 127.0.0.1:0 </dev/null >"$dir/serve.out" 2>"$dir/serve.log" &
    server=$!
    pids+=("$server")
    # The node logs `listening addr=HOST:PORT` once bound.
    wait_for_line "$dir/serve.log" 'listening.*addr=' "$server" "lintel serve" "$START_WAIT"
    addr=$(grep -m 1 -o 'addr=[0-9.]*:[0-9]*' "$dir/serve.log" | cut -d= -f2)
    [[ -n $addr ]] || die "lintel serve logged no address: $(tail -n 5 "$dir/serve.log")"
    for ((i = 0; i < workers; i++)); do
        "$LINTEL" worker --connect "$addr" --namespace "$NAMESPACE" --activity echo \
            --concurrency "$WORKER_CAPACITY" --identity "outside-worker-$i" \
            </dev/null >"$dir/worker-$i.out" 2>"$dir/worker-$i.log" &
        pids+=("$!")
    done
    # Until `lintel status` lists every worker eligible (registered, past probation).
    deadline=$((SECONDS + REGISTER_WAIT))
    until "$LINTEL" status --connect "$addr" --json 2>"$dir/status.err" |
        python3 -c '
import json, sys
want, namespace = int(sys.argv[1]), sys.argv[2]
status = json.load(sys.stdin)
eligible = {w["worker_id"] for p in status.get("pools", []) if p.get("namespace") == namespace
            for w in p.get("workers", []) if w.get("state") == "eligible"}
sys.exit(0 if len(eligible) >= want else 1)
' "$workers" "$NAMESPACE" 2>>"$dir/status.err"; do
        for ((i = 0; i < workers; i++)); do
            alive "${pids[i + 1]}" ||
                die "lintel worker $i exited before it registered: $(tail -n 5 "$dir/worker-$i.log")"
        done
        alive "$server" || die "lintel serve exited: $(tail -n 5 "$dir/serve.log")"
        ((SECONDS < deadline)) ||
            die "the $workers lintel workers were not all eligible on $addr within ${REGISTER_WAIT}s: $(tail -n 3 "$dir/status.err")"
        sleep 0.1
    done
    warm_up "$dir" "lintel bench" "$LINTEL" bench --connect "$addr" --workers 0 \
        --namespace "$NAMESPACE" --concurrency "$in_flight" --payload "$payload" --json - --duration
    before=$(cpu_ticks "$server")
    run_producer "$dir/bench.json" "$dir/bench.err" \
        "$LINTEL" bench --connect "$addr" --workers 0 --namespace "$NAMESPACE" \
        --concurrency "$in_flight" --payload "$payload" --duration "$DURATION" --json -
    after=$(cpu_ticks "$server")
    stop_all
    record lintel "$rnd" "$cell" "$dir/bench.json" "$dir/bench.err" "$status" "$before" "$after"
}

# nats-server, WORKERS responders, then the requester.
run_nats() {
    local rnd=$1 cell=$2 in_flight=$3 workers=$4 payload=$5
    local dir=$work/r$rnd-$cell-nats i addr url server before after
    mkdir -p "$dir"
    # Loopback and a port the server picks; everything else nats-server's defaults.
    printf 'host: 127.0.0.1\nport: -1\n' >"$dir/nats.conf"
    "$NATS_SERVER" -c "$dir/nats.conf" </dev/null >"$dir/nats.out" 2>"$dir/nats.log" &
    server=$!
    pids+=("$server")
    wait_for_line "$dir/nats.log" 'Server is ready' "$server" "nats-server" "$START_WAIT"
    addr=$(grep -m 1 -o 'client connections on [0-9.]*:[0-9]*' "$dir/nats.log" | awk '{ print $4 }')
    [[ -n $addr ]] || die "nats-server logged no client address: $(tail -n 5 "$dir/nats.log")"
    url=nats://$addr
    for ((i = 0; i < workers; i++)); do
        "$PEER" responder --url "$url" --subject "$SUBJECT" --queue "$QUEUE" \
            </dev/null >"$dir/responder-$i.out" 2>"$dir/responder-$i.log" &
        pids+=("$!")
        # It prints `subscribed` once the server has its subscription (a flush after SUB).
        wait_for_line "$dir/responder-$i.out" '^subscribed$' "$!" "NATS responder $i" "$REGISTER_WAIT"
    done
    warm_up "$dir" "the NATS requester" "$PEER" requester --url "$url" --subject "$SUBJECT" \
        --concurrency "$in_flight" --payload "$payload" --duration
    before=$(cpu_ticks "$server")
    run_producer "$dir/requester.json" "$dir/requester.err" \
        "$PEER" requester --url "$url" --subject "$SUBJECT" \
        --concurrency "$in_flight" --payload "$payload" --duration "$DURATION"
    after=$(cpu_ticks "$server")
    stop_all
    record nats "$rnd" "$cell" "$dir/requester.json" "$dir/requester.err" "$status" "$before" "$after"
}

# ---- the rounds -------------------------------------------------------------------------------

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Result files written beside this one change nothing measured.
dirty=false
[[ -n $(git status --porcelain --untracked-files=no -- . ':!bench-results' 2>/dev/null) ]] &&
    dirty=true
echo "outside layout at $commit: cells ${cells[*]}, $ROUNDS rounds of ${DURATION}s; $NATS_VERSION" >&2
: >"$work/rounds.jsonl"
for ((rnd = 1; rnd <= ROUNDS; rnd++)); do
    for cell in "${cells[@]}"; do
        IFS=: read -r in_flight workers payload <<<"$cell"
        echo "round $rnd/$ROUNDS, $in_flight in flight, $workers workers, $payload B" >&2
        run_lintel "$rnd" "$cell" "$in_flight" "$workers" "$payload"
        run_nats "$rnd" "$cell" "$in_flight" "$workers" "$payload"
    done
done

# ---- the report -------------------------------------------------------------------------------

out=${OUT:-bench-results/outside-$commit.json}
OUTSIDE_COMMIT=$commit OUTSIDE_DIRTY=$dirty OUTSIDE_STALE=$stale OUTSIDE_CELLS="${cells[*]}" OUTSIDE_ROUNDS=$ROUNDS \
    OUTSIDE_DURATION=$DURATION OUTSIDE_WARMUP=$WARMUP OUTSIDE_NATS=$NATS_VERSION OUTSIDE_CLK_TCK=$CLK_TCK \
    OUTSIDE_LINTEL=$("$LINTEL" --version 2>/dev/null | head -n 1) OUTSIDE_CORES=$(nproc) \
    OUTSIDE_CAPACITY=$WORKER_CAPACITY \
    python3 - "$work/rounds.jsonl" "$out" <<'EOF' || die "cannot write the report"
import json, os, platform, statistics, sys

rounds_file, out = sys.argv[1:]
env = os.environ
with open(rounds_file) as f:
    lines = [json.loads(line) for line in f if line.strip()]
cells = env["OUTSIDE_CELLS"].split()

def model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"

rounds, medians = [], []
for cell in cells:
    in_flight, workers, payload = (int(x) for x in cell.split(":"))
    per_round = []
    for rnd in sorted({l["round"] for l in lines if l["cell"] == cell}):
        got = {l["system"]: l for l in lines if l["cell"] == cell and l["round"] == rnd}
        lintel, nats = got["lintel"], got["nats"]
        per_round.append({
            "round": rnd, "cell": cell,
            "in_flight": in_flight, "workers": workers, "payload_bytes": payload,
            "lintel": {k: v for k, v in lintel.items() if k not in ("round", "cell", "system")},
            "nats": {k: v for k, v in nats.items() if k not in ("round", "cell", "system")},
            "lintel_nats_rps_ratio": lintel["rps"] / nats["rps"],
        })
    rounds.extend(per_round)
    def med(system, key):
        return statistics.median(r[system][key] for r in per_round)
    keys = ("rps", "p50_us", "p99_us", "middle_cpu_us_per_request")
    ratios = [r["lintel_nats_rps_ratio"] for r in per_round]
    medians.append({
        "cell": cell, "in_flight": in_flight, "workers": workers, "payload_bytes": payload,
        "rounds": len(per_round),
        "lintel": {k: med("lintel", k) for k in keys},
        "nats": {k: med("nats", k) for k in keys},
        "lintel_nats_rps_ratio": {
            "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
        },
    })

result = {
    "layout": "outside (benches/outside.sh): the user's lintel CLI; nats-server with "
              "async-nats responders and requester of benches/outside/nats_peer.rs",
    "commit": env["OUTSIDE_COMMIT"],
    "dirty": env["OUTSIDE_DIRTY"] == "true",
    "machine": {"cores": int(env["OUTSIDE_CORES"]), "cpu": model(), "kernel": platform.release()},
    "nats_server": env["OUTSIDE_NATS"],
    "lintel": env["OUTSIDE_LINTEL"],
    "lintel_binary_older_than_sources": env["OUTSIDE_STALE"] == "true",
    "round_seconds": float(env["OUTSIDE_DURATION"]),
    "warmup_seconds": float(env["OUTSIDE_WARMUP"]),
    "rounds_per_cell": int(env["OUTSIDE_ROUNDS"]),
    "clk_tck": int(env["OUTSIDE_CLK_TCK"]),
    "lintel_worker_capacity": int(env["OUTSIDE_CAPACITY"]),
    "processes": "every server, worker and producer a process of its own, one runtime thread "
                 "each, all started fresh in each round and stopped after it; rounds "
                 "interleaved, lintel then NATS in each round for each cell",
    "cells": cells,
    "rounds": rounds,
    "medians": medians,
}
with open(out, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")

def p50(us):
    return f"{us:.0f} us" if us < 1000 else f"{us / 1000:.2f} ms"

def rps(r):
    return f"{r / 1000:.1f}k" if r < 100_000 else f"{r / 1000:.0f}k"

def cpu(us):
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"

def label(c):
    return f"{c['in_flight']}, {c['workers']}, {c['payload_bytes']} B"

dirty = " (uncommitted changes)" if result["dirty"] else ""
print(f"Outside layout at `{result['commit']}`{dirty}: {result['rounds_per_cell']} interleaved "
      f"rounds of {result['round_seconds']:g} s; {result['machine']['cores']} cores "
      f"({result['machine']['cpu']}); {result['nats_server']}.")
print()
print("| in flight, workers, payload | lintel p50 | lintel rps | NATS p50 | NATS rps "
      "| lintel/NATS rps (per round) | CPU per request of the middle: lintel / NATS |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for m in medians:
    l, n, r = m["lintel"], m["nats"], m["lintel_nats_rps_ratio"]
    print(f"| {label(m)} | {p50(l['p50_us'])} | {rps(l['rps'])} | {p50(n['p50_us'])} "
          f"| {rps(n['rps'])} | {r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f}) "
          f"| {cpu(l['middle_cpu_us_per_request'])} / {cpu(n['middle_cpu_us_per_request'])} us |")
print()
print("| round | in flight, workers, payload | lintel p50 | lintel rps | NATS p50 | NATS rps "
      "| lintel/NATS rps | CPU per request of the middle: lintel / NATS |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in sorted(rounds, key=lambda r: (r["round"], cells.index(r["cell"]))):
    l, n = r["lintel"], r["nats"]
    print(f"| {r['round']} | {label(r)} | {p50(l['p50_us'])} | {rps(l['rps'])} "
          f"| {p50(n['p50_us'])} | {rps(n['rps'])} | {r['lintel_nats_rps_ratio']:.2f}x "
          f"| {cpu(l['middle_cpu_us_per_request'])} / {cpu(n['middle_cpu_us_per_request'])} us |")
print()
print(f"Written to {out}.")
EOF
