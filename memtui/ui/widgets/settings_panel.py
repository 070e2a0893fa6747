"""The settings panel: every plan input, one row each, changed from the keyboard.

↑/↓ choose a row (home/end: the first, the last), ←/→ (or -/= style keys on the screen) step its
value; enter types a value on a number row (`TypeValue`), opens the model picker on the model row,
and steps any other row forward. A row that cycles through a list says where its value is in it
("3/7"), and the window says how many rows lie above and below it. The panel never edits the plan:
it posts `StepSetting`/`PickModel`/`TypeValue` up, and the screen sets `plan` back down
(docs/architecture.md, "Attributes down, messages up"). Under 100 columns (`narrow`) it shrinks to
a summary and the chosen row. Values may come from elsewhere (the GPU name NVML reports, a model's
path): drawn as text, controls escaped.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from memtui.estimator import Plan
from memtui.text import shown
from memtui.ui.messages import PickModel, StepSetting
from memtui.ui.plan_edits import SETTINGS, position
from memtui.ui.widgets.word_fit import cut_text

_SUMMARY = ("method", "precision", "optimizer", "strategy", "micro_batch", "seq_len",
            "attention", "checkpointing")  # fmt: skip
_SUMMARY_LABELS = {"micro_batch": "mb", "seq_len": "seq"}


def fitted(value: str, width: int) -> str:
    """`value` in `width` cells without cutting a word where it can: a path or a repo id
    keeps its last part ("…/Llama-2-7b-hf (6.74B)"); only a single word longer than the
    width is cut, by the caller's `cut_text`."""
    if len(value) <= width or "/" not in value:
        return value
    head, _, tail = value.rpartition("/")
    return "…/" + tail if len(tail) + 2 <= width or not head else tail


class TypeValue(Message):
    """Enter on a number row: the screen asks for the value of setting `key`."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class SettingsPanel(Widget, can_focus=True):
    """The plan's inputs; the cursor row is the one ←/→ change."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Prev setting", id="settings.up", show=False),
        Binding("down", "move(1)", "Next setting", id="settings.down", show=False),
        Binding("left", "step(-1)", "Setting down", id="settings.left", show=False),
        Binding("right", "step(1)", "Setting up", id="settings.right", show=False),
        Binding("home", "go(0)", "First setting", id="settings.first", show=False),
        Binding("end", "go(-1)", "Last setting", id="settings.last", show=False),
        Binding("enter", "activate", "Type/pick/step", id="settings.enter", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"settings-panel--cursor", "settings-panel--label"}
    DEFAULT_CSS = """
    SettingsPanel { height: auto; }
    """

    plan: reactive[Plan | None] = reactive(None, layout=True)
    """The current plan, set by the screen."""
    cursor: reactive[int] = reactive(0)
    """Index into `plan_edits.SETTINGS` of the chosen row."""
    narrow: reactive[bool] = reactive(False, layout=True)
    """Summary + chosen row instead of the full list."""

    @property
    def current_key(self) -> str:
        """The id of the chosen setting."""
        return SETTINGS[self.cursor].key

    def action_move(self, delta: int) -> None:
        self.cursor = (self.cursor + delta) % len(SETTINGS)

    def action_go(self, index: int) -> None:
        self.cursor = index % len(SETTINGS)

    def action_step(self, direction: int) -> None:
        if SETTINGS[self.cursor].step is None:
            self.post_message(PickModel())
        else:
            self.post_message(StepSetting(self.current_key, direction))

    def action_activate(self) -> None:
        if SETTINGS[self.cursor].typed is not None:
            self.post_message(TypeValue(self.current_key))
        else:
            self.action_step(1)

    def render(self) -> Text:
        plan = self.plan
        if plan is None:  # until the first estimate, which follows the first frame
            return Text("Settings: estimating the what-if plan...", style="dim")

        def show(key: str) -> str:
            setting = by_key[key]
            where = position(setting, plan) if key == self.current_key else None
            value = shown(setting.show(plan))
            return value if where is None else f"{value} ({where[0]}/{where[1]})"

        by_key = {s.key: s for s in SETTINGS}
        cursor_style = self.get_component_rich_style("settings-panel--cursor")
        label_style = self.get_component_rich_style("settings-panel--label")
        width = max(10, self.size.width)
        if self.narrow:
            # numbers get a short label (a bare "1 · 4,096" says nothing); names say themselves
            summary = " · ".join(
                f"{_SUMMARY_LABELS[k]} {show(k)}" if k in _SUMMARY_LABELS else show(k)
                for k in _SUMMARY
            )
            chosen = SETTINGS[self.cursor]
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(
                f"{show(SETTINGS[0].key)} on {plan.hardware.nodes}x"
                f"{plan.hardware.gpus_per_node} {shown(plan.hardware.gpu_name)}\n"
            )
            text.append(summary + "\n")
            text.append(f"▶ {chosen.label}: ", label_style)
            text.append(show(chosen.key), cursor_style)
            hint = "enter types" if chosen.typed is not None else "←→ change"
            text.append(f"  {self.cursor + 1}/{len(SETTINGS)} ↑↓ choose {hint}", label_style)
            return text
        lines = Text(no_wrap=True, overflow="ellipsis")
        label_width = max(len(s.label) for s in SETTINGS) + 1
        # more rows than lines: a window that keeps the cursor row on screen, its first and
        # last lines saying how many rows lie beyond it (nothing is hidden without a word)
        height = max(3, self.size.height)
        if len(SETTINGS) > height:
            height -= 2
        first = min(max(0, self.cursor - height // 2), max(0, len(SETTINGS) - height))
        visible = list(enumerate(SETTINGS))[first : first + height]
        above, below = first, len(SETTINGS) - first - len(visible)
        if len(SETTINGS) > len(visible):
            lines.append(f"  ↑ {above} more" if above else "  (first row)", label_style)
            lines.append("\n")
        for i, setting in visible:
            mine = i == self.cursor
            line = Text(("▶ " if mine else "  ") + setting.label.ljust(label_width), label_style)
            room = width - line.cell_len
            line.append(cut_text(fitted(show(setting.key), room), room))  # whole words only
            if mine:
                line.stylize(cursor_style)
            line.truncate(width, overflow="ellipsis")
            lines.append(line)
            if i < visible[-1][0]:
                lines.append("\n")
        if len(SETTINGS) > len(visible):
            lines.append("\n")
            lines.append(f"  ↓ {below} more" if below else "  (last row)", label_style)
        return lines
