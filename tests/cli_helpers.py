"""Running the installed command's code path (`python -m memtui ...`) from the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def watch(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m memtui watch ARGS` (the installed entry point's code path)."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = str(ROOT) + os.pathsep + base.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "memtui", "watch", *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=ROOT,
        timeout=timeout,
    )


def memtui(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m memtui ARGS` (the installed entry point's code path) in `cwd`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=timeout,
    )
