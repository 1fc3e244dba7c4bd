// The soak: 10 000 requests through rootspec-http, mixed valid (greedy and sampled,
// streamed or not), invalid, cancelled mid-stream and disconnected, with the drafter killed
// (SIGKILL) half-way. Checks, and prints as one JSON line at the end:
//   * every valid request answered 200; greedy outputs equal to a sequential `ar` run;
//   * every invalid request answered its 4xx; no response id seen twice;
//   * every request the gateway logged as accepted has exactly one Done in the target's log
//     (nothing lost, nothing answered twice), cancelled and disconnected ones included;
//   * RSS of each process grows < 2 % after warm-up, its open file descriptors not at all.
// Run by bench/soak/run.sh (which starts the pair); arguments: URL RUN_DIR [requests] [clients].
'use strict';
const fs = require('fs');
const http = require('http');

const [url, runDir, totalArg, clientsArg] = process.argv.slice(2);
const total = Number(totalArg || 10000);
const clients = Number(clientsArg || 12);
const base = new URL(url);

const prompts = [];
const openings = ['Changed in version 3.8: The', 'Unlike lists, tuples are', '.. function:: open(file, mode=',
                  'This function raises a ValueError if', 'The return value is', 'Return a new', 'If the',
                  'A list of', 'See also', 'Note that the'];
for (let i = 0; i < 40; ++i) prompts.push(openings[i % openings.length] + (i >= 10 ? ` ${i}` : ''));

// ---- HTTP -------------------------------------------------------------------------------------
// One request; resolves {status, body, chunks} (chunks: parsed SSE data lines). `abortAfter`:
// 'first-chunk' closes the connection after the first event; a number closes it after that many ms.
function request(path, payload, { stream = false, abortAfter = null, raw = null } = {}) {
  return new Promise((resolve) => {
    const data = raw !== null ? raw : JSON.stringify(payload);
    const req = http.request({ host: base.hostname, port: base.port, path, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } });
    let done = false;
    const finish = (r) => { if (!done) { done = true; resolve(r); } };
    let timer = null;
    if (typeof abortAfter === 'number') timer = setTimeout(() => { req.destroy(); finish({ status: 'aborted' }); }, abortAfter);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        body += d;
        if (abortAfter === 'first-chunk' && body.includes('data: ')) {
          req.destroy();
          finish({ status: 'aborted', headers: res.headers });
        }
      });
      res.on('end', () => {
        clearTimeout(timer);
        const r = { status: res.statusCode, headers: res.headers };
        if (stream && res.statusCode === 200) {
          r.chunks = body.split('\n\n').filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
            .map((e) => JSON.parse(e.slice(6)));
          r.ended = body.includes('data: [DONE]');
          r.comments = body.split('\n').filter((l) => l.startsWith(': '));
        } else {
          try { r.body = JSON.parse(body); } catch { r.body = body; }
        }
        finish(r);
      });
      res.on('error', () => finish({ status: 'aborted' }));
    });
    req.on('error', (e) => finish({ status: done ? 'aborted' : 'error', error: String(e) }));
    req.end(data);
  });
}

function completionText(r, stream) {
  if (stream) return r.chunks.map((c) => (c.choices[0] ? c.choices[0].text || '' : '')).join('');
  return r.body.choices[0].text;
}
function responseId(r, stream) { return stream ? (r.chunks[0] || {}).id : r.body.id; }

// ---- the request mix --------------------------------------------------------------------------
const invalid = [
  { raw: '{"prompt": "x", ', status: 400 },
  { payload: { max_tokens: 5 }, status: 400 },
  { payload: { prompt: 'x', max_tokens: -3 }, status: 400 },
  { payload: { prompt: 'x', n: 2 }, status: 400 },
  { payload: { prompt: 'x', temperature: -1 }, status: 400 },
  { payload: { prompt: 'x', stop: 7 }, status: 400 },
  { payload: { prompt: 'x', model: 'no-such-model' }, status: 404 },
  { payload: { prompt: 'x', rule: 'warp' }, status: 400 },
  { payload: { prompt: 'x', budget: 100000 }, status: 400 },
  { payload: { prompt: 'x', max_tokens: 1000000 }, status: 400 },
];

// Deterministic mix: request i's kind.
function kindOf(i) {
  const k = (i * 7919) % 100;
  if (k < 50) return 'greedy';
  if (k < 65) return 'sampled';
  if (k < 80) return 'invalid';
  if (k < 90) return 'cancelled';
  return 'disconnected';
}
// Every decoder a user may name, `auto` (the default, one policy for the batch: decoding_policy.h) included.
const rules = ['root-draw', 'root', 'ar', 'auto'];

function greedyPayload(i) {
  return { prompt: prompts[i % prompts.length], max_tokens: 16 + (i % 3) * 16, temperature: 0,
           stop_at_eos: false, rule: rules[i % rules.length], budget: 8 };
}

