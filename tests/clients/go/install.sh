#!/bin/sh
# nats.go for the client matrix: Debian's Go and golang-github-nats-io-go-nats-dev
# (nats.go 1.22.1 with nkeys and nuid), built in GOPATH mode with no module proxy.
set -eu
missing=""
for pkg in golang-go golang-github-nats-io-go-nats-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "go/install.sh: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $missing >&2
fi
