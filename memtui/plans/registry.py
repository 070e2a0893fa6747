"""How a job's files become one set of facts.

`read_files(paths)` detects each file's format (`memtui.plans.formats.FORMATS`: by its name and
its keys), follows the files it names (an accelerate YAML's DeepSpeed JSON, the Trainer's
--deepspeed), reads a shell script or command-line file through the launcher recognition, and
merges everything (`facts.merge`: files that contradict each other are an error).
`read_launch` does the same for a recognised command line (attach).
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from memtui.plans import accelerate_yaml, deepspeed_chat, lockfiles, trainer_args, trl_args
from memtui.plans.facts import (
    ConfigError,
    Document,
    Facts,
    apply_overrides,
    attribute_overrides,
    is_json,
    keys_of,
    mapping,
    merge,
    parse_json,
    parse_yaml,
    read_text,
)
from memtui.plans.formats import FORMATS, ConfigFormat, spoken
from memtui.plans.launchers import ConfigRef, Launch, environment_settings, recognise

_MAX_FILES = 16  # a config that names itself (or a cycle) stops here
_READ_AS: ContextVar[tuple[tuple[Path, str], ...]] = ContextVar("read_as", default=())


@contextmanager
def read_as(path: Path, text: str) -> Iterator[None]:
    """Read `path` (resolved) as if it held `text` until the block ends: how an export reads
    back its edit of a file before writing it, beside the other files of the import."""
    token = _READ_AS.set(((path, text), *_READ_AS.get()))
    try:
        yield
    finally:
        _READ_AS.reset(token)


def read_files(paths: Iterable[str], cwd: Path | None = None) -> Facts:
    """Every file's facts (and those of the files they name), merged."""
    cwd = cwd or Path.cwd()
    reader = _Reader(cwd)
    shown = []
    for text in paths:
        reader.file(Path(text).expanduser(), text, None)
        shown.append(text)
    return merge(reader.parts, " + ".join(shown))


def read_launch(
    launch: Launch,
    env: Mapping[str, str] | None = None,
    label: str | None = None,
    builtin: Callable[[str], Path | None] | None = None,
    admit: Callable[[Path, str], None] | None = None,
) -> Facts:
    """The facts of a recognised command line: its launcher's options, its config files
    (torchtune's built-in configs found by `builtin`), the script's Trainer arguments and,
    given a worker's environment, what the launcher put there. `admit(path, shown)` raises
    ConfigError for a file the command line names that must not be read."""
    reader = _Reader(launch.cwd, admit)
    reader.launch(launch, label or launch.label, env or {}, builtin)
    return merge(reader.parts, label or launch.label)


