#!/bin/bash
# One perf-lab scenario against a fresh rnats, and what each shard spent on it: CPU time
# of the shard's thread (/proc, 10 ms ticks), event-loop turns and wake-ups (/shardz),
# messages in and out.
#
#   perf/scripts/shard-cpu.sh SCENARIO "SERVER ARGS" "PERF ARGS"
#   BIN=/path/to/rnats PERF=/path/to/rnats-perf perf/scripts/shard-cpu.sh queue "--shards=2" "--size 16 --msgs 4000000"
#
# Ports 4411 (clients) and 8311 (monitoring) must be free.
set -euo pipefail
T=${CARGO_TARGET_DIR:-target}/release
BIN=${BIN:-$T/rnats}
PERF=${PERF:-$T/rnats-perf}
SC=$1; SARGS=${2:-}; PARGS=${3:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# shellcheck disable=SC2086
"$BIN" -p 4411 -m 8311 $SARGS >"$W/server.log" 2>&1 &
SP=$!
for _ in $(seq 1 50); do curl -sf localhost:8311/shardz >"$W/before.json" && break; sleep 0.1; done
cpu() { for t in /proc/$SP/task/*; do echo "$(cat "$t/comm") $(awk '{print $14+$15}' "$t/stat")"; done; }
cpu >"$W/cpu0"
# shellcheck disable=SC2086
"$PERF" "$SC" --url 127.0.0.1:4411 -q $PARGS 2>&1 | grep -E "msgs/s" | tr -s ' '
cpu >"$W/cpu1"
curl -sf localhost:8311/shardz >"$W/after.json"
kill "$SP"; wait "$SP" 2>/dev/null || true
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(f"{w}/before.json"))["shards"]
b = json.load(open(f"{w}/after.json"))["shards"]
c0 = dict(l.split() for l in open(f"{w}/cpu0"))
c1 = dict(l.split() for l in open(f"{w}/cpu1"))
total = 0
for x, y in zip(a, b):
    name = "rnats-shard-%d" % y["index"]
    ms = (int(c1.get(name, 0)) - int(c0.get(name, 0))) * 10
    total += ms
    d = {k: y["loop"][k] - x["loop"][k] for k in ("iterations", "wakeups")}
    print(f" shard {y['index']}: cpu {ms} ms, turns {d['iterations']}, wake-ups {d['wakeups']}, "
          f"in {y['in_msgs'] - x['in_msgs']}, out {y['out_msgs'] - x['out_msgs']}")
print(f" shards' cpu {total} ms")
PY
