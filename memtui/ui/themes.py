"""Theme files: TOML parsed by pydantic, registered as Textual themes with memtui's variables.

Themes ship in the repository's top-level `themes/` folder. The wheel force-includes it as
`memtui/themes` (pyproject.toml), while an editable or source checkout keeps it beside the
package, so `theme_dirs()` looks in both places, then in the user's own folder
(`$XDG_CONFIG_HOME/memtui/themes`). A file that does not parse or validate becomes one line in
`ThemeLoad.errors` for the app to `notify` about: a broken theme is never fatal
(docs/architecture.md, "Themes and styles"; posting's `load_user_themes`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich.style import Style
from textual.color import Color, ColorParseError
from textual.theme import Theme
from textual.widget import Widget

from memtui.bounded import THEME, read_text
from memtui.errors import UsageError
from memtui.estimator.terms import TermKind
from memtui.text import shown

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: memtui's theme variables beside the terms' own: the bar's empty track and the budget mark.
_BAR_DEFAULTS = {"bar-track": "#3a3a3a", "budget-mark": "#ffffff"}
DEFAULT_THEME = "memtui-dark"


def variable_defaults(dark: bool = True) -> dict[str, str]:
    """Every memtui theme variable and its default: one per budget term
    (`TermKind.theme_variable`, in the budget's order, coloured as its declaration gives for a
    dark or a light theme), then the bar's track and mark. A theme file overrides any of them;
    the stylesheet refers to the bar's, so a theme that leaves them out stays parseable."""
    return {**{kind.theme_variable: kind.colour(dark) for kind in TermKind}, **_BAR_DEFAULTS}


def term_styles(widget: Widget) -> dict[TermKind, Style]:
    """Each term's style where `widget` draws it: its theme colour over the widget's
    background, as a stylesheet rule `color: $term-...` on a component class of `widget`
    resolves (textual's DOMNode.rich_style). Read from the declarations at each call, so a
    term needs no rule of its own in memtui.tcss."""
    variables = widget.app.theme_variables
    background = widget.background_colors[1]
    base = widget.rich_style
    return {
        kind: base
        + Style(color=(background + Color.parse(variables[kind.theme_variable])).rich_color)
        for kind in TermKind
    }


def _colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(f"{value!r} is not a colour (use #rrggbb, rgb(r,g,b) or a name)") from None
    return value


class ThemeFile(BaseModel):
    """One theme file (see themes/dark.toml for a commented example)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    """What `--theme` and the `t` key call it."""
    dark: bool = True
    primary: str
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    variables: dict[str, str] = Field(default_factory=dict)
    """memtui's variables (`variable_defaults`' keys); anything else is a typo and rejected."""

    @field_validator(
        "primary", "secondary", "accent", "warning", "error", "success", "foreground",
        "background", "surface", "panel",
    )  # fmt: skip
    @classmethod
    def _check_colour(cls, value: str | None) -> str | None:
        return None if value is None else _colour(value)

    @field_validator("variables")
    @classmethod
    def _check_variables(cls, value: dict[str, str]) -> dict[str, str]:
        known = variable_defaults()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown variable {unknown[0]!r}; known: {', '.join(known)}")
        return {k: _colour(v) for k, v in value.items()}

    def to_theme(self) -> Theme:
        """The Textual theme, with every memtui variable filled in (the terms' defaults for a
        dark or a light theme, as `dark` says)."""
        data = self.model_dump(exclude={"variables"})
        return Theme(**data, variables={**variable_defaults(self.dark), **self.variables})


@dataclass
class ThemeLoad:
    """The themes found, in the order `t` cycles through them, and one line per bad file."""

    themes: list[Theme] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def theme_dirs() -> list[Path]:
    """Where theme files live: the installed package, the source checkout, the user's folder."""
    package = Path(__file__).resolve().parent.parent  # .../memtui
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [package / "themes", package.parent / "themes", config / "memtui" / "themes"]


def load_theme_file(path: Path) -> ThemeFile:
    """Parse one file; raises ValueError with one line naming the file and the problem."""
    name = f"theme {shown(path)}"
    try:
        # bounded: a FIFO in the themes folder opens without waiting (every start read it)
        data = tomllib.loads(read_text(path, THEME, UsageError, name))
    except UsageError as err:
        raise ValueError(str(err)) from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{name}: not valid TOML ({shown(err)})") from None
    except RecursionError:  # tomllib recurses once per level
        raise ValueError(f"{name}: TOML nested too deeply") from None
    try:
        return ThemeFile(**data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise ValueError(f"theme {shown(path.name)}: {where}: {shown(msg)}") from None


def load_themes(dirs: list[Path] | None = None) -> ThemeLoad:
    """Every `*.toml` theme in `dirs` (default `theme_dirs()`); later folders override by name."""
    found: dict[str, Theme] = {}
    result = ThemeLoad()
    seen: set[Path] = set()
    for folder in theme_dirs() if dirs is None else dirs:
        if not folder.is_dir() or folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path).to_theme()
            except ValueError as err:
                result.errors.append(str(err))
                continue
            found[theme.name] = theme
    # memtui's own themes first, so `t` starts with the shipped dark/light pair
    result.themes = sorted(found.values(), key=lambda t: (not t.name.startswith("memtui"), t.name))
    return result
