#!/usr/bin/env python
"""Regex token-mask benchmark: gramc against xgrammar, llguidance and outlines-core.

For each vocabulary (GPT-2, Llama 3) and each regex (ipv4, email, date, choice200) this measures,
single-threaded, per engine:

* compile time: regex source -> ready matcher, with the engine's per-vocabulary object
  (gramc ``Vocab``, xgrammar ``TokenizerInfo``/``GrammarCompiler``, llguidance ``LLTokenizer``,
  outlines-core ``Vocabulary``) built beforehand (its cost is reported separately as "setup");
* artifact size and load time, where the engine can serialise its compiled form;
* the first mask after compiling (the cold cost that lazy engines defer);
* per-token mask time (into a preallocated packed 32-bit bitmask) and commit time while walking
  real tokenisations of matching strings, including the mask at the final (EOS) position.

In passing it checks correctness: every engine must allow every next token of each example
(and EOS at the end), and at every step each peer's allowed set is compared with gramc's.

Usage::

    python bench/regex_bench.py --vocab all --out bench/results/regex.json
    python bench/regex_bench.py --quick            # ~1 minute smoke run
    python bench/regex_bench.py --from-json bench/results/regex.json   # re-render tables/plot
"""

from __future__ import annotations

import os

# Single-threaded everywhere. Must be set before numpy / torch / the peers are imported.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import base64
import functools
import gc
import importlib.metadata
import json
import pickle
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

import gramc

from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is the script's folder)

SHARED_VOCABS = Path(os.environ.get("GRAMC_BENCH_VOCABS") or SHARED / "vocabs")
perf_ns = time.perf_counter_ns

# --------------------------------------------------------------------------- workload

GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
          "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
          "chi", "psi", "omega"]
_NOUNS = ["data", "datum", "database", "index", "indexer", "token", "tokenizer", "mask", "masking",
          "grammar", "graph", "graphics", "parse", "parser", "state", "statement", "vector",
          "vertex", "value", "valve", "red apple", "red apples", "blue sky"]


def choice_phrases(n: int = 200) -> list[str]:
    """``n`` distinct phrases, deterministic: mixed lengths, spaces, digits, shared prefixes,
    and some phrases that are prefixes of others (so EOS and continuation compete)."""
    out: list[str] = []
    seen: set[str] = set()
    k = 0
    while len(out) < n:
        g, w = _GREEK[k % len(_GREEK)], _NOUNS[(k * 7) % len(_NOUNS)]
        form = k % 6
        p = (f"{g}_{k:03d}", f"{g} {w}", f"{w}{k}", w, f"{g} {w} {k % 17}", f"{w}_{g}")[form]
        if p not in seen:
            seen.add(p)
            out.append(p)
        k += 1
    return out


CHOICES = choice_phrases(200)

REGEXES = {
    "ipv4": r"((25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)",
    "email": r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,4}",
    "date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "choice200": "|".join(CHOICES),  # only [a-z0-9_ ] in the phrases: no escaping needed
}

EXAMPLES = {
    "ipv4": ["192.168.10.254", "10.0.0.1", "255.255.255.0"],
    "email": ["john.doe@example.com", "alice_smith+news@mail.co.uk", "x@y.org"],
    "date": ["2024-02-29", "1999-12-31", "2000-01-01"],
    "choice200": ["red apple", "lambda datum 10", "indexer_sigma"],
}
for _name, _ex in EXAMPLES.items():
    assert _name != "choice200" or all(e in CHOICES for e in _ex), _ex

ENGINES = ["gramc", "gramc-lazy", "xgrammar", "llguidance", "outlines-core"]
PEERS = ["xgrammar", "llguidance", "outlines-core"]

# --------------------------------------------------------------------------- vocabularies