async function one(i, reference, stats) {
  const kind = kindOf(i);
  stats.kinds[kind] = (stats.kinds[kind] || 0) + 1;
  const stream = i % 2 === 0;
  if (kind === 'greedy') {
    const p = greedyPayload(i);
    const r = await request('/v1/completions', { ...p, stream }, { stream });
    if (r.status !== 200) return stats.fail(`greedy ${i}: status ${r.status} ${JSON.stringify(r.body)}`);
    if (stream && !r.ended) return stats.fail(`greedy ${i}: the stream did not end with [DONE]`);
    const text = completionText(r, stream);
    const want = reference.get(`${p.prompt}|${p.max_tokens}`);
    if (text !== want) return stats.fail(`greedy ${i}: '${text}' differs from the sequential run's '${want}'`);
    const deg = stream ? (r.chunks[r.chunks.length - 1] || {}).rootspec : r.body.rootspec;
    if (deg) stats.degraded += 1;
    stats.ids.push(responseId(r, stream));
    stats.ok += 1;
  } else if (kind === 'sampled') {
    const r = await request('/v1/completions', { prompt: prompts[i % prompts.length], max_tokens: 24,
      temperature: 0.8, seed: i, stream, rule: rules[i % rules.length] }, { stream });
    if (r.status !== 200) return stats.fail(`sampled ${i}: status ${r.status}`);
    stats.ids.push(responseId(r, stream));
    stats.ok += 1;
  } else if (kind === 'invalid') {
    const bad = invalid[i % invalid.length];
    const r = await request('/v1/completions', bad.payload, { raw: bad.raw || null });
    if (r.status !== bad.status) return stats.fail(`invalid ${i}: status ${r.status}, expected ${bad.status}`);
    if (!r.body || !r.body.error) return stats.fail(`invalid ${i}: no error body`);
    stats.ok += 1;
  } else if (kind === 'cancelled') {  // a stream closed after its first event
    const r = await request('/v1/completions', { prompt: prompts[i % prompts.length], max_tokens: 400,
      stop_at_eos: false, stream: true }, { stream: true, abortAfter: 'first-chunk' });
    if (r.status !== 'aborted' && r.status !== 200) return stats.fail(`cancelled ${i}: status ${r.status}`);
    stats.ok += 1;
  } else {  // a client that goes away before any answer
    const r = await request('/v1/completions', { prompt: prompts[i % prompts.length], max_tokens: 400,
      stop_at_eos: false }, { abortAfter: 20 + (i % 5) * 20 });
    if (r.status !== 'aborted' && r.status !== 200) return stats.fail(`disconnected ${i}: status ${r.status}`);
    stats.ok += 1;
  }
}

// ---- processes --------------------------------------------------------------------------------
const names = ['drafter', 'target', 'http'];
function pids() { return fs.readFileSync(`${runDir}/pids`, 'utf8').trim().split(/\s+/).map(Number); }
function sample() {
  const out = {};
  pids().forEach((pid, i) => {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    out[names[i]] = { pid, rss_kb: Number(/VmRSS:\s+(\d+)/.exec(status)[1]), fds: fs.readdirSync(`/proc/${pid}/fd`).length };
  });
  return out;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Idle until the target's queue is empty and nothing decodes (cancelled requests end within a round).
async function settle() {
  for (let i = 0; i < 200; ++i) {
    const h = await new Promise((res) => http.get(`${url}/health`, (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => res(b)); }).on('error', () => res('{}')));
    try { const j = JSON.parse(h); if (j.waiting === 0 && j.running === 0) break; } catch {}
    await sleep(100);
  }
  await sleep(6000);  // idle keep-alive connections close (httplib's keep_alive_timeout: 5 s)
}

