#!/usr/bin/env python
"""MaskBench: JSON Schema token masks, gramc against llguidance and xgrammar.

The protocol (issue 4): for each schema of ``maskbench.dev.jsonl.gz`` (5,555 JSONSchemaBench
schemas, each with valid and invalid instances):

1. compile it (TTFM, "time to first mask": schema text -> compiled matcher -> first mask filled;
   a per-schema time limit, 30 s by default, after which the worker is killed and the schema
   counts as a compile error);
2. for each test instance and for both serialisations, compact
   ``json.dumps(data, separators=(",", ":"), ensure_ascii=False)`` and default ``json.dumps(data)``
   (``", "``/``": "`` separators, ``ensure_ascii=True`` so non-ASCII is ``\\uXXXX``), tokenize the
   text with the Llama 3 tokenizer, then before each token fill the packed 32-bit mask (TBM, "time
   between masks", one sample per fill) and check the token is allowed; after the last token fill
   the mask once more: the text is *accepted* when every token was allowed (and committed) and the
   final mask allows an EOS id;
3. a valid instance must be accepted; an invalid one must not be (rejected at some token, or no
   EOS at the end).

Outcome per schema: ``passing``; ``compile error`` (the engine refused, failed, crashed or ran out
of time); ``invalidation error`` (some invalid instance accepted); ``validation error`` (some valid
instance rejected, and no invalid one accepted). A schema with both kinds of mistake is counted as
an invalidation error; the raw JSON keeps both flags.

Engine ``gramc-aot`` (issue 23) takes the ahead-of-time path instead: a compile server, forked once
from its warmed worker, forks a compile process per schema (default CompileOptions, eager binding; the
worker itself never forks again, so no page of it is left shared with a short-lived child), which
writes the ``.gmask`` to a temporary
directory; the compile time, the peak RSS of that process and the artifact's size are recorded; then
the worker loads the file with ``gramc.load()`` (load time) and runs the same protocol on the loaded matcher.
Its TTFM is the time from the start of the load to the first mask. The compile process is killed at the
compile time limit, or when its resident memory passes ``--aot-rss-cap-gb`` (a compile error either way).

Engines run in worker processes, one schema at a time each, so a hung or crashing compile can be
killed. With ``--workers 1`` (the default) one worker runs at a time and the parent only waits:
the timings are single-threaded measurements. ``--workers N`` (N > 1) runs N workers in parallel
for correctness-only runs; timing is then not reported.

Usage::

    python bench/maskbench.py --workers 2 --out bench/results/maskbench.full.json      # correctness
    python bench/maskbench.py --limit 300 --seed 0 --out bench/results/maskbench.timed.json  # timed
    python bench/maskbench.py --ids tests/data/maskbench_sample_ids.txt --engines gramc
    python bench/maskbench.py --limit 300 --seed 0 --engines gramc-aot,llguidance   # the .gmask path
    python bench/maskbench.py --update-baseline     # rewrite tests/data/maskbench_baseline.json
    python bench/maskbench.py --from-json bench/results/maskbench.timed.json        # re-print
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import collections
import gc
import gzip
import json
import multiprocessing
import multiprocessing.connection
import random
import re
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is on the path now)

CORPUS = SHARED / "corpora" / "maskbench.dev.jsonl.gz"
SAMPLE_IDS = REPO / "tests" / "data" / "maskbench_sample_ids.txt"
BASELINE = REPO / "tests" / "data" / "maskbench_baseline.json"
#: The vocabulary of the sample test and of --update-baseline (the protocol's vocabulary).
BASELINE_VOCAB = "llama3"

ENGINES = ["gramc", "llguidance", "xgrammar"]
ALL_ENGINES = ENGINES + ["gramc-lazy", "gramc-any", "gramc-any-eager", "gramc-any-strict", "gramc-aot"]
#: The engine every figure is compared against.
REFERENCE = "llguidance"
AOT = "gramc-aot"
#: Extra time the supervisor allows a gramc-aot worker past the compile limit (its own compile
#: process is killed at the limit; this covers loading a large artifact).
AOT_SUPERVISION_SLACK_S = 60.0
OUTCOMES = ["passing", "compile error", "validation error", "invalidation error"]
FRONTEND_MISSING = "json_schema frontend not available"

#: Options each engine is run with (recorded in the raw JSON and the docs).
ENGINE_OPTIONS = {
    "gramc": "gramc.compile(json.dumps(schema), format='json_schema', vocab=Vocab(llama3)) with default "
             "CompileOptions; art.matcher(max_rollback=0); Matcher.fill_bitmask / commit_token; "
             "gramc.errors.GramcWarning messages recorded",
    "gramc-lazy": "as gramc, with lazy=True (states bound on first use; same masks)",
    "gramc-any": "as gramc-lazy, with CompileOptions(json_property_order='any') (object members in any "
                 "order; objects with more than json_any_order_max_properties declared properties keep "
                 "schema order, with a warning)",
    "gramc-any-eager": "as gramc (every node bound at compile time), with "
                       "CompileOptions(json_property_order='any')",
    "gramc-any-strict": "as gramc-any, with CompileOptions(json_strict=True) as well: a schema "
                        "gramc would over-approximate (with a warning) is refused instead",
    "gramc-aot": "a process forked from the warmed worker runs gramc.compile(json.dumps(schema), "
                 "format='json_schema', vocab=Vocab(llama3)) with default CompileOptions (eager) and "
                 "Artifact.save(tmp .gmask), killed past the compile limit or the RSS cap; the worker then "
                 "times gramc.load(path, vocab=Vocab(llama3)) and runs art.matcher(max_rollback=0) as gramc",
    "llguidance": "LLMatcher(LLTokenizer(gramc token bytes, eos=all EOS ids), "
                  "LLMatcher.grammar_from_json_schema(json.dumps(schema), "
                  "defaults={'whitespace_flexible': True}), log_level=0) — otherwise llguidance's "
                  "defaults (lenient=False, coerce_one_of=False); compile error = is_error() after "
                  "construction; llguidance.numpy.fill_next_token_bitmask / consume_token",
    "xgrammar": "GrammarCompiler(TokenizerInfo(gramc token bytes, RAW, stop_token_ids=EOS ids), "
                "max_threads=1, cache_enabled=False).compile_json_schema(json.dumps(schema), "
                "any_whitespace=True, strict_mode=False, any_order=False); GrammarMatcher; "
                "fill_next_token_bitmask / accept_token",
}

perf_ns = time.perf_counter_ns


# --------------------------------------------------------------------------- corpus


def load_corpus(path: Path = CORPUS) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_ids(path: Path) -> list[str]:
    return [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def select(records: list[dict], ids: list[str] | None = None, limit: int | None = None,
           seed: int = 0) -> list[dict]:
    """``ids`` (in that order), else a seeded random sample of ``limit`` (in corpus order), else all."""
    if ids is not None:
        by_id = {r["id"]: r for r in records}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SystemExit(f"{len(missing)} ids not in the corpus, e.g. {missing[:3]}")
        return [by_id[i] for i in ids]
    if limit is not None and limit < len(records):
        keep = set(random.Random(seed).sample(range(len(records)), limit))
        return [r for i, r in enumerate(records) if i in keep]
    return list(records)


def with_keyword(records: list[dict], keyword: str) -> list[dict]:
    """The records whose schema has ``keyword: true`` somewhere (as a keyword or not: a
    filter for a bench, not a schema walk)."""
    def has(node) -> bool:
        if isinstance(node, dict):
            return node.get(keyword) is True or any(has(v) for v in node.values())
        return isinstance(node, list) and any(has(v) for v in node)

    return [r for r in records if has(r["schema"] if not isinstance(r["schema"], str) else json.loads(r["schema"]))]


def serialisations(data) -> list[tuple[str, str]]:
    """The protocol's two texts of an instance (one when they are the same string)."""
    compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    default = json.dumps(data)
    return [("compact", compact)] if compact == default else [("compact", compact), ("default", default)]


# --------------------------------------------------------------------------- engines (in workers)


class EngineError(Exception):
    """A compile error, with the engine's error class name (and figures measured before it)."""

    def __init__(self, cls: str, message: str, record: dict | None = None):
        super().__init__(message)
        self.cls = cls
        self.message = message
        self.record = record or {}


