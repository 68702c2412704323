#!/usr/bin/env bash
# Builds the Dockerfile's image and runs it: a client connects (raw PING/PONG), the
# monitoring port answers /varz and /healthz, JetStream stores into the /data volume,
# the server runs as the image's non-root user, and the stream is still there after the
# container is replaced by a new one on the same volume.
#
# Image registries are not assumed to be reachable, so neither the base images nor the
# Rust toolchain image are pulled:
#   - the runtime base (debian:bookworm-slim) is made locally with debootstrap from the
#     Debian mirror apt uses, imported as localhost/debian:bookworm-slim (kept between
#     runs as a cache; RNATS_CHECK_DROP_BASE=1 removes it at the end);
#   - the binary is the host's (`--target prebuilt`): $RNATS_BIN, else
#     $CARGO_TARGET_DIR/debug/rnats (built with `cargo build --bin rnats` when missing),
#     stripped into a scratch build context. The default multi-stage build (rust image,
#     `cargo build --release --locked`) is what users run; it needs a registry.
#
# Builder: podman (installed with apt-get when missing and apt-get is available), or
# docker when its daemon answers (RNATS_CHECK_ENGINE=docker|podman to choose). When no
# builder can run, prints `SKIPPED: <why>` with the exact error and exits 0; any other
# failure exits 1. Idempotent: leftovers of an earlier run are removed first, and
# everything it creates except the cached base image is removed on exit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
name=rnats-check
image=localhost/rnats-check:latest
volume=rnats-check-data
base=localhost/debian:bookworm-slim
started=$(date +%s)

log() { echo "docker-check: $*"; }
fail() { echo "docker-check: FAILED: $*" >&2; exit 1; }
skip() {
    echo "SKIPPED: Docker image check: $1"
    [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/    /'
    exit 0
}

# ---- a builder ----------------------------------------------------------------------
engine=${RNATS_CHECK_ENGINE:-}
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then
        engine=podman
    elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        engine=docker
    elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing podman (apt-get)"
        if ! out=$( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq podman runc) 2>&1); then
            skip "podman could not be installed" "$out"
        fi
        engine=podman
    else
        out=$( (command -v docker >/dev/null 2>&1 && docker info 2>&1) || echo "no podman or docker command")
        skip "no image builder (podman, or docker with a running daemon)" "$out"
    fi
fi
if [ "$engine" = docker ] && ! out=$(docker info 2>&1); then
    skip "the docker daemon does not answer" "$out"
fi
log "builder: $engine ($($engine --version 2>&1 | head -1))"

# ---- the local base image -------------------------------------------------------------
if ! $engine image inspect "$base" >/dev/null 2>&1; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 || skip "debootstrap is missing" "no apt-get to install it"
        log "installing debootstrap (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
    fi
    # The mirror apt uses (deb822 sources first, then one-line sources).
    mirror=$(sed -n 's/^URIs: *\([^ ]*debian\/*\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    [ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $2 ~ /debian\/?$/ {print $2; exit}' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    rootfs=$(mktemp -d /tmp/rnats-check-rootfs.XXXXXX)
    log "making $base with debootstrap from $mirror"
    if ! out=$(debootstrap --variant=minbase bookworm "$rootfs" "$mirror" 2>&1); then
        rm -rf "$rootfs"
        fail "debootstrap: $(printf '%s\n' "$out" | tail -5)"
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
    tar -C "$rootfs" -c . | $engine import - "$base" >/dev/null 2>&1 \
        || fail "$engine import of the debootstrap tree failed"
    rm -rf "$rootfs"
fi

# ---- how containers can run here --------------------------------------------------------
# Some hosts (a VM without CAP_SYS_RESOURCE, cgroup v1 with controllers on v2) refuse
# podman's defaults: raising RLIMIT_NOFILE/NPROC, or crun's cgroup setup. Try the
# defaults, then runc with limits no higher than ours.
cleanup() {
    # One at a time: podman 4.3's `rm -f` skips every name when one does not exist.
    for c in "$name" "$name-2" "$name-3"; do
        $engine rm -f -v "$c" >/dev/null 2>&1 || true
    done
    $engine volume rm -f "$volume" >/dev/null 2>&1 || true
    $engine rmi -f "$image" >/dev/null 2>&1 || true
    [ -n "${ctx:-}" ] && rm -rf "$ctx"
    if [ "${RNATS_CHECK_DROP_BASE:-0}" = 1 ]; then $engine rmi -f "$base" >/dev/null 2>&1 || true; fi
}
cleanup
trap cleanup EXIT

nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu)
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ]; } && nproc=4096
run_opts=()
build_opts=()
if ! err=$($engine run --rm "$base" true 2>&1); then
    log "default runtime refused ($err); trying runc with nofile=$nofile nproc=$nproc"
    if [ "$engine" = podman ]; then
        if ! command -v runc >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null 2>&1 || true
        fi
        run_opts=(--runtime runc)
        build_opts=(--runtime runc)
    fi
    run_opts+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    build_opts+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    if ! err2=$($engine run --rm "${run_opts[@]}" "$base" true 2>&1); then
        skip "$engine cannot run containers on this host" "$err"$'\n'"$err2"
    fi
fi

# ---- the binary and the build context ------------------------------------------------------
bin=${RNATS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/rnats-target}/debug/rnats}
if [ ! -x "$bin" ]; then
    log "building $bin"
    (cd "$repo" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rnats-target} cargo build --bin rnats)
