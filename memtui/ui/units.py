"""Numbers on screen: bytes in the chosen unit (GB = 10^9 or GiB = 2^30, always said)."""

from __future__ import annotations

from memtui.estimator.units import format_bytes

UNITS = ("GB", "GiB")


def num(n: int | None, unit: str, digits: int = 1) -> str:
    """Bytes as a bare number in `unit` ("n/a" when unknown); the caller says the unit once."""
    if n is None:
        return "n/a"
    return format_bytes(n, unit, digits).rsplit(" ", 1)[0]


def size(n: int | None, unit: str, digits: int = 1) -> str:
    """Bytes with the unit: "42.5 GB"."""
    return "n/a" if n is None else format_bytes(n, unit, digits)
