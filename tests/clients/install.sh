#!/usr/bin/env bash
# Installs what every client program of the matrix needs: runs each tests/clients/*/install.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for script in "$here"/*/install.sh; do
  [[ -e $script ]] || continue
  name=$(basename "$(dirname "$script")")
  echo "== $name: $script"
  bash "$script"
  echo "== $name: done"
done