class VocabCtx:
    """gramc's vocabulary plus the model's real tokenizer (used only to tokenize examples)."""

    def __init__(self, key: str):
        self.key = key
        t0 = perf_ns()
        if key == "gpt2":
            self.vocab = gramc.load_vocab("gpt2")
            import tiktoken

            ranks = {}
            with open(SHARED_VOCABS / "gpt2.tiktoken", "rb") as f:
                for line in f:
                    if line.strip():
                        tok, rank = line.split()
                        ranks[base64.b64decode(tok)] = int(rank)
            enc = tiktoken.Encoding("gpt2", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                                    special_tokens={"<|endoftext|>": 50256})
            self.encode = lambda s: enc.encode_ordinary(s)
            self.tokenizer_desc = "tiktoken Encoding from gpt2.tiktoken (GPT-2 pattern)"
        elif key == "llama3":
            path = SHARED_VOCABS / "llama3-tokenizer.json"
            self.vocab = gramc.load_vocab(str(path))
            import tokenizers

            tk = tokenizers.Tokenizer.from_file(str(path))
            self.encode = lambda s: tk.encode(s, add_special_tokens=False).ids
            self.tokenizer_desc = "tokenizers.Tokenizer.from_file(llama3-tokenizer.json)"
        else:
            raise SystemExit(f"unknown vocab {key!r}")
        self.load_ms = (perf_ns() - t0) / 1e6
        v = self.vocab
        self.size = v.size
        self.words = (v.size + 31) // 32
        self.eos = sorted(v.eos_ids)
        self.special = sorted(v.special_ids)

    def tokenize(self, text: str) -> list[int]:
        ids = list(self.encode(text))
        got = b"".join(self.vocab.tokens[i] for i in ids)
        if got != text.encode("utf-8"):
            raise AssertionError(f"{self.key}: tokenizer ids {ids} decode via gramc vocab to {got!r}")
        return ids


def unpack(words: np.ndarray, size: int) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:size].astype(bool)


# --------------------------------------------------------------------------- engine adapters
#
# Each adapter: setup(ctx); compile(regex) -> (handle, matcher) [timed as a whole];
# serialize(handle) -> bytes | None; load(blob) -> (handle, matcher) [timed];
# mask_fn(m) -> (zero-arg callable writing the packed mask, uint32 view of that buffer);
# commit_fn(m) -> callable(token) -> bool; reset(m).
# The timed mask/commit callables are the engines' public Python entry points, bound with
# functools.partial (a C-level call), so each engine pays its own Python wrapper and nothing more.


class GramcEngine:
    name = "gramc"
    lazy = False
    note = "gramc.compile(regex, vocab=Vocab); Matcher.fill_bitmask / commit_token"

    def setup(self, ctx: VocabCtx) -> None:
        self.ctx = ctx
        # First compile imports the compiler and builds per-vocabulary caches: that is setup.
        gramc.compile(r"[a-z]+[0-9]?", vocab=ctx.vocab, lazy=self.lazy).matcher().mask()

    def compile(self, regex):
        art = gramc.compile(regex, vocab=self.ctx.vocab, lazy=self.lazy)
        return art, art.matcher()

    def serialize(self, art):
        if self.lazy:
            return None  # to_bytes would bind every state: it is the eager artifact's bytes
        return art.to_bytes()

    def load(self, blob):
        art = gramc.from_bytes(blob)
        return art, art.matcher()

    def mask_fn(self, m):
        row = np.zeros(self.ctx.words, dtype=np.int32)
        return functools.partial(m.fill_bitmask, row), row.view(np.uint32)

    def commit_fn(self, m):
        return m.commit_token

    def reset(self, m):
        m.reset()


class GramcLazyEngine(GramcEngine):
    name = "gramc-lazy"
    lazy = True
    note = "gramc.compile(..., lazy=True): states bound on first use"


class XgrammarEngine:
    name = "xgrammar"
    note = ("TokenizerInfo(encoded_vocab=gramc token bytes, VocabType.RAW, stop_token_ids=eos ids; "
            "non-EOS special tokens passed as b'' = xgrammar's special marker); "
            "GrammarCompiler(max_threads=1, cache_enabled=False).compile_regex; "
            "GrammarMatcher.fill_next_token_bitmask (torch int32 CPU tensor) / accept_token")

    def setup(self, ctx):
        import torch
        import xgrammar as xgr

        torch.set_num_threads(1)
        self.xgr, self.ctx = xgr, ctx
        eos = set(ctx.eos)
        enc = [b"" if (i in ctx.vocab.special_ids and i not in eos) else t
               for i, t in enumerate(ctx.vocab.tokens)]
        self.ti = xgr.TokenizerInfo(enc, xgr.VocabType.RAW, vocab_size=ctx.size, stop_token_ids=ctx.eos)
        self.compiler = xgr.GrammarCompiler(self.ti, max_threads=1, cache_enabled=False)
        xgr.GrammarMatcher(self.compiler.compile_regex(r"[a-z]+[0-9]?"))

    def compile(self, regex):
        cg = self.compiler.compile_regex(regex)
        return cg, self.xgr.GrammarMatcher(cg)

    def serialize(self, cg):
        return cg.serialize_json().encode("utf-8")

    def load(self, blob):
        cg = self.xgr.CompiledGrammar.deserialize_json(blob.decode("utf-8"), self.ti)
        return cg, self.xgr.GrammarMatcher(cg)

    def mask_fn(self, m):
        bm = self.xgr.allocate_token_bitmask(1, self.ctx.size)
        return functools.partial(m.fill_next_token_bitmask, bm), bm.numpy()[0].view(np.uint32)

    def commit_fn(self, m):
        return m.accept_token

    def reset(self, m):
        m.reset()


