#!/usr/bin/env python
"""Token-mask time in a tool-calling structural tag: free text against arguments, gramc against
its own plain schema, xgrammar's structural tag and llguidance's Lark equivalent.

The grammar is the Hermes / Qwen tool call of ``gramc demo --tools`` over the tools of
examples/tools.json (objects made strict, as structural tags compile them): free text, then any
number of ``<tool_call>\\n{"name": ..., "arguments": ARGS}\\n</tool_call>`` blocks with free
text between them (``triggered_tags``). Documents are drawn once with a fixed seed (sentences of
common words, one or two calls with random arguments, ``json.dumps`` spacing, non-ASCII text
unescaped: xgrammar 0.2.9 refuses any escape in a string with ``maxLength``) and tokenized with
the model's real tokenizer; every engine replays the same token ids. Before each token the
packed mask is filled (the engines' public fill calls, one thread) and timed; each time is
filed under the region of the next byte: ``free`` (free text, before, between and after calls),
``args`` (the arguments' JSON text) or ``delim`` (the tags' begin and end strings). The plain
schema row replays the tokenization of each call's arguments alone against
``gramc.compile(parameters, format="json_schema")``. One warm walk over all documents runs
first and is not timed; every engine must accept every token (checked).

    python bench/structural_tags.py                    # Llama 3 (../shared/vocabs), ~2 minutes
    python bench/structural_tags.py --vocab gpt2 --docs 5
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import regex_bench as rb  # noqa: E402  (first: it sets the thread counts)

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

import gramc  # noqa: E402
from gramc.cli.tool_calls import TRIGGER, load_tools  # noqa: E402

TOOLS = rb.REPO / "examples" / "tools.json"
WORDS = ("the of and to in is you that it he was for on are as with his they at be this from have or "
         "one had by word but not what all were we when your can said there use an each which she do how "
         "their if will up other about out many then them these so some her would make like him into time "
         "has look two more write go see number no way could people my than first water been call who oil "
         "its now find long down day did get come made may part weather Paris Tokyo sum").split()
CITIES = ["Paris", "Tokyo", "São Paulo", "New York", "Zürich", "Oslo", "Cairo", "Lima"]


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` where an object declares properties
    without saying (how structural tags compile their schemas)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    return [strict(v) for v in schema] if isinstance(schema, list) else schema


def begin(name: str) -> str:
    return f'{TRIGGER}\n{{"name": {json.dumps(name)}, "arguments": '


END = "}\n</tool_call>"


def structural_tag(tools: list[dict]) -> dict:
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [TRIGGER],
        "tags": [{"type": "tag", "begin": begin(t["name"]),
                  "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": END}
                 for t in tools]}}


def lark(tools: list[dict]) -> str:
    """llguidance's idiom for free text with tool calls (its docs/syntax.md, "Tool calling"):
    a lazy lexeme of text up to the trigger, then the rest of a call."""
    calls = " | ".join(f"call_{i}" for i in range(len(tools)))
    lines = ["start: (head (" + calls + "))* TEXT", "TEXT: /(.|\\n)*/", f"head[lazy]: TEXT {json.dumps(TRIGGER)}"]
    for i, t in enumerate(tools):
        lines.append(f"call_{i}: {json.dumps(begin(t['name'])[len(TRIGGER):])} args_{i} {json.dumps(END)}")
        lines.append(f"args_{i}: %json {json.dumps(t['parameters'])}")
    return "\n".join(lines) + "\n"


def arguments(name: str, rng: random.Random) -> dict:
    if name == "get_weather":
        return {"city": rng.choice(CITIES), "unit": rng.choice(["celsius", "fahrenheit"])}
    return {"a": rng.randint(-100, 100), "b": rng.randint(-100, 100)}


def documents(tools: list[dict], n: int, seed: int = 0) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """``n`` documents, each with its regions: (start byte, end byte, region name)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts: list[tuple[str, str]] = []

        def text() -> None:
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            parts.append((words[0].upper() + words[1:] + rng.choice([". ", ".\n", "? "]), "free"))

        text()
        for _ in range(rng.randint(1, 2)):
            tool = rng.choice(tools)
            parts += [(begin(tool["name"]), "delim"), (json.dumps(arguments(tool["name"], rng), ensure_ascii=False), "args"), (END, "delim")]
            if rng.random() < 0.7:
                text()
        doc, regions, pos = "", [], 0
        for s, region in parts:
            size = len(s.encode())
            regions.append((pos, pos + size, region))
            doc, pos = doc + s, pos + size
        out.append((doc, regions))
    return out


def region_of(offset: int, regions: list[tuple[int, int, str]]) -> str:
    """The region of the byte at ``offset`` (the end of the document: free text may follow)."""
    for a, b, name in regions:
        if a <= offset < b:
            return name
    return "free"


class Run:
    """One engine's grammar: a fresh matcher per walk, its mask fill and its commit."""

    def __init__(self, name: str, new: Callable[[], Any], fill: Callable[[Any], Callable[[], Any]],
                 commit: Callable[[Any], Callable[[int], Any]]):
        self.name, self.new, self.fill, self.commit = name, new, fill, commit


