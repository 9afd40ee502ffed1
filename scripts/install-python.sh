#!/usr/bin/env bash
# Installs python3 (Debian's package of that name) for tests/python_example.rs.
# Succeeds quietly when python3 is already on PATH. As root: apt-get update when the package
# lists do not know it, then apt-get install. Otherwise: prints the exact command and exits 1.
set -euo pipefail

if command -v python3 >/dev/null 2>&1; then
    exit 0
fi

install_cmd="apt-get update && apt-get install -y python3"

if [ "$(id -u)" -ne 0 ]; then
    echo "python3 is not installed and this is not root; install it with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "python3 is not installed and apt-get is not available; install Python 3.9+ by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show python3 >/dev/null 2>&1; then
    apt-get update -qq
fi
apt-get install -y -qq python3 >/dev/null
if ! command -v python3 >/dev/null 2>&1; then
    echo "apt-get installed python3 but it is not on PATH" >&2
    exit 1
fi
echo "installed: $(command -v python3) ($(python3 --version 2>&1))"
