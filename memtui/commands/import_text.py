"""What `--from FILE...` read, as text: each plan field with the file and key it came from,
then what had to be assumed (printed above `memtui estimate`'s report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from memtui.text import LINE, shown

if TYPE_CHECKING:
    from memtui.plans.imports import Imported


def print_imported(imported: Imported, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]From {escape(shown(imported.label, LINE))}[/]:")
    width = max((len(p.field) for p in imported.provenance), default=0)
    for line in imported.provenance:
        console.print(
            f"  {line.field:<{width}} = {escape(shown(line.value))}  "
            f"[dim]<- {escape(shown(line.source))}[/]",
            soft_wrap=True,
        )
    for note in imported.assumptions:
        console.print(f"  [dim]assumed: {escape(shown(note, LINE))}[/]", soft_wrap=True)
    for note in imported.ignored:
        console.print(f"  [dim]ignored: {escape(shown(note, LINE))}[/]", soft_wrap=True)
