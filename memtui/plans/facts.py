"""What a job's config files say, one fact at a time, with the file and key each came from.

Every codec turns its file into `Facts`: values in one shared vocabulary (the Plan's own field
names, dotted for nested ones such as `deepspeed.reduce_bucket_size`, plus a few facts about
the job that decide several fields at once, `JOB_FACTS`), each with its origin ("ds.json:
zero_optimization.stage"). A fact is *stated* (the file says it) or a *default* (what the
tool does when the file says nothing: the Trainer's per_device_train_batch_size 8). Merging
the facts of several files keeps one value per key: two files that state different values
are a contradiction (one line, exit 2); a default only fills a gap. `memtui.plans.derive`
then turns the merged facts into plan fields.

Reading a file is here too: JSON with the standard library, YAML with PyYAML's safe loader
(imported only when a YAML file is read: `memtui estimate --json` must not pay for it).
Nothing a config names is ever executed or imported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.errors import UsageError

JOB_FACTS = {
    "engine": "what shards and steps the model: deepspeed, fsdp or ddp",
    "fsdp_version": "1 (FullyShardedDataParallel) or 2 (fully_shard)",
    "amp": "mixed precision the Trainer or the engine turns on: bf16, fp16, fp8 or no",
    "launcher_amp": "accelerate's mixed_precision: the Trainer's own bf16 / fp16 win over it",
    "gpus_default": "why the launch runs one process per GPU of the node (no count given)",
    "visible_devices": "CUDA_VISIBLE_DEVICES the launch line or its script gives the job",
    "load_dtype": "the dtype the model is loaded in: bf16, fp16, fp32 or auto",
    "trainer": "Transformers' Trainer runs the loop",
    "world_size": "processes in all, when the split into nodes is not known",
    "train_batch_size": "DeepSpeed's global batch: micro-batch x accumulation x GPUs",
    "model": "the model reference (catalog id, config.json, folder, cached repo id)",
    "unfused": "the job builds q, k, v and gate, up as separate linears (torchtune's Phi-3)",
}
"""Facts that are not plan fields: `derive` reads them to decide stack, precision, hardware."""


class ConfigError(UsageError):
    """A malformed or contradictory config: one line naming the file and key (exit 2)."""


@dataclass(frozen=True)
class Unsupported:
    """A value memtui cannot model: an error only if no flag replaces the field."""

    reason: str


@dataclass(frozen=True)
class Fact:
    """One value and where it came from."""

    value: Any
    origin: str
    """'file:key' (or 'file:key (default)' for a default)."""
    default: bool = False
    """The tool's default, not stated by the file: it never contradicts a stated value."""
    rank: int = 0
    """A higher rank replaces a lower one without contradiction (DeepSpeed's optimizer
    block replaces the Trainer's `optim`: Transformers then never builds its own)."""
    override: Override | None = None
    """The launch line's override the value comes from (over its config's key), if any."""


@dataclass(frozen=True)
class Override:
    """One override of a config on its launch line (`tune run ... batch_size=4`,
    `axolotl train cfg.yml --micro_batch_size 4`)."""

    key: str
    """The config key it sets, dotted, as the tool resolves it (`optimizer._component_` for
    torchtune's `optimizer=torch.optim.AdamW`)."""
    word: str
    """As the line writes it (`batch_size=4`, `--micro_batch_size 4`)."""


