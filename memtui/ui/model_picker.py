"""The model picker: search the catalog, or type a config.json path, a model folder, a cached
Hugging Face repo id or a bare parameter count ("13B"). Loading reads files (a config.json,
the HF cache), so it runs in a thread worker and the screen keeps answering keys; any problem
shows as one line in the picker, never a crash.
Dismisses with the chosen `ModelSpec`, or None on escape, once: a load that answers after
escape (keys typed faster than the file is read) is dropped. Textual's `dismiss` pops
whatever screen is on top, so a second dismissal closed the dashboard under the picker.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from memtui.estimator import ModelSpec
from memtui.estimator.catalog import find, lookup
from memtui.estimator.configs import ModelConfigError
from memtui.estimator.model_source import bare_count
from memtui.estimator.units import format_count
from memtui.text import LINE, shown


class ModelPicker(ModalScreen["ModelSpec | None"]):
    """Search box over the catalog; enter loads the highlighted model or the typed reference."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel"),
        Binding("down", "focus_list", "To the list", id="picker.list", show=False),
    ]
    DEFAULT_CSS = """
    ModelPicker { align: center middle; }
    ModelPicker > Vertical {
        width: 90%; max-width: 100; height: 80%; border: round $primary; background: $surface;
    }
    ModelPicker OptionList { height: 1fr; }
    ModelPicker #picker-error { color: $error; height: auto; }
    """

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self._current = current
        self._answered = False

    def _finish(self, result: ModelSpec | None) -> None:
        """Dismiss with `result`, unless the picker is already closed or not on top."""
        if self._answered or not self.is_current:
            return
        self._answered = True
        self.dismiss(result)

    def action_cancel(self) -> None:
        """Close without a model."""
        self._finish(None)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                "Model: search the catalog, or a config.json path / folder / repo id / count"
            )
            yield Input(placeholder="llama 8b, ./config.json, org/name, 13B", id="picker-input")
            yield OptionList(id="picker-list")
            yield Static("", id="picker-error")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one(Input).focus()

    def _fill(self, query: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        for entry in find(query)[:60]:
            params = format_count(entry.published_parameters)
            options.add_option(Option(f"{entry.repo_id}  ({params})", id=entry.repo_id))
        if options.option_count:
            options.highlighted = 0

    @on(Input.Changed, "#picker-input")
    def _search(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#picker-input")
    def _submit(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        options = self.query_one(OptionList)
        looks_like_ref = (
            "/" in text
            or text.endswith(".json")
            or lookup(text) is not None
            or bare_count(text) is not None
        )
        if text and (looks_like_ref or not options.option_count):
            self._load(text)
        elif options.highlighted is not None:
            option = options.get_option_at_index(options.highlighted)
            self._load(str(option.id))

    @on(OptionList.OptionSelected, "#picker-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self._load(str(event.option.id))

    def action_focus_list(self) -> None:
        self.query_one(OptionList).focus()

    @work(thread=True, exclusive=True, group="load-model")
    def _load(self, ref: str) -> None:
        from memtui.errors import one_line
        from memtui.estimator.model_source import load_model
        from memtui.plans.hub import fetch_config

        spec: ModelSpec | str
        try:
            spec = load_model(ref, fetch_config)  # see resolve_model: the Hub last
        except ModelConfigError as err:
            spec = str(err)
        except Exception as err:  # any failure is the picker's error line
            spec = f"cannot load {ref[:60]!r}: {one_line(err)}"
        self.app.call_from_thread(self._loaded, spec)

    def _loaded(self, result: ModelSpec | str) -> None:
        if self._answered or not self.is_current:
            return  # escaped while loading: the answer comes too late to count
        if isinstance(result, str):
            self.query_one("#picker-error", Static).update(Text(shown(result, LINE)))
        else:
            self._finish(result)
