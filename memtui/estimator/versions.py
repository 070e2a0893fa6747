"""The versions of the frameworks a plan is for: each stack's books follow the code of that
version where it changed (the rules cite the file, function and version range).

A version is given by a flag (`--transformers-version 4.48.1`), read from the packages
installed where memtui runs (`memtui.commands.plan_flags`, through importlib.metadata: nothing
is imported), or not given: then a stack reads the code its module docstring names (the
current releases). A leaf module: the plan imports it, it imports only the plan's bases.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator

from memtui.errors import PlanError
from memtui.estimator.frozen import Frozen
from memtui.estimator.knobs import Entry, FlagGroup, Knob

_RELEASE = re.compile(r"(\d+(?:\.\d+){0,3})")


class Package(str, Enum):
    """The frameworks whose code decides a stack's books, by their distribution name."""

    torch = "torch"
    transformers = "transformers"
    peft = "peft"
    trl = "trl"
    accelerate = "accelerate"
    bitsandbytes = "bitsandbytes"
    deepspeed = "deepspeed"
    torchtune = "torchtune"


def release(text: str) -> tuple[int, ...]:
    """The release numbers of a version string ("4.48.1" -> (4, 48, 1); "2.5.1+cu121" and
    "0.45.0.dev0" keep their leading numbers); PlanError for text that starts with none."""
    match = _RELEASE.match(text.strip().lstrip("v"))
    if match is None:
        raise PlanError(f"{text!r} is not a version; use e.g. 4.48.1")
    return tuple(int(part) for part in match.group(1).split("."))


def _checked(text: str) -> str:
    release(text)
    return text.strip()


class PackageVersion(Frozen):
    """One framework's version and where it came from."""

    version: Annotated[str, AfterValidator(_checked)]
    source: str
    """Who said it: a flag, the installed packages, a file."""

    @property
    def release(self) -> tuple[int, ...]:
        return release(self.version)

    def __str__(self) -> str:
        return self.version


READ: dict[Package, str] = {
    Package.torch: "2.13",
    Package.transformers: "5.24",
    Package.peft: "0.21",
    Package.accelerate: "1.15",
    Package.deepspeed: "0.19.6",
}
"""The releases the stacks' books were read from (their module docstrings), assumed for a
package not given; the others' books follow their current release."""


def _knob(package: Package) -> Knob:
    return Knob(
        FlagGroup.versions,
        f"--{package.value}-version",
        f"the {package.value} the job runs (e.g. the installed one: --installed-versions)",
        Entry.version,
        "X.Y.Z",
    )


class Versions(Frozen):
    """The frameworks' versions the plan is for; None: not given, the stack reads the code
    its module names (current releases)."""

    torch: Annotated[PackageVersion | None, _knob(Package.torch)] = None
    transformers: Annotated[PackageVersion | None, _knob(Package.transformers)] = None
    peft: Annotated[PackageVersion | None, _knob(Package.peft)] = None
    trl: Annotated[PackageVersion | None, _knob(Package.trl)] = None
    accelerate: Annotated[PackageVersion | None, _knob(Package.accelerate)] = None
    bitsandbytes: Annotated[PackageVersion | None, _knob(Package.bitsandbytes)] = None
    deepspeed: Annotated[PackageVersion | None, _knob(Package.deepspeed)] = None
    torchtune: Annotated[PackageVersion | None, _knob(Package.torchtune)] = None

    def of(self, package: Package) -> PackageVersion | None:
        found: PackageVersion | None = getattr(self, package.value)
        return found

    def before(self, package: Package, version: tuple[int, ...]) -> bool:
        """Whether the plan's `package` is given and older than `version` (not given: the
        current release, never older)."""
        given = self.of(package)
        return given is not None and given.release < version

    def assumed(self) -> tuple[tuple[Package, str | None, str], ...]:
        """(package, version or None, where it came from) for every package, in order."""
        out: list[tuple[Package, str | None, str]] = []
        for package in Package:
            given = self.of(package)
            if given is not None:
                out.append((package, given.version, given.source))
            elif package in READ:
                out.append((package, READ[package], "not given: the release the stacks read"))
            else:
                out.append((package, None, "not given: its current release"))
        return tuple(out)