class _Reader:
    """Reads files and launches into a list of facts, following the files they name."""

    def __init__(self, cwd: Path, admit: Callable[[Path, str], None] | None = None) -> None:
        self.cwd = cwd
        self.admit = admit
        self.parts: list[Facts] = []
        self.seen: set[Path] = set()

    def file(
        self,
        path: Path,
        shown: str,
        kind: str | None,
        overrides: Iterable[tuple[str, str]] = (),
        launcher: dict[str, Any] | None = None,
        reader: Callable[[Document], Facts] | None = None,
        label: str = "",
    ) -> None:
        """`overrides`: the launch line's (override, its word as written), over the file;
        `label`: the launch line, to which the facts they decide are attributed."""
        resolved = (self.cwd / path if not path.is_absolute() else path).resolve()
        if resolved in self.seen or len(self.seen) >= _MAX_FILES:
            return
        self.seen.add(resolved)
        if self.admit is not None:
            self.admit(resolved, shown)
        if not resolved.is_file():
            what = "no such file" if not resolved.exists() else "not a file"
            raise ConfigError(f"{shown}: {what}")
        text = next((t for p, t in _READ_AS.get() if p == resolved), None)
        if text is None:
            text = read_text(resolved, shown)
        if lockfiles.claims(resolved):  # requirements.txt, uv.lock...: the versions it pins
            self.parts.append(lockfiles.read(resolved, shown, text))
            return
        suffix = resolved.suffix.lower()
        if not FORMATS.reads_suffix(suffix) and not text.lstrip().startswith("{"):
            self.commands(text, shown)
            return
        data = parse_json(text, shown) if is_json(resolved, text) else parse_yaml(text, shown)
        data = mapping(data, shown, "config")
        if launcher:  # `accelerate launch` options override its config file
            data = _overlay(data, launcher)
        plain = data
        overrides = list(overrides)
        if overrides:
            data = copy.deepcopy(data)
            applied = apply_overrides(data, [o for o, _ in overrides], Facts(shown),
                                      components=kind == "torchtune")  # fmt: skip
        doc = Document(resolved, shown, data, self.cwd)
        read = reader or (FORMATS[kind] if kind else self.detect(doc)).read
        facts = read(doc)
        if overrides:
            try:
                alone = read(Document(resolved, shown, plain, self.cwd))
            except ConfigError:  # the file reads only with the line's overrides
                alone = None
            words = dict(zip(applied, (w for _, w in overrides), strict=True))
            attribute_overrides(facts, alone, words, label, keys_of(plain))
        self.parts.append(facts)
        for ref, where in list(facts.references):
            if ref != resolved:
                hint = "deepspeed" if "deepspeed" in where else None
                self.file(ref, f"{ref.name} (from {where})", hint)

    @staticmethod
    def detect(doc: Document) -> ConfigFormat:
        for fmt in FORMATS:
            if fmt.detect(doc.data):
                return fmt
        keys = ", ".join(sorted(doc.data)[:8]) or "none"
        raise ConfigError(
            f"{doc.shown}: not a config memtui reads ({spoken(f.title for f in FORMATS)}); "
            f"its keys: {keys}"
        )

    def commands(self, text: str, shown: str) -> None:
        """A shell script or a file holding a command line: its training launch."""
        number, launch, env, used = launch_command(text, shown, self.cwd)
        label = f"{shown}:{number}"
        if used:
            said = Facts(label)
            for name, value in used.items():
                said.assume(f"${name} is {value!r}, the script's own value (an "
                            "argument or the environment may replace it)")  # fmt: skip
            self.parts.append(said)
        self.launch(launch, label, env, None)

    def launch(
        self,
        launch: Launch,
        label: str,
        env: Mapping[str, str],
        builtin: Callable[[str], Path | None] | None,
    ) -> None:
        facts = Facts(label)
        settings = {**environment_settings(env), **launch.launcher_settings}
        for key, (value, where) in settings.items():
            facts.state(key, value, where)
        if launch.every_gpu:
            facts.state("gpus_default", launch.every_gpu, launch.launcher)
            if "CUDA_VISIBLE_DEVICES" in env:  # the line's own prefix or the script's export
                facts.state("visible_devices", env["CUDA_VISIBLE_DEVICES"], label)
        if launch.script and launch.script.endswith("_distributed"):
            from memtui.estimator.choices import Strategy

            facts.state("strategy", Strategy.fsdp, f"tune run {launch.script}")
        elif launch.script and launch.script.endswith("_single_device"):
            from memtui.estimator.choices import Strategy

            facts.state("strategy", Strategy.ddp, f"tune run {launch.script}")
        self.parts.append(facts)
        accelerate_env = accelerate_yaml.environment_config(env)
        if accelerate_env and not launch.accelerate_flags and not launch.configs:
            doc = Document(self.cwd / "env", f"{label} environment", accelerate_env, self.cwd)
            self.parts.append(accelerate_yaml.read(doc))
        configs = list(launch.configs)
        accelerate_files = [ref for ref in configs if ref.kind == "accelerate"]
        if launch.accelerate_flags and not accelerate_files:  # accelerate launch, trl CMD
            flags = {"distributed_type": "MULTI_GPU", **launch.accelerate_flags}
            doc = Document(self.cwd / "flags", f"{label} (accelerate launch flags)", flags,
                           self.cwd)  # fmt: skip
            self.parts.append(accelerate_yaml.read(doc))
        for ref in configs:
            if ref.kind != "trl":
                self.config(ref, launch, builtin, label)
        parsed, _ = trainer_args.parse_argv(list(launch.script_args))
        trainer = trl_args.script_trainer(launch.script)
        source = f"{label} {launch.script or ''}".strip()
        refs = [ref for ref in configs if ref.kind == "trl"]
        if refs or (trainer is not None and parsed and not deepspeed_chat.detect(parsed)
                    and not trl_args.is_peft_example(parsed)):  # fmt: skip
            self.trl(source, refs, parsed, trainer, launch.script)
            return
        if launch.script_args and any(t.startswith("--") for t in launch.script_args):
            args = Facts(source)
            doc = Document(self.cwd / "argv", args.source, {}, self.cwd)
            if deepspeed_chat.detect(parsed):
                deepspeed_chat.read(args, parsed, lambda key: f"--{key}", f"{self.cwd} {source}")
            elif trl_args.is_peft_example(parsed):
                trl_args.read_peft_example(args, parsed, lambda key: f"--{key}", doc)
            elif not trainer_args.read_argv(args, list(launch.script_args), doc):
                return
            self.parts.append(args)
            self.follow(args, doc.path)

    def follow(self, facts: Facts, own: Path) -> None:
        """The files a command line's arguments name (the Trainer's --deepspeed)."""
        for path, where in facts.references:
            hint = "deepspeed" if "deepspeed" in where else None
            if path.name and path != own:
                self.file(path, f"{path.name} (from {where})", hint)

    def trl(
        self,
        source: str,
        refs: list[ConfigRef],
        parsed: dict[str, Any],
        trainer: trl_args.Trainer | None,
        script: str | None,
    ) -> None:
        """A TrlParser script: its `--config` YAML with the command line over it
        (parse_args_and_config), read with its TRL trainer's defaults."""
        if trainer is None:
            trainer = trl_args.TRAINERS["sft"]
            said = Facts(source)
            said.assume(f"{script}: read as a TrlParser script (--config) with SFTConfig's "
                        "defaults")  # fmt: skip
            self.parts.append(said)
        given = {k: v for k, v in parsed.items() if k != "config"}

        def where(key: str) -> str:
            return f"--{key}" if key in given else key

        def reader(doc: Document) -> Facts:
            facts = doc.facts()
            trl_args.read_trl(facts, doc.data, where, doc, trainer)
            return facts

        if refs:
            ref = refs[0]
            self.file(ref.path, f"{_relative(ref.path, self.cwd)} ({ref.where})", None, (),
                      given, reader)  # fmt: skip
            return
        doc = Document(self.cwd / "argv", source, given, self.cwd)
        facts = reader(doc)
        self.parts.append(facts)
        self.follow(facts, doc.path)

    def config(
        self,
        ref: ConfigRef,
        launch: Launch,
        builtin: Callable[[str], Path | None] | None,
        label: str,
    ) -> None:
        path = ref.path
        if ref.builtin is not None:
            found = builtin(ref.builtin) if builtin else None
            if found is None:
                raise ConfigError(
                    f"{ref.where} {ref.builtin}: a config torchtune ships, not found on this "
                    "machine (copy it with `tune cp` and give the file)"
                )
            path = found
        shown = f"{ref.builtin or _relative(path, self.cwd)} ({ref.where})"
        flags = launch.accelerate_flags if ref.kind == "accelerate" else None
        overrides = zip(launch.overrides, launch.override_words or launch.overrides, strict=True)
        self.file(path, shown, ref.kind, overrides, flags, label=label)


