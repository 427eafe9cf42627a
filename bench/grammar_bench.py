#!/usr/bin/env python
"""Context-free grammar token-mask benchmark: gramc against xgrammar and llguidance.

For each vocabulary (GPT-2, Llama 3) and each grammar (llama.cpp's ``json.gbnf`` and
``arithmetic.gbnf``) this measures, single-threaded, per engine:

* compile time: GBNF source -> ready matcher (best and median of ``--repeat``), with the engine's
  per-vocabulary object built beforehand (reported as "setup");
* artifact size and load time, where the engine can serialise its compiled form;
* per-token mask time (into a preallocated packed 32-bit bitmask) and commit time while walking
  real tokenisations of matching documents, in two regimes:

  - **cold**: the first walk over each document, on an artifact compiled just for that walk
    (gramc memoises masks per Earley configuration, XGrammar and llguidance have their own
    caches, so the first walk is the fair first-use comparison);
  - **warm**: the same walk repeated ``--reps`` times on the same compiled artifact, a new
    matcher each time (caches kept by the artifact stay warm).

In passing it checks correctness: every engine must allow every next token of each document
(and EOS at the end); at every step of the cold walk each engine's allowed set is compared with
gramc's, and the first warm walk is compared with the engine's own cold walk.

The engine set-up (vocabulary objects, tokenizers, helpers) is imported from ``regex_bench.py``.

Usage::

    python bench/grammar_bench.py --vocab all --out bench/results/grammar.json
    python bench/grammar_bench.py --quick            # smoke run
    python bench/grammar_bench.py --from-json bench/results/grammar.json   # re-render tables/plot
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# regex_bench sets OMP/RAYON/... thread counts to 1 before numpy and the peers are imported.
import regex_bench as rb  # first: it sets the thread counts
from regex_bench import (
    GramcEngine,
    LlguidanceEngine,
    VocabCtx,
    XgrammarEngine,
    _check_eos_commit,
    _check_step,
    _fmt,
    _ms_summary,
    _ratio,
    _stats_us,
    _timed,
    machine_info,
    perf_ns,
    preimport,
    timer_overhead_us,
    tok_repr,
)

# isort: split
import argparse
import functools
import gc
import json
import os
import random
import re
import time
import traceback

import numpy as np

import gramc

REPO = rb.REPO
GBNF_DIR = Path(os.environ.get("GRAMC_BENCH_GBNF") or rb.SHARED / "corpora" / "gbnf")

# --------------------------------------------------------------------------- workload: documents


class Num(str):
    """A JSON number written exactly as given (json.gbnf restricts exponents: see below)."""


class Esc(str):
    """A JSON string written with \\uXXXX escapes for every non-ASCII character."""


def _scalar(v) -> str:
    if isinstance(v, Num):
        return str(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):  # escapes \" \\ \n \t \b \f and control chars as \u00XX
        return json.dumps(v, ensure_ascii=isinstance(v, Esc))
    raise TypeError(type(v))


def dump_json(v, style: str, depth: int = 0) -> str:
    """Serialise ``v`` in one of the whitespace styles json.gbnf allows (its ``ws`` is empty, one
    space, or a newline and up to 20 spaces/tabs): ``indent2``, ``tabs``, ``spaced``, ``min``."""
    if not isinstance(v, (dict, list)):
        return _scalar(v)
    o, c = ("{", "}") if isinstance(v, dict) else ("[", "]")
    if not v:
        return o + c
    if style in ("indent2", "tabs"):
        unit = "  " if style == "indent2" else "\t"
        nl, nl_end, sep, colon = "\n" + unit * (depth + 1), "\n" + unit * depth, ",", ": "
    else:
        nl = nl_end = ""
        sep, colon = (", ", ": ") if style == "spaced" else (",", ":")
    if isinstance(v, dict):
        parts = [f"{_scalar(k)}{colon}{dump_json(x, style, depth + 1)}" for k, x in v.items()]
    else:
        parts = [dump_json(x, style, depth + 1) for x in v]
    return o + nl + (sep + nl).join(parts) + nl_end + c


# json.gbnf's number: ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})?
# i.e. at most 16 integer digits, and an exponent whose digits after the first are 1-9 only
# ("e10", "e+20", "e-10" do not match; "e23", "E+9", "e-7", "e-05" do; Python's repr of 1e20 is
# "1e+20"). Hence numbers are written by hand.
_ORDER = {  # an order record, 2-space indent
    "id": "ord_7f3a9c", "status": "shipped", "created": "2024-03-17T09:41:07Z",
    "customer": {"name": "Zoë Ångström", "vip": True,
                 "address": {"street": "12 Rue de l'Église", "city": "Montréal",
                             "geo": [Num("45.5088"), Num("-73.5878")]},
                 "note": "Ring twice.\nLeave at the \"back\" door\tif nobody answers."},
    "items": [
        {"sku": "KB-101", "title": "Keyboard — 60% layout", "qty": 2, "price": Num("49.99"),
         "discount": Num("-5.0"), "tags": ["peripherals", "ergonomic"]},
        {"sku": "MS-204", "title": Esc("Souris sans fil (édition spéciale)"), "qty": 1,
         "price": Num("24.5"), "discount": Num("0"), "tags": []},
        {"sku": "CB-330", "title": "USB-C cable 2m", "qty": 3, "price": Num("7.25"),
         "dims_m": [Num("2.0"), Num("4e-3"), Num("4E-3")]},
    ],
    "totals": {"subtotal": Num("145.23"), "tax_rate": Num("0.14975"), "total": Num("166.98"),
               "currency": "CAD"},
    "flags": {"gift": False, "fragile": None},
    "path": "C:\\orders\\2024\\03\\ord_7f3a9c.json",
}

_STATIONS = {  # measurement metadata, tab indent
    "dataset": "Ελληνικά σταθμοί / 日本の観測所", "version": Num("3.2"), "schema": 7,
    "stations": [
        {"name": "Αθήνα", "lat": Num("37.9838"), "lon": Num("23.7275"), "alt_m": 70,
         "readings": [Num("21.5"), Num("-0.3"), Num("1.25e2"), Num("6.02E+23"), Num("-1.5e-7")]},
        {"name": "東京", "lat": Num("35.6762"), "lon": Num("139.6503"), "alt_m": 40,
         "readings": [Num("18.25"), Num("0.0"), Num("-12"), Num("9999999999999999"), Num("3e5")]},
        {"name": Esc("Reykjavík ❄"), "lat": Num("64.1466"), "lon": Num("-21.9426"), "alt_m": 0,
         "readings": [Num("-4.75"), Num("-0.001"), Num("2.5E-3"), Num("1e+9"), Num("0.5")]},
    ],
    "units": {"temperature": "°C", "pressure": "hPa", "wind": "m/s", "emoji": "🌡️ ☔ 🌬️"},
    "matrix": [[1, 0, 0], [0, 1, 0], [Num("0.5"), Num("-0.5"), 1]],
    "empty": {"list": [], "object": {}},
    "ok": True, "checked_by": None,
}

_EVENTS = {  # log events, minified
    "service": "auth-gateway", "host": "node-17.eu-west", "pid": 48213,
    "events": [
        {"t": Num("1710668467.125"), "lvl": "INFO", "msg": "user \"admin\" logged in from 10.0.3.7",
         "ctx": {"session": "a1b2c3d4", "mfa": True, "latency_ms": Num("12.75")}},
        {"t": Num("1710668468.5"), "lvl": "WARN", "msg": "retrying request\n\tattempt 2/5 (backoff 0.25s)",
         "ctx": {"retries": 2, "backoff": Num("2.5e-1"), "path": "/api/v2/tokens?scope=read\\write"}},
        {"t": Num("1710668470.001"), "lvl": "ERROR",
         "msg": Esc("échec de la vérification: « jeton expiré » — code 401"),
         "ctx": {"code": -401, "fatal": False, "trace": ["auth.py:88", "jwt.py:212", "core.py:1203"]}},
        {"t": Num("1710668471"), "lvl": "DEBUG", "msg": "cache stats",
         "ctx": {"hits": 91234, "misses": 877, "ratio": Num("0.99048"), "evicted": [],
                 "sizes": [Num("1.5E+6"), Num("-0.0"), Num("7e-5")]}},
        {"t": Num("1710668472.75"), "lvl": "INFO", "msg": "bye \u263a \u00e9\u00e8 \\o/ \u0007", "ctx": {}},
    ],
    "summary": {"count": 5, "errors": 1, "first": Num("1710668467.125"), "ok": None},
}


def arithmetic_doc(target: int = 1000, seed: int = 1234) -> str:
    """Lines of arithmetic.gbnf: ``expr "=" ws term "\\n"``, where a term carries its trailing
    ``ws`` but an operator is followed directly by a term (no space after ``+``)."""
    rng = random.Random(seed)
    idents = ["x", "y", "z", "alpha", "beta_2", "rate", "n0", "total", "qty", "price", "tax_rate", "k9"]

    def ws():
        return rng.choice(["", "", " ", " ", "  ", "\t"])

    def term(d):
        r = rng.random()
        if d > 0 and r < 0.25:
            return "(" + ws() + expr(d - 1) + ")" + ws()
        if r < 0.6:
            return rng.choice(idents) + ws()
        return str(rng.choice([0, 1, 2, 3, 7, 10, 12, 42, 100, 255, 1024, 65536])) + ws()

    def expr(d):
        s = term(d)
        for _ in range(rng.randint(0, 3)):
            s += rng.choice("+-*/") + term(d)
        return s

    lines: list[str] = []
    while sum(map(len, lines)) < target:
        lines.append(expr(2) + "=" + ws() + term(1).rstrip(" \t") + "\n")
    return "".join(lines)


GRAMMARS = {"json": "json.gbnf", "arithmetic": "arithmetic.gbnf"}

DOCUMENTS = {
    "json": [("order-indent2", dump_json(_ORDER, "indent2") + "\n"),
             ("stations-tabs", dump_json(_STATIONS, "tabs")),
             ("events-minified", dump_json(_EVENTS, "min"))],
    "arithmetic": [("lines", arithmetic_doc())],
}

# --------------------------------------------------------------------------- grammar sources


def xgrammar_source(src: str) -> tuple[str, list[str]]:
    """What XGrammar's EBNF dialect needs changed in a llama.cpp GBNF file (and nothing else)."""
    notes = []
    # An empty first alternative (`ws ::= | " " | ...`) is a parse error in XGrammar
    # ("Expect element, but got |"); it spells the empty string "".
    out, n = re.subn(r"::=([ \t]*)\|", r'::=\1"" |', src)
    if n:
        notes.append(f'empty first alternative `::= |` written as `::= "" |` ({n}x)')
    return out, notes


