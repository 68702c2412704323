#!/usr/bin/env bash
# libnats (nats.c 3.4.1) from Debian, gcc, pkg-config and OpenSSL's headers (the program
# derives the nkey's public key from its seed with libcrypto). Idempotent: apt only runs
# when a package is missing.
set -euo pipefail
packages=(libnats-dev libssl-dev pkg-config gcc libc6-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "c: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2
fi
echo "c: libnats $(pkg-config --modversion libnats), $(gcc -dumpfullversion)"
