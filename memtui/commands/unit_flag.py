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


def add_unit_argument(parser: argparse.ArgumentParser, default: str | None = "gb") -> None:
    """Add `--unit` to `parser`, `default` unless told (any case: GB, gib); None: the
    dashboard's, which starts in the unit its preferences keep."""
    said = "GB (10^9 bytes) or GiB (2^30, the unit of PyTorch's OOM message)"
    if default is None:
        otherwise = "the preferences' unit (GB unless `u` kept another) unless told"
    else:
        otherwise = f"{'GB' if default == 'gb' else 'GiB'} unless told (JSON is bytes either way)"
    parser.add_argument(
        "--unit",
        type=str.lower,
        choices=["gb", "gib"],
        default=default,
        help=f"sizes in {said}; {otherwise}",
    )


def unit_of(args: argparse.Namespace) -> SizeUnit:
    """The unit `--unit` chose."""
    from memtui.estimator.units import SizeUnit

    return SizeUnit[args.unit]
