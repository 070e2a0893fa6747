"""`memtui export --from run.sh`: the launch script (or command-line file), edited.

A launch line has no export of its own: its facts come from the launcher's options (the
process count), the trainer's arguments on the command line, and the files they name. The
edit works from the facts, as `memtui.plans.roundtrip.edit` does for configs:

- the plan's changes are the facts where the Trainer-arguments export of the plan the file
  imports to and of the plan exported differ (`memtui.plans.trainer_args.export`: the
  micro-batch, the precision, the LoRA rank, the ZeRO stage of its inline DeepSpeed
  config...), and the GPUs per node;
- each is written at the argument the file's reader stated it from (its origin:
  `--lora_dim` in a DeepSpeed-Chat script, `--per_gpu_train_batch_size`, `torchrun
  --nproc_per_node`), or, when the file left it to a default, at the argument the default
  is named by, added at the end of the command's arguments (the launcher's process count
  before its script) in the command's own continuation style;
- the value written is one the export says for that fact (the export key's value, the
  fact's own value, or for a flag without one its presence or absence); each candidate is
  read back by the same reader (`memtui.plans.registry.read_files`) and kept only when the
  fact then reads as the plan's and no other fact moved. What no candidate can say is left
  for the caller's "not written" line, with where it lives when that is another file (a
  DeepSpeed JSON the command names: its own `--format` edits it).

A launcher that takes overrides of its config on the line (`tune run ... batch_size=4`,
`llamafactory-cli train cfg.yaml key=value`, `axolotl train cfg.yml --micro_batch_size 4`) has
its changes in its config's keys (the config format's export where memtui writes it, else the
Trainer's arguments): a key the line overrides is changed in its override (the override wins
over the file: the change there would be lost), any other is added as an override of the
line's own kind (`memtui.plans.facts.Override`).

Only the launch command's words change: other lines, comments, `export` lines and other
commands keep their bytes; a new value is shell-quoted (`shlex.quote`), never spliced raw.
An unchanged plan gives the file byte for byte.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.plans.facts import (
    ConfigError,
    Document,
    Fact,
    Facts,
    parse_json,
    parse_yaml,
    read_from,
    read_text,
)
from memtui.plans.formats import FORMATS, ConfigFormat

if TYPE_CHECKING:
    import argparse

    from memtui.estimator.plan import Plan
    from memtui.plans.launchers import Launch
    from memtui.plans.roundtrip import Edited

_GPUS = "hardware.gpus_per_node"
#: Facts an edit of a fact may move: a process count given to `accelerate launch` (or `trl`)
#: without a config ends "every GPU of the node" and states its multi-GPU launch
#: (commands/launch.py: --num_processes > 1 is a multi-GPU launch, one machine); the caller
#: reads the edit back to the plan and refuses it if any field it did not change moved
_GOES_WITH = {_GPUS: ("gpus_default", "hardware.nodes", "strategy", "engine")}
_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = "|&;<>()"
#: A launcher's process-count option, by its program (torch 2.13 distributed/run.py,
#: accelerate 1.15 commands/launch.py, deepspeed launcher/runner.py, trl 1.16 cli)
_COUNT_OPTION = {"torchrun": "--nproc_per_node", "accelerate": "--num_processes",
                 "deepspeed": "--num_gpus", "trl": "--num_processes",
                 "tune": "--nproc_per_node"}  # fmt: skip
#: The words that name the launcher before its options (`accelerate launch`, `trl sft`)
_LAUNCHER_WORDS = {"torchrun": 1, "accelerate": 2, "deepspeed": 1, "trl": 2, "tune": 2}
#: Launchers that take overrides of their config after it, and how (`memtui.plans.launchers`):
#: torchtune config/_utils.py _merge_yaml_and_cli_args and LLaMA-Factory hparams/parser.py
#: read_args (OmegaConf dotlists over the YAML, `key=value`); axolotl cli/utils/args.py
#: add_options_from_config (a click option per top-level config field, `--key value`)
_OVERRIDES = {"tune run": "key=value", "llamafactory-cli train": "key=value",
              "axolotl train": "--key value"}  # fmt: skip
#: Values YAML or pydantic read as booleans: never an axolotl option's value (a boolean
#: field is a `--flag/--no-flag` pair there)
_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "none"})


@dataclass(frozen=True)
class LaunchFile:
    """A launch script or command-line file the user gave (`--from run.sh`)."""

    path: Path
    shown: str
    text: str
    cwd: Path

    written_as = title = "launch script"
    """What `memtui export` says it wrote, and how messages name it."""

    def configs(self) -> list[str]:
        """The config files its launch names, as messages show them (from the launch folder):
        the launcher's (`--config_file`, `tune run --config`...) and the ones its arguments
        name (the Trainer's `--deepspeed`)."""
        from memtui.plans.registry import launch_command

        launch = launch_command(self.text, self.shown, self.cwd)[1]
        named = [ref.path for ref in launch.configs if ref.builtin is None]
        named += [path for path, _ in self.facts().references if path not in named]
        return [str(_relative(path, self.cwd)) for path in named]

    def facts(self, text: str | None = None) -> Facts:
        """What the import reads from this file (or from `text` in its place)."""
        from memtui.plans.registry import read_as, read_files

        with read_as(self.path, self.text if text is None else text):
            return read_files([self.shown], self.cwd)


def launch_file(paths: list[str], cwd: Path) -> LaunchFile | None:
    """The first of `paths` that the import reads as a launch (a file whose name no config
    format has and whose text is not JSON), read; None when there is none."""
    from memtui.plans import lockfiles

    for shown in paths:
        path = Path(shown).expanduser()
        resolved = (cwd / path if not path.is_absolute() else path).resolve()
        if not resolved.is_file() or FORMATS.reads_suffix(resolved.suffix.lower()):
            continue
        if lockfiles.claims(resolved):
            continue
        text = read_text(resolved, shown)
        if not text.lstrip().startswith("{"):
            return LaunchFile(resolved, shown, text, cwd)
    return None


def overridden(paths: list[str], cwd: Path) -> dict[str, Fact]:
    """The facts a `--from` launch line's config overrides decide (`tune run ...
    batch_size=4`), by fact key: a config edit must leave them, the line's override wins
    over the file (`memtui export --from LINE` edits the override instead)."""
    file = launch_file(paths, cwd)
    if file is None:
        return {}
    return {k: f for k, f in file.facts().values.items() if f.override is not None}


# -- the words of a command, with their offsets -----------------------------------------------


@dataclass(frozen=True)
class LaunchOrigin:
    """A user's launch script and the plan it imports to (as `memtui.plans.roundtrip.Origin`
    is for a config)."""

    file: LaunchFile
    plan: Plan
    files_only: argparse.Namespace | None = None
    """The command's arguments with only --from and --plan kept (how `plan` was built)."""


@dataclass(frozen=True)
class _Word:
    value: str
    """As the shell reads it: quotes removed (variables left as written)."""
    start: int
    end: int


def _words(text: str, pos: int) -> list[_Word]:
    """The words of the simple command starting at `pos` (POSIX quoting, `\\`-newline
    continuations), up to its end: a newline, a comment, or a shell operator (a pipe, a
    redirection, `;`, `&&`): what follows an operator is not the command's arguments."""
    words: list[_Word] = []
    n = len(text)
    while True:
        while pos < n and (text[pos] in " \t" or text.startswith("\\\n", pos)):
            pos += 2 if text[pos] == "\\" else 1
        if pos >= n or text[pos] in "\n#" or text[pos] in _OPERATORS:
            return words
        start, value = pos, []
        while pos < n and text[pos] not in " \t\n" and text[pos] not in _OPERATORS:
            char = text[pos]
            if char == "\\":
                if pos + 1 < n and text[pos + 1] != "\n":
                    value.append(text[pos + 1])
                pos += 2
            elif char == "'":
                close = text.find("'", pos + 1)
                if close < 0:
                    raise ConfigError("unterminated quote")
                value.append(text[pos + 1 : close])
                pos = close + 1
            elif char == '"':
                pos += 1
                while pos < n and text[pos] != '"':
                    if text[pos] == "\\" and pos + 1 < n and text[pos + 1] in '"\\$`\n':
                        if text[pos + 1] != "\n":
                            value.append(text[pos + 1])
                        pos += 2
                        continue
                    value.append(text[pos])
                    pos += 1
                if pos >= n:
                    raise ConfigError("unterminated quote")
                pos += 1
            else:
                value.append(char)
                pos += 1
        if text[start:pos].isdigit() and pos < n and text[pos] in "<>":
            return words  # `2>`: a redirection's file descriptor
        words.append(_Word("".join(value), start, pos))


def _line_start(text: str, number: int) -> int:
    """The offset of logical line `number` (1-based) as the import counts them: physical
    lines joined at each backslash-newline (memtui.plans.registry._Reader.commands)."""
    pos = 0
    for _ in range(number - 1):
        while True:
            found = text.find("\n", pos)
            if found < 0:
                raise ConfigError(f"line {number}: not in the file")
            pos = found + 1
            if found == 0 or text[found - 1] != "\\":
                break
    return pos


# -- the edit ---------------------------------------------------------------------------------


class _Command:
    """The launch command's text in the script, and the word edits made to it."""

    def __init__(self, file: LaunchFile, number: int, store_true: frozenset[str]) -> None:
        self.file, self.number = file, number
        self.text = file.text
        self.store_true = store_true
        """The script's arguments that take no value (argparse `store_true`)."""

    def words(self) -> list[_Word]:
        try:
            return _words(self.text, _line_start(self.text, self.number))
        except ConfigError as err:
            raise ConfigError(f"{self.file.shown}:{self.number}: {err}") from None

    def program(self, words: list[_Word]) -> int:
        """The index of the program word (after `NAME=value` assignments)."""
        i = 0
        while (
            i < len(words)
            and "=" in words[i].value
            and _NAME.fullmatch(words[i].value.partition("=")[0])
        ):
            i += 1
        return i

    def find(self, flag: str) -> tuple[int, bool] | None:
        """The index of the word spelling `flag` (`--flag`, `--flag=...`, dashes and
        underscores alike), and whether it holds its value (`=`)."""
        words = self.words()
        names = {flag, flag.replace("_", "-"), "--" + flag[2:].replace("-", "_")}
        for i, word in enumerate(words):
            name, eq, _ = word.value.partition("=")
            if name in names:
                return i, bool(eq)
        return None

    def splice(self, start: int, end: int, new: str) -> None:
        self.text = self.text[:start] + new + self.text[end:]

    def set(self, flag: str, value: str | None, launcher: bool) -> bool:
        """`flag` given `value` (None: bare); False when it cannot be written here."""
        words = self.words()
        found = self.find(flag)
        rendered = "" if value is None else shlex.quote(value)
        if found is None:
            self._add(words, flag + ("" if value is None else " " + rendered), launcher)
            return True
        i, inline = found
        word = words[i]
        name = word.value.partition("=")[0]
        has_value = i + 1 < len(words) and not words[i + 1].value.startswith("--")
        if inline:
            if value is None:
                return False
            self.splice(word.start, word.end, f"{name}={rendered}")
        elif value is None:
            if has_value:
                self.splice(word.end, words[i + 1].end, "")
        elif has_value:
            self.splice(words[i + 1].start, words[i + 1].end, rendered)
        else:
            self.splice(word.end, word.end, " " + rendered)
        return True

    def set_word(self, key: str, value: str) -> bool:
        """The command's `key=value` word (an override as `tune run` takes it) given `value`,
        or added after its last argument when it has none."""
        words = self.words()
        rendered = shlex.quote(f"{key}={value}")
        for word in words[self.program(words) + 1 :]:
            if word.value.partition("=")[0] == key:
                self.splice(word.start, word.end, rendered)
                return True
        self._add(words, rendered, launcher=False)
        return True

    def remove(self, flag: str) -> bool:
        """`flag` (and its value, when it has one) removed; False when it is not there."""
        words = self.words()
        found = self.find(flag)
        if found is None:
            return False
        i, inline = found
        last = i + 1 if not inline and i + 1 < len(words) and not (
            words[i + 1].value.startswith("--")) else i  # fmt: skip
        self._cut(words[i].start, words[last].end)
        return True

    def _cut(self, start: int, end: int) -> None:
        """Words [start, end) removed with the blanks before them; a line they leave empty
        goes whole (and a continuation that led into it, when it was the command's last)."""
        text = self.text
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        before, after = text[line_start:start], text[end:line_end]
        if before.strip() == "" and after.strip() == "\\":
            self.splice(line_start, min(line_end + 1, len(text)), "")
        elif before.strip() == "" and after.strip() == "" and line_start > 0:
            previous = text[: line_start - 1].rstrip(" \t")
            if previous.endswith("\\"):  # the command's last line: its continuation goes
                cut = len(previous[:-1].rstrip(" \t"))
                self.splice(cut, line_end, "")
            else:
                self.splice(start, end, "")
        else:
            while start > line_start and text[start - 1] in " \t":
                start -= 1
            self.splice(start, end, "")

    def _script(self, words: list[_Word]) -> int:
        """Where the launcher's options end: after the launcher's own words."""
        program = self.program(words)
        name = Path(words[program].value).name if program < len(words) else ""
        return program + _LAUNCHER_WORDS.get(name, 1)

    def _add(self, words: list[_Word], new: str, launcher: bool) -> None:
        """`new` added: a launcher option right after the launcher's words, anything else
        after the command's last argument, on a line of its own (in that line's
        indentation) when the command continues its arguments over lines."""
        if launcher:
            at = words[min(self._script(words), len(words)) - 1].end
            self.splice(at, at, " " + new)
            return
        first, last = words[self.program(words)], words[-1]
        line_start = self.text.rfind("\n", 0, last.start) + 1
        line = self.text[line_start : last.start]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\\\n" in self.text[first.start : last.end] and line_start > first.start:
            self.splice(last.end, last.end, f" \\\n{indent}{new}")
        else:
            self.splice(last.end, last.end, " " + new)


def edit(origin: LaunchOrigin, plan: Plan) -> Edited:
    """`origin`'s launch command changed to say `plan` where it differs from the plan the
    file imports to; what it cannot say is left to the caller's read-back."""
    from memtui.plans.roundtrip import Edited

    file, before = origin.file, origin.plan
    edited = Edited(file.text, file.text)
    if plan == before:
        return edited
    from memtui.plans import deepspeed_chat, trainer_args
    from memtui.plans.registry import launch_command

    ours = file.facts()
    number, launch, _, _ = launch_command(file.text, file.shown, file.cwd)
    script_args = trainer_args.parse_argv(list(launch.script_args))[0]
    store_true = deepspeed_chat.STORE_TRUE if deepspeed_chat.detect(script_args) else frozenset()
    style = _OVERRIDES.get(launch.launcher) if launch.configs else None
    old, new = _exports(file, before, plan, _config_format(launch) if style else None)
    changed = {k for k in {*old.facts.values, *new.facts.values}
               if _value(old.facts, k) != _value(new.facts, k)}  # fmt: skip
    targets = {k: new.facts.values[k].value for k in changed if k in new.facts.values}
    if style:  # a config's reader states no fact for a setting that is off (torchtune's)
        targets.update({k: None for k in changed if k not in new.facts.values})
    if plan.hardware.gpus_per_node != before.hardware.gpus_per_node:
        targets[_GPUS] = plan.hardware.gpus_per_node
    command = _Command(file, number, store_true)
    current = ours
    done: set[str] = set()
    for key in sorted(targets):
        target = targets[key]
        if _value(current, key) == target:
            continue
        fact = current.values.get(key)
        attempts: Iterable[Attempt] | None = None
        if style:
            config = launch.configs[0].where
            attempts = _override_attempts(command, style, config, fact, target, key, new)
        if attempts is None:
            flag = _flag(fact, key, command)
            if flag is None:
                _elsewhere(edited, file, key, fact)
                continue
            attempts = _flag_attempts(command, flag, key, target, new)
        for attempt in attempts:
            saved = command.text
            if attempt():
                read = _read(file, command.text)
                # every other fact as it was, but the plan's changes still to be made
                pending = targets.keys() - done
                moved = {key, *_GOES_WITH.get(key, ())}
                if (
                    read is not None
                    and _value(read, key) == target
                    and all(
                        _value(read, k) == _value(current, k)
                        for k in (read.values.keys() | current.values.keys()) - moved - pending
                    )
                ):
                    current = read
                    done.add(key)
                    break
            command.text = saved
        else:
            _elsewhere(edited, file, key, fact)
    edited.text = command.text
    return edited


class _Exported:
    """The Trainer-arguments export of a plan: its data, its facts, and which scalar
    values decide each fact."""

    def __init__(self, data: dict[str, Any], facts: Facts, deciding: dict[str, list[Any]]):
        self.data, self.facts, self.deciding = data, facts, deciding


def _config_format(launch: Launch) -> ConfigFormat | None:
    """The format of the config a launch with overrides names, when memtui writes it (its
    keys are the ones the line overrides); None: the Trainer's arguments (LLaMA-Factory)."""
    kind = launch.configs[0].kind
    fmt = FORMATS[kind] if kind in {f.name for f in FORMATS} else None
    return fmt if fmt is not None and fmt.exports else None


def _exports(
    file: LaunchFile, before: Plan, plan: Plan, fmt: ConfigFormat | None = None
) -> tuple[_Exported, _Exported]:
    """The exports of both plans (as `fmt`, else the Trainer's arguments). An objective the
    Trainer-arguments export has no config for (ORPO, CPO: experimental in trl 1.16) but
    both plans share is exported as SFT in both: the arguments the two differ in are the
    same, and the objective is not changed."""
    from memtui.estimator.choices import Objective

    try:
        return _export(before, file.cwd, fmt), _export(plan, file.cwd, fmt)
    except ConfigError as err:
        error = err
    if before.objective is plan.objective and plan.objective is not Objective.sft:
        try:
            sft = Objective.sft
            return (_export(before.evolve(objective=sft), file.cwd, fmt),
                    _export(plan.evolve(objective=sft), file.cwd, fmt))  # fmt: skip
        except ConfigError:
            pass
    through = f"its {fmt.title} config's keys" if fmt else "the Trainer's arguments"
    raise ConfigError(f"{file.shown}: memtui edits this launch line through {through}: {error}")


def _export(plan: Plan, cwd: Path, fmt: ConfigFormat | None = None) -> _Exported:
    from memtui.plans import trainer_args

    if fmt is None:
        data = json.loads(trainer_args.export(plan))
        codec_read = trainer_args.read
    else:
        text = fmt.export(plan)
        data = parse_json(text, "export") if text.lstrip().startswith("{") else (
            parse_yaml(text, "export"))  # fmt: skip
        codec_read = fmt.read

    def read(args: dict[str, Any]) -> Facts:
        return codec_read(Document(cwd / "export.json", "export", args, cwd))

    facts = read(data)
    deciding: dict[str, list[Any]] = {}
    for path, value in _leaves(data, ()):
        trimmed = json.loads(json.dumps(data))
        parent = trimmed
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        try:
            without = read(trimmed)
        except ConfigError:
            continue
        for key in facts.values:
            if _value(without, key) != _value(facts, key):
                deciding.setdefault(key, []).append((path[-1], value))
    return _Exported(data, facts, deciding)


def _leaves(data: Mapping[str, Any], at: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, (*at, key))
        elif isinstance(value, (str, int, float, bool)):
            yield (*at, key), value


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


Attempt = Callable[[], bool]
"""One edit of the command tried (False: it cannot be written there); read back after."""


def _flag_attempts(
    command: _Command, flag: str, key: str, target: Any, new: _Exported
) -> Iterator[Attempt]:
    """`flag` given each candidate value, or removed."""
    for value in _candidates(target, flag, new.deciding.get(key, []), new, command):
        if value is _ABSENT:
            yield partial(command.remove, flag)
        else:
            yield partial(command.set, flag, value, key == _GPUS)


def _override_attempts(
    command: _Command,
    style: str,
    config: str,
    fact: Fact | None,
    target: Any,
    key: str,
    new: _Exported,
) -> list[Attempt] | None:
    """The edits of a launch line's config overrides that may say `target` for fact `key`:
    the override the fact comes from given each candidate value, or, for a fact its config
    states (or leaves to a default), an override of that config key added (`config`: the
    argument that names the config, as its facts' origins end). None: not a config key the
    line can override (the launcher's own options, the GPU count)."""
    if fact is None or key == _GPUS:
        return None
    if fact.override is not None:
        config_key, word = fact.override.key, fact.override.word
        written = word.split(" ", 1)[0].partition("=")[0]  # the key as the line spells it
    else:
        source = fact.origin.rpartition(":")[0]
        if not source.endswith(f" ({config})") or "(from " in source:
            return None  # the launcher's own, or a file the config names (its DeepSpeed JSON)
        paths = read_from(fact.origin, source)
        if not paths:
            return None
        config_key = paths[0]
        written = config_key if style == "key=value" else "--" + config_key.replace("_", "-")
    values = _override_values(target, config_key, new.deciding.get(key, []), new)
    if style == "key=value":
        return [partial(command.set_word, written, value) for value in values]
    if "." in config_key:  # axolotl's options are its top-level fields
        return None
    # a boolean field is axolotl's `--flag/--no-flag`, never `--flag True`; which fields are
    # boolean is its schema's, not known here: no boolean value is written as an option
    booleans = any(isinstance(v, bool) for p, v in _leaves(new.data, ()) if p[-1] == config_key)
    return [partial(command.set, written, value, False) for value in values
            if not booleans and value.lower() not in _BOOLEAN_WORDS]  # fmt: skip


def _override_values(
    target: Any, config_key: str, deciding: list[tuple[str, Any]], new: _Exported
) -> list[str]:
    """The values to try for an override of `config_key`: the export's at that key (or of
    that name), the values that decide the fact in it, the fact's own; YAML's spellings."""
    leaf = config_key.rsplit(".", 1)[-1]
    same = [v for path, v in _leaves(new.data, ()) if ".".join(path) == config_key]
    same += [v for path, v in _leaves(new.data, ()) if path[-1] == leaf]
    values = [*same, *(v for _, v in deciding), target]
    return list(dict.fromkeys(t for t in map(_rendered, values) if t is not None))


def _candidates(
    target: Any, flag: str, deciding: list[tuple[str, Any]], new: _Exported, command: _Command
) -> Iterator[Any]:
    """The values to try for `flag` (a string; None: the flag bare; _ABSENT: removed): an
    argparse `store_true` flag only bare or absent; a boolean of the Trainer's or TRL's
    (HfArgumentParser reads `--flag True|False`) True or False; any other the export's
    values for the fact (its own key's first, even where it says the default: `bf16: false`
    decides nothing in the export, but does over a `--bf16 True`) and the fact's own."""
    from memtui.plans.trainer_args import BOOL_KEYS

    name = flag[2:].replace("-", "_")
    if name in command.store_true:
        yield from (None, _ABSENT)
        return
    same = [v for path, v in _leaves(new.data, ()) if path[-1] == name]
    if name in BOOL_KEYS:
        values: list[Any] = [*(v for v in same if isinstance(v, bool)), True, False]
    else:
        values = [*same, *(v for _, v in deciding), target]
    seen: set[str] = set()
    for value in values:
        text = _rendered(value)
        if text is not None and text not in seen:
            seen.add(text)
            yield text
    yield _ABSENT


def _rendered(value: Any) -> str | None:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, (int, float, str)):
        return str(value)
    return None


