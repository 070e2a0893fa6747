"""How far published measurements of runs of a plan's kind were from memtui's figure: the band
around every verdict.

The data is the residuals of benchmarks/published.py ((memtui - measured) / measured), grouped
by stack, method and the kind of figure measured, computed by benchmarks/error_band.py and
shipped in the package (data/error_band.json; tests/test_error_band.py fails when it is stale).
Nothing is tuned: a plan gets the band of the runs of its stack and method, else of its stack,
else of every run. Read once, from the package itself.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from memtui.estimator.choices import Method, StackName
from memtui.estimator.frozen import Frozen


class ErrorBand(Frozen):
    """The residuals of the published runs of one kind."""

    low: float
    """The most under-predicted run: (memtui - measured) / measured, e.g. -0.04."""
    high: float
    """The most over-predicted run."""
    n: int
    """How many runs."""
    runs_of: str
    """Which runs: "fsdp1 qlora", "torchtune", "every published run"."""

    def top(self, predicted: int) -> int:
        """The largest true figure the band allows for `predicted`: what the most
        under-predicted run's error would make of it."""
        return round(predicted / (1 + min(self.low, 0.0)))

    def __str__(self) -> str:
        return (
            f"published runs of this kind ({self.runs_of}): {self.low:+.0%} to "
            f"{self.high:+.0%}, n={self.n}"
        )


@cache
def _groups() -> dict[tuple[str | None, str | None], ErrorBand]:
    raw = json.loads(resources.files(__package__).joinpath("data/error_band.json").read_text())
    out = {}
    for row in raw["groups"]:
        if row["figure"] is not None:
            continue  # the verdict's figure is the total: the groups pooled over figures
        stack, method = row["stack"], row["method"]
        runs_of = " ".join(x for x in (stack, method) if x) or "every published run"
        out[(stack, method)] = ErrorBand(
            low=row["low"], high=row["high"], n=row["n"], runs_of=runs_of
        )
    return out


def band_for(stack: StackName, method: Method) -> ErrorBand | None:
    """The band of the published runs most like a plan of `stack` and `method`."""
    groups = _groups()
    for key in ((stack.value, method.value), (stack.value, None), (None, None)):
        if key in groups:
            return groups[key]
    return None
