"""A launch line's overrides of its config (`tune run ... batch_size=8`, `llamafactory-cli
train cfg.yaml key=value`, `axolotl train cfg.yml --micro-batch-size 2`), on real lines of the
upstream corpus (tests/plans_configs/upstream/, SOURCES.toml beside each: torchtune README.md,
LLaMA-Factory examples/README.md, axolotl docs/cli.qmd).

The override wins over the file (torchtune 0.6 config/_utils.py _merge_yaml_and_cli_args;
LLaMA-Factory hparams/parser.py read_args: OmegaConf.merge(yaml, from_cli); axolotl
cli/utils/args.py add_options_from_config, one click option per config field), so: the
provenance names the line's word, in text and `--json`; `memtui export --from LINE` changes
the override (never the config underneath, where the change would be lost); an export of the
config (`--format`) leaves an overridden key and says which word of the line holds it; the
dashboard's `e` writes the same edit as `memtui export`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import ROOT

from memtui.cli import build_parser, main

UPSTREAM = ROOT / "tests" / "plans_configs" / "upstream"
TORCHTUNE = UPSTREAM / "torchtune"
LINE = "lines/readme_overrides.cmd"  # README.md:278-282, batch_size=8 over the file's 2
CONFIG = "recipes/configs/llama2/7B_lora_single_device.yaml"
OVERRIDE = f"{LINE}:1:batch_size=8 (over batch_size of {CONFIG})"


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU counted
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no accelerate default config


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_provenance_names_the_override_in_text_and_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(TORCHTUNE)
    code, out, err = run(["estimate", "--json", "--from", LINE], capsys)
    assert code == 0, err
    sources = {p["field"]: p["source"] for p in json.loads(out)["provenance"]}
    assert sources["micro_batch"] == OVERRIDE
    # the same value on the line and in the file: still the line's (it decides)
    assert sources["checkpointing"].startswith(f"{LINE}:1:enable_activation_checkpointing=True")
    assert sources["lora_rank"] == f"{CONFIG} (tune run --config):model.lora_rank"
    code, out, err = run(["estimate", "--from", LINE], capsys)
    assert code == 0 and f"micro_batch            = 8  <- {OVERRIDE}" in out


def test_export_changes_the_override_and_leaves_the_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(TORCHTUNE)
    config = (TORCHTUNE / CONFIG).read_bytes()
    code, out, err = run(["export", "--from", LINE, "--micro-batch", "3", "--lora-rank", "16"],
                         capsys)  # fmt: skip
    assert code == 0, err
    line = (TORCHTUNE / LINE).read_text()
    # the override changed where it is; a key the line does not override added as one
    assert out == line.replace("batch_size=8 ", "batch_size=3 ").replace(
        "max_steps_per_epoch=128\n", "max_steps_per_epoch=128 \\\nmodel.lora_rank=16\n"
    )
    assert "-batch_size=8 \\\n+batch_size=3 \\\n" in err and "+model.lora_rank=16\n" in err
    assert (TORCHTUNE / CONFIG).read_bytes() == config
    code, again, err = run(["export", "--from", LINE], capsys)
    assert code == 0 and again == line


def test_a_config_export_leaves_what_the_line_overrides_and_says_where_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(TORCHTUNE)
    argv = ["export", "--from", LINE, "--format", "torchtune", "--micro-batch", "3"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert out == (TORCHTUNE / CONFIG).read_text()  # batch_size: 2 stays: the line's 8 wins
    assert f"not written: micro_batch 3: {OVERRIDE} overrides it" in err
    assert f"`memtui export --from {LINE}` edits the line" in err
    assert "no key of this" not in err
    assert "unchanged (nothing the plan changed is a key of it)" in err


def test_torchtune_s_component_shorthand_and_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`optimizer=bitsandbytes.optim.PagedAdamW8bit` over a block with a `_component_` sets
    that component (the block's other keys stay); `None` is null (read as YAML, the string
    'None' is no sequence length and the import would refuse it)."""
    monkeypatch.chdir(TORCHTUNE)
    line = tmp_path / "run.sh"
    line.write_text(
        f"tune run lora_finetune_single_device --config {TORCHTUNE / CONFIG} "
        "optimizer=bitsandbytes.optim.PagedAdamW8bit tokenizer.max_seq_len=None\n"
    )
    code, out, err = run(["estimate", "--json", "--from", str(line)], capsys)
    assert code == 0, err
    document = json.loads(out)
    assert document["plan"]["optimizer"] == "paged-adamw8bit"
    sources = {p["field"]: p["source"] for p in document["provenance"]}
    assert (
        "optimizer=bitsandbytes.optim.PagedAdamW8bit (over optimizer._component_"
        in (sources["optimizer"])
    )
    assert "tokenizer.max_seq_len is null" in " ".join(document["assumptions"])