@dataclass
class Facts:
    """What one file (or several, merged) says about the job."""

    source: str
    """The file as the user named it, or a label such as 'pid 4242 argv'."""
    values: dict[str, Fact] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Memory settings the file sets that memtui reads but does not size, each with what it
    did instead (sized without the setting's saving, so over)."""
    references: list[tuple[Path, str]] = field(default_factory=list)
    """Other files this one names (a DeepSpeed JSON in an accelerate YAML), with the key."""

    def state(self, key: str, value: Any, where: str, rank: int = 0) -> None:
        """The file says `key` = `value` at `where` (its key path)."""
        self.values[key] = Fact(value, f"{self.source}:{where}", rank=rank)

    def default(self, key: str, value: Any, where: str) -> None:
        """`key` is `value` because the tool defaults to it (`where`: the setting's name)."""
        if key not in self.values:
            self.values[key] = Fact(value, f"{self.source}:{where} (default)", default=True)

    def assume(self, text: str) -> None:
        self.assumptions.append(f"{self.source}: {text}")

    def ignore(self, key: str, instead: str) -> None:
        """The file's `key` is not sized; `instead`: what memtui did."""
        self.ignored.append(f"{self.source}: {key}: {instead}")

    def refer(self, path: Path, where: str) -> None:
        self.references.append((path, f"{self.source}:{where}"))

    def get(self, key: str) -> Any:
        fact = self.values.get(key)
        return None if fact is None else fact.value

    def error(self, where: str, what: str) -> ConfigError:
        """The one-line error for a bad value at `where`."""
        return ConfigError(f"{self.source}: {where}: {what}")


#: Values Transformers' DeepSpeed integration requires to match the Trainer's arguments
#: (integrations/deepspeed.py trainer_config_process: fill_match)
_MATCHED = frozenset({"micro_batch", "grad_accum", "amp"})


def merge(parts: Iterable[Facts], label: str) -> Facts:
    """One set of facts from several files: a key stated twice with different values is a
    contradiction; a stated value replaces a default; the first default of a key stays."""
    merged = Facts(label)
    for part in parts:
        for key, fact in part.values.items():
            have = merged.values.get(key)
            if have is not None and have.rank != fact.rank:
                if fact.rank > have.rank:
                    merged.values[key] = fact
                    if have.value != fact.value:
                        merged.assumptions.append(f"{fact.origin} replaces {have.origin}")
                continue
            if have is None or (have.default and not fact.default):
                if have is not None and key in _MATCHED and have.value != fact.value:
                    merged.assumptions.append(
                        f"{fact.origin} says {_shown(fact.value)} where {have.origin} is "
                        f"{_shown(have.value)}: give both the same value (Transformers refuses "
                        "a DeepSpeed value that differs from the Trainer's)"
                    )
                merged.values[key] = fact
            elif not have.default and not fact.default and have.value != fact.value:
                raise ConfigError(
                    f"{fact.origin} says {_shown(fact.value)} but {have.origin} says "
                    f"{_shown(have.value)}: the files contradict each other"
                )
        merged.assumptions += part.assumptions
        merged.ignored += part.ignored
        merged.references += part.references
    return merged


def _shown(value: Any) -> str:
    if isinstance(value, Unsupported):
        return "an unsupported value"
    return str(getattr(value, "value", value))


# -- reading files ----------------------------------------------------------------------------


_PICKLES = (".bin", ".pt", ".pth", ".pkl", ".pickle")


MAX_YAML_VALUES = 100_000
"""The most values a YAML document may hold once its aliases are expanded: a real config has
hundreds; an alias bomb ("billion laughs", nine aliases of nine) has 10^9 from a kilobyte."""


def read_text(path: Path, shown: str) -> str:
    """The file's text, read bounded (`memtui.bounded`, a job config: a regular file of at most
    8 MiB, a FIFO opened without waiting for its writer); an unreadable, oversized or binary
    file is one line."""
    from memtui.bounded import JOB_CONFIG, read_bytes

    data = read_bytes(path, JOB_CONFIG, ConfigError, shown)
    if data[:1] == b"\x80" or data[:4] == b"PK\x03\x04" or path.suffix in _PICKLES:
        # Trainer's training_args.bin is torch.save's zip of a pickle: loading runs code
        raise ConfigError(
            f"{shown}: a pickle (e.g. training_args.bin); memtui never unpickles: save the "
            "arguments as JSON (TrainingArguments.to_json_string()) and give that"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: not a UTF-8 text file") from None


def is_json(path: Path, text: str) -> bool:
    """Whether a job config is read as JSON: by its name, or by its first character (a
    DeepSpeed config saved without the suffix); else YAML."""
    return path.suffix.lower() == ".json" or text.lstrip().startswith("{")


def parse_json(text: str, shown: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{shown}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except RecursionError:  # json's decoder recurses once per level
        raise ConfigError(f"{shown}: JSON nested too deeply") from None


def parse_yaml(text: str, shown: str) -> Any:
    """YAML through PyYAML's safe loader (plain data only: no tags that build objects), as
    `yaml.safe_load` does it (Loader.get_single_data: compose, then construct), with the
    composed document's size checked in between: aliases share one node, so a document of a
    few aliases can stand for 10^9 values that anything walking it (a reader, a message)
    would expand."""
    import yaml  # here only: the CLI must not import it unless a YAML file is read

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_VALUES:
            raise ConfigError(
                f"{shown}: its aliases expand to more than {MAX_YAML_VALUES:,} values "
                "(an alias bomb?), or refer to themselves"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{shown}: not valid YAML ({problem}{where})") from None
    except RecursionError:  # PyYAML's composer recurses once per level
        raise ConfigError(f"{shown}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def _expanded_size(root: Any) -> float:
    """How many values the YAML node graph `root` holds with every alias expanded (each
    shared node counted once per use), without expanding it: sizes are summed bottom-up, each
    node's once; a node inside itself (a recursive alias) counts as infinite."""
    sizes: dict[int, float] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            parts = _children(node)
            sizes[key] = 1 + sum(sizes.get(id(child), math.inf) for child in parts)
            if sizes[key] > MAX_YAML_VALUES:
                return sizes[key]
            continue
        if key in sizes:
            continue
        sizes[key] = math.inf  # in progress: met again below it, it contains itself
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: Any) -> list[Any]:
    """A YAML node's child nodes (a mapping's keys and values, a sequence's items)."""
    value = node.value
    if isinstance(value, list):
        return [part for item in value for part in (item if isinstance(item, tuple) else (item,))]
    return []


def mapping(data: Any, shown: str, kind: str) -> dict[str, Any]:
    """`data` as a mapping with string keys, else one line saying what the file holds."""
    if not isinstance(data, dict):
        got = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{shown}: a {kind} must be a mapping of keys, this file is {got}")
    return {str(k): v for k, v in data.items()}


def dig(data: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted key path ('zero_optimization.stage'), or None."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


# -- values -----------------------------------------------------------------------------------

_TRUE = {"true", "yes", "1", "on", "y"}
_FALSE = {"false", "no", "0", "off", "n", "none", ""}


def as_bool(facts: Facts, where: str, value: Any) -> bool:
    """A boolean as configs write one: true/false, "true"/"False", 1/0, yes/no."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise facts.error(where, f"expected true or false, got {value!r}")


def as_int(facts: Facts, where: str, value: Any, minimum: int = 1) -> int:
    """A whole number (JSON's 1e9 and YAML's "5e8" included) of at least `minimum`."""
    number: float
    if isinstance(value, bool):
        raise facts.error(where, f"expected a whole number, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        try:
            number = float(str(value).strip().replace("_", ""))
        except ValueError:
            raise facts.error(where, f"expected a whole number, got {value!r}") from None
    if number != int(number):
        raise facts.error(where, f"expected a whole number, got {value!r}")
    if number < minimum:
        raise facts.error(where, f"must be at least {minimum}, got {value!r}")
    return int(number)


def as_float(facts: Facts, where: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise facts.error(where, f"expected a number, got {value!r}") from None


def as_names(facts: Facts, where: str, value: Any) -> tuple[str, ...]:
    """A list of module names, or one comma-separated string of them."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple):
        items = [str(v) for v in value]
    else:
        raise facts.error(where, f"expected a list of names, got {value!r}")
    return tuple(n.strip() for n in items if n.strip())


#: Repo-name marks of checkpoints stored quantized (GPTQ, AWQ, AQLM, bitsandbytes NF4, fp8):
#: their config.json's quantization_config says how, which an offline import cannot read
_PREQUANTIZED = ("gptq", "awq", "aqlm", "bnb", "nf4", "4bit", "int4", "int8", "fp8", "nvfp4")


def prequantized(facts: Facts, key: str, model: str, nf4: bool) -> None:
    """Say so when the model a config names looks like a checkpoint stored quantized (`nf4`:
    the file quantizes the base to NF4 itself, as memtui sizes it)."""
    marks = set(model.rsplit("/", 1)[-1].lower().replace("_", "-").split("-"))
    if marks & set(_PREQUANTIZED):
        how = "an NF4 base, as the file loads it" if nf4 else "a 16-bit base (over)"
        facts.assume(f"{key}: {model} looks stored quantized: sized as {how}")


def is_auto(value: Any) -> bool:
    """DeepSpeed's and the Trainer's "auto": filled in by the launcher at run time."""
    return isinstance(value, str) and value.strip().lower() == "auto"


@dataclass(frozen=True)
class Document:
    """One parsed config file and the folder its job was launched from."""

    path: Path
    shown: str
    """The file as the user (or the command line) named it: what messages say."""
    data: dict[str, Any]
    cwd: Path
    """The launch's working folder: launchers resolve relative paths against it."""

    def facts(self) -> Facts:
        return Facts(self.shown)

    def locate(self, ref: str) -> Path:
        """A path a config names: as the launcher sees it (against the working folder),
        else beside this file (configs that travel with their DeepSpeed JSON)."""
        path = Path(ref).expanduser()
        if path.is_absolute():
            return path
        launched = self.cwd / path
        beside = self.path.parent / path
        return beside if not launched.exists() and beside.exists() else launched


def apply_overrides(
    data: dict[str, Any], overrides: Iterable[str], facts: Facts, components: bool = False
) -> list[str]:
    """OmegaConf-style `key.path=value` overrides, as `tune run` and `llamafactory-cli` take
    them after the config: the value is read as YAML (`4`, `true`, `[q_proj, v_proj]`), and
    `~key` removes a key. `components`: torchtune's rules (config/_utils.py
    _merge_yaml_and_cli_args, torchtune 0.6): `optimizer=torch.optim.AdamW` over a block
    with a `_component_` sets that component, and `None` is null. Returns the dotted key
    each override set, in order; `attribute_overrides` then says which facts they decide."""
    keys = []
    for item in overrides:
        key, eq, text = item.partition("=")
        if key.startswith("~"):
            node = _node(data, key[1:].split(".")[:-1])
            if node is not None:
                node.pop(key.rsplit(".", 1)[-1], None)
            keys.append(key[1:])
            continue
        if not eq or not key:
            raise facts.error(item, "an override is key=value")
        key = key.lstrip("+")
        if components and isinstance(data.get(key), dict) and "_component_" in data[key]:
            key += "._component_"
        if components and text == "None":
            value = None
        else:
            value = parse_yaml(text, f"{facts.source}:{key}") if text else None
        parts = key.split(".")
        node = _node(data, parts[:-1], create=True)
        assert node is not None
        node[parts[-1]] = value
        keys.append(key)
    return keys


def attribute_overrides(
    facts: Facts, plain: Facts | None, applied: Mapping[str, str], label: str, had: set[str]
) -> None:
    """Each fact of `facts` (a config read with its launch line's overrides) that an override
    decides, attributed to it: its origin becomes the line's (`run.sh:1:batch_size=4 (over
    batch_size of cfg.yaml)`) and it carries the `Override`. An override decides a fact when
    it sets a key the fact was read from (or one inside or around it), or when the fact
    reads otherwise without the overrides (`plain`; None when the file alone does not
    read). `applied`: key -> the word as written; `had`: the keys the file itself has."""
    name = facts.source.split(" (", 1)[0]
    for key, fact in list(facts.values.items()):
        paths = read_from(fact.origin, facts.source)
        related = [k for k in applied if any(_related(k, p) for p in paths)]
        if not related and plain is not None and plain.get(key) != fact.value:
            related = [k for k in applied if any(k.split(".")[0] == p.split(".")[0]
                                                for p in paths)] or list(applied)  # fmt: skip
        if not related:
            continue
        # the override of the key the fact is read from first ("model.lora_rank", not "model")
        related.sort(key=lambda k: (k not in paths, paths.index(k) if k in paths else 0))
        words = " ".join(applied[k] for k in related)
        over = [k for k in related if k in had]
        said = f"over {', '.join(over)} of {name}" if over else f"not in {name}"
        facts.values[key] = Fact(
            fact.value, f"{label}:{words} ({said})", rank=fact.rank,
            override=Override(related[0], applied[related[0]]),
        )  # fmt: skip


def read_from(origin: str, source: str) -> list[str]:
    """The dotted keys a fact's origin names (`cfg.yaml:optimizer._component_, fused`:
    optimizer._component_ and its sibling optimizer.fused)."""
    where = origin[len(source) + 1 :] if origin.startswith(f"{source}:") else ""
    where = where.removesuffix(" (default)")
    parts = [p.strip() for p in where.split(",") if p.strip()]
    if not parts:
        return []
    parent = parts[0].rpartition(".")[0]
    return [parts[0], *(p if "." in p or not parent else f"{parent}.{p}" for p in parts[1:])]


def _related(a: str, b: str) -> bool:
    """One dotted key is the other, or holds it (`fsdp` and `fsdp.cpu_offload`)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def keys_of(data: Mapping[str, Any], at: str = "") -> set[str]:
    """Every dotted key path of a config's data (`optimizer`, `optimizer.fused`, ...)."""
    out = set()
    for key, value in data.items():
        path = f"{at}{key}"
        out.add(path)
        if isinstance(value, Mapping):
            out |= keys_of(value, path + ".")
    return out


def _node(data: dict[str, Any], parts: list[str], create: bool = False) -> dict[str, Any] | None:
    node = data
    for part in parts:
        child = node.get(part)
        if not isinstance(child, dict):
            if not create:
                return None
            child = node[part] = {}
        node = child
    return node
