// Load on rootspec-http with the official `openai` npm client (tests/prepare/http_peer.sh):
// `clients` concurrent clients, each sending `requests` mixed requests (completions and, where the
// model has a chat template, chat; every third streamed; greedy), then the latency of each request
// (p50 / p99), the time to the first streamed text, and the target's queue wait (p50 / p99
// estimated from /metrics' rootspec_queue_wait_seconds buckets, as Prometheus' histogram_quantile
// does). Timing only: nothing is asserted.
//   NODE_PATH=<peer>/node_modules node bench/http/load.cjs URL [clients=32] [requests=10] [max_tokens=32] [chat=1]
'use strict';
const OpenAI = require('openai');

const [url, clients = '32', requests = '10', maxTokens = '32', chat = '1'] = process.argv.slice(2);
const client = new OpenAI({ baseURL: url + '/v1', apiKey: process.env.ROOTSPEC_API_KEY || 'none', maxRetries: 0,
                            timeout: 600000 });

function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// histogram_quantile over cumulative buckets [[le, count], …].
function histogramQuantile(buckets, q) {
  const total = buckets[buckets.length - 1][1];
  if (!total) return NaN;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (!isFinite(le)) return prevLe;
      return prevLe + (le - prevLe) * ((rank - prevCount) / Math.max(count - prevCount, 1e-9));
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

async function one(i, w) {
  const kind = chat === '1' && i % 2 ? 'chat' : 'completions';
  const stream = i % 3 === 0;
  const prompt = `Client ${w} request ${i}: the json module`;
  const params = { model: undefined, max_tokens: Number(maxTokens), temperature: 0, stream };
  const start = performance.now();
  let first = null;
  const api = kind === 'chat' ? client.chat.completions : client.completions;
  const res = await api.create(kind === 'chat' ? { ...params, messages: [{ role: 'user', content: prompt }] }
                                               : { ...params, prompt });
  if (stream) {
    for await (const chunk of res) {
      const c = chunk.choices[0];
      if (first === null && c && ((c.delta && c.delta.content) || c.text)) first = performance.now() - start;
    }
  }
  return { ms: performance.now() - start, first };
}

async function main() {
  const model = (await client.models.list()).data[0].id;
  const t0 = performance.now();
  const results = [];
  const failures = [];
  await Promise.all(Array.from({ length: Number(clients) }, async (_, w) => {
    for (let i = 0; i < Number(requests); ++i) {
      try {
        results.push(await one(i, w));
      } catch (e) {
        failures.push(String(e.message || e));
      }
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const lat = results.map((r) => r.ms).sort((a, b) => a - b);
  const ttft = results.filter((r) => r.first !== null).map((r) => r.first).sort((a, b) => a - b);
  const text = await (await fetch(url + '/metrics')).text();
  const buckets = [];
  for (const m of text.matchAll(/^rootspec_queue_wait_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm))
    buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  const out = {
    model, clients: Number(clients), requests_per_client: Number(requests), max_tokens: Number(maxTokens),
    answered: results.length, failed: failures.length, wall_s: wall, requests_per_s: results.length / wall,
    latency_ms: { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), max: lat[lat.length - 1] },
    first_text_ms: { p50: quantile(ttft, 0.5), p99: quantile(ttft, 0.99) },
    queue_wait_ms: { p50: 1000 * histogramQuantile(buckets, 0.5), p99: 1000 * histogramQuantile(buckets, 0.99) },
  };
  console.log(JSON.stringify(out, null, 2));
  if (failures.length) console.error('failures:', failures.slice(0, 5));
}

main().catch((e) => { console.error(e); process.exit(1); });