def test_an_override_added_by_one_export_is_edited_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """LLaMA-Factory's README line overrides no memory key: the micro-batch is added as
    `per_device_train_batch_size=3`; read back, that word is the value's source, and the
    next export changes it there."""
    folder = UPSTREAM / "llamafactory"
    monkeypatch.chdir(folder)
    model = ["--model", "Qwen/Qwen3-4B"]
    shown = "lines/readme_overrides.cmd"
    code, out, err = run(["export", "--from", shown, *model, "--micro-batch", "3"], capsys)
    assert code == 0, err
    assert out == (folder / shown).read_text().replace(
        "logging_steps=1\n", "logging_steps=1 \\\n    per_device_train_batch_size=3\n"
    )
    edited = tmp_path / "run.sh"
    edited.write_text(out.replace("examples/", f"{folder}/examples/"))
    code, doc, err = run(["estimate", "--json", "--from", str(edited), *model], capsys)
    assert code == 0, err
    sources = {p["field"]: p["source"] for p in json.loads(doc)["provenance"]}
    assert sources["micro_batch"].startswith(f"{edited}:1:per_device_train_batch_size=3 (over")
    code, again, err = run(["export", "--from", str(edited), *model, "--micro-batch", "5"],
                           capsys)  # fmt: skip
    assert code == 0, err
    assert again == edited.read_text().replace("size=3\n", "size=5\n")


def test_axolotl_options_are_edited_in_their_own_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = UPSTREAM / "axolotl"
    monkeypatch.chdir(folder)
    model = ["--model", "meta-llama/Llama-3.2-1B"]
    shown = "lines/cli_overrides.cmd"  # docs/cli.qmd:91-94: --micro-batch-size 2
    code, out, err = run(["export", "--from", shown, *model, "--micro-batch", "4"], capsys)
    assert code == 0, err
    assert out == (folder / shown).read_text().replace("size 2 ", "size 4 ")
    # a boolean field is a click flag pair: `--no-gradient-checkpointing` reads as false, and
    # an export never writes `--gradient-checkpointing False` (axolotl would refuse it)
    line = tmp_path / "run.sh"
    line.write_text(f"axolotl train {folder}/examples/llama-3/lora-1b.yml "
                    "--no-gradient-checkpointing\n")  # fmt: skip
    code, doc, err = run(["estimate", "--json", "--from", str(line), *model], capsys)
    assert code == 0, err
    assert json.loads(doc)["plan"]["checkpointing"] == "none"
    code, out, err = run(["export", "--from", shown, *model, "--checkpointing", "none"], capsys)
    assert code == 0 and out == (folder / shown).read_text()
    assert "--format axolotl` edits it" in err


async def test_the_e_key_edits_the_from_launch_line_as_export_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memtui dashboard --from LINE`: a micro-batch step, then `e` writes the line with its
    `batch_size=` override changed, as `memtui export --from LINE --micro-batch 9` writes
    it, beside the save file; the config is not touched."""
    from ui_helpers import screen_of, wait_for

    from memtui.commands.dashboard import build

    monkeypatch.chdir(TORCHTUNE)
    config = (TORCHTUNE / CONFIG).read_bytes()
    argv = ["dashboard", "--demo", "--from", LINE, "--save", str(tmp_path / "plan.toml")]
    app = build(build_parser().parse_args(argv))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = screen_of(app)
        assert screen.plan.micro_batch == 8  # the line's batch_size=8 over the file's 2
        await pilot.press("plus")
        await wait_for(pilot, lambda: screen.plan.micro_batch == 9)
        await pilot.press("e")
        written = tmp_path / "memtui-launch.cmd"
        await wait_for(pilot, written.exists)
    assert written.read_text() == (TORCHTUNE / LINE).read_text().replace(
        "batch_size=8 ", "batch_size=9 ")  # fmt: skip
    code, out, _ = run(["export", "--from", LINE, "--micro-batch", "9"], capsys)
    assert code == 0 and out == written.read_text()
    assert (TORCHTUNE / CONFIG).read_bytes() == config
