#!/usr/bin/env bash
# Installs the HTTP tests' npm peer into a cache OUTSIDE the repository: the official `openai`
# client (6.x, the last line that runs on Debian 12's Node.js 20). (The Prometheus parser is
# Debian's python3-prometheus-client, which launch/setup installs.) Idempotent: returns at once
# when the pinned version is there.
#   cache: $ROOTSPEC_HTTP_PEER, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/npm-http
# tests/http finds it by the same rule (http_fixture.h).
set -euo pipefail
declare -A want=([openai]=6.49.0)
dir=${ROOTSPEC_HTTP_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm-http}
installed() {
  for p in "${!want[@]}"; do
    node -e 'const v=require(process.argv[1]).version; process.exit(v===process.argv[2]?0:1)' \
      "$dir/node_modules/$p/package.json" "${want[$p]}" 2>/dev/null || return 1
  done
}
command -v node >/dev/null || { echo "http_peer.sh: node (>= 18) is required" >&2; exit 1; }
installed && exit 0
command -v npm >/dev/null || { echo "http_peer.sh: npm is required" >&2; exit 1; }
specs=()
for p in "${!want[@]}"; do specs+=("$p@${want[$p]}"); done
echo "http_peer.sh: installing ${specs[*]} into $dir"
mkdir -p "$(dirname "$dir")"
# Install beside the cache and swap it in, so an interrupted install never looks complete.
tmp=$(mktemp -d "$(dirname "$dir")/npm-http.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo '{ "name": "rootspec-http-peer", "private": true, "type": "module" }' > "$tmp/package.json"
(cd "$tmp" && npm install --no-audit --no-fund --loglevel=error "${specs[@]}")
rm -rf "$dir.old"
[ -e "$dir" ] && mv "$dir" "$dir.old"
mv "$tmp" "$dir"
rm -rf "$dir.old"
installed || { echo "http_peer.sh: install into $dir did not produce the pinned versions" >&2; exit 1; }
