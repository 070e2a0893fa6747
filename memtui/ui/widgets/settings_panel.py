"""The settings panel: every plan input, one row each, changed from the keyboard.

↑/↓ choose a row, ←/→ (or -/= style keys on the screen) step its value, enter steps it forward or,
on the model row, opens the model picker. The panel never edits the plan: it posts
`StepSetting`/`PickModel` up, and the screen sets `plan` back down (docs/architecture.md,
"Attributes down, messages up"). Under 100 columns (`narrow`) it shrinks to a summary and the chosen
row. Values may come from elsewhere (the GPU name NVML reports, a model's path): drawn as text,
controls escaped.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widget import Widget

from memtui.estimator import Plan
from memtui.text import shown
from memtui.ui.messages import PickModel, StepSetting
from memtui.ui.plan_edits import SETTINGS

_SUMMARY = ("method", "precision", "optimizer", "strategy", "micro_batch", "seq_len",
            "attention", "checkpointing")  # fmt: skip
_SUMMARY_LABELS = {"micro_batch": "mb", "seq_len": "seq"}


class SettingsPanel(Widget, can_focus=True):
    """The plan's inputs; the cursor row is the one ←/→ change."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Prev setting", id="settings.up", show=False),
        Binding("down", "move(1)", "Next setting", id="settings.down", show=False),
        Binding("left", "step(-1)", "Setting down", id="settings.left", show=False),
        Binding("right", "step(1)", "Setting up", id="settings.right", show=False),
        Binding("enter", "activate", "Change/pick", id="settings.enter", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"settings-panel--cursor", "settings-panel--label"}
    DEFAULT_CSS = """
    SettingsPanel { height: auto; }
    """

    plan: reactive[Plan | None] = reactive(None)
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

    def action_step(self, direction: int) -> None:
        if SETTINGS[self.cursor].step is None:
            self.post_message(PickModel())
        else:
            self.post_message(StepSetting(self.current_key, direction))

    def action_activate(self) -> None:
        self.action_step(1)

    def render(self) -> Text:
        plan = self.plan
        if plan is None:
            return Text("")

        def show(key: str) -> str:
            return shown(by_key[key].show(plan))

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
            text.append("  ↑↓ choose ←→ change", label_style)
            return text
        lines = Text(no_wrap=True, overflow="ellipsis")
        label_width = max(len(s.label) for s in SETTINGS) + 1
        # more rows than lines (100x30): a window that keeps the cursor row on screen
        height = max(1, self.size.height)
        first = min(max(0, self.cursor - height // 2), max(0, len(SETTINGS) - height))
        visible = list(enumerate(SETTINGS))[first : first + height]
        for i, setting in visible:
            mine = i == self.cursor
            line = Text(("▶ " if mine else "  ") + setting.label.ljust(label_width), label_style)
            line.append(show(setting.key))
            if mine:
                line.stylize(cursor_style)
            line.truncate(width, overflow="ellipsis")
            lines.append(line)
            if i < visible[-1][0]:
                lines.append("\n")
        return lines
