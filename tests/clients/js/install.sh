#!/bin/sh
# Installs the JavaScript program's npm packages (pinned in package-lock.json).
# Idempotent: npm ci runs only when node_modules is missing or older than the lock file.
set -eu
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "js: node and npm are required (Node.js 20 or newer)" >&2
    exit 1
fi
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
