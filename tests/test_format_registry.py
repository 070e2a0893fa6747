"""A config format is its codec and one `ConfigFormat` in `memtui.plans.formats.FORMATS`.

A throwaway format, registered for one test only, reaches `memtui estimate --from`,
`memtui export --format`, every list of formats a user reads (the `--from` help, the export
help and choices, the error for a file memtui does not know, the dashboard's export key) with
no other edit: a list written by hand anywhere fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import llama_plan, wait_for

from memtui.cli import main
from memtui.estimator.choices import StackName
from memtui.estimator.plan import Plan
from memtui.plans.facts import Document, Facts, as_int
from memtui.plans.formats import FORMATS, Codec, ConfigFormat, spoken
from memtui.ui import make_app

CODEC = "throwaway_codec"
THROWAWAY = ConfigFormat(
    "throwaway",
    "Throwaway YAML",
    CODEC,
    (".throwaway",),
    exports=True,
    launches=(StackName.litgpt,),
)
KEYS = {"micro_batch": "throwaway_micro_batch", "grad_accum": "throwaway_accumulation"}


def _detect(data: dict[str, Any]) -> bool:
    return KEYS["micro_batch"] in data


def _read(doc: Document) -> Facts:
    facts = doc.facts()
    for field, key in KEYS.items():
        if key in doc.data:
            facts.state(field, as_int(facts, key, doc.data[key]), key)
    return facts


def _export(plan: Plan) -> str:
    return "".join(f"{key}: {getattr(plan, field)}\n" for field, key in KEYS.items())


@pytest.fixture
def throwaway(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConfigFormat]:
    """THROWAWAY registered (last in detection order), its codec importable, for one test."""
    codec = types.ModuleType(CODEC)
    codec.__dict__.update(detect=_detect, read=_read, export=_export)
    monkeypatch.setitem(sys.modules, CODEC, codec)
    with FORMATS.extended(THROWAWAY) as fmt:
        yield fmt


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps its lines


def test_a_file_of_a_registered_format_imports_through_from(
    throwaway: ConfigFormat, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.throwaway"
    job.write_text("throwaway_micro_batch: 3\nthrowaway_accumulation: 5\n")
    code, out, err = _run(capsys, "estimate", "--json", "--from", str(job))
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert (doc["plan"]["micro_batch"], doc["plan"]["grad_accum"]) == (3, 5)
    sources = {p["field"]: p["source"] for p in doc["provenance"]}
    assert sources["micro_batch"] == f"{job}:throwaway_micro_batch"


def test_export_offers_it_and_its_file_reads_back(
    throwaway: ConfigFormat, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / f"out{throwaway.suffix}"
    code, out, err = _run(capsys, "export", "--format", "throwaway", "--micro-batch", "6",
                          "--grad-accum", "2", "-o", str(target))  # fmt: skip
    assert (code, err) == (0, "")
    assert "throwaway config" in out
    code, out, _ = _run(capsys, "estimate", "--json", "--from", str(target))
    assert code == 0
    plan = json.loads(out)["plan"]
    assert (plan["micro_batch"], plan["grad_accum"]) == (6, 2)


def test_every_list_of_formats_names_it(
    throwaway: ConfigFormat, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "Throwaway YAML or a launch script" in _help(capsys, "estimate")
    exporting = _help(capsys, "export")
    assert "trainer-args,throwaway}" in exporting  # --format's choices
    assert "axolotl YAML, TrainingArguments JSON or Throwaway YAML config" in _help(capsys)
    other = tmp_path / "other.yaml"
    other.write_text("name: my-run\n")
    code, _, err = _run(capsys, "estimate", "--from", str(other))
    assert code == 2
    assert (
        "not a config memtui reads (" in err and "TrainingArguments JSON or Throwaway YAML)" in err
    )


async def test_the_dashboard_exports_a_stack_launched_with_it(
    throwaway: ConfigFormat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    plan = llama_plan().evolve(stack=StackName.litgpt, strategy="ddp", precision="bf16",
                               loss="chunked", micro_batch=2)  # fmt: skip
    app = make_app(plan, None, save_path=tmp_path / "plan.toml")
    monkeypatch.setattr(app, "notify", lambda message, **_: said.append(str(message)))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("e")
        written = tmp_path / "memtui-throwaway.throwaway"
        await wait_for(pilot, written.exists)
        assert written.read_text().startswith("throwaway_micro_batch: 2\n")
    generic = make_app(plan.evolve(stack=StackName.generic), None, save_path=tmp_path / "p.toml")
    monkeypatch.setattr(generic, "notify", lambda message, **_: said.append(str(message)))
    async with generic.run_test(size=(160, 40)) as pilot:
        await pilot.press("e")
        await wait_for(pilot, lambda: any("no config format" in s for s in said))
    assert any(s.endswith("choose torchtune, fsdp2, fsdp1, deepspeed, trainer or litgpt")
               for s in said), said  # fmt: skip


def test_the_registry_is_restored_after_the_block() -> None:
    before = list(FORMATS)
    with pytest.raises(RuntimeError), FORMATS.extended(THROWAWAY, at=0):
        assert next(iter(FORMATS)) is THROWAWAY  # first in detection order
        assert FORMATS["throwaway"] is THROWAWAY
        assert FORMATS.launched_with(StackName.litgpt) is THROWAWAY
        raise RuntimeError
    assert list(FORMATS) == before
    assert FORMATS.launched_with(StackName.litgpt) is None
    with pytest.raises(KeyError):
        FORMATS["throwaway"]


def test_every_registered_codec_has_what_its_entry_says() -> None:
    import importlib

    for fmt in FORMATS:
        codec: Codec = importlib.import_module(fmt.codec)  # type: ignore[assignment]
        assert callable(codec.detect) and callable(codec.read), fmt.name
        assert callable(getattr(codec, "export", None)) == fmt.exports, fmt.name
        assert fmt.suffixes and all(s.startswith(".") and s.islower() for s in fmt.suffixes)
    names = [f.name for f in FORMATS]
    assert len(set(names)) == len(names)
    launched = [stack for f in FORMATS for stack in f.launches]
    assert len(set(launched)) == len(launched)  # one format per stack


def test_the_registry_imports_no_codec() -> None:
    # the CLI builds its parsers (help, choices) from FORMATS on every run
    codecs = [f.codec for f in FORMATS]
    code = (
        "import sys\nimport memtui.plans.formats\n"
        f"print(sorted(m for m in {[*codecs, 'yaml', 'memtui.plans.registry']!r}"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_spoken_lists() -> None:
    assert spoken(["a"]) == "a"
    assert spoken(["a", "b"]) == "a or b"
    assert spoken(iter(["a", "b", "c"])) == "a, b or c"
