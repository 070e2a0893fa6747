"""The dashboard's preferences, kept between runs: unit, theme, refresh interval, hidden panels.

One TOML file, `$XDG_CONFIG_HOME/memtui/preferences.toml` (`~/.config/memtui/` without
XDG_CONFIG_HOME, as the XDG Base Directory specification says), parsed by pydantic:

    unit = "GiB"            # "GB" (10^9) or "GiB" (2^30)
    theme = "memtui-light"
    interval = 2.0          # seconds between polls
    hidden = ["communication"]   # panels left out: strategies, processes, levers, communication

Read through `memtui.bounded` (a FIFO or a huge file is refused at once). A file that does not
read, parse or validate is one line in `Loaded.problem` (the app shows it) and the defaults are
used: a bad preferences file never stops the dashboard. Flags win over the file
(`memtui/commands/dashboard.py`); the `u`, `t` and `H` keys write it back (`save`, in a thread
worker, atomically: `memtui.plans.files.write_atomic`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from textual.message import Message

from memtui.bounded import PREFERENCES, read_text
from memtui.errors import MemtuiError, UsageError, one_line
from memtui.text import shown

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FILE_NAME = "preferences.toml"


class Panel(str, Enum):
    """A panel the preferences may hide (the settings and the GPUs are always shown)."""

    strategies = "strategies"
    processes = "processes"
    levers = "levers"
    communication = "communication"


class Preferences(BaseModel):
    """What the file may say; every key optional (its default is memtui's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unit: Literal["GB", "GiB"] = "GB"
    theme: str | None = None
    """None: memtui's default theme."""
    interval: float | None = Field(default=None, ge=0.05, le=3600)
    """Seconds between polls; None: the flag's default."""
    hidden: tuple[Panel, ...] = ()


@dataclass(frozen=True)
class Loaded:
    """The preferences read, where from, and what was wrong with the file (None: nothing)."""

    preferences: Preferences
    path: Path
    problem: str | None = None


class Remember(Message):
    """A key changed a preference (`unit`, `theme`, `hidden`): the app writes the file."""

    def __init__(self, **changes: object) -> None:
        super().__init__()
        self.changes = changes


def preferences_path() -> Path:
    """`$XDG_CONFIG_HOME/memtui/preferences.toml`, or under `~/.config` without it."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "memtui" / FILE_NAME


def load(path: Path | None = None) -> Loaded:
    """The preferences at `path` (default `preferences_path()`); a missing file is the
    defaults, a bad one the defaults and one line saying what is wrong."""
    path = path or preferences_path()
    name = f"preferences {shown(path)}"
    try:
        if not path.exists():
            return Loaded(Preferences(), path)
        text = read_text(path, PREFERENCES, UsageError, name)
        return Loaded(Preferences.model_validate(tomllib.loads(text)), path)
    except tomllib.TOMLDecodeError as err:
        problem = f"{name}: not TOML ({err}); using the defaults"
    except ValidationError as err:
        problem = f"{name}: {one_line(err)}; using the defaults"
    except (MemtuiError, OSError) as err:
        problem = f"{one_line(err)}; using the defaults"
    return Loaded(Preferences(), path, shown(problem))


def to_toml(preferences: Preferences) -> str:
    """The file's text: only what differs from the defaults, one key a line."""
    lines = ["# memtui's dashboard preferences (the u and t keys write this file)"]
    if preferences.unit != "GB":
        lines.append(f'unit = "{preferences.unit}"')
    if preferences.theme is not None:
        lines.append(f"theme = {_quoted(preferences.theme)}")
    if preferences.interval is not None:
        lines.append(f"interval = {preferences.interval!r}")
    if preferences.hidden:
        lines.append("hidden = [" + ", ".join(f'"{p.value}"' for p in preferences.hidden) + "]")
    return "\n".join(lines) + "\n"


def _quoted(value: str) -> str:
    # a TOML basic string: backslash and quote escaped, controls as \uXXXX
    escaped = "".join(
        f"\\u{ord(c):04x}" if not c.isprintable() else ("\\" + c if c in '"\\' else c)
        for c in value
    )
    return f'"{escaped}"'


def save(preferences: Preferences, path: Path) -> str | None:
    """Write `preferences` to `path` atomically; None, or one line saying why it could not."""
    from memtui.plans.files import write_atomic

    try:
        write_atomic(path, to_toml(preferences))
    except OSError as err:
        return shown(f"cannot write preferences {path}: {err.strerror or err}")
    return None
