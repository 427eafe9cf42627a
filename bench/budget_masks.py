#!/usr/bin/env python
"""The cost of budget-aware masks: fill_bitmask with and without a token budget.

``--sample grammars`` (the default): for a few regexes, a GBNF grammar and JSON Schemas (one
recursive: a PDA; one with a long string: a counted DFA) bound to the bundled GPT-2 vocabulary, token sequences are drawn once (``gramc.generate`` with random logits and
``finish=True``, so each ends complete), then replayed on the same matchers. At each position
``fill_bitmask`` is timed plain and with a budget, in the same walk:

* ``tight``: the budget is exactly the tokens the sequence still takes (EOS included), so the
  mask is cut wherever any allowed token would not finish in time;
* ``loose``: a budget of 10,000 (nothing is cut: the cost of the check alone).

Each artifact takes the path a decoder runs: compiled ahead of time, saved as a ``.gmask``
and loaded with ``gramc.load``. Every reported figure is per mask (warm: one walk over all
sequences first, left out), single threaded, and the process's peak RSS is printed last; the one-time cost of the first budgeted mask of each artifact (the DFA's token
distances, the PDA's node costs) is reported apart, with the artifact's first plain mask.

``--sample regex,maskbench``: the TBM the issue asks for, on the samples of the mask
benchmarks, drawn by their own loaders: regex_bench's regexes with its examples, and a seeded
sample of ``--n`` MaskBench schemas (maskbench's ``select``) with the texts of their valid
instances in both serialisations, each tokenized by the vocabulary's real tokenizer
(regex_bench's ``VocabCtx``; Llama 3 by default, the MaskBench protocol's). Each grammar takes
the decoder's path (compile, ``.gmask``, ``gramc.load``); each text is replayed with
``fill_bitmask`` timed plain, ``tight`` (the tokens the text still takes, EOS included) and
``loose`` at every position (warm: one untimed replay first). A text the plain mask refuses
somewhere (a validation error of the schema) is left out; a grammar that fails to compile
within ``--compile-s`` is counted apart. One table row per sample and artifact kind, and all.

    python bench/budget_masks.py                 # about a minute
    python bench/budget_masks.py --seqs 5        # smoke run
    python bench/budget_masks.py --sample regex,maskbench --n 40 --seed 0   # ~10 minutes
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gramc
from gramc.bitmask import n_words
from gramc.generation import generate
from gramc.limits import Limits

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]{1,12}@[a-z]{2,8}\\.(com|org)$"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4}},
    "required": ["name", "age", "email"], "additionalProperties": False}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "label": {"type": "string", "maxLength": 10},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
    "required": ["v"], "additionalProperties": False}}}
#: A long string: a counted artifact (the counter's budget distances, periodic stretches).
NOTE = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                        "body": {"type": "string", "minLength": 20, "maxLength": 4000}},
        "required": ["title", "body"], "additionalProperties": False}
GRAMMARS = {
    "regex:email": (r"[a-z0-9._]{1,10}@[a-z]{2,8}\.(com|org|net)", "regex", 24),
    "regex:date": (r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", "regex", 12),
    "regex:words": (r"[a-z]{1,8}( [a-z]{1,8}){0,12}\.", "regex", 24),
    "gbnf:nested": ('root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root', "gbnf", 32),
    "json_schema:person": (json.dumps(SCHEMA), "json_schema", 48),
    "json_schema:tree": (json.dumps(TREE), "json_schema", 48),
    "json_schema:note": (json.dumps(NOTE), "json_schema", 48),
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
            if art.kind != "pda":  # exact: the sequence's own token fits (a PDA's bound may refuse it)
                assert m.mask(budget=left)[t]
            assert m.commit_token(t)
    return times


def loaded(source: str, fmt: str, vocab, compile_s: float = 600.0):
    """``source`` on the decoder's path: compiled, saved as a ``.gmask``, ``gramc.load``ed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grammar.gmask"
        gramc.compile(source, format=fmt, vocab=vocab, limits=Limits(max_compile_seconds=compile_s)).save(path)
        return gramc.load(path, vocab=vocab)


