"""Text bars: the predicted budget stacked by term and the live use, on one card's scale.

One cell covers `scale / width` bytes. A cell inside the budget takes its term's colour: a
full block where the GPU already uses that memory, a light shade where the budget expects
memory not yet used. Use past the budget is a full block in the alert colour; the rest of the
card is a dotted track. The budget's end is a vertical mark (an arrow at the right edge when
the budget is larger than the card). With no budget (a GPU no job's budget covers) the bar is
the card's capacity only: the use in one neutral colour, no mark, nothing "over". The glyphs
differ as well as the colours, so the bar still reads with NO_COLOR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Term

USED, PLANNED, OVER, TRACK, MARK, BEYOND = "█", "░", "█", "·", "│", "▶"
SPARKS = "▁▂▃▄▅▆▇█"


def render_bar(
    width: int,
    scale: int,
    terms: Sequence[Term] | None,
    used: int | None,
    style: Callable[[str], Style],
) -> Text:
    """A bar `width` cells wide for `scale` bytes (`terms` None: no budget, capacity only).
    `style(name)` gives the rich style of a term key or of "over", "track", "mark", "used"."""
    text = Text()
    if width <= 0 or scale <= 0:
        return text
    if terms is None:
        filled = min(width, round((used or 0) * width / scale))
        text.append(USED * filled, style("used"))
        text.append(TRACK * (width - filled), style("track"))
        return text
    bounds: list[tuple[int, str]] = []  # (end byte, term key), in the estimator's order
    end = 0
    for term in terms:
        end += term.bytes
        bounds.append((end, term.key))
    budget = end
    mark = min(int(budget * width / scale), width - 1) if budget <= scale else None
    cells: list[tuple[str, str]] = []  # (glyph, style name) per cell
    index = 0  # bounds are sorted: walk them once instead of searching per cell
    for cell in range(width if mark is not None else width - 1):
        if cell == mark:
            cells.append((MARK, "mark"))
            continue
        middle = (cell + 0.5) * scale / width
        while index < len(bounds) and middle >= bounds[index][0]:
            index += 1
        in_use = used is not None and middle < used
        if index < len(bounds):
            cells.append((USED if in_use else PLANNED, bounds[index][1]))
        else:
            cells.append((OVER if in_use else TRACK, "over" if in_use else "track"))
    if mark is None:
        cells.append((BEYOND, "over"))
    # one span per run of equal cells: a few appends per bar instead of one per cell
    styles: dict[str, Style] = {}
    run_start = 0
    for i in range(1, len(cells) + 1):
        if i == len(cells) or cells[i] != cells[run_start]:
            glyph, name = cells[run_start]
            if name not in styles:
                styles[name] = style(name)
            text.append(glyph * (i - run_start), styles[name])
            run_start = i
    return text


def sparkline(values: Sequence[int], scale: int, width: int) -> str:
    """The last `width` values as block characters, 0..scale mapped onto eight heights."""
    if scale <= 0 or width <= 0:
        return ""
    tail = list(values)[-width:]
    top = len(SPARKS) - 1
    return "".join(SPARKS[max(0, min(top, round(v * top / scale)))] for v in tail).rjust(width)
