#!/usr/bin/env python
"""Mask cost of the members condition: one object of N string properties (2 required),
compiled lazily with schema order and with any order (above the bound: checked by the
matcher), a document with its members shuffled (schema order: in order) walked token by
token; every token must be allowed. Prints TBM percentiles per mode.

Usage::

    python bench/members_tbm.py --vocab gpt2 --properties 20
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

import gramc
from gramc.compiler.pipeline import CompileOptions


def greedy(vocab, data: bytes) -> list[int]:
    ids = {t: i for i, t in enumerate(vocab.tokens) if i not in vocab.special_ids}
    longest = max(len(t) for t in ids)
    out, i = [], 0
    while i < len(data):
        n = next(n for n in range(min(longest, len(data) - i), 0, -1) if data[i:i + n] in ids)
        out.append(ids[data[i:i + n]])
        i += n
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="gpt2")
    ap.add_argument("--properties", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    vocab = gramc.load_vocab(args.vocab)
    props = {f"field_{i}": {"type": "string"} for i in range(args.properties)}
    schema = {"type": "object", "properties": props, "required": ["field_3", f"field_{args.properties - 3}"]}
    for order in ("schema", "any"):
        t0 = time.perf_counter()
        art = gramc.compile(json.dumps(schema), format="json_schema", vocab=vocab, lazy=True,
                            options=CompileOptions(json_property_order=order))
        compile_s = time.perf_counter() - t0
        keys = list(props)
        if order == "any":
            random.Random(args.seed).shuffle(keys)
        ids = greedy(vocab, json.dumps({k: f"value {k}" for k in keys}).encode())
        m = art.matcher()
        row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
        times = []
        for t in ids:
            a = time.perf_counter()
            m.fill_bitmask(row)
            times.append(time.perf_counter() - a)
            assert (int(row.view(np.uint32)[t >> 5]) >> (t & 31)) & 1, (order, t)
            assert m.commit_token(t)
        assert m.is_complete()
        us = np.asarray(times) * 1e6
        print(f"{order}: {art.kind}, compile {compile_s:.2f} s, {len(us)} masks, TBM p50 {np.percentile(us, 50):,.0f} us, "
              f"p90 {np.percentile(us, 90):,.0f}, p99 {np.percentile(us, 99):,.0f}, max {us.max():,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
