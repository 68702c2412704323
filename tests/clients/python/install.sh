#!/usr/bin/env bash
# nats-py 2.16.0 + aiohttp (tools/python-clients) and nkeys (nats-py's nkey/creds auth)
# into the same cache directory. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=$("$repo/tools/python-clients")
exec 9>"$dir/.lock"
command -v flock >/dev/null 2>&1 && flock 9
if ! PYTHONPATH="$dir" python3 -c "import nkeys, nacl" >/dev/null 2>&1; then
  echo "python: installing nkeys into $dir" >&2
  python3 -m pip install --quiet --disable-pip-version-check --target "$dir" \
    "nkeys==0.2.1" "pynacl==1.5.0" >&2
fi
echo "python: nats-py, aiohttp and nkeys in $dir"
