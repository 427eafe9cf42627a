#!/usr/bin/env python
"""Does soft lookahead finish more often than hard masking? A tiny GPT-2, several grammars.

A 2-layer, 64-wide GPT-2 built in code from random weights (seeded; no download), the bundled
GPT-2 vocabulary, and a regex, a recursive GBNF grammar and three JSON Schemas (one recursive).
For each grammar and seed, one sampled generation (temperature 1, prompt: the BOS id) per
method, all in one run, with a ``max_tokens`` short enough that output is often cut:

* ``hard``: plain masking; ``finish``: budget-aware masks (``finish=True``);
* ``count``: count-based weighting (``lookahead=8, depth=2, lookahead_weighting="count"``);
* ``model K=2/4/8``: model-weighted lookahead (``depth=4``), rows from
  ``gramc.integrations.transformers.logits_fn`` (KV cache cut back for each rollout).

Reported per method and grammar: completion rate (the grammar accepts the output), validity
rate (an independent checker accepts it: ``re``, the test Earley oracle, ``json`` +
``jsonschema``), tokens per output, model calls per token and wall time per token.

    python bench/lookahead.py                    # about 6 minutes on 2 cores
    python bench/lookahead.py --seeds 2          # smoke run
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import re
import sys
import time
from pathlib import Path

import jsonschema

import gramc
from gramc.generation import generate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from earley import EarleyOracle  # noqa: E402

from gramc.compiler.frontends.gbnf import parse_gbnf  # noqa: E402

GPT2_EOS = 50256
WORDS = r"[a-z]{1,6}( [a-z]{1,6}){0,3}\."
NESTED = 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root'
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
TAGS = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["ok", "tags"], "additionalProperties": False}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {
    "type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": False}}}
#: name: (source, format, max_tokens)
GRAMMARS = {
    "regex words": (WORDS, "regex", 8),
    "gbnf nested": (NESTED, "gbnf", 10),
    "schema person": (json.dumps(PERSON), "json_schema", 12),
    "schema tags": (json.dumps(TAGS), "json_schema", 12),
    "schema tree": (json.dumps(TREE), "json_schema", 12),
}
METHODS = {
    "hard": dict(),
    "finish": dict(finish=True),
    "count K=8 d=2": dict(lookahead=8, depth=2, lookahead_weighting="count"),
    "model K=2 d=4": dict(lookahead=2, depth=4),
    "model K=4 d=4": dict(lookahead=4, depth=4),
    "model K=8 d=4": dict(lookahead=8, depth=4),
}


def build_model():
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=50304, n_positions=256,
                                  bos_token_id=GPT2_EOS, eos_token_id=GPT2_EOS)
    return transformers.GPT2LMHeadModel(cfg).eval()


def checker(name: str, source: str, fmt: str):
    """An independent acceptor of whole outputs for the grammar."""
    if fmt == "regex":
        return lambda data: re.fullmatch(source, data.decode("utf-8", "replace")) is not None
    if fmt == "gbnf":
        oracle = EarleyOracle(parse_gbnf(source))
        return oracle.fullmatch
    schema = json.loads(source)

    def valid(data: bytes) -> bool:
        try:
            jsonschema.validate(json.loads(data), schema)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    return valid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=None, help="write the raw results as JSON here")
    args = ap.parse_args()

    import torch
    import transformers

    from gramc.integrations.transformers import logits_fn

    torch.set_num_threads(1)
    model = build_model()
    vocab = gramc.load_vocab("gpt2")
    rows = []
    for gname, (source, fmt, max_tokens) in GRAMMARS.items():
        artifact = gramc.compile(source, format=fmt, vocab=vocab)
        accepts = checker(gname, source, fmt)
        for mname, kw in METHODS.items():
            stats = dict(complete=0, valid=0, tokens=0, calls=0, seconds=0.0)
            for seed in range(args.seeds):
                f = logits_fn(model)
                t0 = time.perf_counter()
                r = generate(artifact, f, vocab=vocab, prompt=[GPT2_EOS], max_tokens=max_tokens,
                             temperature=1.0, seed=seed, **kw)
                stats["seconds"] += time.perf_counter() - t0
                stats["complete"] += r.complete
                stats["valid"] += accepts(r.data)
                stats["tokens"] += len(r.tokens)
                stats["calls"] += r.model_calls
            row = dict(grammar=gname, method=mname, max_tokens=max_tokens, seeds=args.seeds, **stats)
            rows.append(row)
            n, tok = args.seeds, max(stats["tokens"], 1)
            print(f"| {gname} | {mname} | {max_tokens} | {stats['complete']}/{n} | {stats['valid']}/{n} "
                  f"| {stats['tokens'] / n:.1f} | {stats['calls'] / tok:.1f} | {1000 * stats['seconds'] / tok:.1f} |",
                  flush=True)
    print("\ntotals per method (all grammars):")
    for mname in METHODS:
        sel = [r for r in rows if r["method"] == mname]
        n = sum(r["seeds"] for r in sel)
        tok = max(sum(r["tokens"] for r in sel), 1)
        print(f"| {mname} | {sum(r['complete'] for r in sel)}/{n} | {sum(r['valid'] for r in sel)}/{n} "
              f"| {tok / n:.1f} | {sum(r['calls'] for r in sel) / tok:.1f} "
              f"| {1000 * sum(r['seconds'] for r in sel) / tok:.1f} |")
    if args.out:
        meta = dict(torch=torch.__version__, transformers=transformers.__version__,
                    python=sys.version.split()[0], date=time.strftime("%Y-%m-%d"))
        Path(args.out).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
