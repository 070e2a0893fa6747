"""The CLI builds the parser of the command it runs alone (memtui/cli.py `build_parser`):
that parser reads every flag as the whole CLI's does, and an unknown command still gets the
list of commands."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from memtui.cli import COMMANDS, build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_commands_own_parser_is_the_whole_clis_for_it(name: str) -> None:
    alone = _subparsers(build_parser(name))
    assert list(alone) == [name]  # each module registers the command named as it is
    whole = _subparsers(build_parser())[name]
    assert alone[name].format_help() == whole.format_help()


def test_an_unknown_command_is_told_the_commands_there_are() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(["estimat"])
    assert exited.value.code == 2
    assert "invalid choice: 'estimat'" in err.getvalue()
    assert all(f"'{name}'" in err.getvalue() for name in COMMANDS)
