"""`memtui export` of a plan that came from the user's own config: that file, edited.

A fresh export (`memtui.plans.formats.ConfigFormat.export`) writes memtui's own rendering of
a plan: every key it knows, none of the ones it does not (datasets, schedulers, the loss class,
comments). A user who planned from a file wants *their* file back with only what the plan
changed, so `edit` works as a three-way merge:

- before: the fresh export of the plan the file imports to; after: the fresh export of the
  plan being exported. Only the keys where those two differ are the plan's changes: the
  format's own keys for the fields that changed (the micro-batch, the ZeRO stage...).
- each change is applied to the user's file, at the key the file already uses for the same
  fact (its reader's origin: `stage3_prefetch_bucket_size` or its alias
  `prefetch_bucket_size`), or added under the block the format puts it in; a key the file
  leaves "auto" stays "auto" (the launcher fills it, Transformers' HfTrainerDeepSpeedConfig);
  a key DeepSpeed computes itself (`train_batch_size`) is written only where the file has it.
- the edited file is read back by the format's reader: every fact the plan changed must read
  as the fresh export's, every other one as the user's file said, else the edit is refused in
  one line (never a file that reads as another job).

Everything the plan did not change keeps its bytes: JSON is edited by splicing the text at
the values' own offsets (`_JsonText`), YAML round-trips through ruamel.yaml (comments, key
order, quoting and the file's indentation kept). An unchanged plan gives the file as it was,
byte for byte.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memtui.plans.facts import (
    ConfigError,
    Document,
    Fact,
    Facts,
    is_auto,
    is_json,
    mapping,
    parse_json,
    parse_yaml,
    read_text,
)
from memtui.plans.formats import FORMATS, ConfigFormat

if TYPE_CHECKING:
    import argparse

    from memtui.estimator.plan import Plan

Path_ = tuple[str, ...]
"""A key path in a config: ("zero_optimization", "stage")."""

_COMPUTED = frozenset({"train_batch_size"})
"""Facts a tool computes itself when the file leaves the key out: written only where the file
already has the key (DeepSpeed 0.19 runtime/config.py _set_batch_related_parameters derives
train_batch_size from the micro-batch, the accumulation and the data-parallel size)."""


@dataclass(frozen=True)
class ConfigFile:
    """A config the user gave (`--from FILE`), as read: what an export edits."""

    path: Path
    """The file, resolved."""
    shown: str
    """As the user named it: what messages and the diff say."""
    fmt: ConfigFormat
    text: str
    cwd: Path

    @property
    def is_json(self) -> bool:
        return is_json(self.path, self.text)

    @property
    def written_as(self) -> str:
        """What `memtui export` says it wrote ("deepspeed config")."""
        return f"{self.fmt.name} config"

    @property
    def title(self) -> str:
        """How messages name this file's kind ("DeepSpeed JSON config")."""
        return f"{self.fmt.title} config"

    def data(self, text: str | None = None) -> dict[str, Any]:
        """The file's (or an edit's) plain data, parsed as the import parses it."""
        return _parsed(self.path, self.text if text is None else text, self.shown)

    def facts(self, data: Mapping[str, Any], shown: str | None = None) -> Facts:
        """What the format's reader says of `data` (this file's, an edit's or an export's)."""
        doc = Document(self.path, shown or self.shown, dict(data), self.cwd)
        return self.fmt.read(doc)


def config_file(paths: list[str], fmt: str | None, cwd: Path) -> ConfigFile | None:
    """The first of `paths` (as `--from` names them) that is a config of format `fmt` (any
    config when None), else the first such config one of them names (an accelerate or
    axolotl config's DeepSpeed JSON), read; None when there is none (launch scripts, other
    formats)."""
    configs = [c for c in (_config(shown, cwd) for shown in paths) if c is not None]
    named = []
    for config in configs:
        if fmt is None or config.fmt.name == fmt:
            return config
        refs = config.facts(config.data()).references
        named += [_config(str(_relative(path, cwd)), cwd) for path, _ in refs]
    return next((c for c in named if c is not None and c.fmt.name == fmt), None)


