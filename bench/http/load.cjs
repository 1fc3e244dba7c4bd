// The load benchmark of rootspec-http (bench/http/run.sh starts a pair and runs it). Timing only:
// nothing is asserted. In one run it
//   - drives N concurrent streaming clients (the official `openai` npm client from
//     tests/prepare/http_peer.sh; chat, completions or both alternating; greedy; streamed with
//     stream_options.include_usage), each sending R requests back to back, and reports per request
//     TTFT (time to the first text), TPOT ((end - first) / (tokens - 1), tokens from the usage
//     chunk) and latency as p50 / p90 / p99, output tokens/s and requests/s over the run, the
//     target's queue wait (estimated from /metrics' rootspec_queue_wait_seconds buckets, as
//     Prometheus' histogram_quantile does), and errors by kind (HTTP status, 429 and 503 named,
//     connection errors, timeouts);
//   - holds M more connections (node `net`) opened before the streams start and closed after them:
//     idle (connected, nothing sent) or, a --slow fraction of them, slow (a request header
//     trickled one byte per second, never finished), from 127.0.0.2, 127.0.0.3, … (--per-address
//     connections each, so that a per-client-address cap in the server can be respected); reports
//     how many opened, how many the gateway has a socket for (`ss`), how many it refused (a 503
//     answer, or a reset within a second of opening) and how many it closed otherwise during the
//     run (and when: seconds held, seconds into the run);
//   - probes GET /health once alone, then every 100 ms during the run, each on a fresh
//     connection (p50 / p99 latency, failures by kind with the answer's body);
//   - reads the gateway's VmRSS and threads (/proc/PID/status) before the held connections, while
//     they are held, during the run (peak) and after they are closed, says when the process was
//     gone (died; restarted by the launcher), and counts the sockets the gateway still holds
//     afterwards (`ss`: ESTABLISHED and CLOSE-WAIT on its port, less the benchmark's own
//     keep-alive sockets) as "connections left";
//   - with --same-text, first asks each prompt alone (greedy) and counts the answers under load
//     whose text differs.
// Prints a table; --json FILE writes the numbers. `--help` lists the flags. The old positional
// form still works: URL [clients=32] [requests=10] [max_tokens=32] [chat=1] (chat=0: completions
// only); --stream-every 3 gives the old mix (every third request streamed).
//   NODE_PATH=<peer>/node_modules node bench/http/load.cjs URL [flags]
'use strict';
const fs = require('fs');
const net = require('net');
const http = require('http');
const { execFileSync } = require('child_process');

const FLAGS = [
  // [name, default, help]
  ['clients', 32, 'N: concurrent streaming clients'],
  ['requests', 10, 'R: requests per client, back to back'],
  ['max-tokens', 32, 'max_tokens of each request'],
  ['api', 'both', 'chat | completions | both (alternating per request)'],
  ['stream-every', 1, 'stream every K-th request (1: all; 3: the old mix; others are not streamed)'],
  ['timeout-s', 120, 'a request not done within this is abandoned, counted as a timeout'],
  ['idle', 0, 'M: extra connections held during the run'],
  ['slow', 0, 'fraction of the M that trickle a request header one byte per second (0..1)'],
  ['per-address', 1000, 'held connections per source address (127.0.0.2, 127.0.0.3, …)'],
  ['connect-timeout-s', 10, 'a held connection not connected within this failed to connect'],
  ['hold-before-s', 1, 'seconds between opening the held connections and starting the streams'],
  ['health-ms', 100, 'the /health probe period (0: no probe)'],
  ['health-timeout-s', 5, 'a /health probe not answered within this failed'],
  ['after-s', 6, 'seconds after closing the held connections before counting what the gateway holds'],
  ['same-text', false, "compare each answer under load with the prompt's answer alone"],
  ['pid', 0, "the gateway's pid (default: $ROOTSPEC_RUN_DIR/pids, the listener's owner, or pgrep)"],
  ['json', '', 'write the numbers to this file'],
];

function usage() {
  const lines = ['usage: node bench/http/load.cjs URL [flags]   (URL: http://host:port, no /v1)',
                 '       node bench/http/load.cjs URL [clients] [requests] [max_tokens] [chat=1|0]   (old form)',
                 'flags (default):'];
  for (const [name, def, help] of FLAGS)
    lines.push(`  --${name}${typeof def === 'boolean' ? '' : ' X'}`.padEnd(26) + `${help}` +
               (typeof def === 'boolean' || def === '' ? '' : ` (${def})`));
  return lines.join('\n');
}

