"""Sizes and counts as people type them, and bytes as people read them.

Inside memtui everything is an integer number of bytes; these helpers are the only place that
turns text into bytes or bytes into text, so "GB" (10^9) and "GiB" (2^30) never get mixed up.
"""

from __future__ import annotations

import math
import re
from enum import Enum

from memtui.errors import PlanError

GB = 10**9
GiB = 2**30
MiB = 2**20

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_POWER = {"K": 3, "M": 6, "G": 9, "T": 12}
_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_NUMBER = r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?"


def _number(
    text: str, what: str, sign: str, mantissa: str, exponent: str | None, scale: int
) -> int:
    """The whole number `sign mantissa e exponent x scale`; float's own parser turns an
    exponent past its range into inf (never int ** n, which overflows converting back)."""
    if sign == "-" and float(mantissa) != 0:
        raise PlanError(f"{text!r} is negative", hint=f"use a positive {what}")
    value = float(f"{mantissa}e{exponent or 0}") * scale
    if not math.isfinite(value):
        raise PlanError(f"{text!r} is too large for a {what}")
    return round(value)


def parse_size(text: str) -> int:
    """'80GB' -> 80e9, '80GiB' -> 80*2^30, '81559MiB', '512b' -> bytes. A number without a
    unit is refused (but 0): '24' meant as 24 GB must not become 24 bytes, and '24G' could
    mean either GB or GiB, so both ask for the unit."""
    clean = text.strip()
    match = re.fullmatch(_NUMBER + r"\s*([kmgt]i?b|b|[kmgt]i?)?", clean.lower())
    if not match:
        raise PlanError(f"{text!r} is not a size", hint="use e.g. 80GB, 80GiB or 81559MiB")
    sign, mantissa, exponent, unit = match.groups()
    if unit is not None and not unit.endswith("b"):  # 24G, 24Gi: which of GB and GiB?
        number = clean[: len(clean) - len(unit)].strip()
        prefix = unit[0].upper()
        raise PlanError(
            f"{text!r} is not a size",
            hint=f"say {number}{prefix}B (10^{_POWER[prefix]} bytes) or {number}{prefix}iB",
        )
    size = _number(text, "size", sign, mantissa, exponent, _SIZE_UNITS[unit or ""])
    if unit is None and size:
        raise PlanError(
            f"{text!r} has no unit",
            hint=f"say {clean}GB (10^9 bytes), {clean}GiB (2^30 bytes) or {clean}b (bytes)",
        )
    return size


def parse_count(text: str) -> int:
    """'13B' -> 13e9, '13e9' -> 13e9, '6.7b' -> 6.7e9, '125M' -> 125e6."""
    match = re.fullmatch(_NUMBER + r"\s*([kmbt])?", text.strip().lower())
    if not match:
        raise PlanError(f"{text!r} is not a parameter count", hint="use e.g. 13B, 13e9 or 125M")
    sign, mantissa, exponent, suffix = match.groups()
    return _number(text, "count", sign, mantissa, exponent, _COUNT_SUFFIXES[suffix or ""])


def ceil_div(n: int, d: int) -> int:
    """n / d rounded up, in whole numbers (blocks of a size, a share per GPU, wrapped lines)."""
    return -(-n // d)


def format_bytes(n: float, unit: str = "GB", digits: int = 1) -> str:
    """Bytes as text with the unit said: format_bytes(52e9) -> '52.0 GB'."""
    scale = _SIZE_UNITS[unit.lower()]
    return f"{n / scale:,.{digits}f} {unit}"


class SizeUnit(str, Enum):
    """The unit sizes are shown in, the same on every command (`--unit gb|gib`) and the
    dashboard (`u`): decimal GB by default, binary GiB (PyTorch's OOM message, nvidia-smi's
    MiB) on request."""

    gb = "GB"
    gib = "GiB"

    @property
    def small(self) -> str:
        """The unit of the same family for a size below one `self`: MB or MiB."""
        return "MB" if self is SizeUnit.gb else "MiB"

    @property
    def scale(self) -> int:
        """Bytes in one of `self`."""
        return _SIZE_UNITS[self.value.lower()]


def format_size(n: int, unit: SizeUnit, digits: int = 1) -> str:
    """Bytes with the unit said, a size below one `unit` in its small unit: format_size(
    2**29, SizeUnit.gib) -> '512 MiB', format_size(30 * 10**9, SizeUnit.gb) -> '30.0 GB'."""
    if abs(n) < unit.scale:
        return format_bytes(n, unit.small, 0)
    return format_bytes(n, unit.value, digits)


def format_count(n: int) -> str:
    """Parameters as people say them: 6738415616 -> '6.74B'."""
    # the scale is chosen on the figure as printed (3 significant digits): 999,885,952
    # rounds to 1.00B, not "1e+03M"
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(float(f"{n:.3g}")) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)
