# shellcheck shell=bash
# Waits shared by the benchmark scripts; sourced, with BIN set to the `lintel` binary.

# Waits until something listens on 127.0.0.1 port $1.
wait_port() {
    for _ in $(seq 1 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "port $1 never opened" >&2
    return 1
}

# Waits until a dispatch in namespace `bench` completes through the node at port $1.
wait_worker() {
    for _ in $(seq 1 300); do
        if "$BIN" dispatch --connect "127.0.0.1:$1" --namespace bench --activity echo \
            --input x >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "no worker registered at port $1" >&2
    return 1
}

# Waits until $2 workers are eligible in the `bench` pools of the node at port $1.
wait_workers() {
    for _ in $(seq 1 300); do
        if "$BIN" status --connect "127.0.0.1:$1" --json 2>/dev/null | python3 -c '
import json, sys
pools = json.load(sys.stdin)["pools"]
ready = sum(w["state"] == "eligible" for p in pools if p["namespace"] == "bench" for w in p["workers"])
sys.exit(0 if ready >= int(sys.argv[1]) else 1)' "$2"; then return 0; fi
        sleep 0.2
    done
    echo "fewer than $2 workers eligible at port $1" >&2
    return 1
}
