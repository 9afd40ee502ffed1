#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver (Debian's packages chromium and chromium-driver)
# for tests/console.rs, which loads the admin console in a real browser.
# Succeeds quietly when both are on PATH. As root: apt-get update when the package lists do not
# know them, then apt-get install. Otherwise: prints the exact command and exits 1.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi

install_cmd="apt-get update && apt-get install -y chromium chromium-driver"

if [ "$(id -u)" -ne 0 ]; then
    echo "chromium or chromedriver is not installed and this is not root; install them with:" >&2
    echo "    sudo sh -c '$install_cmd'" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium is not installed and apt-get is not available; install Chromium and a matching ChromeDriver by hand" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium-driver >/dev/null 2>&1; then
    apt-get update -qq
fi
apt-get install -y -qq chromium chromium-driver >/dev/null
for tool in chromium chromedriver; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "apt-get installed the packages but $tool is not on PATH" >&2
        exit 1
    fi
done
echo "installed: $(chromium --version 2>/dev/null), $(chromedriver --version)"
