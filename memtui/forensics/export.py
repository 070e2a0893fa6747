"""Write a snapshot the way PyTorch's memory_viz page opens it, its allocations coloured by
plan term, so a user can go deeper there.

What the page reads (torch/utils/viz/MemoryViz.js): a dropped or chosen file is always
unpickled by its own decoder (`unpickle`: protocols 2 to 4, and only the opcodes for dicts,
lists, tuples, strings, ints, floats, booleans and None); it opens no JSON file. The one JSON
it takes is the list `[{"name": ..., "base64": <the pickle>}]` handed to `add_local_files`,
which is how torch/cuda/_memory_viz.py `_format_viz` embeds a snapshot in an HTML page.
So memtui writes either:
- `FILE.pickle`: drop it on pytorch.org/memory_viz;
- `FILE.html`: a page in that embedding (it loads MemoryViz.js from the same CDN as the
  pages `python -m torch.cuda._memory_viz trace_plot` writes), opened on the Active Memory
  Timeline.

The pickle is rebuilt from the known fields only (plain values, shared frame lists kept
shared) at protocol 4: Python 3.14 pickles at protocol 5 by default, which the page refuses
("Unhandled version 5"). Each alloc, and each free, gets a `category`: the plan term memtui
attributed it to, which the page uses to colour the timeline and draw a legend
(`annotate_snapshot` collects trace entries' categories). The page's annotate_snapshot adds
`unknown` through a misspelt `snapshot.categores` when no entry carries that category, and
throws; so unattributed entries are called `unknown`, the page's own name for allocations
without a category, and when none is, segment events carry it.
"""

from __future__ import annotations

import base64
import html
import json
import pickle
from pathlib import Path
from typing import Any

from memtui.forensics.attribution import Attributor
from memtui.forensics.model import UNATTRIBUTED, Bucket
from memtui.forensics.reader import RawFile, SnapshotError

#: The opcodes torch/utils/viz/MemoryViz.js `unpickle` decodes (its switch's cases).
VIEWER_OPCODES = frozenset(
    {
        "PROTO", "FRAME", "STOP", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET",
        "LONG_BINGET", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST", "TUPLE",
        "TUPLE1", "TUPLE2", "TUPLE3", "SETITEM", "SETITEMS", "APPEND", "APPENDS", "NONE",
        "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
        "SHORT_BINUNICODE", "BINUNICODE",
    }
)  # fmt: skip
UNKNOWN = "unknown"
_SCALARS = (str, int, float, bool, type(None))
_HTML = """<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<script type="module">
import {{add_local_files}} from "https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js"
const local_files = {files}
add_local_files(local_files, "Active Memory Timeline")
</script>
</body>
</html>
"""


class _Cleaner:
    """Plain copies of the snapshot's dicts: scalars kept, known containers rebuilt, a frame
    list shared by many entries copied once and shared again."""

    def __init__(self) -> None:
        self._frames: dict[int, list[dict[str, Any]]] = {}

    def frames(self, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            return []
        got = self._frames.get(id(value))
        if got is None:
            got = [self.scalars(f) for f in value if isinstance(f, dict)]
            self._frames[id(value)] = got
        return got

    @staticmethod
    def scalars(d: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in d.items() if isinstance(k, str) and isinstance(v, _SCALARS)}
        # a Python int past 64 bits would need LONG4, which the page cannot read
        return {k: v for k, v in out.items() if not isinstance(v, int) or -(2**63) <= v < 2**64}

    def entry(self, d: dict[str, Any]) -> dict[str, Any]:
        out = self.scalars(d)
        if "frames" in d:
            out["frames"] = self.frames(d["frames"])
        pool = d.get("segment_pool_id", d.get("pool_id"))
        if isinstance(pool, (tuple, list)) and all(isinstance(x, int) for x in pool):
            out["segment_pool_id" if "segment_pool_id" in d else "pool_id"] = tuple(pool)
        return out


def viewer_snapshot(raw: RawFile) -> dict[str, Any]:
    """The snapshot as plain, page-readable data with plan-term categories."""
    if raw.kind == "memory_stats":
        raise SnapshotError(
            f"{raw.path}: a memory_stats dump has no segments or trace; memory_viz needs a "
            "snapshot (torch.cuda.memory._dump_snapshot)"
        )
    data = raw.data
    clean = _Cleaner()
    attributor = Attributor()
    segments = []
    for seg in data.get("segments") or []:
        if not isinstance(seg, dict):
            continue
        s = clean.entry(seg)
        s["blocks"] = [clean.entry(b) for b in seg.get("blocks") or [] if isinstance(b, dict)]
        segments.append(s)
    traces = []
    has_unknown = False
    for trace in data.get("device_traces") or []:
        out = []
        last_term: dict[Any, Bucket] = {}
        for e in trace if isinstance(trace, list) else []:
            if not isinstance(e, dict):
                continue
            t = clean.entry(e)
            action = e.get("action")
            if "category" not in e and action in ("alloc", "free_requested", "free_completed"):
                if action == "alloc":
                    term = attributor.classify(e.get("frames")).term
                    last_term[e.get("addr")] = term
                else:
                    term = last_term.get(e.get("addr")) or attributor.classify(e.get("frames")).term
                # the plain string: the viewer's unpickler knows no classes
                t["category"] = UNKNOWN if term is UNATTRIBUTED else term.value
            has_unknown = has_unknown or t.get("category") == UNKNOWN
            out.append(t)
        traces.append(out)
    if not has_unknown:
        for e in (e for t in traces for e in t):
            if e.get("action") in ("segment_alloc", "segment_free", "segment_map", "segment_unmap"):
                e["category"] = UNKNOWN
                has_unknown = True
                break
    if not has_unknown:  # no entry can carry `unknown`: leave categories out (see above)
        for e in (e for t in traces for e in t):
            e.pop("category", None)
    result: dict[str, Any] = {"segments": segments, "device_traces": traces}
    for key in ("allocator_settings", "external_annotations"):
        if isinstance(data.get(key), (dict, list)):
            result[key] = _plain(data[key])
    return result


def _plain(value: Any, depth: int = 0) -> Any:
    if depth > 8:
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return value if isinstance(value, _SCALARS) else str(value)


def export(raw: RawFile, out: str | Path, force: bool = False) -> Path:
    """Write `raw` for memory_viz: `.html` a page, anything else the pickle. As every file a
    command writes (`memtui.plans.files.write_new`): atomic, a regular file only, never the
    snapshot read, an existing file only when `force`."""
    from memtui.plans.files import write_new

    path = Path(out)
    data = viewer_snapshot(raw)
    payload = pickle.dumps(data, protocol=4)
    if path.suffix.lower() in (".html", ".htm"):
        padded = payload + b"\x00" * (-len(payload) % 3)  # whole base64 quanta, as _format_viz
        name = Path(raw.path).name
        files = json.dumps([{"name": name, "base64": base64.b64encode(padded).decode("ascii")}])
        # the file name is the user's: escaped for the title, and no "</script>" in the script
        title = html.escape(f"memory_viz: {name}")
        body = _HTML.format(title=title, files=files.replace("</", "<\\/")).encode()
    else:
        body = payload
    return write_new(path, body, force, [raw.path])