class GramcAdapter:
    name = "gramc"
    lazy = False
    #: CompileOptions fields, as (name, value) pairs (empty: the defaults).
    options: tuple = ()

    def __init__(self, check_only: bool = False):
        #: ``--check-only``: compile unbound and check whole texts (:meth:`check_texts`), no masks.
        self.check_only = check_only

    def setup(self, ctx) -> dict:
        import gramc
        import gramc.api  # noqa: F401  (the compiler)

        self.gramc, self.ctx = gramc, ctx
        if ctx is not None:
            self.row = np.zeros(ctx.words, dtype=np.int32)
            self.words = self.row.view(np.uint32)
        self.available = True
        try:
            gramc.compile('{"type": "string"}', format="json_schema", vocab=ctx and ctx.vocab, lazy=self.lazy)
        except gramc.GramcError as e:
            if "unknown source format" in str(e):
                self.available = False
            # any other error: the frontend exists; per-schema errors are reported per schema
        return {"json_schema_frontend": self.available}

    def compile(self, text: str):
        if not self.available:
            raise EngineError("StandIn", FRONTEND_MISSING)
        gramc = self.gramc
        from gramc.errors import GramcWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GramcWarning)
            try:
                art = gramc.compile(text, format="json_schema", vocab=self.ctx.vocab, lazy=self.lazy,
                                    options=self.compile_options())
            except gramc.GramcError as e:
                raise EngineError(type(e).__name__, str(e)) from None
        warns = [str(w.message) for w in caught if issubclass(w.category, GramcWarning)]
        self.kind, self.art = art.kind, art
        return art.matcher(max_rollback=0), warns

    def served(self) -> dict | None:
        """A PDA artifact's first-seen configurations by the strategy that served them (read
        after the timed fills: which strategies the tail comes from)."""
        table = self.art.token_table if self.art.kind == "pda" else None
        return dict(table.served) if table is not None else None

    def check_texts(self, text: str, texts: list[str]) -> tuple[list, list[str]]:
        """``--check-only``: compile ``text`` unbound (no vocabulary, so no masks) and check
        each of ``texts`` whole with :func:`gramc.runtime.check.check_artifact` (the grammar
        and the artifact's runtime side conditions): per text, None when accepted, else the
        byte offset where it stops matching; and the compile's warnings."""
        from gramc.errors import GramcWarning
        from gramc.runtime.check import check_artifact

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GramcWarning)
            try:
                art = self.gramc.compile(text, format="json_schema", options=self.compile_options())
            except self.gramc.GramcError as e:
                raise EngineError(type(e).__name__, str(e)) from None
        self.kind = art.kind
        verdicts = []
        for t in texts:
            got = check_artifact(art, t.encode("utf-8"))
            verdicts.append(None if got.ok else got.offset)
        return verdicts, [str(w.message) for w in caught if issubclass(w.category, GramcWarning)]

    def compile_options(self):
        if not self.options:
            return None
        from gramc.compiler.pipeline import CompileOptions

        return CompileOptions(**dict(self.options))

    def fill(self, m):
        m.fill_bitmask(self.row)

    def commit(self, m, t) -> bool:
        return bool(m.commit_token(t))

    def complete(self, m) -> bool | None:
        return bool(m.is_complete())

    def reset(self, m):
        m.reset()
        return m


class GramcLazyAdapter(GramcAdapter):
    name = "gramc-lazy"
    lazy = True


class GramcAnyAdapter(GramcLazyAdapter):
    name = "gramc-any"
    options = (("json_property_order", "any"),)


class GramcAnyEagerAdapter(GramcAdapter):
    name = "gramc-any-eager"
    options = GramcAnyAdapter.options


class GramcAnyStrictAdapter(GramcLazyAdapter):
    name = "gramc-any-strict"
    options = GramcAnyAdapter.options + (("json_strict", True),)


class GramcAotAdapter(GramcAdapter):
    """The ahead-of-time path: compile to a ``.gmask`` in a separate process, then ``gramc.load()``.

    The compile runs in a process forked from this (warmed) worker: the vocabulary, imports and
    compiled code are already there, so ``compile_s`` is the compile itself and
    ``compile_peak_rss_mb`` the peak resident memory of a process holding the vocabulary and
    compiling (wait4's ru_maxrss; ``compile_start_rss_mb`` is what it started with, the worker's
    own resident memory at the fork). After each compile, ``aot_record`` holds the per-schema figures
    and ``load_started_ns`` the clock reading that TTFM counts from."""

    name = AOT
    #: How often the compile process's resident memory is checked against the cap, seconds.
    POLL_S = 0.02

    def __init__(self, tmp_dir: str, compile_limit_s: float = 30.0, rss_cap_gb: float = 6.0):
        super().__init__()
        self.tmp = Path(tmp_dir) / f"worker-{os.getpid()}"
        self.compile_limit_s = compile_limit_s
        self.rss_cap_bytes = int(rss_cap_gb * 2**30)
        self.page = os.sysconf("SC_PAGE_SIZE")

    def setup(self, ctx) -> dict:
        info = super().setup(ctx)
        self.tmp.mkdir()
        if self.available:  # warm the eager compile, save and load paths of both artifact kinds
            for warm in ('{"type": "string", "maxLength": 4}',
                         '{"type": "object", "properties": {"a": {"type": "integer"}}}'):
                path = self.tmp / "warm.gmask"
                self.gramc.compile(warm, format="json_schema", vocab=ctx.vocab).save(path)
                self.gramc.load(path, vocab=ctx.vocab).matcher(max_rollback=0).fill_bitmask(self.row)
                path.unlink()
            self._start_compile_server()
        return {**info, "rss_cap_gb": self.rss_cap_bytes / 2**30, "compile_limit_s": self.compile_limit_s}

    def _start_compile_server(self) -> None:
        """Fork, once, the process that forks each schema's compile process.

        Forked from the worker itself, every compile would leave the worker's pages shared
        copy-on-write with a child: the next writes to them (the load, the first masks) then
        fault, about 1,500 minor faults and 2-7 ms in ``gramc.load`` of a 5 KB artifact, a
        cost of the harness that a serving process does not pay. Forked from this server,
        compiles share nothing with the worker after its first few writes."""
        server, self._server = multiprocessing.Pipe()
        pid = os.fork()
        if pid == 0:  # the compile server: never returns
            code = 0
            try:
                _die_with_parent()
                self._server.close()
                while (request := server.recv()) is not None:
                    server.send(self._compile_in_child(*request))
            except BaseException:  # noqa: BLE001  (nothing may escape a forked child)
                code = 1
            os._exit(code)
        server.close()

    def compile(self, text: str):
        if not self.available:
            raise EngineError("StandIn", FRONTEND_MISSING)
        self.aot_record = None
        path = self.tmp / "schema.gmask"
        try:
            self._server.send((text, path))
            rec = self._server.recv()
            if "error_class" in rec:
                cls, msg = rec.pop("error_class"), rec.pop("error")
                raise EngineError(cls, msg, rec)
            warns = rec.pop("warnings")
            rec["artifact_bytes"] = path.stat().st_size
            self.load_started_ns = perf_ns()
            cpu_started_ns = time.thread_time_ns()
            try:
                art = self.gramc.load(path, vocab=self.ctx.vocab)
            except self.gramc.GramcError as e:
                raise EngineError(type(e).__name__, f"gramc.load: {e}", rec) from None
            rec["load_ms"] = (perf_ns() - self.load_started_ns) / 1e6
            rec["load_cpu_ms"] = (time.thread_time_ns() - cpu_started_ns) / 1e6
        finally:
            path.unlink(missing_ok=True)
        self.kind, self.art = art.kind, art
        self.aot_record = rec
        return art.matcher(max_rollback=0), warns

    def _compile_in_child(self, text: str, path: Path) -> dict:
        """Fork, compile ``text`` to ``path`` in the child; the child's figures, or its error."""
        start_rss = self._rss(os.getpid())
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the compile process: never returns
            os.close(rfd)
            code = 0
            try:
                _die_with_parent()
                out = json.dumps(self._child_compile(text, path)).encode()
                with os.fdopen(wfd, "wb") as f:
                    f.write(out)
            except BaseException:  # noqa: BLE001  (nothing may escape a forked child)
                code = 1
            os._exit(code)
        os.close(wfd)
        t0 = time.monotonic()
        chunks, killed, peak_seen = [], None, 0
        with os.fdopen(rfd, "rb", buffering=0) as r:
            while True:
                if multiprocessing.connection.wait([r], timeout=self.POLL_S):
                    chunk = r.read(1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    continue
                peak_seen = max(peak_seen, self._rss(pid))
                if peak_seen > self.rss_cap_bytes:
                    killed = "rss"
                elif time.monotonic() - t0 > self.compile_limit_s:
                    killed = "timeout"
                if killed:
                    os.kill(pid, signal.SIGKILL)
                    break
        _, status, usage = os.wait4(pid, 0)
        wall_s = time.monotonic() - t0
        peak_mb = max(usage.ru_maxrss * 1024, peak_seen) / 2**20  # ru_maxrss is in KiB on Linux
        rec = {"compile_wall_s": wall_s, "compile_peak_rss_mb": peak_mb, "compile_start_rss_mb": start_rss / 2**20}
        if killed == "rss":
            return {**rec, "error_class": "MemoryCap",
                    "error": f"compile process passed the RSS cap of {self.rss_cap_bytes / 2**30:g} GiB "
                             f"after {wall_s:.1f} s (killed)"}
        if killed == "timeout":
            return {**rec, "error_class": "Timeout",
                    "error": f"timeout: compile took more than {self.compile_limit_s:g} s"}
        if not chunks:
            how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                   else f"exit code {os.waitstatus_to_exitcode(status)}")
            return {**rec, "error_class": "Crash", "error": f"compile process died ({how})"}
        return {**rec, **json.loads(b"".join(chunks))}

    def _rss(self, pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * self.page
        except (OSError, IndexError, ValueError):
            return 0  # exited between the select and the read

    def _child_compile(self, text: str, path: Path) -> dict:
        """In the compile process: compile with default options, save; figures or the error."""
        gc.enable()  # the worker disables it around each schema; a compile process runs with it
        gramc = self.gramc
        from gramc.errors import GramcWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GramcWarning)
            t0 = perf_ns()
            try:
                art = gramc.compile(text, format="json_schema", vocab=self.ctx.vocab)
                t1 = perf_ns()
                art.save(path)
            except gramc.GramcError as e:
                return {"error_class": type(e).__name__, "error": str(e)[:2000]}
            except MemoryError:
                return {"error_class": "MemoryError", "error": "MemoryError during compile"}
            t2 = perf_ns()
        warns = [str(w.message) for w in caught if issubclass(w.category, GramcWarning)]
        return {"compile_s": (t1 - t0) / 1e9, "save_s": (t2 - t1) / 1e9, "warnings": warns[:20]}


