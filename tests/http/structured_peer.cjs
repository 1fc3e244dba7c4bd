// Structured output and tool calls through the official `openai` npm client (tests/prepare/http_peer.sh
// installs it with zod and ajv; NODE_PATH points there):
//
//   node structured_peer.cjs zod <baseURL> <seeds>    chat.completions.parse with zodResponseFormat,
//                                                     and the same request streamed (.stream)
//   node structured_peer.cjs zod4 <baseURL> <seeds>   the same with zod 4 (zod/v4) and numbers:
//                                                     .int() (±(2^53 − 1) bounds), .min(), .max()
//   node structured_peer.cjs tools <baseURL> <seeds>  tool_choice "required" / a named function,
//                                                     plain and streamed
//   node structured_peer.cjs aisdk <baseURL> <seeds>  the AI SDK's generateObject and streamObject
//                                                     over its OpenAI provider's chat model
//   node structured_peer.cjs langchain <baseURL> <seeds>  LangChain's ChatOpenAI
//                                                     withStructuredOutput (json_schema), invoke
//                                                     and stream
// aisdk and langchain send zod 4 (zod/v4) schemas as their libraries write them: .int() with
// .multipleOf(), .min(), .max(), a record, optional and nullable fields, a union and an
// intersection; the answer must pass zod and ajv (against the JSON Schema the library sends).
//
// One JSON line per seed: {"seed", "ok", "why", …}. ok: the answer parses and validates (zod's own
// safeParse; ajv against each function's parameters) and the stream's final completion equals
// the plain one (content, parsed value, tool calls' names and arguments, finish_reason).
'use strict';

const schemaOf = {
  get_weather: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
  pick: {
    type: 'object',
    properties: { x: { enum: [1, 2, 3] }, flag: { type: 'boolean' }, note: { type: 'string', maxLength: 4 } },
    required: ['x', 'flag'],
    additionalProperties: false,
  },
};
const tools = Object.entries(schemaOf).map(([name, parameters]) => ({
  type: 'function',
  function: { name, description: 'test function ' + name, parameters, strict: true },
}));

// The schema the AI SDK and LangChain tests send, in zod 4.
function clientAnswer(z) {
  return z.object({
    step: z.number().int().multipleOf(5).min(0).max(100),
    level: z.intersection(z.number().int(), z.number().min(-2).max(5)),
    // Keys by a pattern, not .max(n): zod counts UTF-16 code units, JSON Schema code points.
    counts: z.record(z.string().regex(/^[a-z]{1,2}$/), z.number().int().min(0).max(9)).optional(),
    note: z.string().max(6).optional(),
    flag: z.boolean().nullable(),
    either: z.union([z.number().int().min(-3).max(3), z.literal('none')]),
  });
}

// The first of `checks` that fails ([why, failed]), or '' when all pass.
function firstFailure(checks) {
  for (const [why, failed] of checks) if (failed) return why;
  return '';
}

function calls(message) {
  return (message.tool_calls || []).map((c) => ({ type: c.type, name: c.function.name, arguments: c.function.arguments }));
}

