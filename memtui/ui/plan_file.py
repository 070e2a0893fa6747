"""Saved plans: a Plan as a small TOML file (`memtui --plan FILE`, and the save key).

The model is stored by reference (what the user typed: a catalog id, a config.json path, a
cached repo id) or as a bare parameter count, never as its full architecture, so the file stays
short and readable. Writes are atomic (a temporary file in the same folder, then `os.replace`),
so a crash mid-save never leaves half a plan. No Textual here: the CLI imports it before the
app starts.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from memtui.errors import UsageError
from memtui.estimator import ModelSpec, Plan

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def plan_to_toml(plan: Plan) -> str:
    """The plan as TOML text (None values are left out: TOML has no null)."""
    import tomli_w

    data: dict[str, Any] = {k: v for k, v in plan.model_dump(mode="json").items() if v is not None}
    spec = plan.model
    if spec.architecture.assumed:
        data["model"] = {"parameters": spec.parameters, "name": spec.name}
    else:
        data["model"] = {"ref": spec.name}
    return "# memtui plan (load with `memtui --plan FILE`)\n" + tomli_w.dumps(data)


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write `plan` to `path` atomically; returns the path written."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    text = plan_to_toml(plan)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())  # the rename must not publish an empty file after a crash
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_plan(path: str | Path) -> Plan:
    """Read a saved plan; any problem raises UsageError with one line (file and field)."""
    from pydantic import ValidationError

    from memtui.commands.plan_flags import one_line
    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.model_source import load_model

    source = Path(path).expanduser()
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"--plan {source}: cannot read it ({err.strerror or err})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"--plan {source}: not valid TOML ({err})") from None
    model = data.pop("model", None)
    try:
        if not isinstance(model, dict):
            raise ValueError("[model] table missing: give ref = 'catalog id or path'")
        if "ref" in model:
            spec = load_model(str(model["ref"]))
        elif "parameters" in model:
            spec = ModelSpec.from_parameters(int(model["parameters"]), model.get("name"))
        else:
            raise ValueError("[model] needs ref = '...' or parameters = N")
        return Plan(**data, model=spec)
    except (ValidationError, ModelConfigError, ValueError, TypeError) as err:
        raise UsageError(f"--plan {source}: {one_line(err)}") from None
