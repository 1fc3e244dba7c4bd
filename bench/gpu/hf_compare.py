#!/usr/bin/env python3
"""Our logits against Hugging Face transformers on random-initialised Llama and Qwen3 models.

For each architecture: a small model from its transformers config, random-initialised with a
seed and saved with save_pretrained in bf16; transformers' logits over random token ids (fp32
computation on the bf16 weights, on the GPU); ours from `rootspec-gpu-bench logits` in float32
and in bfloat16. Tolerances: float32 ours vs transformers within 1e-3 of the logits' scale (the
same weights, the same law, other summation orders); bfloat16 within 5e-2 of the scale (we round
the products' inputs and the K/V to bf16). Writes hf-compare.json into OUT and exits 1 when a
comparison fails.

    bench/gpu/hf_compare.py BENCH_BINARY OUT [--dry-run]

--dry-run (device-check.sh --dry-run, CUDA executed on the CPU, where transformers may be
missing): when torch or transformers cannot be imported, runs our side alone on a folder of
`rootspec-gpu-bench make-pair --size tiny` (both dtypes, the output checked for its size and
for finite values) and says that the comparison itself did not run.
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no network there: never wait on the hub

bench, out_dir = sys.argv[1], sys.argv[2]
dry_run = "--dry-run" in sys.argv[3:]
os.makedirs(out_dir, exist_ok=True)
try:
    import torch
    import transformers
except ImportError as e:
    if not dry_run:
        raise
    import array
    import math
    print(f"dry run: {e}: the comparison with transformers does not run here; our side does", flush=True)
    folder = os.path.join(out_dir, "dry-run-pair")
    subprocess.run([bench, "make-pair", "--out", folder, "--size", "tiny"], check=True, timeout=120)
    vocab = json.load(open(os.path.join(folder, "target", "config.json")))["vocab_size"]
    ids = list(range(3, 51))
    for dtype in ("float32", "bfloat16"):
        path = os.path.join(out_dir, f"ours-dry-run-{dtype}.f32")
        subprocess.run([bench, "logits", "--model", os.path.join(folder, "target"), "--dtype", dtype, "--tokens",
                        ",".join(map(str, ids)), "--out", path], check=True, timeout=300)
        values = array.array("f")
        with open(path, "rb") as f:
            values.frombytes(f.read())
        if len(values) != len(ids) * vocab or not all(math.isfinite(v) for v in values):
            sys.exit(f"dry run: {path}: {len(values)} values, {len(ids) * vocab} expected, all finite")
        print(f"dry run: ours in {dtype}: {len(ids)} rows of {vocab} finite logits", flush=True)
    json.dump({"dry_run": True, "transformers": None}, open(os.path.join(out_dir, "hf-compare.json"), "w"))
    sys.exit(0)

torch.manual_seed(0)
common = dict(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
              num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
              tie_word_embeddings=False)
configs = {
    "llama": transformers.LlamaConfig(**common, rope_theta=500000.0, rms_norm_eps=1e-5,
                                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 64}),
    "qwen3": transformers.Qwen3Config(**common, rope_theta=1000000.0, rms_norm_eps=1e-6),
}
ids = torch.randint(0, 1000, (48,), generator=torch.Generator().manual_seed(1)).tolist()
results, failed = {}, False
for name, config in configs.items():
    entry = {}
    try:
        folder = os.path.join(out_dir, "hf-" + name)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        with torch.no_grad():  # wider than the default init, so that logits differ by more than noise
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.05)
        model.save_pretrained(folder)
        ref_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda().eval()
        with torch.no_grad():
            want = ref_model(torch.tensor([ids]).cuda()).logits[0].float().cpu()
        scale = want.abs().max().item()
        entry["scale"] = scale
        for dtype, tolerance in (("float32", 1e-3), ("bfloat16", 5e-2)):
            path = os.path.join(out_dir, f"ours-{name}-{dtype}.f32")
            subprocess.run([bench, "logits", "--model", folder, "--dtype", dtype, "--tokens",
                            ",".join(map(str, ids)), "--out", path], check=True, timeout=60)
            got = torch.from_file(path, size=len(ids) * config.vocab_size, dtype=torch.float32).view(len(ids), -1)
            diff = (got - want).abs().max().item()
            argmax_agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
            ok = diff <= tolerance * max(1.0, scale)
            failed |= not ok
            entry[dtype] = {"max_abs_diff": diff, "tolerance": tolerance * max(1.0, scale),
                            "argmax_agreement": argmax_agree, "ok": ok}
            print(f"{name:6s} {dtype:9s} max |ours - transformers| {diff:.3g} (tolerance "
                  f"{tolerance * max(1.0, scale):.3g}, logits up to {scale:.3g}); argmax agrees on "
                  f"{argmax_agree:.0%} of rows: {'ok' if ok else 'FAILED'}", flush=True)
    except Exception as e:  # one model's failure still leaves the other's comparison
        failed = True
        entry["error"] = f"{type(e).__name__}: {e}"
        print(f"{name:6s} FAILED: {entry['error']}", flush=True)
    results[name] = entry
results["transformers"] = transformers.__version__
results["torch"] = torch.__version__
with open(os.path.join(out_dir, "hf-compare.json"), "w") as f:
    json.dump(results, f, indent=2)
sys.exit(1 if failed else 0)