# llguidance reads GBNF through its own converter (llguidance.gbnf_to_lark, used by
# grammar_from("gbnf", ...)). The converter turns every rule whose body is all terminals into a
# Lark *terminal* (a lexeme, matched greedily by llguidance's lexer). For arithmetic.gbnf this
# puts the trailing `ws` ([ \t\n]*) inside IDENT/NUM, so the newline that must end each line is
# swallowed by the lexeme and no second line can start (measured: refused). "llguidance-lark"
# runs a hand-written Lark grammar for the same language in which whitespace is a parser rule
# over single-character lexemes, so the newline stays ambiguous for the Earley parser.
LARK_ADAPTED = {
    "arithmetic": r"""
start: (expr "=" ws term "\n")+
expr: term (OP term)*
term: ident | num | "(" ws expr ")" ws
ident: IDENT ws
num: NUM ws
ws: WSCHAR*
OP: /[-+*\/]/
IDENT: /[a-z][a-z0-9_]*/
NUM: /[0-9]+/
WSCHAR: /[ \t\n]/
""".lstrip(),
}

# --------------------------------------------------------------------------- engine adapters
#
# Each adapter (subclassing regex_bench's, which builds the per-vocabulary objects from gramc's
# token bytes): source(grammar name) -> the text the engine is given (prepared untimed);
# compile(text) -> handle; new_matcher(handle) -> matcher [compile timed as compile + first
# new_matcher]; serialize(handle) -> bytes | None; load(blob) -> handle; mask_fn / commit_fn as in
# regex_bench.


