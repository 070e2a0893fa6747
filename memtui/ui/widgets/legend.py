"""The GPU panel's legend: the budget per GPU and its terms, laid out at the width it is
drawn at.

    Budget per GPU 46.1 GB (GB = 10^9 B): ■wts 1.7 ■grad 1.7 ■mst 3.4
    ■opt 6.7 ■act 24.6 ■logit 1.6 ■tmp 2.3 ■ovh 4.2

The panel hands over variants (long labels, short labels, short labels with less said),
each a list of words; the first whose words fill at most two lines is drawn. Words are laid
out here, one after the other, so a line never ends between a term's label and its figure
(a wrapping renderer broke "ovh" from its "4.2"), and at the width the legend has when it is
drawn, not the one it had when the panel last changed (a scrollbar takes a column).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

#: Lines the legend may take before the next, shorter variant is tried.
MAX_LINES = 2


def pack(words: Sequence[Text], width: int) -> list[Text]:
    """`words` on lines of at most `width` cells, one space apart, in order."""
    lines: list[Text] = []
    line = Text()
    for word in words:
        if line.cell_len and line.cell_len + 1 + word.cell_len > width:
            lines.append(line)
            line = Text()
        if line.cell_len:
            line.append(" ")
        line.append_text(word)
    lines.append(line)
    return lines


class Legend(Widget):
    """The budget's legend; `show` sets its variants."""

    DEFAULT_CSS = "Legend { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._variants: list[list[Text]] = []

    def show(self, variants: Sequence[Sequence[Text]]) -> None:
        """Draw the first of `variants` that fits; relayout only when its height changes."""
        new = [list(words) for words in variants]
        if new == self._variants:  # rich Text compares its text and styled spans
            return  # the same legend (a poll, not a plan change): nothing to draw
        before = len(self.lines(self.size.width)) if self._variants else -1
        self._variants = new
        self.refresh(layout=len(self.lines(self.size.width)) != before)

    def lines(self, width: int) -> list[Text]:
        """The legend's lines at `width`."""
        lines: list[Text] = []
        for words in self._variants:
            lines = pack(words, max(1, width))
            if len(lines) <= MAX_LINES:
                break
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text("\n").join(self.lines(self.size.width))
