#!/usr/bin/env python3
"""Checks that every #include points down the layers of the source tree (docs/architecture.md,
"Source layout"): a file may include headers of its own folder and of folders in lower layers,
never of a higher layer nor of another folder of its own layer (two tools, two daemons).

A quoted include is resolved as the compiler does for this tree: relative to the including file
first, then by file name (every header name is unique in the tree; the check fails if that stops
being true). System includes (<…>) are not checked.

Usage: check_layers.py REPO_ROOT        checks the tracked tree
       check_layers.py --self-test      checks that a planted upward and sideways include are caught
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

# Lowest first. A folder is the first one or two path components (see folder_of). Folders in one
# inner list are one layer: none of them may include another.
LAYERS = [
    ["base"],                                   # helpers: clock, spin, logging, source tree
    ["kernels/cuda_on_cpu"],                    # the CPU execution of the CUDA runtime
    ["kernels/cpu", "kernels/cuda"],            # our kernels
    ["common/grammar"],                         # structured output
    ["common/speculation", "common/text"],             # the speculative core; tokenizers
    ["common/ipc", "common/config"],            # protocol and transports; config and shared flags
    ["common/model"],                           # the model runtime and its pass backends
    ["common/train", "sim"],                    # the trainer; table models
    ["target_proc", "drafter_proc", "http_proc"],  # the three processes
    ["bench/lib"],                              # what benchmarks and the study share
    ["tools/*", "bench/*"],                     # programs (each its own folder)
    ["tests/support"],                          # helpers every test area uses
    ["tests/*"],                                # tests may use test helpers of other areas
]
SOURCE = re.compile(r"\.(h|hpp|cpp|cc|cu|cuh|inc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(path):
    parts = path.split("/")
    if parts[0] in ("common", "kernels", "bench", "tools", "tests") and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def layer_of(folder):
    """(layer index, whether the folder's whole layer is one group): tests/* is one group."""
    for i, group in enumerate(LAYERS):
        for pattern in group:
            if pattern == folder:
                return i, False
            if pattern.endswith("/*") and folder.startswith(pattern[:-1]):
                return i, pattern == "tests/*"
    return None, False


def check(root, files):
    by_name = collections.defaultdict(list)
    for f in files:
        by_name[os.path.basename(f)].append(f)
    problems = []
    tracked = set(files)
    for name, places in by_name.items():
        if name.endswith((".h", ".hpp", ".cuh")) and len(places) > 1:
            problems.append(f"header name {name} is not unique: {', '.join(places)}")
    for f in files:
        source_folder = folder_of(f)
        source_layer, one_group = layer_of(source_folder)
        if source_layer is None:
            problems.append(f"{f}: folder {source_folder} is in no layer (add it to LAYERS)")
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                include = match.group(1)
                relative = os.path.normpath(os.path.join(os.path.dirname(f), include))
                if relative in tracked:
                    target = relative
                elif by_name.get(os.path.basename(include)):
                    target = by_name[os.path.basename(include)][0]
                else:
                    continue  # a generated or third-party header
                target_folder = folder_of(target)
                if target_folder == source_folder:
                    continue
                target_layer, _ = layer_of(target_folder)
                if target_layer is None:
                    problems.append(f"{f}:{number}: includes {target}, whose folder is in no layer")
                elif target_layer > source_layer:
                    problems.append(f"{f}:{number}: includes {target} from a higher layer "
                                    f"({source_folder} is below {target_folder})")
                elif target_layer == source_layer and not one_group:
                    problems.append(f"{f}:{number}: includes {target} from {target_folder}, a folder "
                                    f"of its own layer (move what both use to a lower layer)")
    return problems


def tracked_sources(root):
    out = subprocess.check_output(["git", "-C", root, "ls-files"], text=True)
    return [f for f in out.split() if SOURCE.search(f)]


def self_test():
    tree = {
        "base/clock.h": "",
        "kernels/cpu/spin_user.cpp": '#include "clock.h"\n',
        "kernels/cpu/climbs.cpp": '#include "round.h"\n',              # kernels → common/speculation
        "common/speculation/round.h": '#include "clock.h"\n',
        "tools/client/flags.h": "",
        "tools/generate/main.cpp": '#include "../client/flags.h"\n',   # a tool → another tool
        "tests/core/test_round.cpp": '#include "round.h"\n#include "flags.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as out:
                out.write(text)
        problems = check(root, sorted(tree))
    expected = ["kernels/cpu/climbs.cpp:1: includes common/speculation/round.h from a higher layer",
                "tools/generate/main.cpp:1: includes tools/client/flags.h from tools/client"]
    found = all(any(p.startswith(e) for p in problems) for e in expected)
    if not found or len(problems) != len(expected):
        print("self-test failed: expected exactly", expected, "got", problems)
        return 1
    print("self-test: the upward and the sideways include were both reported, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    files = tracked_sources(root)
    problems = check(root, files)
    for p in problems:
        print(p)
    print(f"{len(files)} source files checked, {len(problems)} include(s) against the layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