class GramcGrammar(GramcEngine):
    name = "gramc"
    note = ("gramc.compile(gbnf, format='gbnf', vocab=Vocab); Artifact.matcher(max_rollback=0); "
            "Matcher.fill_bitmask / commit_token")

    def setup(self, ctx):
        super().setup(ctx)  # vocabulary caches, via a regex compile
        gramc.compile('root ::= "a" [b-z]* | "(" root ")"', format="gbnf", vocab=ctx.vocab,
                      lazy=self.lazy).matcher().mask()

    def supports(self, gname):
        return True

    def source(self, gname):
        return _grammar_source(gname)

    def compile(self, src):
        return gramc.compile(src, format="gbnf", vocab=self.ctx.vocab, lazy=self.lazy)

    def new_matcher(self, art):
        return art.matcher(max_rollback=0)

    def load(self, blob):
        return gramc.from_bytes(blob)


class GramcLazyGrammar(GramcGrammar):
    name = "gramc-lazy"
    lazy = True
    note = "gramc.compile(..., lazy=True): PDA nodes bound to the vocabulary on first use"


class XgrammarGrammar(XgrammarEngine):
    name = "xgrammar"
    note = ("TokenizerInfo from gramc token bytes (as in regex_bench); GrammarCompiler(max_threads=1, "
            "cache_enabled=False).compile_grammar(GBNF with the dialect adaptations listed); "
            "GrammarMatcher(compiled) per walk; fill_next_token_bitmask / accept_token")

    def supports(self, gname):
        return True

    def source(self, gname):
        return xgrammar_source(_grammar_source(gname))[0]

    def compile(self, src):
        return self.compiler.compile_grammar(src)

    def new_matcher(self, cg):
        return self.xgr.GrammarMatcher(cg)

    def load(self, blob):
        return self.xgr.CompiledGrammar.deserialize_json(blob.decode("utf-8"), self.ti)


