#!/usr/bin/env python
"""The cost of budget-aware masks: fill_bitmask with and without a token budget.

For a few regexes, a GBNF grammar and JSON Schemas (one recursive: a PDA) bound to the bundled
GPT-2 vocabulary, token sequences are drawn once (``gramc.generate`` with random logits and
``finish=True``, so each ends complete), then replayed on the same matchers. At each position
``fill_bitmask`` is timed plain and with a budget, in the same walk:

* ``tight``: the budget is exactly the tokens the sequence still takes (EOS included), so the
  mask is cut wherever any allowed token would not finish in time;
* ``loose``: a budget of 10,000 (nothing is cut: the cost of the check alone).

Each artifact takes the path a decoder runs: compiled ahead of time, saved as a ``.gmask``
and loaded with ``gramc.load``. Every reported figure is per mask (warm: one walk over all
sequences first, left out), single threaded, and the process's peak RSS is printed last; the one-time cost of the first budgeted mask of each artifact (the DFA's token
distances, the PDA's node costs) is reported apart, with the artifact's first plain mask.

    python bench/budget_masks.py                 # about a minute
    python bench/budget_masks.py --seqs 5        # smoke run
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

import gramc
from gramc.bitmask import n_words
from gramc.generation import generate

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]{1,12}@[a-z]{2,8}\\.(com|org)$"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4}},
    "required": ["name", "age", "email"], "additionalProperties": False}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "label": {"type": "string", "maxLength": 10},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
    "required": ["v"], "additionalProperties": False}}}
GRAMMARS = {
    "regex:email": (r"[a-z0-9._]{1,10}@[a-z]{2,8}\.(com|org|net)", "regex", 24),
    "regex:date": (r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", "regex", 12),
    "regex:words": (r"[a-z]{1,8}( [a-z]{1,8}){0,12}\.", "regex", 24),
    "gbnf:nested": ('root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root', "gbnf", 32),
    "json_schema:person": (json.dumps(SCHEMA), "json_schema", 48),
    "json_schema:tree": (json.dumps(TREE), "json_schema", 48),
}
LOOSE = 10_000


def logits_fn(seed: int, width: int):
    def logits(ids):
        rng = np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFFFFFF)
        return rng.standard_normal(width, dtype=np.float32)
    return logits


def sequences(art, vocab, n: int, max_tokens: int) -> list[list[int]]:
    """``n`` complete token sequences (EOS appended) drawn with random logits."""
    out = []
    for seed in range(n):
        r = generate(art, logits_fn(seed, vocab.size), max_tokens=max_tokens, temperature=1.0,
                     seed=seed, finish=True, jump_forward=False)
        assert r.complete, (r.text, r.stop_reason)
        out.append(r.tokens + [vocab.eos_ids[0]])  # complete: EOS ends it (max_tokens does not count it)
    return out


def walk(art, seqs, row, timed: bool) -> dict[str, list[int]]:
    """Replay ``seqs``; per position the ns of each fill_bitmask variant."""
    times: dict[str, list[int]] = {"plain": [], "tight": [], "loose": []}
    clock = time.perf_counter_ns
    for seq in seqs:
        m = art.matcher(max_rollback=0)
        for i, t in enumerate(seq):
            left = len(seq) - i
            for name, budget in (("plain", None), ("tight", left), ("loose", LOOSE)):
                t0 = clock()
                m.fill_bitmask(row, budget=budget)
                dt = clock() - t0
                if timed:
                    times[name].append(dt)
            if art.kind == "dfa":  # exact: the sequence's own token fits (a PDA's bound may refuse it)
                assert m.mask(budget=left)[t]
            assert m.commit_token(t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqs", type=int, default=20, help="token sequences per grammar")
    ap.add_argument("--out", default="", help="write the raw results as JSON here")
    args = ap.parse_args()
    vocab = gramc.Vocab.gpt2()
    row = np.zeros(n_words(vocab.size), dtype=np.int32)
    results = {}
    print(f"gramc {gramc.__version__}, GPT-2 ({vocab.size:,} ids), {args.seqs} sequences per grammar\n")
    print("| grammar | kind | masks | plain p50 / p99 µs | tight budget p50 / p99 µs | loose budget p50 / p99 µs "
          "| first plain mask ms | first budgeted mask ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, (source, fmt, max_tokens) in GRAMMARS.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name.replace(':', '-')}.gmask"
            gramc.compile(source, format=fmt, vocab=vocab).save(path)
            art = gramc.load(path, vocab=vocab)
        m = art.matcher()
        t0 = time.perf_counter()
        m.fill_bitmask(row)
        first_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        m.fill_bitmask(row, budget=LOOSE)
        first_budget = time.perf_counter() - t0
        seqs = sequences(art, vocab, args.seqs, max_tokens)
        walk(art, seqs, row, timed=False)  # warm every memo, as a server's steady state
        times = walk(art, seqs, row, timed=True)
        summary = {k: (float(np.percentile(v, 50)) / 1e3, float(np.percentile(v, 99)) / 1e3) for k, v in times.items()}
        results[name] = {"kind": art.kind, "masks": len(times["plain"]), "us": summary,
                         "first_plain_ms": first_plain * 1e3, "first_budget_ms": first_budget * 1e3}
        cells = " | ".join(f"{summary[k][0]:.1f} / {summary[k][1]:.1f}" for k in ("plain", "tight", "loose"))
        print(f"| {name} | {art.kind} | {len(times['plain'])} | {cells} | {first_plain * 1e3:.1f} "
              f"| {first_budget * 1e3:.1f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"\npeak RSS {peak:.0f} MiB (compiles included)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"grammars": results, "peak_rss_mib": peak}, f, indent=1)


if __name__ == "__main__":
    main()
