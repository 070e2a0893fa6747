"""`--unit gb|gib`: one unit convention for every command that prints sizes (`estimate`,
`watch`), the dashboard's default (GB, `u` switches) by default.

The top level imports only argparse: `watch` loads nothing heavy before it polls.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtui.estimator.units import SizeUnit


def add_unit_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--unit` to `parser` (GB unless told)."""
    parser.add_argument(
        "--unit",
        choices=["gb", "gib"],
        default="gb",
        help="sizes in GB (10^9 bytes, the default, as the dashboard starts) or GiB (2^30, "
        "PyTorch's OOM message); JSON is bytes either way",
    )


def unit_of(args: argparse.Namespace) -> SizeUnit:
    """The unit `--unit` chose."""
    from memtui.estimator.units import SizeUnit

    return SizeUnit[args.unit]