class LlguidanceGrammar(LlguidanceEngine):
    name = "llguidance"
    note = ("LLTokenizer from gramc token bytes (as in regex_bench); LLMatcher(tok, "
            "grammar_from('gbnf', src)) = llguidance's own GBNF-to-Lark converter "
            "(llguidance.gbnf_to_lark), timed as part of compile; a new matcher per walk is "
            "deep_copy() of the compiled, unused one; llguidance.numpy.fill_next_token_bitmask / "
            "consume_token. No serialisation.")

    fmt = "gbnf"

    def setup(self, ctx):
        fmt, self.fmt = self.fmt, "regex"  # regex_bench's setup warms up with a regex compile
        try:
            super().setup(ctx)
        finally:
            self.fmt = fmt

    def supports(self, gname):
        return True

    def source(self, gname):
        return _grammar_source(gname)

    def compile(self, src):
        m = self.llg.LLMatcher(self.tok, self.llg.grammar_from(self.fmt, src), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def new_matcher(self, pristine):
        return pristine.deep_copy()


class LlguidanceLarkGrammar(LlguidanceGrammar):
    name = "llguidance-lark"
    note = ("llguidance with a hand-written Lark grammar for the same language (LARK_ADAPTED in the "
            "script), only where the GBNF converter's output refuses valid documents")

    fmt = "lark"

    def supports(self, gname):
        return gname in LARK_ADAPTED

    def source(self, gname):
        return LARK_ADAPTED[gname]


ADAPTERS = {"gramc": GramcGrammar, "gramc-lazy": GramcLazyGrammar, "xgrammar": XgrammarGrammar,
            "llguidance": LlguidanceGrammar, "llguidance-lark": LlguidanceLarkGrammar}
ENGINES = list(ADAPTERS)
PEERS = ["xgrammar", "llguidance", "llguidance-lark"]


@functools.cache
def _grammar_source(gname: str) -> str:
    return (GBNF_DIR / GRAMMARS[gname]).read_text()


# --------------------------------------------------------------------------- measurement


class PackedMasks(dict):
    """gramc's reference masks, kept packed (a Llama 3 bool mask is 128 KB; ~1,800 steps)."""

    def __init__(self, size):
        super().__init__()
        self.size = size

    def __setitem__(self, key, allowed):
        super().__setitem__(key, np.packbits(allowed))

    def get(self, key, default=None):
        v = super().get(key)
        return default if v is None else np.unpackbits(v, count=self.size).astype(bool)


cpu_ns = time.process_time_ns  # all threads of the process (an engine may compute off-thread)


class Timings:
    """Per-call ns: wall clock (perf_counter, the reported figures) and the process's CPU time
    (read just outside the wall-clock pair: robust to preemption on a busy machine, but it
    includes about one clock read, ~0.3 µs)."""

    def __init__(self):
        self.mask, self.commit, self.mask_cpu, self.commit_cpu = [], [], [], []

    def mark(self):
        return len(self.mask), len(self.commit)

    def walk_ms(self, mark, cpu=False):
        m, c = (self.mask_cpu, self.commit_cpu) if cpu else (self.mask, self.commit)
        return (sum(m[mark[0]:]) + sum(c[mark[1]:])) / 1e6

    def summary(self):
        return {"mask_us": _stats_us(self.mask), "commit_us": _stats_us(self.commit),
                "cpu_mask_us": _stats_us(self.mask_cpu), "cpu_commit_us": _stats_us(self.commit_cpu)}


def _walk(fill, commit, toks, tm: Timings, on_mask=None):
    """Walk ``toks``: mask, commit, ..., mask at the end, appending timings to ``tm``.
    Returns (position refused or None, exception text or None)."""
    n = len(toks)
    mt, ct, mc, cc = tm.mask.append, tm.commit.append, tm.mask_cpu.append, tm.commit_cpu.append
    for pos in range(n + 1):
        c0 = cpu_ns()
        t0 = perf_ns()
        fill()
        t1 = perf_ns()
        c1 = cpu_ns()
        mt(t1 - t0)
        mc(c1 - c0)
        if on_mask is not None:
            on_mask(pos)
        if pos == n:
            return None, None
        err = None
        c0 = cpu_ns()
        t0 = perf_ns()
        try:
            ok = commit(toks[pos])
        except Exception as e:  # noqa: BLE001
            ok, err = False, f"{type(e).__name__}: {e}"
        t1 = perf_ns()
        c1 = cpu_ns()
        ct(t1 - t0)
        cc(c1 - c0)
        if not ok:
            return pos, err
    return None, None


def _tail(ctx, toks, pos, n=48) -> str:
    return repr(b"".join(ctx.vocab.tokens[t] for t in toks[:pos])[-n:])


def run_cell(eng, ctx: VocabCtx, gname: str, docs, args, ref_masks, log) -> dict:
    """Measure one (engine, vocab, grammar). ``ref_masks`` holds gramc's masks per
    (document, step) of the cold walks, filled when ``eng`` is gramc and compared otherwise."""
    src = eng.source(gname)
    res: dict = {"engine": eng.name, "grammar": gname, "errors": [], "notes": []}

    # ---- compile (source -> ready matcher). Keep the first len(docs) handles: each document's
    # cold walk runs on an artifact nobody has used yet.
    compile_ns: list[int] = []
    compile_cpu_ns: list[int] = []
    fresh: list = []
    spent = 0
    for _ in range(max(args.repeat, 1)):
        gc.collect()
        c0 = cpu_ns()
        t0 = perf_ns()
        h = eng.compile(src)
        m = eng.new_matcher(h)
        dt = perf_ns() - t0
        compile_cpu_ns.append(cpu_ns() - c0)
        compile_ns.append(dt)
        spent += dt
        if len(fresh) < len(docs):
            fresh.append((h, m))
        last = h
        if spent > args.compile_budget_s * 1e9 and len(compile_ns) >= 2:
            break
    res["compile_ms"] = _ms_summary(compile_ns)
    res["compile_cpu_ms"] = _ms_summary(compile_cpu_ns)

    # ---- serialisation (of a compiled artifact nobody has walked): size and load -> ready matcher
    blob = eng.serialize(last)
    res["size_bytes"] = None if blob is None else len(blob)
    res["load_ms"] = None
    if blob is not None:
        load_ns = []
        for _ in range(max(args.repeat, 1)):
            gc.collect()
            t0 = perf_ns()
            h2 = eng.load(blob)
            m2 = eng.new_matcher(h2)
            load_ns.append(perf_ns() - t0)
            if sum(load_ns) > args.compile_budget_s * 1e9:
                break
        res["load_ms"] = _ms_summary(load_ns)
        fill2, buf2 = eng.mask_fn(m2)  # compared with the first cold mask below
        fill2()
        loaded_start = buf2.copy()
        del h2, m2, fill2, buf2
    else:
        loaded_start = None
    del last, blob

    agreement = {"steps": 0, "steps_differing": 0, "extra_tokens": 0, "missing_tokens": 0,
                 "eos_steps_differing": 0, "examples": []}
    cold, warm = Timings(), Timings()
    first_masks, cold_walk_ms, warm_walk_ms, new_matcher_ns = [], [], [], []
    cold_walk_cpu_ms, warm_walk_cpu_ms, first_masks_cpu = [], [], []
    per_doc, warm_reps, self_mismatch = [], [], []
    walked_positions = 0
    for di, (label, text) in enumerate(docs):
        toks = ctx.tokenize(text)
        doc_info = {"label": label, "bytes": len(text.encode()), "tokens": len(toks)}
        per_doc.append(doc_info)
        while len(fresh) <= di:  # --repeat smaller than the document count
            h = eng.compile(src)
            fresh.append((h, eng.new_matcher(h)))
        handle, matcher = fresh[di]
        fresh[di] = None

        # ---- cold walk. Between the timed calls the walk only copies the mask buffer (a few KB);
        # the correctness checks run after it, so they do not disturb the timings.
        fill, buf = eng.mask_fn(matcher)
        commit = eng.commit_fn(matcher)
        cold_rows: list[np.ndarray] = []
        mark = cold.mark()
        gc.collect()
        gc.disable()
        try:
            refused, exc = _walk(fill, commit, toks, cold,
                                 lambda pos, buf=buf, keep=cold_rows: keep.append(buf.copy()))
        finally:
            gc.enable()
        first_masks.append(cold.mask[mark[0]])
        first_masks_cpu.append(cold.mask_cpu[mark[0]])
        cold_walk_ms.append(cold.walk_ms(mark))
        cold_walk_cpu_ms.append(cold.walk_ms(mark, cpu=True))
        doc_info["cold_positions"] = len(cold_rows)
        if di == 0 and loaded_start is not None and not np.array_equal(loaded_start, cold_rows[0]):
            res["errors"].append("the loaded artifact's first mask differs from the compiled one's")
        walked_positions += len(cold_rows)
        for pos, words in enumerate(cold_rows):
            n_err = len(res["errors"])
            allowed = rb.unpack(words, ctx.size)
            _check_step(eng, ctx, res, agreement, ref_masks, allowed, di, pos, toks, label)
            ids = np.flatnonzero(allowed)
            for i in range(n_err, len(res["errors"])):  # give the place in the document
                res["errors"][i] += (f" (after …{_tail(ctx, toks, pos)}; it allows {len(ids)} ids"
                                     + (": " if len(ids) <= 8 else ", e.g. ") + ", ".join(tok_repr(ctx, ids[:8])) + ")")
            if agreement["examples"] and "prefix_tail" not in agreement["examples"][-1]:
                ex = agreement["examples"][-1]
                ex["prefix_tail"] = _tail(ctx, toks, ex["position"])
                ex.pop("prefix", None)
        if refused is not None:
            res["errors"].append(
                f"{label}: commit of token {tok_repr(ctx, [toks[refused]])[0]} at position {refused}/{len(toks)} "
                f"(after …{_tail(ctx, toks, refused)}) {'raised ' + exc if exc else 'refused'}; "
                f"the rest of the document is not walked")
            doc_info["refused_at"] = refused
        else:
            _check_eos_commit(eng, matcher, commit, ctx, res, label)
        del matcher, fill, commit

        # ---- warm walks: same artifact, a new matcher each time. The first is compared with the
        # cold walk afterwards (an engine's caches must not change its masks).
        reps = 0
        gc.collect()  # once: a full collection costs ~0.1 s with the tokenizers loaded
        gc.disable()
        t_start = perf_ns()
        try:
            while reps < args.reps:
                t0 = perf_ns()
                m = eng.new_matcher(handle)
                new_matcher_ns.append(perf_ns() - t0)
                fill, buf = eng.mask_fn(m)
                commit = eng.commit_fn(m)
                warm_rows: list[np.ndarray] = []
                keep = (lambda pos, buf=buf, keep=warm_rows: keep.append(buf.copy())) if reps == 0 else None
                mark = warm.mark()
                _walk(fill, commit, toks, warm, keep)
                warm_walk_ms.append(warm.walk_ms(mark))
                warm_walk_cpu_ms.append(warm.walk_ms(mark, cpu=True))
                for pos, (a, b) in enumerate(zip(cold_rows, warm_rows)):
                    if not np.array_equal(a, b) and len(self_mismatch) < 5:
                        d = np.flatnonzero(rb.unpack(a, ctx.size) != rb.unpack(b, ctx.size))
                        self_mismatch.append(f"{label} position {pos} (after …{_tail(ctx, toks, pos)}): warm "
                                             f"mask differs from cold on {len(d)} ids, e.g. "
                                             f"{', '.join(tok_repr(ctx, d[:5]))}")
                reps += 1
                del m, fill, commit, warm_rows
                if reps >= args.min_reps and perf_ns() - t_start > args.warm_budget_s * 1e9:
                    break
        finally:
            gc.enable()
        warm_reps.append(reps)
        del handle, cold_rows
    for msg in self_mismatch:
        res["errors"].append("warm/cold: " + msg)

    res["documents"] = per_doc
    res["first_mask_us"] = float(np.median(first_masks)) / 1e3
    res["first_mask_us_all"] = [x / 1e3 for x in first_masks]
    res["first_mask_cpu_us"] = float(np.median(first_masks_cpu)) / 1e3
    res["cold"] = dict(cold.summary(), walk_ms_per_doc=float(np.mean(cold_walk_ms)),
                       cpu_walk_ms_per_doc=float(np.mean(cold_walk_cpu_ms)))
    res["warm"] = dict(warm.summary(), walk_ms_per_doc=float(np.mean(warm_walk_ms)),
                       cpu_walk_ms_per_doc=float(np.mean(warm_walk_cpu_ms)), reps_per_doc=warm_reps)
    res["new_matcher_us"] = _stats_us(new_matcher_ns)
    res["positions_walked_cold"] = walked_positions
    res["positions_total"] = sum(d["tokens"] + 1 for d in per_doc)
    if eng.name != "gramc":
        res["agreement_with_gramc"] = agreement
    c, w = res["cold"]["mask_us"], res["warm"]["mask_us"]
    log(f"  {ctx.key:6s} {gname:10s} {eng.name:15s} compile {res['compile_ms']['median']:9.2f} ms  "
        f"cold p50 {c.get('p50', float('nan')):9.2f} p99 {c.get('p99', float('nan')):9.1f} us  "
        f"warm p50 {w.get('p50', float('nan')):9.2f} p99 {w.get('p99', float('nan')):9.1f} us  reps {warm_reps}"
        + (f"  diff-steps {agreement['steps_differing']}/{agreement['steps']}" if eng.name != "gramc" else "")
        + (f"  ERRORS {len(res['errors'])}" if res["errors"] else ""))
    return res


# --------------------------------------------------------------------------- reporting


def _complete(r) -> bool:
    """Did the engine walk every document to the end (no refusal, no failure)?"""
    return bool(r) and not r.get("fatal") and r["positions_walked_cold"] == r["positions_total"]


def _peer_refs(by, gname):
    """The peers the ratio columns compare with: those that walked every document."""
    return [by[(p, gname)] for p in PEERS if _complete(by.get((p, gname)))]


def _ms_best_med(s):
    return f"{_fmt(s['best'])} / {_fmt(s['median'])}"


def markdown_tables(data: dict) -> str:
    mi, cfg = data["machine"], data["config"]
    pk = mi["packages"]
    out = [(f"Machine: {mi['cpu']}, {mi['cpu_count']} CPUs ({mi['platform']}, Python {mi['python']}); "
            f"single-threaded (load average at start {mi['loadavg_start'][0]:.2f}, at end "
            f"{mi.get('loadavg_end', [float('nan')])[0]:.2f}; the process got {mi.get('cpu_share', float('nan')):.0%} "
            f"of a CPU over the run). gramc {pk.get('gramc')} (git {mi.get('gramc_git')}), "
            f"xgrammar {pk.get('xgrammar')}, llguidance {pk.get('llguidance')}, numpy {pk.get('numpy')}, "
            f"torch {pk.get('torch')}. Compile/load: best / median of up to {cfg['repeat']}. Cold: the first walk "
            f"over each document on an artifact compiled for it. Warm: up to {cfg['reps']} further walks per "
            f"document on the same artifact, a new matcher each (at least {cfg['min_reps']}; an engine stops "
            f"early once it has spent {cfg['warm_budget_s']:g} s on a document). Timing an empty call costs "
            f"{cfg['timer_overhead_us']:.2f} µs (p50) on the wall clock and {cfg.get('cpu_timer_overhead_us', float('nan')):.2f} µs "
            f"on the CPU clock, included in every µs figure."),
           "",
           ("Ratio columns: gramc's time ÷ the faster peer's (masks) or the slowest peer's (compile); "
            "below 1× gramc is faster. Peers that refused a valid document (⚠) are left out of the ratios: "
            "their timings stop at the refusal."),
           ""]
    docs = data["documents"]
    out.append("Documents (bytes; tokens per vocabulary):")
    out.append("")
    vkeys = list(data["vocabs"])
    out.append("| grammar | document | bytes | " + " | ".join(f"{v} tokens" for v in vkeys) + " |")
    out.append("|---|---|--:|" + "--:|" * len(vkeys))
    for g, lst in docs.items():
        for d in lst:
            out.append(f"| {g} | {d['label']} | {d['bytes']:,} | "
                       + " | ".join(str(data["vocabs"][v]["tokens"].get(f"{g}/{d['label']}", "-")) for v in vkeys)
                       + " |")
    out.append("")
    for vkey, vres in data["vocabs"].items():
        by = {(r["engine"], r["grammar"]): r for r in vres["results"]}
        out.append(f"### {vkey} ({vres['vocab_size']:,} ids): compile, load, walks")
        out.append("")
        out.append("| grammar | engine | compile ms best / median | size KB | load ms best / median | 1st mask µs "
                   "| cold walk ms / doc | warm walk ms / doc | warm walks / doc | commit p50 / p99 µs cold "
                   "| commit p50 / p99 µs warm | gramc compile ÷ slowest peer |")
        out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for g in data["grammars"]:
            peers = _peer_refs(by, g)
            slow_c = max((p["compile_ms"]["median"] for p in peers), default=None)
            for e in ENGINES:
                r = by.get((e, g))
                if r is None:
                    continue
                if r.get("fatal"):
                    out.append(f"| {g} | {e} | ERROR: {r['fatal'][:120]} |" + " |" * 9)
                    continue
                mark = " ⚠" if r["errors"] else ""
                cc, wc = r["cold"]["commit_us"], r["warm"]["commit_us"]
                reps = r["warm"]["reps_per_doc"]
                out.append("| " + " | ".join([
                    g, e + mark, _ms_best_med(r["compile_ms"]),
                    _fmt(r["size_bytes"] / 1024 if r["size_bytes"] is not None else None, 1),
                    _ms_best_med(r["load_ms"]) if r["load_ms"] else "-",
                    _fmt(r["first_mask_us"]), _fmt(r["cold"]["walk_ms_per_doc"]), _fmt(r["warm"]["walk_ms_per_doc"]),
                    (str(reps[0]) if len(set(reps)) == 1 else f"{min(reps)}–{max(reps)}"),
                    f"{_fmt(cc.get('p50'))} / {_fmt(cc.get('p99'))}", f"{_fmt(wc.get('p50'))} / {_fmt(wc.get('p99'))}",
                    _ratio(r["compile_ms"]["median"], slow_c) if e.startswith("gramc") else "",
                ]) + " |")
        out.append("")
        out.append(f"### {vkey} ({vres['vocab_size']:,} ids): mask time per token, µs")
        out.append("")
        out.append("| grammar | engine | cold p50 | cold p90 | cold p99 | cold max | warm p50 | warm p90 | warm p99 "
                   "| warm max | gramc ÷ faster peer: cold p50 | cold p99 | warm p50 | warm p99 |")
        out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for g in data["grammars"]:
            peers = _peer_refs(by, g)

            def best(regime, q, peers=peers):
                return min((p[regime]["mask_us"][q] for p in peers), default=None)

            for e in ENGINES:
                r = by.get((e, g))
                if r is None or r.get("fatal"):
                    continue
                c, w = r["cold"]["mask_us"], r["warm"]["mask_us"]
                is_g = e.startswith("gramc")
                out.append("| " + " | ".join(
                    [g, e + (" ⚠" if r["errors"] else "")]
                    + [_fmt(c.get(q)) for q in ("p50", "p90", "p99", "max")]
                    + [_fmt(w.get(q)) for q in ("p50", "p90", "p99", "max")]
                    + ([_ratio(c.get("p50"), best("cold", "p50")), _ratio(c.get("p99"), best("cold", "p99")),
                        _ratio(w.get("p50"), best("warm", "p50")), _ratio(w.get("p99"), best("warm", "p99"))]
                       if is_g else ["", "", "", ""])) + " |")
        out.append("")
        out.append(f"### {vkey} ({vres['vocab_size']:,} ids): process CPU time (not counting time preempted)")
        out.append("")
        out.append("| grammar | engine | compile CPU ms median | 1st mask CPU µs | cold mask p50 µs | cold p99 "
                   "| warm p50 | warm p99 | cold walk CPU ms / doc | warm walk CPU ms / doc "
                   "| gramc ÷ faster peer: cold p50 | cold p99 | warm p50 | warm p99 | gramc compile CPU ÷ slowest peer |")
        out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for g in data["grammars"]:
            peers = _peer_refs(by, g)
            slow_cc = max((p["compile_cpu_ms"]["median"] for p in peers), default=None)

            def bestc(regime, q, peers=peers):
                return min((p[regime]["cpu_mask_us"][q] for p in peers), default=None)

            for e in ENGINES:
                r = by.get((e, g))
                if r is None or r.get("fatal"):
                    continue
                c, w = r["cold"]["cpu_mask_us"], r["warm"]["cpu_mask_us"]
                is_g = e.startswith("gramc")
                out.append("| " + " | ".join(
                    [g, e + (" ⚠" if r["errors"] else ""), _fmt(r["compile_cpu_ms"]["median"]),
                     _fmt(r.get("first_mask_cpu_us")), _fmt(c.get("p50")), _fmt(c.get("p99")), _fmt(w.get("p50")), _fmt(w.get("p99")),
                     _fmt(r["cold"]["cpu_walk_ms_per_doc"]), _fmt(r["warm"]["cpu_walk_ms_per_doc"])]
                    + ([_ratio(c.get("p50"), bestc("cold", "p50")), _ratio(c.get("p99"), bestc("cold", "p99")),
                        _ratio(w.get("p50"), bestc("warm", "p50")), _ratio(w.get("p99"), bestc("warm", "p99")),
                        _ratio(r["compile_cpu_ms"]["median"], slow_cc)]
                       if is_g else ["", "", "", "", ""])) + " |")
        out.append("")
        setup = ", ".join(f"{k} {v:.0f} ms" for k, v in vres["setup_ms"].items())
        out.append(f"Per-vocabulary setup (not in compile ms): {setup}.")
        out.append("")
    return "\n".join(out)


def disagreement_report(data: dict) -> str:
    lines = []
    for vkey, vres in data["vocabs"].items():
        for r in vres["results"]:
            where = f"{vkey}/{r['grammar']}/{r['engine']}"
            for e in r.get("errors", []):
                lines.append(f"- **ERROR** {where}: {e}")
            for n in r.get("notes", []):
                lines.append(f"- note {where}: {n}")
            ag = r.get("agreement_with_gramc")
            if not ag:
                continue
            if not ag["steps_differing"] and not ag["eos_steps_differing"]:
                lines.append(f"- {where}: same allowed set as gramc at all {ag['steps']} compared steps (EOS included)")
                continue
            lines.append(f"- {where} vs gramc: {ag['steps_differing']}/{ag['steps']} steps differ on non-EOS tokens "
                         f"(+{ag['extra_tokens']} token-steps allowed only by {r['engine']}, -{ag['missing_tokens']} "
                         f"only by gramc); EOS differs at {ag['eos_steps_differing']} steps. First cases:")
            for ex in ag["examples"][:6]:
                lines.append(f"    - {ex['text']} position {ex['position']}, after …{ex.get('prefix_tail')}: "
                             f"{r['engine']} allows {ex['engine_allowed']}, gramc {ex['gramc_allowed']}; "
                             f"only {r['engine']}: {ex['extra_count']} ({ex['extra_nonascii']} non-ASCII)"
                             + (f" e.g. {', '.join(ex['extra_sample'][:6])}" if ex["extra_count"] else "")
                             + f"; only gramc: {ex['missing_count']}"
                             + (f" e.g. {', '.join(ex['missing_sample'][:6])}" if ex["missing_count"] else "")
                             + (f"; EOS {r['engine']} {ex['eos_engine']} vs gramc {ex['eos_gramc']}"
                                if ex["eos_engine"] != ex["eos_gramc"] else ""))
    return "\n".join(lines) if lines else "- none"


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vkeys = list(data["vocabs"])
    gnames = list(data["grammars"])
    colors = {"gramc": "#1b7837", "gramc-lazy": "#7fbf7b", "xgrammar": "#2166ac", "llguidance": "#b2182b",
              "llguidance-lark": "#f4a582"}
    fig, axes = plt.subplots(2, len(vkeys), figsize=(6.2 * len(vkeys), 8.4), squeeze=False, sharey=True)
    width = 0.8 / len(ENGINES)
    for row, regime in enumerate(("cold", "warm")):
        for ax, vkey in zip(axes[row], vkeys):
            by = {(r["engine"], r["grammar"]): r for r in data["vocabs"][vkey]["results"]}
            for j, e in enumerate(ENGINES):
                xs, p50, p99, cpu99, mx, hatch = [], [], [], [], [], []
                for i, g in enumerate(gnames):
                    r = by.get((e, g))
                    if not r or r.get("fatal") or not r[regime]["mask_us"]:
                        continue
                    s = r[regime]["mask_us"]
                    xs.append(i + (j - (len(ENGINES) - 1) / 2) * width)
                    p50.append(s["p50"])
                    p99.append(s["p99"])
                    cpu99.append(r[regime].get("cpu_mask_us", {}).get("p99", np.nan))
                    mx.append(s["max"])
                    hatch.append("///" if not _complete(r) else "")
                bars = ax.bar(xs, p50, width * 0.95, color=colors[e], label=f"{e} p50")
                for bar, h in zip(bars, hatch):
                    if h:
                        bar.set_hatch(h)
                        bar.set_edgecolor("white")
                ax.vlines(xs, p50, p99, color="black", linewidth=0.8, zorder=2)
                ax.scatter(xs, p99, marker="_", s=110, color="black", zorder=3, label="p99" if j == 0 else None)
                ax.scatter(xs, cpu99, marker="D", s=16, facecolors="none", edgecolors="black", zorder=4,
                           label="p99, process CPU time" if j == 0 else None)
                ax.scatter(xs, mx, marker=".", s=25, color="grey", zorder=3, label="max" if j == 0 else None)
            ax.set_yscale("log")
            ax.set_xticks(range(len(gnames)))
            ax.set_xticklabels(gnames)
            ax.set_title(f"{regime}: {vkey} ({data['vocabs'][vkey]['vocab_size']:,} tokens)")
            ax.grid(axis="y", which="both", alpha=0.3)
        axes[row][0].set_ylabel(f"{regime} mask time per token, µs (log)")
    from matplotlib.patches import Patch

    handles, labels = axes[0][-1].get_legend_handles_labels()
    handles.append(Patch(facecolor="grey", hatch="///", edgecolor="white"))
    labels.append("refused a valid document (walk cut short)")
    axes[0][-1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("CFG token masks per token, single thread, wall clock (bar p50, tick p99, dot max; "
                 "diamond: p99 in process CPU time; lower is better)\n"
                 "cold = first walk on a freshly compiled artifact, warm = repeated walks on the same artifact")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="all", choices=["gpt2", "llama3", "all"])
    ap.add_argument("--repeat", type=int, default=5, help="compile/load repetitions (best/median)")
    ap.add_argument("--reps", type=int, default=20, help="warm walks per document")
    ap.add_argument("--min-reps", type=int, default=2, help="warm walks per document even over --warm-budget-s")
    ap.add_argument("--warm-budget-s", type=float, default=15.0,
                    help="stop an engine's warm walks of a document once they have taken this long")
    ap.add_argument("--compile-budget-s", type=float, default=15.0,
                    help="stop repeating a compile (or load) once it has used this much time")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset")
    ap.add_argument("--grammars", default=",".join(GRAMMARS), help="comma-separated subset")
    ap.add_argument("--out", default=None,
                    help="raw JSON (default bench/results/grammar.json; grammar-quick.json with --quick)")
    ap.add_argument("--md", default=None, help="markdown tables (default: --out with .md)")
    ap.add_argument("--plot", default=None,
                    help="PNG path (default docs/img/grammar_mask_times.png; none with --quick); '' to skip")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --repeat 2 --reps 3 --min-reps 1 --warm-budget-s 2 --compile-budget-s 3")
    ap.add_argument("--from-json", default=None, help="re-render tables/plot from a results file")
    args = ap.parse_args(argv)
    log = functools.partial(print, file=sys.stderr, flush=True)

    if args.out is None:
        args.out = str(REPO / "bench/results" / ("grammar-quick.json" if args.quick else "grammar.json"))
    if args.plot is None:
        args.plot = "" if args.quick else str(REPO / "docs/img/grammar_mask_times.png")

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        print(markdown_tables(data))
        print("\nCorrectness / agreement with gramc:\n" + disagreement_report(data))
        if args.plot:
            plot(data, Path(args.plot))
        return 0

    if args.quick:
        args.repeat, args.reps, args.min_reps, args.warm_budget_s, args.compile_budget_s = 2, 3, 1, 2.0, 3.0
    engines = [e for e in args.engines.split(",") if e]
    if "gramc" not in engines:
        engines.insert(0, "gramc")  # the reference for agreement checks
    engines.sort(key=ENGINES.index)
    gnames = [g for g in args.grammars.split(",") if g]
    vkeys = ["gpt2", "llama3"] if args.vocab == "all" else [args.vocab]

    # every document must match its grammar (gramc's Earley check), before anything is timed
    from gramc.runtime.check import check_artifact

    checker_vocab = gramc.load_vocab("gpt2")
    for g in gnames:
        art = gramc.compile(_grammar_source(g), format="gbnf", vocab=checker_vocab, lazy=True)
        for label, text in DOCUMENTS[g]:
            r = check_artifact(art, text.encode("utf-8"))
            if not r.ok:
                raise SystemExit(f"document {g}/{label} does not match {GRAMMARS[g]}: {r.message}")
            if g == "json":
                json.loads(text)  # and is JSON
    del checker_vocab, art

    preimport(engines)
    t_start, cpu_start = time.time(), os.times()
    data = {"machine": dict(machine_info(), cpu_pressure_start=cpu_pressure()),
            "config": {"repeat": args.repeat, "reps": args.reps, "min_reps": args.min_reps,
                       "warm_budget_s": args.warm_budget_s, "compile_budget_s": args.compile_budget_s,
                       "quick": args.quick, "timer_overhead_us": timer_overhead_us(),
                       "cpu_timer_overhead_us": cpu_timer_overhead_us(),
                       "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:])},
            "grammars": {g: {"file": GRAMMARS[g], "source": _grammar_source(g),
                             "xgrammar_adaptations": xgrammar_source(_grammar_source(g))[1],
                             "llguidance_lark_from_converter": _safe_lark(g),
                             "llguidance_lark_adapted": LARK_ADAPTED.get(g)} for g in gnames},
            "documents": {g: [{"label": lb, "bytes": len(t.encode()), "text": t} for lb, t in DOCUMENTS[g]]
                          for g in gnames},
            "engine_notes": {e: ADAPTERS[e].note for e in engines},
            "vocabs": {}}
    for vkey in vkeys:
        ctx = VocabCtx(vkey)
        log(f"[{vkey}] {ctx.size} ids, eos {ctx.eos}, {len(ctx.special)} special; tokenizer: {ctx.tokenizer_desc}")
        vres = {"vocab_size": ctx.size, "eos_ids": ctx.eos, "n_special": len(ctx.special),
                "gramc_vocab_load_ms": ctx.load_ms, "tokenizer": ctx.tokenizer_desc,
                "tokens": {f"{g}/{lb}": len(ctx.tokenize(t)) for g in gnames for lb, t in DOCUMENTS[g]},
                "setup_ms": {}, "results": []}
        adapters = {}
        for e in engines:
            eng = ADAPTERS[e]()
            try:
                _, dt = _timed(eng.setup, ctx)
                vres["setup_ms"][e] = dt / 1e6
                adapters[e] = eng
            except Exception as ex:  # noqa: BLE001
                msg = f"setup failed: {type(ex).__name__}: {ex}"
                log(f"  {e}: {msg}")
                vres["setup_ms"][e] = float("nan")
                for g in gnames:
                    vres["results"].append({"engine": e, "grammar": g, "fatal": msg, "errors": [msg]})
        for g in gnames:
            ref_masks = PackedMasks(ctx.size)
            for e, eng in adapters.items():
                if not eng.supports(g):
                    continue
                try:
                    vres["results"].append(run_cell(eng, ctx, g, DOCUMENTS[g], args, ref_masks, log))
                except Exception as ex:  # noqa: BLE001
                    msg = f"{type(ex).__name__}: {ex}"
                    log(f"  {vkey} {g} {e}: FAILED {msg}\n{traceback.format_exc()}")
                    vres["results"].append({"engine": e, "grammar": g, "fatal": msg, "errors": [msg]})
                gc.collect()
            del ref_masks
        data["vocabs"][vkey] = vres
        del adapters
        gc.collect()
    data["elapsed_s"] = time.time() - t_start
    cpu_end = os.times()
    data["machine"]["loadavg_end"] = os.getloadavg()
    data["machine"]["cpu_pressure_end"] = cpu_pressure()
    # share of one CPU this process got over the run: ~1.0 on an idle machine, less when other
    # processes compete for the cores (the timings then include time spent preempted)
    data["machine"]["cpu_share"] = ((cpu_end.user - cpu_start.user + cpu_end.system - cpu_start.system)
                                    / data["elapsed_s"])

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    md = markdown_tables(data)
    report = disagreement_report(data)
    Path(args.md or out.with_suffix(".md")).write_text(
        md + "\nCorrectness / agreement with gramc:\n\n" + report + "\n")
    print(md)
    print("\nCorrectness / agreement with gramc:\n" + report)
    if args.plot:
        plot(data, Path(args.plot))
        log(f"plot: {args.plot}")
    log(f"results: {out}  ({data['elapsed_s']:.0f} s)")
    return 0


def cpu_timer_overhead_us(n: int = 20000) -> float:
    """p50 of an (almost) empty call timed on the CPU clock the way masks are."""
    f = functools.partial(int)
    samples = []
    for _ in range(n):
        c0 = cpu_ns()
        perf_ns()
        f()
        perf_ns()
        samples.append(cpu_ns() - c0)
    return float(np.percentile(samples, 50)) / 1e3


def cpu_pressure() -> str | None:
    """The kernel's CPU pressure line ("some avg10=... avg60=..."), where available."""
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None


def _safe_lark(gname: str) -> str | None:
    try:
        from llguidance.gbnf_to_lark import gbnf_to_lark

        return gbnf_to_lark(_grammar_source(gname))
    except Exception as e:  # noqa: BLE001
        return f"conversion failed: {type(e).__name__}: {e}"


if __name__ == "__main__":
    sys.exit(main())