def _config(shown: str, cwd: Path) -> ConfigFile | None:
    """The config `shown` names, read and detected as the import detects it (the first
    format in FORMATS that claims it); None for a launch script or a missing file."""
    path = Path(shown).expanduser()
    resolved = (cwd / path if not path.is_absolute() else path).resolve()
    if not resolved.is_file() or not FORMATS.reads_suffix(resolved.suffix.lower()):
        return None
    text = read_text(resolved, shown)
    data = _parsed(resolved, text, shown)
    found = next((f for f in FORMATS if f.detect(data)), None)
    return None if found is None else ConfigFile(resolved, shown, found, text, cwd)


def _parsed(path: Path, text: str, shown: str) -> dict[str, Any]:
    parse = parse_json if is_json(path, text) else parse_yaml
    return mapping(parse(text, shown), shown, "config")


def _relative(path: Path, cwd: Path) -> Path:
    """A named file as a message shows it: from the launch folder when it is inside it."""
    try:
        return path.resolve().relative_to(cwd.resolve())
    except ValueError:
        return path


@dataclass(frozen=True)
class Origin:
    """A user's config and the plan it imports to: what the export compares a plan with."""

    file: ConfigFile
    plan: Plan
    files_only: argparse.Namespace | None = None
    """The command's arguments with only --from and --plan kept (how `plan` was built; the
    export reads its edit back the same way)."""


@dataclass
class Edited:
    """A user's config edited to say a plan."""

    before: str
    text: str
    notes: list[str] = field(default_factory=list)
    """What was left as the file says, and why ("auto" keys)."""

    @property
    def changed(self) -> bool:
        return self.text != self.before

    def diff(self, shown: str, written: str) -> list[str]:
        """The change as a unified diff, line by line (each ending in a newline)."""
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.text.splitlines(keepends=True),
            fromfile=shown,
            tofile=written,
        )
        return [line if line.endswith("\n") else line + "\n" for line in lines]


_DELETE = object()
"""An operation's value: the key goes."""


def edit(origin: Origin, plan: Plan) -> Edited:
    """`origin`'s file changed to say `plan` where it differs from `origin.plan` (ConfigError:
    one line, when the format cannot write the plan or the file cannot say it)."""
    file = origin.file
    if plan == origin.plan:
        return Edited(file.text, file.text)
    fmt = file.fmt
    old = _Reading(file, _plain(fmt.export(origin.plan), fmt), "before")
    new = _Reading(file, _plain(fmt.export(plan), fmt), "after")
    ours = _Reading(file, file.data(), file.shown)
    doc: _Editable = _JsonText(file.text) if file.is_json else _YamlText(file.text)
    edited = Edited(file.text, file.text)
    kept: set[Path_] = set()
    for path, value in _changes(old.data, new.data, ()):
        was = old.read_by(path)
        if value is _DELETE:
            # a key goes only when the new plan says what it said some other way (fp16 for
            # bf16, no offload); one the new export leaves out but would not contradict stays
            if not any(key in new.facts.values for key in was):
                continue
        else:
            now = new.read_by(path)
            if not now and not was:
                continue  # a key no reader reads (lora_alpha): not the plan's to change
            # a key new to the export (fp16 where bf16 was) is not another spelling of one
            # the file has: it is added
            was = was | now if path in old else set()
        target = ours.spelling(path, was) if doc.get(path) is _MISSING else path
        _writable(file, doc, target)
        if value is not _DELETE and doc.get(target) is _MISSING and new.read_by(path) & _COMPUTED:
            kept.add(path)
            continue
        kept |= _apply(doc, target, value, edited, new)
    edited.text = doc.dump()
    _check(file, edited, (old.facts, new.facts), ours.facts, kept)
    return edited