class LlguidanceEngine:
    name = "llguidance"
    note = ("LLTokenizer(TokenizerWrapper(tokens=gramc token bytes, special_token_ids=gramc specials), "
            "eos_token=eos ids); LLMatcher(tok, grammar_from('regex', ...)); "
            "llguidance.numpy.fill_next_token_bitmask / consume_token. No serialisation of compiled state.")

    class _Wrapped:
        def __init__(self, ctx):
            self.eos_token_id = ctx.eos[0]
            self.bos_token_id = None
            self.tokens = list(ctx.vocab.tokens)
            self.special_token_ids = list(ctx.special)
            self._encode = ctx.encode

        def __call__(self, s):
            if isinstance(s, bytes):
                s = s.decode("utf-8", errors="replace")
            return list(self._encode(s))

    def setup(self, ctx):
        import llguidance as llg
        import llguidance.numpy as llnp

        self.llg, self.llnp, self.ctx = llg, llnp, ctx
        self.tok = llg.LLTokenizer(llg.TokenizerWrapper(self._Wrapped(ctx)), n_vocab=ctx.size,
                                   eos_token=list(ctx.eos))
        self.compile(r"[a-z]+[0-9]?")

    def compile(self, regex):
        m = self.llg.LLMatcher(self.tok, self.llg.grammar_from("regex", regex), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return None, m

    def serialize(self, handle):
        return None

    def load(self, blob):
        raise NotImplementedError

    def mask_fn(self, m):
        bm = np.zeros((1, self.ctx.words), dtype=np.int32)
        return functools.partial(self.llnp.fill_next_token_bitmask, m, bm), bm[0].view(np.uint32)

    def commit_fn(self, m):
        return m.consume_token

    def reset(self, m):
        m.reset()


class OutlinesCoreEngine:
    name = "outlines-core"
    note = ("Vocabulary(eos_ids[0], {token bytes: [ids]}) over gramc's non-special tokens (outlines-core "
            "takes one EOS id; other EOS/special ids are left out); Index(regex, vocabulary) + Guide; "
            "Guide.write_mask_into / advance(return_tokens=False); size/load = pickle of Index")

    def setup(self, ctx):
        import outlines_core as oc

        self.oc, self.ctx = oc, ctx
        table: dict[bytes, list[int]] = {}
        for i, t in enumerate(ctx.vocab.tokens):
            if i in ctx.vocab.special_ids:
                continue
            table.setdefault(t, []).append(i)
        self.ov = oc.Vocabulary(ctx.eos[0], table)
        oc.Guide(oc.Index(r"[a-z]+[0-9]?", self.ov))

    def compile(self, regex):
        idx = self.oc.Index(regex, self.ov)
        return idx, self.oc.Guide(idx)

    def serialize(self, idx):
        return pickle.dumps(idx)

    def load(self, blob):
        idx = pickle.loads(blob)
        return idx, self.oc.Guide(idx)

    def mask_fn(self, m):
        buf = np.zeros(self.ctx.words, dtype=np.int32)
        return functools.partial(m.write_mask_into, buf.ctypes.data, buf.size, 4), buf.view(np.uint32)

    def commit_fn(self, m):
        adv = m.advance

        def commit(t):
            adv(t, return_tokens=False)  # raises ValueError on a refused token
            return True

        return commit

    def reset(self, m):
        m.reset()


ADAPTERS = {"gramc": GramcEngine, "gramc-lazy": GramcLazyEngine, "xgrammar": XgrammarEngine,
            "llguidance": LlguidanceEngine, "outlines-core": OutlinesCoreEngine}

# --------------------------------------------------------------------------- measurement


def _timed(fn, *a):
    t0 = perf_ns()
    r = fn(*a)
    return r, perf_ns() - t0


def _stats_us(ns: list[int]) -> dict:
    if not ns:
        return {}
    a = np.asarray(ns, dtype=np.float64) / 1e3
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "mean": float(a.mean()), "max": float(a.max()),
            "n": int(a.size)}


