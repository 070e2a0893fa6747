"""The one entry point: `memtui [dashboard flags]` or `memtui SUBCOMMAND ...`.

argparse rather than click/typer: it costs nothing to import, which keeps
`memtui estimate --json` near its floor (docs/architecture.md, "Measuring and checking").
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from memtui import __version__
from memtui.commands import dashboard, estimate, export, measure, models, plan, snapshot, watch
from memtui.errors import UsageError

SUBCOMMANDS = (estimate, plan, export, measure, models, watch, snapshot, dashboard)
#: Each subcommand by the name it registers (its module's).
COMMANDS = {module.__name__.rpartition(".")[2]: module for module in SUBCOMMANDS}
#: First tokens that keep argparse's top-level meaning; any other flag starts the dashboard.
_TOP_LEVEL_FLAGS = {"-h", "--help", "--version"}
#: A value that starts like a negative number (-7B, -1e3, -.5GB): argparse takes only plain
#: negative numbers (-7, -0.5) as values, so `--params -7B` said "expected one argument".
_NEGATIVE_VALUE = re.compile(r"-\.?\d")


def _attach_negative_values(tokens: list[str]) -> list[str]:
    """`--flag -7B` as `--flag=-7B`, so the value reaches the flag's own check, which says
    what is wrong with it (no option of memtui starts with a digit)."""
    out: list[str] = []
    for token in tokens:
        last = out[-1] if out else ""
        if _NEGATIVE_VALUE.match(token) and last.startswith("--") and "=" not in last:
            out[-1] = f"{last}={token}"
        else:
            out.append(token)
    return out


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (what is wrong, what is allowed), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, built once; subcommands register themselves. With `command`, that
    subcommand alone registers: it is the one to run, and building every other one's flags
    took a tenth of the dashboard's start (benchmarks/profile_ui.py)."""
    parser = OneLineParser(
        prog="memtui",
        description="Plan the GPU memory of a fine-tune and watch it live. With no command, "
        "memtui runs the dashboard (`memtui --demo` to try it without a GPU; its flags: "
        "`memtui dashboard --help`).",
    )
    parser.add_argument("--version", action="version", version=f"memtui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, module in COMMANDS.items():
        if command is None or name == command:
            module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the chosen subcommand; returns the exit code."""
    # building the parser imports the estimator (pydantic and its models: objects that live
    # as long as the process); the collector walked them some 60 times while they were made
    gc.disable()
    try:
        tokens = list(sys.argv[1:] if argv is None else argv)
        if not tokens or (tokens[0].startswith("-") and tokens[0] not in _TOP_LEVEL_FLAGS):
            tokens.insert(0, "dashboard")  # `memtui [dashboard flags]` is `memtui dashboard`
        # a known command: its parser alone; else every one (the help, or the error naming
        # the commands there are)
        parser = build_parser(tokens[0] if tokens[0] in COMMANDS else None)
        args = parser.parse_args(_attach_negative_values(tokens))
    finally:
        gc.enable()
    try:
        return int(args.run(args))
    except UsageError as err:
        # the message may echo a path or a value from elsewhere: escaped, one line
        from memtui.text import LINE, shown

        print(f"memtui {args.command}: error: {shown(str(err), LINE)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `memtui estimate --json | head`: the reader left; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