class _Reading:
    """A config's data and what the format's reader says of it."""

    def __init__(self, file: ConfigFile, data: dict[str, Any], source: str) -> None:
        self.file, self.data, self.source = file, data, source
        self.facts = file.facts(data, source)

    def __contains__(self, path: Path_) -> bool:
        return _dig(self.data, path) is not _MISSING

    def read_by(self, path: Path_) -> set[str]:
        """The facts the key at `path` decides: those that read otherwise without it."""
        if path not in self:
            return set()
        data = copy.deepcopy(self.data)
        parent = _dig(data, path[:-1])
        del parent[path[-1]]
        try:
            without = self.file.facts(data, self.source).values
        except ConfigError:
            return set(self.facts.values)  # the file does not read without it: it decides all
        keys = {*self.facts.values, *without}
        return {k for k in keys if _value(self.facts.values.get(k)) != _value(without.get(k))}

    def spelling(self, path: Path_, facts: set[str]) -> Path_:
        """Where this file states `facts` when it has no `path`: its own key for them (a
        deprecated or alias spelling such as `cpu_offload`), else `path`."""
        own = {self._spelled(_where(self.facts.values[k], self.source))
               for k in facts if k in self.facts.values}  # fmt: skip
        found = [q for q in own if q is not None and q != path]
        return found[0] if len(found) == 1 else path

    def _spelled(self, path: Path_ | None) -> Path_ | None:
        """`path` as this file has it: the key itself, or its `fsdp_`-prefixed form (the
        readers name FSDP keys unprefixed, as memtui.plans.fsdp.unprefixed normalises
        them); None when the file has neither."""
        if path is None or path in self:
            return path
        parent = _dig(self.data, path[:-1])
        if not isinstance(parent, Mapping):
            return None
        named = [k for k in parent if str(k).removeprefix("fsdp_") == path[-1]]
        return (*path[:-1], named[0]) if len(named) == 1 else None


def _plain(text: str, fmt: ConfigFormat) -> dict[str, Any]:
    """A fresh export's data."""
    data = json.loads(text) if fmt.suffix == ".json" else parse_yaml(text, f"{fmt.name} export")
    return mapping(data, f"{fmt.name} export", "config")


def _changes(before: Any, after: Any, at: Path_) -> Iterator[tuple[Path_, Any]]:
    """The operations that turn mapping `before` into `after`: (key path, new value or
    _DELETE), a mapping in both compared key by key."""
    for key, value in after.items():
        old = before.get(key, _MISSING)
        if isinstance(old, dict) and isinstance(value, dict):
            yield from _changes(old, value, (*at, key))
        elif old != value or old is _MISSING:
            yield (*at, key), value
    for key in before:
        if key not in after:
            yield (*at, key), _DELETE


def _where(fact: Fact, source: str) -> Path_ | None:
    """The key path a fact was stated at (None for a default or another file's fact)."""
    if not fact.origin.startswith(f"{source}:") or fact.default:
        return None
    return tuple(fact.origin[len(source) + 1 :].split("."))


def _writable(file: ConfigFile, doc: _Editable, path: Path_) -> None:
    """Refuse a path through a value that is not a block (axolotl's `deepspeed: ds.json`)."""
    for depth in range(1, len(path)):
        have = doc.get(path[:depth])
        if have is not _MISSING and not isinstance(have, Mapping):
            named = ""
            if isinstance(have, str):
                named = " (a file it names: give that file's --format to edit it)"
            raise ConfigError(
                f"{file.shown}: {'.'.join(path[:depth])} is {json.dumps(have)}, not a block "
                f"memtui can write {'.'.join(path)} into{named}"
            )


def _apply(doc: _Editable, path: Path_, value: Any, edited: Edited, new: _Reading) -> set[Path_]:
    """One change applied to `doc` (a block merged into the file's own, key by key, only the
    keys the reader reads); the paths left as the file has them ("auto")."""
    have = doc.get(path)
    if value is _DELETE:
        if have is not _MISSING:
            doc.delete(path)
        return set()
    if isinstance(value, dict) and isinstance(have, Mapping):
        kept: set[Path_] = set()
        for key, inner in value.items():
            if new.read_by((*path, key)):
                kept |= _apply(doc, (*path, key), inner, edited, new)
        return kept
    if have == value:
        return set()
    if is_auto(have):
        edited.notes.append(
            f'{".".join(path)} is "auto" (the launcher fills it in): left as it is, not '
            f"{json.dumps(value)}"
        )
        return {path}
    doc.set(path, value)
    return set()