def _ms_summary(ns: list[int]) -> dict:
    ms = [x / 1e6 for x in ns]
    return {"best": min(ms), "median": statistics.median(ms), "n": len(ms), "all": ms}


def tok_repr(ctx: VocabCtx, ids) -> list[str]:
    return [f"{int(i)}:{ctx.vocab.tokens[int(i)]!r}" for i in ids]


def run_cell(eng, ctx: VocabCtx, rname: str, regex: str, examples, args, ref_masks, log) -> dict:
    """Measure one (engine, vocab, regex). ``ref_masks`` holds gramc's bool masks per
    (example, step) and is filled when ``eng`` is gramc, compared against otherwise."""
    res: dict = {"engine": eng.name, "regex": rname, "errors": [], "notes": []}
    # ---- compile (source -> ready matcher), adaptive repeat count under a time budget
    compile_ns: list[int] = []
    handle = matcher = None
    spent = 0
    for _ in range(args.repeat):
        gc.collect()
        (handle, matcher), dt = _timed(eng.compile, regex)
        compile_ns.append(dt)
        spent += dt
        if spent > args.compile_budget_s * 1e9:
            break
    res["compile_ms"] = _ms_summary(compile_ns)

    # ---- serialisation: size and load (load = bytes -> ready matcher)
    blob = eng.serialize(handle)
    if blob is None:
        res["size_bytes"] = None
        res["load_ms"] = None
    else:
        res["size_bytes"] = len(blob)
        load_ns = []
        for _ in range(args.repeat):
            gc.collect()
            _, dt = _timed(eng.load, blob)
            load_ns.append(dt)
            if sum(load_ns) > args.compile_budget_s * 1e9:
                break
        res["load_ms"] = _ms_summary(load_ns)
        if eng.name == "gramc":
            # the loaded artifact must give the same masks as the compiled one
            _, m2 = eng.load(blob)
            if not np.array_equal(np.asarray(m2.mask()), np.asarray(matcher.mask())):
                res["errors"].append("gramc: loaded artifact's start mask differs from compiled one")

    # ---- walks: matcher from the last compile, so the first walk is cold
    fill, buf = eng.mask_fn(matcher)
    commit = eng.commit_fn(matcher)
    mask_warm: list[int] = []
    commit_warm: list[int] = []
    mask_cold: list[int] = []
    commit_cold: list[int] = []
    first_mask_ns = None
    agreement = {"steps": 0, "steps_differing": 0, "extra_tokens": 0, "missing_tokens": 0,
                 "eos_steps_differing": 0, "examples": []}
    per_example = []
    gc.collect()
    gc.disable()
    try:
        for ei, text in enumerate(examples):
            toks = ctx.tokenize(text)
            per_example.append({"text": text, "tokens": toks, "token_bytes": tok_repr(ctx, toks)})
            for rep in range(args.reps):
                eng.reset(matcher)
                cold = rep == 0
                mt = mask_cold if cold else mask_warm
                ct = commit_cold if cold else commit_warm
                for pos in range(len(toks) + 1):
                    t0 = perf_ns()
                    fill()
                    t1 = perf_ns()
                    mt.append(t1 - t0)
                    if first_mask_ns is None:
                        first_mask_ns = t1 - t0
                    if cold:  # correctness, outside the timed region
                        allowed = unpack(buf, ctx.size)
                        _check_step(eng, ctx, res, agreement, ref_masks, allowed, ei, pos, toks, text)
                    if pos == len(toks):
                        break
                    tok = toks[pos]
                    t0 = perf_ns()
                    try:
                        ok = commit(tok)
                    except Exception as e:  # noqa: BLE001
                        ok = False
                        if cold:
                            res["errors"].append(f"commit of token {tok_repr(ctx, [tok])[0]} at position {pos} "
                                                 f"of {text!r} raised {type(e).__name__}: {e}")
                    t1 = perf_ns()
                    ct.append(t1 - t0)
                    if not ok:
                        if cold and not any("commit of token" in e for e in res["errors"]):
                            res["errors"].append(f"commit of token {tok_repr(ctx, [tok])[0]} at position {pos} "
                                                 f"of {text!r} refused")
                        break
                if cold:
                    _check_eos_commit(eng, matcher, commit, ctx, res, text)
    finally:
        gc.enable()
    eng.reset(matcher)
    res["first_mask_us"] = first_mask_ns / 1e3 if first_mask_ns is not None else None
    res["mask_us"] = _stats_us(mask_warm)
    res["commit_us"] = _stats_us(commit_warm)
    res["cold_walk"] = {"mask_us": _stats_us(mask_cold), "commit_us": _stats_us(commit_cold)}
    res["examples"] = per_example
    if eng.name != "gramc":
        res["agreement_with_gramc"] = agreement
    log(f"  {ctx.key:6s} {rname:9s} {eng.name:13s} compile {res['compile_ms']['median']:9.2f} ms "
        f"(n={res['compile_ms']['n']})  mask p50 {res['mask_us'].get('p50', float('nan')):8.2f} us  "
        f"p99 {res['mask_us'].get('p99', float('nan')):8.2f} us"
        + (f"  diff-steps {agreement['steps_differing']}/{agreement['steps']}" if eng.name != "gramc" else "")
        + (f"  ERRORS {len(res['errors'])}" if res["errors"] else ""))
    return res


