"""The frameworks' versions from the job's own requirement and lock files (`--from
requirements.txt`, `uv.lock`, ...): what the stacks' version rules follow
(memtui.estimator.versions), each version with the file and line that pinned it.

Only an exact pin is a version the job runs: `transformers==4.48.1` in a requirements file
or pip freeze output (pip's requirements-file format; `===` too), `[project].dependencies`
and optional dependencies of a pyproject.toml (PEP 621), and the resolved `[[package]]`
entries of uv.lock, poetry.lock and pdm.lock or the `[[packages]]` of a pylock.toml (PEP
751), the `default` and `develop` sections of a Pipfile.lock. A range (`>=4.45,<4.53`), a URL
or a wildcard says which versions may be installed, not which one is: it is named in
`ignored` (give --transformers-version or --installed-versions), never guessed. Two files
that pin different versions of one package are a contradiction, as for any other fact.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memtui.estimator.versions import Package, release
from memtui.plans.facts import ConfigError, Facts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_LOCKS = frozenset({"uv.lock", "poetry.lock", "pdm.lock"})
_REQUIREMENTS = re.compile(r"^(requirements|constraints)[\w.-]*\.(txt|in)$", re.IGNORECASE)
_PYLOCK = re.compile(r"^pylock(\.[\w-]+)?\.toml$", re.IGNORECASE)
# pip's requirement line: a name, optional [extras], the specifiers, optional ; markers
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?P<spec>[^;@]*)(?P<url>@.*)?"
)
_PIN = re.compile(r"^===?\s*(?P<version>[0-9][^\s,*]*)$")
_PACKAGES = {package.value: package for package in Package}


def claims(path: Path) -> bool:
    """Whether `path` is named as a requirement or lock file is."""
    name = path.name
    return (
        name in _LOCKS
        or name in ("Pipfile.lock", "pyproject.toml")
        or bool(_REQUIREMENTS.match(name) or _PYLOCK.match(name))
    )


def read(path: Path, shown: str, text: str) -> Facts:
    """The versions `text` (the file at `path`, named `shown`) pins, as `versions.<package>`
    facts; a range or an unpinned framework is an `ignored` line."""
    facts = Facts(shown)
    name = path.name
    if name == "Pipfile.lock":
        entries = _pipfile(text, shown)
    elif name.endswith((".lock", ".toml")):
        entries = _toml(name, text, shown)
    else:
        entries = _requirements(text)
    pins: dict[Package, list[tuple[str, str]]] = {}
    for package_name, spec, where in entries:
        package = _PACKAGES.get(_normal(package_name))
        if package is None:
            continue
        pin = _PIN.match(spec.strip())
        if pin is None:
            shown_spec = spec.strip() or "no version"
            facts.ignore(
                f"{where}: {package.value} {shown_spec}",
                "a range, not the version the job runs: the stacks' version rules take "
                f"their defaults (give --{package.value}-version or --installed-versions)",
            )
            continue
        pins.setdefault(package, []).append((pin["version"], where))
    for package, found in pins.items():
        versions = sorted({version for version, _ in found})
        # a lock resolves one version per platform (torch 2.10.0 on macOS, 2.10.0+cu128 on
        # x86-64 Linux): one release is one version to the rules; several are not known
        if len({release(version) for version in versions}) > 1:
            facts.ignore(
                f"{found[0][1]}: {package.value} {', '.join(versions)}",
                "one per platform or Python version, and not the same release: the stacks' "
                f"version rules take their defaults (give --{package.value}-version)",
            )
            continue
        version, where = found[0]
        if len(versions) > 1:
            facts.assume(f"{package.value} {', '.join(versions)} by platform: release {version}")
        # the version as text: two files pinning the same one agree (derive makes it a
        # PackageVersion with the fact's origin)
        facts.state(f"versions.{package.value}", version, where)
    if not pins and not facts.ignored:
        facts.assume("pins none of the frameworks whose versions memtui follows")
    return facts


def _normal(name: str) -> str:
    # PEP 503: names compare lower-case with runs of -, _ and . as one -
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(text: str) -> Iterator[tuple[str, str, str]]:
    """(name, specifier, 'line N') of each requirement of a requirements file or pip freeze
    output; options (-r, -e, --index-url) and comments are skipped."""
    for number, raw in enumerate(text.splitlines(), 1):
        # pip-compile's `pkg==1.0 \` continued by `--hash=...` lines, and inline options
        line = raw.split(" #", 1)[0].split(" --", 1)[0].rstrip("\\ ").strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = _REQUIREMENT.match(line)
        if match is None:
            continue
        spec = "a URL" if match["url"] else match["spec"]
        yield match["name"], spec, f"line {number}"


def _toml(name: str, text: str, shown: str) -> Iterator[tuple[str, str, str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{shown}: not TOML: {err}") from None
    if name == "pyproject.toml":
        project = data.get("project")
        if not isinstance(project, dict):
            raise ConfigError(f"{shown}: no [project] table (PEP 621): no dependencies to read")
        groups = [("dependencies", project.get("dependencies"))]
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            groups += [(f"optional-dependencies.{k}", v) for k, v in optional.items()]
        for where, listed in groups:
            for line in _strings(listed, shown, where):
                match = _REQUIREMENT.match(line.strip())
                if match is not None:
                    yield match["name"], "a URL" if match["url"] else match["spec"], where
        return
    key = "packages" if _PYLOCK.match(name) else "package"
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise ConfigError(f"{shown}: '{key}' must be a list of tables")
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            version = entry.get("version")
            spec = f"=={version}" if isinstance(version, str) else ""
            yield entry["name"], spec, f"{key}[{index}]"


def _strings(value: Any, shown: str, where: str) -> Iterable[str]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{shown}: '{where}' must be a list of requirement strings")
    return value


def _pipfile(text: str, shown: str) -> Iterator[tuple[str, str, str]]:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"{shown}: not JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: not a Pipfile.lock (an object with 'default')")
    for section in ("default", "develop"):
        packages = data.get(section) or {}
        if not isinstance(packages, dict):
            raise ConfigError(f"{shown}: '{section}' must be an object")
        for name, entry in packages.items():
            version = entry.get("version") if isinstance(entry, dict) else None
            yield name, version if isinstance(version, str) else "", f"{section}.{name}"