def _check(
    file: ConfigFile, edited: Edited, exports: tuple[Facts, Facts], ours: Facts, kept: set[Path_]
) -> None:
    """The edit reads back as the plan: each fact the plan changed as the new export says
    it (or, one it leaves out, as the file did), every other as the file did; else one line
    naming the first that does not."""
    got = file.facts(file.data(edited.text))
    old, new = exports
    for key in sorted({*old.values, *new.values, *ours.values, *got.values}):
        now, was, have = new.values.get(key), old.values.get(key), got.values.get(key)
        mine = _value(ours.values.get(key))
        if _value(now) == _value(was):
            allowed = [mine]
        else:
            allowed = [_value(now)] if now is not None else [_MISSING, mine]
        if _value(have) in allowed:
            continue
        where = _where(now, new.source) if now is not None else None
        if where is not None and any(where[: len(k)] == k for k in kept):
            continue  # left "auto" (noted), or one the tool computes
        said = "nothing" if have is None else json.dumps(getattr(have.value, "value", have.value),
                                                         default=str)  # fmt: skip
        raise ConfigError(
            f"{file.shown}: cannot edit it to say the plan's {key} (it would read as {said}); "
            "give --fresh to write a new config instead"
        )


def _value(fact: Fact | None) -> Any:
    return _MISSING if fact is None else fact.value


# -- the two editable texts -------------------------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _dig(data: Any, path: Path_) -> Any:
    node = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


class _Editable(Protocol):
    """A config text and the edits a plan makes to it."""

    def get(self, path: Path_) -> Any:
        """The value at `path` (_MISSING when a key on the way is not there)."""
        ...

    def set(self, path: Path_, value: Any) -> None:
        """`value` written at `path`, the mappings on the way made where missing."""
        ...

    def delete(self, path: Path_) -> None:
        """The key at `path` (which is there) removed."""
        ...

    def dump(self) -> str:
        """The text, edited."""
        ...


class _YamlText:
    """YAML round-tripped by ruamel.yaml (its round-trip loader keeps comments, key order and
    quotes), written in the file's own indentation; a line whose meaning the edit did not
    change keeps the file's spelling (`True`, `null`: ruamel.yaml writes its own)."""

    def __init__(self, text: str) -> None:
        from ruamel.yaml import YAML  # here only: the CLI must not pay for it

        self.before = text
        mapping_indent, dash = _indents(text)
        self.yaml = YAML(typ="rt")
        self.yaml.preserve_quotes = True
        self.yaml.width = 4096  # never fold a long line the file has on one
        self.yaml.indent(mapping=mapping_indent, sequence=dash + 2, offset=dash)
        self.yaml.explicit_start = text.lstrip().startswith("---")
        self.data = self.yaml.load(text)

    def get(self, path: Path_) -> Any:
        return _dig(self.data, path)

    def set(self, path: Path_, value: Any) -> None:
        from ruamel.yaml.comments import CommentedMap

        node = self.data
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, Mapping):
                child = node[key] = CommentedMap()
            node = child
        node[path[-1]] = _quoted(value)

    def delete(self, path: Path_) -> None:
        parent = _dig(self.data, path[:-1])
        del parent[path[-1]]

    def dump(self) -> str:
        out = StringIO()
        self.yaml.dump(self.data, out)
        return _respelled(self.before, out.getvalue())


