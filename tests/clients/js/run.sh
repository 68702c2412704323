#!/bin/sh
# Runs the JavaScript program; the environment (MATRIX_*) passes through.
set -eu
cd "$(dirname "$0")"
[ -d node_modules ] || ./install.sh >&2
# Node.js 20 has a WebSocket global only behind a flag (22 has it by default).
if node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
    exec node matrix.mjs
elif node --experimental-websocket -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
    exec node --experimental-websocket matrix.mjs
else
    exec node matrix.mjs
fi
