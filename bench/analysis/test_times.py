#!/usr/bin/env python3
"""Where tests/run's minutes go: reads its output (stdout and stderr together, or ctest's alone)
and prints, for each ctest run in it, the total of the tests' own times, the time by test
executable (the part of a test's name before the first dot) and the slowest tests.

Usage: test_times.py LOG [--top N]

ctest runs two tests at a time (-j2), so a stage's wall time is about half its tests' total;
tests that run serially (the daemon and HTTP areas) count fully.
"""
import collections
import re
import sys

LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (.+?) \.{3,}\s*(\*\*\*)?\s*(\w[\w ]*?)\s+([\d.]+) sec")
START = re.compile(r"^tests/run: (.*)$")
PROJECT = re.compile(r"^Test project (.*)$")  # each ctest run's first line


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 15
    runs = []  # (title, [(name, status, seconds)])
    title = "main tests"
    current = None
    for line in open(sys.argv[1], errors="replace"):
        start = START.match(line)
        if start:
            title = start.group(1)
            current = None
            continue
        project = PROJECT.match(line)
        if project:
            if current is not None:
                title = f"ctest run {len(runs) + 1}"
            current = None
            continue
        m = LINE.match(line)
        if not m:
            continue
        if current is None:
            current = []
            runs.append((title, current))
        current.append((m.group(1).split("  #")[0], m.group(3), float(m.group(4))))
    for title, tests in runs:
        total = sum(s for _, _, s in tests)
        print(f"== {title}: {len(tests)} tests, {total / 60:.1f} test-minutes")
        by_group = collections.Counter()
        count = collections.Counter()
        for name, _, seconds in tests:
            group = name.split(".")[0]
            by_group[group] += seconds
            count[group] += 1
        for group, seconds in by_group.most_common(top):
            print(f"   {seconds:8.1f} s  {count[group]:4d} tests  {group}")
        print("   slowest:")
        for name, status, seconds in sorted(tests, key=lambda t: -t[2])[:top]:
            print(f"   {seconds:8.1f} s  {name}{'' if status == 'Passed' else '  (' + status + ')'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
