"""Decides validity with python3-jsonschema (never with rootspec), formats included.

Formats are assertions for the corpus: jsonschema's FormatChecker plus the RFC 3339 date/time,
email and uuid checks of tests/grammar/json_schema_suite_validate.py. A format neither checks
(uri, hostname, …) cannot decide anything, so an instance may carry a string under such a format
only if that string is one of FORMAT_SAMPLES' values, which conform under any reading.
"""
import json
import math
import os
import sys

import jsonschema
from jsonschema.validators import validator_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from json_schema_suite_validate import checker as SUITE_CHECKER  # noqa: E402

# Strings that are well-formed for their format under every checker; the generator takes its
# strings for a format from here, and these are the only ones allowed under unchecked formats.
FORMAT_SAMPLES = {
    "date": ["2024-02-29", "1999-12-31", "2023-07-04"],
    "time": ["12:34:56Z", "23:59:59+02:00", "08:00:00.5-05:30"],
    "date-time": ["2024-02-29T12:34:56Z", "1999-12-31T23:59:59+01:00", "2023-07-04T08:00:00.125-05:30"],
    "email": ["user@example.com", "first.last@mail.example.org", "a+b@example.net"],
    "idn-email": ["user@example.com", "info@example.org"],
    "uuid": ["123e4567-e89b-42d3-a456-426614174000", "00000000-0000-4000-8000-000000000000",
             "f47ac10b-58cc-4372-a567-0e02b2c3d479"],
    "ipv4": ["192.168.0.1", "10.0.0.254", "8.8.8.8"],
    "ipv6": ["::1", "2001:db8::8a2e:370:7334", "fe80::1"],
    "uri": ["https://example.com/", "https://example.org/path/to?q=1", "urn:isbn:0451450523"],
    "url": ["https://example.com/", "https://example.org/a/b"],
    "uri-reference": ["https://example.com/", "/relative/path", "#fragment"],
    "iri": ["https://example.com/", "https://example.org/x"],
    "iri-reference": ["https://example.com/", "/relative"],
    "uri-template": ["https://example.com/{id}", "/users/{user}/repos"],
    "hostname": ["example.com", "api.example.org", "localhost"],
    "idn-hostname": ["example.com", "www.example.org"],
    "json-pointer": ["", "/a/b", "/items/0"],
    "relative-json-pointer": ["0", "1/a"],
    "regex": ["^[a-z]+$", "abc", "[0-9]{2,4}"],
    "duration": ["P1D", "PT1H30M", "P3Y6M4DT12H30M5S"],
    "color": ["red", "#ff0000"],
}
_SAMPLE_SETS = {name: set(values) for name, values in FORMAT_SAMPLES.items()}

DRAFT_NAMES = {
    jsonschema.Draft4Validator: "draft4",
    jsonschema.Draft6Validator: "draft6",
    jsonschema.Draft7Validator: "draft7",
    jsonschema.Draft201909Validator: "draft2019-09",
    jsonschema.Draft202012Validator: "draft2020-12",
}
VALIDATORS_BY_DRAFT = {name: cls for cls, name in DRAFT_NAMES.items()}
# Keywords that only 2019-09 and later know: a schema that uses them without a $schema was
# written for the newer drafts, whatever the Draft 7 default says.
_NEWER_DRAFT_KEYWORDS = {"$defs", "prefixItems", "dependentRequired", "dependentSchemas",
                         "unevaluatedProperties", "unevaluatedItems", "$anchor", "$dynamicRef"}


class _RecordingChecker(jsonschema.FormatChecker):
    """The suite's format checks, noting each string that an unchecked format could not judge."""

    def __init__(self):
        super().__init__(formats=())
        self.checkers = dict(SUITE_CHECKER.checkers)
        self.unjudged = []

    def check(self, instance, format):
        if format not in self.checkers and isinstance(instance, str):
            if instance not in _SAMPLE_SETS.get(format, ()):
                self.unjudged.append(format)
        return super().check(instance, format)


def _mentions_newer_keywords(node):
    if isinstance(node, dict):
        return any(k in _NEWER_DRAFT_KEYWORDS for k in node) or any(
            _mentions_newer_keywords(v) for v in node.values())
    if isinstance(node, list):
        return any(_mentions_newer_keywords(v) for v in node)
    return False


def draft_of(schema):
    """The draft whose rules decide the schema: its $schema, else by the keywords it uses."""
    default = (jsonschema.Draft202012Validator if _mentions_newer_keywords(schema)
               else jsonschema.Draft7Validator)
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DRAFT_NAMES[default]
    return DRAFT_NAMES.get(validator_for(schema, default=default), DRAFT_NAMES[default])


class Judge:
    """Validity of instances under one schema; None where jsonschema cannot decide it."""

    def __init__(self, schema, draft):
        cls = VALIDATORS_BY_DRAFT[draft]
        cls.check_schema(schema)
        self._checker = _RecordingChecker()
        self._validator = cls(schema, format_checker=self._checker)

    def verdict(self, instance):
        if not is_plain_json(instance):
            return None
        self._checker.unjudged.clear()
        try:
            valid = self._validator.is_valid(instance)
        except (jsonschema.exceptions.RefResolutionError, RecursionError, ValueError, TypeError, KeyError):
            return None
        except Exception:  # noqa: BLE001 — e.g. a pattern Python's re cannot compile
            return None
        return None if self._checker.unjudged else valid


def is_plain_json(value, depth=0):
    """Whether the value is spelled one way only in JSON: integers as integers, decimals short and
    without exponent, no -0.0, no lone surrogates, and it survives a dumps/loads round trip."""
    if depth > 64:
        return False
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) < 10**15
    if isinstance(value, float):
        text = repr(value)
        return (math.isfinite(value) and not value.is_integer() and abs(value) < 1e15
                and "e" not in text and len(text.split(".")[1]) <= 6)
    if isinstance(value, str):
        return _no_lone_surrogates(value)
    if isinstance(value, list):
        return all(is_plain_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_no_lone_surrogates(k) and is_plain_json(v, depth + 1) for k, v in value.items())
    return False


def _no_lone_surrogates(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical(value):
    """The value's one spelling: sorted keys, no spaces; equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
