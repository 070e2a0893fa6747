"""The communication line: bytes each GPU sends per optimizer step, and the links' time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.reactive import reactive

from memtui.estimator.units import ceil_div
from memtui.ui.units import size
from memtui.ui.widgets.view_widget import ViewWidget

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Communication


@dataclass(frozen=True)
class CommunicationView:
    communication: Communication
    unit: str


class CommunicationLine(ViewWidget):
    """One line from the estimator's `Report.communication`."""

    DEFAULT_CSS = "CommunicationLine { height: auto; }"

    view: reactive[CommunicationView | None] = reactive(None)
    """Set by the screen after every plan change."""

    def watch_view(self, view: CommunicationView | None) -> None:
        if view is None:
            return
        c = view.communication
        text = (
            f"Communication: {size(c.bytes_per_gpu_per_step, view.unit)} per GPU per step, "
            f"{c.relative_to_ddp:.2f}x DDP, about {c.seconds_per_step:.2f} s on the links"
        )
        if c.tensor_parallel_bytes:
            text += f" ({size(c.tensor_parallel_bytes, view.unit)} of it tensor parallel)"
        # relayout only when the wrapped height changes
        self.show(text, ceil_div(len(text), max(1, self.size.width)))