class LlguidanceAdapter:
    name = "llguidance"

    def setup(self, ctx) -> dict:
        from regex_bench import LlguidanceEngine

        eng = LlguidanceEngine()
        eng.setup(ctx)
        self.llg, self.tok, self.ctx = eng.llg, eng.tok, ctx
        self.llnp = eng.llnp
        self.bm = np.zeros((1, ctx.words), dtype=np.int32)
        self.words = self.bm[0].view(np.uint32)
        self.grammar = None
        self.compile('{"type": "object", "properties": {"a": {"type": "integer"}}}')
        return {}

    def compile(self, text: str):
        llg = self.llg
        try:
            grammar = llg.LLMatcher.grammar_from_json_schema(text, defaults={"whitespace_flexible": True})
        except Exception as e:  # noqa: BLE001  (ValueError on bad JSON)
            raise EngineError(type(e).__name__, str(e)) from None
        m = llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise EngineError("LLMatcherError", m.get_error())
        self.grammar = grammar
        return m, []

    def fill(self, m):
        self.llnp.fill_next_token_bitmask(m, self.bm)

    def commit(self, m, t) -> bool:
        return bool(m.consume_token(t)) and not m.is_error()

    def complete(self, m) -> bool | None:
        return bool(m.is_accepting())

    def reset(self, m):
        if m.is_error():  # an errored matcher cannot be reset: build a new one (not timed)
            return self.llg.LLMatcher(self.tok, self.grammar, log_level=0)
        m.reset()
        return m


class XgrammarAdapter:
    name = "xgrammar"

    def setup(self, ctx) -> dict:
        from regex_bench import XgrammarEngine

        eng = XgrammarEngine()
        eng.setup(ctx)
        self.xgr, self.compiler, self.ctx = eng.xgr, eng.compiler, ctx
        self.bm = self.xgr.allocate_token_bitmask(1, ctx.size)
        self.words = self.bm.numpy()[0].view(np.uint32)
        self.compile('{"type": "object", "properties": {"a": {"type": "integer"}}}')
        return {}

    def compile(self, text: str):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                cg = self.compiler.compile_json_schema(text, any_whitespace=True, strict_mode=False,
                                                       any_order=False)
            except Exception as e:  # noqa: BLE001
                raise EngineError(type(e).__name__, str(e)) from None
        return self.xgr.GrammarMatcher(cg), [str(w.message) for w in caught]

    def fill(self, m):
        m.fill_next_token_bitmask(self.bm)

    def commit(self, m, t) -> bool:
        return bool(m.accept_token(t))

    def complete(self, m) -> bool | None:
        return None  # no such query: the EOS bit of the final mask decides

    def reset(self, m):
        m.reset()
        return m


ADAPTERS = {"gramc": GramcAdapter, "gramc-lazy": GramcLazyAdapter, "gramc-any": GramcAnyAdapter,
            "gramc-any-eager": GramcAnyEagerAdapter, "gramc-any-strict": GramcAnyStrictAdapter,
            AOT: GramcAotAdapter,
            "llguidance": LlguidanceAdapter, "xgrammar": XgrammarAdapter}


def _die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux), so that a killed worker
    leaves no compile process behind."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _allowed(words: np.ndarray, t: int) -> bool:
    return bool((int(words[t >> 5]) >> (t & 31)) & 1)


def walk(ad, m, ids: list[int], eos: list[int], tbm: list[int], commits: list[int], first: list | None):
    """Run one tokenised text through matcher ``m``: (verdict, position, note).

    Verdicts: ``accepted`` (every token allowed and committed, EOS allowed at the end),
    ``rejected`` (the mask refused the token at ``position``), ``incomplete`` (no EOS at the end),
    ``commit-refused`` (the mask allowed the token but the commit failed). Each mask fill is timed
    into ``tbm``, except the first one when ``first`` is given (that one ends the TTFM clock; its
    end time and its duration are appended to ``first``); each commit into ``commits``."""
    words = ad.words
    fill = ad.fill
    n = len(ids)
    for pos in range(n + 1):
        t0 = perf_ns()
        fill(m)
        t1 = perf_ns()
        if first is not None:
            first += (t1, t1 - t0)
            first = None
        else:
            tbm.append(t1 - t0)
        if pos == n:
            eos_ok = any(_allowed(words, e) for e in eos)
            note = None
            c = ad.complete(m)
            if c is not None and c != eos_ok:
                note = f"is_complete()={c} but EOS {'allowed' if eos_ok else 'not allowed'} in the final mask"
            return ("accepted" if eos_ok else "incomplete"), pos, note
        t = ids[pos]
        if not _allowed(words, t):
            return "rejected", pos, None
        t0 = perf_ns()
        ok = ad.commit(m, t)
        commits.append(perf_ns() - t0)
        if not ok:
            return "commit-refused", pos, f"mask allowed token {t} at position {pos} but the commit was refused"
    raise AssertionError("unreachable")


