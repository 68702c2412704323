#!/usr/bin/env bash
# Smoke fuzzing for CI: build every fuzz target, replay the minimized crash inputs kept in
# fuzz/regressions/<target>/, then fuzz each target for N seconds (default 20) starting
# from the committed seeds in fuzz/corpus/<target>/ (new inputs go to fuzz/work/, which
# is not committed). Exits non-zero on the first crash or failed invariant.
#
#   fuzz/run-briefly.sh [seconds-per-target]
#
# Needs the nightly toolchain; installs cargo-fuzz if it is missing.
set -euo pipefail

secs="${1:-20}"
cd "$(dirname "$0")"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "run-briefly: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=(parser core subject jwt transform ws_frame ws_upgrade trace ocsp storage_ref_block storage_snapshot storage_decode storage_ops js_api_decode js_consumer_wire js_batch_headers)
start=$(date +%s)
echo "== building (cargo +nightly fuzz build)"
cargo +nightly fuzz build

for t in "${targets[@]}"; do
    if compgen -G "regressions/$t/*" >/dev/null; then
        mkdir -p work
        echo "== $t: replaying $(ls regressions/"$t" | wc -l) regression input(s)"
        if ! cargo +nightly fuzz run "$t" regressions/"$t"/* >"work/$t-regressions.log" 2>&1; then
            grep -E -A3 "panicked|Running:" "work/$t-regressions.log" | tail -n 30 >&2
            echo "run-briefly: $t fails on a regression input (see fuzz/work/$t-regressions.log)" >&2
            exit 1
        fi
    fi
    mkdir -p "work/$t"
    max_len=4096
    [ "$t" = core ] && max_len=8192
    echo "== $t: fuzzing for ${secs}s"
    log="work/$t.log"
    if ! cargo +nightly fuzz run "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "run-briefly: $t failed; the crash input is in fuzz/artifacts/$t/" >&2
        exit 1
    fi
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
echo "run-briefly: all targets clean in $(($(date +%s) - start))s"
