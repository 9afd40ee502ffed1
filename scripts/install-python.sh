#!/usr/bin/env bash
# Installs Python 3.11 or later with venv (Debian's python3 and python3-venv) for the Python
# SDK's tests and tests/python_example.rs. Succeeds quietly when python3 on PATH is new enough
# and can make a venv. As root: apt-get update when the package lists do not know them, then
# apt-get install. Otherwise: prints the exact command and exits 1.
set -euo pipefail

usable() {
    python3 -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
        >/dev/null 2>&1
}

if usable; then
    exit 0
fi

install_cmd="apt-get update && apt-get install -y python3 python3-venv"

if [ "$(id -u)" -ne 0 ]; then
    echo "Python 3.11+ with venv is not installed and this is not root; install it with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "Python 3.11+ with venv is not installed and apt-get is not available; install it by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show python3-venv >/dev/null 2>&1; then
    apt-get update -qq
fi
apt-get install -y -qq python3 python3-venv >/dev/null
if ! usable; then
    echo "installed python3 and python3-venv, but $(command -v python3 || echo python3)" \
        "($(python3 --version 2>&1 || true)) is older than 3.11 or has no venv" >&2
    exit 1
fi
echo "installed: $(command -v python3) ($(python3 --version 2>&1))"
