"""Saved plans: a Plan as a small TOML file (`memtui --plan FILE`, and the save key).

The model is stored by reference (what the user typed: a catalog id, a config.json path, a
cached repo id) or as a bare parameter count, never as its full architecture, so the file stays
short and readable. A path ref is written relative to the plan file's folder, and a relative
path ref is read against that folder first (then as typed: the working folder, the catalog,
the Hugging Face cache), so a plan and its config.json can move together.

Writes are atomic (`memtui.plans.files.write_atomic`). No Textual here: the CLI imports it
before the app starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from memtui.errors import UsageError, one_line
from memtui.estimator import ModelSpec, Plan
from memtui.plans.files import write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def plan_to_toml(plan: Plan, base_dir: Path | None = None) -> str:
    """The plan as TOML text (None values are left out: TOML has no null). A model ref that
    is an existing path is written relative to `base_dir` (the plan file's folder)."""
    import tomli_w

    data = _without_none(plan.model_dump(mode="json"))
    spec = plan.model
    if spec.architecture.assumed:
        data["model"] = {"parameters": spec.parameters, "name": spec.name}
    else:
        data["model"] = {"ref": _ref_for(spec.name, base_dir)}
    return "# memtui plan (load with `memtui --plan FILE`)\n" + tomli_w.dumps(data)


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    """TOML has no null: a None setting (its default, "auto") is left out, at any depth."""
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None
    }


def _ref_for(ref: str, base_dir: Path | None) -> str:
    path = Path(ref).expanduser()
    try:
        if base_dir is None or not path.exists():
            return ref  # a catalog id or a cached repo id
    except OSError:
        return ref
    try:
        return os.path.relpath(path.resolve(), base_dir.resolve())
    except ValueError:  # another drive (Windows): no relative path exists
        return str(path.resolve())


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write `plan` to `path` atomically; returns the path written."""
    target = Path(path).expanduser()
    return write_atomic(target, plan_to_toml(plan, target.parent))


def _beside(ref: str, folder: Path) -> str:
    """A relative path ref as seen from the plan file's folder, when it exists there."""
    path = Path(ref).expanduser()
    try:
        if not path.is_absolute() and (folder / path).exists():
            return str(folder / path)
    except OSError:  # e.g. a 300-character ref: load_model says what is wrong with it
        pass
    return ref


def load_plan(path: str | Path) -> Plan:
    """Read a saved plan; any problem raises UsageError with one line (file and field)."""
    from pydantic import ValidationError

    from memtui.bounded import PLAN, read_text
    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.model_source import load_model
    from memtui.plans.hub import fetch_config
    from memtui.text import shown

    source = Path(path).expanduser()
    text = read_text(source, PLAN, UsageError, f"--plan {shown(source)}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"--plan {shown(source)}: not valid TOML ({shown(err)})") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise UsageError(f"--plan {shown(source)}: TOML nested too deeply") from None
    model = data.pop("model", None)
    try:
        if not isinstance(model, dict):
            raise UsageError("[model] table missing: give ref = 'catalog id or path'")
        unknown = sorted(set(model) - {"ref", "parameters", "name"})
        if unknown:
            raise UsageError(f"[model] has no key {unknown[0]!r} (keys: ref, parameters, name)")
        if "ref" in model:
            spec = load_model(_beside(str(model["ref"]), source.parent), fetch_config)
        elif "parameters" in model:
            count = model["parameters"]
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise UsageError(
                    f"model.parameters: must be a whole number of at least 1, got {count!r}"
                )
            spec = ModelSpec.from_parameters(count, model.get("name"))
        else:
            raise UsageError("[model] needs ref = '...' or parameters = N")
        return Plan(**data, model=spec)
    except (ValidationError, ModelConfigError, ValueError, TypeError) as err:
        raise UsageError(f"--plan {shown(source)}: {one_line(err)}") from None