def check_schema(ad, rec: dict, conn) -> dict:
    """``--check-only``: the protocol's outcome for one schema from whole-text checks of both
    serialisations of each instance (no tokenizer, no masks, no timing)."""
    texts = [(ti, bool(test["valid"]), kind, text) for ti, test in enumerate(rec["tests"])
             for kind, text in serialisations(test["data"])]
    res = {"id": rec["id"], "n_tests": len(rec["tests"]), "n_texts": len(texts)}
    try:
        verdicts, warns = ad.check_texts(json.dumps(rec["schema"]), [t for *_, t in texts])
    except EngineError as e:
        conn.send(("compiled", None))
        res.update(outcome="compile error", error_class=e.cls, error=e.message[:2000])
        return res
    conn.send(("compiled", None))
    res["warnings"] = warns[:20]
    res["kind"] = ad.kind
    failures_valid, failures_invalid = [], []
    for (ti, valid, kind, text), offset in zip(texts, verdicts):
        if valid and offset is not None:
            at = text.encode("utf-8")[:offset]
            failures_valid.append({"test": ti, "serialisation": kind, "verdict": "rejected", "offset": offset,
                                   "text": text[:300], "at": repr(at[-60:]), "data": rec["tests"][ti]["data"]})
        elif not valid and offset is None:
            failures_invalid.append({"test": ti, "serialisation": kind, "text": text[:300]})
    res["validation_failures"] = failures_valid[:5]
    res["invalidation_failures"] = failures_invalid[:5]
    res["n_validation_failures"] = len(failures_valid)
    res["n_invalidation_failures"] = len(failures_invalid)
    res["outcome"] = ("invalidation error" if failures_invalid else
                      "validation error" if failures_valid else "passing")
    return res


def run_schema(ad, ctx, rec: dict, conn) -> dict:
    """The protocol on one schema; sends ("compiled", ttfm_ns) to the parent once compiled."""
    if getattr(ad, "check_only", False):
        return check_schema(ad, rec, conn)
    texts = []
    for ti, test in enumerate(rec["tests"]):
        for kind, text in serialisations(test["data"]):
            texts.append((ti, bool(test["valid"]), kind, text, ctx.tokenize(text)))
    schema_text = json.dumps(rec["schema"])
    res = {"id": rec["id"], "n_tests": len(rec["tests"]), "n_texts": len(texts)}
    gc.collect()
    gc.disable()
    try:
        t0 = perf_ns()
        try:
            m, warns = ad.compile(schema_text)
        except EngineError as e:
            dt = perf_ns() - t0
            conn.send(("compiled", None))
            res.update(e.record)
            res.update(outcome="compile error", error_class=e.cls, error=e.message[:2000], compile_fail_ms=dt / 1e6)
            return res
        except MemoryError:
            conn.send(("compiled", None))
            res.update(outcome="compile error", error_class="MemoryError", error="MemoryError during compile")
            return res
        if getattr(ad, "aot_record", None) is not None:  # the ahead-of-time path: TTFM from the load
            res.update(ad.aot_record)
            t0 = ad.load_started_ns
        first: list[int] = []
        tbm: list[int] = []
        commits: list[int] = []
        if not texts:
            t1 = perf_ns()
            ad.fill(m)
            first += (perf_ns(), perf_ns() - t1)
        res["warnings"] = warns[:20]
        if getattr(ad, "kind", None):
            res["kind"] = ad.kind  # gramc: "dfa" or "pda" (recursive schema)
        failures_valid, failures_invalid, notes = [], [], []
        n_tokens = 0
        for k, (ti, valid, kind, text, ids) in enumerate(texts):
            if k == 0:
                verdict, pos, note = walk(ad, m, ids, ctx.eos, tbm, commits, first)
                ttfm = first[0] - t0
                conn.send(("compiled", ttfm))
                res["ttfm_ms"] = ttfm / 1e6
                res["first_mask_ms"] = first[1] / 1e6
            else:
                m = ad.reset(m)
                verdict, pos, note = walk(ad, m, ids, ctx.eos, tbm, commits, None)
            n_tokens += len(ids)
            if note and len(notes) < 5:
                notes.append(f"test {ti} {kind}: {note}")
            accepted = verdict == "accepted"
            if valid and not accepted:
                failures_valid.append({"test": ti, "serialisation": kind, "verdict": verdict, "position": pos,
                                       "n_tokens": len(ids), "text": text[:300],
                                       "at": repr(b"".join(ctx.vocab.tokens[t] for t in ids[:pos])[-60:])})
            elif not valid and accepted:
                failures_invalid.append({"test": ti, "serialisation": kind, "text": text[:300]})
        if not texts:
            ttfm = first[0] - t0
            conn.send(("compiled", ttfm))
            res["ttfm_ms"] = ttfm / 1e6
            res["first_mask_ms"] = first[1] / 1e6
        served = ad.served() if hasattr(ad, "served") else None
        if served:
            res["served"] = served
    finally:
        gc.enable()
    res["n_tokens"] = n_tokens
    res["validation_failures"] = failures_valid[:5]
    res["invalidation_failures"] = failures_invalid[:5]
    res["n_validation_failures"] = len(failures_valid)
    res["n_invalidation_failures"] = len(failures_invalid)
    if notes:
        res["notes"] = notes
    res["outcome"] = ("invalidation error" if failures_invalid else
                      "validation error" if failures_valid else "passing")
    res["tbm_ns"] = tbm
    res["commit_ns"] = commits
    return res


def portable_traceback() -> str:
    """The current traceback with file paths made machine-independent (results are committed):
    relative to the repository for its own files, ``<site-packages>/...`` for installed ones."""
    text = traceback.format_exc()
    text = re.sub(r'File "[^"]*?/((?:src/gramc|bench)/[^"]*)"', r'File "\1"', text)
    return re.sub(r'File "[^"]*/(?:site|dist)-packages/', 'File "<site-packages>/', text)