def _value(facts: Facts, key: str) -> Any:
    fact = facts.values.get(key)
    return None if fact is None else fact.value


def _read(file: LaunchFile, text: str) -> Facts | None:
    try:
        return file.facts(text)
    except ConfigError:
        return None


def _own_where(origin: str, file: LaunchFile) -> str | None:
    """What a fact's origin names when the launch command itself stated (or defaulted) it:
    its `where` after the command's label (`run.sh:15` and maybe the script); else None."""
    found = re.match(rf"{re.escape(file.shown)}:\d+(?: [^:]*)?:", origin)
    return None if found is None else origin[found.end() :]


def _flag(fact: Fact | None, key: str, command: _Command) -> str | None:
    """The argument of the launch command that states fact `key`: the one its origin
    names (`run.sh:15 train.py:--lora_r`; a default by the argument it defaults, `max_length
    (SFTConfig default)`; a TrlParser --config YAML's key, which the command line overrides:
    trl 1.16 scripts/utils.py parse_args_and_config), else for the GPU count the
    launcher's own option."""
    origin = "" if fact is None else fact.origin
    where = _own_where(origin, command.file)
    flags = _FLAG.findall(where or "")
    if key == _GPUS and not flags:
        words = command.words()
        program = command.program(words)
        name = Path(words[program].value).name if program < len(words) else ""
        return _COUNT_OPTION.get(name)
    if flags:
        return flags[-1]
    if where is None and "(--config):" in origin:
        where = origin.split("(--config):", 1)[1]
    word = (where or "").split(" ", 1)[0]
    return f"--{word}" if _NAME.fullmatch(word) else None


def _elsewhere(edited: Edited, file: LaunchFile, key: str, fact: Fact | None) -> None:
    """A note for a fact the command line cannot say because a file it names states it:
    which file, and the `--format` that edits it."""
    from memtui.plans.roundtrip import config_file

    if fact is None or _own_where(fact.origin, file) is not None:
        return
    source, _, where = fact.origin.rpartition(":")
    named = source.split(" (", 1)[0]  # "ds.json (from run.sh:4 train.py:--deepspeed)"
    shown = next((p for p in file.configs() if Path(p).name == Path(named).name), None)
    if shown is None:
        return
    config = config_file([shown], None, file.cwd)
    how = ""
    if config is not None and config.fmt.exports:
        how = f": `memtui export --from {file.shown} --format {config.fmt.name}` edits it"
    note = f"{key} is {where.split(' (', 1)[0]} of {shown}, not of the command line{how}"
    if note not in edited.notes:
        edited.notes.append(note)


def _relative(path: Path, cwd: Path) -> Path:
    try:
        return path.resolve().relative_to(cwd.resolve())
    except ValueError:
        return path
