#!/usr/bin/env python3
"""Every kernel of kernels/cuda/kernels.cu states launch bounds and fits its register budget.

Compiles the source (kernels.cu) with nvcc to PTX and then with ptxas, as the GPU build does, for each
architecture given (default sm_80 and sm_90), and fails when
  - a kernel's PTX entry has no .maxntid / .minnctapersm (ROOTSPEC_LAUNCH_BOUNDS missing: nvcc would
    assume 1 024 threads and the CPU execution could not check its launches), or
  - ptxas spills a kernel's registers to local memory (its budget, 65 536 / (max_threads ·
    min_blocks), is too small for its code: slow on a GPU, and invisible to the CPU execution), or
  - ptxas uses more registers than that budget (it should not: the budget is ptxas's own cap).
Prints one line per kernel: registers used, budget, blocks per SM its registers allow.

Usage: register_budget.py NVCC SOURCE_CU [ARCH ...] [--expect KERNEL ...]
  ARCH like 80, 90 (default both); --expect: succeed only if the check fails for each KERNEL named
  (the check's own test, on register_budget_planted.cu).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

REGISTERS_PER_SM = 65536
KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "cuda")


def budget(max_threads, min_blocks):
    return min(255, REGISTERS_PER_SM // (max_threads * min_blocks) // 8 * 8)


def ptx_entries(ptx):
    """{mangled entry name: (maxntid, minnctapersm)}; None where a directive is missing."""
    entries = {}
    for m in re.finditer(r"\.entry\s+(\S+)\s*\((.*?)\)\s*((?:\.\w+[^\n{]*\n?\s*)*)\{", ptx, re.S):
        name, directives = m.group(1), m.group(3)
        ntid = re.search(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", directives)
        blocks = re.search(r"\.minnctapersm\s+(\d+)", directives)
        threads = None
        if ntid:
            threads = 1
            for g in ntid.groups():
                if g:
                    threads *= int(g)
        entries[name] = (threads, int(blocks.group(1)) if blocks else None)
    return entries


def ptxas_usage(text):
    """{mangled name: (registers, spill store bytes, spill load bytes)} from ptxas -v."""
    usage, name, spill = {}, None, (0, 0)
    for line in text.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            name, spill = m.group(1), (0, 0)
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            spill = (int(m.group(1)), int(m.group(2)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            usage[name] = (int(m.group(1)), *spill)
            name = None
    return usage


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        return dict(zip(names, out.splitlines()))
    except OSError:
        return {n: n for n in names}


def check(nvcc, source, arch, work):
    # The source's own folder and kernels/cuda (launch.h), as the GPU build includes them.
    includes = [os.path.dirname(os.path.abspath(source)), KERNELS]
    ptx = os.path.join(work, f"kernels_{arch}.ptx")
    compiled = subprocess.run([nvcc, "-std=c++17", "-O3", f"-arch=compute_{arch}", "-ptx", source, "-o", ptx]
                              + [f"-I{d}" for d in includes], capture_output=True, text=True)
    if compiled.returncode != 0:
        return [f"sm_{arch}: nvcc could not compile {source}:\n{compiled.stderr}"]
    ptxas = os.path.join(os.path.dirname(nvcc), "ptxas")
    if not os.path.exists(ptxas):
        ptxas = "ptxas"
    result = subprocess.run([ptxas, "-v", f"-arch=sm_{arch}", ptx, "-o", os.path.join(work, f"k{arch}.cubin")],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return [f"sm_{arch}: ptxas failed:\n{result.stderr}"]
    entries = ptx_entries(open(ptx).read())
    usage = ptxas_usage(result.stdout + result.stderr)
    names = demangle(sorted(entries))
    failures = []
    if not entries:
        failures.append(f"sm_{arch}: no kernel entries found in the PTX")
    for mangled in sorted(entries, key=lambda n: names[n]):
        threads, min_blocks = entries[mangled]
        shown = re.sub(r"rootspec::cuda::\(anonymous namespace\)::", "", names[mangled])
        if threads is None or min_blocks is None:
            failures.append(f"sm_{arch} {shown}: no launch bounds (ROOTSPEC_LAUNCH_BOUNDS)")
            continue
        if mangled not in usage:
            failures.append(f"sm_{arch} {shown}: ptxas reported no register count")
            continue
        registers, stores, loads = usage[mangled]
        cap = budget(threads, min_blocks)
        per_sm = REGISTERS_PER_SM // (((threads + 31) // 32) * 32 * ((registers + 7) // 8 * 8))
        print(f"sm_{arch} {registers:3d} of {cap:3d} registers, {threads:4d} threads, "
              f"{per_sm:2d} blocks/SM by registers (bound {min_blocks}): {shown}")
        if stores or loads:
            failures.append(f"sm_{arch} {shown}: spills ({stores} bytes stored, {loads} loaded) within its "
                            f"budget of {cap} registers: give it fewer min_blocks or fewer live values")
        if registers > cap:
            failures.append(f"sm_{arch} {shown}: {registers} registers over its budget of {cap}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("nvcc")
    parser.add_argument("source")
    parser.add_argument("archs", nargs="*", default=["80", "90"], help="like 80, 90")
    parser.add_argument("--expect", action="append", default=[],
                        help="the check of the checker: succeed only if a failure names each kernel given")
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for arch in args.archs:
            failures += check(args.nvcc, args.source, arch, work)
    for f in failures:
        print(("found: " if args.expect else "FAIL ") + f, file=sys.stderr)
    if args.expect:
        missed = [k for k in args.expect if not any(k in f for f in failures)]
        for k in missed:
            print(f"FAIL: no failure names {k}", file=sys.stderr)
        return 1 if missed else 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
