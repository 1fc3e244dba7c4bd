#!/usr/bin/env python3
"""Time to first token with and without a prefix-cache hit, against a running rootspec-http.

A long shared prefix (a system prompt of --prefix-chars characters) is sent once, then --requests
streaming completions that extend it (hits); as many again whose prefixes differ from their first
characters on (misses). Reports TTFT p50 / p90 of each, their ratio, and the cached prompt tokens
the responses' usage reports. Greedy, one request at a time. Timing only: nothing asserted.
  bench/http/prefix_ttft.py http://127.0.0.1:8000 [--prefix-chars 800] [--requests 32] [--max-tokens 8]
"""
import argparse
import http.client
import json
import statistics
import time
import urllib.parse


def stream(url, prompt, max_tokens):
    """One streamed completion: (seconds to the first text, the text, usage)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    first, text, usage = None, "", None
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            usage = chunk["usage"]
        for c in chunk.get("choices", []):
            if c.get("text"):
                if first is None:
                    first = time.perf_counter() - start
                text += c["text"]
    conn.close()
    return first if first is not None else time.perf_counter() - start, text, usage


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--prefix-chars", type=int, default=800)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    base = ("You are a careful assistant. Answer in one line, exactly, and cite the rule you use. " * 40)
    prefix = base[: a.prefix_chars]
    stream(a.url, prefix + " Warm-up:", a.max_tokens)  # puts the prefix in the cache
    hits, misses, cached = [], [], []
    for i in range(a.requests):
        t, _, usage = stream(a.url, prefix + f" Question {i}:", a.max_tokens)
        hits.append(t)
        cached.append((usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0))
        # A prefix of the same length that differs from its first character: nothing to reuse.
        t, _, _ = stream(a.url, f"{i:04d}" + prefix[4:] + f" Question {i}:", a.max_tokens)
        misses.append(t)
    out = {
        "requests": a.requests, "prefix_chars": a.prefix_chars,
        "hit_ttft_ms": {"p50": 1e3 * statistics.median(hits), "p90": 1e3 * quantile(hits, 0.9)},
        "miss_ttft_ms": {"p50": 1e3 * statistics.median(misses), "p90": 1e3 * quantile(misses, 0.9)},
        "hit_over_miss_p50": statistics.median(hits) / statistics.median(misses),
        "cached_tokens_p50": statistics.median(cached),
    }
    print(f"TTFT hit  p50 {out['hit_ttft_ms']['p50']:.1f} ms, p90 {out['hit_ttft_ms']['p90']:.1f} ms "
          f"(cached prompt tokens p50 {out['cached_tokens_p50']})")
    print(f"TTFT miss p50 {out['miss_ttft_ms']['p50']:.1f} ms, p90 {out['miss_ttft_ms']['p90']:.1f} ms")
    print(f"hit / miss (p50): {out['hit_over_miss_p50']:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
