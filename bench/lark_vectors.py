#!/usr/bin/env python
"""The shared Lark test vectors (``lark-vectors.dev.jsonl``) through gramc's Lark frontend.

Each record's grammar is compiled unbound (``gramc.compile(text, format="lark")``, byte level)
and each of its ``passing`` / ``failing`` strings is checked with
``gramc.runtime.check.check_artifact``. String categories:

* ``right``: accepted and passing, or rejected and failing;
* ``wrong-accept``: a failing string is accepted;
* ``wrong-reject``: a passing string is rejected;
* ``not-compiled``: the grammar did not compile (its strings count as wrong).

Some wrong strings are known differences of a peer, where gramc follows the specification
(:data:`PEER_DIFFERENCES`): they stay counted as wrong, and the report lists them with the
reason.

Records with ``expect_build_error`` have no strings: they are ``right`` when gramc's verdict
(refuses / compiles) matches. Compile errors are tallied by class and message (the feature an
``UnsupportedFeatureError`` names), which says what to build next.

Usage::

    python bench/lark_vectors.py                 # the summary and the error tally
    python bench/lark_vectors.py --verbose       # every wrong string
    python bench/lark_vectors.py --update        # rewrite tests/data/lark_vectors_baseline.json
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import warnings
from pathlib import Path

from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is the script's folder)

CORPUS = SHARED / "corpora" / "lark-vectors.dev.jsonl"
BASELINE = REPO / "tests" / "data" / "lark_vectors_baseline.json"


#: record id -> why gramc's verdict differs from the peer's on purpose (still scored as wrong)
PEER_DIFFERENCES = {
    **dict.fromkeys(
        [
            "llguidance/test_lark/test_json_general_unicode_escapes_are_opt_in/1",
            "llguidance/test_lark/test_json_general_unicode_escapes_do_not_change_regex_constraints/1",
            "llguidance/test_lark/test_json_general_unicode_escapes_do_not_change_regex_constraints/2",
        ],
        "llguidance's %json refuses \\u escapes of characters that need none unless the schema "
        "opts in; RFC 8259 section 7 allows any character escaped, as gramc does",
    ),
    **dict.fromkeys(
        [
            "xgrammar/test_lark/test_lark_multiple_ignore_declarations/1",
            "xgrammar/test_lark/test_lark_ignore_inline_regex/1",
        ],
        "xgrammar allows %ignore'd text only between tokens; Lark (and gramc) also before the "
        "first one",
    ),
    "xgrammar/test_lark/test_lark_core_languages/37": (
        "xgrammar ignores the lookahead in /a(?=b)c/; under Python re (Lark) no string matches"
    ),
}


def load(path: Path = CORPUS) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_record(rec: dict, time_limit_s: float = 60.0) -> dict:
    """Compile one record and check its strings: {"id", "error", "strings": [(text, expected,
    category)], "build": category for expect_build_error records}."""
    import gramc
    from gramc.runtime.check import check_artifact

    out: dict = {"id": rec["id"], "error": None, "strings": []}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                art = gramc.compile(rec["grammar"], format="lark")
            except gramc.GramcError as e:
                out["error"] = f"{type(e).__name__}: {e}"
            except _Timeout:
                out["error"] = f"Timeout: compile took more than {time_limit_s:g} s"
            except RecursionError as e:
                out["error"] = f"RecursionError: {e}"
        if "expect_build_error" in rec:
            refused = out["error"] is not None
            out["build"] = "right" if refused == bool(rec["expect_build_error"]) else "wrong"
            return out
        for expected, texts in ((True, rec["passing"]), (False, rec["failing"])):
            for s in texts:
                if out["error"] is not None:
                    cat = "not-compiled"
                else:
                    ok = check_artifact(art, s.encode("utf-8")).ok
                    cat = "right" if ok == expected else ("wrong-accept" if ok else "wrong-reject")
                out["strings"].append((s, expected, cat))
        return out
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def error_class(error: str) -> str:
    """A short key for the tally: the error class and its feature or reason, without
    positions and quoted specifics."""
    kind, _, msg = error.partition(": ")
    msg = re.sub(r"^<[^>]*>:\d+:\d+: ", "", msg)
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "…", msg)
    return f"{kind}: {msg[:90]}"


def string_ids(result: dict) -> list[str]:
    return [f"{result['id']}#{i}" for i in range(len(result["strings"]))]


def outcomes(results: list[dict]) -> dict[str, str]:
    """{string or build id: category}: the unit of the ratchet."""
    out: dict[str, str] = {}
    for r in results:
        if "build" in r:
            out[f"{r['id']}#build"] = r["build"]
        for sid, (_s, _e, cat) in zip(string_ids(r), r["strings"]):
            out[sid] = cat
    return out


def summary(results: list[dict]) -> dict:
    strings = collections.Counter(cat for r in results for _s, _e, cat in r["strings"])
    builds = collections.Counter(r["build"] for r in results if "build" in r)
    with_strings = [r for r in results if "build" not in r]
    errors = collections.Counter(error_class(r["error"]) for r in with_strings if r["error"])
    n = sum(strings.values())
    return {
        "records": len(results),
        "records_with_strings": len(with_strings),
        "compiled": sum(1 for r in with_strings if not r["error"]),
        "strings": n,
        "strings_right": strings["right"],
        "strings_right_pct": round(100 * strings["right"] / n, 1) if n else 0.0,
        "wrong_accept": strings["wrong-accept"],
        "wrong_reject": strings["wrong-reject"],
        "not_compiled": strings["not-compiled"],
        "build_checks": sum(builds.values()),
        "build_checks_right": builds["right"],
        "compile_errors": dict(errors.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--id", help="only records whose id contains this")
    ap.add_argument("--verbose", action="store_true", help="print every wrong string")
    ap.add_argument("--update", action="store_true", help=f"rewrite {BASELINE.relative_to(REPO)}")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    records = [r for r in load(args.corpus) if not args.id or args.id in r["id"]]
    results = [run_record(r, args.time_limit) for r in records]
    s = summary(results)
    if args.verbose:
        for r in results:
            if r.get("build") == "wrong":
                print(f"build-check   {r['id']}: gramc's verdict differs (error: {r['error']})")
            for text, _expected, cat in r["strings"]:
                if cat != "right":
                    why = f"  ({r['error']})" if r["error"] else ""
                    print(f"{cat:13} {r['id']}: {text!r}{why[:200]}")
    errors = s.pop("compile_errors")
    print(json.dumps(s, indent=1))
    peers = [(r["id"], text) for r in results if r["id"] in PEER_DIFFERENCES
             for text, _e, cat in r["strings"] if cat != "right"]
    if peers:
        print("documented peer differences (counted as wrong above):")
        for rid in dict.fromkeys(i for i, _t in peers):
            texts = ", ".join(repr(t) for i, t in peers if i == rid)
            print(f"  {rid}: {texts}\n      {PEER_DIFFERENCES[rid]}")
    print("compile errors (records with strings):")
    for k, v in errors.items():
        print(f"  {v:3}  {k}")
    if args.update:
        right = sorted(k for k, v in outcomes(results).items() if v == "right")
        BASELINE.write_text(json.dumps({"summary": s, "right": right}, indent=1) + "\n")
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
