#!/usr/bin/env bash
# Runs the nats-py program of the client matrix (see ../README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=$("$repo/tools/python-clients")
if ! PYTHONPATH="$dir" python3 -c "import nkeys" >/dev/null 2>&1; then
  "$here/install.sh" >&2
fi
export PYTHONPATH="$dir"
exec python3 -u "$here/matrix.py"
