"""Where a model comes from: one resolver for every way a user names one.

`resolve_model(ref)` serves `--model`, the model picker, plan files, config importers and
`memtui measure`: an existing config.json or model folder, a repo id in the local Hugging Face
cache (the user's real config wins over memtui's copy of it), a catalog id (mirrors included),
a bare parameter count ("13B", "6.7e9"), and last, when the caller passes a `ConfigFetch`, the
repo's config.json from the Hub, tried in that order.

This module reads JSON only: no model code is executed, and nothing is downloaded here (the
fetch is the caller's I/O: `memtui.plans.hub.fetch_config`). The Hugging Face cache is
searched with huggingface_hub's `try_to_load_from_cache` (the documented
`models--{org}--{name}/refs/main` -> `snapshots/{revision}/config.json` layout), imported
inside `load_model` so that importing the estimator stays cheap; the cache folder is resolved
from the environment at call time, because huggingface_hub reads HF_HOME and HF_HUB_CACHE
once, when it is first imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from memtui.bounded import MODEL_CONFIG, read_text
from memtui.errors import one_line
from memtui.estimator.catalog import CATALOG, base_of_variant, lookup_id
from memtui.estimator.configs import ModelConfigError, architecture_from_config
from memtui.estimator.plan import ModelSpec
from memtui.estimator.suggest import did_you_mean
from memtui.estimator.units import parse_count

Origin = Literal["file", "folder", "catalog", "count", "cache", "hub"]


class HubMiss(Exception):
    """The Hub has no config.json for a repo id, or was not asked: `reason` is the clause the
    not-found message ends with ("the Hub has no repo 'x'", "HF_HUB_OFFLINE=1 ...")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConfigFetch(Protocol):
    """Brings a repo's config.json into the local Hugging Face cache and returns its path;
    raises HubMiss when the Hub has none or is not to be asked, ModelConfigError (one line)
    when it refuses or fails."""

    def __call__(self, repo_id: str) -> Path: ...


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference resolved: what the estimator needs, and the config behind it."""

    spec: ModelSpec
    config: Mapping[str, Any] | None
    """The config.json object (None for a bare parameter count): what `memtui measure` builds
    the real model from."""
    origin: Origin
    """Where it was found."""


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved as huggingface_hub's constants.py documents it:
    HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
        home = os.path.join(xdg, "huggingface")
    return Path(home).expanduser() / "hub"


def read_config_file(path: Path) -> dict:
    """The parsed JSON object of a config.json; any problem is a one-line ModelConfigError."""
    text = read_text(path, MODEL_CONFIG, ModelConfigError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModelConfigError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except RecursionError:  # json's decoder recurses once per level: 100,000 '{' end it
        raise ModelConfigError(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: expected a JSON object at the top level")
    return data


def _from_file(name: str, path: Path, origin: Origin) -> ResolvedModel:
    from pydantic import ValidationError

    config = read_config_file(path)
    arch = architecture_from_config(config, str(path))
    try:
        return ResolvedModel(ModelSpec.from_architecture(name, arch), config, origin)
    except ValidationError as err:  # a count past MAX_PARAMETERS: name the file
        raise ModelConfigError(f"{path}: {one_line(err)}") from None


def _cached_config(repo_id: str, cache: Path) -> Path | None:
    """config.json of `repo_id` at refs/main in the local hub cache, or None."""
    if repo_id.count("/") > 1 or not repo_id.strip("/"):
        return None
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    if not repo.is_dir():  # a stat, before huggingface_hub's import (a catalog id is asked here)
        return None
    from huggingface_hub import try_to_load_from_cache  # lazy: keep estimator imports fast

    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(cache))
    except ValueError:  # HFValidationError (not a valid repo id) is a ValueError
        return None
    if isinstance(found, str):
        return Path(found)
    # No refs/main (downloaded by commit hash only): the newest snapshot that has a config.
    snapshots = sorted((repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def load_model(ref: str, fetch: ConfigFetch | None = None) -> ModelSpec:
    """The model named by `ref` (see `resolve_model`)."""
    return resolve_model(ref, fetch).spec


def resolve_model(ref: str, fetch: ConfigFetch | None = None) -> ResolvedModel:
    """The model named by `ref`: an existing config.json path or model folder, a repo id
    present in the local Hugging Face cache, a catalog id (see `memtui models`), a bare
    parameter count, or, with `fetch`, a repo id whose config.json the Hub has.

    Raises ModelConfigError with one line saying what was tried when nothing matches, or
    naming the file and field when a config.json cannot be read.
    """
    text = ref.strip()
    if not text:
        raise ModelConfigError("--model is empty: give a catalog id, a config.json or a folder")
    try:
        return _resolve(text, fetch)
    except OSError as err:  # e.g. ENAMETOOLONG from a 300-character "path"
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ModelConfigError(f"{shown}: cannot read it ({err.strerror or err})") from None


def bare_count(text: str) -> int | None:
    """`text` as a parameter count ("13B", "6.7e9"), or None if it is not one."""
    try:
        return parse_count(text)
    except ValueError:
        return None


def _catalog_names() -> dict[str, str]:
    """Every catalog id and alias, by itself and by its name after the slash (a typo of
    'Llama-2-7b-hf' is nearer that than the whole id), to suggest for an unknown model."""
    names: dict[str, str] = {}
    for entry in CATALOG.values():
        for name in (entry.repo_id, *entry.aliases):
            names[name] = names[name.split("/", 1)[-1]] = name
    return names


def _resolve(text: str, fetch: ConfigFetch | None) -> ResolvedModel:
    path = Path(text).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ModelConfigError(f"{path}: folder has no config.json")
        return _from_file(text, config, "folder")
    if path.is_file():
        return _from_file(text, path, "file")
    cache = hub_cache_dir()
    cached = _cached_config(text, cache)
    if cached is not None:
        return _from_file(text, cached, "cache")
    found = lookup_id(text)
    if found is not None:
        # an alias (an -Instruct twin) keeps its own name, with its base's architecture
        name, entry = found
        return ResolvedModel(
            ModelSpec.from_architecture(name, entry.architecture), entry.config, "catalog"
        )
    count = bare_count(text)
    if count is not None:
        return ResolvedModel(ModelSpec.from_parameters(count), None, "count")
    hub = ""
    if fetch is not None:
        try:
            return _from_file(text, fetch(text), "hub")
        except HubMiss as miss:
            hub = f", {miss.reason}"
    base = base_of_variant(text)
    hint = (
        f"; the catalog has {base}, but not this variant of it: give its config.json"
        if base
        else ""
    )
    if not base and (close := did_you_mean(text, _catalog_names())):
        hint = f"; {close}"
    raise ModelConfigError(
        f"model {text!r} not found: no such file or folder, not a catalog id "
        f"(see `memtui models`), not a parameter count, not in the Hugging Face cache at "
        f"{cache}{hub}{hint}"
    )
