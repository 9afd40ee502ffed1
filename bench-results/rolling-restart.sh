#!/usr/bin/env bash
# A rolling SIGTERM restart of every worker node of a cluster of `lintel serve` processes
# under `lintel bench` load, on loopback; prints the bench outcomes summed (`peer-lost` among
# them). See rolling-restart.md.
#
#   bench-results/rolling-restart.sh BIN OUT [NODES] [BENCH_SECONDS] [ROUNDS] [PAUSE_SECONDS]
#   bench-results/rolling-restart.sh target/release/lintel /tmp/rr 12 120 2 3
#
# Nodes n01..nNN listen on 127.0.0.1:7601.. (admin on 9601..), each given one seed: a random
# earlier node (n01: n02). Even nodes get one `lintel worker` (echo, 64 slots), odd nodes one
# `lintel bench --workers 0` (32 in flight), so every dispatch is relayed. Once the benches
# run, each worker node in turn gets SIGTERM, is started again on its address when it has
# exited, and the next waits until the restarted node answers `/linked` 200 and its worker is
# back; then PAUSE_SECONDS. A binary without `/linked` is waited for by counting synced peers
# in `/status`.
set -u
BIN=$1; OUT=$2; N=${3:-12}; SECS=${4:-90}; ROUNDS=${5:-1}; PAUSE=${6:-3}
mkdir -p "$OUT"; rm -f "$OUT"/*
BASE=7600; ADMIN=9600
start_node() {
  local i=$1 seed=$2
  local args=(serve --listen 127.0.0.1:$((BASE+i)) --node-id "n$(printf %02d "$i")" --admin-listen 127.0.0.1:$((ADMIN+i)))
  [ "$seed" -gt 0 ] && args+=(--peer 127.0.0.1:$((BASE+seed)))
  "$BIN" "${args[@]}" >>"$OUT/node$i.log" 2>&1 &
  echo $! > "$OUT/node$i.pid"
}
RANDOM=7
declare -A seed_of
for i in $(seq 1 "$N"); do
  if [ "$i" -eq 1 ]; then seed_of[$i]=2; else seed_of[$i]=$(( (RANDOM % (i-1)) + 1 )); fi
done
for i in $(seq 1 "$N"); do start_node "$i" "${seed_of[$i]}"; done
wait_linked() {
  local i=$1
  for _ in $(seq 1 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((ADMIN+i))/linked")
    [ "$code" = 200 ] && return 0
    if [ "$code" = 404 ]; then
      n=$(curl -s "http://127.0.0.1:$((ADMIN+i))/status" | grep -c '"synced": true')
      [ "$n" -ge $((N-1)) ] && return 0
    fi
    sleep 0.1
  done
  echo "n$i never linked" >&2; return 1
}
t0=$(date +%s.%N)
for i in $(seq 1 "$N"); do wait_linked "$i"; done
echo "all $N linked after $(echo "$(date +%s.%N) - $t0" | bc) s"
workers=(); producers=()
for i in $(seq 1 "$N"); do if [ $((i % 2)) -eq 0 ]; then workers+=("$i"); else producers+=("$i"); fi; done
for i in "${workers[@]}"; do
  "$BIN" worker --connect 127.0.0.1:$((BASE+i)) --namespace bench --activity echo --concurrency 64 >>"$OUT/worker$i.log" 2>&1 &
  echo $! > "$OUT/worker$i.pid"
done
sleep 3
bench_pids=(); bench_start=$(date +%s.%N)
for i in "${producers[@]}"; do
  "$BIN" bench --connect 127.0.0.1:$((BASE+i)) --workers 0 --namespace bench --concurrency 32 --duration "$SECS" --json "$OUT/bench$i.json" >>"$OUT/bench$i.log" 2>&1 &
  bench_pids+=($!)
done
sleep 5
for round in $(seq 1 "$ROUNDS"); do for i in "${workers[@]}"; do
  pid=$(cat "$OUT/node$i.pid")
  r0=$(date +%s.%N)
  kill -TERM "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  start_node "$i" "${seed_of[$i]}"
  wait_linked "$i"
  for _ in $(seq 1 600); do
    curl -s "http://127.0.0.1:$((ADMIN+i))/status" | grep -q '"worker_id"' && break
    sleep 0.1
  done
  echo "round $round: n$i restarted, linked and its worker back in $(echo "$(date +%s.%N) - $r0" | bc) s"
  sleep "$PAUSE"
done; done
echo "restarts done $(echo "$(date +%s.%N) - $bench_start" | bc) s into the $SECS s benches"
for p in "${bench_pids[@]}"; do wait "$p"; done
python3 - "$OUT" <<'PY'
import json, glob, sys
total = {}
for path in sorted(glob.glob(sys.argv[1] + "/bench*.json")):
    for outcome, count in json.load(open(path)).get("outcomes", {}).items():
        total[outcome] = total.get(outcome, 0) + count
print("outcomes over all benches:", total, "dispatches:", sum(total.values()))
PY
for i in "${workers[@]}"; do kill -TERM "$(cat "$OUT/worker$i.pid")" 2>/dev/null; done
for i in $(seq 1 "$N"); do kill -TERM "$(cat "$OUT/node$i.pid")" 2>/dev/null; done
wait
