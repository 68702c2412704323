#!/bin/bash
# System calls of a fresh rnats (or any NATS server) during one `pubsub` run: 16 B
# payloads, 5,000,000 messages, counted by `perf stat` on the server's pid from just after
# its start to just after the run (so startup and the idle moments around the run count).
#
#   perf/scripts/syscalls.sh [SERVER ARGS...]
#   BIN=/path/to/rnats PERF=/path/to/rnats-perf perf/scripts/syscalls.sh --shards 2
#
# Port 4412 must be free. Needs `perf` with the syscalls tracepoints (root or a low
# perf_event_paranoid).
set -euo pipefail
T=${CARGO_TARGET_DIR:-target}/release
BIN=${BIN:-$T/rnats}
PERF=${PERF:-$T/rnats-perf}
MSGS=${MSGS:-5000000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$BIN" -p 4412 "$@" >"$W/server.log" 2>&1 &
SP=$!
sleep 0.5
perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_write,syscalls:sys_enter_sched_yield \
    -p "$SP" -o "$W/stat.txt" &
PP=$!
sleep 0.3
"$PERF" pubsub -s 127.0.0.1:4412 --size 16 --msgs "$MSGS" -q | grep -i "msgs/s" || true
sleep 0.3
kill -INT "$PP"; wait "$PP" 2>/dev/null || true
kill "$SP"; wait "$SP" 2>/dev/null || true
awk -F, -v msgs="$MSGS" '/sys_enter/ {printf "%s %s  ", $3, $1; if ($3 == "raw_syscalls:sys_enter") all = $1}
    END {printf "\nper 1,000 messages: %.2f\n", all * 1000 / msgs}' "$W/stat.txt"