def first_masks(art, row) -> tuple[float, float]:
    """Seconds of a fresh matcher's first plain mask and first budgeted mask (one-time costs)."""
    m = art.matcher()
    t0 = time.perf_counter()
    m.fill_bitmask(row)
    first_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.fill_bitmask(row, budget=LOOSE)
    return first_plain, time.perf_counter() - t0


def pcts(ns: list[int]) -> tuple[float, float]:
    """(p50, p99) in µs."""
    return float(np.percentile(ns, 50)) / 1e3, float(np.percentile(ns, 99)) / 1e3


def run_grammars(args) -> dict:
    """The default run: a few grammars, sequences drawn with finish=True."""
    vocab = gramc.Vocab.gpt2()
    row = np.zeros(n_words(vocab.size), dtype=np.int32)
    results = {}
    print(f"gramc {gramc.__version__}, GPT-2 ({vocab.size:,} ids), {args.seqs} sequences per grammar\n")
    print("| grammar | kind | masks | plain p50 / p99 µs | tight budget p50 / p99 µs | loose budget p50 / p99 µs "
          "| first plain mask ms | first budgeted mask ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, (source, fmt, max_tokens) in GRAMMARS.items():
        art = loaded(source, fmt, vocab)
        first_plain, first_budget = first_masks(art, row)
        seqs = sequences(art, vocab, args.seqs, max_tokens)
        walk(art, seqs, row, timed=False)  # warm every memo, as a server's steady state
        times = walk(art, seqs, row, timed=True)
        summary = {k: pcts(v) for k, v in times.items()}
        results[name] = {"kind": art.kind, "masks": len(times["plain"]), "us": summary,
                         "first_plain_ms": first_plain * 1e3, "first_budget_ms": first_budget * 1e3}
        cells = " | ".join(f"{summary[k][0]:.1f} / {summary[k][1]:.1f}" for k in ("plain", "tight", "loose"))
        print(f"| {name} | {art.kind} | {len(times['plain'])} | {cells} | {first_plain * 1e3:.1f} "
              f"| {first_budget * 1e3:.1f} |")
    return results


def sample_grammars(sample: str, n: int, seed: int, ctx) -> list[tuple[str, str, str, list[list[int]]]]:
    """(name, source, format, tokenized texts) of a benchmark sample, by its own loader."""
    if sample == "regex":
        from regex_bench import EXAMPLES, REGEXES

        return [(name, regex, "regex", [ctx.tokenize(e) for e in EXAMPLES[name]])
                for name, regex in list(REGEXES.items())[:n]]
    from maskbench import load_corpus, select, serialisations

    out = []
    for rec in select(load_corpus(), limit=n, seed=seed):
        texts = [ctx.tokenize(text) for test in rec["tests"] if test["valid"]
                 for _, text in serialisations(test["data"])]
        out.append((rec["id"], json.dumps(rec["schema"]), "json_schema", texts))
    return out


def accepted(art, texts: list[list[int]], eos: list[int]) -> list[list[int]]:
    """The texts the plain masks take to the end, with EOS appended."""
    out = []
    for ids in texts:
        m = art.matcher(max_rollback=0)
        if all(m.mask()[t] and m.commit_token(t) for t in ids) and m.mask()[eos[0]]:
            out.append(ids + [eos[0]])
    return out


def run_samples(args) -> dict:
    """TBM with and without a budget on the regex and MaskBench samples (module doc)."""
    import warnings

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from regex_bench import VocabCtx

    warnings.simplefilter("ignore")  # over-approximation warnings of MaskBench schemas
    ctx = VocabCtx(args.vocab)
    vocab = ctx.vocab
    row = np.zeros(n_words(vocab.size), dtype=np.int32)
    results: dict = {}
    print(f"gramc {gramc.__version__}, {args.vocab} ({vocab.size:,} ids), samples {args.sample}, n {args.n}, "
          f"seed {args.seed}\n")
    for sample in args.sample.split(","):
        per: list[dict] = []
        failed: list[tuple[str, str]] = []
        for name, source, fmt, texts in sample_grammars(sample, args.n, args.seed, ctx):
            t0 = time.perf_counter()
            try:
                art = loaded(source, fmt, vocab, args.compile_s)
            except gramc.GramcError as e:
                failed.append((name, f"{type(e).__name__}: {str(e)[:120]}"))
                continue
            compile_s = time.perf_counter() - t0
            first_plain, first_budget = first_masks(art, row)
            seqs = accepted(art, texts, ctx.eos)
            if not seqs:
                failed.append((name, "no valid instance" if not texts else
                               f"the plain masks refuse all {len(texts)} valid texts (a validation error)"))
                continue
            walk(art, seqs, row, timed=False)
            times = walk(art, seqs, row, timed=True)
            per.append({"name": name, "kind": art.kind, "texts": len(seqs), "times": times, "compile_s": compile_s,
                        "first_plain_ms": first_plain * 1e3, "first_budget_ms": first_budget * 1e3})
            print(f"  {sample} {name}: {art.kind}, {len(seqs)} texts, {len(times['plain'])} masks, "
                  f"compile+save+load {compile_s:.1f} s, first budgeted mask {first_budget * 1e3:.1f} ms",
                  file=sys.stderr, flush=True)
        results[sample] = {"grammars": [{k: v for k, v in p.items() if k != "times"} | {
            "us": {k: pcts(v) for k, v in p["times"].items()}} for p in per], "failed": failed}
        results[sample]["rows"] = table_rows(sample, per, failed)
    print("| sample | kind | grammars | masks | plain p50 / p99 µs | tight budget p50 / p99 µs "
          "| loose budget p50 / p99 µs | first budgeted mask ms p50 / max |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for sample in results.values():
        for line in sample["rows"]:
            print(line)
    for name, r in results.items():
        for gname, why in r["failed"]:
            print(f"\n{name}: {gname} left out: {why}")
    return results


def table_rows(sample: str, per: list[dict], failed: list) -> list[str]:
    """One markdown row per artifact kind of ``per``, then one for all of them."""
    lines = []
    kinds = sorted({p["kind"] for p in per})
    for kind in kinds + (["all"] if len(kinds) > 1 else []):
        group = [p for p in per if kind in ("all", p["kind"])]
        cells = []
        for k in ("plain", "tight", "loose"):
            ns = [t for p in group for t in p["times"][k]]
            cells.append("{:.1f} / {:.1f}".format(*pcts(ns)))
        first = [p["first_budget_ms"] for p in group]
        masks = sum(len(p["times"]["plain"]) for p in group)
        lines.append(f"| {sample} | {kind} | {len(group)} | {masks:,} | {' | '.join(cells)} "
                     f"| {np.percentile(first, 50):.1f} / {max(first):.1f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", default="grammars",
                    help="grammars (the default), or regex and/or maskbench, comma-separated")
    ap.add_argument("--seqs", type=int, default=20, help="--sample grammars: token sequences per grammar")
    ap.add_argument("--n", type=int, default=40, help="samples: regexes / schemas at most")
    ap.add_argument("--seed", type=int, default=0, help="maskbench: the sample's seed")
    ap.add_argument("--vocab", default="llama3", choices=["gpt2", "llama3"], help="samples: the vocabulary")
    ap.add_argument("--compile-s", type=float, default=60.0, help="samples: compile time limit per grammar")
    ap.add_argument("--out", default="", help="write the raw results as JSON here")
    args = ap.parse_args()
    bad = set(args.sample.split(",")) - {"grammars", "regex", "maskbench"}
    if bad or ("grammars" in args.sample and args.sample != "grammars"):
        ap.error(f"--sample takes grammars, or regex and/or maskbench: got {args.sample!r}")
    results = run_grammars(args) if args.sample == "grammars" else run_samples(args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"\npeak RSS {peak:.0f} MiB (compiles included)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results, "peak_rss_mib": peak}, f, indent=1)


if __name__ == "__main__":
    main()