def worker_main(conn, engine: str, vocab_key: str, mem_limit_gb: float, adapter_options: dict) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if mem_limit_gb and engine.startswith("gramc"):
        import resource

        lim = int(mem_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    try:
        from regex_bench import VocabCtx

        ctx = None if adapter_options.get("check_only") else VocabCtx(vocab_key)  # checks need no tokenizer
        ad = ADAPTERS[engine](**adapter_options)
        info = ad.setup(ctx)
    except BaseException as e:  # noqa: BLE001
        conn.send(("setup-failed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", info))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        try:
            res = run_schema(ad, ctx, msg, conn)
        except BaseException as e:  # noqa: BLE001
            res = {"id": msg["id"], "outcome": "compile error", "error_class": "HarnessError",
                   "error": f"{type(e).__name__}: {e}"[:2000], "traceback": portable_traceback()[-3000:]}
            gc.enable()
        conn.send(("done", res))


# --------------------------------------------------------------------------- supervision (parent)


class Worker:
    def __init__(self, mp, engine, vocab_key, mem_limit_gb, adapter_options, setup_timeout=300):
        self.conn, child = mp.Pipe()
        self.proc = mp.Process(target=worker_main, args=(child, engine, vocab_key, mem_limit_gb, adapter_options),
                               daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(setup_timeout):
            self.kill()
            raise RuntimeError(f"{engine} worker setup timed out")
        kind, info = self.conn.recv()
        if kind != "ready":
            self.kill()
            raise RuntimeError(f"{engine} worker setup failed: {info}")
        self.info = info
        self.rec = None
        self.deadline = None
        self.phase = None
        self.started = None

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()


def preimport_gramc() -> None:
    """Import gramc's compiler and JSON Schema frontend in the parent, so that every forked worker
    (restarts included) runs the same code even if the source tree changes during a long run."""
    import gramc
    import gramc.api  # noqa: F401

    try:
        gramc.compile('{"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}',
                      format="json_schema")
    except gramc.GramcError:
        pass


def run_engine(engine: str, records: list[dict], *, workers: int = 1, vocab_key: str = "llama3",
               time_limit_s: float = 30.0, test_time_limit_s: float = 120.0, mem_limit_gb: float = 8.0,
               time_limits: dict[str, float] | None = None, aot_rss_cap_gb: float = 6.0, check_only: bool = False,
               log=print) -> dict:
    """Run ``records`` through ``engine`` in ``workers`` supervised processes: {id: result}.

    ``time_limits`` overrides the compile time limit of some ids (not for gramc-aot, whose worker
    enforces ``time_limit_s`` on its compile process; ``aot_rss_cap_gb`` caps that process's RSS).
    ``check_only`` (gramc engines but gramc-aot): whole-text checks, no masks (see :func:`check_schema`)."""
    if check_only:
        if not engine.startswith("gramc") or engine == AOT:
            raise ValueError(f"--check-only runs gramc's in-process engines only, not {engine}")
        return _run_engine(engine, records, workers, vocab_key, time_limit_s, test_time_limit_s, mem_limit_gb,
                           time_limits, {"check_only": True}, log)
    if engine == AOT:
        if time_limits:
            raise ValueError("per-id time limits are not supported for gramc-aot")
        import tempfile

        with tempfile.TemporaryDirectory(prefix="maskbench-aot-") as tmp:  # the .gmask files
            options = {"tmp_dir": tmp, "compile_limit_s": time_limit_s, "rss_cap_gb": aot_rss_cap_gb}
            return _run_engine(engine, records, workers, vocab_key, time_limit_s + AOT_SUPERVISION_SLACK_S,
                               test_time_limit_s, mem_limit_gb, None, options, log)
    return _run_engine(engine, records, workers, vocab_key, time_limit_s, test_time_limit_s, mem_limit_gb,
                       time_limits, {}, log)


def _run_engine(engine, records, workers, vocab_key, time_limit_s, test_time_limit_s, mem_limit_gb, time_limits,
                adapter_options, log) -> dict:
    mp = multiprocessing.get_context("fork")
    if engine.startswith("gramc"):
        preimport_gramc()
    t_start = time.monotonic()
    setup_t0 = time.monotonic()
    pool = [Worker(mp, engine, vocab_key, mem_limit_gb, adapter_options) for _ in range(workers)]
    setup_s = time.monotonic() - setup_t0
    info = pool[0].info
    todo = collections.deque(records)
    results: dict[str, dict] = {}
    restarts = 0
    last_log = time.monotonic()

    def finish(w, res):
        results[res["id"]] = res
        w.rec = w.deadline = w.phase = None

    def replace(w, res):
        nonlocal restarts
        w.kill()
        finish(w, res)
        restarts += 1
        for attempt in range(3):  # a replacement's setup can time out on a loaded machine
            try:
                pool[pool.index(w)] = Worker(mp, engine, vocab_key, mem_limit_gb, adapter_options)
                return
            except RuntimeError as e:
                if "timed out" not in str(e) or attempt == 2:
                    raise
                print(f"  {engine}: {e}; starting it again", file=sys.stderr, flush=True)

    try:
        while todo or any(w.rec is not None for w in pool):
            for w in pool:
                if w.rec is None and todo:
                    w.rec = todo.popleft()
                    w.phase = "compile"
                    w.started = time.monotonic()
                    w.limit = (time_limits or {}).get(w.rec["id"], time_limit_s)
                    w.deadline = w.started + w.limit
                    w.conn.send(w.rec)
            busy = [w for w in pool if w.rec is not None]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=timeout)
            for w in busy:
                if w.conn in ready:
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):
                        code = w.proc.exitcode
                        w.proc.join(5)
                        code = w.proc.exitcode if code is None else code
                        replace(w, {"id": w.rec["id"], "outcome": "compile error", "error_class": "Crash",
                                    "error": f"worker died during {w.phase} (exit code {code})"})
                        continue
                    if kind == "compiled":
                        w.phase = "tests"
                        w.deadline = time.monotonic() + test_time_limit_s
                    elif kind == "done":
                        finish(w, payload)
                elif time.monotonic() >= w.deadline:
                    lim = w.limit if w.phase == "compile" else test_time_limit_s
                    what = "compile" if w.phase == "compile" else "matching the test instances"
                    replace(w, {"id": w.rec["id"], "outcome": "compile error", "error_class": "Timeout",
                                "error": f"timeout: {what} took more than {lim:g} s"})
            if time.monotonic() - last_log > 30:
                last_log = time.monotonic()
                counts = collections.Counter(r["outcome"] for r in results.values())
                log(f"  {engine}: {len(results)}/{len(records)} done ({time.monotonic() - t_start:.0f} s) "
                    + ", ".join(f"{k} {v}" for k, v in counts.items()))
    finally:
        for w in pool:
            try:
                w.conn.send(None)
            except OSError:
                pass
            w.proc.join(5)
            w.kill()
    return {"engine": engine, "results": [results[r["id"]] for r in records], "restarts": restarts,
            "setup": info, "setup_s": setup_s, "wall_s": time.monotonic() - t_start}


# --------------------------------------------------------------------------- summaries


def _pct(values, qs) -> dict:
    if len(values) == 0:
        return {f"p{q:g}": None for q in qs}
    a = np.asarray(values, dtype=np.float64)
    return {f"p{q:g}": float(np.percentile(a, q)) for q in qs}


_QUOTED = re.compile(r"'[^']{31,}'|\"[^\"]{31,}\"|`[^`]{31,}`")  # long quoted text; short names stay
_NUM = re.compile(r"\b\d+(\.\d+)?\b")
_PTR = re.compile(r"#?/[^\s:,;]*")


def error_reason(res: dict) -> str:
    """A compile error message with long quoted text, pointers and numbers blanked, to group similar ones."""
    msg = res.get("error", "").split("\n")[0]
    if res.get("error_class") == "SchemaError" and ": " in msg:
        msg = msg.split(": ", 1)[1]  # the pointer prefix
    msg = _QUOTED.sub("…", msg)
    msg = _PTR.sub("<ptr>", msg)
    msg = _NUM.sub("N", msg)
    msg = re.sub(r"\s+", " ", msg).strip()
    return f"{res.get('error_class', '?')}: {msg[:160]}"


def summarize(run: dict, timed: bool) -> dict:
    res = run["results"]
    counts = collections.Counter(r["outcome"] for r in res)
    s = {"engine": run["engine"], "n": len(res), "outcomes": {k: counts.get(k, 0) for k in OUTCOMES},
         "schemas_with_validation_failure": sum(1 for r in res if r.get("n_validation_failures")),
         "schemas_with_invalidation_failure": sum(1 for r in res if r.get("n_invalidation_failures")),
         "schemas_with_warnings": sum(1 for r in res if r.get("warnings")),
         "invalidation_with_warnings": sum(1 for r in res if r.get("n_invalidation_failures") and r.get("warnings")),
         "timeouts": sum(1 for r in res if r.get("error_class") == "Timeout"),
         "crashes": sum(1 for r in res if r.get("error_class") == "Crash"),
         "restarts": run.get("restarts", 0), "setup": run.get("setup"), "wall_s": run.get("wall_s"),
         "tokens": sum(r.get("n_tokens", 0) for r in res)}
    reasons = collections.Counter(error_reason(r) for r in res if r["outcome"] == "compile error")
    s["compile_error_reasons"] = [{"reason": k, "count": v, "ids": [r["id"] for r in res if
                                                                     r["outcome"] == "compile error" and
                                                                     error_reason(r) == k][:8]}
                                  for k, v in reasons.most_common(25)]
    s["mistakes"] = [{"id": r["id"], "outcome": r["outcome"], "warned": bool(r.get("warnings")),
                      "first": (r.get("invalidation_failures") or r.get("validation_failures"))[0]}
                     for r in res if r["outcome"] in ("validation error", "invalidation error")]
    s["consistency_notes"] = [{"id": r["id"], "notes": r["notes"]} for r in res if r.get("notes")][:20]
    if timed:
        s.update(timing(res))
        ttfm = [r["ttfm_ms"] for r in res if r.get("ttfm_ms") is not None]
        s["ttfm_ms"].update(mean=float(np.mean(ttfm)) if ttfm else None, max=max(ttfm) if ttfm else None)
    return s


#: The ahead-of-time figures of a gramc-aot record: (record field, summary key, scale to the unit).
AOT_FIELDS = (("compile_s", "compile_s", 1.0), ("compile_peak_rss_mb", "compile_peak_rss_mb", 1.0),
              ("artifact_bytes", "artifact_mb", 1 / 2**20), ("load_ms", "load_ms", 1.0),
              ("load_cpu_ms", "load_cpu_ms", 1.0))


