"""The help: every key the dashboard has, then a glossary of every abbreviation on screen.

Full screen and scrollable by keyboard (↑/↓, pgup/pgdn, home/end: the keys of Textual's
`ScrollableContainer`, textual/containers.py, 8.2.8). The key list is built from the bindings
themselves, walked along each class's MRO for the app, the screen under the help and every
widget on it (`Binding.make_bindings`, textual/binding.py), so a key another module adds is listed
without an edit here, and is shown as the app displays it (`App.get_key_display`). The term
abbreviations come from the terms' declarations (`TermKind.short`), the others from `GLOSSARY`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Static

from memtui.estimator.terms import TermKind

#: Every abbreviation and short label the screen uses that is not a term's short label
#: (those come from `TermKind`), with what it means.
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("GB / GiB", "10^9 bytes / 2^30 bytes; `u` switches, and every figure says which"),
    ("budget", "the plan's estimate of the memory each GPU needs (the │ mark on a bar)"),
    ("cap", "the card's capacity: its total memory as NVML reports it"),
    ("head", "on a GPU row: the card's free memory (capacity minus used)"),
    ("headroom", "on the plan row: capacity minus the plan's budget"),
    ("peak", "the highest memory use seen on that GPU since the dashboard started"),
    ("used/budget", "memory in use on the card, then the job's budget for it"),
    ("used/card", "with no job's budget: memory in use on the card, then its capacity"),
    ("no job budget", "nobody planned the job on these GPUs: the rows judge use against the "
     "card only (NEAR CAPACITY at 95%), never OVER BUDGET"),
    ("BUDGET > CARD (>CARD)", "the job's budget for that GPU is larger than its card (an "
     "alarm)"),
    ("static", "weights, gradients, master weights and optimizer states per GPU (no "
     "activations); in the Fits column: only the static state fits"),
    ("Fits", "yes: the whole budget fits the card; static: only the static state; no"),
    ("mb", "micro-batch: samples per GPU per forward pass (in the strategy table: the "
     "largest that fits)"),
    ("seq", "sequence length in tokens"),
    ("accum", "gradient accumulation steps per optimizer step"),
    ("ckpt", "activation checkpointing (none, selective, full)"),
    ("flash", "the attention kernel: flash (no s x s scores kept) or eager"),
    ("prec", "precision of weights and compute (bf16-mixed, fp16, ...)"),
    ("optim", "the optimizer (adamw, 8-bit AdamW, ...)"),
    ("ddp / zero1-3 / fsdp / hsdp", "the sharding strategy: DDP replicates everything; ZeRO "
     "1, 2, 3 shard optimizer states, then gradients, then weights; FSDP shards like ZeRO-3; "
     "HSDP shards inside a node and replicates across nodes"),
    ("LoRA / QLoRA", "low-rank adapters over a frozen base / the same over a 4-bit (NF4) base"),
    ("poll N ms", "how long the last telemetry poll took (NVML, a replay or Prometheus)"),
    ("PID", "the process id of a process using the GPU"),
    ("FITS / MAY NOT FIT / DOES NOT FIT", "the verdict: the top of the error band fits, the "
     "card falls inside the band, the figure itself does not fit"),
    ("n/m", "beside a setting that cycles through a list: its place in the list (the list "
     "wraps at its ends, and the screen says so when it does)"),
    ("↑ n more / ↓ n more", "settings rows above and below the ones on screen"),
    ("util 93%", "utilization.gpu: the share of the last sample period a kernel ran (NVML)"),
    ("memory controller 38%", "utilization.memory: the share of time device memory was read "
     "or written (bandwidth in use), not the share of memory used"),
    ("67°C", "GPU core temperature, degrees Celsius"),
    ("412/700 W", "power draw / the limit the driver enforces, watts"),
    ("SM / memory clock MHz", "the current SM and memory clocks"),
    ("Nearest to OOM", "the GPU with the fewest bytes free, and its trend over the last 30 s"),
    ("n/a", "the GPU (or the exporter) does not give this reading"),
)  # fmt: skip


@dataclass(frozen=True)
class KeyRow:
    """One line of the key list: the keys (as the app shows them) and what they do."""

    keys: str
    description: str
    where: str


def _bindings_of(node: DOMNode) -> Iterator[Binding]:
    """The bindings a node's classes declare, memtui's own (Textual's widgets' keys are the
    scrolling keys the help names in one line)."""
    for cls in type(node).__mro__:
        if not cls.__module__.startswith("memtui."):
            continue
        declared: list[BindingType] = list(cls.__dict__.get("BINDINGS", []))
        yield from Binding.make_bindings(declared)


def _where(node: DOMNode) -> str:
    if isinstance(node, App):
        return "anywhere"
    if isinstance(node, Screen):
        return "dashboard"
    # "SettingsPanel" -> "the settings panel"
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", type(node).__name__).lower()
    return f"in the {words} (when it has the focus)"


def key_rows(app: App[Any], screen: Screen[Any]) -> list[KeyRow]:
    """Every binding of `app`, `screen` and the widgets on it, one row per action (keys that
    do the same thing joined: "+ / ="), each key as remapped by the app's keymap where it
    applies (the screen's active bindings carry the remapped keys by binding id)."""
    remapped: dict[str, list[Binding]] = {}
    for active in screen.active_bindings.values():
        if active.binding.id is not None:
            remapped.setdefault(active.binding.id, []).append(active.binding)
    nodes: Iterable[DOMNode] = [screen, *screen.walk_children(with_self=False), app]
    rows: dict[tuple[str, str], list[str]] = {}
    described: dict[tuple[str, str], str] = {}
    seen_actions: set[str] = set()
    for node in nodes:
        for binding in _bindings_of(node):
            action = binding.action.removeprefix("app.")
            if isinstance(node, App) and action in seen_actions:
                continue  # the screen binds it too (the app's own is for other screens)
            seen_actions.add(action)
            description = binding.description or binding.tooltip or action
            if binding.tooltip and binding.tooltip != description:
                description = f"{description}: {binding.tooltip}"
            row = (_where(node), action)
            keys = rows.setdefault(row, [])
            for bound in remapped.get(binding.id or "", [binding]):
                shown_key = app.get_key_display(bound)
                if shown_key not in keys:
                    keys.append(shown_key)
            described[row] = description
    return [KeyRow(" / ".join(keys), described[row], row[0]) for row, keys in rows.items()]


def glossary() -> list[tuple[str, str]]:
    """Every abbreviation on screen: the terms' short labels, then `GLOSSARY`."""
    terms = [(kind.short, kind.label) for kind in TermKind]
    return [*terms, *GLOSSARY]


def _section(title: str, rows: Iterable[tuple[str, str]]) -> list[RenderableType]:
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="bold", min_width=_KEY_WIDTH)
    table.add_column(ratio=1)  # wraps at words: nothing is cut
    for left, right in rows:
        table.add_row(left, right)
    return [Text(title, style="bold underline"), table, Text("")]


