"""Job configs are read bounded: an alias bomb, a recursive alias or an oversized file is one
line (exit 2) in little time and memory, while the anchors real configs use still read."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.bounded import JOB_CONFIG
from memtui.plans.facts import ConfigError, parse_yaml, read_text

ROOT = Path(__file__).resolve().parents[1]


def bomb(levels: int = 9) -> str:
    """The billion laughs: 9 aliases of 9 aliases... (9^9 strings from about 1 KB)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"base_model: *a{levels}", ""])


def _limited() -> None:  # the child may not grow past 2 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


def test_an_alias_bomb_is_one_line_in_bounded_time_and_memory(tmp_path: Path) -> None:
    config = tmp_path / "axolotl.yaml"
    config.write_text(bomb())
    assert config.stat().st_size < 2048
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--from", str(config)],
        capture_output=True, text=True, timeout=60, preexec_fn=_limited, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "aliases expand to more than 100,000 values" in lines[0]
    assert "lol" not in out.stderr  # nothing of the expanded value is shown


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match="refer to themselves"):
        parse_yaml("base_model: &x [*x]\n", "x.yaml")


def test_the_anchors_real_configs_use_still_read() -> None:
    text = (
        "defaults: &defaults\n  micro_batch_size: 2\n  sequence_len: 4096\n"
        "train:\n  <<: *defaults\n  micro_batch_size: 4\n"
        "lora_target_modules: &targets [q_proj, v_proj]\nagain: *targets\n"
    )
    data = parse_yaml(text, "x.yaml")
    assert data["train"] == {"micro_batch_size": 4, "sequence_len": 4096}
    assert data["again"] == ["q_proj", "v_proj"]
    assert parse_yaml("", "empty.yaml") is None


def test_a_small_bomb_under_the_budget_still_reads() -> None:
    # three levels: 9^3 = 729 strings at base_model (some 15,000 values in the whole
    # document), within the budget: a document with many aliases is no error
    assert len(parse_yaml(bomb(3), "x.yaml")["base_model"]) == 9


def test_a_fifo_or_an_oversized_file_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)  # nobody writes: a plain open() would wait forever
    with pytest.raises(ConfigError, match="not a regular file"):
        read_text(fifo, "config.yaml")
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: the size without the bytes
        f.truncate(JOB_CONFIG.limit + 1)
    with pytest.raises(ConfigError, match="over 8 MiB"):
        read_text(big, "big.json")
