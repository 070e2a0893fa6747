"""External strings made safe to show on a terminal.

Hostnames, pod names, user names and process command lines come from other machines and
other users. Shown raw, a control character in one (an escape sequence, a carriage return)
could move the cursor, recolour or clear the screen, or fake a line; so every such string
goes through `printable` before it is drawn, and is drawn as text, never as Rich markup.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character written as its escape ("\\x1b", "\\n")."""
    if _CONTROL.search(text) is None:  # the usual case: no copy
        return text
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
