"""Candidate instances for a schema: a seeded walk that aims at valid values, and mutations of
valid values that aim at invalid ones. Neither decides anything: judge.py keeps a candidate only
where jsonschema agrees, so the walk may be approximate (it skips if/then/else, not, and
propertyNames, and merges allOf branches shallowly)."""
import copy
import math
import re
from re import _parser as sre_parse  # Python's own regex parser: patterns sampled as Python reads them

from judge import FORMAT_SAMPLES

MAX_DEPTH = 6
WORDS = ["alpha", "beta", "gamma", "delta", "note", "value", "item", "x", "hello world", "café",
         "日本語", "naïve", "data-1", "A_B", "zeta"]
GENERIC_NON_INSTANCES = [None, [], {}, "x", 0, True, 1.5]


class Unsatisfiable(Exception):
    """The walk found nothing to produce here (false schema, unsupported reference, depth)."""


def _resolve_pointer(root, ref):
    if not ref.startswith("#"):
        raise Unsatisfiable(ref)
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise Unsatisfiable(ref)  # an $anchor name: left to jsonschema
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), part)
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _merge(base, extra):
    """Both schemas' constraints in one node, shallowly: enough to aim allOf and a chosen
    anyOf/oneOf branch together with their siblings."""
    if extra is True:
        return base
    if extra is False:
        raise Unsatisfiable("false")
    merged = dict(base)
    for key, value in extra.items():
        if key == "properties" and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        elif key == "required" and isinstance(merged.get(key), list):
            merged[key] = merged[key] + [r for r in value if r not in merged[key]]
        elif key not in merged:
            merged[key] = value
    return merged


