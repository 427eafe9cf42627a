#!/usr/bin/env python
"""Soak: one process compiles (lazy) and serves MaskBench dev schemas one after another, and
records its resident memory (RSS) as it goes, to show that bounded caches bound the process.

Per schema (in corpus order): ``gramc.compile(schema, format="json_schema", vocab=..., lazy=True,
runtime_limits=...)``, then up to ``--instances`` (3) valid instances served: a fresh matcher, and
before each token (and once after the last) the packed mask filled and the token checked, then
committed. Artifacts are kept in an LRU of ``RuntimeLimits.compiled_grammars`` as the vLLM
processor keeps them, so the most recently used grammars stay alive with their caches, as in a
server. Instances are tokenised greedily (the longest vocabulary token that prefixes the rest of
the text): a valid tokenisation, without the model's tokenizer. Every ``--every`` schemas the RSS
(``/proc/self/statm``) is sampled twice: as it is, and after glibc's ``malloc_trim(0)`` hands
freed heap back to the system (what the live objects hold; a compile's transient peak otherwise
stays in the heap). Schemas the compiler refuses are counted and skipped, and those whose
compile and serving raised the process's peak RSS by more than 256 MiB are listed.

Usage::

    python bench/soak.py                          # 1,000 schemas, Llama 3, default limits
    python bench/soak.py -n 200 --vocab gpt2 --every 10 --out /tmp/soak.json
    python bench/soak.py -n 300 --tiny            # every cache at 1-4 entries (eviction stress)

Writes ``--out`` (JSON: settings, RSS samples, cache statistics summed over the kept
artifacts at the end) and a markdown summary beside it (``.md``).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gzip
import json
import os
import platform
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GRAMC_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpora" / "maskbench.dev.jsonl.gz"
VOCABS = {"gpt2": "gpt2", "llama3": str(SHARED / "vocabs" / "llama3-tokenizer.json")}


def tiny_limits():
    """Every runtime cache at 1-4 entries (the interned sets and stack-DFA states at 16, a fresh
    start every few masks): eviction on nearly every mask."""
    import gramc

    return gramc.RuntimeLimits(mask_rows=2, bool_masks=1, walk_rows=2, interned_sets=16, stack_dfa_states=16,
                               node_slices=4, node_rows=4, shared_slice_shapes=4, counted_shapes=2, dfa_rows=4,
                               dense_row_bytes=0, compiled_grammars=2, commit_steps=2)


def load_schemas(limit: int | None = None, path: Path = CORPUS) -> list[dict]:
    """The first ``limit`` records of the dev corpus (id, schema, tests)."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
                if limit is not None and len(out) >= limit:
                    break
    return out


def valid_texts(record: dict, n: int) -> list[str]:
    """The compact serialisations of the record's first ``n`` valid instances."""
    texts = [json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
             for t in record["tests"] if t["valid"]]
    return texts[:n]


class GreedyTokenizer:
    """Longest-match tokenisation over a vocabulary's non-special tokens."""

    def __init__(self, vocab):
        self.ids: dict[bytes, int] = {}
        for i, tb in enumerate(vocab.tokens):
            if tb and i not in vocab.special_ids:
                self.ids.setdefault(tb, i)
        self.longest = max(map(len, self.ids))

    def __call__(self, text: str) -> list[int] | None:
        """Token ids spelling ``text`` (None when some byte is in no token)."""
        data, pos, out = text.encode("utf-8"), 0, []
        while pos < len(data):
            for end in range(min(len(data), pos + self.longest), pos, -1):
                t = self.ids.get(data[pos:end])
                if t is not None:
                    out.append(t)
                    pos = end
                    break
            else:
                return None
        return out


