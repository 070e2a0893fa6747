"""A budget term is one declaration: a throwaway term, declared for one test in a temporary
registry (memtui.estimator.terms.declared), reaches the budget, `memtui estimate --json`, the
theme files and the dashboard's legend and bars, with no other file edited. Every check fails
if a consumer keeps its own list of terms instead of reading the declarations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ui_helpers import colours_in, llama_plan, text_of

from memtui.cli import main
from memtui.estimator import Plan, TermKind, estimate
from memtui.estimator.terms import Books, Declaration, declared
from memtui.ui import make_app
from memtui.ui.themes import load_theme_file, variable_defaults
from memtui.ui.units import num
from memtui.ui.widgets.gpu_panel import GpuPanel

REPO = Path(__file__).resolve().parent.parent
DARK, LIGHT = "#ff00ff", "#aa00aa"
SOURCE = "a throwaway term of tests/test_term_registry.py"
MODEL = ["--model", "meta-llama/Llama-2-7b-hf"]


def scratch_bytes(b: Books) -> int:
    """2.5 MB per token of the sequence: read from the books like any term (10.24 GB at
    s = 4096, wide enough to show on a bar)."""
    return 2_500_000 * b.plan.seq_len


@contextmanager
def scratch() -> Iterator[TermKind]:
    """The term "scratch" while the block runs; the registry is as it was afterwards."""
    before = list(TermKind)
    declaration = Declaration(
        "Scratch pad", "scr", dark=DARK, light=LIGHT, source=SOURCE, bytes=scratch_bytes
    )
    with declared("scratch", declaration) as kind:
        assert list(TermKind) == [*before, kind]
        yield kind
    assert list(TermKind) == before  # no leak into the next test


def test_the_registry_is_restored_and_a_term_is_declared_once() -> None:
    with scratch() as kind:
        assert TermKind("scratch") is kind and kind == "scratch"
        assert (kind.label, kind.short, kind.theme_variable) == (
            "Scratch pad",
            "scr",
            "term-scratch",
        )
        with pytest.raises(ValueError, match="declared already"):
            declared(
                "scratch", Declaration("x", "x", dark=DARK, source="", bytes=scratch_bytes)
            ).__enter__()
    with pytest.raises(ValueError, match="not a valid TermKind"):
        TermKind("scratch")


def test_a_declared_term_reaches_the_budget() -> None:
    plan = llama_plan()
    before = estimate(plan).budget
    with scratch() as kind:
        after = estimate(plan).budget
        expected = 2_500_000 * plan.seq_len
        assert after.term("scratch") == after.term(kind) == expected
        assert [t.key for t in after.terms] == [*(t.key for t in before.terms), kind]
        assert after.terms[-1].source == SOURCE  # no stack explains it: its declaration's source
        assert after.total == sum(t.bytes for t in after.terms)
        # held in the allocator (the default): the runtime's figures are computed around it
        assert after.allocated == before.allocated + expected
        assert after.total > before.total + expected  # the allocator's reserve grows with it
        for t in before.terms:
            if t.key is not TermKind.overhead:
                assert after.term(t.key) == t.bytes
        with pytest.raises(ValueError):
            after.term("misspelt")
    with pytest.raises(ValueError):  # gone with the block
        estimate(plan).budget.term("scratch")


def test_a_term_outside_the_allocator_reads_the_runtime_and_one_inside_cannot() -> None:
    plan = Plan(model=llama_plan().model)
    outside = Declaration(
        "Beside", "bsd", dark=DARK, source=SOURCE, allocated=False,
        bytes=lambda b: b.runtime.parts[0].bytes,  # the cuBLAS workspace, once more
    )  # fmt: skip
    before = estimate(plan).budget
    with declared("beside", outside):
        report = estimate(plan)
        assert report.budget.term("beside") == report.runtime[0].bytes > 0
    # outside the allocator: the runtime's figures do not count it, the total does
    assert report.budget.allocated == before.allocated
    assert report.budget.total == before.total + report.runtime[0].bytes
    inside = Declaration("Inside", "ins", dark=DARK, source=SOURCE, bytes=lambda b: b.runtime.total)
    with declared("inside", inside), pytest.raises(LookupError, match="computed from them"):
        estimate(plan)


def test_a_declared_term_reaches_estimate_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", *MODEL, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    with scratch():
        assert main(["estimate", *MODEL, "--json"]) == 0
        after = json.loads(capsys.readouterr().out)
    expected = 2_500_000 * before["plan"]["seq_len"]
    terms = [k for k in before["per_gpu"] if k not in ("static", "allocated", "reserved", "total")]
    assert list(after["per_gpu"]) == [*terms, "scratch", "static", "allocated", "reserved", "total"]
    assert after["per_gpu"]["scratch"] == expected
    assert after["sources"]["scratch"] == SOURCE
    assert after["per_gpu"]["total"] == sum(after["per_gpu"][k] for k in [*terms, "scratch"])


def test_a_declared_term_has_a_theme_variable(tmp_path: Path) -> None:
    theme = tmp_path / "mine.toml"
    theme.write_text('name = "mine"\nprimary = "#fff"\n[variables]\nterm-scratch = "#123456"\n')
    with scratch():
        assert variable_defaults(dark=True)["term-scratch"] == DARK
        assert variable_defaults(dark=False)["term-scratch"] == LIGHT
        loaded = load_theme_file(theme).to_theme()
        assert loaded.variables["term-scratch"] == "#123456"  # a theme file may override it
        assert load_theme_file(REPO / "themes" / "light.toml").to_theme().variables[
            "term-scratch"
        ] == LIGHT  # fmt: skip
    with pytest.raises(ValueError, match="unknown variable 'term-scratch'"):
        load_theme_file(theme)


async def test_a_declared_term_reaches_the_dashboard_legend_and_bar() -> None:
    with scratch():
        plan = llama_plan()
        expected = num(2_500_000 * plan.seq_len, "GB")
        app = make_app(plan, plan_only_reason="no NVML here", theme="memtui-dark")
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            panel = app.screen.query_one(GpuPanel)
            legend = panel.query_one("#legend")
            region = legend.content_region
            shown = "\n".join(
                line[region.x : region.right]
                for line in text_of(app).split("\n")[region.y : region.bottom]
            )
            assert f"scratch pad {expected}" in shown or f"scr {expected}" in shown, shown
            assert DARK in colours_in(app, legend)
            assert DARK in colours_in(app, panel.query_one("#plan-row"))
            await pilot.press("t")  # the light theme: the declaration's light colour
            await pilot.pause()
            await pilot.pause()
            assert app.theme == "memtui-light"
            assert LIGHT in colours_in(app, legend) and DARK not in colours_in(app, legend)
