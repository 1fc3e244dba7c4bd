#!/usr/bin/python3
# The Python side of the tool-rendering tests: chat templates rendered by Jinja2 (Debian's
# python3-jinja2) set up as transformers' apply_chat_template sets it up (an immutable sandbox
# with trim_blocks and lstrip_blocks, the loopcontrols extension, its tojson filter and
# raise_exception). The JavaScript peer's Jinja engine has no tojson, which every tool template
# uses.
#   stdin: JSON list of {template, messages, options: {tools?, add_generation_prompt, enable_thinking?,
#          date_string?, bos_token?}}; stdout: JSON list of the rendered texts (null: the template raised).
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                   extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

out = []
for case in json.load(sys.stdin):
    opts = dict(case.get("options", {}))
    try:
        out.append(env.from_string(case["template"]).render(messages=case["messages"], **opts))
    except jinja2.exceptions.TemplateError:
        out.append(None)
json.dump(out, sys.stdout, ensure_ascii=False)
