#!/usr/bin/env bash
# Installs the HTTP tests' npm peer into a cache OUTSIDE the repository: the official `openai`
# client (6.x, the last line that runs on Debian 12's Node.js 20), with `zod` (3.x, which its
# structured-output helper openai/helpers/zod takes) and `ajv` (an independent JSON Schema
# validator for tool-call arguments), and the two libraries most apps call structured output
# through: the AI SDK (`ai` 6.x with `@ai-sdk/openai` 3.x) and LangChain (`@langchain/openai`
# 1.1 with `@langchain/core` 1.1), the last lines that run on Node.js 20 (7.x / 1.6 need 22). (The Prometheus parser is
# Debian's python3-prometheus-client, which launch/setup installs.) Idempotent.
#   cache: $ROOTSPEC_HTTP_PEER, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/npm-http
# tests/http and bench/http find it by the same rule.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/npm_install.bash"
dir=${ROOTSPEC_HTTP_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm-http}
npm_install_pinned http_peer.sh "$dir" openai@6.49.0 zod@3.25.76 ajv@8.17.1 ai@6.0.333 \
  @ai-sdk/openai@3.0.141 @langchain/openai@1.1.3 @langchain/core@1.1.0