async function run(from, to, reference, stats, onProgress, workers = clients) {
  let next = from;
  const worker = async () => {
    for (let i = next++; i < to; i = next++) {
      await one(i, reference, stats);
      if (onProgress) await onProgress(i);
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
}

(async () => {
  const t0 = Date.now();
  const stats = { ok: 0, failures: [], degraded: 0, ids: [], kinds: {},
                  fail(m) { this.failures.push(m); if (this.failures.length <= 10) console.error(`soak: ${m}`); } };
  // The sequential reference: every greedy (prompt, max_tokens) once, with ar, one at a time.
  const reference = new Map();
  for (let i = 0; i < 3 * prompts.length * 4; ++i) {
    const p = greedyPayload(i);
    const key = `${p.prompt}|${p.max_tokens}`;
    if (reference.has(key)) continue;
    const r = await request('/v1/completions', { ...p, rule: 'ar', stream: false });
    if (r.status !== 200) throw new Error(`reference ${key}: status ${r.status}`);
    reference.set(key, r.body.choices[0].text);
  }
  console.error(`soak: ${reference.size} reference outputs (sequential ar); ${total} requests, ${clients} clients`);

  // Warm-up: the first 20 %, four times as many clients at once, so that most threads of the
  // gateway's pool (queue_depth + 8) serve every kind of request and their stacks and malloc
  // caches reach their size before the baseline is taken: their growth until then is warm-up, not
  // a leak. The drafter is killed at 50 % and its successor measured after the same warm-up, from
  // 70 %: with a batch, the drafter's sessions warm up over thousands of requests too, and a
  // shorter wait would count that as growth (bench/results/soak-10000-requests-2026-12-04/README.md).
  const warm = Math.round(total * 0.2), kill = Math.round(total * 0.5), rebase = kill + warm;
  const series = [];  // RSS (kB) of each process every 1000 requests, under load
  const progress = async (i) => {
    if (i % 1000 !== 0) return;
    console.error(`soak: ${i} requests (${((Date.now() - t0) / 1e3).toFixed(0)} s)`);
    try {
      const s = sample();
      series.push({ requests: i, drafter: s.drafter.rss_kb, target: s.target.rss_kb, http: s.http.rss_kb });
    } catch {}  // the drafter is being restarted
  };
  await run(0, warm, reference, stats, progress, Math.min(4 * clients, 48));
  await settle();
  const after_warmup = sample();
  await run(warm, kill, reference, stats, progress);
  const killed_pid = pids()[0];
  process.kill(killed_pid, 'SIGKILL');
  console.error(`soak: killed the drafter (pid ${killed_pid}) after ${kill} requests`);
  await run(kill, rebase, reference, stats, progress);
  await settle();
  const after_restart = sample();
  await run(rebase, total, reference, stats, progress);
  await settle();
  const end = sample();
  const seconds = (Date.now() - t0) / 1e3;

  // Nothing lost or answered twice. The gateway logs each request it passed to the target with
  // its id and status: 200 (streams too, cut ones included) and 499 (a client gone while its
  // request waited) were accepted by the target, which must have sent exactly one Done for each;
  // no id may have two.
  const gatewayLog = fs.readFileSync(`${runDir}/http.log`, 'utf8');
  const targetLog = fs.readFileSync(`${runDir}/target.log`, 'utf8');
  const acceptedIds = new Set();
  let generateRequests = 0;
  for (const m of gatewayLog.matchAll(/request (\d+): \S+ POST \/v1\/completions (\d+)/g)) {
    ++generateRequests;
    if (m[2] === '200' || m[2] === '499') acceptedIds.add(m[1]);
  }
  const dones = new Map();
  for (const m of targetLog.matchAll(/request (\d+): (?:\w+ after \d+ tokens|cancelled while queued)/g))
    dones.set(m[1], (dones.get(m[1]) || 0) + 1);
  let lost = 0, twice = 0;
  for (const id of acceptedIds) if (!dones.has(id)) lost += 1;
  for (const n of dones.values()) if (n > 1) twice += 1;
  const ids = new Set(stats.ids);
  const growth = (a, b) => (b.rss_kb - a.rss_kb) / a.rss_kb * 100;
  const processes = {
    target: { rss_growth_pct: growth(after_warmup.target, end.target), fds: [after_warmup.target.fds, end.target.fds] },
    http: { rss_growth_pct: growth(after_warmup.http, end.http), fds: [after_warmup.http.fds, end.http.fds] },
    drafter: { rss_growth_pct: growth(after_restart.drafter, end.drafter), fds: [after_restart.drafter.fds, end.drafter.fds],
               restarted: after_restart.drafter.pid !== killed_pid && end.drafter.pid === after_restart.drafter.pid },
  };
  const metrics = await new Promise((res) => http.get(`${url}/metrics`, (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => res(b)); }));
  const metric = (name) => Number((new RegExp(`^${name} (\\S+)`, 'm').exec(metrics) || [])[1]);
  const summary = {
    requests: total, seconds: Number(seconds.toFixed(1)), clients, kinds: stats.kinds, answered_as_expected: stats.ok,
    failures: stats.failures.length, duplicate_response_ids: stats.ids.length - ids.size,
    gateway_generate_requests: generateRequests, accepted_by_target: acceptedIds.size, target_dones: [...dones.values()].reduce((a, b) => a + b, 0),
    lost, answered_twice: twice, degraded_greedy_responses: stats.degraded,
    degraded_generations: metric('rootspec_degraded_generations_total'), drafter_up_at_end: metric('rootspec_drafter_up'),
    rss_kb: { after_warmup, after_restart, end }, rss_kb_series: series, processes,
  };
  const ok = summary.failures === 0 && summary.duplicate_response_ids === 0 && lost === 0 && twice === 0 &&
    processes.drafter.restarted && summary.drafter_up_at_end === 1 &&
    Object.values(processes).every((p) => p.rss_growth_pct < 2 && p.fds[1] <= p.fds[0]);
  summary.pass = ok;
  console.log(JSON.stringify(summary));
  process.exit(ok ? 0 : 1);
})().catch((e) => { console.error(e); process.exit(2); });
