#!/usr/bin/env bash
# Encode throughput of rootspec's tokenizer against the JavaScript peer on the same ~1 MB mixed
# corpus, in the same run. Goal: >= 5x the peer.
# Usage: bench/tokenizer/compare_peer.sh [BUILD_DIR]   (default build; needs target bench_tokenizer)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-${ROOTSPEC_BUILD_DIR:-$root/build}}
bash "$root/tests/prepare/tokenizer_peer.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$root/tests/tokenizer/peer.mjs" bench-corpus "$tmp/corpus.json"
export ROOTSPEC_TOKENIZER_BENCH_CORPUS=$tmp/corpus.json
"$build/bench/tokenizer/bench_tokenizer" --benchmark_filter='BM_EncodeCorpus' --benchmark_format=json > "$tmp/ours.json" 2>/dev/null
for m in llama3 qwen3; do node "$root/tests/tokenizer/peer.mjs" bench "$m" "$tmp/corpus.json" > "$tmp/peer_$m.json"; done
node - "$tmp" <<'JS'
const fs = require("fs"); const dir = process.argv[2];
const ours = JSON.parse(fs.readFileSync(`${dir}/ours.json`, "utf8")).benchmarks;
console.log("model    corpus_bytes  tokens   rootspec MB/s  peer MB/s  ratio");
for (const m of ["llama3", "qwen3"]) {
  const o = ours.find((b) => b.name.startsWith(`BM_EncodeCorpus/${m}`));
  const p = JSON.parse(fs.readFileSync(`${dir}/peer_${m}.json`, "utf8"));
  const oursMB = o.bytes_per_second / 1e6;
  console.log(`${m.padEnd(8)} ${String(p.bytes).padStart(12)} ${String(o.tokens).padStart(7)} ${oursMB.toFixed(1).padStart(14)} ${p.mb_per_s.toFixed(2).padStart(10)} ${(oursMB / p.mb_per_s).toFixed(1).padStart(6)}x` +
    (o.tokens === p.tokens ? "" : `   (token counts differ: peer ${p.tokens})`));
}
JS
