#!/usr/bin/env bash
# Installs prometheus (Debian's package of that name) for tests/autoscaling.rs, which evaluates
# deploy/autoscaling's queries with a real Prometheus scraping a node. Succeeds quietly when
# prometheus is on PATH. As root: apt-get update when the package lists do not know it, then
# apt-get install (the package's own service is not needed: the test starts its own child).
# Otherwise: prints the command and exits 1.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1; then
    exit 0
fi

install_cmd="apt-get update && apt-get install -y prometheus"

if [ "$(id -u)" -ne 0 ]; then
    echo "prometheus is not installed and this is not root; install it with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "prometheus is not installed and apt-get is not available; install Prometheus 2.x by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show prometheus >/dev/null 2>&1; then
    apt-get update -qq
fi
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v prometheus >/dev/null 2>&1 || { echo "apt-get installed prometheus but it is not on PATH" >&2; exit 1; }
echo "installed: $(prometheus --version 2>&1 | head -1)"
