""" "Did you mean": the known names nearest to one nobody knows, for an error's hint."""

from __future__ import annotations

import difflib
from collections.abc import Mapping


def close_names(text: str, names: Mapping[str, str], n: int = 3) -> tuple[str, ...]:
    """The names nearest `text`, best first: `names` maps each spelling to compare with (an
    id, the part of it after the slash, an alias) to the name to suggest for it; compared
    without case by difflib's ratio (Ratcliff/Obershelp, `get_close_matches`' 0.6 cutoff)."""
    keys = {key.lower(): shown for key, shown in names.items()}
    found = difflib.get_close_matches(text.strip().lower(), list(keys), n=3 * n, cutoff=0.6)
    return tuple(dict.fromkeys(keys[key] for key in found))[:n]


def did_you_mean(text: str, names: Mapping[str, str]) -> str:
    """'did you mean a or b?' for the names nearest `text`, or '' when none is near."""
    close = close_names(text, names)
    if not close:
        return ""
    listed = ", ".join(close[:-1]) + " or " if len(close) > 1 else ""
    return f"did you mean {listed}{close[-1]}?"
