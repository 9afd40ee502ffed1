#!/usr/bin/env bash
# Installs what scripts/check-deploy.sh runs: kubernetes-validate (PyPI), pinned with hashes in
# scripts/deploy-checks.requirements.txt, in a virtual environment under target/deploy-checks;
# and systemd-analyze (Debian's package systemd). Succeeds quietly when both are there.
# As root: apt-get update when the package lists do not know a package, then apt-get install.
# Otherwise: prints the exact command and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=scripts/deploy-checks.requirements.txt
venv=target/deploy-checks/venv
pinned=$(sed -n 's/^kubernetes-validate==\([^ ]*\).*/\1/p' "$requirements")

apt_install() {
    local packages=("$@")
    local install_cmd="apt-get update && apt-get install -y ${packages[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "${packages[*]} not installed and this is not root; install with:" >&2
        echo "    sudo sh -c '$install_cmd'" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "${packages[*]} not installed and apt-get is not available; install them by hand" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show "${packages[@]}" >/dev/null 2>&1; then
        apt-get update -qq
    fi
    apt-get install -y -qq "${packages[@]}" >/dev/null
}

if ! command -v systemd-analyze >/dev/null 2>&1; then
    apt_install systemd
    command -v systemd-analyze >/dev/null 2>&1 || { echo "systemd installed but systemd-analyze is not on PATH" >&2; exit 1; }
    echo "installed: $(systemd-analyze --version | head -n 1)"
fi

if [ -x "$venv/bin/kubernetes-validate" ] \
    && [ "$("$venv/bin/kubernetes-validate" --version 2>/dev/null)" = "$pinned" ]; then
    exit 0
fi
bash scripts/install-python.sh
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    apt_install python3-venv
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes --no-deps \
    -r "$requirements"
echo "installed: kubernetes-validate $("$venv/bin/kubernetes-validate" --version) in $venv"
