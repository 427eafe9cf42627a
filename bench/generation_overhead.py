#!/usr/bin/env python
"""Overhead of constrained over unconstrained generation, per token, with transformers on CPU.

A randomly initialised GPT-2-architecture model (built from a config, seeded, no download)
with the Llama 3 tokenizer (``shared/vocabs/llama3-tokenizer.json``: 128,257 ids; the model's
output layer is 128,320 wide, so every mask is padded) runs greedy ``model.generate`` for exactly
``--tokens`` new tokens (``min_new_tokens = max_new_tokens``; the grammars never force EOS), in
the same process, for:

* ``none``: no logits processor (the baseline step time);
* ``gramc``: ``gramc.integrations.transformers.GramcLogitsProcessor`` (eager artifact);
* ``xgrammar``: ``xgrammar.contrib.hf.LogitsProcessor`` (xgrammar's own transformers class);
* ``llguidance``: llguidance ships no transformers ``LogitsProcessor`` class; its documented
  pieces (``llguidance.hf.from_tokenizer``, ``LLMatcher``, ``llguidance.torch``'s
  ``fill_next_token_bitmask`` / ``apply_token_bitmask_inplace``) in a 15-line processor below.

For each, per generated token: the wall time of a step, the time spent inside the processor
(mask computation + applying it to the logits, measured around its ``__call__``), and that
time as a share of the step. Every constrained output is checked with the gramc artifact.
Medians over ``--repeat`` runs after one warm-up run. Single-threaded (torch and the engines).

    python bench/generation_overhead.py                       # both models, both grammars
    python bench/generation_overhead.py --quick               # smoke run
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import importlib.metadata
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is the script's folder)

SHARED_VOCABS = Path(os.environ.get("GRAMC_BENCH_VOCABS") or SHARED / "vocabs")

GRAMMARS = {
    # regular: a run of JSON-ish records; complete after each ", " but never forced to end
    "regex": ("regex", r'(\{"id": [0-9]{1,6}, "name": "[a-z ]{1,20}"\}, )*'),
    # recursive (a PDA for gramc): a run of nested lists of numbers and strings, never forced to end
    "gbnf": ("gbnf", 'root ::= value (", " value)*\n'
                     'value ::= [0-9]{1,4} | "\\"" [a-z]{1,8} "\\"" | "[" ( value ( ", " value )* )? "]"\n'),
}
MODELS = {
    "tiny": dict(n_layer=2, n_embd=64, n_head=2),     # the `gramc demo` / test model
    "small": dict(n_layer=6, n_embd=384, n_head=6),   # ~60M parameters, most in the output layer
}
WIDTH = 128320


def _versions() -> dict:
    out = {}
    for p in ("gramc", "torch", "transformers", "xgrammar", "llguidance", "numpy"):
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = None
    return out


class Timed:
    """Wraps a logits processor and accumulates the time spent in it."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids, scores):
        t0 = time.perf_counter()
        out = self.inner(input_ids, scores)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def make_llguidance_processor(transformers, llg, llt):
    class LlguidanceLogitsProcessor(transformers.LogitsProcessor):
        """Batch-1 processor from llguidance's torch helpers (it ships no LogitsProcessor)."""

        def __init__(self, ll_tokenizer, grammar: str):
            self.matcher = llg.LLMatcher(ll_tokenizer, grammar, log_level=0)
            self.bitmask = llt.allocate_token_bitmask(1, ll_tokenizer.vocab_size)
            self.started = False

        def __call__(self, input_ids, scores):
            if self.started:
                self.matcher.consume_token(int(input_ids[0, -1]))
            self.started = True
            llt.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
            llt.apply_token_bitmask_inplace(scores, self.bitmask)
            return scores

    return LlguidanceLogitsProcessor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per run")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per configuration")
    ap.add_argument("--models", default="tiny,small")
    ap.add_argument("--grammars", default="regex,gbnf")
    ap.add_argument("--engines", default="gramc,xgrammar,llguidance")
    ap.add_argument("--out", default=str(REPO / "bench/results/generation_overhead.json"))
    ap.add_argument("--quick", action="store_true", help="--tokens 24 --repeat 2 --models tiny")
    args = ap.parse_args()
    if args.quick:
        args.tokens, args.repeat, args.models = 24, 2, "tiny"

    import torch
    import transformers

    import gramc
    from gramc.integrations.transformers import GramcLogitsProcessor

    torch.set_num_threads(1)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(SHARED_VOCABS / "llama3-tokenizer.json"))
    vocab = gramc.Vocab.from_hf(tok)
    engines = [e for e in args.engines.split(",") if e]
    peers = {}
    if "xgrammar" in engines:
        try:
            import xgrammar as xgr
            import xgrammar.contrib.hf  # noqa: F401

            info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=WIDTH, stop_token_ids=list(vocab.eos_ids))
            peers["xgrammar"] = (xgr, xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False))
        except Exception as err:  # noqa: BLE001
            print(f"xgrammar unavailable: {err}", file=sys.stderr)
    if "llguidance" in engines:
        try:
            import llguidance as llg
            import llguidance.hf
            import llguidance.torch as llt
            from llguidance.gbnf_to_lark import gbnf_to_lark

            ll_tok = llguidance.hf.from_tokenizer(tok, n_vocab=WIDTH, eos_token=list(vocab.eos_ids)[0])
            peers["llguidance"] = (llg, ll_tok, make_llguidance_processor(transformers, llg, llt), gbnf_to_lark)
        except Exception as err:  # noqa: BLE001
            print(f"llguidance unavailable: {err}", file=sys.stderr)

    # Compile every grammar once per engine (the model does not matter); gramc's per-vocabulary
    # token trie is built beforehand, as the other engines' tokenizer objects are.
    gramc.compile("a", vocab=vocab)
    compiled = {}
    for gname in [g for g in args.grammars.split(",") if g]:
        fmt, source = GRAMMARS[gname]
        t0 = time.perf_counter()
        artifact = gramc.compile(source, format=fmt, vocab=vocab)
        makers = {"none": (0.0, lambda: None),
                  "gramc": (time.perf_counter() - t0, lambda a=artifact: GramcLogitsProcessor(a))}
        if "xgrammar" in peers:
            xgr, compiler = peers["xgrammar"]
            t0 = time.perf_counter()
            cg = compiler.compile_regex(source) if fmt == "regex" else compiler.compile_grammar(source)
            makers["xgrammar"] = (time.perf_counter() - t0, lambda cg=cg: xgr.contrib.hf.LogitsProcessor(cg))
        if "llguidance" in peers:
            llg, ll_tok, proc_cls, gbnf_to_lark = peers["llguidance"]
            t0 = time.perf_counter()
            grammar = llg.grammar_from("regex", source) if fmt == "regex" else \
                llg.grammar_from("lark", gbnf_to_lark(source))
            proc_cls(ll_tok, grammar)  # builds the matcher (llguidance compiles lazily, per mask)
            makers["llguidance"] = (time.perf_counter() - t0, lambda g=grammar: proc_cls(ll_tok, g))
        compiled[gname] = (artifact, makers)

    prompt = torch.tensor([[128000] + tok.encode("Data:", add_special_tokens=False)])
    eos_ids = list(vocab.eos_ids)  # min_new_tokens must hold back every end-of-generation id
    results = []
    for model_name in [m for m in args.models.split(",") if m]:
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(vocab_size=WIDTH, n_positions=512, bos_token_id=128000,
                                      eos_token_id=128001, **MODELS[model_name])
        model = transformers.GPT2LMHeadModel(cfg).eval()
        n_params = sum(p.numel() for p in model.parameters())

        def run(processor):
            kw = {"logits_processor": [processor]} if processor is not None else {}
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                     max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                                     pad_token_id=128001, eos_token_id=eos_ids, **kw)
            return time.perf_counter() - t0, out[0, prompt.shape[1]:].tolist()

        for gname in [g for g in args.grammars.split(",") if g]:
            artifact, makers = compiled[gname]
            order = [e for e in ["none", "gramc", *peers] if e == "none" or (e in engines and e in makers)]
            walls = {e: [] for e in order}
            procs = {e: [] for e in order}
            valid = {e: True for e in order}
            # Interleaved: every repetition runs each engine once, so load changes hit all alike.
            for i in range(args.repeat + 1):
                for engine in order:
                    inner = makers[engine][1]()
                    timed = Timed(inner) if inner is not None else None
                    wall, ids = run(timed)
                    if engine != "none":
                        data = b"".join(vocab.tokens[t] for t in ids if t < vocab.size)
                        ok = artifact.matcher().commit_bytes(data) and len(ids) == args.tokens
                        if not ok and valid[engine]:
                            print(f"  {engine}: output not in the grammar: {data[:120]!r}", file=sys.stderr)
                        valid[engine] &= bool(ok)
                    if i:  # the first round warms caches up
                        walls[engine].append(wall)
                        procs[engine].append(timed.seconds if timed else 0.0)
            base_ms = 1000 * statistics.median(walls["none"]) / args.tokens
            for engine in order:
                step_ms = 1000 * statistics.median(walls[engine]) / args.tokens
                proc_ms = 1000 * statistics.median(procs[engine]) / args.tokens
                row = dict(model=model_name, params=n_params, grammar=gname, engine=engine, step_ms=step_ms,
                           proc_ms=proc_ms, share=proc_ms / step_ms, overhead_ms=step_ms - base_ms,
                           compile_s=makers[engine][0], valid=valid[engine])
                results.append(row)
                print(f"  {model_name} {gname:6} {engine:11} {step_ms:7.2f} ms/token, processor {proc_ms:6.3f} ms "
                      f"({100 * row['share']:4.1f}% of the step), {row['overhead_ms']:+.2f} ms vs none, "
                      f"compile {row['compile_s']:.2f}s, valid={valid[engine]}", flush=True)
    doc = dict(machine=dict(python=platform.python_version(), platform=platform.platform(),
                            cpus=os.cpu_count(), threads=1),
               versions=_versions(), tokens=args.tokens, repeat=args.repeat, results=results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print("\n" + markdown(doc))


def markdown(doc: dict) -> str:
    lines = ["| model | grammar | engine | ms / token | processor ms / token | share of step | overhead vs none | compile |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        model = f"{r['model']} ({r['params'] / 1e6:.1f}M)"
        if r["engine"] == "none":
            lines.append(f"| {model} | {r['grammar']} | unconstrained | {r['step_ms']:.2f} | - | - | - | - |")
            continue
        lines.append(f"| {model} | {r['grammar']} | {r['engine']}{'' if r['valid'] else ' (INVALID)'} | "
                     f"{r['step_ms']:.2f} | {r['proc_ms']:.3f} | {100 * r['share']:.1f}% | "
                     f"{r['overhead_ms']:+.2f} ms | {r['compile_s']:.2f} s |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
