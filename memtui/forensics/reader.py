"""Reading PyTorch memory files without importing torch and without running anything in them.

Two kinds of file:
- a memory snapshot: the pickle `torch.cuda.memory._dump_snapshot()` writes (a dict with
  `segments`, `device_traces` and `allocator_settings`: torch/cuda/memory.py `_snapshot`), or
  the bare segment list `torch.cuda.memory_snapshot()` returns, pickled;
- `torch.cuda.memory_stats()` dumped as JSON (its flat dotted keys, or the nested dict of
  `memory_stats_as_nested_dict`): one object, a list of objects (one per device), or JSON lines
  (one object per logged step; the last line is the state, every line a point in time).

A pickle is a program for a small stack machine. Its only ways to run code are to look a
callable up by name (GLOBAL, STACK_GLOBAL, INST, OBJ and the EXT registry all go through
`Unpickler.find_class`) and call it (REDUCE, NEWOBJ, BUILD), or to hand an id to
`persistent_load`. `_PlainUnpickler` refuses both, so a file can build dicts, lists, tuples,
strings, numbers and nothing else; naming any class (`os.system`, `torch.Tensor`) is one
line of error and nothing from the file runs. PyTorch's snapshot is plain data by design:
memory_viz decodes it in JavaScript (torch/utils/viz/MemoryViz.js `unpickle`), which has no
classes at all.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.bounded import MEMORY_STATS, SNAPSHOT, Bounded, opened
from memtui.errors import UsageError
from memtui.text import shown


class SnapshotError(UsageError):
    """A file memtui cannot read as a PyTorch memory snapshot or memory_stats dump: one line
    on stderr and exit code 2 in the CLI, one notification in the dashboard."""


@dataclass(frozen=True)
class RawFile:
    """A file's plain-data content and what it is."""

    path: str
    kind: str
    """`snapshot`, `segments` or `memory_stats`."""
    data: Any
    """snapshot: the dict; segments: {"segments": list}; memory_stats: a list of samples,
    each a list of per-device flat dicts."""
    file_bytes: int


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds plain values only: every class lookup is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(
            f"the pickle names {module[:60]}.{name[:60]}; memtui reads plain data only "
            "(dicts, lists, strings, numbers) and refuses every class, so nothing in the file "
            "was run"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise SnapshotError(
            "the pickle refers to a persistent object (a torch.save-style file, not a memory "
            "snapshot); nothing in the file was run"
        )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Unpickling builds millions of containers; the cyclic collector walking them over and
    over doubles the time and finds nothing (plain data has no cycles)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load(path: str | Path) -> RawFile:
    """Read `path` (`-`: standard input) as a snapshot pickle or a memory_stats JSON, bounded
    (`memtui.bounded`: a regular file, at most 2 GiB for a pickle and 256 MiB for JSON);
    SnapshotError otherwise."""
    with opened(path, SNAPSHOT, SnapshotError) as file:
        name = file.label
        head = file.peek(64)[:64]
        if not head:
            raise SnapshotError(f"{name}: the file is empty")
        if head[:1] == b"\x80":  # PROTO: every pickle of protocol 2 or newer starts so
            return _classify_pickle(name, _unpickle(file), file.count)
        if head.lstrip()[:1] in (b"{", b"["):
            return _classify_json(name, _read_json(file), file.count)
    raise SnapshotError(
        f"{name}: neither a PyTorch memory snapshot (a pickle from "
        "torch.cuda.memory._dump_snapshot) nor a torch.cuda.memory_stats() JSON; it starts "
        f"with {shown(repr(head[:8]))}"
    )


def _unpickle(file: Bounded) -> Any:
    name = file.label
    try:
        with _collector_paused():
            data = _PlainUnpickler(file).load()
    except SnapshotError as err:
        raise SnapshotError(f"{name}: {err}") from None
    except MemoryError:
        raise SnapshotError(f"{name}: not enough memory to read it") from None
    except (pickle.UnpicklingError, EOFError) as err:
        if file.over:  # it ended at the bound, not in the file
            raise file.too_large() from None
        raise SnapshotError(f"{name}: a damaged or truncated pickle ({_first(err)})") from None
    except RecursionError:
        raise SnapshotError(f"{name}: a pickle nested too deeply") from None
    except Exception as err:  # any other malformed opcode stream, in one line
        raise SnapshotError(
            f"{name}: not a readable pickle ({type(err).__name__}: {_first(err)})"
        ) from None
    return data


def _read_json(file: Bounded) -> list[Any]:
    """The JSON values of the file: one, or one per line (JSON lines)."""
    name = file.label
    data = file.read(MEMORY_STATS.limit + 1)
    if len(data) > MEMORY_STATS.limit:
        raise SnapshotError(
            f"{name}: over {MEMORY_STATS.bound()}, larger than any {MEMORY_STATS.what}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"{name}: not UTF-8 text, so not a JSON dump") from None
    del data
    try:
        return [_json_value(text)]
    except json.JSONDecodeError as err:
        if err.msg != "Extra data":
            raise SnapshotError(f"{name}: not valid JSON ({_first(err)})") from None
    except ValueError as err:  # a number JSON has not (NaN, Infinity)
        raise SnapshotError(f"{name}: {err}") from None
    except RecursionError:
        raise SnapshotError(f"{name}: JSON nested too deeply") from None
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append(_json_value(line))
        except (ValueError, RecursionError) as err:  # JSONDecodeError is a ValueError
            raise SnapshotError(f"{name}: line {number} is not JSON ({_first(err)})") from None
    return values


def _json_value(text: str) -> Any:
    """One JSON value, as JSON defines it: NaN and Infinity (which Python's json accepts, json
    docs `parse_constant`) are refused; nesting past the interpreter's recursion limit is a
    RecursionError (the C scanner of json, Modules/_json.c, enters a recursive call per level)."""
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number (torch.cuda.memory_stats() counts bytes)")


def _first(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:160] if text else type(err).__name__


def _is_stats(value: Any) -> bool:
    return isinstance(value, dict) and any(
        isinstance(k, str) and k.split(".", 1)[0] in _STAT_ROOTS for k in value
    )


#: Top-level names of torch.cuda.memory_stats() (torch/csrc/cuda/Module.cpp
#: `THCPModule_memoryStats`); one of them marks a dict as a stats dump.
_STAT_ROOTS = frozenset(
    {
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "requested_bytes",
        "inactive_split_bytes",
        "num_alloc_retries",
        "num_ooms",
        "segment",
        "allocation",
    }
)


def flatten_stats(value: dict[str, Any]) -> dict[str, int]:
    """memory_stats as torch.cuda.memory_stats() returns it: dotted keys, integer values (the
    nested form of memory_stats_as_nested_dict is flattened the way torch/cuda/memory.py
    `memory_stats` does it). Values that are not numbers are left out, and so is anything
    nested deeper than that form's three levels; a number that is no count (negative, NaN,
    infinite: torch counts bytes and events in int64 from zero) is a ValueError."""
    flat: dict[str, int] = {}

    def walk(prefix: str, node: Any, depth: int) -> None:
        if isinstance(node, dict) and depth < _STATS_DEPTH:
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v, depth + 1)
        elif isinstance(node, bool):
            return
        elif isinstance(node, (int, float)):
            if not (0 <= node < math.inf):  # NaN fails both comparisons
                raise ValueError(f"{shown(prefix, 80)} is {node!r}, not a count")
            flat[prefix] = int(node)

    walk("", value, 0)
    return flat


# memory_stats_as_nested_dict: stat, pool ("all", "large_pool"), then "current"/"peak"/...
_STATS_DEPTH = 8


def _stats(name: str, value: dict[str, Any]) -> dict[str, int]:
    try:
        return flatten_stats(value)
    except ValueError as err:
        raise SnapshotError(f"{name}: memory_stats {err}") from None


def _classify_pickle(name: str, data: Any, size: int) -> RawFile:
    if isinstance(data, dict) and "segments" in data:
        if not isinstance(data["segments"], list):
            raise SnapshotError(f"{name}: `segments` is not a list; not a PyTorch snapshot")
        return RawFile(name, "snapshot", data, size)
    if isinstance(data, list) and all(isinstance(s, dict) and "blocks" in s for s in data[:8]):
        # torch.cuda.memory_snapshot() returns only the segments (torch/cuda/_memory_viz.py
        # `_read` accepts this list the same way)
        return RawFile(name, "segments", {"segments": data, "device_traces": []}, size)
    if _is_stats(data):
        return RawFile(name, "memory_stats", [[_stats(name, data)]], size)
    what = (
        f"a dict with keys {', '.join(shown(k, 40) for k in sorted(map(str, data))[:6])}"
        if isinstance(data, dict)
        else f"a {type(data).__name__}"
    )
    raise SnapshotError(
        f"{name}: a pickle, but not a PyTorch memory snapshot ({what}; expected a dict with "
        "`segments` from torch.cuda.memory._dump_snapshot)"
    )


def _classify_json(name: str, values: list[Any], size: int) -> RawFile:
    samples: list[list[dict[str, int]]] = []
    for value in values:
        if isinstance(value, dict) and "segments" in value and len(values) == 1:
            return _classify_pickle(name, value, size)  # a snapshot someone saved as JSON
        if _is_stats(value):
            samples.append([_stats(name, value)])
        elif isinstance(value, list) and value and all(_is_stats(v) for v in value):
            samples.append([_stats(name, v) for v in value])  # one dict per device
        else:
            raise SnapshotError(
                f"{name}: JSON, but not torch.cuda.memory_stats() output (no key such as "
                "allocated_bytes.all.current)"
            )
    if not samples:
        raise SnapshotError(f"{name}: no memory_stats object in the file")
    return RawFile(name, "memory_stats", samples, size)
