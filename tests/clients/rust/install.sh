#!/usr/bin/env bash
# The async-nats program needs nothing beyond cargo: async-nats (with `websockets`) is a
# dev-dependency of the root package. Pre-builds the example so the first run is quick.
# Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
command -v cargo >/dev/null || { echo "rust: cargo not found (install a Rust toolchain)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-$repo/target}
(cd "$repo" && CARGO_TARGET_DIR="$target" nice cargo build --quiet --example client-matrix) >&2
echo "rust: $target/debug/examples/client-matrix built"