function parseArgs(argv) {
  const opts = Object.fromEntries(FLAGS.map(([n, d]) => [n, d]));
  const positional = [];
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '-h' || a === '--help') { console.log(usage()); process.exit(0); }
    if (!a.startsWith('--')) { positional.push(a); continue; }
    let [name, value] = a.slice(2).split(/=(.*)/s);
    const flag = FLAGS.find(([n]) => n === name);
    if (!flag) throw new Error(`unknown flag --${name}\n${usage()}`);
    if (typeof flag[1] === 'boolean') { opts[name] = value === undefined ? true : value !== '0' && value !== 'false'; continue; }
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new Error(`--${name} needs a value`);
      value = argv[++i];
    }
    if (typeof flag[1] === 'number') {
      const v = Number(value);
      if (!Number.isFinite(v) || v < 0) throw new Error(`--${name}: not a number >= 0: '${value}'`);
      opts[name] = v;
    } else {
      opts[name] = value;
    }
  }
  if (!positional.length) throw new Error(`no URL\n${usage()}`);
  opts.url = positional[0].replace(/\/+$/, '').replace(/\/v1$/, '');
  const [clients, requests, maxTokens, chat] = positional.slice(1);  // the old positional form
  if (clients !== undefined) opts.clients = Number(clients);
  if (requests !== undefined) opts.requests = Number(requests);
  if (maxTokens !== undefined) opts['max-tokens'] = Number(maxTokens);
  if (chat !== undefined) opts.api = chat === '1' ? 'both' : 'completions';
  if (!['chat', 'completions', 'both'].includes(opts.api)) throw new Error(`--api: chat, completions or both`);
  if (opts.slow > 1) throw new Error('--slow is a fraction (0..1)');
  opts['per-address'] = Math.max(1, Math.floor(opts['per-address']));
  opts['stream-every'] = Math.max(1, Math.floor(opts['stream-every']));
  return opts;
}

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, d = 1) => (Number.isFinite(x) ? Number(x.toFixed(d)) : null);

function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
function summary(values) {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b);
  return { n: s.length, min: round(s.length ? s[0] : NaN), p50: round(quantile(s, 0.5)), p90: round(quantile(s, 0.9)), p99: round(quantile(s, 0.99)),
           max: round(s.length ? s[s.length - 1] : NaN) };
}

// histogram_quantile over cumulative buckets [[le, count], …].
function histogramQuantile(buckets, q) {
  if (!buckets.length) return NaN;
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
async function queueWaitBuckets(url) {
  try {
    const text = await (await fetch(url + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
    const buckets = [];
    for (const m of text.matchAll(/^rootspec_queue_wait_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm))
      buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
    return buckets;
  } catch {
    return null;
  }
}

// ---- the gateway process: pid, memory, sockets ----

function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 });
  } catch {
    return '';
  }
}
function gatewayPid(opts, port) {
  if (opts.pid) return { pid: opts.pid, how: '--pid' };
  const runDir = process.env.ROOTSPEC_RUN_DIR;
  if (runDir) {
    try {
      const pid = Number(fs.readFileSync(runDir + '/pids', 'utf8').trim().split(/\s+/)[2]);
      if (pid) return { pid, how: '$ROOTSPEC_RUN_DIR/pids' };
    } catch { /* not there */ }
  }
  const m = sh('ss', ['-Htlnp', `( sport = :${port} )`]).match(/pid=(\d+)/);
  if (m) return { pid: Number(m[1]), how: `the listener on :${port}` };
  const pids = sh('pgrep', ['-f', 'rootspec-http']).split(/\s+/).filter(Boolean);
  if (pids.length === 1) return { pid: Number(pids[0]), how: 'pgrep -f rootspec-http' };
  return { pid: 0, how: pids.length ? `pgrep found ${pids.length} rootspec-http; pass --pid` : 'not found' };
}
// VmRSS (MiB) and Threads of the process, or null.
function procStatus(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return { rss_mib: round(Number(s.match(/^VmRSS:\s+(\d+)/m)[1]) / 1024),
             threads: Number(s.match(/^Threads:\s+(\d+)/m)[1]) };
  } catch {
    return null;
  }
}
// The gateway's TCP sockets on `port` by state: those whose peer is one of `held` (addresses
// "ip:port" of the held connections) apart, and those whose peer is another socket of this process
// (the openai client's keep-alive connections) counted apart. "left": ESTABLISHED and CLOSE-WAIT
// ones that are neither.
function gatewaySockets(port, held = new Set()) {
  const out = sh('ss', ['-Htanp', `( sport = :${port} or dport = :${port} )`]);
  const ours = new Set();
  const server = [];
  for (const line of out.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5 || f[0] === 'LISTEN') continue;
    const [state, , , local, peer] = f;
    if (local.endsWith(':' + port)) server.push({ state, peer });
    else if (peer.endsWith(':' + port) && line.includes(`pid=${process.pid},`)) ours.add(local);
  }
  const byState = {}, heldByState = {};
  let own = 0;
  for (const s of server) {
    if (held.has(s.peer)) heldByState[s.state] = (heldByState[s.state] || 0) + 1;
    else if (ours.has(s.peer)) ++own;
    else byState[s.state] = (byState[s.state] || 0) + 1;
  }
  return { left: (byState.ESTAB || 0) + (byState['CLOSE-WAIT'] || 0), by_state: byState, held: heldByState,
           held_total: Object.values(heldByState).reduce((a, n) => a + n, 0), benchmark_keepalive: own };
}

