"""The hostile-input table of issue 18: every case of ``tests/hostile_cases.py`` run in a
capped child (60 s, 2 GiB unless the case says less); per family the cases, how many ended
clean, the longest wall time and the largest peak RSS, then each case that was not clean.

    python bench/hostile.py [--workers 2] [--only SUBSTRING] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import hostile_cases  # noqa: E402 - the one list of cases, shared with the test


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="children at a time")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--json", help="also write every case's result here")
    args = parser.parse_args()
    cases = [c for c in hostile_cases.CASES if args.only in c.name]
    results = hostile_cases.run_cases(cases, args.workers)
    print(hostile_cases.table(results.values()))
    for r in results.values():
        print(f"{'clean' if r.clean else 'NOT CLEAN':9} {r.wall:6.1f} s {r.max_rss / 2**20:6.0f} MiB  {r.case}"
              + ("" if r.clean else f"\n          {r.why}"))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results.values()], indent=1))
    return 0 if all(r.clean for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
