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

transformers 4.43 to 5.x: the dtype keyword is `dtype` from 4.56 and `torch_dtype` before it; the
RoPE settings are one `rope_parameters` dict from 5.0 (rope_theta inside it) and `rope_theta` +
`rope_scaling` before it; Qwen3 is compared where transformers has Qwen3Config (4.51+), else it
is skipped with a line (not a failure), and Llama's llama3 RoPE needs 4.43. A run where no model
could be compared fails. The choices are functions of the version string (tested without torch
by tests/bench/test_hf_compare_versions.py).

--dry-run (device-check.sh --dry-run, CUDA executed on the CPU, where transformers may be
missing): when torch or transformers cannot be imported, runs our side alone on a folder of
`rootspec-gpu-bench make-pair --size tiny` (both dtypes, the output checked for its size and
for finite values) and says that the comparison itself did not run.
"""
import json
import os
import re
import subprocess
import sys


def parse_version(text):
    """(major, minor, patch) of a version string such as '4.57.0.dev0' or '5.0.0rc1'."""
    numbers = [int(n) for n in re.findall(r"\d+", re.match(r"[\d.]*", text).group(0))[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def dtype_kwarg(version):
    """The keyword that from_config / from_pretrained take for the dtype: `dtype` from 4.56."""
    return "dtype" if parse_version(version) >= (4, 56) else "torch_dtype"


def has_qwen3(version):
    """Whether transformers has Qwen3Config (4.51+)."""
    return parse_version(version) >= (4, 51)


def rope_kwargs(version, theta, scaling=None):
    """The config keywords of a RoPE: one `rope_parameters` dict from 5.0, else rope_theta and
    rope_scaling."""
    if parse_version(version) >= (5, 0):
        params = dict(scaling) if scaling else {"rope_type": "default"}
        params["rope_theta"] = theta
        return {"rope_parameters": params}
    kwargs = {"rope_theta": theta}
    if scaling:
        kwargs["rope_scaling"] = dict(scaling)
    return kwargs


def rope_type_of(config):
    """The rope_type a built config holds, in either version's layout."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return params.get("rope_type", params.get("type", "default"))


COMMON = dict(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
              num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
              tie_word_embeddings=False)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}


def model_plan(transformers):
    """[(name, builder or None, reason skipped)]: each comparison this transformers can make; the
    configs are built later, inside each model's try."""
    version = transformers.__version__
    plan = []
    if parse_version(version) < (4, 43):
        plan.append(("llama", None, f"transformers {version} has no llama3 RoPE (4.43+)"))
    else:
        plan.append(("llama", lambda: transformers.LlamaConfig(
            **COMMON, rms_norm_eps=1e-5, **rope_kwargs(version, 500000.0, LLAMA3_ROPE)), None))
    if has_qwen3(version) and hasattr(transformers, "Qwen3Config"):
        plan.append(("qwen3", lambda: transformers.Qwen3Config(
            **COMMON, rms_norm_eps=1e-6, **rope_kwargs(version, 1000000.0)), None))
    else:
        plan.append(("qwen3", None, f"transformers {version} has no Qwen3Config (4.51+)"))
    return plan


def dry_run_ours(bench, out_dir, reason):
    import array
    import math
    print(f"dry run: {reason}: the comparison with transformers does not run here; our side does", flush=True)
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
    return 0


def main(argv):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no network there: never wait on the hub
    bench, out_dir = argv[1], argv[2]
    dry_run = "--dry-run" in argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    try:
        import torch
        import transformers
    except ImportError as e:
        if not dry_run:
            raise
        return dry_run_ours(bench, out_dir, e)

    torch.manual_seed(0)
    version = transformers.__version__
    dtype_key = dtype_kwarg(version)
    print(f"transformers {version}, torch {torch.__version__}: dtype keyword `{dtype_key}`", flush=True)
    ids = torch.randint(0, 1000, (48,), generator=torch.Generator().manual_seed(1)).tolist()
    results, failed, compared = {}, False, 0
    for name, build_config, skipped in model_plan(transformers):
        entry = {}
        if build_config is None:
            entry["skipped"] = skipped
            print(f"{name:6s} SKIPPED: {skipped}", flush=True)
            results[name] = entry
            continue
        try:
            config = build_config()
            want_rope = "llama3" if name == "llama" else "default"
            if rope_type_of(config) != want_rope:
                raise ValueError(f"the config holds RoPE type {rope_type_of(config)!r}, not {want_rope!r}")
            folder = os.path.join(out_dir, "hf-" + name)
            model = transformers.AutoModelForCausalLM.from_config(config, **{dtype_key: torch.bfloat16})
            with torch.no_grad():  # wider than the default init, so that logits differ by more than noise
                for p in model.parameters():
                    if p.dim() == 2:
                        p.normal_(0.0, 0.05)
            model.save_pretrained(folder)
            ref_model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, **{dtype_key: torch.float32}).cuda().eval()
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
            compared += 1
        except Exception as e:  # one model's failure still leaves the other's comparison
            failed = True
            entry["error"] = f"{type(e).__name__}: {e}"
            print(f"{name:6s} FAILED: {entry['error']}", flush=True)
        results[name] = entry
    if compared == 0 and not failed:
        failed = True
        print(f"no model compared with transformers {version}", flush=True)
    results["transformers"] = version
    results["torch"] = torch.__version__
    with open(os.path.join(out_dir, "hf-compare.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
