#!/usr/bin/env bash
# Checks for Node.js 20 or later with npm, for the TypeScript SDK's build and tests and the
# feature matrix. Debian's own nodejs package is older than 20, so nothing is installed here:
# without it, this prints where to get it and exits 1.
set -euo pipefail

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    exit 0
fi
echo "the TypeScript SDK needs Node.js 20 or later with npm (found: $(node --version 2>/dev/null || echo none));" >&2
echo "install it from https://nodejs.org/en/download or NodeSource's Debian packages" >&2
exit 1