def timing(res: list[dict]) -> dict:
    """The timing summaries of some results of one engine: TTFM, first mask, TBM and commit
    percentiles, and for gramc-aot the compile, peak RSS, artifact size and load (p50/p90/max)."""
    def pooled(key):
        a = np.concatenate([np.asarray(r.get(key, []), dtype=np.float64) for r in res] or [np.zeros(0)]) / 1e3
        return {**_pct(a, (50, 90, 99, 99.9)), "mean": float(a.mean()) if a.size else None,
                "max": float(a.max()) if a.size else None, "n": int(a.size)}

    ttfm = [r["ttfm_ms"] for r in res if r.get("ttfm_ms") is not None]
    first = [r["first_mask_ms"] for r in res if r.get("first_mask_ms") is not None]
    out = {"ttfm_ms": {**_pct(ttfm, (50, 90, 99)), "n": len(ttfm)},
           "first_mask_ms": {**_pct(first, (50, 90, 99)), "n": len(first)},
           "tbm_us": pooled("tbm_ns"), "commit_us": pooled("commit_ns")}
    for field, key, scale in AOT_FIELDS:
        v = [r[field] * scale for r in res if r.get(field) is not None]
        if v:
            out[key] = {**_pct(v, (50, 90)), "max": max(v), "n": len(v)}
    return out


def common_timing(runs: list[dict]) -> dict | None:
    """The timing summaries per engine over the schemas that every engine compiled."""
    if len(runs) < 2:
        return None
    ok = None
    for run in runs:
        ids = {r["id"] for r in run["results"] if r.get("ttfm_ms") is not None}
        ok = ids if ok is None else ok & ids
    out = {"n_schemas": len(ok), "engines": {}}
    for run in runs:
        out["engines"][run["engine"]] = timing([r for r in run["results"] if r["id"] in ok])
    return out


#: The figures compared with the reference engine's: (label, section, key).
RATIO_FIGURES = (("TTFM p50", "ttfm_ms", "p50"), ("first mask p50", "first_mask_ms", "p50"),
                 ("TBM p50", "tbm_us", "p50"), ("TBM p99", "tbm_us", "p99"), ("TBM p99.9", "tbm_us", "p99.9"),
                 ("commit p50", "commit_us", "p50"), ("commit p99", "commit_us", "p99"))


def versus_reference(figures: dict[str, dict]) -> dict[str, dict[str, float | None]]:
    """Each engine's RATIO_FIGURES divided by the reference engine's ({} without it). For gramc-aot
    also its compile p50 and its load p50 against the reference's TTFM p50 (its compile)."""
    ref = figures.get(REFERENCE)
    if not ref:
        return {}

    def ratio(a, b):
        return a / b if a is not None and b else None

    out = {}
    for e, f in figures.items():
        r = {label: ratio((f.get(sec) or {}).get(k), (ref.get(sec) or {}).get(k)) for label, sec, k in RATIO_FIGURES}
        if "compile_s" in f:
            ref_ttfm = (ref.get("ttfm_ms") or {}).get("p50")
            r["compile p50 / TTFM p50"] = ratio(f["compile_s"]["p50"] * 1e3, ref_ttfm)
            r["load p50 / TTFM p50"] = ratio(f["load_ms"]["p50"] if "load_ms" in f else None, ref_ttfm)
        out[e] = r
    return out


def _f(x, nd=2):
    if x is None:
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}"


