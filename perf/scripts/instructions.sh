#!/bin/bash
# Instructions per message of a `pipeline/publish_*` criterion benchmark, counted by
# callgrind over `OneShard::step` only (one call = one buffer of frames in, the
# subscribers' output out). Unlike time, the count does not move with a shared, noisy
# machine, so a change of a few instructions a message can be seen in one run.
#
#   perf/scripts/instructions.sh [BENCH...]        # default: publish_16B
#   BENCHBIN=/tmp/core-a perf/scripts/instructions.sh publish_16B publish_hdr_16B
#
# BENCHBIN is a built `benches/core.rs` binary; without it the script builds one
# (`cargo bench --bench core --no-run`, release profile). Needs valgrind.
set -euo pipefail
BENCHES=("$@")
[ ${#BENCHES[@]} -gt 0 ] || BENCHES=(publish_16B)
if [ -z "${BENCHBIN:-}" ]; then
    BENCHBIN=$(cargo bench --bench core --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "core" and m.get("executable"):
        print(m["executable"])' | tail -1)
fi
[ -x "$BENCHBIN" ] || { echo "no bench binary (set BENCHBIN)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for b in "${BENCHES[@]}"; do
    # Messages per step, as the benchmark's table sets them.
    case "$b" in
    publish_1KiB) n=56 ;;
    publish_*) n=1000 ;;
    *) echo "$b: not a pipeline/publish_* benchmark" >&2; exit 1 ;;
    esac
    valgrind --tool=callgrind --callgrind-out-file="$W/$b.out" --toggle-collect='*OneShard::step*' \
        "$BENCHBIN" --bench "pipeline/$b\$" --warm-up-time 1 --measurement-time 1 --noplot \
        --profile-time 1 >"$W/$b.log" 2>&1
    python3 - "$W/$b.out" "$b" "$n" <<'PY'
import re, sys
path, bench, per_step = sys.argv[1], sys.argv[2], int(sys.argv[3])
names, steps, total = {}, 0, None
lines = open(path).read().split("\n")
for i, l in enumerate(lines):
    m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", l)
    if m and m.group(2):
        names[m.group(1)] = m.group(2)
    m = re.match(r"cfn=\((\d+)\)", l)
    if m and "ShardCore::input" in names.get(m.group(1), ""):
        c = re.match(r"calls=(\d+)", lines[i + 1])
        if c:
            steps += int(c.group(1))
    if l.startswith(("summary:", "totals:")) and total is None:
        total = int(l.split()[1])
if not steps or total is None:
    sys.exit(f"{bench}: no steps counted")
print(f"{bench}: {total / (steps * per_step):.1f} instructions a message ({steps} steps of {per_step})")
PY
done