def _quoted(value: Any) -> Any:
    """`value` with each string PyYAML would read as something else quoted: ruamel.yaml
    writes YAML 1.2, where `no` and `on` are strings, but the tools (and memtui) read YAML
    1.1 through PyYAML, where they are booleans (accelerate's `mixed_precision: 'no'`)."""
    import yaml
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    if isinstance(value, dict):
        return {k: _quoted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_quoted(v) for v in value]
    if isinstance(value, str):
        try:
            plain = yaml.safe_load(value) == value
        except yaml.YAMLError:
            plain = False
        return value if plain else SingleQuotedScalarString(value)
    return value


def _indents(text: str) -> tuple[int, int]:
    """The file's indentation: of a mapping under its key, and of a sequence's dash under its
    key (0 for `key:` then `- item` at the key's column); 2 and 2 when the file does not say."""
    mapping_indent = dash = None
    opener: int | None = None  # the indentation of the last `key:` line opening a block
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        if opener is not None and indent >= opener:
            if body.startswith("- ") and dash is None:
                dash = indent - opener
            elif not body.startswith("- ") and indent > opener and mapping_indent is None:
                mapping_indent = indent - opener
        opener = indent if body.rstrip().endswith(":") else None
    return mapping_indent or 2, 2 if dash is None else dash


def _respelled(before: str, after: str) -> str:
    """`after` with each entry that says what the entry at its place in `before` said (the
    same indentation, the same YAML when read alone) written as `before` wrote it: a key's
    line, or a key and its continuation lines (a flow sequence the file spreads over lines,
    which ruamel.yaml writes on one)."""
    import yaml

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            out += new[j1:j2]
            continue
        was, now = _entries(old[i1:i2]), _entries(new[j1:j2])
        keys = difflib.SequenceMatcher(
            a=[_entry_key(e) for e in was], b=[_entry_key(e) for e in now], autojunk=False
        )
        for kind, k1, k2, m1, m2 in keys.get_opcodes():
            for k, entry in enumerate(now[m1:m2]):
                prior = was[k1 + k] if kind != "insert" and k1 + k < k2 else None
                same = prior is not None and _same_entry(prior, entry, yaml)
                out += prior if same and prior is not None else entry
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _entries(lines: list[str]) -> list[list[str]]:
    """`lines` cut into entries: each starts at a line of the block's least indentation (a
    key, a sequence item) and keeps the deeper lines, closing brackets and comments after it."""
    bodies = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    least = min((_indent(ln) for ln in bodies), default=0)
    entries: list[list[str]] = []
    for line in lines:
        body = line.strip()
        starts = body and not body.startswith(("#", "]", "}")) and _indent(line) == least
        if starts or not entries:
            entries.append([line])
        else:
            entries[-1].append(line)
    return entries


def _entry_key(entry: list[str]) -> str:
    first = entry[0].strip()
    return first if first.startswith(("-", "#")) else first.split(":", 1)[0]


def _same_entry(a: list[str], b: list[str], yaml: Any) -> bool:
    if _indent(a[0]) != _indent(b[0]):
        return False
    try:
        return bool(
            yaml.safe_load(textwrap.dedent("".join(a)))
            == yaml.safe_load(textwrap.dedent("".join(b)))
        )
    except yaml.YAMLError:
        return False


_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")


@dataclass
class _Node:
    """Where a JSON value lies in the text: [start, end); an object's members by key, each
    (where its key's quote starts, its value)."""

    start: int
    end: int
    members: dict[str, tuple[int, _Node]] | None = None