#: The key column's width, so the sections line up.
_KEY_WIDTH = 22


def help_text(rows: list[KeyRow]) -> Group:
    """The key list by where each key works, the scrolling keys, then the glossary."""
    parts: list[RenderableType] = []
    for where in dict.fromkeys(row.where for row in rows):
        keys = [(row.keys, row.description) for row in rows if row.where == where]
        parts += _section(f"Keys {where}", keys)
    parts += _section(
        "Dialogs, panels and scrolling",
        [
            ("escape", "close a dialog (the plan stays as it was) or this help (? and q too)"),
            ("y / n", "answer a question (save before quitting, overwrite a file)"),
            ("tab / shift+tab", "move the focus to the next / previous panel that takes it"),
            ("↑ ↓ pgup pgdn home end", "scroll the focused list or page; here: scroll this help"),
        ],
    )
    parts += _section("Glossary", glossary())
    return Group(*parts)


class HelpScreen(Screen[None]):
    """Every key and every abbreviation, full screen; escape, ? or q close it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close help", id="help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen #help-scroll { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    HelpScreen #help-title { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, rows: list[KeyRow]) -> None:
        super().__init__()
        self.body = help_text(rows)
        """What the help shows, whole (the screen scrolls it)."""

    def compose(self) -> ComposeResult:
        yield Static("memtui help: ↑↓ pgup pgdn home end scroll, escape closes", id="help-title")
        with VerticalScroll(id="help-scroll"):
            yield Static(self.body, id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
