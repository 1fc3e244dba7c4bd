#!/usr/bin/env python3
"""The analytic floors of a pass and of each kernel on an H200, which the device check compares
measured passes and kernels with.

    bench/gpu/floors.py [passes | kernels]     both tables without an argument
    bench/gpu/floors.py --check                exit status 1 when bench/gpu/README.md's tables differ

passes   for the Llama-3.2-1B and Llama-3.1-8B shapes (common/model/random_model.cpp's presets),
         bf16 weights and KV cache, contexts 512 / 2 048 / 4 096 and 1 / 8 / 32 / 64 query rows:
           bytes   every weight read once (the products' matrices and the lm head; an untied
                   embedding gives one row per token, negligible) plus the KV cache read once
                   (every layer's K and V over the context and the pass's own rows)
           FLOPs   2 · rows · (the products' weights) + attention's 4 · rows · heads · head_dim ·
                   keys a layer
           floor   max(bytes / HBM, FLOPs / bf16 tensor rate)
         and attention's share of the FLOPs.
kernels  every kernel and copy a pass of the Cuda backend (common/model/cuda_backend.cpp,
         enqueue_pass and the forward_* calls after it) issues, at the Llama-3.1-8B shape, 1 and
         64 rows, contexts 512 and 4 096 where the context changes it: bytes a call moves (each
         tensor it reads or writes once: the least DRAM traffic, not the loads it issues), FLOPs a
         call, calls a pass, and the call's floor max(bytes / rate, FLOPs / peak) with the peak
         of the units it runs on (tensor cores for the products and the tensor-core attention,
         float32 CUDA cores for the rest); then the sum of the kernels' floors for a whole pass
         against the pass's own floor above (the gap: the activations every kernel writes and
         the next reads back).
Both print Markdown tables (bench/gpu/README.md holds them).
"""
import sys

# NVIDIA H200 SXM, the vendor's datasheet figures.
HBM = 4.8e12        # bytes/s, HBM3e
BF16 = 989e12       # FLOP/s, dense bf16 tensor cores (the datasheet's 1 979 is with 2:4 sparsity)
FP32 = 67e12        # FLOP/s, float32 on CUDA cores
PCIE = 64e9         # bytes/s, one direction of PCIe Gen5 x16 (the datasheet's 128 GB/s is both)
SMS = 132           # multiprocessors, for the backend's split-K choice

SHAPES = {
    "llama-3.2-1b": dict(vocab=128256, hidden=2048, layers=16, heads=32, kv=8, inter=8192, hd=64),
    "llama-3.1-8b": dict(vocab=128256, hidden=4096, layers=32, heads=32, kv=8, inter=14336, hd=128),
}
BF = 2   # bytes of a bf16 element (weights, KV cache, the products' inputs)
F32 = 4  # the residual stream, q, the products' outputs, logits
TOP_K = 32  # cuda::kMaxTopK: the most a top-k pool reads of a row


def floors(s, context, rows):
    per_layer = (s["hidden"] * (s["heads"] + 2 * s["kv"]) * s["hd"]  # q, k, v
                 + s["heads"] * s["hd"] * s["hidden"]                  # o
                 + 3 * s["inter"] * s["hidden"])                       # gate, up, down
    matrix_weights = s["layers"] * per_layer + s["vocab"] * s["hidden"]
    keys = context + rows
    kv_bytes = s["layers"] * 2 * keys * s["kv"] * s["hd"] * 2
    weight_bytes = 2 * matrix_weights
    product_flops = 2 * rows * matrix_weights
    attention_flops = s["layers"] * 4 * rows * s["heads"] * s["hd"] * keys
    bytes_ = weight_bytes + kv_bytes
    flops = product_flops + attention_flops
    return bytes_, flops, attention_flops / flops


def pass_floor_us(s, context, rows):
    b, f, _ = floors(s, context, rows)
    return max(b / HBM, f / BF16) * 1e6