class InstanceWalker:
    """Produces a value aimed at one schema, its choices drawn from `rng`."""

    def __init__(self, root, rng):
        self.root = root
        self.rng = rng

    def value(self, node, depth=0):
        if depth > MAX_DEPTH:
            raise Unsatisfiable("depth")
        node = self._flatten(node, depth)
        if node is True or node == {}:
            return self._any_scalar()
        if node is False:
            raise Unsatisfiable("false")
        if "const" in node:
            return copy.deepcopy(node["const"])
        if isinstance(node.get("enum"), list) and node["enum"]:
            return copy.deepcopy(self.rng.choice(node["enum"]))
        if isinstance(node.get("examples"), list) and node["examples"] and self.rng.random() < 0.3:
            return copy.deepcopy(self.rng.choice(node["examples"]))
        kind = self._choose_type(node)
        return getattr(self, "_" + kind)(node, depth)

    def _flatten(self, node, depth):
        """Follows $ref and folds allOf and one chosen anyOf/oneOf branch into the node."""
        for _ in range(16):
            if not isinstance(node, dict):
                return node
            if isinstance(node.get("$ref"), str):
                target = _resolve_pointer(self.root, node["$ref"])
                rest = {k: v for k, v in node.items() if k != "$ref"}
                node = _merge(target, rest) if isinstance(target, dict) else target
                continue
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(key), list) and node[key]:
                    rest = {k: v for k, v in node.items() if k != key}
                    branches = node[key] if key == "allOf" else [self.rng.choice(node[key])]
                    for branch in branches:
                        branch = self._flatten(branch, depth)
                        rest = _merge(rest, branch)
                    node = rest
                    break
            else:
                return node
        raise Unsatisfiable("reference loop")

    def _choose_type(self, node):
        declared = node.get("type")
        if isinstance(declared, str):
            return declared if declared != "any" else "string"
        if isinstance(declared, list) and declared:
            non_null = [t for t in declared if t != "null"]
            if non_null and self.rng.random() < 0.85:
                return self.rng.choice(non_null)
            return self.rng.choice(declared)
        if any(k in node for k in ("properties", "required", "additionalProperties", "patternProperties")):
            return "object"
        if any(k in node for k in ("items", "prefixItems", "minItems", "maxItems", "contains")):
            return "array"
        if any(k in node for k in ("minLength", "maxLength", "pattern", "format")):
            return "string"
        if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
            return "number"
        return self.rng.choice(["string", "integer", "boolean", "object", "array"])

    def _any_scalar(self):
        return self.rng.choice([self.rng.choice(WORDS), self.rng.randint(-5, 100), True, False, None])

    def _null(self, node, depth):
        return None

    def _boolean(self, node, depth):
        return self.rng.random() < 0.5

    def _bounds(self, node, integral):
        """[low, high] from minimum/maximum and both spellings of exclusive bounds (draft 4's
        booleans, draft 6's numbers)."""
        low, high = node.get("minimum"), node.get("maximum")
        step = 1 if integral else 0.01
        exclusive_low, exclusive_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
        if exclusive_low is True and low is not None:
            low = low + step
        elif _is_number(exclusive_low):
            low = exclusive_low + step if low is None else max(low, exclusive_low + step)
        if exclusive_high is True and high is not None:
            high = high - step
        elif _is_number(exclusive_high):
            high = exclusive_high - step if high is None else min(high, exclusive_high - step)
        low = low if _is_number(low) else (high - 100 if _is_number(high) else -50)
        high = high if _is_number(high) else low + 1000
        return max(low, -10**12), min(high, 10**12)

    def _integer(self, node, depth):
        low, high = self._bounds(node, integral=True)
        low, high = math.ceil(low), math.floor(high)
        if low > high:
            raise Unsatisfiable("empty range")
        multiple = node.get("multipleOf")
        if isinstance(multiple, int) and not isinstance(multiple, bool) and multiple > 0:
            first, last = -(-low // multiple), high // multiple
            if first > last:
                raise Unsatisfiable("no multiple in range")
            return multiple * self.rng.randint(first, min(last, first + 50))
        near_low = self.rng.random() < 0.3
        return self.rng.randint(low, min(high, low + 20)) if near_low else self.rng.randint(low, min(high, low + 10**6))

    def _number(self, node, depth):
        if self.rng.random() < 0.5 or "multipleOf" in node:
            return self._integer(node, depth) if not isinstance(node.get("multipleOf"), float) else \
                self._float_multiple(node)
        low, high = self._bounds(node, integral=False)
        if low > high:
            raise Unsatisfiable("empty range")
        value = round(self.rng.uniform(low, min(high, low + 1000)), self.rng.choice([1, 2, 3]))
        return value if low <= value <= high else low

    def _float_multiple(self, node):
        low, high = self._bounds(node, integral=False)
        multiple = node["multipleOf"]
        first = int(-(-low // multiple))
        return round(multiple * self.rng.randint(first, first + 20), 6)

    def _string(self, node, depth):
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in FORMAT_SAMPLES:
            return self.rng.choice(FORMAT_SAMPLES[fmt])
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            sampled = sample_pattern(pattern, self.rng)
            if sampled is not None:
                return sampled
        low = node.get("minLength", 0) if isinstance(node.get("minLength"), int) else 0
        high = node.get("maxLength") if isinstance(node.get("maxLength"), int) else low + 24
        text = self.rng.choice(WORDS)
        while len(text) < low:
            text += self.rng.choice(WORDS)
        return text[:max(high, 0)] if len(text) > high else text

    def _array(self, node, depth):
        prefix = node.get("prefixItems")
        if prefix is None and isinstance(node.get("items"), list):
            prefix = node["items"]
            rest = node.get("additionalItems", True)
        else:
            rest = node.get("items", True) if not isinstance(node.get("items"), list) else True
        prefix = prefix or []
        low = node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0
        high = node.get("maxItems") if isinstance(node.get("maxItems"), int) else max(low, len(prefix)) + 3
        count = self.rng.randint(low, max(low, min(high, low + 3)))
        if prefix:
            count = max(count, min(len(prefix), high)) if self.rng.random() < 0.7 else count
        values = []
        for i in range(count):
            schema = prefix[i] if i < len(prefix) else rest
            if schema is False:
                break
            values.append(self.value(schema, depth + 1))
        if "contains" in node and self.rng.random() < 0.9 and len(values) < high:
            values.append(self.value(node["contains"], depth + 1))
        if node.get("uniqueItems") is True:
            values = _unique(values)
        return values

    def _object(self, node, depth):
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        required = [r for r in node.get("required", []) if isinstance(r, str)] \
            if isinstance(node.get("required"), list) else []
        names = list(required)
        for name in properties:
            if name not in names and self.rng.random() < 0.5:
                names.append(name)
        names += self._dependencies(node, names)
        result = {}
        for name in names:
            result[name] = self.value(self._property_schema(node, name), depth + 1)
        low = node.get("minProperties", 0) if isinstance(node.get("minProperties"), int) else 0
        extra = node.get("additionalProperties", True)
        spare = [p for p in properties if p not in result]
        while len(result) < low:
            if spare:
                name = spare.pop(0)
            elif extra is not False:
                name = f"extra{len(result)}"
            else:
                break
            result[name] = self.value(self._property_schema(node, name), depth + 1)
        return result

    def _dependencies(self, node, present):
        needed = []
        for key in ("dependentRequired", "dependencies"):
            for name, deps in (node.get(key) or {}).items() if isinstance(node.get(key), dict) else ():
                if name in present and isinstance(deps, list):
                    needed += [d for d in deps if isinstance(d, str) and d not in present and d not in needed]
        return needed

    def _property_schema(self, node, name):
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        if name in properties:
            return properties[name]
        for pattern, schema in (node.get("patternProperties") or {}).items():
            try:
                if re.search(pattern, name):
                    return schema
            except re.error:
                continue
        extra = node.get("additionalProperties", True)
        return extra if extra is not False else True


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unique(values):
    seen, kept = set(), []
    for v in values:
        key = repr(v)
        if key not in seen:
            seen.add(key)
            kept.append(v)
    return kept


# --- regex sampling: a string the pattern matches, from Python's parse of it --------------------

_CATEGORY_CHARS = {
    sre_parse.CATEGORY_DIGIT: "0123456789",
    sre_parse.CATEGORY_WORD: "abcxyzABC_019",
    sre_parse.CATEGORY_SPACE: " ",
    sre_parse.CATEGORY_NOT_DIGIT: "abcXYZ-_",
    sre_parse.CATEGORY_NOT_WORD: "-. /",
    sre_parse.CATEGORY_NOT_SPACE: "abc123",
}


def sample_pattern(pattern, rng):
    """A string matching `pattern` (searched, as JSON Schema does), or None if it uses forms this
    sampler does not cover; judge.py checks the result either way."""
    try:
        parsed = sre_parse.parse(pattern)
        return _sample_items(parsed, rng, 0)
    except (re.error, Unsatisfiable, IndexError, TypeError, ValueError, RecursionError):
        return None


def _sample_items(items, rng, depth):
    if depth > 20:
        raise Unsatisfiable("regex depth")
    return "".join(_sample_item(op, arg, rng, depth) for op, arg in items)


def _sample_item(op, arg, rng, depth):
    if op is sre_parse.LITERAL:
        return chr(arg)
    if op is sre_parse.ANY:
        return rng.choice("abcXYZ019")
    if op is sre_parse.IN:
        return _sample_class(arg, rng)
    if op is sre_parse.BRANCH:
        return _sample_items(rng.choice(arg[1]), rng, depth + 1)
    if op is sre_parse.SUBPATTERN:
        return _sample_items(arg[3], rng, depth + 1)
    if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)):
        low, high, body = arg
        high = min(high, low + 3)
        return "".join(_sample_items(body, rng, depth + 1) for _ in range(rng.randint(low, high)))
    if op is sre_parse.AT:
        return ""
    if op is sre_parse.CATEGORY:
        return rng.choice(_CATEGORY_CHARS[arg])
    raise Unsatisfiable(f"regex op {op}")


def _sample_class(items, rng):
    choices = []
    for op, arg in items:
        if op is sre_parse.NEGATE:
            raise Unsatisfiable("negated class")
        if op is sre_parse.LITERAL:
            choices.append(chr(arg))
        elif op is sre_parse.RANGE:
            choices.append(chr(rng.randint(arg[0], min(arg[1], arg[0] + 60))))
        elif op is sre_parse.CATEGORY:
            choices.append(rng.choice(_CATEGORY_CHARS[arg]))
        else:
            raise Unsatisfiable(f"class op {op}")
    return rng.choice(choices)


# --- mutations: near misses of a valid instance ------------------------------------------------

def mutations(instance, schema, rng):
    """Candidate invalid instances: each changes one place of `instance` the way a wrong answer
    would (a member dropped or added, a leaf of the wrong type, a number or length just past a
    bound the schema names, an array one too long or short, a duplicate item)."""
    bounds = sorted(_numeric_bounds(schema), key=repr)
    candidates = []
    for path, value in _places(instance):
        for replacement in _replacements(value, bounds, rng):
            candidates.append(_replaced(instance, path, replacement))
    rng.shuffle(candidates)
    return candidates


def _places(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _places(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _places(child, path + (i,))


def _replaced(instance, path, replacement):
    if not path:
        return replacement
    result = copy.deepcopy(instance)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = replacement
    return result


def _replacements(value, bounds, rng):
    if isinstance(value, dict):
        yield {**value, "unexpected_member": 1}
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
        yield []
    elif isinstance(value, list):
        if value:
            yield value[:-1]
            yield value + [copy.deepcopy(value[0])]
        yield value + [rng.choice(GENERIC_NON_INSTANCES[3:])]
        yield {}
    elif isinstance(value, bool):
        yield not value
        yield "true" if value else 0
    elif isinstance(value, (int, float)):
        yield from _number_replacements(value, bounds)
        yield str(value)
    elif isinstance(value, str):
        yield value + "x"
        yield value[:-1]
        yield "zz-not-listed"
        yield len(value)
    else:  # None
        yield 0
        yield "null"


def _number_replacements(value, bounds):
    if isinstance(value, int):
        yield value + 1
        yield value - 1
        yield value + 0.5
    else:
        yield round(value + 0.01, 6)
    for bound in bounds:
        if isinstance(bound, int):
            yield bound
            yield bound - 1
            yield bound + 1
        else:
            yield round(bound, 6)


def _numeric_bounds(node):
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf") \
                    and _is_number(value):
                found.add(value)
            else:
                found |= _numeric_bounds(value)
    elif isinstance(node, list):
        for value in node:
            found |= _numeric_bounds(value)
    return found
