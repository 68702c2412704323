#!/usr/bin/env bash
# Builds the nats.c program of the client matrix (see ../README.md) into the cache when its
# source or the build command changed, then runs it with the environment passed through.
# Arguments (feature names) run only those features. For a memory check:
#   MATRIX_C_WRAPPER="valgrind --leak-check=full --log-file=/tmp/vg.%p.log" \
#   MATRIX_C_TIMEOUT_SCALE=4 tests/clients/run.py --clients c
# (the scale multiplies the program's timeouts; TLS handshakes under valgrind can still
# outlast the servers' 2 s TLS timeout).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rnats-clients/c"
if ! pkg-config --exists libnats libcrypto 2>/dev/null || ! command -v gcc >/dev/null; then
  bash "$here/install.sh" >&2
fi
build=(gcc -std=c11 -O1 -g -Wall -Wextra -o "$cache/matrix.new" "$here/matrix.c"
       $(pkg-config --cflags --libs libnats libcrypto) -lpthread)
stamp=$( { cat "$here/matrix.c"; echo "${build[*]}"; pkg-config --modversion libnats; } | sha256sum | cut -d' ' -f1)
mkdir -p "$cache"
if [[ ! -x $cache/matrix || $(cat "$cache/matrix.stamp" 2>/dev/null) != "$stamp" ]]; then
  exec 9>"$cache/.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  if [[ ! -x $cache/matrix || $(cat "$cache/matrix.stamp" 2>/dev/null) != "$stamp" ]]; then
    echo "c: building $cache/matrix" >&2
    "${build[@]}" >&2
    mv "$cache/matrix.new" "$cache/matrix"
    echo "$stamp" > "$cache/matrix.stamp"
  fi
fi
exec ${MATRIX_C_WRAPPER:-} "$cache/matrix" "$@"
