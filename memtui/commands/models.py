"""`memtui models [SEARCH] [--json]`: the built-in model catalog, one row per model."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from memtui.errors import UsageError

if TYPE_CHECKING:
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
    from memtui.estimator.units import format_count

    entries = find(args.search)
    if not entries:
        raise UsageError(f"no catalog model matches {args.search!r}", hint="run `memtui models`")
    rows = [_row(e) for e in entries]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"memtui model catalog ({len(rows)} models)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    # Names fold on a narrow terminal; numbers never do (a cropped count would mislead).
    table.add_column("repo id", overflow="fold")
    table.add_column("type", overflow="fold")
    for name in ("params", "", "layers", "hidden", "heads/kv", "vocab"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        kind = r["model_type"]
        if r["experts"]:
            kind += f" top{r['experts_per_token']}/{r['experts']}"
        # variant ids that resolve to this entry, one per line under it
        name = "\n".join([r["repo_id"], *(f"  = {alias}" for alias in r["aliases"])])
        table.add_row(
            name,
            kind,
            f"{r['parameters']:,}",
            format_count(r["parameters"]),
            str(r["layers"]),
            str(r["hidden_size"]),
            f"{r['heads']}/{r['kv_heads']}",
            f"{r['vocab_size']:,}",
        )
    console = Console()
    if not console.is_terminal:  # piped: rich would assume 80 columns; keep rows whole
        console = Console(width=120)
    console.print(table)
    return 0
