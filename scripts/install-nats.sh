#!/usr/bin/env bash
# Installs nats-server (Debian's package of that name) for the vs_nats benchmark and its test.
# As root: apt-get update when the package lists do not know it, then apt-get install.
# Otherwise: prints the exact command to run and exits non-zero.
set -euo pipefail

if command -v nats-server >/dev/null 2>&1; then
    echo "nats-server already installed: $(command -v nats-server) ($(nats-server --version 2>&1))"
    exit 0
fi

install_cmd="apt-get update && apt-get install -y nats-server"

if [ "$(id -u)" -ne 0 ]; then
    echo "nats-server is not installed and this is not root; install it with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "nats-server is not installed and apt-get is not available; install nats-server 2.9+ by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show nats-server >/dev/null 2>&1; then
    apt-get update
fi
apt-get install -y nats-server
echo "installed: $(command -v nats-server) ($(nats-server --version 2>&1))"
