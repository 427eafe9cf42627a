"""Artifact load time: ``gramc.load(path, vocab=...)`` of MaskBench schemas' ``.gmask`` files.

Two steps, so that the same files can be loaded by two versions of gramc (a layout change)
and loads are timed back to back on a shared machine:

    python bench/aot_load.py compile --limit 40 --seed 0 --dir /tmp/gmask   # writes DIR/<id>.gmask
    python bench/aot_load.py load --dir /tmp/gmask --repeat 5               # times the loads

``compile`` compiles each schema of the MaskBench sample (the same draw as ``maskbench.py
--limit N --seed S``) with the default options, bound to Llama 3, one process for all, and
skips schemas that fail or pass ``--time-limit``. ``load`` loads every file ``--repeat``
times with the decoder's vocabulary (loaded once, as a decoder would) and reports, per file,
the median load on the thread's CPU clock (the machine is shared: CPU time is what the load
costs, wall time is what the scheduler adds) and on the wall clock, then p50/p90/max over the
files, split by artifact kind, and the artifact sizes.
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from maskbench import CORPUS, load_corpus, select  # noqa: E402
from shared_paths import SHARED  # noqa: E402

LLAMA3 = SHARED / "vocabs" / "llama3-tokenizer.json"


def _vocab():
    import gramc

    return gramc.load_vocab(str(LLAMA3))


def compile_sample(args) -> None:
    import gramc

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    records = select(load_corpus(Path(args.corpus)), limit=args.limit, seed=args.seed)

    def alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, alarm)
    for rec in records:
        path = out / f"{rec['id'].replace('/', '_')}.gmask"
        if path.exists():
            continue
        schema = rec["schema"] if isinstance(rec["schema"], str) else json.dumps(rec["schema"])
        signal.alarm(args.time_limit)
        try:
            t0 = time.perf_counter()
            art = gramc.compile(schema, format="json_schema", vocab=vocab)
            art.save(str(path))
            print(f"{rec['id']}: {art.kind} {path.stat().st_size:,} B in {time.perf_counter() - t0:.1f} s", flush=True)
        except (TimeoutError, gramc.GramcError) as e:
            print(f"{rec['id']}: skipped ({type(e).__name__})", flush=True)
        finally:
            signal.alarm(0)


def _pcts(values: list[float]) -> str:
    a = np.array(values)
    return f"p50 {np.percentile(a, 50):.2f}  p90 {np.percentile(a, 90):.2f}  max {a.max():.2f}"


def time_loads(args) -> None:
    import gramc

    vocab = _vocab()
    files = sorted(Path(args.dir).glob("*.gmask"))
    rows = []
    for path in files:
        gramc.load(str(path), vocab=vocab)  # warm: imports, the vocabulary's stored form
        cpu, wall = [], []
        for _ in range(args.repeat):
            gc.collect()
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            art = gramc.load(str(path), vocab=vocab)
            cpu.append((time.thread_time_ns() - c0) / 1e6)
            wall.append((time.perf_counter_ns() - w0) / 1e6)
        rows.append((path.stem, art.kind, path.stat().st_size, statistics.median(cpu), statistics.median(wall)))
        if args.verbose:
            print(f"{path.stem}: {art.kind} {path.stat().st_size:,} B cpu {rows[-1][3]:.2f} ms wall {rows[-1][4]:.2f} ms")
    print(f"{len(rows)} artifacts from {args.dir}, {args.repeat} loads each (median per file), gramc {gramc.__file__}")
    for kind in sorted({r[1] for r in rows}) + ["all"]:
        sel = [r for r in rows if kind in ("all", r[1])]
        print(f"{kind:>8} ({len(sel):3d}): load CPU ms {_pcts([r[3] for r in sel])} | wall ms "
              f"{_pcts([r[4] for r in sel])} | size KiB {_pcts([r[2] / 1024 for r in sel])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a MaskBench sample to DIR/<id>.gmask")
    c.add_argument("--corpus", default=str(CORPUS))
    c.add_argument("--limit", type=int, default=40)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--time-limit", type=int, default=30, help="per-schema compile limit, seconds")
    c.add_argument("--dir", required=True)
    ld = sub.add_parser("load", help="time gramc.load() of every DIR/*.gmask")
    ld.add_argument("--dir", required=True)
    ld.add_argument("--repeat", type=int, default=5)
    ld.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    (compile_sample if args.cmd == "compile" else time_loads)(args)


if __name__ == "__main__":
    main()
