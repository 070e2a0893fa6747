"""`memtui models` and `memtui estimate --model` with variant ids: a real process."""

from __future__ import annotations

import json
import subprocess
import sys


def memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args], capture_output=True, text=True, check=False
    )


def test_models_lists_variant_ids_as_aliases() -> None:
    out = memtui("models", "llama-3.2", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["repo_id"]: row for row in json.loads(out.stdout)}
    assert rows["meta-llama/Llama-3.2-3B"]["aliases"] == ["meta-llama/Llama-3.2-3B-Instruct"]
    table = memtui("models", "llama-3.2")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    base = next(i for i, line in enumerate(lines) if "meta-llama/Llama-3.2-3B " in line)
    assert "= meta-llama/Llama-3.2-3B-Instruct" in lines[base + 1]


def test_models_finds_an_entry_by_its_alias() -> None:
    out = memtui("models", "gemma-3-27b-it", "--json")
    assert out.returncode == 0, out.stderr
    assert [row["repo_id"] for row in json.loads(out.stdout)] == ["google/gemma-3-27b-pt"]


def test_estimate_takes_a_variant_id() -> None:
    out = memtui("estimate", "--model", "meta-llama/Llama-3.2-3B-Instruct", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    text = json.dumps(plan)
    assert "meta-llama/Llama-3.2-3B-Instruct" in text
    assert "3212749824" in text


def test_estimate_names_the_base_of_an_unknown_variant() -> None:
    out = memtui("estimate", "--model", "meta-llama/Llama-3.2-3B-Chat", "--json")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "the catalog has meta-llama/Llama-3.2-3B, but not this variant of it" in lines[0]
