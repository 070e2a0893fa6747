"""Small dialogs over the dashboard: a typed value (a number, a file name) and a question.

`Ask` takes a line of text and hands it to `check`, which returns the value or raises a
MemtuiError; the error stays in the dialog as one line until the text is right or escape
closes it, so a bad value never reaches the plan. `Confirm` offers a few one-key answers
("y save", "n quit without saving") and dismisses with the key pressed, None on escape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from memtui.errors import MemtuiError, UsageError, one_line
from memtui.text import LINE, shown

_DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 80%; max-width: 90; height: auto; border: round $primary; background: $surface;
    padding: 0 1;
}}
{name} .prompt-error {{ color: $error; height: auto; }}
{name} .prompt-hint {{ color: $text-muted; height: auto; }}
"""


def file_name(text: str) -> Path:
    """A typed file name (`~` expanded); an empty one is refused."""
    name = text.strip()
    if not name:
        raise UsageError("give a file name (e.g. memtui-plan.toml)")
    return Path(name).expanduser()


class Ask(ModalScreen[Any]):
    """One line of text, checked by `check` before the dialog closes with its value."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="ask.cancel"),
    ]
    DEFAULT_CSS = _DIALOG_CSS.format(name="Ask")

    def __init__(self, question: str, value: str, check: Callable[[str], Any], hint: str) -> None:
        super().__init__()
        self._question = question
        self._value = value
        self._check = check
        self._hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(shown(self._question, LINE)))
            yield Input(value=self._value, id="ask-input", select_on_focus=True)
            yield Static(Text(self._hint), classes="prompt-hint")
            yield Static("", id="ask-error", classes="prompt-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            value = self._check(event.value)
        except MemtuiError as err:
            self.query_one("#ask-error", Static).update(Text(shown(one_line(err), LINE)))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen["str | None"]):
    """A question answered by one key of `answers` (key -> what it does); escape: None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="confirm.cancel"),
    ]
    DEFAULT_CSS = _DIALOG_CSS.format(name="Confirm")

    def __init__(self, question: str, answers: Mapping[str, str]) -> None:
        super().__init__()
        self._question = question
        self._answers = dict(answers)

    def compose(self) -> ComposeResult:
        choices = "   ".join(f"{key} {what}" for key, what in self._answers.items())
        with Vertical():
            yield Static(Text(shown(self._question, LINE)))
            yield Static(Text(f"{choices}   escape cancel"), classes="prompt-hint")

    def on_key(self, event: Key) -> None:
        if event.character in self._answers:
            event.stop()
            self.dismiss(event.character)

    def action_cancel(self) -> None:
        self.dismiss(None)