def markdown(data: dict) -> str:
    out = []
    sums = data["summaries"]
    n = data["n_schemas"]
    mi = data.get("machine", {})
    la = mi.get("loadavg_start"), mi.get("loadavg_end")
    out.append(f"{n:,} schemas ({data['selection']}), vocabulary {data['vocab']}, "
               f"{data['n_tests']:,} test instances, workers {data['workers']}, "
               f"time limit {data['time_limit_s']:g} s compile / {data['test_time_limit_s']:g} s matching. "
               f"Machine: {mi.get('cpu')}, {mi.get('cpu_count')} CPUs; load average "
               f"{la[0][0] if la[0] else float('nan'):.2f} at start"
               + (f", {la[1][0]:.2f} at end" if la[1] else "") + f"; gramc git {mi.get('gramc_git')}.")
    if data.get("merged_from"):
        out.append("Merged from separate runs of the same schemas: "
                   + "; ".join(f"{', '.join(m['engines'])} (gramc git {m['gramc_git']}"
                               + (f", `python bench/maskbench.py {' '.join(m['argv'])}`" if m.get("argv") else "") + ")"
                               for m in data["merged_from"])
                   + ".")
    out.append("")
    out.append("| engine | " + " | ".join(OUTCOMES) + " |")
    out.append("|---|" + "---:|" * len(OUTCOMES))
    for s in sums:
        cells = [f"{s['outcomes'][k]:,} ({100 * s['outcomes'][k] / max(1, s['n']):.1f}%)" for k in OUTCOMES]
        out.append(f"| {s['engine']} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Schemas with at least one valid instance rejected / invalid instance accepted (a schema can "
               "have both): " + "; ".join(f"{s['engine']} {s['schemas_with_validation_failure']} / "
                                          f"{s['schemas_with_invalidation_failure']}" for s in sums) + ".")
    warned = [f"{s['engine']} {s.get('invalidation_with_warnings', 0)} of {s['schemas_with_invalidation_failure']}"
              for s in sums if s["engine"].startswith("gramc") and s["schemas_with_invalidation_failure"]]
    if warned:
        out.append("Invalidation errors where the compile had issued a GramcWarning (a reported over-approximation): "
                   + "; ".join(warned) + ".")
    extra = [f"{s['engine']}: {s['timeouts']} timeouts, {s['crashes']} crashes"
             + (f", {s['schemas_with_warnings']} schemas with warnings" if s["schemas_with_warnings"] else "")
             for s in sums]
    out.append("Compile errors include " + "; ".join(extra) + ".")
    out.append("")
    if data["timed"]:
        out.append("| engine | TTFM p50 ms | p90 | p99 | schemas | TBM p50 µs | p90 | p99 | p99.9 | masks |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in sums:
            t, b = s["ttfm_ms"], s["tbm_us"]
            out.append(f"| {s['engine']} | {_f(t['p50'])} | {_f(t['p90'])} | {_f(t['p99'])} | {t['n']:,} | "
                       f"{_f(b['p50'])} | {_f(b['p90'])} | {_f(b['p99'])} | {_f(b['p99.9'])} | {b['n']:,} |")
        c = data.get("common")
        if c and c["n_schemas"]:
            out.append("")
            out.append(f"Over the {c['n_schemas']:,} schemas that every engine compiled:")
            out.append("")
            out.append("| engine | TTFM p50 ms | p90 | p99 | TBM p50 µs | p90 | p99 | p99.9 | masks |")
            out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for e, v in c["engines"].items():
                t, b = v["ttfm_ms"], v["tbm_us"]
                out.append(f"| {e} | {_f(t['p50'])} | {_f(t['p90'])} | {_f(t['p99'])} | "
                           f"{_f(b['p50'])} | {_f(b['p90'])} | {_f(b['p99'])} | {_f(b['p99.9'])} | {b['n']:,} |")
        out.append("")
        out.append("TTFM: schema text to compiled matcher to first mask filled (gramc-aot: `gramc.load()` of "
                   "the `.gmask` to first mask filled). TBM: every later mask fill (one per token, plus the final "
                   "EOS check), in µs.")
        out += detail_tables(data)
    else:
        out.append("Timing not reported: this run checked whole texts (--check-only: no masks)." if data.get("check_only")
                   else "Timing not reported: this run used more than one worker process (correctness only).")
    out.append("")
    for s in sums:
        if not s["engine"].startswith("gramc") or not s.get("mistakes"):
            continue
        out.append(f"{s['engine']}: schemas with a wrong verdict (first failing text; where it stopped):")
        out.append("")
        out.append("| id | outcome | text | stopped after |")
        out.append("|---|---|---|---|")
        for m in s["mistakes"][:40]:
            f = m["first"]
            where = "accepted" if m["outcome"] == "invalidation error" else f"{f['verdict']}: `{f['at'][-50:]}`"
            out.append(f"| {m['id']} | {m['outcome']}{' (warned)' if m['warned'] else ''} | {f['serialisation']} "
                       f"test {f['test']} | {where.replace('|', '/')} |")
        out.append("")
    for s in sums:
        if not s["compile_error_reasons"]:
            continue
        out.append(f"Top compile-error reasons, {s['engine']} ({s['outcomes']['compile error']:,} schemas):")
        out.append("")
        out.append("| count | reason | example ids |")
        out.append("|---:|---|---|")
        for r in s["compile_error_reasons"][:12]:
            reason = r["reason"].replace("|", "\\|")
            out.append(f"| {r['count']} | {reason} | {', '.join(r['ids'][:3])} |")
        out.append("")
    return "\n".join(out)


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def detail_tables(data: dict) -> list[str]:
    """First mask and commit times, gramc-aot's compile/RSS/artifact/load, and every figure
    against the reference engine's, pooled and over the schemas every engine compiled (runs saved
    before these figures existed get none of these tables)."""
    sums = [s for s in data["summaries"] if "commit_us" in s]
    if not sums:
        return []
    c = data.get("common") if data.get("common") and data["common"]["n_schemas"] else None
    scopes = [("all schemas each engine compiled", {s["engine"]: s for s in sums})]
    if c:
        scopes.append((f"the {c['n_schemas']:,} schemas every engine compiled", c["engines"]))
    out = []
    for scope, figs in scopes:
        out += ["", f"First mask and commit, {scope}:", "",
                "| engine | first mask p50 ms | p90 | p99 | commit p50 µs | p90 | p99 | p99.9 | commits |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for e, f in figs.items():
            fm, cm = f["first_mask_ms"], f["commit_us"]
            out.append(_row([e, _f(fm["p50"], 3), _f(fm["p90"], 3), _f(fm["p99"], 3), _f(cm["p50"]), _f(cm["p90"]),
                             _f(cm["p99"]), _f(cm["p99.9"]), f"{cm['n']:,}"]))
        aot = {e: f for e, f in figs.items() if "compile_s" in f}
        if aot:
            out += ["", f"Ahead-of-time figures, {scope} (compile and peak RSS include the schemas whose "
                        "compile failed, where measured):", "",
                    "| engine | compile p50 s | p90 | max | peak RSS p50 MiB | p90 | max | artifact p50 MiB | p90 "
                    "| max | load p50 ms | p90 | max | load CPU p50 ms | p90 | max |",
                    "|---|" + "---:|" * 15]
            for e, f in aot.items():
                cells = [e]
                for key in ("compile_s", "compile_peak_rss_mb", "artifact_mb", "load_ms", "load_cpu_ms"):
                    v = f.get(key) or {}
                    cells += [_f(v.get("p50")), _f(v.get("p90")), _f(v.get("max"))]
                out.append(_row(cells))
            start = [r["compile_start_rss_mb"] for e in aot for r in data.get("results", {}).get(e, [])
                     if r.get("compile_start_rss_mb") is not None]
            if start and figs is scopes[0][1]:
                out += ["", f"The peak RSS counts what the compile process started with: the worker's own resident "
                            f"memory at the fork (vocabulary, tokenizer, imports), {min(start):,.0f} to "
                            f"{max(start):,.0f} MiB."]
        ratios = versus_reference(figs)
        if ratios:
            labels = list(dict.fromkeys(k for r in ratios.values() for k in r))
            where = "in the merged runs" if data.get("merged_from") else "in the same run"
            out += ["", f"Against {REFERENCE} {where}, {scope} (engine / {REFERENCE}; below 1 is faster):",
                    "", _row(["engine"] + labels), "|---|" + "---:|" * len(labels)]
            for e, r in ratios.items():
                out.append(_row([e] + [f"{r[k]:.2f}x" if r.get(k) is not None else "-" for k in labels]))
    return out


#: The per-mask timings a run keeps beside its JSON (``.timings.npz``), per result.
TIMING_KEYS = ("tbm_ns", "commit_ns")


def timings_path(out: Path) -> Path:
    return out.with_suffix(".timings.npz")


def save_timings(path: Path, runs: list[dict]) -> None:
    """Each engine's per-mask timings, flattened in result order with the count per result."""
    arrays = {}
    for run in runs:
        for key in TIMING_KEYS:
            parts = [np.asarray(r.get(key, []), dtype=np.int64) for r in run["results"]]
            arrays[f"{run['engine']}:{key}"] = np.concatenate(parts or [np.zeros(0, np.int64)])
            arrays[f"{run['engine']}:{key}:n"] = np.array([len(p) for p in parts], dtype=np.int64)
    np.savez_compressed(path, **arrays)


def attach_timings(data: dict, path: Path) -> None:
    """Put the per-mask timings saved by ``save_timings`` back into a loaded run's results."""
    with np.load(path) as z:
        for engine, results in data["results"].items():
            for key in TIMING_KEYS:
                counts = z[f"{engine}:{key}:n"]
                if len(counts) != len(results):
                    raise SystemExit(f"{path}: {engine} has {len(counts)} results, the JSON {len(results)}")
                for r, part in zip(results, np.split(z[f"{engine}:{key}"], np.cumsum(counts)[:-1])):
                    r[key] = part


def load_run(path: Path) -> dict:
    """A saved run, with its per-mask timings when its ``.timings.npz`` is beside it."""
    data = json.loads(Path(path).read_text())
    data["has_timings"] = timings_path(Path(path)).exists()
    if data["has_timings"]:
        attach_timings(data, timings_path(Path(path)))
    return data


def merge(runs: list[dict]) -> dict:
    """Several saved runs of the same schemas as one (engines side by side). When every run has
    its per-mask timings, the figures over the schemas every engine compiled and the comparisons
    with the reference engine are computed again for the merged set of engines."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    for r in runs[1:]:
        if r["selection"] != first["selection"] or r["n_schemas"] != first["n_schemas"]:
            raise SystemExit(f"cannot merge runs of different selections: {first['selection']!r} / {r['selection']!r}")
    data = dict(first)
    data["summaries"] = [s for r in runs for s in r["summaries"]]
    data["results"] = {e: v for r in runs for e, v in r["results"].items()}
    data["engine_options"] = {e: v for r in runs for e, v in r["engine_options"].items()}
    data["timed"] = all(r["timed"] for r in runs)
    data["common"] = None
    data.pop("versus_reference", None)
    if data["timed"] and all(r.get("has_timings") for r in runs):
        merged = [{"engine": e, "results": rs} for e, rs in data["results"].items()]
        data["common"] = common_timing(merged)
        data["versus_reference"] = versus_reference_all(data["summaries"], data["common"])
    data["merged_from"] = [{"argv": r.get("argv"), "engines": [s["engine"] for s in r["summaries"]],
                            "gramc_git": r["machine"].get("gramc_git")} for r in runs]
    return data


def machine_info() -> dict:
    from regex_bench import machine_info as mi

    return mi()


# --------------------------------------------------------------------------- baseline (the sample test)


#: The engine of the sample test: lazy binding gives the same masks as eager and compiles faster.
BASELINE_ENGINE = "gramc-lazy"
#: In the sample test, ids that were compile errors in the baseline get this short compile limit,
#: and the others this long one (a loaded CI machine must not turn a pass into a timeout).
RETRY_LIMIT_S = 5.0
RATCHET_LIMIT_S = 120.0


def sample_outcomes(records: list[dict], *, workers: int = 2, vocab_key: str = BASELINE_VOCAB,
                    time_limit_s: float = 30.0, baseline: dict | None = None, log=print) -> dict:
    """gramc's outcome per sample schema (correctness only). With ``baseline``, ids that were compile
    errors there get only RETRY_LIMIT_S seconds to compile (a ratchet needs no more), the others
    RATCHET_LIMIT_S; without it, every id gets ``time_limit_s``."""
    limits = None
    if baseline is not None:
        limits = {i: RETRY_LIMIT_S if o == "compile error" else RATCHET_LIMIT_S
                  for i, o in baseline.get("outcomes", {}).items()}
    run = run_engine(BASELINE_ENGINE, records, workers=workers, vocab_key=vocab_key, time_limit_s=time_limit_s,
                     test_time_limit_s=120.0, time_limits=limits, log=log)
    return {r["id"]: r for r in run["results"]}


def update_baseline(args) -> int:
    ids = read_ids(SAMPLE_IDS)
    records = select(load_corpus(Path(args.corpus)), ids=ids)
    t0 = time.monotonic()
    outcomes = sample_outcomes(records, workers=args.workers, time_limit_s=args.time_limit, log=print)
    passing = sorted(i for i, r in outcomes.items() if r["outcome"] == "passing")
    inval = sorted(i for i, r in outcomes.items() if r["outcome"] == "invalidation error")
    data = {"passing": len(passing), "ids_passing": passing, "n": len(ids), "vocab": BASELINE_VOCAB,
            "engine": BASELINE_ENGINE, "time_limit_s": args.time_limit,
            "gramc_git": machine_info().get("gramc_git"),
            "note": "written by `python bench/maskbench.py --update-baseline`; "
                    "tests/test_maskbench_sample.py fails if a listed id stops passing",
            "outcomes": {i: outcomes[i]["outcome"] for i in ids}}
    if inval:
        print(f"WARNING: invalidation errors in the sample: {inval}")
    BASELINE.write_text(json.dumps(data, indent=1) + "\n")
    counts = collections.Counter(r["outcome"] for r in outcomes.values())
    print(f"wrote {BASELINE}: {len(passing)}/{len(ids)} passing; {dict(counts)} ({time.monotonic() - t0:.0f} s)")
    return 0


def write_sample_ids(args) -> int:
    records = load_corpus(Path(args.corpus))
    ids = [r["id"] for r in select(records, limit=args.write_sample_ids, seed=args.seed)]
    SAMPLE_IDS.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_IDS.write_text(f"# {len(ids)} MaskBench dev ids: python bench/maskbench.py "
                          f"--write-sample-ids {args.write_sample_ids} --seed {args.seed}\n" + "\n".join(ids) + "\n")
    print(f"wrote {len(ids)} ids to {SAMPLE_IDS}")
    return 0


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--limit", type=int, help="a random sample of N schemas (drawn with --seed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ids", help="a file of schema ids, one a line ('#' comments)")
    ap.add_argument("--keyword", help="only the schemas that use this keyword with the value true "
                    "(e.g. uniqueItems), after the other selection")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {ALL_ENGINES}")
    ap.add_argument("--workers", type=int, default=1,
                    help="worker processes per engine; >1 = correctness only (timing not reported)")
    ap.add_argument("--vocab", default="llama3", choices=["llama3", "gpt2"])
    ap.add_argument("--time-limit", type=float, default=30.0, help="per-schema compile limit, seconds")
    ap.add_argument("--test-time-limit", type=float, default=120.0,
                    help="per-schema limit for matching all its instances, seconds")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit of gramc workers")
    ap.add_argument("--aot-rss-cap-gb", type=float, default=6.0,
                    help="gramc-aot: a compile process whose resident memory passes this is killed (a compile "
                         "error); it also inherits the worker's --mem-limit-gb address-space limit")
    ap.add_argument("--check-only", action="store_true",
                    help="correctness only, fast: compile each schema unbound and check every instance's two "
                         "texts whole (grammar and runtime side conditions), no tokenizer, no masks, no timing; "
                         "gramc engines only (not gramc-aot)")
    ap.add_argument("--out", help="raw JSON (default bench/results/maskbench.json); a .md is written beside it")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="re-print the tables of a saved run; several runs of the same selection are merged "
                         "(outcomes side by side; timing shown only when every run was timed; the figures over the "
                         "schemas every engine compiled only when every run has its .timings.npz)")
    ap.add_argument("--update-baseline", action="store_true",
                    help="rewrite tests/data/maskbench_baseline.json from a gramc run of the sample ids")
    ap.add_argument("--write-sample-ids", type=int, metavar="N",
                    help="draw N ids with --seed into tests/data/maskbench_sample_ids.txt")
    args = ap.parse_args(argv)

    if args.from_json:
        data = merge([load_run(Path(p)) for p in args.from_json])
        md = markdown(data)
        print(md)
        if args.out:
            out = Path(args.out)
            if data.pop("has_timings", False) and data.get("merged_from"):
                save_timings(timings_path(out), [{"engine": e, "results": rs} for e, rs in data["results"].items()])
            data["results"] = {e: [_saved(r) for r in rs] for e, rs in data["results"].items()}
            out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            out.with_suffix(".md").write_text(md + "\n")
        return 0
    if args.write_sample_ids:
        return write_sample_ids(args)
    if args.update_baseline:
        return update_baseline(args)

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ADAPTERS]
    if bad:
        raise SystemExit(f"unknown engines {bad}; choose from {ALL_ENGINES}")
    records = load_corpus(Path(args.corpus))
    if args.ids:
        chosen = select(records, ids=read_ids(Path(args.ids)))
        selection = f"ids from {args.ids}"
    else:
        chosen = select(records, limit=args.limit, seed=args.seed)
        selection = (f"random sample of {args.limit} of {len(records):,}, seed {args.seed}"
                     if args.limit and args.limit < len(records) else f"all of {Path(args.corpus).name}")
    if args.keyword:
        chosen = with_keyword(chosen, args.keyword)
        selection += f", those with {args.keyword}: true"
    timed = args.workers == 1 and not args.check_only
    print(f"MaskBench: {len(chosen)} schemas ({selection}), engines {engines}, workers {args.workers}"
          + ("" if timed else " (correctness only)") + (", whole-text checks" if args.check_only else ""),
          flush=True)
    machine = machine_info()
    out = Path(args.out) if args.out else REPO / "bench" / "results" / "maskbench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"protocol": __doc__.split("Usage::")[0].strip(), "selection": selection, "vocab": args.vocab,
            "n_schemas": len(chosen), "n_tests": sum(len(r["tests"]) for r in chosen), "workers": args.workers,
            "timed": timed, "check_only": args.check_only, "time_limit_s": args.time_limit, "test_time_limit_s": args.test_time_limit,
            "aot_rss_cap_gb": args.aot_rss_cap_gb, "machine": machine,
            "argv": sys.argv[1:] if argv is None else argv}
    runs = []
    for e in engines:
        t0 = time.monotonic()
        run = run_engine(e, chosen, workers=args.workers, vocab_key=args.vocab, time_limit_s=args.time_limit,
                         test_time_limit_s=args.test_time_limit, mem_limit_gb=args.mem_limit_gb,
                         aot_rss_cap_gb=args.aot_rss_cap_gb, check_only=args.check_only,
                         log=lambda s: print(s, flush=True))
        runs.append(run)
        c = collections.Counter(r["outcome"] for r in run["results"])
        print(f"{e}: {dict(c)} in {time.monotonic() - t0:.0f} s", flush=True)
        data = assemble(meta, runs, timed)
        md = markdown(data)
        out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")  # after each engine: a long
        out.with_suffix(".md").write_text(md + "\n")                         # run keeps what it finished
        save_timings(timings_path(out), runs)
    print()
    print(md)
    print(f"\nwrote {out}, {out.with_suffix('.md')} and {timings_path(out)}")
    return 0


def assemble(meta: dict, runs: list[dict], timed: bool) -> dict:
    """The saved form of some engines' runs: summaries, comparisons and per-schema results (without
    the per-mask timings)."""
    data = {**meta, "engine_options": {run["engine"]: ENGINE_OPTIONS[run["engine"]] for run in runs}}
    data["machine"] = {**meta["machine"], "loadavg_end": os.getloadavg()}
    data["summaries"] = [summarize(run, timed) for run in runs]
    data["common"] = common_timing(runs) if timed else None
    if timed:
        data["versus_reference"] = versus_reference_all(data["summaries"], data["common"])
    data["results"] = {run["engine"]: [_saved(r) for r in run["results"]] for run in runs}
    return data


def versus_reference_all(summaries: list[dict], common: dict | None) -> dict:
    return {"reference": REFERENCE, "pooled": versus_reference({s["engine"]: s for s in summaries}),
            "common": versus_reference(common["engines"]) if common else {}}


def _saved(res: dict) -> dict:
    """A result as saved: no per-mask timings, and a traceback only for harness errors."""
    drop = set(TIMING_KEYS) | ({"traceback"} if res.get("error_class") != "HarnessError" else set())
    return {k: v for k, v in res.items() if k not in drop}


if __name__ == "__main__":
    sys.exit(main())