async function main() {
  const [cmd, url, seeds] = process.argv.slice(2);
  const OpenAI = require('openai');
  const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
  const messages = [{ role: 'user', content: 'Answer, please.' }];
  for (let seed = 1; seed <= Number(seeds); ++seed) {
    const out = { seed, ok: false, why: '' };
    try {
      if (cmd === 'zod' || cmd === 'zod4') {
        const { z } = cmd === 'zod' ? require('zod') : require('zod/v4');
        const { zodResponseFormat } = require('openai/helpers/zod');
        const Answer = cmd === 'zod'
          ? z.object({
            // A pattern, not .max(n): zod counts UTF-16 code units where JSON Schema's maxLength
            // counts code points, so an emoji would be 2 for zod and 1 for the schema.
            city: z.string().regex(/^[a-z ]{0,12}$/),
            unit: z.enum(['c', 'f']),
            sunny: z.boolean(),
            tags: z.array(z.enum(['a', 'b'])).max(3),
          })
          : z.object({
            rank: z.number().int().min(1).max(12),
            score: z.number().int(),
            ratio: z.number().min(0).max(1),
            offset: z.number().gt(-2.5).lt(-0.5),
          });
        const params = { model: 'target', messages, max_tokens: 400, temperature: 1, seed,
                         response_format: zodResponseFormat(Answer, 'answer') };
        const plain = await client.chat.completions.parse(params);
        const streamed = await client.chat.completions.stream(params).finalChatCompletion();
        const m = plain.choices[0].message;
        out.content = m.content;
        out.finish_reason = plain.choices[0].finish_reason;
        out.stream_content = streamed.choices[0].message.content;
        const check = Answer.safeParse(m.parsed);
        if (m.parsed == null) out.why = 'no parsed value';
        else if (!check.success) out.why = 'zod: ' + check.error.message;
        else if (out.finish_reason !== 'stop') out.why = 'finish_reason ' + out.finish_reason;
        else if (out.stream_content !== m.content || JSON.stringify(streamed.choices[0].message.parsed) !== JSON.stringify(m.parsed))
          out.why = 'the stream differs';
        else out.ok = true;
      } else if (cmd === 'aisdk') {
        const { z } = require('zod/v4');
        const { generateObject, streamObject, zodSchema } = require('ai');
        const { createOpenAI } = require('@ai-sdk/openai');
        const Ajv = require('ajv');
        const Answer = clientAnswer(z);
        const validate = new Ajv({ strict: false }).compile(zodSchema(Answer).jsonSchema);
        const model = createOpenAI({ baseURL: url + '/v1', apiKey: 'none' }).chat('target');
        const params = { model, schema: Answer, prompt: 'Answer, please.', temperature: 1, seed,
                         maxOutputTokens: 600, maxRetries: 0 };
        const plain = await generateObject(params);
        // The stream is read to its end (its promises settle only then).
        const stream = streamObject(params);
        for await (const partial of stream.partialObjectStream) void partial;
        const streamed = await stream.object;
        out.object = plain.object;
        out.finish_reason = plain.finishReason;
        out.why = firstFailure([
          ['zod: ' + JSON.stringify(Answer.safeParse(plain.object).error), !Answer.safeParse(plain.object).success],
          ['ajv: ' + JSON.stringify(validate.errors), !validate(plain.object)],
          ['finish_reason ' + plain.finishReason, plain.finishReason !== 'stop'],
          ['the stream differs: ' + JSON.stringify(streamed), JSON.stringify(streamed) !== JSON.stringify(plain.object)],
        ]);
        out.ok = out.why === '';
      } else if (cmd === 'langchain') {
        const { z } = require('zod/v4');
        const { ChatOpenAI } = require('@langchain/openai');
        const { zodSchema } = require('ai');
        const Ajv = require('ajv');
        const Answer = clientAnswer(z);
        const validate = new Ajv({ strict: false }).compile(zodSchema(Answer).jsonSchema);
        const llm = new ChatOpenAI({ model: 'target', apiKey: 'none', configuration: { baseURL: url + '/v1' },
                                     temperature: 1, maxTokens: 600, maxRetries: 0, modelKwargs: { seed } });
        const structured = llm.withStructuredOutput(Answer, { method: 'jsonSchema', name: 'answer' });
        const plain = await structured.invoke('Answer, please.');
        let last;
        for await (const chunk of await structured.stream('Answer, please.')) last = chunk;
        out.object = plain;
        out.why = firstFailure([
          ['zod: ' + JSON.stringify(Answer.safeParse(plain).error), !Answer.safeParse(plain).success],
          ['ajv: ' + JSON.stringify(validate.errors), !validate(plain)],
          ['the stream differs: ' + JSON.stringify(last), JSON.stringify(last) !== JSON.stringify(plain)],
        ]);
        out.ok = out.why === '';
      } else if (cmd === 'tools') {
        const Ajv = require('ajv');
        const ajv = new Ajv({ strict: false });
        const validate = Object.fromEntries(Object.entries(schemaOf).map(([n, s]) => [n, ajv.compile(s)]));
        // Odd seeds: any function ("required"); even seeds: the named one.
        const tool_choice = seed % 2 ? 'required' : { type: 'function', function: { name: 'pick' } };
        const params = { model: 'target', messages, max_tokens: 300, temperature: 1, seed, tools, tool_choice,
                         parallel_tool_calls: false };
        const plain = await client.chat.completions.create(params);
        const streamed = await client.chat.completions.stream(params).finalChatCompletion();
        const m = plain.choices[0].message;
        out.calls = calls(m);
        out.content = m.content;
        out.finish_reason = plain.choices[0].finish_reason;
        out.stream_calls = calls(streamed.choices[0].message);
        const bad = out.calls.filter((c) => !validate[c.name] || !validate[c.name](JSON.parse(c.arguments)));
        if (out.calls.length !== 1) out.why = out.calls.length + ' calls';
        else if (bad.length) out.why = 'invalid arguments: ' + JSON.stringify(bad) + ' ' + ajv.errorsText(validate[bad[0].name] && validate[bad[0].name].errors);
        else if (seed % 2 === 0 && out.calls[0].name !== 'pick') out.why = 'not the named function';
        else if (out.finish_reason !== 'tool_calls' || streamed.choices[0].finish_reason !== 'tool_calls')
          out.why = 'finish_reason ' + out.finish_reason + ' / ' + streamed.choices[0].finish_reason;
        else if (m.content !== null) out.why = 'content beside the call: ' + JSON.stringify(m.content);
        else if (JSON.stringify(out.stream_calls) !== JSON.stringify(out.calls)) out.why = 'the stream differs';
        else if (!/^call_/.test(m.tool_calls[0].id)) out.why = 'call id ' + m.tool_calls[0].id;
        else out.ok = true;
      } else {
        throw new Error('unknown command ' + cmd);
      }
    } catch (e) {
      out.why = 'error: ' + (e.status || '') + ' ' + e.message;
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
}

main().catch((e) => {
  process.stderr.write(String(e.stack || e) + '\n');
  process.exit(1);
});
