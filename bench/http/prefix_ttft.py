#!/usr/bin/env python3
"""Time to first token with and without a prefix-cache hit, against a running rootspec-http.

A long shared prefix (a system prompt of --prefix-chars characters) is sent once, then --requests
streaming completions that extend it (hits); as many again whose prefixes differ from their first
characters on (misses). Reports TTFT p50 / p90 of each, their ratio, the cached prompt tokens
the responses' usage reports, each process's prefix cache counters from /metrics, and the hits'
rounds and tokens (from /metrics around each hit). Greedy, one request at a time.

Acceptance with hits against without: run it on a pair with the caches on and, with --json, on
one with both off ([target] and [drafter] prefix_cache_mb = 0), then --compare the two files: each
hit's text and rounds must be equal (a fixed --rule makes the rounds a function of the pools).
  bench/http/prefix_ttft.py http://127.0.0.1:8000 [--prefix-chars 800] [--requests 32] [--max-tokens 8]
      [--rule root-draw --budget 8] [--json OUT] [--compare EARLIER.json]
"""
import argparse
import http.client
import json
import random
import statistics
import time
import urllib.parse


def metrics(url):
    """The /metrics samples as {name{labels}: value}."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def stream(url, prompt, max_tokens, extra):
    """One streamed completion: (seconds to the first text, the text, usage)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, **extra})
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
    ap.add_argument("--rule", help="the requests' rule (default: the server's)")
    ap.add_argument("--budget", type=int, help="the requests' budget B (default: the server's)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--compare", help="a --json file of a run to compare the hits' texts and rounds with")
    a = ap.parse_args()
    extra = {k: v for k, v in (("rule", a.rule), ("budget", a.budget)) if v is not None}
    base = ("You are a careful assistant. Answer in one line, exactly, and cite the rule you use. " * 40)
    prefix = base[: a.prefix_chars]
    nonce = random.SystemRandom().randrange(10**6)
    stream(a.url, prefix + " Warm-up:", a.max_tokens, extra)  # puts the prefix in the cache
    hits, misses, cached, texts, rounds, tokens = [], [], [], [], [], []
    for i in range(a.requests):
        before = metrics(a.url)
        t, text, usage = stream(a.url, prefix + f" Question {i}:", a.max_tokens, extra)
        after = metrics(a.url)
        hits.append(t)
        texts.append(text)
        rounds.append(after.get("rootspec_rounds_total", 0) - before.get("rootspec_rounds_total", 0))
        tokens.append(after.get("rootspec_generated_tokens_total", 0) -
                      before.get("rootspec_generated_tokens_total", 0))
        cached.append((usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0))
        # A prefix of the same length that differs from its first character: nothing to reuse
        # (the run's own nonce: nor from an earlier run on the same server).
        t, _, _ = stream(a.url, f"{nonce:06d}{i:04d}" + prefix[10:] + f" Question {i}:", a.max_tokens, extra)
        misses.append(t)
    m = metrics(a.url)
    caches = {p: {k: m.get(f'rootspec_prefix_cache_{k}{{process="{p}"}}')
                  for k in ("hit_tokens_total", "miss_tokens_total", "evictions_total", "bytes")}
              for p in ("target", "drafter")}
    out = {
        "requests": a.requests, "prefix_chars": a.prefix_chars,
        "hit_ttft_ms": {"p50": 1e3 * statistics.median(hits), "p90": 1e3 * quantile(hits, 0.9)},
        "miss_ttft_ms": {"p50": 1e3 * statistics.median(misses), "p90": 1e3 * quantile(misses, 0.9)},
        "hit_over_miss_p50": statistics.median(hits) / statistics.median(misses),
        "cached_tokens_p50": statistics.median(cached),
        "prefix_caches": caches,
        "hit_texts": texts, "hit_rounds": rounds, "hit_tokens": tokens,
        "hit_tokens_per_round": sum(tokens) / max(1, sum(rounds)),
    }
    print(f"TTFT hit  p50 {out['hit_ttft_ms']['p50']:.1f} ms, p90 {out['hit_ttft_ms']['p90']:.1f} ms "
          f"(cached prompt tokens p50 {out['cached_tokens_p50']})")
    print(f"TTFT miss p50 {out['miss_ttft_ms']['p50']:.1f} ms, p90 {out['miss_ttft_ms']['p90']:.1f} ms")
    print(f"hit / miss (p50): {out['hit_over_miss_p50']:.3f}")
    for p, c in caches.items():
        print(f"/metrics {p}: " + ", ".join(f"{k} {v:.0f}" if v is not None else f"{k} -" for k, v in c.items()))
    print(f"hits: {sum(tokens):.0f} tokens in {sum(rounds):.0f} rounds ({out['hit_tokens_per_round']:.3f} per round)")
    if a.compare:
        with open(a.compare) as f:
            earlier = json.load(f)
        same_text = sum(x == y for x, y in zip(texts, earlier["hit_texts"]))
        same_rounds = sum(x == y for x, y in zip(rounds, earlier["hit_rounds"]))
        print(f"against {a.compare}: {same_text} of {len(texts)} hit texts equal, {same_rounds} of {len(texts)} "
              f"hits in as many rounds; tokens per round {out['hit_tokens_per_round']:.3f} here, "
              f"{earlier['hit_tokens_per_round']:.3f} there")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
