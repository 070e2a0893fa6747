"""The error band on every verdict: data computed from benchmarks/published.py, shipped in the
package, and the verdict it gives (FITS only when the top of the band fits)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path

from memtui.cli import main
from memtui.estimator import Method, StackName
from memtui.estimator.error_band import band_for

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("--params", "7B", "--gpus", "1", "--strategy", "ddp", "--precision", "bf16",
         "--method", "lora", "--stack", "torchtune", "--overhead", "none")  # fmt: skip


def run_json(*flags: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["estimate", *flags, "--json"]) == 0
    return json.loads(out.getvalue())


def test_the_shipped_band_is_what_the_published_benchmark_gives_now():
    # regenerated from benchmarks/published.py: a change of the estimator or of the runs that
    # moves a residual makes the shipped data stale (python benchmarks/error_band.py)
    spec = importlib.util.spec_from_file_location("error_band", ROOT / "benchmarks/error_band.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = ROOT / "memtui" / "estimator" / "data" / "error_band.json"
    assert shipped.read_text(encoding="utf-8") == module.text()


def test_a_plan_gets_the_band_of_the_runs_of_its_stack_and_method():
    band = band_for(StackName.torchtune, Method.lora)
    assert band is not None and band.runs_of == "torchtune lora"
    assert band.low <= band.high
    # no published run of the fsdp2 stack: every run's band
    every = band_for(StackName.fsdp2, Method.full)
    assert every is not None and every.runs_of == "every published run"
    assert every.n >= band.n


def test_the_verdict_is_fits_only_when_the_top_of_the_band_fits():
    doc = run_json(*FLAGS)
    band, total = doc["band"], doc["per_gpu"]["total"]
    top = round(total / (1 + min(band["low"], 0)))
    assert band["runs_of"] == "torchtune lora" and band["low"] < 0
    inside = run_json(*FLAGS, "--gpu-memory", f"{(total + top) // 2}B")
    assert inside["fits"] is True and inside["verdict"] == "MAY NOT FIT"
    above = run_json(*FLAGS, "--gpu-memory", f"{top + 1}B")
    assert above["verdict"] == "FITS"
    below = run_json(*FLAGS, "--gpu-memory", f"{total - 1}B")
    assert below["verdict"] == "DOES NOT FIT"


def test_the_text_verdict_says_the_band():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["estimate", *FLAGS])
    text = " ".join(out.getvalue().split())
    assert "published runs of this kind (torchtune lora):" in text
