#!/usr/bin/env bash
# Prepares bench/gpu/device-check.sh on this (CPU) machine: the GPU machine has nvcc, CMake and
# ninja but no package registry, so what the check's build needs beyond them travels with the
# tree in .cache/gpu-carry (git-ignored; pass it to the device tool's `carry`):
#   .cache/gpu-carry/googletest   GoogleTest's source (Debian libgtest-dev: /usr/src/googletest)
#   .cache/gpu-carry/include      nlohmann/json's headers (Debian nlohmann-json3-dev)
# Then a dry run of the check (configure and build here, stop before the first GPU call).
#   bench/gpu/prepare.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry=$root/.cache/gpu-carry
src=/usr/src/googletest
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "bench/gpu/prepare.sh: no GoogleTest source at $src (launch/setup installs libgtest-dev)" >&2
  exit 1
fi
json=/usr/include/nlohmann
if [ ! -f "$json/json.hpp" ]; then
  echo "bench/gpu/prepare.sh: no nlohmann/json headers at $json (launch/setup installs nlohmann-json3-dev)" >&2
  exit 1
fi
rm -rf "$carry/googletest" "$carry/include"
mkdir -p "$carry/include"
cp -r "$src" "$carry/googletest"
cp -r "$json" "$carry/include/nlohmann"
echo "prepared $carry ($(du -sh "$carry" | cut -f1)); carry it to the GPU machine"
"$root/bench/gpu/device-check.sh" --dry-run