def passes_table():
    print("| shape | context | rows | bytes read (GB) | GFLOP | HBM floor (µs) | compute floor (µs) |"
          " floor (µs) | floor vs 1 row | attention share of FLOPs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, s in SHAPES.items():
        for context in (512, 2048, 4096):
            one = None
            for rows in (1, 8, 32, 64):
                b, f, share = floors(s, context, rows)
                hbm, compute = b / HBM * 1e6, f / BF16 * 1e6
                floor = max(hbm, compute)
                one = one or floor
                print(f"| {name} | {context} | {rows} | {b / 1e9:.2f} | {f / 1e9:.1f} | {hbm:.0f} | {compute:.1f} |"
                      f" {floor:.0f} | {floor / one:.2f}x | {share:.1%} |")


# The backend's split-K choice for the tensor-core attention (common/model/attention_splits.h,
# attention_key_splits), so that the combine's scratch is the one a pass writes on an H200.
def key_splits(s, rows, context, max_splits=32, tile=64):
    group = s["heads"] // s["kv"]
    packed = rows * group
    warps = min((packed + 15) // 16, 8)
    row_tiles = -(-packed // (16 * warps))
    splits = -(-2 * SMS // (s["kv"] * row_tiles))
    splits = min(splits, -(-context // tile), max_splits)
    per_split = rows * s["heads"] * (s["hd"] + 2) * F32
    splits = min(splits, context * s["kv"] * s["hd"] * 2 * BF // per_split)
    power = 1
    while power * 2 <= splits:
        power *= 2
    while power > 1:  # halved while the last split's key range would be empty
        share = -(-context // power)
        per = -(-share // tile) * tile
        if (power - 1) * per < context:
            break
        power //= 2
    return power


def kernels(s, context, rows):
    """[(name, calls a pass, bytes a call, FLOPs a call, peak, rate)] of one pass and what follows it."""
    h, hd, nh, nkv, inter, vocab, layers = (s[k] for k in ("hidden", "hd", "heads", "kv", "inter", "vocab",
                                                            "layers"))
    qkv_n = (nh + 2 * nkv) * hd
    keys = context + rows  # the committed context and the tree's own slots
    kv_row = nkv * hd * BF  # a slot's K (or V) of one layer

    def gemm(n, k, accumulate):  # y (float32) [rows, n] (+)= x (bf16) [rows, k] · Wᵀ (bf16) [n, k]
        return n * k * BF + rows * k * BF + rows * n * F32 * (2 if accumulate else 1), 2 * rows * n * k

    splits = key_splits(s, rows, keys)
    attention_bytes = rows * nh * hd * F32 + 2 * keys * kv_row + (
        rows * nh * splits * (hd + 2) * F32 if splits > 1 else rows * nh * hd * BF)
    attention_flops = 4 * rows * nh * hd * keys
    out = [
        ("embed_rows", 1, rows * h * BF + rows * h * F32, 0, FP32, HBM),
        ("rms_norm (input, post; final once)", 2 * layers + 1, rows * h * F32 + h * F32 + rows * h * BF,
         4 * rows * h, FP32, HBM),
        ("GEMM q·k·v (cuBLASLt)", layers, *gemm(qkv_n, h, False), BF16, HBM),
        ("rope_kv_write", layers,
         rows * qkv_n * F32 + 2 * rows * hd * F32 + rows * nh * hd * F32 + 2 * rows * kv_row,
         6 * rows * (nh + nkv) * hd, FP32, HBM),
        ("tree_attention, tensor cores", layers, attention_bytes, attention_flops, BF16, HBM),
        ("tree_attention, simple", layers, attention_bytes, attention_flops, FP32, HBM),
        ("split-K combine (merge_splits)", layers if splits > 1 else 0,
         rows * nh * splits * (hd + 2) * F32 + rows * nh * hd * BF, 3 * rows * nh * splits * hd, FP32, HBM),
        ("GEMM o, x += (cuBLASLt)", layers, *gemm(h, nh * hd, True), BF16, HBM),
        ("GEMM gate·up (cuBLASLt)", layers, *gemm(2 * inter, h, False), BF16, HBM),
        ("silu_mul", layers, rows * 2 * inter * F32 + rows * inter * BF, 6 * rows * inter, FP32, HBM),
        ("GEMM down, x += (cuBLASLt)", layers, *gemm(h, inter, True), BF16, HBM),
        ("GEMM lm head (cuBLASLt)", 1, *gemm(vocab, h, False), BF16, HBM),
        # After the pass, one of: the logits to the host, tempered rows, a top-k pool's rows.
        # tempered_rows and top_k_rows: a call is two launches (the row's partials, then the fold).
        ("tempered_rows", 1, 2 * rows * vocab * F32, 5 * rows * vocab, FP32, HBM),
        ("processed_rows (sampling.h's law)", 1, 2 * rows * vocab * F32, 5 * rows * vocab, FP32, HBM),
        ("top_k_rows (k = 32)", 1, rows * vocab * F32 + rows * TOP_K * 8, 2 * rows * vocab, FP32, HBM),
        ("logits → host (cudaMemcpyAsync, forward)", 1, rows * vocab * F32, 0, FP32, PCIE),
        # The round's KV commit, one call for every layer's K and V: a move a row, each read and
        # written.
        ("move_kv_rows (a move a row)", 1, layers * rows * 2 * 2 * kv_row, 0, FP32, HBM),
    ]
    return out, splits


def call_floor_us(bytes_, flops, peak, rate):
    return max(bytes_ / rate, flops / peak) * 1e6


# The kernels a pass's floor is summed over: one attention kernel (the tensor-core one the
# backend runs at bf16), not the post-pass work, which depends on the round.
IN_PASS = ("embed_rows", "rms_norm", "GEMM", "rope_kv_write", "tree_attention, tensor", "split-K")


def fmt_bytes(b):
    return f"{b / 1e6:.3g}" if b < 1e9 else f"{b / 1e6:,.0f}"


def fmt_flops(f):
    return "0" if f == 0 else f"{f / 1e6:.3g}" if f < 1e9 else f"{f / 1e6:,.0f}"


def kernels_table(shape="llama-3.1-8b"):
    s = SHAPES[shape]
    print("| kernel or copy | context | calls a pass | 1 row: MB | 1 row: MFLOP | 1 row: floor (µs) |"
          " 64 rows: MB | 64 rows: MFLOP | 64 rows: floor (µs) | bound at 64 rows |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {}
    for context in (512, 4096):
        one, splits1 = kernels(s, context, 1)
        many, splits64 = kernels(s, context, 64)
        for (name, calls1, b1, f1, peak, rate), (_, calls64, b64, f64, _, _) in zip(one, many):
            context_matters = "attention" in name or "split-K" in name
            floor1, floor64 = call_floor_us(b1, f1, peak, rate), call_floor_us(b64, f64, peak, rate)
            if name.startswith(IN_PASS):
                totals[(context, 1)] = totals.get((context, 1), 0) + calls1 * floor1
                totals[(context, 64)] = totals.get((context, 64), 0) + calls64 * floor64
            if context == 4096 and not context_matters:
                continue  # printed once: the context does not change it
            if name.startswith("split-K"):
                name += f", {splits1} / {splits64} splits"
            bound = ("PCIe" if rate == PCIE else "HBM") if b64 / rate >= f64 / peak else (
                "tensor cores" if peak == BF16 else "CUDA cores")
            calls = f"{calls1}" if calls1 == calls64 else f"{calls1} / {calls64}"
            print(f"| {name} | {context if context_matters else 'any'} | {calls} |"
                  f" {fmt_bytes(b1)} | {fmt_flops(f1)} | {floor1:.2f} | {fmt_bytes(b64)} | {fmt_flops(f64)} |"
                  f" {floor64:.2f} | {bound} |")
    for context in (512, 4096):
        b1, f1, _ = floors(s, context, 1)
        b64, f64, _ = floors(s, context, 64)
        n1, n64 = launches(s, context, 1), launches(s, context, 64)
        calls = f"{n1}" if n1 == n64 else f"{n1} / {n64}"
        print(f"| **whole pass**: Σ of its kernels' floors (the pass's own floor) | {context} | {calls} launches |"
              f" {b1 / 1e6:,.0f} | {f1 / 1e6:,.0f} | **{totals[(context, 1)]:,.0f}** ({pass_floor_us(s, context, 1):,.0f}) |"
              f" {b64 / 1e6:,.0f} | {f64 / 1e6:,.0f} | **{totals[(context, 64)]:,.0f}** ({pass_floor_us(s, context, 64):,.0f}) |"
              " HBM |")


def launches(s, context, rows):
    """Kernel launches of one pass (enqueue_pass): per layer two norms, four products, RoPE,
    attention and its combine when split, SiLU; then the embedding, the final norm, the lm head."""
    per_layer = 9 + (1 if key_splits(s, rows, context + rows) > 1 else 0)
    return s["layers"] * per_layer + 3


def check_readme():
    """Whether bench/gpu/README.md holds both tables as this script prints them now."""
    import contextlib
    import io
    import os
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")).read()
    ok = True
    for table in (passes_table, kernels_table):
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            table()
        if text.getvalue() not in readme:
            print(f"bench/gpu/README.md: its {table.__name__[:-6]} table is not floors.py's output;"
                  f" remake it: bench/gpu/floors.py {table.__name__[:-6]}")
            ok = False
    return ok


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "both"
    if what == "--check":
        sys.exit(0 if check_readme() else 1)
    if what not in ("passes", "kernels", "both"):
        sys.exit("usage: bench/gpu/floors.py [passes | kernels | --check]")
    if what in ("passes", "both"):
        passes_table()
    if what == "both":
        print()
    if what in ("kernels", "both"):
        kernels_table()


if __name__ == "__main__":
    main()
