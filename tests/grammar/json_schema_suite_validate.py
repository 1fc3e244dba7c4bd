#!/usr/bin/env python3
"""Validates texts that a JSON-schema grammar generated, independently of the grammar engine.

Input: a JSON-lines file, one {"schema": ..., "text_hex": ...} per line (the text's bytes in hex).
Each text must be strict UTF-8, strict RFC 8259 JSON (no NaN/Infinity, no duplicate member names)
and valid under the schema by python3-jsonschema's Draft 2020-12 validator. Formats are checked
too: jsonschema's format checker, and for date, time, date-time, email and uuid our own RFC 3339 /
address checks (jsonschema skips time and date-time without optional packages).
Prints "validated N texts" and exits 1 on the first invalid one (after listing all).
"""
import calendar
import json
import re
import sys
import uuid

import jsonschema

_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))$")
_DATE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)$")
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
_EMAIL = re.compile(rf"^{_ATEXT}(\.{_ATEXT})*@{_LABEL}(\.{_LABEL})+$")


def _date_ok(s):
    m = _DATE.match(s)
    if not m:
        return False
    y, mo, d = (int(g) for g in m.groups())
    return 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] if y > 0 else (1 <= mo <= 12 and 1 <= d <= 31)


def _time_ok(s):
    m = _TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if h > 23 or mi > 59 or sec > 60:
        return False
    if m.group(6) is not None and (int(m.group(6)) > 23 or int(m.group(7)) > 59):
        return False
    if sec == 60:  # a leap second: 23:59:60 in UTC
        off = 0
        if m.group(6) is not None:
            off = (int(m.group(6)) * 60 + int(m.group(7))) * (1 if m.group(5)[0] == "+" else -1)
        utc = (h * 60 + mi - off) % (24 * 60)
        return utc == 23 * 60 + 59
    return True


def _date_time_ok(s):
    parts = re.split(r"[Tt]", s)
    return len(parts) == 2 and _date_ok(parts[0]) and _time_ok(parts[1])


def _uuid_ok(s):
    if not re.match(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", s):
        return False
    uuid.UUID(s)
    return True


# RFC 3339 Appendix A, written out as its ABNF reads.
_DUR_TIME = r"T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)"
_DURATION = re.compile(rf"^P((\d+D|\d+M(\d+D)?|\d+Y(\d+M(\d+D)?)?)({_DUR_TIME})?|{_DUR_TIME}|\d+W)$")


def _json_pointer_ok(s):
    """RFC 6901: empty, or "/"-prefixed tokens in which "~" is only ~0 or ~1."""
    return s == "" or (s.startswith("/") and all(re.fullmatch(r"([^~]|~[01])*", t) for t in s[1:].split("/")))


def _relative_json_pointer_ok(s):
    m = re.match(r"^(0|[1-9][0-9]*)(.*)$", s, re.S)
    return bool(m) and (m.group(2) == "#" or _json_pointer_ok(m.group(2)))


checker = jsonschema.FormatChecker()
for name, fn in (("date", _date_ok), ("time", _time_ok), ("date-time", _date_time_ok),
                 ("email", lambda s: bool(_EMAIL.match(s))), ("uuid", _uuid_ok),
                 ("duration", lambda s: bool(_DURATION.match(s))), ("json-pointer", _json_pointer_ok),
                 ("relative-json-pointer", _relative_json_pointer_ok)):
    # jsonschema's own "time" is draft 3's (HH:MM:SS, no offset): ours alone for time and date-time.
    inner = None if name in ("time", "date-time") else checker.checkers.get(name)

    def check(instance, fn=fn, inner=inner):
        if not isinstance(instance, str):
            return True
        if inner is not None and not inner[0](instance):
            return False
        return fn(instance)

    checker.checkers[name] = (check, ())


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate member name")
    return dict(pairs)


def _no_constants(name):
    raise ValueError("not JSON: " + name)


def main(path):
    bad = 0
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            n += 1
            raw = bytes.fromhex(case["text_hex"])
            try:
                text = raw.decode("utf-8", errors="strict")
                value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
                validator = jsonschema.Draft202012Validator(case["schema"], format_checker=checker)
                errors = sorted(validator.iter_errors(value), key=str)
                if errors:
                    raise ValueError(errors[0].message)
            except Exception as e:  # noqa: BLE001 — report every kind of failure
                bad += 1
                print(f"INVALID: {raw!r} under {json.dumps(case['schema'])}: {e}")
    print(f"validated {n} texts, {bad} invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
