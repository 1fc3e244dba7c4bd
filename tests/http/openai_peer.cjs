// The HTTP tests' third-party client: the official `openai` npm client, installed by
// tests/prepare/http_peer.sh (NODE_PATH points there).
//
//   node openai_peer.cjs run <baseURL> <requests.json>   each request in order, one at a time
//   node openai_peer.cjs concurrent <baseURL> <requests.json> <workers>
//                                                         the same, `workers` at a time
//
// A request is {"kind": "completions" | "chat", "stream": bool, "params": {…}} with the
// client's own parameters (extra ones, such as vLLM's top_k, go into the body as they are);
// each result is {"ok", "text", "finish_reason", "usage", "id", "status", "error", "ms",
// "choices"} on one JSON line, in the order of the requests: text and finish_reason are
// choice 0's; choices[i] is {"index", "text", "finish_reason", "logprobs"} of the choice with
// index i, a stream's chunks put together (chat: logprobs.content concatenated; completions:
// each list of logprobs concatenated).
'use strict';
const fs = require('fs');

async function one(client, r) {
  const start = Date.now();
  const out = { ok: true, text: '', finish_reason: null, usage: null, id: null };
  const params = { ...r.params, stream: !!r.stream };
  if (r.stream && r.include_usage) params.stream_options = { include_usage: true };
  try {
    const api = r.kind === 'chat' ? client.chat.completions : client.completions;
    const res = await api.create(params);
    const choices = [];
    if (!r.stream) {
      for (const c of res.choices)
        choices.push({ index: c.index, text: r.kind === 'chat' ? c.message.content : c.text,
                       finish_reason: c.finish_reason, logprobs: c.logprobs });
      out.usage = res.usage;
      out.id = res.id;
    } else {
      out.chunks = 0;
      for await (const chunk of res) {
        out.chunks += 1;
        out.id = chunk.id;
        if (chunk.usage) out.usage = chunk.usage;
        for (const c of chunk.choices) {
          const to = choices[c.index] || (choices[c.index] = { index: c.index, text: '', finish_reason: null,
                                                                  logprobs: null });
          to.text += (r.kind === 'chat' ? c.delta.content : c.text) || '';
          if (c.finish_reason) to.finish_reason = c.finish_reason;
          if (c.logprobs) {
            if (!to.logprobs) to.logprobs = r.kind === 'chat' ? { content: [] }
                                                              : { tokens: [], token_logprobs: [], top_logprobs: [],
                                                                  text_offset: [] };
            for (const key of Object.keys(to.logprobs)) to.logprobs[key].push(...(c.logprobs[key] || []));
          }
        }
      }
    }
    out.choices = choices;
    if (choices.length > 0) {
      out.text = choices[0].text;
      out.finish_reason = choices[0].finish_reason;
    }
  } catch (e) {
    out.ok = false;
    out.status = e.status === undefined ? null : e.status;
    out.error = e.message;
  }
  out.ms = Date.now() - start;
  return out;
}

async function main() {
  const [cmd, a, b, c] = process.argv.slice(2);
  const OpenAI = require('openai');
  const client = new OpenAI({ baseURL: a + '/v1', apiKey: process.env.ROOTSPEC_API_KEY || 'none', maxRetries: 0,
                              timeout: 120000 });
  const requests = JSON.parse(fs.readFileSync(b, 'utf8'));
  const results = new Array(requests.length);
  if (cmd === 'run') {
    for (let i = 0; i < requests.length; ++i) results[i] = await one(client, requests[i]);
  } else if (cmd === 'concurrent') {
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const i = next++;
        results[i] = await one(client, requests[i]);
      }
    };
    await Promise.all(Array.from({ length: Number(c) }, worker));
  } else {
    throw new Error('unknown command ' + cmd);
  }
  for (const r of results) process.stdout.write(JSON.stringify(r) + '\n');
}

main().catch((e) => {
  process.stderr.write(String(e.stack || e) + '\n');
  process.exit(1);
});
