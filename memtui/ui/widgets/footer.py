"""The footer: Textual's, composed once per change of the bindings, its secondary keys hidden
on a narrow screen (they stay in `?`).

Private Textual API, quarantined here (docs/architecture.md, "Private Textual API"), for two
reasons:
- `Footer.bindings_changed`, `Footer._bindings_ready` (and `Widget._pruning`, the check
  Textual's own recompose makes before it runs): the footer recomposes on every
  change the screen publishes, and as it starts the screen publishes three (its mount, its
  focus, the terminal's focus) that change no key shown, so its 21 keys were composed three
  times: 63 widgets registered and styled where 21 do (benchmarks/profile_ui.py, section 2).
  Here a change recomposes once, and only when the keys to show differ.
- `FooterKey` (from `textual.widgets._footer`) and its `action`: which binding a key of the
  footer shows, so the screen's `-narrow` class can hide the secondary ones.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeyFooter(Footer):
    """The key bar. `secondary` names the actions whose keys carry the `-secondary` class
    (hidden by the stylesheet under 120 columns: 100 columns cannot hold every key)."""

    DEFAULT_CSS = """
    /* compact: one space between a group's label and the next key ("seq / Model"), and
       one, not two, before a group ("Ckpt +- batch") */
    KeyFooter.-compact FooterLabel { margin-right: 1; }
    KeyFooter.-compact KeyGroup.-compact { padding-left: 0; }
    """

    def __init__(self, secondary: Iterable[str] = (), *, compact: bool = False) -> None:
        super().__init__(compact=compact, show_command_palette=False)
        self._secondary = frozenset(secondary)
        self._recompose_queued = False
        self._shown: Hashable = None  # the keys of the last composition

    def _keys(self) -> Hashable:
        """What the footer would show now: each shown binding's key, label and state."""
        return tuple(
            (binding.key, self.app.get_key_display(binding), binding.description, enabled)
            for _, binding, enabled, _ in self.screen.active_bindings.values()
            if binding.show
        )

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._shown = self._keys()
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in self._secondary:
                widget.add_class("-secondary")
            yield widget

    def bindings_changed(self, screen: Screen[object]) -> None:
        # what Footer.bindings_changed does, but one recompose for any number of changes
        # published before it runs
        self._bindings_ready = True
        if self._recompose_queued or not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self._recompose_queued = True
            self.call_after_refresh(self._recompose)

    async def _recompose(self) -> None:
        self._recompose_queued = False
        # the screen may have gone since the change was published (a popped screen, the end)
        if self.is_attached and not self._pruning and self._keys() != self._shown:
            await self.recompose()
