#!/usr/bin/env bash
# Runs the async-nats program of the client matrix (see ../README.md): builds the root
# package's `client-matrix` example (cargo caches it) into $CARGO_TARGET_DIR (or the repo's
# target/), then runs it with the environment passed through. Build output goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
(cd "$repo" && CARGO_TARGET_DIR="$target" nice cargo build --quiet --example client-matrix) >&2
exec "$target/debug/examples/client-matrix"
