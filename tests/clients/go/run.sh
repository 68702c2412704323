#!/bin/sh
# Builds the Go matrix program when its source (or the toolchain / nats.go package) changed,
# then runs it; the environment (MATRIX_*) passes through, stdin/stdout carry CONTROL/RESULT.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rnats-clients/go"
bin="$cache/matrix"
mkdir -p "$cache"
stamp=$( {
    cat "$here/matrix.go"
    go version
    dpkg-query -W -f='${Version}' golang-github-nats-io-go-nats-dev
} | sha256sum | cut -d' ' -f1 )
if [ ! -x "$bin" ] || [ "$(cat "$cache/stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "go/run.sh: building $bin" >&2
    # GOPATH mode against Debian's /usr/share/gocode; no module proxy, no network
    GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH=/usr/share/gocode GOCACHE="$cache/gocache" \
        go build -o "$bin.tmp" "$here/matrix.go"
    mv "$bin.tmp" "$bin"
    echo "$stamp" > "$cache/stamp"
fi
exec "$bin" "$@"
