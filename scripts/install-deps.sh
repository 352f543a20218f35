#!/usr/bin/env bash
# Installs what jx needs to build and test on Debian 12 (run as root).
set -euo pipefail
# clang and its sanitizer runtime build the second (sanitized) test pass;
# clang-format checks the formatting.
packages=(build-essential cmake pkg-config libopenblas-dev libcmocka-dev clang libclang-rt-14-dev
          clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
