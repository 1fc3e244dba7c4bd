#!/usr/bin/env python3
"""The analytic floors of a pass on an H200, which the device check compares measured passes with.

For the Llama-3.2-1B and Llama-3.1-8B shapes (common/model/random_model.cpp's presets), bf16
weights and KV cache, contexts 512 / 2 048 / 4 096 and 1 / 8 / 32 / 64 query rows:
  bytes   every weight read once (the products' matrices and the lm head; an untied embedding
          gives one row per token, negligible) plus the KV cache read once (every layer's K and V
          over the context and the pass's own rows)
  FLOPs   2 · rows · (the products' weights) + attention's 4 · rows · heads · head_dim · keys a layer
  floor   max(bytes / 4.8 TB/s, FLOPs / 790 TFLOP/s): HBM bandwidth and the dense bf16 rate the
          device tool's H200 notes report
and attention's share of the FLOPs. Prints a Markdown table (bench/gpu/README.md holds it).

    bench/gpu/floors.py
"""

HBM = 4.8e12       # bytes/s
BF16 = 790e12      # FLOP/s, dense bf16 tensor cores

SHAPES = {
    "llama-3.2-1b": dict(vocab=128256, hidden=2048, layers=16, heads=32, kv=8, inter=8192, hd=64),
    "llama-3.1-8b": dict(vocab=128256, hidden=4096, layers=32, heads=32, kv=8, inter=14336, hd=128),
}


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


def main():
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


if __name__ == "__main__":
    main()
