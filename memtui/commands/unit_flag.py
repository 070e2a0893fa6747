"""`--unit gb|gib`: one unit convention for every command that prints sizes: `estimate` and
`watch` in GB by default, as the dashboard starts (`u` switches), `snapshot` in GiB, the unit
of the PyTorch OOM message it explains.

The top level imports only argparse: `watch` loads nothing heavy before it polls.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtui.estimator.units import SizeUnit


def add_unit_argument(parser: argparse.ArgumentParser, default: str = "gb") -> None:
    """Add `--unit` to `parser`, `default` unless told (any case: GB, gib)."""
    said = "GB (10^9 bytes) or GiB (2^30, the unit of PyTorch's OOM message)"
    parser.add_argument(
        "--unit",
        type=str.lower,
        choices=["gb", "gib"],
        default=default,
        help=f"sizes in {said}; {'GB' if default == 'gb' else 'GiB'} unless told (JSON is "
        "bytes either way)",
    )


def unit_of(args: argparse.Namespace) -> SizeUnit:
    """The unit `--unit` chose."""
    from memtui.estimator.units import SizeUnit

    return SizeUnit[args.unit]
