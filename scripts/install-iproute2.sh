#!/usr/bin/env bash
# Installs ip (Debian's package iproute2) for tests/discovery.rs, which runs nodes in network
# namespaces of their own. Succeeds quietly when ip is on PATH. As root: apt-get update when the
# package lists do not know it, then apt-get install. Otherwise: prints the command and exits 1.
set -euo pipefail

if command -v ip >/dev/null 2>&1; then
    exit 0
fi

install_cmd="apt-get update && apt-get install -y iproute2"

if [ "$(id -u)" -ne 0 ]; then
    echo "ip is not installed and this is not root; install it with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ip is not installed and apt-get is not available; install iproute2 by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show iproute2 >/dev/null 2>&1; then
    apt-get update -qq
fi
apt-get install -y -qq iproute2 >/dev/null
command -v ip >/dev/null 2>&1 || { echo "apt-get installed iproute2 but ip is not on PATH" >&2; exit 1; }
echo "installed: $(ip -V)"