// ---- held connections (idle or slow) ----

function sourceAddress(j, perAddress) {
  const n = 0x7f000002 + Math.floor(j / perAddress);  // 127.0.0.2, …, then 127.0.1.0, …
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

class Held {
  constructor(host, port, localAddress, slow) {
    Object.assign(this, { host, port, localAddress, slow, fate: 'connecting', sent: 0, response: '' });
  }
  open(timeoutMs) {
    return new Promise((resolve) => {
      const t0 = now();
      const sock = net.connect({ host: this.host, port: this.port, localAddress: this.localAddress });
      this.sock = sock;
      sock.setNoDelay(true);
      const timer = setTimeout(() => { this.end('connect timeout'); resolve(); }, timeoutMs);
      sock.on('connect', () => {
        clearTimeout(timer);
        this.openedAt = now();
        this.connectMs = this.openedAt - t0;
        this.address = `${sock.localAddress}:${sock.localPort}`;
        this.fate = 'held';
        resolve();
      });
      sock.on('data', (d) => {
        if (this.response.length < 64) this.response += d.toString('latin1');
        const m = this.response.match(/^HTTP\/1\.[01] (\d{3})/);
        if (m && !this.status) this.status = Number(m[1]);
      });
      sock.on('end', () => this.end(this.status ? `answered ${this.status}` : 'closed'));
      sock.on('error', (e) => {
        clearTimeout(timer);
        this.end(this.status ? `answered ${this.status}` : e.code === 'ECONNRESET' || e.code === 'EPIPE' ? 'reset'
                 : this.fate === 'connecting' ? `connect failed (${e.code || e.message})` : `error (${e.code || e.message})`);
        resolve();
      });
      sock.on('close', () => { clearTimeout(timer); this.end(this.status ? `answered ${this.status}` : 'closed'); resolve(); });
    });
  }
  // The server's doing (or a failure to connect), once; `close()` below is ours and is not a fate.
  end(fate) {
    if (this.fate !== 'held' && this.fate !== 'connecting') return;
    if (this.fate === 'connecting' && !fate.startsWith('connect')) fate = `connect failed (${fate})`;
    this.fate = fate;
    this.endedAt = now();
    this.sock.destroy();
  }
  trickle(text) {
    if (this.fate !== 'held') return;
    this.sock.write(this.sent < text.length ? text[this.sent] : 'a');  // past the text: 'a' forever
    ++this.sent;
  }
  close() {
    if (this.fate === 'held') { this.fate = 'held to the end'; this.sock.destroy(); }
  }
}

async function openHeld(opts, host, port) {
  const all = [];
  for (let j = 0; j < opts.idle; ++j) {
    // Slow ones spread evenly among the idle ones.
    const slow = Math.floor((j + 1) * opts.slow) > Math.floor(j * opts.slow);
    all.push(new Held(host, port, sourceAddress(j, opts['per-address']), slow));
  }
  const batch = 128;  // connects in flight at once (the listen backlog may be small)
  for (let j = 0; j < all.length; j += batch)
    await Promise.all(all.slice(j, j + batch).map((c) => c.open(opts['connect-timeout-s'] * 1000)));
  return all;
}

// ---- the /health probe ----

function healthOnce(url, timeoutMs) {
  return new Promise((resolve) => {
    const t0 = now();
    let done = false;
    const finish = (err, body) => { if (!done) { done = true; resolve({ ms: now() - t0, err, body }); } };
    const req = http.get(url + '/health', { agent: false, headers: { Connection: 'close' } }, (res) => {
      let body = '';
      res.on('data', (d) => { if (body.length < 200) body += d; });
      res.on('end', () => finish(res.statusCode === 200 ? null : `HTTP ${res.statusCode}`, body.slice(0, 200)));
      res.on('error', (e) => finish(`connection (${e.code || e.message})`));
    });
    req.setTimeout(timeoutMs, () => { finish('timeout'); req.destroy(); });
    req.on('error', (e) => finish(`connection (${e.code || e.message})`));
  });
}
function startProbe(url, periodMs, timeoutMs) {
  const results = [];
  let stop = false;
  const done = (async () => {
    if (!periodMs) return;
    let next = now();
    while (!stop) {
      results.push(await healthOnce(url, timeoutMs));
      next += periodMs;
      const wait = next - now();
      if (wait > 0) await sleep(wait);
      else next = now();  // a slow probe: the next starts at once, the period restarts from here
    }
  })();
  return { results, stop: async () => { stop = true; await done; } };
}

// ---- streaming clients ----

function errorKind(e, timedOut, answered) {
  if (timedOut) return answered ? 'timeout (mid-stream)' : 'timeout (no response)';
  const status = e && e.status;
  if (status === 429) return 'HTTP 429 (queue full)';
  if (status === 503) return 'HTTP 503 (unavailable)';
  if (status) return `HTTP ${status}`;
  const name = (e && e.constructor && e.constructor.name) || 'Error';
  if (name === 'APIConnectionTimeoutError') return 'timeout (no response)';
  let cause = e && e.cause;
  while (cause && cause.cause && !cause.code) cause = cause.cause;
  const code = (cause && (cause.code || cause.message)) || (e && e.code);
  if (name === 'APIConnectionError' || (e instanceof TypeError && /terminated|fetch failed/.test(e.message)))
    return `connection error${code ? ` (${code})` : ''}`;
  if (name === 'APIError') return 'error event in the stream';
  return `${name}: ${String((e && e.message) || e).slice(0, 60)}`;
}

function makeRequest(opts, client, model) {
  return async function request(kind, prompt, stream) {
    const params = { model, max_tokens: opts['max-tokens'], temperature: 0, stream };
    if (stream) params.stream_options = { include_usage: true };
    const body = kind === 'chat' ? { ...params, messages: [{ role: 'user', content: prompt }] } : { ...params, prompt };
    const api = kind === 'chat' ? client.chat.completions : client.completions;
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; abort.abort(); }, opts['timeout-s'] * 1000);
    const start = now();
    let first = null, text = '', tokens = null, chunks = 0, answered = false;
    try {
      const res = await api.create(body, { signal: abort.signal });
      answered = true;
      if (stream) {
        for await (const chunk of res) {
          const c = chunk.choices && chunk.choices[0];
          const piece = c ? (c.delta ? c.delta.content : c.text) : '';
          if (piece) {
            if (first === null) first = now();
            text += piece;
            ++chunks;
          }
          if (chunk.usage) tokens = chunk.usage.completion_tokens;
        }
        if (timedOut) throw new Error('timeout');  // the client ends an aborted stream quietly
      } else {
        const c = res.choices[0];
        text = (c.message ? c.message.content : c.text) || '';
        tokens = res.usage ? res.usage.completion_tokens : null;
      }
    } catch (e) {
      return { ok: false, kind, error: errorKind(e, timedOut, answered), message: String((e && e.message) || e) };
    } finally {
      clearTimeout(timer);
    }
    const end = now();
    const r = { ok: true, kind, stream, prompt, text, ms: end - start, tokens, usage: tokens !== null };
    if (tokens === null) r.tokens = chunks;  // no usage chunk: one token per text chunk, roughly
    if (first !== null) {
      r.ttft = first - start;
      if (r.tokens > 1) r.tpot = (end - first) / (r.tokens - 1);
    }
    return r;
  };
}

