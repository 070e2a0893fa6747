"""The job-config formats memtui reads and writes, declared once in `FORMATS`.

A `ConfigFormat` holds what the CLI and the dashboard need to know of a format (its name,
the file names it is read from and written as, whether memtui writes it, the stacks it
launches) and names the codec module that reads and writes it. The codec is imported on the
first detect, read or export: `memtui --help`, `memtui export --format`'s choices and an
estimate without `--from` import no codec (and no PyYAML). Every list of formats a user reads
(`--from`'s help, the export choices, the error for a file memtui does not know, the
dashboard's export key) comes from `FORMATS`, so adding a format is its codec module and its
entry here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, cast

from memtui.estimator.choices import StackName
from memtui.plans.facts import ConfigError, Document, Facts

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan


class Codec(Protocol):
    """What a codec module defines (`memtui/plans/deepspeed_json.py` and its siblings)."""

    def detect(self, data: dict[str, Any]) -> bool:
        """Whether a parsed config is this format, by the format's own keys."""
        ...

    def read(self, doc: Document) -> Facts:
        """The config's facts, each with its key."""
        ...

    def export(self, plan: Plan) -> str:
        """The plan as this format (only where `ConfigFormat.exports`)."""
        ...


@dataclass(frozen=True)
class ConfigFormat:
    """One job-config format and the module that reads (and maybe writes) it."""

    name: str
    """Its spelling in `memtui export --format` and in a launcher's `ConfigRef.kind`."""
    title: str
    """How help and messages name it ("DeepSpeed JSON")."""
    codec: str
    """The module with its `detect`, `read` and, when it exports, `export` (see `Codec`)."""
    suffixes: tuple[str, ...]
    """File names it comes in (a file with none of them is read as a launch script); an
    export is written with the first."""
    exports: bool = False
    """Whether `memtui export` writes it."""
    launches: tuple[StackName, ...] = ()
    """The stacks launched with it: the dashboard's export key writes this format for them."""

    @property
    def suffix(self) -> str:
        """The file name suffix of an export."""
        return self.suffixes[0]

    def _codec(self) -> Codec:
        return cast(Codec, import_module(self.codec))  # lazily: see the module docstring

    def detect(self, data: dict[str, Any]) -> bool:
        return self._codec().detect(data)

    def read(self, doc: Document) -> Facts:
        return self._codec().read(doc)

    def export(self, plan: Plan) -> str:
        """The plan as this format (ConfigError when the plan's stack cannot be one)."""
        if not self.exports:
            raise ConfigError(f"memtui reads {self.title} but does not write it")
        return self._codec().export(plan)


class FormatRegistry:
    """The formats in the order detection tries them (the most specific keys first)."""

    def __init__(self, *formats: ConfigFormat) -> None:
        self._formats = formats

    def __iter__(self) -> Iterator[ConfigFormat]:
        return iter(self._formats)

    def __getitem__(self, name: str) -> ConfigFormat:
        for fmt in self._formats:
            if fmt.name == name:
                return fmt
        raise KeyError(name)

    @property
    def exporting(self) -> tuple[ConfigFormat, ...]:
        """The formats `memtui export --format` offers."""
        return tuple(f for f in self._formats if f.exports)

    def launched_with(self, stack: StackName) -> ConfigFormat | None:
        """The format `stack` is launched with (the dashboard's export key writes it)."""
        return next((f for f in self._formats if stack in f.launches), None)

    def reads_suffix(self, suffix: str) -> bool:
        """Whether a file named with `suffix` is a config of some format."""
        return any(suffix in f.suffixes for f in self._formats)

    @contextmanager
    def extended(self, fmt: ConfigFormat, at: int | None = None) -> Iterator[ConfigFormat]:
        """`fmt` registered (at position `at` in detection order, default last) until the
        block ends: a format added for a test never outlives it."""
        saved = self._formats
        where = len(saved) if at is None else at
        self._formats = (*saved[:where], fmt, *saved[where:])
        try:
            yield fmt
        finally:
            self._formats = saved


def spoken(words: Iterable[str]) -> str:
    """`a, b or c`: a list as a message says it."""
    *head, last = words
    return f"{', '.join(head)} or {last}" if head else last


FORMATS = FormatRegistry(
    ConfigFormat(
        "torchtune",
        "torchtune YAML",
        "memtui.plans.torchtune_yaml",
        (".yaml", ".yml"),
        exports=True,
        launches=(StackName.torchtune,),
    ),
    ConfigFormat(
        "accelerate",
        "accelerate YAML",
        "memtui.plans.accelerate_yaml",
        (".yaml", ".yml"),
        exports=True,
        launches=(StackName.fsdp2, StackName.fsdp1),
    ),
    ConfigFormat(
        "deepspeed",
        "DeepSpeed JSON",
        "memtui.plans.deepspeed_json",
        (".json",),
        exports=True,
        launches=(StackName.deepspeed,),
    ),
    ConfigFormat(
        "axolotl", "axolotl YAML", "memtui.plans.axolotl_yaml", (".yaml", ".yml"), exports=True
    ),
    ConfigFormat(
        "llamafactory", "LLaMA-Factory YAML", "memtui.plans.llamafactory_yaml", (".yaml", ".yml")
    ),
    ConfigFormat("trl", "TRL config YAML", "memtui.plans.trl_args", (".yaml", ".yml")),
    ConfigFormat(
        "trainer-args",
        "TrainingArguments JSON",
        "memtui.plans.trainer_args",
        (".json",),
        exports=True,
        launches=(StackName.trainer,),
    ),
)
"""Every format memtui reads, in detection order."""