class _JsonText:
    """JSON edited by splicing: a changed value's text is replaced at its own offsets, a new
    key is written after the last one of its object in the object's own indentation, a key
    that goes is cut with its comma; the rest of the text keeps its bytes (number spellings
    such as 5e8, the key order, the indentation)."""

    def __init__(self, text: str) -> None:
        self.text = text
        lines = [len(ln) - len(ln.lstrip(" ")) for ln in text.splitlines() if ln.strip()]
        self.unit = min((n for n in lines if n), default=2)

    def _root(self) -> _Node:
        return _parse(self.text, 0)[0]

    def get(self, path: Path_) -> Any:
        return _dig(json.loads(self.text), path)

    def _indent(self, at: int) -> str:
        """The whitespace the line holding offset `at` starts with."""
        start = self.text.rfind("\n", 0, at) + 1
        line = self.text[start:at]
        return line[: len(line) - len(line.lstrip())]

    def _render(self, value: Any, indent: str, inline: bool) -> str:
        if inline:
            return json.dumps(value)
        return json.dumps(value, indent=self.unit).replace("\n", "\n" + indent)

    def set(self, path: Path_, value: Any) -> None:
        node = self._root()
        for depth, key in enumerate(path):
            assert node.members is not None  # get() walked mappings to here
            if key not in node.members:
                rest: Any = value
                for inner in reversed(path[depth + 1 :]):
                    rest = {inner: rest}
                self._add(node, key, rest)
                return
            node = node.members[key][1]
        key_at = self._key_at(path)
        inline = "\n" not in self.text[key_at : node.end]
        text = self._render(value, self._indent(key_at), inline and isinstance(value, dict))
        self.text = self.text[: node.start] + text + self.text[node.end :]

    def _key_at(self, path: Path_) -> int:
        node = self._root()
        at = node.start
        for key in path:
            assert node.members is not None
            at, node = node.members[key]
        return at

    def _add(self, obj: _Node, key: str, value: Any) -> None:
        assert obj.members is not None
        if obj.members:
            last_at, last = list(obj.members.values())[-1]
            inline = "\n" not in self.text[obj.start : last_at]
            indent = self._indent(last_at)
            sep = " " if inline else "\n" + indent
            member = f",{sep}{json.dumps(key)}: {self._render(value, indent, inline)}"
            self.text = self.text[: last.end] + member + self.text[last.end :]
            return
        outer = self._indent(obj.start)
        indent = outer + " " * self.unit
        member = f"\n{indent}{json.dumps(key)}: {self._render(value, indent, False)}\n{outer}"
        self.text = self.text[: obj.start + 1] + member + self.text[obj.end - 1 :]

    def delete(self, path: Path_) -> None:
        node = self._root()
        for key in path[:-1]:
            assert node.members is not None
            node = node.members[key][1]
        assert node.members is not None
        items = list(node.members.items())
        index = next(i for i, (k, _) in enumerate(items) if k == path[-1])
        at, value = items[index][1]
        if index > 0:  # cut from the end of the key before it: its comma goes with it
            start, end = items[index - 1][1][1].end, value.end
        elif len(items) > 1:
            start, end = at, items[1][1][0]
        else:
            start, end = node.start + 1, node.end - 1
        self.text = self.text[:start] + self.text[end:]

    def dump(self) -> str:
        return self.text


def _parse(text: str, pos: int) -> tuple[_Node, int]:
    """The JSON value at `pos` (after whitespace) and the offset after it. The text was
    already read by `json.loads` (`parse_json`), so it is valid and its depth bounded."""
    start = pos = _past(_SPACE, text, pos)
    char = text[pos]
    if char == '"':
        end = _past(_STRING, text, pos)
        return _Node(start, end), end
    if char not in "{[":
        end = _past(_SCALAR, text, pos)
        return _Node(start, end), end
    close = "}" if char == "{" else "]"
    members: dict[str, tuple[int, _Node]] = {}
    pos = _past(_SPACE, text, pos + 1)
    while text[pos] != close:
        key_at, key = pos, None
        if char == "{":
            end = _past(_STRING, text, pos)
            key = json.loads(text[pos:end])
            pos = _past(_SPACE, text, end) + 1  # past the colon
        value, pos = _parse(text, pos)
        if key is not None:
            members[key] = (key_at, value)
        pos = _past(_SPACE, text, pos)
        if text[pos] == ",":
            pos = _past(_SPACE, text, pos + 1)
    end = pos + 1
    return _Node(start, end, members if char == "{" else None), end


def _past(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """The offset after `pattern` matched at `pos` (valid JSON: it matches)."""
    found = pattern.match(text, pos)
    if found is None:
        raise ConfigError(f"unexpected JSON at offset {pos}")
    return found.end()
