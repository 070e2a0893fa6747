"""Nothing cut mid-word on the lines that carry sentences: the status line and the budget panel
at 80x24, 100x30, 120x40 and 160x50, with Pilot on the real app over the fake libnvidia-ml (a
node of 4 GPUs whose 32 processes are other users', not visible here as in a container), and
the pure pieces under them: the summary of unrecognised processes and the word fitting."""

from __future__ import annotations

from typing import Any

import pytest
from fake_nvml.harness import GiB, gpu
from rich.console import Console
from rich.text import Text
from ui_helpers import region_text, screen_of, wait_for

from memtui.cli import build_parser
from memtui.commands import dashboard
from memtui.plans.attach import SUMMARY_PIDS, Found, Unread
from memtui.ui.widgets.budget_compare import BudgetCompare
from memtui.ui.widgets.status_line import StatusLine
from memtui.ui.widgets.word_fit import MORE, WordFit, fit_lines

GPUS, PER_GPU = 4, 8
PIDS = [10_000_000 + 100 * i + p for i in range(GPUS) for p in range(PER_GPU)]
#: What the status line says of them, whatever the width (attach.py's reason for a PID that
#: psutil cannot see).
REASON = "not visible here (another PID namespace, e.g. a container)"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _words_whole(shown: str, said: str) -> list[str]:
    """The words on screen that are not whole words of `said` (a last word may end in "…")."""
    words = set(said.split())
    return [w for w in shown.split() if w.removesuffix(MORE) not in words]


def _inside(app: Any, widget: Any) -> str:
    """The text inside a widget's border and padding."""
    region = widget.content_region
    lines = region_text(app, app.screen).split("\n")[region.y : region.bottom]
    return "\n".join(line[region.x : region.right] for line in lines)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40), (160, 50)])
async def test_no_line_is_cut_mid_word_with_many_unrecognised_processes(
    fake_nvml_in_process: Any, size: tuple[int, int]
) -> None:
    """The status line names the reason, the count and the first PIDs (not all 32: the
    process table lists them); what two lines cannot hold ends after a whole word with "…".
    The budget panel's first line wraps at a word instead of ending "(j: attach,…"."""
    fake_nvml_in_process.write(
        {
            "gpus": [
                gpu(i, used=40 * GiB, procs=[(pid, 5 * GiB) for pid in PIDS[i * 8 : i * 8 + 8]])
                for i in range(GPUS)
            ]
        }
    )
    app = dashboard.build(build_parser().parse_args(["dashboard"]))
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.jobs.found is not None and screen.report is not None)
        await pilot.pause()
        status = screen.query_one(StatusLine)
        fit = status.content
        assert isinstance(fit, WordFit) and fit.lines == 2  # a note: two lines at most
        said, shown = fit.text.plain, region_text(app, status)
        assert f"{REASON}: {len(PIDS)} processes, pid 10000000, 10000001, 10000002 and" in said
        assert str(PIDS[-1]) not in said  # a count, not every PID
        assert status.region.height == 2
        assert _words_whole(shown, said) == []
        if size[0] >= 120:
            assert _flat(shown) == _flat(said)  # all of it fits
        else:
            assert shown.rstrip().endswith(MORE) and "no training job recognised" in _flat(shown)

        panel = screen.query_one(BudgetCompare)
        inside = _inside(app, panel)
        assert MORE not in inside
        if screen.has_class("-narrow"):
            assert "job's budget: none, capacity only · what-if" in _flat(inside)
        else:
            assert "job's budget: none, capacity only (j: attach, b: promote)" in _flat(inside)
            assert "per GPU" in inside and "headroom" in inside  # the table under it whole


def test_the_summary_counts_the_processes_and_names_the_first_few() -> None:
    many = Unread(REASON, tuple(PIDS))
    found = Found((), (many.line(),), (many,))
    assert found.notes == (f"pid {','.join(map(str, PIDS))}: {REASON}",)  # the CLI's: all
    listed = ", ".join(map(str, PIDS[:SUMMARY_PIDS]))
    more = len(PIDS) - SUMMARY_PIDS
    assert found.summary == (
        f"no training job recognised: {REASON}: 32 processes, pid {listed} and {more} more"
    )
    few = Unread(REASON, (5150, 5151))
    assert Found((), (few.line(),), (few,)).summary == (
        f"no training job recognised: pid 5150,5151: {REASON}"
    )
    # a note naming no PID (the look timed out) is said as it is
    assert Found((), ("reading the GPU processes timed out",)).summary.endswith("timed out")


@pytest.mark.parametrize("width", [12, 20, 30, 46, 60])
def test_fitted_text_is_cut_only_between_words(width: int) -> None:
    said = "job's budget: none, capacity only (j: attach, b: promote)"
    console = Console(width=width)
    for lines in (1, 2):
        fitted = [line.plain.rstrip() for line in fit_lines(console, Text(said), width, lines)]
        assert len(fitted) <= lines
        assert all(len(line) <= width for line in fitted)
        assert _words_whole("\n".join(fitted), said) == []
        if len(said) <= width * lines - lines:
            assert _flat("\n".join(fitted)) == said
        else:
            assert fitted[-1].endswith(MORE)


def test_a_word_wider_than_the_line_is_folded_the_only_cut_inside_a_word() -> None:
    fitted = fit_lines(Console(width=8), Text("a1234567890"), 8, 1)
    assert [line.plain for line in fitted] == ["a123456" + MORE]
