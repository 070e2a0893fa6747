"""A benchmark's table written into a document between its two marker comments (docs/accuracy.md
holds several: `--write FILE` of benchmarks/published.py and benchmarks/throughput.py)."""

from __future__ import annotations

from pathlib import Path


def write_table(path: Path, begin: str, end: str, text: str) -> None:
    """Replace what lies between `begin` and `end` in the file at `path` with `text` (the
    block appended at the end when the file has no markers yet)."""
    doc = path.read_text(encoding="utf-8")
    block = f"{begin}\n{text}\n{end}"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + block + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc, encoding="utf-8")
