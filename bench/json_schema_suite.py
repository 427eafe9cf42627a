#!/usr/bin/env python
"""The official JSON-Schema-Test-Suite (draft 2020-12) through gramc's JSON Schema frontend.

For each schema group of ``json-schema-test-suite.jsonl`` gramc compiles the schema (unbound: no
vocabulary, byte level) and, for each test case, checks ``json.dumps(data)`` (Python's default
spacing, ``ensure_ascii=True``) against the artifact with ``gramc.runtime.check.check_artifact``.
gramc's verdict (the whole text matches) is compared with the case's ``valid``. Categories:

* ``correct``: the verdict is right;
* ``wrong-accept``: an invalid instance is accepted, and no GramcWarning was issued;
* ``approximated``: an invalid instance is accepted and the compile issued a GramcWarning (an
  over-approximation that gramc reported);
* ``wrong-reject``: a valid instance is rejected;
* ``compile-error``: gramc refused the schema (any GramcError, or the per-schema time limit).

Remote ``$ref``s (``http://localhost:1234/...``, served from the suite's ``remotes/`` folder) are
not available here: those groups are marked ``remote`` and their compile errors are expected.

Usage::

    python bench/json_schema_suite.py                  # the per-file table
    python bench/json_schema_suite.py --out /tmp/suite.json   # also the raw per-group results
    python bench/json_schema_suite.py --update         # rewrite tests/data/json_schema_suite_baseline.json
    python bench/json_schema_suite.py --file ref.json --verbose
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import urldefrag, urljoin

from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is the script's folder)

SUITE = SHARED / "corpora" / "json-schema-test-suite.jsonl"
BASELINE = REPO / "tests" / "data" / "json_schema_suite_baseline.json"
CATEGORIES = ["correct", "wrong-accept", "approximated", "wrong-reject", "compile-error"]
REMOTE = "http://localhost:1234"


def load_suite(path: Path = SUITE) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def remote_refs(schema) -> list[str]:
    """The ``$ref``/``$dynamicRef``/``$schema`` targets under http://localhost:1234 that no ``$id``
    in the document defines (they need the suite's remotes/ folder)."""
    ids: set[str] = set()
    refs: list[str] = []

    def walk(node, base: str):
        if isinstance(node, dict):
            if isinstance(node.get("$id"), str):
                base = urljoin(base, node["$id"])
                ids.add(urldefrag(base)[0])
            for k in ("$ref", "$dynamicRef", "$schema"):
                if isinstance(node.get(k), str):
                    refs.append(urldefrag(urljoin(base, node[k]))[0])
            for k, v in node.items():
                if k in ("const", "enum", "default", "examples"):
                    continue
                walk(v, base)
        elif isinstance(node, list):
            for v in node:
                walk(v, base)

    walk(schema, "")
    return sorted({r for r in refs if r.startswith(REMOTE) and r not in ids})


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_group(rec: dict, time_limit_s: float = 60.0, options: dict | None = None) -> dict:
    """Compile one group's schema and check each case: {"cases": [category...], ...}.
    ``options``: CompileOptions fields (None: the defaults)."""
    import gramc
    from gramc.compiler.pipeline import CompileOptions
    from gramc.errors import GramcWarning
    from gramc.runtime.check import check_artifact

    out: dict = {"id": rec["id"], "file": rec["file"], "remote": remote_refs(rec["schema"])}
    n = len(rec["tests"])
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GramcWarning)
            try:
                art = gramc.compile(json.dumps(rec["schema"]), format="json_schema",
                                    options=CompileOptions(**(options or {})))
                err = None
            except gramc.GramcError as e:
                err = f"{type(e).__name__}: {e}"
            except _Timeout:
                err = f"Timeout: compile took more than {time_limit_s:g} s"
            except RecursionError as e:
                err = f"RecursionError: {e}"
        signal.setitimer(signal.ITIMER_REAL, 0)
        out["compile_ms"] = (time.perf_counter() - t0) * 1e3
        out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, GramcWarning)][:10]
        if err is not None:
            out["error"] = err[:1000]
            out["cases"] = ["compile-error"] * n
            return out
        cases, details = [], []
        for test in rec["tests"]:
            text = json.dumps(test["data"])
            signal.setitimer(signal.ITIMER_REAL, time_limit_s)
            try:
                ok = check_artifact(art, text.encode("utf-8")).ok
            except _Timeout:
                ok = None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if ok is None:
                cat = "wrong-reject" if test["valid"] else "correct"
                details.append(f"check timed out on {text[:80]!r}")
            elif ok == test["valid"]:
                cat = "correct"
            elif ok:
                cat = "approximated" if out["warnings"] else "wrong-accept"
            else:
                cat = "wrong-reject"
            cases.append(cat)
        out["cases"] = cases
        if details:
            out["notes"] = details
        return out
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def case_ids(rec: dict) -> list[str]:
    return [f"{rec['id']}/{i}" for i in range(len(rec["tests"]))]


def _run_group_star(args):
    return run_group(*args)


