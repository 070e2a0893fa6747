"""The fastest plans that fit, side by side: what each changes, its budget, band top, headroom
and step time, from `memtui.estimator.search.search` (run in a worker by the `b` key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from textual.reactive import reactive

from memtui.estimator.search import Search
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget


@dataclass(frozen=True)
class FastestView:
    """The ranked plans as the table shows them, in `unit`."""

    found: Search[Any]
    unit: str

    def rows(self) -> list[tuple[str, ...]]:
        """One row a plan: rank, strategy, tp, micro-batch x accumulation, checkpointing,
        loss, offload, peak, band top, headroom, seconds per optimizer step, vs the first."""
        ranked = self.found.ranked
        out: list[tuple[str, ...]] = []
        for rank, c in enumerate(ranked, 1):
            p = c.plan
            out.append(
                (
                    str(rank),
                    p.strategy.value,
                    str(p.tp),
                    f"{p.micro_batch}x{p.grad_accum}",
                    p.checkpointing.value,
                    p.loss.value,
                    p.offload.value,
                    num(c.peak, self.unit),
                    num(c.top, self.unit),
                    num(c.headroom, self.unit),
                    f"{c.seconds:.3g}",
                    f"{c.seconds / ranked[0].seconds - 1:+.0%}" if rank > 1 else "",
                )
            )
        return out


class FastestTable(ViewWidget):
    """The search's ranked plans; the first is the one enter adopts."""

    DEFAULT_CSS = "FastestTable { height: auto; }"

    view: reactive[FastestView | None] = reactive(None)
    """Set by the fastest-plan screen when the search has answered."""

    def watch_view(self, view: FastestView | None) -> None:
        if view is None:
            return
        unit = view.unit
        table = Table(
            box=None, pad_edge=False, expand=False, header_style="bold", padding=(0, 0, 0, 1)
        )
        for header in ("#", "Strategy", "tp", "mb x acc", "Ckpt", "Loss", "Offload"):
            table.add_column(header, no_wrap=True)
        for header in (f"Peak {unit}", f"Top {unit}", f"Room {unit}", "Step s", "vs 1st"):
            table.add_column(header, justify="right", no_wrap=True)
        for row in view.rows():
            table.add_row(*row)
        self.show(table, table.row_count + 1)