def engines(ctx: rb.VocabCtx, tools: list[dict], which: list[str]) -> tuple[list[Run], dict[str, float]]:
    compile_s: dict[str, float] = {}
    out = []
    row = np.zeros(ctx.words, dtype=np.int32)
    stag = json.dumps(structural_tag(tools))
    if "gramc" in which:
        t0 = time.perf_counter()
        art = gramc.compile(stag, format="structural_tag", vocab=ctx.vocab)
        compile_s["gramc"] = time.perf_counter() - t0
        out.append(Run(f"gramc structural tag ({art.kind})", lambda: art.matcher(max_rollback=0),
                       lambda m: functools.partial(m.fill_bitmask, row), lambda m: m.commit_token))
    if "xgrammar" in which:
        xe = rb.XgrammarEngine()
        xe.setup(ctx)
        t0 = time.perf_counter()
        cg = xe.compiler.compile_structural_tag(stag)
        compile_s["xgrammar"] = time.perf_counter() - t0
        bm = xe.xgr.allocate_token_bitmask(1, ctx.size)
        out.append(Run("xgrammar structural tag", lambda: xe.xgr.GrammarMatcher(cg),
                       lambda m: functools.partial(m.fill_next_token_bitmask, bm), lambda m: m.accept_token))
    if "llguidance" in which:
        le = rb.LlguidanceEngine()
        le.setup(ctx)
        t0 = time.perf_counter()
        pristine = le.llg.LLMatcher(le.tok, le.llg.grammar_from("lark", lark(tools)), log_level=0)
        if pristine.is_error():
            raise RuntimeError(pristine.get_error())
        compile_s["llguidance"] = time.perf_counter() - t0
        out.append(Run("llguidance Lark", pristine.deep_copy,
                       lambda m: functools.partial(le.llnp.fill_next_token_bitmask, m, row[None, :]),
                       lambda m: m.consume_token))
    return out, compile_s


def walk(run: Run, docs: list[tuple[list[int], list[str]]], eos: int) -> dict[str, list[int]]:
    """Replay every document (EOS last); per region the ns of each mask fill."""
    times: dict[str, list[int]] = {}
    clock = time.perf_counter_ns
    for ids, regions in docs:
        m = run.new()
        fill, commit = run.fill(m), run.commit(m)
        for t, region in zip([*ids, eos], regions):
            t0 = clock()
            fill()
            dt = clock() - t0
            times.setdefault(region, []).append(dt)
            if commit(t) is False:
                raise AssertionError(f"{run.name} refused token {t} ({region})")
    return times


def tokenized(ctx: rb.VocabCtx, docs) -> list[tuple[list[int], list[str]]]:
    """Token ids of each document and the region of the mask before each (EOS included)."""
    out = []
    for text, regions in docs:
        ids = ctx.tokenize(text)
        offsets, pos = [], 0
        for t in ids:
            offsets.append(pos)
            pos += len(ctx.vocab.tokens[t])
        out.append((ids, [region_of(o, regions) for o in [*offsets, pos]]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="llama3", choices=["llama3", "gpt2"])
    ap.add_argument("--docs", type=int, default=40, help="documents (each one or two calls)")
    ap.add_argument("--engines", default="gramc,xgrammar,llguidance")
    ap.add_argument("--out", default="", help="write the raw percentiles as JSON here")
    args = ap.parse_args()
    ctx = rb.VocabCtx(args.vocab)
    tools = [dict(t, parameters=strict(t["parameters"])) for t in load_tools(TOOLS)]
    docs = documents(tools, args.docs)
    seqs = tokenized(ctx, docs)
    plain_seqs = {t["name"]: [] for t in tools}
    for text, regions in docs:
        name = None
        for a, b, region in regions:
            if region == "delim" and text.encode()[a:b].startswith(TRIGGER.encode()):
                name = json.loads(text.encode()[a + len(TRIGGER):b].decode() + "0}")["name"]
            elif region == "args":
                ids = ctx.tokenize(text.encode()[a:b].decode())
                plain_seqs[name].append((ids, ["args"] * (len(ids) + 1)))
    runs, compile_s = engines(ctx, tools, args.engines.split(","))
    eos = ctx.eos[0]
    results: dict[str, dict[str, tuple[float, float, int]]] = {}
    for run in runs:
        walk(run, seqs, eos)
        results[run.name] = {k: _pcts(v) for k, v in walk(run, seqs, eos).items()}
    if "gramc" in args.engines.split(","):
        plain: dict[str, list[int]] = {}
        for t in tools:
            art = gramc.compile(json.dumps(t["parameters"]), format="json_schema", vocab=ctx.vocab)
            row = np.zeros(ctx.words, dtype=np.int32)
            run = Run("", lambda: art.matcher(max_rollback=0), lambda m: functools.partial(m.fill_bitmask, row),
                      lambda m: m.commit_token)
            walk(run, plain_seqs[t["name"]], eos)
            plain.setdefault("args", []).extend(walk(run, plain_seqs[t["name"]], eos)["args"])
        results["gramc plain schemas (arguments alone)"] = {k: _pcts(v) for k, v in plain.items()}
    n_masks = sum(len(r) for _, r in seqs)
    print(f"gramc {gramc.__version__}, {args.vocab} ({ctx.size:,} ids), {args.docs} documents, {n_masks} masks "
          f"per engine; compile s: " + ", ".join(f"{k} {v:.2f}" for k, v in compile_s.items()) + "\n")
    print("| engine | free text p50 / p99 µs | arguments p50 / p99 µs | begin/end p50 / p99 µs |")
    print("|---|---:|---:|---:|")
    for name, by in results.items():
        cells = [f"{by[r][0]:.2f} / {by[r][1]:.2f} ({by[r][2]})" if r in by else "—" for r in ("free", "args", "delim")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n(n) = masks in the region")
    if args.out:
        Path(args.out).write_text(json.dumps({"vocab": args.vocab, "docs": args.docs, "compile_s": compile_s,
                                              "results": results}, indent=1))


def _pcts(ns: list[int]) -> tuple[float, float, int]:
    return float(np.percentile(ns, 50)) / 1e3, float(np.percentile(ns, 99)) / 1e3, len(ns)


if __name__ == "__main__":
    main()
