"""`memtui models [SEARCH] [--json]`: the built-in model catalog, one row per model."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from memtui.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from memtui.estimator.catalog import CatalogEntry


def register(subparsers: Any) -> None:
    """Add the `models` subcommand to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "models",
        help="list the built-in model catalog",
        description="List the built-in models (Hugging Face repo ids usable as --model).",
    )
    parser.add_argument("search", nargs="?", default="", help="show only models matching this")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.set_defaults(run=run)


def _row(entry: CatalogEntry) -> dict[str, Any]:
    arch = entry.architecture
    return {
        "repo_id": entry.repo_id,
        "aliases": list(entry.aliases),
        "model_type": arch.model_type,
        "parameters": arch.parameter_count,
        "published_parameters": entry.published_parameters,
        "layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "heads": arch.num_heads,
        "kv_heads": arch.kv_heads,
        "vocab_size": arch.vocab_size,
        "experts": arch.num_experts,
        "experts_per_token": arch.experts_per_token,
        "tie_embeddings": arch.tie_embeddings,
    }


def run(args: argparse.Namespace) -> int:
    """Print the catalog (or the entries matching `args.search`); returns the exit code."""
    from memtui.estimator.catalog import find

    entries = find(args.search)
    if not entries:
        raise UsageError(f"no catalog model matches {args.search!r}", hint="run `memtui models`")
    rows = [_row(e) for e in entries]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    import os

    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=120)  # piped: rich would assume 80 columns; keep rows whole
    _print_table(console, rows)
    return 0


_TYPE_MIN = 6
"""The model type column's narrowest: the one column that is cut (with an ellipsis)."""

_LEAVE_OUT = ("params", "vocab", "hidden", "heads/kv", "layers")
"""The number columns a narrow terminal leaves out, first to last (never cropped: a cut
count would mislead; `--json` has them all)."""


def _print_table(console: Console, rows: list[dict[str, Any]]) -> None:
    """The catalog as a table as wide as the console: ids whole, one a line (people copy
    them), an entry's variant ids under it; the type cut before any number, number columns
    left out (and said) before an id is folded."""
    from rich.table import Table

    from memtui.estimator.units import format_count

    names = {
        r["repo_id"]: "\n".join([r["repo_id"], *(f"  = {alias}" for alias in r["aliases"])])
        for r in rows
    }
    kinds: dict[str, str] = {}
    for r in rows:
        kinds[r["repo_id"]] = r["model_type"] + (
            f" top{r['experts_per_token']}/{r['experts']}" if r["experts"] else ""
        )
    numbers: dict[str, list[str]] = {
        "params": [f"{r['parameters']:,}" for r in rows],
        "": [format_count(r["parameters"]) for r in rows],
        "layers": [str(r["layers"]) for r in rows],
        "hidden": [str(r["hidden_size"]) for r in rows],
        "heads/kv": [f"{r['heads']}/{r['kv_heads']}" for r in rows],
        "vocab": [f"{r['vocab_size']:,}" for r in rows],
    }
    id_width = max(len(line) for name in names.values() for line in name.splitlines())
    kind_width = max(len("type"), *map(len, kinds.values()))

    def widths(columns: dict[str, list[str]]) -> dict[str, int]:
        return {h: max(len(h), *map(len, c)) for h, c in columns.items()}

    def room(columns: dict[str, list[str]]) -> int:
        # box=None, pad_edge=False: two spaces between neighbouring columns
        return console.width - id_width - sum(widths(columns).values()) - 2 * (len(columns) + 1)

    left_out = []
    for name in _LEAVE_OUT:
        if room(numbers) >= _TYPE_MIN:
            break
        del numbers[name]
        left_out.append(name)
    table = Table(
        title=f"memtui model catalog ({len(rows)} models)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    # every width set: rich would otherwise crop a number column before the type
    table.add_column("repo id", no_wrap=True, width=id_width)
    type_width = max(_TYPE_MIN, min(kind_width, room(numbers)))
    table.add_column("type", no_wrap=True, overflow="ellipsis", width=type_width)
    for name, cells_width in widths(numbers).items():
        table.add_column(name, justify="right", no_wrap=True, width=cells_width)
    for i, r in enumerate(rows):
        cells = [column[i] for column in numbers.values()]
        table.add_row(names[r["repo_id"]], kinds[r["repo_id"]], *cells)
    console.print(table)
    if left_out:
        console.print(
            f"left out at {console.width} columns: {', '.join(left_out)} (a wider terminal "
            "or --json shows them)",
            highlight=False,
        )
