"""Real processes with the command lines of training launches, for the attach tests (no tests
here).

`Launchers(tmp_path)` writes small Python scripts named torchrun, accelerate, deepspeed, tune,
axolotl and llamafactory-cli into a bin folder: each is run the way the real console script
is (`#!python`, so the process's command line is `python /.../bin/torchrun --nproc_per_node 2
train.py ...`), starts its workers as child processes with torchrun's WORLD_SIZE /
LOCAL_WORLD_SIZE, prints their PIDs and waits; a single-process launch (a single-device tune
recipe, llamafactory-cli on one GPU) is itself the GPU process. Every process waits on its
stdin and ends when the test closes it: nothing outlives the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

NAMES = ("torchrun", "accelerate", "deepspeed", "tune", "axolotl", "llamafactory-cli")

WORKER = """\
import sys
sys.stdin.read()  # a training step, as far as NVML is concerned: held until released
"""

LAUNCHER = """\
import json, os, subprocess, sys

workers = int(os.environ.get("FAKE_WORKERS", "0"))
worker = os.environ["FAKE_WORKER"]
children = []
for rank in range(workers):
    env = dict(os.environ, WORLD_SIZE=str(workers), LOCAL_WORLD_SIZE=str(workers),
               RANK=str(rank), LOCAL_RANK=str(rank))
    children.append(subprocess.Popen([sys.executable, "-u", worker, *sys.argv[1:]],
                                     stdin=subprocess.PIPE, env=env))
print(json.dumps([c.pid for c in children] or [os.getpid()]), flush=True)
sys.stdin.read()
for child in children:
    child.stdin.close()
    child.wait()
"""


@dataclass
class Started:
    """A running launch: its process and the PIDs that stand on the GPUs."""

    process: subprocess.Popen[str]
    gpu_pids: list[int]


class Launchers:
    """The fake launchers' bin folder and the processes started from it."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.worker = root / "worker.py"
        self.worker.write_text(WORKER)
        for name in NAMES:
            path = self.bin / name
            path.write_text(f"#!{sys.executable}\n{LAUNCHER}")
            path.chmod(0o755)
        self.started: list[Started] = []

    def env(self, workers: int, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_WORKERS"] = str(workers)
        env["FAKE_WORKER"] = str(self.worker)
        env.update(extra or {})
        return env

    def start(
        self, argv: list[str], cwd: Path, workers: int = 0, env: dict[str, str] | None = None
    ) -> Started:
        """Run `argv` in `cwd` (a launcher by its name on PATH, or `python script ...`)."""
        process = subprocess.Popen(
            argv, cwd=cwd, env=self.env(workers, env), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        if Path(argv[0]).name in NAMES:
            assert process.stdout is not None
            pids = json.loads(process.stdout.readline())
        else:
            pids = [process.pid]
        started = Started(process, pids)
        self.started.append(started)
        return started

    def stop(self) -> None:
        for started in self.started:
            if started.process.stdin is not None:
                started.process.stdin.close()
            started.process.wait(timeout=30)
        self.started.clear()


@contextmanager
def launchers(root: Path) -> Iterator[Launchers]:
    fakes = Launchers(root)
    try:
        yield fakes
    finally:
        fakes.stop()


def direct(cwd: Path, script: str) -> Path:
    """A training script run directly (`python train.py --args`): the stand-in worker."""
    path = cwd / script
    path.write_text(WORKER)
    return path
