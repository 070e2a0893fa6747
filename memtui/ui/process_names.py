"""What a process runs, named as its user would: the script or module, not the interpreter.

`/usr/bin/python3 -u train.py --lr 1e-4` is `train.py --lr 1e-4`; `python -m trl.cli sft` is
`trl.cli sft`; `torchrun --nproc_per_node 8 train.py` and `accelerate launch --config_file
a.yaml train.py` are `train.py` (the launcher's own options dropped). A command line comes from
another user's process (untrusted): only its first `MAX_SCANNED` characters are split, and the
result is shown through `memtui.text.shown` by the table that draws it.

Python's options are those of `python --help` (CPython 3.8-3.14, Modules/main.c usage): the
ones taking a value (`-W arg`, `-X opt`, `-Q` of Python 2) consume the next word; `-m MOD` and
`-c CMD` end the options. A launcher's options are read the way each parses them:
`--opt=value` is one word, `--opt value` two, so the script is the first word after the
launcher's name that ends in ".py" (or the module after `-m`/`--module`): torchrun
(torch/distributed/run.py get_args_parser), accelerate launch (accelerate/commands/launch.py
launch_command_parser), deepspeed (deepspeed/launcher/runner.py parse_args).
"""

from __future__ import annotations

import os
import re

#: Characters of a command line split at most: a name is near its start, and a megabyte of
#: arguments (psutil reads /proc/PID/cmdline whole) is not split on every poll.
MAX_SCANNED = 4096

_PYTHON = re.compile(r"(?:python|pypy)[0-9.]*(?:-dbg)?", re.IGNORECASE)
#: Python options that take the next word as their value (`python --help`).
_PYTHON_VALUED = {"-W", "-X", "-Q", "--check-hash-based-pycs"}
_LAUNCHERS = {"torchrun", "accelerate", "deepspeed", "accelerate-launch", "colossalai", "tune"}
#: Launchers run as modules (`python -m torch.distributed.run ... train.py`).
_LAUNCHER_MODULES = {
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate.commands.launch",
    "deepspeed.launcher.runner",
}
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def program_of(command: str | None, name: str | None = None) -> str | None:
    """The program a command line runs with its arguments (the interpreter and launcher
    dropped); the process `name` when the command line is unknown or empty."""
    if not command:
        return name
    words = command[:MAX_SCANNED].split()
    if len(command) > MAX_SCANNED and words:
        words[-1] += "…"  # the last word was cut by the bound
    words = _without_env(words)
    if not words:
        return name
    head = os.path.basename(words[0])
    if _PYTHON.fullmatch(head):
        return _after_python(words[1:]) or head
    if head in _LAUNCHERS:
        return _after_launcher(words[1:]) or " ".join([head, *words[1:]])
    return " ".join([head, *words[1:]])


def _without_env(words: list[str]) -> list[str]:
    """`env A=1 B=2 cmd` and `A=1 cmd` (a shell's wrapper as /proc shows it) run `cmd`."""
    i = 0
    if words and os.path.basename(words[0]) == "env":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 1
    while i < len(words) and _ENV.fullmatch(words[i]):
        i += 1
    return words[i:]


def _after_python(args: list[str]) -> str | None:
    """What `python [options] (script | -m module | -c cmd) args` runs."""
    i = 0
    while i < len(args):
        word = args[i]
        if word == "-c" and i + 1 < len(args):
            return "python -c " + " ".join(args[i + 1 :])
        if word.startswith("-m") and (len(word) > 2 or i + 1 < len(args)):  # -m x, -mx
            module, rest = (
                (word[2:], args[i + 1 :]) if len(word) > 2 else (args[i + 1], args[i + 2 :])
            )
            if module in _LAUNCHER_MODULES:
                return _after_launcher(rest) or " ".join([module, *rest])
            return " ".join([module, *rest])
        if word == "--" or not word.startswith("-"):
            start = i + 1 if word == "--" else i
            if start >= len(args):
                return None
            return _script(args[start:])
        i += 2 if word in _PYTHON_VALUED else 1
    return None


def _after_launcher(args: list[str]) -> str | None:
    """The script (first word ending in .py) or module (`-m`, `--module`) a launcher runs;
    a script that is itself a Python launched by the launcher (`--no_python`) is kept."""
    for i, word in enumerate(args):
        if word in ("-m", "--module") and i + 1 < len(args):
            nxt = args[i + 1]
            if nxt.endswith(".py"):  # torchrun -m is a flag: the script follows it
                return _script(args[i + 1 :])
            return " ".join(args[i + 1 :])
        if word.endswith(".py") and not word.startswith("-"):
            return _script(args[i:])
    return None


def _script(args: list[str]) -> str:
    """A script path and its arguments, the path as its file name."""
    return " ".join([os.path.basename(args[0]) or args[0], *args[1:]])
