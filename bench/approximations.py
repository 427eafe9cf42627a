"""Which keywords gramc over-approximates on the MaskBench dev corpus, and why.

Every schema is lowered to gramc's IR (``schema_to_grammar`` with the default options: no
vocabulary, no automaton) with a per-schema time cap; each reported approximation is
counted by keyword and by reason (its figures and quoted names folded, so that one cause is
one row). The table says where gramc is not exact today and how often that matters.

    python bench/approximations.py                      # all dev schemas (~5-20 min)
    python bench/approximations.py --limit 300 --seed 0 # the dev sample of bench/maskbench.py
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import maskbench  # noqa: E402  (the corpus and its seeded sample)


class _Timeout(Exception):
    pass


def _alarm(*_args) -> None:
    raise _Timeout


def lower(schema, seconds: int) -> dict:
    """The approximations of one schema's lowering, or the error that stopped it."""
    from gramc.schemas import SchemaOptions, schema_to_grammar

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, approx = schema_to_grammar(schema, SchemaOptions())
        return {"approx": [[a.keyword, a.pointer, a.reason] for a in approx]}
    except _Timeout:
        return {"error": f"lowering took over {seconds} s"}
    except Exception as e:  # noqa: BLE001 - a census: every failure is a row, none stops it
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    finally:
        signal.alarm(0)


def reason_class(reason: str) -> str:
    """A reason with its figures, pointers and quoted names folded: one cause, one row."""
    folded = re.sub(r"'[^']*'", "'…'", reason)
    folded = re.sub(r"#[^\s,;]*", "#…", folded)  # JSON pointers
    folded = re.sub(r"\d[\d,_.]*", "N", folded)
    return folded.split("; to allow more")[0][:180]


def table(results: list[dict]) -> str:
    by_kw: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    schemas_kw: dict[str, set] = collections.defaultdict(set)
    schemas_reason: dict[tuple[str, str], set] = collections.defaultdict(set)
    for r in results:
        for kw, _pointer, reason in r.get("approx", ()):
            cls = reason_class(reason)
            by_kw[kw][cls] += 1
            schemas_kw[kw].add(r["id"])
            schemas_reason[kw, cls].add(r["id"])
    n = len(results)
    approximated = sum(1 for r in results if r.get("approx"))
    errors = collections.Counter(r["error"].split(":")[0] for r in results if "error" in r)
    lines = [f"{n} schemas lowered: {n - approximated - sum(errors.values())} exact, "
             f"{approximated} with at least one approximation, {sum(errors.values())} not lowered "
             f"({', '.join(f'{k} {v}' for k, v in errors.most_common()) or 'none'})", "",
             "| keyword | places | schemas | reason (figures folded) | places | schemas |",
             "|---|---:|---:|---|---:|---:|"]
    for kw, reasons in sorted(by_kw.items(), key=lambda kv: -len(schemas_kw[kv[0]])):
        first = True
        for cls, count in reasons.most_common():
            head = f"`{kw}` | {sum(reasons.values())} | {len(schemas_kw[kw])}" if first else " | |"
            lines.append(f"| {head} | {cls} | {count} | {len(schemas_reason[kw, cls])} |")
            first = False
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="a seeded random sample of N schemas")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=int, default=10, help="seconds per schema")
    parser.add_argument("--out", type=Path, default=maskbench.REPO / "bench/results/approximations.json",
                        help="per-schema results (JSON); the table goes beside it as .md")
    args = parser.parse_args()
    records = maskbench.select(maskbench.load_corpus(), limit=args.limit, seed=args.seed)
    results, t0 = [], time.monotonic()
    for i, rec in enumerate(records):
        schema = json.loads(rec["schema"]) if isinstance(rec["schema"], str) else rec["schema"]
        results.append({"id": rec["id"], **lower(schema, args.time_limit)})
        if (i + 1) % 500 == 0:
            print(f"{i + 1}/{len(records)} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    text = table(results)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=0))
    cmd = "python bench/approximations.py" + (f" --limit {args.limit} --seed {args.seed}" if args.limit else "")
    args.out.with_suffix(".md").write_text(f"`{cmd}`\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
