#!/usr/bin/env node
// The schema corpus's sources that only JavaScript can read (build.py runs this and reads its
// output): the option schemas of ESLint rules, and JSON Schemas that zod 4 emits for random
// models. Prints one {"id", "source", "schema"} per line, in a fixed order.
//   node extract.cjs NODE_MODULES eslint PACKAGE…   every rule's options schema of each package
//   node extract.cjs NODE_MODULES zod COUNT SEED     COUNT random zod models, seeded
'use strict';

function emit(id, source, schema) {
  process.stdout.write(JSON.stringify({ id, source, schema }) + '\n');
}

// ESLint validates a rule's options array against meta.schema; an array there is the schema of
// each option in turn, which ESLint itself wraps the same way before handing it to ajv.
function optionsSchema(schema) {
  if (schema === undefined || schema === null || schema === false) return null;
  if (!Array.isArray(schema)) return schema;
  if (schema.length === 0) return null;  // "no options": nothing to constrain
  return { type: 'array', items: schema, minItems: 0, maxItems: schema.length };
}

async function loadRules(nodeModules, pkg) {
  if (pkg === 'eslint') {
    const { builtinRules } = require(
      require.resolve('eslint/use-at-your-own-risk', { paths: [nodeModules] }));
    return Object.fromEntries(builtinRules);
  }
  // import() reads both CommonJS and ESM plugins (several are ESM only).
  const entry = require.resolve(pkg, { paths: [nodeModules] });
  const mod = await import(entry);
  const plugin = mod.default ?? mod;
  return plugin.rules ?? {};
}

async function eslintRules(nodeModules, packages) {
  for (const pkg of packages) {
    let rules;
    try {
      rules = await loadRules(nodeModules, pkg);
    } catch (e) {
      process.stderr.write(`extract.cjs: skipping ${pkg}: ${e.message.split('\n')[0]}\n`);
      continue;
    }
    for (const name of Object.keys(rules).sort()) {
      const schema = optionsSchema(rules[name]?.meta?.schema);
      if (schema !== null) emit(`${pkg}/${name}#`, pkg, schema);
    }
  }
}

// mulberry32: a small seeded PRNG, so the same seed gives the same models everywhere.
function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIELD_NAMES = ['id', 'name', 'title', 'email', 'age', 'price', 'quantity', 'status', 'tags',
  'created_at', 'updated_at', 'owner', 'score', 'rating', 'description', 'country', 'city',
  'items', 'notes', 'priority', 'category', 'active', 'count', 'metadata', 'address', 'phone',
  'currency', 'amount', 'language', 'version', 'steps', 'reason', 'confidence', 'answer', 'url'];
const ENUM_WORDS = ['low', 'medium', 'high', 'open', 'closed', 'pending', 'red', 'green', 'blue',
  'draft', 'published', 'archived', 'yes', 'no', 'admin', 'user', 'guest'];

// Builds zod types the way client code writes them for structured output.
function zodModelFactory(z, random) {
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
  const enumValues = () => [...new Set(Array.from({ length: int(2, 5) }, () => pick(ENUM_WORDS)))];

  function scalar() {
    switch (int(0, 11)) {
      case 0: return z.string();
      case 1: { const lo = int(0, 5); return z.string().min(lo).max(lo + int(1, 40)); }
      case 2: return z.email();
      case 3: return z.uuid();
      case 4: return z.iso.datetime({ offset: random() < 0.5 });
      case 5: return z.iso.date();
      case 6: { const lo = int(-100, 100); return z.number().int().gte(lo).lte(lo + int(0, 1000)); }
      case 7: return random() < 0.5 ? z.number().min(0).max(int(1, 100)) : z.number();
      case 8: return z.boolean();
      case 9: { const values = enumValues(); return values.length > 1 ? z.enum(values) : z.literal(values[0]); }
      case 10: return z.number().int().positive();
      default: return z.literal(pick([1, 2, 3, true, 'v1']));
    }
  }

  function field(depth) {
    const roll = random();
    let type;
    if (depth < 2 && roll < 0.15) type = object(depth + 1);
    else if (roll < 0.3) {
      const lo = int(0, 2);
      type = z.array(depth < 2 && random() < 0.3 ? object(depth + 1) : scalar()).min(lo).max(lo + int(1, 6));
    } else if (roll < 0.37) type = z.union([scalar(), scalar()]);
    else if (roll < 0.42) type = z.record(z.string(), scalar());
    else type = scalar();
    const modifier = random();
    if (modifier < 0.15) return type.optional();
    if (modifier < 0.25) return type.nullable();
    return type;
  }

  function object(depth) {
    const shape = {};
    const count = int(1, 7 - depth * 2);
    for (let i = 0; i < count; i++) shape[pick(FIELD_NAMES)] = field(depth);
    const model = z.object(shape);
    return random() < 0.3 ? model.strict() : model;
  }

  return () => object(0);
}

async function zodModels(nodeModules, count, seed) {
  const { z } = require(require.resolve('zod', { paths: [nodeModules] }));
  const randomModel = zodModelFactory(z, seededRandom(seed));
  for (let i = 0; i < count; i++) emit(`zod/model#${i}`, 'zod', z.toJSONSchema(randomModel()));
}

async function main() {
  const [nodeModules, kind, ...rest] = process.argv.slice(2);
  if (kind === 'eslint') await eslintRules(nodeModules, rest);
  else if (kind === 'zod') await zodModels(nodeModules, Number(rest[0]), Number(rest[1]));
  else throw new Error(`unknown kind ${kind}`);
}

main().catch((e) => { process.stderr.write(`extract.cjs: ${e.stack}\n`); process.exit(1); });