function plan(opts, hasChat) {
  const jobs = [];  // jobs[w] = the R requests of client w
  for (let w = 0; w < opts.clients; ++w) {
    jobs.push([]);
    for (let i = 0; i < opts.requests; ++i) {
      const kind = opts.api === 'both' ? (hasChat && i % 2 ? 'chat' : 'completions') : opts.api;
      jobs[w].push({ kind, prompt: `Client ${w} request ${i}: the json module`, stream: i % opts['stream-every'] === 0 });
    }
  }
  return jobs;
}

// ---- the report ----

function table(rows) {
  const widths = [];
  for (const r of rows) r.forEach((c, i) => { widths[i] = Math.max(widths[i] || 0, String(c).length); });
  return rows.map((r) => r.map((c, i) => (i ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ')).join('\n');
}
const fmt = (x) => (x === null || x === undefined || (typeof x === 'number' && !Number.isFinite(x)) ? '-' : String(x));
function countBy(items, key) {
  const out = {};
  for (const it of items) out[key(it)] = (out[key(it)] || 0) + 1;
  return out;
}

function print(out) {
  const L = [];
  L.push(`rootspec-http load: ${out.url}, model ${out.model}`);
  L.push(`  ${out.clients} streaming clients x ${out.requests_per_client} requests (api ${out.api}, ` +
         `max_tokens ${out.max_tokens}, ${out.stream_every === 1 ? 'every request' : `1 request in ${out.stream_every}`} streamed), ` +
         `${out.held.requested} held connections (${out.held.slow} slow), ` +
         (out.health.period_ms ? `/health every ${out.health.period_ms} ms` : 'no /health probe'));
  const s = out.streams;
  L.push('');
  L.push(`requests: ${s.ok} ok, ${s.failed} failed in ${fmt(s.wall_s)} s: ${fmt(s.requests_per_s)} requests/s, ` +
         `${fmt(s.output_tokens_per_s)} output tokens/s (${s.output_tokens} tokens` +
         `${s.without_usage ? `; ${s.without_usage} streams without a usage chunk, counted by chunks` : ''})`);
  L.push(table([['', 'n', 'p50', 'p90', 'p99', 'max'],
                ...[['TTFT ms', s.ttft_ms], ['TPOT ms', s.tpot_ms], ['latency ms', s.latency_ms]].map(
                    ([name, q]) => [name, q.n, fmt(q.p50), fmt(q.p90), fmt(q.p99), fmt(q.max)])]).replace(/^/gm, '  '));
  L.push(`  queue wait (target, from /metrics): p50 ${fmt(s.queue_wait_ms.p50)} ms, p99 ${fmt(s.queue_wait_ms.p99)} ms`);
  if (Object.keys(s.errors).length) {
    L.push('  errors:');
    for (const [k, n] of Object.entries(s.errors)) L.push(`    ${String(n).padStart(5)}  ${k}`);
  } else {
    L.push('  errors: none');
  }
  if (out.same_text) {
    const t = out.same_text;
    L.push(`  same text as alone: ${t.compared} compared, ${t.mismatches} mismatches` +
           (t.examples.length ? ` (e.g. ${JSON.stringify(t.examples[0])})` : ''));
  }
  const h = out.held;
  if (h.requested) {
    L.push('');
    L.push(`held connections: ${h.opened} opened of ${h.requested} (${h.addresses} source addresses from 127.0.0.2, ` +
           `${h.per_address} each; connect p50 ${fmt(h.connect_ms.p50)} ms, max ${fmt(h.connect_ms.max)} ms)`);
    L.push(`  the gateway's side (ss): ${h.gateway_side_held} sockets for the ${h.still_held_after_opening} held after opening, ` +
           `${h.gateway_side_run_end} for the ${h.still_held_at_run_end} held at the end of the run` +
           (h.gateway_side_held < h.still_held_after_opening || h.gateway_side_run_end < h.still_held_at_run_end
              ? ' (the rest: connected on this side only, e.g. dropped from a full listen queue)' : ''));
    L.push(`  held to the end of the run: ${h.held_to_end}; closed by the server: ${h.closed_by_server}` +
           (h.closed_by_server ? ` (${Object.entries(h.closed_how).map(([k, n]) => `${n} ${k}`).join(', ')})` : ''));
    if (h.closed_by_server)
      L.push(`    after ${fmt(h.closed_after_s.min)}..${fmt(h.closed_after_s.max)} s held (p50 ${fmt(h.closed_after_s.p50)} s), ` +
             `${fmt(h.closed_at_run_s.min)}..${fmt(h.closed_at_run_s.max)} s into the run (p50 ${fmt(h.closed_at_run_s.p50)} s` +
             `${h.closed_at_run_s.min < 0 ? '; negative: before the streams started' : ''})`);
    L.push(`  refused (a 503 answer, or a reset within 1 s): ${h.refused} (503: ${h.refused_503}, reset: ${h.refused_reset})` +
           `; failed to connect: ${h.requested - h.opened}`);
  }
  const p = out.health;
  L.push('');
  if (!p.period_ms) L.push('/health probe: off');
  else L.push(`/health probe: ${p.probes} probes, ${p.failed} failed${Object.keys(p.errors).length ? ' (' +
         Object.entries(p.errors).map(([k, n]) => `${n} ${k}`).join(', ') + ')' : ''}; ` +
         `latency p50 ${fmt(p.latency_ms.p50)} ms, p99 ${fmt(p.latency_ms.p99)} ms, max ${fmt(p.latency_ms.max)} ms` +
         (p.failed ? ` (the failed: p50 ${fmt(p.failed_latency_ms.p50)} ms, max ${fmt(p.failed_latency_ms.max)} ms)` : ''));
  for (const { kind, body } of p.error_examples) if (body) L.push(`  ${kind}: ${body.trim()}`);
  if (p.alone) L.push(`  one probe before the held connections and the streams: ${p.alone.error || 'ok'} in ${fmt(p.alone.ms)} ms`);
  const g = out.gateway;
  L.push('');
  L.push(`gateway pid ${g.pid || '?'} (${g.pid_from}): VmRSS MiB / threads`);
  if (g.gone_at.length)
    L.push(`  THE GATEWAY PROCESS WAS GONE at: ${g.gone_at.join(', ')}` +
           (g.pid_now && g.pid_now !== g.pid ? ` (restarted by the launcher: pid ${g.pid_now}, on another port)` : ''));
  L.push(table([['', 'before', 'held', 'run peak', 'after close'],
                ['VmRSS MiB', ...['before', 'held', 'run_peak', 'after'].map((k) => fmt(g.rss_mib[k]))],
                ['threads', ...['before', 'held', 'run_peak', 'after'].map((k) => fmt(g.threads[k]))]]).replace(/^/gm, '  '));
  L.push(`  connections left ${out.after_s} s after closing: ${fmt(g.connections_left)}` +
         ` (${Object.entries(g.sockets_after || {}).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}` +
         `; the benchmark's own keep-alive sockets not counted: ${fmt(g.benchmark_keepalive)})`);
  console.log(L.join('\n'));
}

// ---- the run ----

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const OpenAI = require('openai');
  const { hostname, port: portText } = new URL(opts.url);
  const port = Number(portText) || 80;
  const host = hostname.replace(/^\[|\]$/g, '');
  const client = new OpenAI({ baseURL: opts.url + '/v1', apiKey: process.env.ROOTSPEC_API_KEY || 'none', maxRetries: 0,
                              timeout: opts['timeout-s'] * 1000 });
  const model = (await client.models.list()).data[0].id;
  const request = makeRequest(opts, client, model);
  const jobs = plan(opts, opts.api !== 'completions');

  // --same-text: every prompt alone first.
  const alone = new Map();
  if (opts['same-text']) {
    process.stderr.write(`load: ${opts.clients * opts.requests} requests alone first (--same-text)\n`);
    for (const job of jobs.flat()) {
      const r = await request(job.kind, job.prompt, job.stream);
      if (r.ok) alone.set(job.kind + '\0' + job.prompt, r.text);
    }
  }

  const healthAlone = opts['health-ms'] ? await healthOnce(opts.url, opts['health-timeout-s'] * 1000) : null;
  const { pid, how } = gatewayPid(opts, port);
  const mem = { before: procStatus(pid) };
  const socketsBefore = gatewaySockets(port);
  const bucketsBefore = await queueWaitBuckets(opts.url);

  // The held connections, opened before the streams.
  const tOpen = now();
  process.stderr.write(opts.idle ? `load: opening ${opts.idle} held connections\n` : '');
  const held = await openHeld(opts, host, port);
  const trickleText = `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Trickle: `;
  const trickler = setInterval(() => { for (const c of held) if (c.slow) c.trickle(trickleText); }, 1000);
  for (const c of held) if (c.slow) c.trickle(trickleText);
  if (opts.idle) await sleep(opts['hold-before-s'] * 1000);
  mem.held = procStatus(pid);
  const heldAddresses = () => new Set(held.filter((c) => c.fate === 'held').map((c) => c.address));
  const heldAtOpen = heldAddresses();
  const socketsHeld = gatewaySockets(port, heldAtOpen);

  // The run: the probe, a memory sampler and the streams.
  process.stderr.write(`load: ${opts.clients} clients x ${opts.requests} requests\n`);
  const t0 = now();
  const probe = startProbe(opts.url, opts['health-ms'], opts['health-timeout-s'] * 1000);
  let goneInRun = null;
  const peak = { ...(mem.held || mem.before || { rss_mib: null, threads: null }) };
  const sampler = setInterval(() => {
    const s = procStatus(pid);
    if (!s) { if (pid && goneInRun === null) goneInRun = (now() - t0) / 1000; return; }
    peak.rss_mib = Math.max(peak.rss_mib || 0, s.rss_mib);
    peak.threads = Math.max(peak.threads || 0, s.threads);
  }, 250);
  const results = [];
  await Promise.all(jobs.map(async (list) => {
    for (const job of list) results.push({ ...(await request(job.kind, job.prompt, job.stream)), at: now() - t0 });
  }));
  const wall = (now() - t0) / 1000;
  await probe.stop();
  clearInterval(sampler);
  mem.run_peak = peak;

  // Close the held connections; what the gateway holds afterwards.
  clearInterval(trickler);
  const fatesAtEnd = held.map((c) => c.fate);
  const heldAtRunEnd = heldAddresses();
  const socketsRunEnd = gatewaySockets(port, heldAtRunEnd);
  for (const c of held) c.close();
  const tClose = now();
  let goneAfterClose = null;
  while (now() - tClose < opts['after-s'] * 1000) {
    await sleep(100);
    if (pid && goneAfterClose === null && !procStatus(pid)) goneAfterClose = (now() - tClose) / 1000;
  }
  mem.after = procStatus(pid);
  // A gateway that died (and that the launcher may have restarted: another pid, another port).
  const gone = pid ? Object.entries(mem).filter(([, v]) => !v).map(([k]) => k) : [];
  if (goneAfterClose !== null && goneInRun === null && mem.run_peak && mem.after === null)
    gone[gone.indexOf('after')] = `after close (${round(goneAfterClose)} s after closing the held connections)`;
  if (goneInRun !== null) gone.splice(gone.includes('before') + gone.includes('held'), 0, `run (${round(goneInRun)} s in)`);
  const pidNow = gone.length && !opts.pid ? gatewayPid(opts, port).pid : pid;
  const socketsAfter = gatewaySockets(port);
  const bucketsAfter = await queueWaitBuckets(opts.url);

  // Numbers.
  const ok = results.filter((r) => r.ok);
  const streamed = ok.filter((r) => r.stream);
  const tokens = ok.reduce((a, r) => a + (r.tokens || 0), 0);
  let queueWait = { p50: null, p99: null };
  if (bucketsBefore && bucketsAfter && bucketsAfter.length) {
    const diff = bucketsAfter.map(([le, n], i) => [le, n - ((bucketsBefore[i] || [le, 0])[1])]);
    queueWait = { p50: round(1000 * histogramQuantile(diff, 0.5)), p99: round(1000 * histogramQuantile(diff, 0.99)) };
  }
  let sameText = null;
  if (opts['same-text']) {
    const examples = [];
    let compared = 0, mismatches = 0;
    for (const r of ok) {
      const want = alone.get(r.kind + '\0' + r.prompt);
      if (want === undefined) continue;
      ++compared;
      if (r.text !== want) {
        ++mismatches;
        if (examples.length < 3) examples.push({ prompt: r.prompt, kind: r.kind, alone: want, under_load: r.text });
      }
    }
    sameText = { compared, mismatches, alone_failed: jobs.flat().length - alone.size, examples };
  }
  const fates = countBy(held, (c) => c.fate);
  // Ended by the server while held. Refused: answered 503, or reset within a second of opening;
  // closed: the others (a close without an answer, a later reset, another answer such as 408).
  const ended = held.filter((c) => c.openedAt !== undefined && c.endedAt !== undefined);
  const isRefused = (c) => c.fate === 'answered 503' || (c.fate === 'reset' && c.endedAt - c.openedAt < 1000);
  const closed = ended.filter((c) => !isRefused(c));
  const refused503 = ended.filter((c) => c.fate === 'answered 503').length;
  const refusedReset = ended.filter((c) => isRefused(c) && c.fate === 'reset').length;
  const probeFails = probe.results.filter((r) => r.err);
  const out = {
    url: opts.url, model, api: opts.api, clients: opts.clients, requests_per_client: opts.requests,
    max_tokens: opts['max-tokens'], stream_every: opts['stream-every'], timeout_s: opts['timeout-s'], after_s: opts['after-s'],
    streams: {
      ok: ok.length, failed: results.length - ok.length, wall_s: round(wall, 2),
      requests_per_s: round(ok.length / wall, 2), output_tokens: tokens, output_tokens_per_s: round(tokens / wall, 1),
      without_usage: streamed.filter((r) => !r.usage).length,
      ttft_ms: summary(streamed.map((r) => r.ttft)), tpot_ms: summary(streamed.map((r) => r.tpot)),
      latency_ms: summary(ok.map((r) => r.ms)), queue_wait_ms: queueWait,
      errors: countBy(results.filter((r) => !r.ok), (r) => r.error),
      error_examples: [...new Map(results.filter((r) => !r.ok).map((r) => [r.error, r.message])).entries()]
        .map(([kind, message]) => ({ kind, message: message.slice(0, 200) })),
    },
    same_text: sameText,
    held: {
      requested: opts.idle, slow: held.filter((c) => c.slow).length, per_address: opts['per-address'],
      addresses: new Set(held.map((c) => c.localAddress)).size,
      opened: held.filter((c) => c.openedAt !== undefined).length,
      held_to_end: fatesAtEnd.filter((f) => f === 'held').length,
      closed_by_server: closed.length, closed_how: countBy(closed, (c) => `${c.slow ? 'slow' : 'idle'}: ${c.fate}`),
      closed_after_s: summary(closed.map((c) => (c.endedAt - c.openedAt) / 1000)),
      closed_at_run_s: summary(closed.map((c) => (c.endedAt - t0) / 1000)),
      refused: refused503 + refusedReset, refused_503: refused503, refused_reset: refusedReset,
      connect_ms: summary(held.filter((c) => c.connectMs !== undefined).map((c) => c.connectMs)),
      fates, open_s: round((t0 - tOpen) / 1000, 2),
      // The gateway's side: its sockets whose peer is a held connection (ESTAB includes those in
      // the listen queue, not yet accepted; a connection the server dropped from a full queue
      // is connected on our side and absent on its).
      still_held_after_opening: heldAtOpen.size, still_held_at_run_end: heldAtRunEnd.size,
      gateway_side_held: socketsHeld.held_total, gateway_side_held_by_state: socketsHeld.held,
      gateway_side_run_end: socketsRunEnd.held_total, gateway_side_run_end_by_state: socketsRunEnd.held,
    },
    health: {
      alone: healthAlone && { ms: round(healthAlone.ms), error: healthAlone.err || null, body: healthAlone.body || null },
      period_ms: opts['health-ms'], probes: probe.results.length, failed: probeFails.length,
      errors: countBy(probeFails, (r) => r.err),
      latency_ms: summary(probe.results.filter((r) => !r.err).map((r) => r.ms)),
      failed_latency_ms: summary(probeFails.map((r) => r.ms)),
      error_examples: [...new Map(probeFails.map((r) => [r.err, r.body || ''])).entries()]
        .map(([kind, body]) => ({ kind, body })),
    },
    gateway: {
      pid, pid_from: how, gone_at: gone, pid_now: pidNow,
      rss_mib: Object.fromEntries(Object.entries(mem).map(([k, v]) => [k, v ? v.rss_mib : null])),
      threads: Object.fromEntries(Object.entries(mem).map(([k, v]) => [k, v ? v.threads : null])),
      sockets_before: socketsBefore.by_state, sockets_after: socketsAfter.by_state,
      connections_left: socketsAfter.left, benchmark_keepalive: socketsAfter.benchmark_keepalive,
    },
  };
  print(out);
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(out, null, 2) + '\n');
}

main().catch((e) => { console.error(e && e.message ? e.message : e); process.exit(1); });
