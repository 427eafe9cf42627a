#!/usr/bin/env python
"""Classify MaskBench validation errors (a valid instance refused) by cause.

Reads the raw JSON of ``bench/maskbench.py --check-only`` runs (they record, per refused
text, the byte offset where gramc's artifact stopped matching and the instance itself) and
sorts each schema with a validation error into the first cause that explains its first
refused text:

- ``draft semantics``: the corpus calls the instance valid, but ``jsonschema``'s validator for
  the schema's own ``$schema`` draft says it is not (the label follows another draft);
- ``format annotation``: valid without format assertions, invalid with them
  (``jsonschema.FormatChecker``): gramc enforces a ``format`` the specification treats as an
  annotation;
- ``property order above the bound``: refused where a member name begins (or inside one, or
  at the comma before it, or at an early ``}``), in
  a compile that reported an object kept in schema order (``restricted 'properties'``, any
  order only); ``property order``: the same without such a report (schema order, or an
  undeclared member before a declared one);
- ``number``: refused inside or at the start of a number (at its end, by what follows it);
- ``string (pattern)`` / ``string``: refused inside a string value, with or without a
  ``pattern`` in the schema (regex dialect candidates: each is worth a look);
- ``other``.

Usage::

    python bench/maskbench.py --check-only --limit 1000 --seed 0 --engines gramc,gramc-any \\
        --time-limit 10 --test-time-limit 10 --out bench/results/maskbench.check1000.json
    python bench/maskbench_causes.py bench/results/maskbench.check1000.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from maskbench import CORPUS, load_corpus  # noqa: E402

CAUSES = ["draft semantics", "format annotation", "property order above the bound", "property order",
          "number", "string (pattern)", "string", "other"]


def position(text: str, offset: int) -> str:
    """What the JSON text is doing at byte ``offset``: ``key`` (a member name begins or is
    being written), ``number``, ``string`` (a string value), or ``structure``."""
    data = text.encode("utf-8")[:offset]
    stack: list[str] = []  # "{" or "["
    expect_key = False
    in_str = esc = is_key = False
    in_num = False
    for b in data:
        c = chr(b)
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if in_num and c not in "0123456789+-.eE":
            in_num = False
        if c == '"':
            in_str, is_key = True, bool(stack) and stack[-1] == "{" and expect_key
            if is_key:
                expect_key = False
        elif c in "{[":
            stack.append(c)
            expect_key = c == "{"
        elif c in "}]":
            stack.pop() if stack else None
        elif c == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif c in "-0123456789":
            in_num = True
    if in_str:
        return "key" if is_key else "string"
    nxt = text.encode("utf-8")[offset:offset + 1]
    if in_num and nxt and nxt in b"0123456789+-.eE":
        return "number"  # refused inside a number; at its end, what follows decides
    if expect_key or (nxt in (b",", b"}") and stack and stack[-1] == "{"):
        return "key"  # a member begins, or the comma before one (no member can follow), or an early }
    if nxt and (nxt in b"-0123456789"):
        return "number"
    if nxt == b'"':
        return "string"
    return "structure"


def has_key(node, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(has_key(v, key) for v in node.values())
    return isinstance(node, list) and any(has_key(v, key) for v in node)


def cause(schema, data, text: str, offset: int, warnings: list[str]) -> str:
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        if not cls(schema).is_valid(data):
            return "draft semantics"
        if not cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(data):
            return "format annotation"
    except Exception:  # noqa: BLE001  (a schema jsonschema cannot read: classify by position)
        pass
    where = position(text, offset)
    if where == "key":
        restricted = any("restricted 'properties'" in w or "restricted 'minProperties'" in w
                         or "restricted 'maxProperties'" in w for w in warnings)
        return "property order above the bound" if restricted else "property order"
    if where == "number":
        return "number"
    if where == "string":
        return "string (pattern)" if has_key(schema, "pattern") else "string"
    return "other"


def classify(run: dict, corpus: dict[str, dict]) -> dict[str, list[tuple[str, str]]]:
    """Per engine: [(schema id, cause)] of its schemas with a validation failure."""
    out: dict[str, list[tuple[str, str]]] = {}
    for engine, results in run["results"].items():
        rows = []
        for r in results:
            fails = r.get("validation_failures") or []
            if not fails or r.get("n_invalidation_failures"):
                continue
            f = fails[0]
            rec = corpus[r["id"]]
            data = f.get("data", rec["tests"][f["test"]]["data"])
            text = f["text"] if len(f["text"]) < 300 else _full_text(data, f["serialisation"])
            rows.append((r["id"], cause(rec["schema"], data, text, f["offset"], r.get("warnings", []))))
        out[engine] = rows
    return out


def _full_text(data, serialisation: str) -> str:
    if serialisation == "compact":
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(data)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="raw JSON of bench/maskbench.py runs")
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--examples", type=int, default=4, help="ids listed per cause")
    args = ap.parse_args(argv)
    corpus = {r["id"]: r for r in load_corpus(Path(args.corpus))}
    for path in args.runs:
        run = json.loads(Path(path).read_text())
        if not run.get("check_only"):
            raise SystemExit(f"{path}: not a --check-only run (its refusals have no byte offsets)")
        print(f"{path}: {run.get('selection')}")
        for engine, rows in classify(run, corpus).items():
            counts = collections.Counter(c for _, c in rows)
            print(f"\n{engine}: {len(rows)} schemas with a validation error\n")
            print("| cause | schemas | examples |\n|---|---:|---|")
            for c in CAUSES:
                if counts.get(c):
                    ids = [i for i, k in rows if k == c][:args.examples]
                    print(f"| {c} | {counts[c]} | {', '.join(ids)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
