"""The frameworks' versions from a job's requirement and lock files (memtui/plans/lockfiles.py):
real files copied from upstream repositories (tests/plans_configs/upstream/locks, their
repository, path and commit in SOURCES.toml), run through `memtui estimate --from`; the
expected versions were read from the files themselves."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import memtui

from memtui.plans.facts import ConfigError
from memtui.plans.registry import read_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LOCKS = Path(__file__).parent / "plans_configs" / "upstream" / "locks"

# open-instruct's uv.lock and its `uv export` requirements.txt resolve the same set; torch
# once per platform (2.10.0 on macOS, +cu128 on x86-64 Linux, +cu130 on aarch64 Linux)
OPEN_INSTRUCT = {
    "accelerate": "1.12.0",
    "bitsandbytes": "0.49.1",
    "deepspeed": "0.18.4",
    "peft": "0.18.1",
    "torch": "2.10.0",
    "transformers": "5.4.0",
}


def _json(*args: str) -> dict[str, Any]:
    result = memtui("estimate", "--model", "meta-llama/Llama-2-7b-hf", "--json", *args)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _versions(document: dict[str, Any]) -> dict[str, str]:
    return {k: v["version"] for k, v in document["plan"]["versions"].items() if v is not None}


def test_every_lock_file_records_its_repository_path_and_commit() -> None:
    sources = tomllib.loads((LOCKS / "SOURCES.toml").read_text())["files"]
    files = {str(p.relative_to(LOCKS)) for p in LOCKS.rglob("*") if p.is_file()}
    assert files - {"SOURCES.toml"} == set(sources)
    for entry in sources.values():
        assert entry["repository"].count("/") == 1 and len(entry["commit"]) == 40


@pytest.mark.parametrize("name", ["uv.lock", "requirements.txt"])
def test_a_resolved_lock_gives_every_framework_its_version(name: str) -> None:
    document = _json("--from", str(LOCKS / "open_instruct" / name))
    assert _versions(document) == OPEN_INSTRUCT
    torch = document["plan"]["versions"]["torch"]
    assert torch["source"].startswith(str(LOCKS / "open_instruct" / name))
    assert any("torch 2.10.0, 2.10.0+cu128, 2.10.0+cu130 by platform" in line
               for line in document["assumptions"])  # fmt: skip
    provenance = {p["field"]: p["value"] for p in document["provenance"]}
    assert provenance["versions.transformers"] == "5.4.0"


def test_a_pyproject_gives_its_exact_pins_and_names_its_ranges() -> None:
    # axolotl pins transformers==5.14.1, peft==0.19.1, accelerate==1.13.0, trl==1.8.0 and
    # bitsandbytes==0.49.1 (a marker), ranges torch>=2.11.0,<=2.12.1 and, in its deepspeed
    # extra, deepspeed>=0.18.6,<0.19.0
    document = _json("--from", str(LOCKS / "axolotl" / "pyproject.toml"))
    assert _versions(document) == {
        "transformers": "5.14.1",
        "peft": "0.19.1",
        "accelerate": "1.13.0",
        "trl": "1.8.0",
        "bitsandbytes": "0.49.1",
    }
    ignored = " ".join(document["ignored"])
    assert "torch >=2.11.0,<=2.12.1: a range" in ignored
    assert "optional-dependencies.deepspeed: deepspeed >=0.18.6,<0.19.0" in ignored


def test_ranges_only_set_no_version_and_each_is_named() -> None:
    document = _json("--from", str(LOCKS / "deepspeed_chat" / "requirements.txt"))
    assert _versions(document) == {}
    ignored = document["ignored"]
    for package in ("accelerate >=0.15.0", "torch >=1.12.0", "deepspeed >=0.9.0",
                    "transformers >=4.31.0,!=4.33.2"):  # fmt: skip
        assert any(package in line for line in ignored), package


def test_a_flag_wins_over_the_lock_file_and_a_launch_joins_it(tmp_path: Path) -> None:
    lock = str(LOCKS / "open_instruct" / "uv.lock")
    flagged = _json("--from", lock, "--transformers-version", "4.48.1")
    assert _versions(flagged)["transformers"] == "4.48.1"
    config = tmp_path / "ds.json"
    config.write_text('{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    joined = _json("--from", str(config), lock)
    assert joined["plan"]["stack"] == "deepspeed" and _versions(joined) == OPEN_INSTRUCT


def test_the_version_rules_follow_the_pinned_transformers(tmp_path: Path) -> None:
    # transformers 4.46-4.48's ForCausalLM loss keeps a shifted copy of the logits
    # (memtui.estimator.stacks.hf_model): a pin of 4.48.1 costs more than one of 4.49.0
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, version in ((old, "4.48.1"), (new, "4.49.0")):
        folder.mkdir()
        (folder / "requirements.txt").write_text(f"torch==2.5.1\ntransformers=={version}\n")
    args = ("--stack", "trainer", "--method", "lora")
    older = _json("--from", str(old / "requirements.txt"), *args)
    newer = _json("--from", str(new / "requirements.txt"), *args)
    assert older["per_gpu"]["total"] > newer["per_gpu"]["total"]


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_other_lock_layouts(tmp_path: Path) -> None:
    # the layouts of poetry.lock, pylock.toml (PEP 751) and Pipfile.lock, and pip-compile's
    # hashed lines, each reduced to what the reader looks at
    poetry = _write(tmp_path, "poetry.lock",
                    '[[package]]\nname = "Transformers"\nversion = "4.45.2"\n'
                    '[[package]]\nname = "peft"\nversion = "0.13.2"\n')  # fmt: skip
    assert read_files([poetry], tmp_path).values["versions.transformers"].value == "4.45.2"
    pylock_text = 'lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.6.0"\n'
    pylock = _write(tmp_path, "pylock.toml", pylock_text)
    assert read_files([pylock], tmp_path).values["versions.torch"].value == "2.6.0"
    pipfile = _write(tmp_path, "Pipfile.lock",
                     json.dumps({"default": {"trl": {"version": "==0.12.1"}}}))  # fmt: skip
    assert read_files([pipfile], tmp_path).values["versions.trl"].value == "0.12.1"
    compiled = "deepspeed==0.15.4 \\\n    --hash=sha256:00\ntorch @ https://x/torch.whl\n"
    hashed = _write(tmp_path, "requirements-lock.txt", compiled)
    facts = read_files([hashed], tmp_path)
    assert facts.values["versions.deepspeed"].value == "0.15.4"
    assert any("torch a URL" in line for line in facts.ignored)


def test_platform_pins_of_different_releases_are_not_guessed(tmp_path: Path) -> None:
    lock = _write(tmp_path, "requirements.txt",
                  "torch==2.5.1 ; python_version < '3.13'\n"
                  "torch==2.6.0 ; python_version >= '3.13'\n")  # fmt: skip
    facts = read_files([lock], tmp_path)
    assert "versions.torch" not in facts.values
    assert any("torch 2.5.1, 2.6.0" in line and "not the same release" in line
               for line in facts.ignored)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("uv.lock", "[[package]\n", "not TOML"),
        ("uv.lock", 'package = "x"\n', "'package' must be a list"),
        ("pyproject.toml", "[tool.ruff]\nline-length = 100\n", r"no \[project\] table"),
        ("pyproject.toml", '[project]\ndependencies = "torch"\n', "must be a list"),
        ("Pipfile.lock", "[1]", "not a Pipfile.lock"),
    ],
)
def test_a_broken_lock_file_is_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        read_files([_write(tmp_path, name, text)], tmp_path)
    assert "\n" not in str(caught.value)