def run_suite(records: list[dict], time_limit_s: float = 60.0, log=None, workers: int = 1,
              options: dict | None = None) -> dict:
    """{case id: category} plus the per-group results; ``workers`` forked processes share the groups."""
    cases: dict[str, str] = {}
    groups = []
    if workers > 1:
        import multiprocessing

        import gramc
        import gramc.api  # noqa: F401  (import the compiler once, before forking)

        frontend_available()
        pool = multiprocessing.get_context("fork").Pool(workers, maxtasksperchild=50)
        it = pool.imap(_run_group_star, [(rec, time_limit_s, options) for rec in records], chunksize=1)
    else:
        pool = None
        it = (run_group(rec, time_limit_s, options) for rec in records)
    for rec, g in zip(records, it):
        groups.append(g)
        for cid, cat in zip(case_ids(rec), g["cases"]):
            cases[cid] = cat
        if log:
            log(g)
    if pool is not None:
        pool.close()
        pool.join()
    return {"cases": cases, "groups": groups}


def per_file(records: list[dict], result: dict) -> list[dict]:
    rows: dict[str, dict] = {}
    remote_groups = {g["id"] for g in result["groups"] if g["remote"]}
    for rec in records:
        row = rows.setdefault(rec["file"], {"file": rec["file"], "groups": 0, "cases": 0,
                                            **{c: 0 for c in CATEGORIES}, "remote": 0})
        row["groups"] += 1
        for cid in case_ids(rec):
            row["cases"] += 1
            cat = result["cases"][cid]
            row[cat] += 1
            if cat == "compile-error" and rec["id"] in remote_groups:
                row["remote"] += 1
    return sorted(rows.values(), key=lambda r: r["file"])


def markdown(rows: list[dict]) -> str:
    head = "| file | cases | correct | wrong-accept | approximated | wrong-reject | compile-error (remote $ref) |"
    out = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    tot = collections.Counter()
    for r in rows:
        for k in ["cases", *CATEGORIES, "remote"]:
            tot[k] += r[k]
        ce = f"{r['compile-error']}" + (f" ({r['remote']})" if r["remote"] else "")
        out.append(f"| {r['file']} | {r['cases']} | {r['correct']} | {r['wrong-accept']} | {r['approximated']} | "
                   f"{r['wrong-reject']} | {ce} |")
    pct = 100 * tot["correct"] / max(1, tot["cases"])
    out.append(f"| **total** | **{tot['cases']}** | **{tot['correct']}** ({pct:.1f}%) | **{tot['wrong-accept']}** | "
               f"**{tot['approximated']}** | **{tot['wrong-reject']}** | **{tot['compile-error']}** "
               f"({tot['remote']}) |")
    return "\n".join(out)


def write_baseline(result: dict, path: Path = BASELINE) -> None:
    counts = collections.Counter(result["cases"].values())
    data = {"note": "written by `python bench/json_schema_suite.py --update`; tests/test_json_schema_suite.py "
                    "fails if a case listed as correct is no longer correct",
            "counts": {c: counts.get(c, 0) for c in CATEGORIES},
            "cases": dict(sorted(result["cases"].items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=0, ensure_ascii=False) + "\n")


def frontend_available() -> bool:
    import gramc

    try:
        gramc.compile('{"type": "string"}', format="json_schema")
    except gramc.GramcError as e:
        return "unknown source format" not in str(e)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--file", action="append", help="only these keyword files (repeatable)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="per-schema compile/check limit, seconds")
    ap.add_argument("--out", help="raw JSON per group (and a .md table beside it)")
    ap.add_argument("--update", action="store_true", help="rewrite the test's baseline (deliberately)")
    ap.add_argument("--workers", type=int, default=1, help="processes (the verdicts do not depend on it)")
    ap.add_argument("--verbose", action="store_true", help="print every group that is not all correct")
    ap.add_argument("--property-order", choices=["schema", "any"], default="schema",
                    help="json_property_order (the baseline is written with the default)")
    ap.add_argument("--any-order-max-properties", type=int, metavar="N",
                    help="json_any_order_max_properties with --property-order any (a low N sends small "
                         "objects through the matcher's members condition: a soundness check of it)")
    args = ap.parse_args(argv)
    options: dict = {"json_property_order": args.property_order}
    if args.any_order_max_properties is not None:
        options["json_any_order_max_properties"] = args.any_order_max_properties
    if not frontend_available():
        print("gramc: json_schema frontend not available (gramc.compile(..., format='json_schema') "
              "says unknown source format)")
        return 2
    records = load_suite(Path(args.suite))
    if args.file:
        records = [r for r in records if r["file"] in args.file]

    def log(g):
        if args.verbose and any(c != "correct" for c in g["cases"]):
            print(f"{g['id']}: {g['cases']}" + (f"  {g['error']}" if g.get("error") else "")
                  + (f"  warnings {g['warnings']}" if g.get("warnings") else "")
                  + (f"  remote {g['remote']}" if g["remote"] else ""))

    t0 = time.monotonic()
    result = run_suite(records, args.time_limit, log, args.workers, options)
    rows = per_file(records, result)
    md = markdown(rows)
    print(md)
    print(f"\n{len(records)} groups, {len(result['cases'])} cases in {time.monotonic() - t0:.1f} s")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"per_file": rows, "groups": result["groups"]}, indent=1, ensure_ascii=False)
                       + "\n")
        out.with_suffix(".md").write_text(md + "\n")
    if args.update:
        if args.file or args.property_order != "schema" or args.any_order_max_properties is not None:
            raise SystemExit("--update needs the whole suite with the default options")
        write_baseline(result)
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
