#!/usr/bin/env bash
# Prepares bench/gpu/device-check.sh on this (CPU) machine: the GPU machine has nvcc, CMake and
# ninja but no package registry, so what the check's build needs beyond them travels with the
# tree in .cache/gpu-carry (git-ignored; pass it to the device tool's `carry`):
#   googletest/   GoogleTest's source (Debian libgtest-dev: /usr/src/googletest)
#   include/      header-only libraries, from Debian's -dev packages: nlohmann/json, spdlog + fmt
#                 (used header-only there), msgpack-c++, CLI11, toml++, cppzmq
#   src/          the sources of ZeroMQ and PCRE2 (Debian source packages, `apt-get source`),
#                 which the check builds as static libraries for the daemons
# Then the check's dry run (device-check.sh --dry-run): the same build with CUDA executed on the
# CPU, every step's command run on it; and the size of what travels (tree + carry, at most 48 MiB).
#   bench/gpu/prepare.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry=$root/.cache/gpu-carry
fail() {
  echo "bench/gpu/prepare.sh: $*" >&2
  exit 1
}
[ -f /usr/src/googletest/CMakeLists.txt ] || fail "no GoogleTest source at /usr/src/googletest (launch/setup installs libgtest-dev)"
headers=(nlohmann spdlog fmt msgpack msgpack.hpp CLI toml++ zmq.hpp zmq_addon.hpp)
for h in "${headers[@]}"; do
  [ -e "/usr/include/$h" ] || fail "no /usr/include/$h (launch/setup installs the project's -dev packages)"
done
rm -rf "$carry/googletest" "$carry/include"
mkdir -p "$carry/include" "$carry/src"
cp -r /usr/src/googletest "$carry/googletest"
for h in "${headers[@]}"; do cp -r "/usr/include/$h" "$carry/include/"; done

# ZeroMQ and PCRE2: the versions this machine's packages have, from Debian's source packages.
fetch_source() {  # fetch_source PACKAGE TARBALL_NAME
  [ -f "$carry/src/$2" ] && return
  if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "prepare: enabling Debian source packages (/etc/apt/sources.list.d/rootspec-deb-src.sources)"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      >/etc/apt/sources.list.d/rootspec-deb-src.sources
    apt-get update -qq
  fi
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get source --download-only -qq "$1" >/dev/null 2>&1) || fail "apt-get source $1 failed"
  local orig
  orig=$(ls "$tmp"/*.orig.tar.* | head -n 1)
  mv "$orig" "$carry/src/$2"
  rm -rf "$tmp"
}
fetch_source zeromq3 zeromq.tar.gz
fetch_source pcre2 pcre2.tar.gz
echo "prepared $carry ($(du -sh "$carry" | cut -f1)); carry it to the GPU machine"
"$root/bench/gpu/device-check.sh" --dry-run || exit 1
"$root/bench/gpu/tree-size.sh"