fi
ctx=$(mktemp -d /tmp/rnats-check-ctx.XXXXXX)
mkdir -p "$ctx/deploy/docker"
cp "$repo/Dockerfile" "$repo/.dockerignore" "$ctx/"
cp "$repo/deploy/docker/rnats.conf" "$ctx/deploy/docker/"
strip -o "$ctx/rnats" "$bin" 2>/dev/null || cp "$bin" "$ctx/rnats"

t0=$(date +%s)
build_flags=(--target prebuilt --build-arg "RUNTIME_IMAGE=$base" --build-arg RNATS_BINARY=rnats -t "$image")
if [ "$engine" = podman ]; then
    # RUN steps under chroot isolation: no OCI runtime, cgroups or rlimits needed.
    out=$(podman build --pull=never --isolation chroot "${build_flags[@]}" "$ctx" 2>&1) \
        || fail "podman build: $(printf '%s\n' "$out" | tail -20)"
else
    out=$(DOCKER_BUILDKIT=1 docker build --pull=false "${build_opts[@]}" "${build_flags[@]}" "$ctx" 2>&1) \
        || fail "docker build: $(printf '%s\n' "$out" | tail -20)"
fi
log "image built in $(($(date +%s) - t0)) s"

# The image's metadata: non-root user, ports, volume, entrypoint.
meta=$($engine image inspect "$image" --format '{{.Config.User}}|{{json .Config.ExposedPorts}}|{{json .Config.Volumes}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}')
log "image config: $meta"
case "$meta" in
rnats:rnats\|*4222/tcp*6222/tcp*8222/tcp*\|*/data*\|'["rnats"]'\|'["--config","/etc/rnats/rnats.conf"]') ;;
*) fail "unexpected image config: $meta" ;;
esac

# ---- run it ----------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cport=$(free_port)
mport=$(free_port)
$engine volume create "$volume" >/dev/null

start() {
    $engine run -d --name "$1" "${run_opts[@]}" -p "127.0.0.1:$cport:4222" \
        -p "127.0.0.1:$mport:8222" -v "$volume:/data" "$image" >/dev/null \
        || fail "$engine run $1"
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$mport/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    $engine logs "$1" >&2 || true
    fail "$1: /healthz did not answer on 127.0.0.1:$mport"
}

# A NATS client on the raw protocol: PING/PONG, then JetStream requests over $JS.API.
client() {
    python3 - "$cport" "$1" <<'EOF'
import json, socket, sys

port, step = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
f = s.makefile("rb")
info = f.readline()
assert info.startswith(b"INFO "), info
s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n')
assert f.readline() == b"PONG\r\n", "no PONG"
s.sendall(b"SUB _INBOX.check 1\r\n")

def request(subject, body):
    data = body.encode()
    s.sendall(b"PUB %s _INBOX.check %d\r\n%s\r\n" % (subject.encode(), len(data), data))
    while True:
        line = f.readline()
        if line == b"PING\r\n":
            s.sendall(b"PONG\r\n")
            continue
        assert line.startswith(b"MSG "), line
        n = int(line.split()[-1])
        payload = f.read(n + 2)[:-2]
        return json.loads(payload)

if step == "write":
    r = request("$JS.API.STREAM.CREATE.CHECK",
                json.dumps({"name": "CHECK", "subjects": ["check.>"], "storage": "file"}))
    assert "error" not in r, r
    for i in range(3):
        ack = request("check.msg", "hello %d" % i)
        assert ack.get("stream") == "CHECK" and ack.get("seq") == i + 1, ack
r = request("$JS.API.STREAM.INFO.CHECK", "")
assert "error" not in r, r
msgs = r["state"]["messages"]
assert msgs == 3, r["state"]
print("PING/PONG ok; stream CHECK has %d messages" % msgs)
EOF
}

start "$name"
varz=$(curl -fsS "http://127.0.0.1:$mport/varz")
case "$varz" in *'"server_id"'*'"jetstream"'*) ;; *) fail "/varz: $varz" ;; esac
log "/varz answers"
log "client: $(client write)"
uid=$($engine exec "$name" id -u)
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not 10001"
owner=$($engine exec "$name" stat -c %u /data/jetstream)
[ "$owner" = 10001 ] || fail "/data/jetstream belongs to uid $owner"
log "runs as uid $uid; /data/jetstream belongs to it"

# SIGTERM (docker stop) stops it cleanly; a new container on the same volume has the stream.
t1=$(date +%s)
$engine stop -t 20 "$name" >/dev/null
code=$($engine inspect "$name" --format '{{.State.ExitCode}}')
log "stopped in $(($(date +%s) - t1)) s with exit code $code"
[ "$code" = 0 ] || { $engine logs "$name" 2>&1 | tail -20 >&2; fail "exit code $code after stop"; }
$engine rm -f "$name" >/dev/null
start "$name-2"
log "after a restart on the same volume: $(client read)"
$engine stop -t 20 "$name-2" >/dev/null

# Default seccomp profiles block io_uring (rnats then says so and uses mio); without the
# profile the io_uring reactor is used where the kernel has it. Informational only.
$engine run -d --name "$name-3" "${run_opts[@]}" --security-opt seccomp=unconfined "$image" \
    --shards 1 -p 4222 >/dev/null || fail "$engine run $name-3"
reactor=
for _ in $(seq 1 50); do
    reactor=$($engine logs "$name-3" 2>&1 | sed -n 's/.*Using the \(.*\) reactor.*/\1/p')
    [ -n "$reactor" ] && break
    sleep 0.1
done
log "reactor with the default seccomp profile: $(printf '%s' "$varz" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("rnats_reactor"))'); with seccomp=unconfined: ${reactor:-unknown}"

log "OK in $(($(date +%s) - started)) s"
