"""Text fitted to a few lines of whatever width it is drawn at, cut only between words.

Rich wraps a `Text` at spaces, but a widget whose height is capped (the status line's two
lines) hides the lines past the cap, and `overflow="ellipsis"` on one line cuts mid-word
("(j: attach,…", "gradient…"). `WordFit` wraps at words and, when the text needs more
lines than it may take, ends the last line after its last whole word with "…"; the width is
the one Rich renders at (`ConsoleOptions.max_width`), so a resize needs no new view. Only a
single word wider than the whole line is folded (nothing shorter can hold it).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

#: What ends a line that the rest of the text did not fit after.
MORE = "…"


def fit_lines(console: Console, text: Text, width: int, lines: int) -> list[Text]:
    """`text` wrapped at words into at most `lines` lines of `width` cells, the last one
    ending with `MORE` after a whole word when the text needed more."""
    width = max(width, 1)
    wrapped = list(text.wrap(console, width, overflow="fold"))
    for line in wrapped:
        line.rstrip()  # the space a line broke at is no part of it
    if len(wrapped) <= lines:
        return wrapped
    kept = wrapped[:lines]
    last = kept[-1]
    while last.cell_len + len(MORE) > width:
        cut = last.plain.rstrip().rfind(" ")
        if cut <= 0:  # one word as wide as the line: fold it (the only cut inside a word)
            last.truncate(width - len(MORE))
            break
        last = last[:cut]
        last.rstrip()
    last.append(MORE)
    kept[-1] = last
    return kept


@dataclass(frozen=True)
class WordFit:
    """A Rich renderable: `text` in at most `lines` lines, cut only between words."""

    text: Text
    lines: int = 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fitted = fit_lines(console, self.text, options.max_width, self.lines)
        yield Text("\n").join(fitted)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, min(self.text.cell_len, options.max_width))


def cut_text(text: str, width: int) -> str:
    """`text` whole when it fits `width` cells, else its whole words that fit and `MORE`
    (the one cut shared by one-line widgets instead of slicing or `overflow="ellipsis"`)."""
    return fit_lines(Console(width=max(width, 1)), Text(text), width, 1)[0].plain