def launch_command(
    text: str, shown: str, cwd: Path
) -> tuple[int, Launch, dict[str, str], dict[str, str]]:
    """A shell script's (or command-line file's) training launch: (its logical line, 1-based,
    continuations joined; the launch; its environment; the script's variables it used)."""
    joined = text.replace("\\\n", " ")
    shell: dict[str, str] = {}  # the script's own VAR=value lines, as the shell sets them
    exported: dict[str, str] = {}  # and those it exports to the launch's environment
    for number, line in enumerate(joined.splitlines(), 1):
        used: dict[str, str] = {}
        line = _substitute(line, shell, used)
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as err:
            raise ConfigError(f"{shown}: line {number}: {err}") from None
        # the command ends at a pipe, a list or a redirection (`&> $OUTPUT/training.log`):
        # none of that is an argument
        cut = next((i for i, t in enumerate(tokens) if _OPERATOR.fullmatch(t)), len(tokens))
        tokens = tokens[:cut]
        env = {}
        while tokens and "=" in tokens[0] and not tokens[0].startswith(("-", "=")):
            key, _, value = tokens.pop(0).partition("=")
            env[key] = value
        if tokens[:1] == ["export"]:
            exported.update(t.partition("=")[::2] for t in tokens[1:] if "=" in t)
            shell.update(exported)
            continue
        if not tokens:
            shell.update(env)
            continue
        env = {**exported, **env}
        launch = recognise(tokens, cwd, env)
        if launch is None and tokens[0].startswith("--"):
            launch = Launch("python", tuple(tokens), cwd, None, (), tuple(tokens))
        if launch is not None:
            return number, launch, env, used
    raise ConfigError(
        f"{shown}: no training launch found (torchrun, accelerate launch, deepspeed, "
        "tune run, axolotl train, llamafactory-cli train, or a script's --arguments)"
    )


def _substitute(line: str, shell: Mapping[str, str], used: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` of the script's own variables replaced by their values."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in shell or "$" in shell[name]:
            return match.group(0)
        used[name] = shell[name]
        return shell[name]

    return _VARIABLE.sub(value, line)


#: A word of shell operators alone (`|`, `&>`, `2>&1`, `;`): a quoted `'<|im_end|>'` is not
_OPERATOR = re.compile(r"[0-9]*[<>|;&()]+(?:[0-9]+|-)?")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _relative(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _overlay(data: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key, value in flags.items():
        if isinstance(value, dict):
            out[key] = {**(out.get(key) or {}), **value}
        else:
            out[key] = value
    return out
