"""The error band of every verdict: the residuals of benchmarks/published.py, grouped by stack,
method and the kind of figure measured, written into the package as data
(memtui/estimator/data/error_band.json, read by `memtui.estimator.error_band`).

A residual is (memtui - measured) / measured for one published run, compared like with like
(published.py's `predict`). Each group keeps its count and its lowest and highest residual;
the groups pooled over the figure, over the method and over everything are written too, so a
plan of a kind no run measured still gets the widest band there is. Nothing is tuned: the band
is the benchmark's own spread, and tests/test_error_band.py fails when this file is stale.

    python benchmarks/error_band.py            # writes the data file
    python benchmarks/error_band.py --check    # exit 1 when the shipped data differs
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from published import report  # noqa: E402

DATA = ROOT / "memtui" / "estimator" / "data" / "error_band.json"


def band() -> dict[str, object]:
    """The groups' residual ranges, as the data file holds them."""
    _, outcomes = report()
    groups: dict[tuple[str | None, str | None, str | None], list[float]] = defaultdict(list)
    for o in outcomes:
        for key in (
            (o.stack, o.method, o.run.kind),
            (o.stack, o.method, None),
            (o.stack, None, None),
            (None, None, None),
        ):
            groups[key].append(o.error)
    rows = [
        {
            "stack": stack,
            "method": method,
            "figure": figure,
            "n": len(errors),
            "low": round(min(errors), 4),
            "high": round(max(errors), 4),
        }
        for (stack, method, figure), errors in groups.items()
    ]
    rows.sort(key=lambda r: tuple(str(r[k]) for k in ("stack", "method", "figure")))
    return {"source": "benchmarks/published.py (python benchmarks/error_band.py)", "groups": rows}


def text() -> str:
    return json.dumps(band(), indent=1, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the data file is stale")
    args = parser.parse_args()
    fresh = text()
    if args.check:
        stale = not DATA.is_file() or DATA.read_text(encoding="utf-8") != fresh
        print(f"{DATA.relative_to(ROOT)} is {'stale' if stale else 'current'}")
        return int(stale)
    DATA.write_text(fresh, encoding="utf-8")
    print(f"wrote {DATA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