def _check_step(eng, ctx, res, agreement, ref_masks, allowed, ei, pos, toks, text):
    final = pos == len(toks)
    if not final and not allowed[toks[pos]]:
        res["errors"].append(f"mask at position {pos} of {text!r} does not allow the example's next token "
                             f"{tok_repr(ctx, [toks[pos]])[0]}")
    if final and not allowed[ctx.eos].any():
        res["errors"].append(f"mask after {text!r} (complete match) allows no EOS id {ctx.eos}")
    key = (ei, pos)
    if eng.name == "gramc":
        ref_masks[key] = allowed.copy()
        return
    ref = ref_masks.get(key)
    if ref is None:
        return
    agreement["steps"] += 1
    eos_idx = np.asarray(ctx.eos)
    a, r = allowed.copy(), ref.copy()
    eos_a, eos_r = a[eos_idx].copy(), r[eos_idx].copy()
    a[eos_idx] = False
    r[eos_idx] = False
    extra = np.flatnonzero(a & ~r)
    missing = np.flatnonzero(r & ~a)
    eos_diff = not np.array_equal(eos_a, eos_r)
    if len(extra) or len(missing):
        agreement["steps_differing"] += 1
        agreement["extra_tokens"] += len(extra)
        agreement["missing_tokens"] += len(missing)
    if eos_diff:
        agreement["eos_steps_differing"] += 1
    if (len(extra) or len(missing) or eos_diff) and len(agreement["examples"]) < 6:
        prefix = b"".join(ctx.vocab.tokens[t] for t in toks[:pos])
        agreement["examples"].append({
            "text": text, "position": pos, "prefix": repr(prefix),
            "engine_allowed": int(allowed.sum()), "gramc_allowed": int(ref.sum()),
            "extra_count": len(extra), "missing_count": len(missing),
            "extra_nonascii": int(sum(1 for t in extra if any(b >= 0x80 for b in ctx.vocab.tokens[t]))),
            "missing_nonascii": int(sum(1 for t in missing if any(b >= 0x80 for b in ctx.vocab.tokens[t]))),
            "extra_sample": tok_repr(ctx, extra[:8]), "missing_sample": tok_repr(ctx, missing[:8]),
            "eos_engine": [int(e) for e, x in zip(ctx.eos, eos_a) if x],
            "eos_gramc": [int(e) for e, x in zip(ctx.eos, eos_r) if x],
        })


def _check_eos_commit(eng, matcher, commit, ctx, res, text):
    """After a complete example, committing EOS must be accepted (not timed)."""
    try:
        ok = commit(ctx.eos[0])
        err = None
    except Exception as e:  # noqa: BLE001
        ok, err = False, f"{type(e).__name__}: {e}"
    if not ok:
        note = f"commit of EOS {ctx.eos[0]} after complete {text!r} refused" + (f" ({err})" if err else "")
        if note not in res["notes"] and len(res["notes"]) < 3:
            res["notes"].append(note)


# --------------------------------------------------------------------------- environment


