"""Strings from outside made safe to show: the one escaping rule of every surface.

Hostnames, Prometheus labels, GPU names, process command lines, snapshot fields (allocator
settings, frame file and function names) and paths typed by a user come from other machines,
other users or files memtui did not write. Shown raw, a control character in one (an escape
sequence, a carriage return) could move the cursor, retitle the window, clear the screen or fake
a line; a bidi override or isolate (U+202E) could show a name backwards, a zero-width character
make two different names look the same, and a 5,000-character label wrap over the whole screen.
So every such string goes through `shown` before the CLI prints it, the dashboard draws it (as
text, never as Rich markup) or the forensics report quotes it.

What is kept is what `str.isprintable` calls printable (letters, marks, numbers, punctuation,
symbols, the space) and the other spaces (Unicode category Zs, harmless); everything else is
written as its Python escape: C0 and C1 control characters and DEL ("\\x1b", "\\n", "\\x9b"),
format characters (bidi embeddings, overrides and isolates U+202A-202E and U+2066-2069, the
marks U+200E/F and U+061C, zero-width U+200B-200D, U+2060, U+FEFF, tags), line and paragraph
separators (U+2028/9), lone surrogates (from bytes decoded with `surrogateescape`, which would
make `print` raise), private-use and unassigned code points. Python's `str.isprintable` is
defined on these categories (Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs but the space: CPython
Objects/unicodectype.c, `_PyUnicode_IsPrintable`, every 3.x), so the rule follows the Unicode
version of the interpreter running it.
"""

from __future__ import annotations

import unicodedata

# A value longer than this is cut (with "…"): a name or label, not a page.
LIMIT = 200
# A whole message that quotes values already cut (an error line with its hint).
LINE = 1000


def _kept(ch: str) -> bool:
    return ch.isprintable() or unicodedata.category(ch) == "Zs"


def shown(value: object, limit: int = LIMIT) -> str:
    """`value` as text safe for a terminal: every character that is not printable written as
    its escape ("\\x1b", "\\u202e"), cut to `limit` characters ending in "…" when longer."""
    text = value if isinstance(value, str) else str(value)
    # Escaping never shortens, so the first limit + 1 characters decide; a huge value is not
    # copied whole.
    head = text[: limit + 1]
    if not head.isprintable():  # the usual case, a plain name, skips this
        head = "".join(ch if _kept(ch) else repr(ch)[1:-1] for ch in head)
    return head if len(head) <= limit else head[: limit - 1] + "…"
