#!/usr/bin/env bash
# Checks deploy/systemd: `systemd-analyze verify` on rnats.service (any warning fails it),
# its exposure score (`systemd-analyze security --offline`), and `rnats -t` on rnats.conf.
#
# verify needs the unit's commands to exist, so it runs against a scratch root
# (`--root`): the unit in etc/systemd/system, the system's own units, /bin/kill, and an
# rnats binary at the unit's ExecStart path ($RNATS_BIN, else
# $CARGO_TARGET_DIR/debug/rnats, built with `cargo build --bin rnats` when missing).
# Nothing outside that scratch root (removed on exit) is touched; systemd-analyze is
# installed from apt when missing. It does not start the service (that needs systemd as
# PID 1).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
unit=$here/rnats.service
log() { echo "systemd-check: $*"; }
fail() { echo "systemd-check: FAILED: $*" >&2; exit 1; }

if ! command -v systemd-analyze >/dev/null 2>&1; then
    log "installing systemd (apt-get) for systemd-analyze"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd) >/dev/null \
        || fail "could not install systemd"
fi

bin=${RNATS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/rnats-target}/debug/rnats}
if [ ! -x "$bin" ]; then
    log "building $bin"
    (cd "$repo" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rnats-target} cargo build --bin rnats)
fi

root=$(mktemp -d /tmp/rnats-systemd-check.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root/etc/rnats"
sysunits=/usr/lib/systemd/system
[ -d "$sysunits" ] || sysunits=/lib/systemd/system
cp -a "$sysunits" "$root/usr/lib/systemd/"
cp "$unit" "$root/etc/systemd/system/rnats.service"
cp "$here/rnats.conf" "$root/etc/rnats/rnats.conf"
# Every absolute command of the unit (ExecStart, ExecReload, ...) at its path in the root.
grep -E '^Exec[A-Za-z]*=' "$unit" | sed -E 's/^[^=]*=[-@:+!]*//; s/ .*//' | sort -u | while read -r cmd; do
    mkdir -p "$root$(dirname "$cmd")"
    case "$cmd" in
    # Copies (or hard links): verify resolves symbolic links inside the root.
    */rnats) ln "$bin" "$root$cmd" 2>/dev/null || cp "$bin" "$root$cmd" ;;
    *) [ -x "$cmd" ] || fail "$cmd (in $unit) does not exist on this host"; cp "$cmd" "$root$cmd" ;;
    esac
done

out=$(systemd-analyze verify --root="$root" /etc/systemd/system/rnats.service 2>&1) \
    || fail "systemd-analyze verify: $out"
# Warnings (unknown keys, bad values) do not change the exit code; they fail the check.
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
log "systemd-analyze verify: no errors or warnings ($(systemd-analyze --version | head -1))"

score=$(systemd-analyze security --offline=yes --root="$root" /etc/systemd/system/rnats.service 2>&1 \
    | sed -n 's/.*Overall exposure level for rnats.service: //p')
[ -n "$score" ] || fail "systemd-analyze security gave no score"
log "exposure level: $score"
case "$score" in 0.* | 1.* | 2.*) ;; *) fail "exposure level $score is above 2.9" ;; esac

out=$("$bin" -t -c "$here/rnats.conf" 2>&1) || fail "rnats -t -c rnats.conf: $out"
log "$out"
log OK