def machine_info() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    vers = {}
    for p in ("gramc", "xgrammar", "llguidance", "outlines_core", "numpy", "torch", "tiktoken",
              "tokenizers", "matplotlib"):
        try:
            vers[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            vers[p] = None
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=False).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True, timeout=10, check=False).stdout.strip()
        if commit and dirty:
            commit += "+uncommitted changes in src/"
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "cpu_affinity": affinity, "python": platform.python_version(),
            "packages": vers, "gramc_git": commit, "loadavg_start": os.getloadavg(),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS")}}


def timer_overhead_us(n: int = 20000) -> float:
    """p50 of timing an (almost) empty C-level call the way masks are timed: included in every
    per-token number below."""
    f = functools.partial(int)
    samples = []
    for _ in range(n):
        t0 = perf_ns()
        f()
        samples.append(perf_ns() - t0)
    return float(np.percentile(samples, 50)) / 1e3


def preimport(engines) -> None:
    """Import everything up front so per-vocabulary setup times exclude module imports."""
    import gramc.api  # noqa: F401  (the compiler: imported lazily by gramc.compile)

    mods = {"xgrammar": ["torch", "xgrammar"], "llguidance": ["llguidance", "llguidance.numpy"],
            "outlines-core": ["outlines_core"]}
    for e in engines:
        for mod in mods.get(e, []):
            try:
                __import__(mod)
            except ImportError:
                pass  # reported by that engine's setup


# --------------------------------------------------------------------------- reporting


def _fmt(x, nd=2):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}"


def _ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.3f}×" if r < 0.1 else f"{r:.2f}×"


def markdown_tables(data: dict) -> str:
    mi = data["machine"]
    pk = mi["packages"]
    out = [(f"Machine: {mi['cpu']}, {mi['cpu_count']} CPUs ({mi['platform']}, Python {mi['python']}); "
           f"single-threaded (load average at start {mi.get('loadavg_start', [float('nan')])[0]:.2f}). "
           f"gramc {pk.get('gramc')} (git {mi.get('gramc_git')}), xgrammar {pk.get('xgrammar')}, "
           f"llguidance {pk.get('llguidance')}, outlines-core {pk.get('outlines_core')}, "
           f"numpy {pk.get('numpy')}, torch {pk.get('torch')}. "
           f"{data['config']['reps']} walks per example (first one cold, excluded from p50/p99), "
           f"compile/load: median of up to {data['config']['repeat']}. Timing an empty call costs "
           f"{data['config'].get('timer_overhead_us', float('nan')):.2f} µs (p50), included in every µs figure."),
           "",
           ("Ratio columns are gramc's time ÷ the peer's (fastest peer for masks, slowest for compile): "
            "below 1× gramc is faster. ⚠ marks a row whose engine refused part of a valid example "
            "(see the correctness notes). Peers: " + ", ".join(PEERS) + "."),
           ""]
    for vkey, vres in data["vocabs"].items():
        out.append(f"### {vkey} ({vres['vocab_size']:,} ids)")
        out.append("")
        out.append("| regex | engine | compile ms best / median | size KB | load ms | 1st mask µs "
                   "| mask p50 µs | mask p99 µs "
                   "| commit p50 µs | gramc ÷ fastest peer, mask p50 | gramc ÷ fastest peer, mask p99 "
                   "| gramc compile ÷ slowest peer |")
        out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        by = {(r["engine"], r["regex"]): r for r in vres["results"]}
        for rname in data["regexes"]:
            cells = [by.get((e, rname)) for e in PEERS]
            peers = [r for r in cells if r and not r.get("fatal") and r.get("mask_us")]
            best50 = min((p["mask_us"]["p50"] for p in peers), default=None)
            best99 = min((p["mask_us"]["p99"] for p in peers), default=None)
            slow_c = max((p["compile_ms"]["median"] for p in peers), default=None)
            for e in ENGINES:
                r = by.get((e, rname))
                if r is None:
                    continue
                if r.get("fatal"):
                    out.append(f"| {rname} | {e} | ERROR: {r['fatal']} |" + " |" * 9)
                    continue
                mark = " ⚠" if r["errors"] else ""
                size = r["size_bytes"] / 1024 if r["size_bytes"] is not None else None
                load = r["load_ms"]["median"] if r["load_ms"] else None
                m = r["mask_us"] or {}
                c = r["commit_us"] or {}
                is_g = e.startswith("gramc")
                out.append("| " + " | ".join([
                    rname, e + mark, f"{_fmt(r['compile_ms']['best'])} / {_fmt(r['compile_ms']['median'])}",
                    _fmt(size, 1), _fmt(load, 3),
                    _fmt(r["first_mask_us"]), _fmt(m.get("p50")), _fmt(m.get("p99")), _fmt(c.get("p50")),
                    _ratio(m.get("p50"), best50) if is_g else "",
                    _ratio(m.get("p99"), best99) if is_g else "",
                    _ratio(r["compile_ms"]["median"], slow_c) if is_g else "",
                ]) + " |")
        out.append("")
        setup = ", ".join(f"{k} {v:.0f} ms" for k, v in vres["setup_ms"].items())
        out.append(f"Per-vocabulary setup (not in compile ms): {setup}.")
        out.append("")
    return "\n".join(out)