def serve(art, ids: list[int], eos: list[int], trace: list | None = None) -> str:
    """Drive a fresh matcher of ``art`` through ``ids``: "accepted" (every token allowed, EOS
    at the end), "rejected" or "incomplete". Each packed mask filled is appended to ``trace``
    (as bytes) when given."""
    m = art.matcher(max_rollback=0)
    words = np.zeros((art.vocab.size + 31) // 32, dtype=np.uint32)
    for pos in range(len(ids) + 1):
        m.fill_bitmask(words)
        if trace is not None:
            trace.append(words.tobytes())
        if pos == len(ids):
            return "accepted" if any(words[e >> 5] >> (e & 31) & 1 for e in eos) else "incomplete"
        t = ids[pos]
        if not (words[t >> 5] >> (t & 31)) & 1 or not m.commit_token(t):
            return "rejected"
    raise AssertionError("unreachable")


def rss_mb() -> float:
    """Resident memory now, in MiB (peak RSS where /proc is absent)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: Caches shared by every artifact of a vocabulary: each artifact reports the same one.
PROCESS_WIDE = ("shared_slice_shapes", "counted_shapes")


def trimmed_rss_mb() -> float:
    """Resident memory after returning freed heap to the system (glibc only; else as is)."""
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass
    return rss_mb()


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summed_stats(arts) -> dict[str, dict[str, int]]:
    """Per cache name: entries, evictions and resets summed over ``arts`` (the largest, for a
    process-wide cache)."""
    out: dict[str, dict[str, int]] = {}
    for art in arts:
        for name, st in art.cache_stats().items():
            acc = out.setdefault(name, {})
            for k, v in st.items():
                if k != "max_entries":
                    acc[k] = max(acc.get(k, 0), v) if name in PROCESS_WIDE else acc.get(k, 0) + v
    return out


def soak(records: list[dict], vocab, limits, *, instances: int = 3, every: int = 25, compile_seconds: float = 60.0,
         log=print) -> dict:
    """Compile and serve ``records`` in turn; the run's samples and counts."""
    import gramc
    import gramc.limits
    from gramc.runtime.cache import LRUCache

    tokenize = GreedyTokenizer(vocab)
    eos = sorted(vocab.eos_ids)
    evicted_stats: dict[str, dict[str, int]] = {}

    def note_evicted(_, art):
        for name, st in summed_stats([art]).items():
            acc = evicted_stats.setdefault(name, {})
            for k, v in st.items():
                if k != "entries":
                    acc[k] = acc.get(k, 0) + v

    kept = LRUCache(limits.compiled_grammars, note_evicted)  # as the vLLM processor keeps its grammars
    compile_limits = gramc.limits.Limits(max_compile_seconds=compile_seconds)
    counts = {"compiled": 0, "compile_errors": 0, "instances": 0, "accepted": 0, "not_accepted": 0,
              "untokenisable": 0, "tokens": 0}
    samples = [{"schemas": 0, "seconds": 0.0, "rss_mb": round(rss_mb(), 1), "trimmed_mb": round(trimmed_rss_mb(), 1)}]
    spikes = []
    t0 = time.monotonic()
    for i, rec in enumerate(records, 1):
        peak_before = peak_mb()
        try:
            art = gramc.compile(json.dumps(rec["schema"]), format="json_schema", vocab=vocab, lazy=True,
                                limits=compile_limits, runtime_limits=limits)
        except gramc.GramcError:
            counts["compile_errors"] += 1
            art = None
        if art is not None:
            counts["compiled"] += 1
            kept.put(rec["id"], art)
            for text in valid_texts(rec, instances):
                ids = tokenize(text)
                if ids is None:
                    counts["untokenisable"] += 1
                    continue
                verdict = serve(art, ids, eos)
                counts["instances"] += 1
                counts["tokens"] += len(ids)
                counts["accepted" if verdict == "accepted" else "not_accepted"] += 1
        if peak_mb() > peak_before + 256:
            spikes.append({"id": rec["id"], "kind": getattr(art, "kind", None), "peak_mb": round(peak_mb(), 1),
                           "raised_by_mb": round(peak_mb() - peak_before, 1)})
        if i % every == 0 or i == len(records):
            sample = {"schemas": i, "seconds": round(time.monotonic() - t0, 1), "rss_mb": round(rss_mb(), 1),
                      "trimmed_mb": round(trimmed_rss_mb(), 1)}
            samples.append(sample)
            log(f"{i:5d} schemas  {sample['seconds']:7.1f} s  RSS {sample['rss_mb']:7.1f} MiB  "
                f"trimmed {sample['trimmed_mb']:7.1f} MiB")
    stats = summed_stats(kept.values())
    for name, st in evicted_stats.items():
        acc = stats.setdefault(name, {})
        for k in ("evictions", "resets"):
            if k in st and name not in PROCESS_WIDE:
                acc[k] = acc.get(k, 0) + st[k]
    return {"counts": counts, "samples": samples, "cache_stats": stats, "peak_spikes": spikes,
            "peak_rss_mb": round(peak_mb(), 1)}


def markdown(run: dict) -> str:
    s = run["settings"]
    c = run["counts"]
    rss = [x["rss_mb"] for x in run["samples"]]
    trimmed = [x["trimmed_mb"] for x in run["samples"]]
    half = trimmed[len(trimmed) // 2:]
    lines = [
        "# Soak: compile and serve MaskBench dev schemas in one process",
        "",
        f"{s['schemas']} schemas ({s['vocab']}, lazy, {s['limits_name']} RuntimeLimits), up to "
        f"{s['instances']} valid instances each; {run['seconds']:.0f} s on {run['machine']}.",
        "",
        f"- compiled {c['compiled']}, compile errors {c['compile_errors']}; instances served {c['instances']} "
        f"({c['tokens']} tokens), accepted {c['accepted']}, not accepted {c['not_accepted']}, "
        f"untokenisable {c['untokenisable']}",
        f"- RSS after malloc_trim (live memory): start {trimmed[0]:.0f} MiB, max {max(trimmed):.0f} MiB, "
        f"end {trimmed[-1]:.0f} MiB; second half min/max {min(half):.0f}/{max(half):.0f} MiB",
        f"- RSS as sampled: max {max(rss):.0f} MiB, end {rss[-1]:.0f} MiB; peak (ru_maxrss) "
        f"{run['peak_rss_mb']:.0f} MiB",
        "- schemas that raised the peak by more than 256 MiB: " + (", ".join(
            f"{x['id']} ({x['kind']}, +{x['raised_by_mb']:.0f} to {x['peak_mb']:.0f} MiB)"
            for x in run["peak_spikes"]) or "none"),
        "",
        "| schemas | seconds | RSS MiB | after malloc_trim MiB |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {x['schemas']} | {x['seconds']:.0f} | {x['rss_mb']:.0f} | {x['trimmed_mb']:.0f} |"
              for x in run["samples"]]
    lines += ["", "Cache statistics (summed over the artifacts kept at the end; evictions and resets also "
              "over those evicted before):", "", "| cache | entries | evictions | resets |", "|---|---:|---:|---:|"]
    for name, st in sorted(run["cache_stats"].items()):
        lines.append(f"| {name} | {st.get('entries', '')} | {st.get('evictions', '')} | {st.get('resets', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--schemas", type=int, default=1000, help="schemas, from the corpus start (default 1000)")
    ap.add_argument("--instances", type=int, default=3, help="valid instances served per schema (default 3)")
    ap.add_argument("--every", type=int, default=25, help="RSS sample every N schemas (default 25)")
    ap.add_argument("--vocab", choices=sorted(VOCABS), default="llama3")
    ap.add_argument("--compile-seconds", type=float, default=60.0, help="compile time limit per schema (default 60)")
    ap.add_argument("--tiny", action="store_true", help="every cache at 1-4 entries instead of the defaults")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "soak.json"))
    args = ap.parse_args(argv)
    if not CORPUS.exists():
        print(f"corpus not found: {CORPUS}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO / "src"))
    import gramc

    warnings.simplefilter("ignore", gramc.errors.GramcWarning)  # per-schema notes, not the soak's
    limits = tiny_limits() if args.tiny else gramc.RuntimeLimits()
    vocab = gramc.load_vocab(VOCABS[args.vocab])
    records = load_schemas(args.schemas)
    t0 = time.monotonic()
    run = soak(records, vocab, limits, instances=args.instances, every=args.every,
               compile_seconds=args.compile_seconds)
    run.update(seconds=round(time.monotonic() - t0, 1), machine=f"{platform.machine()}, {os.cpu_count()} CPUs",
               settings={"schemas": len(records), "instances": args.instances, "every": args.every,
                         "compile_seconds": args.compile_seconds,
                         "vocab": args.vocab, "limits_name": "tiny" if args.tiny else "default",
                         "limits": {k: getattr(limits, k) for k in limits.__dataclass_fields__}})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(run, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(run))
    print(markdown(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