def disagreement_report(data: dict) -> str:
    lines = []
    for vkey, vres in data["vocabs"].items():
        for r in vres["results"]:
            for e in r.get("errors", []):
                lines.append(f"- ERROR {vkey}/{r['regex']}/{r['engine']}: {e}")
            for n in r.get("notes", []):
                lines.append(f"- note {vkey}/{r['regex']}/{r['engine']}: {n}")
            ag = r.get("agreement_with_gramc")
            if not ag or (not ag["steps_differing"] and not ag["eos_steps_differing"]):
                continue
            lines.append(f"- {vkey}/{r['regex']}/{r['engine']} vs gramc: {ag['steps_differing']}/{ag['steps']} steps "
                         f"differ on non-EOS tokens (+{ag['extra_tokens']} allowed only by {r['engine']}, "
                         f"-{ag['missing_tokens']} allowed only by gramc); EOS differs at {ag['eos_steps_differing']} steps")
            for ex in ag["examples"][:2]:
                lines.append(f"    - {ex['text']!r} after {ex['prefix']}: {r['engine']} allows {ex['engine_allowed']}, "
                             f"gramc {ex['gramc_allowed']}; extra {ex['extra_count']} ({ex['extra_nonascii']} non-ASCII) "
                             f"e.g. {', '.join(ex['extra_sample'][:5])}; missing {ex['missing_count']} "
                             f"e.g. {', '.join(ex['missing_sample'][:5])}; EOS {r['engine']} {ex['eos_engine']} "
                             f"vs gramc {ex['eos_gramc']}")
    return "\n".join(lines) if lines else "- none"


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vkeys = list(data["vocabs"])
    regexes = list(data["regexes"])
    colors = {"gramc": "#1b7837", "gramc-lazy": "#7fbf7b", "xgrammar": "#2166ac", "llguidance": "#b2182b",
              "outlines-core": "#e08214"}
    fig, axes = plt.subplots(1, len(vkeys), figsize=(6.5 * len(vkeys), 4.6), squeeze=False, sharey=True)
    width = 0.8 / len(ENGINES)
    for ax, vkey in zip(axes[0], vkeys):
        by = {(r["engine"], r["regex"]): r for r in data["vocabs"][vkey]["results"]}
        for j, e in enumerate(ENGINES):
            xs, p50, p99, hatch = [], [], [], []
            for i, rn in enumerate(regexes):
                r = by.get((e, rn))
                if not r or r.get("fatal") or not r.get("mask_us"):
                    continue
                xs.append(i + (j - (len(ENGINES) - 1) / 2) * width)
                p50.append(r["mask_us"]["p50"])
                p99.append(r["mask_us"]["p99"])
                hatch.append("///" if r["errors"] else "")
            bars = ax.bar(xs, p50, width * 0.95, color=colors[e], label=f"{e} p50")
            for bar, h in zip(bars, hatch):
                if h:
                    bar.set_hatch(h)
                    bar.set_edgecolor("white")
            ax.scatter(xs, p99, marker="_", s=120, color="black", zorder=3,
                       label="p99" if j == 0 else None)
            ax.vlines(xs, p50, p99, color="black", linewidth=0.8, zorder=2)
        ax.set_yscale("log")
        ax.set_xticks(range(len(regexes)))
        ax.set_xticklabels(regexes)
        ax.set_title(f"{vkey} ({data['vocabs'][vkey]['vocab_size']:,} tokens)")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0][0].set_ylabel("mask time per token, µs (log; bar = p50, tick = p99)")
    from matplotlib.patches import Patch

    handles, labels = axes[0][-1].get_legend_handles_labels()
    handles.append(Patch(facecolor="grey", hatch="///", edgecolor="white"))
    labels.append("refused a valid example")
    axes[0][-1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Packed-bitmask computation per token, warm, single thread (lower is better)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="all", choices=["gpt2", "llama3", "all"])
    ap.add_argument("--repeat", type=int, default=5, help="compile/load repetitions (best/median)")
    ap.add_argument("--reps", type=int, default=200, help="walks per example (first is cold)")
    ap.add_argument("--compile-budget-s", type=float, default=15.0,
                    help="stop repeating a compile (or load) once it has used this much time")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset")
    ap.add_argument("--regexes", default=",".join(REGEXES), help="comma-separated subset")
    ap.add_argument("--out", default=None,
                    help="raw JSON (default bench/results/regex.json; regex-quick.json with --quick)")
    ap.add_argument("--md", default=None, help="markdown tables (default: --out with .md)")
    ap.add_argument("--plot", default=None,
                    help="PNG path (default docs/img/regex_mask_times.png; none with --quick); '' to skip")
    ap.add_argument("--quick", action="store_true", help="smoke run: --repeat 2 --reps 20")
    ap.add_argument("--from-json", default=None, help="re-render tables/plot from a results file")
    args = ap.parse_args(argv)
    log = functools.partial(print, file=sys.stderr, flush=True)

    if args.out is None:
        args.out = str(REPO / "bench/results" / ("regex-quick.json" if args.quick else "regex.json"))
    if args.plot is None:
        args.plot = "" if args.quick else str(REPO / "docs/img/regex_mask_times.png")

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        print(markdown_tables(data))
        print("\nCorrectness / agreement with gramc:\n" + disagreement_report(data))
        if args.plot:
            plot(data, Path(args.plot))
        return 0

    if args.quick:
        args.repeat, args.reps, args.compile_budget_s = 2, 20, 3.0
    engines = [e for e in args.engines.split(",") if e]
    if "gramc" not in engines:
        engines.insert(0, "gramc")  # the reference for agreement checks
    engines.sort(key=ENGINES.index)
    rnames = [r for r in args.regexes.split(",") if r]
    vkeys = ["gpt2", "llama3"] if args.vocab == "all" else [args.vocab]

    preimport(engines)
    t_start = time.time()
    data = {"machine": machine_info(),
            "config": {"repeat": args.repeat, "reps": args.reps, "compile_budget_s": args.compile_budget_s,
                       "quick": args.quick, "timer_overhead_us": timer_overhead_us(),
                       "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:])},
            "regexes": {r: REGEXES[r] for r in rnames},
            "examples": {r: EXAMPLES[r] for r in rnames},
            "engine_notes": {e: ADAPTERS[e].note for e in engines},
            "vocabs": {}}
    for vkey in vkeys:
        ctx = VocabCtx(vkey)
        log(f"[{vkey}] {ctx.size} ids, eos {ctx.eos}, {len(ctx.special)} special; tokenizer: {ctx.tokenizer_desc}")
        vres = {"vocab_size": ctx.size, "eos_ids": ctx.eos, "n_special": len(ctx.special),
                "gramc_vocab_load_ms": ctx.load_ms, "tokenizer": ctx.tokenizer_desc,
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
                for rn in rnames:
                    vres["results"].append({"engine": e, "regex": rn, "fatal": msg, "errors": [msg]})
        for rn in rnames:
            ref_masks: dict = {}
            for e, eng in adapters.items():
                try:
                    vres["results"].append(run_cell(eng, ctx, rn, REGEXES[rn], EXAMPLES[rn], args, ref_masks, log))
                except Exception as ex:  # noqa: BLE001
                    msg = f"{type(ex).__name__}: {ex}"
                    log(f"  {vkey} {rn} {e}: FAILED {msg}\n{traceback.format_exc()}")
                    vres["results"].append({"engine": e, "regex": rn, "fatal": msg, "errors": [msg]})
        data["vocabs"][vkey] = vres
        del adapters
        gc.collect()
    data["elapsed_s"] = time.time() - t_start
    data["machine"]["loadavg_end"] = os.getloadavg()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
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


if __name__ == "__main__":
    sys.exit(main())
