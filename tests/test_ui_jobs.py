"""The dashboard's attach, export and save work without a screen: what the status line is told
about the jobs, and the messages each thread worker posts (the screen handles them; a worker
never touches it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message
from ui_helpers import demo_source, llama_plan

from memtui.telemetry import ClusterSnapshot, DeviceSnapshot, NodeSnapshot, ProcessSnapshot
from memtui.telemetry.nvml import NVML_INFO
from memtui.ui.alerts import Notice
from memtui.ui.job_keys import Export, JobWatch, export_of, write_export, write_plan
from memtui.ui.messages import ExportWritten, PlanSaved, Work, WorkFailed


class _Nvml:
    """Stands for the live NVML source: the watch asks only which kind of source it is."""

    name = "nvml"
    info = NVML_INFO

    def poll(self) -> ClusterSnapshot:
        raise AssertionError("not polled here")

    def close(self) -> None:
        pass


def _with_pids(*pids: int) -> ClusterSnapshot:
    device = DeviceSnapshot(
        index=0,
        uuid="GPU-0",
        memory_total=80 * 2**30,
        memory_used=2**30,
        processes=tuple(ProcessSnapshot(pid=p) for p in pids),
    )
    return ClusterSnapshot.of_node(NodeSnapshot(time=1.0, hostname="n", devices=(device,)))


def test_jobs_are_looked_for_when_the_gpu_processes_of_this_machine_change() -> None:
    watch = JobWatch()
    assert watch.to_look_for(_with_pids(11), None) is None  # plan-only
    # a demo's PIDs are no processes of this machine
    plan = llama_plan()
    demo = demo_source(plan)
    assert watch.to_look_for(demo.poll(), demo) is None
    assert watch.to_look_for(_with_pids(11, 12), _Nvml()) == {11: {"0"}, 12: {"0"}}
    assert watch.to_look_for(_with_pids(12, 11), _Nvml()) is None  # the same processes
    assert watch.to_look_for(_with_pids(11), _Nvml()) == {11: {"0"}}


def test_attach_before_any_job_was_seen_says_why() -> None:
    notice = JobWatch().first_job()
    assert notice == Notice("no GPU processes seen yet", title="Attach", severity="warning")


def test_a_stack_without_a_config_format_is_a_warning_not_an_export() -> None:
    notice = export_of(llama_plan().evolve(stack="generic"))
    assert isinstance(notice, Notice)
    assert (notice.title, notice.severity) == ("Export", "warning")
    assert "generic" in notice.message


def test_an_export_is_written_under_a_new_name_and_posted(tmp_path: Path) -> None:
    posted: list[Message] = []
    export = Export("deepspeed", ".json", "{}\n")
    write_export(posted.append, export, tmp_path)
    write_export(posted.append, export, tmp_path)
    assert [type(m) for m in posted] == [ExportWritten, ExportWritten]
    paths = [m.path for m in posted if isinstance(m, ExportWritten)]
    assert paths == [tmp_path / "memtui-deepspeed.json", tmp_path / "memtui-deepspeed-2.json"]
    assert all(p.read_text() == "{}\n" and p.is_absolute() for p in paths)


def test_a_write_that_fails_posts_the_reason(tmp_path: Path) -> None:
    posted: list[Message] = []
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    write_export(posted.append, Export("deepspeed", ".json", "{}"), not_a_folder)
    write_plan(posted.append, llama_plan(), not_a_folder / "plan.toml")
    assert [m.work for m in posted if isinstance(m, WorkFailed)] == [Work.EXPORT, Work.SAVE]
    assert [m.reason.split(" ", 2)[:2] for m in posted if isinstance(m, WorkFailed)] == [
        ["cannot", "write"],
        ["cannot", "save"],
    ]


def test_a_saved_plan_is_posted_with_its_whole_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    posted: list[Message] = []
    write_plan(posted.append, llama_plan(), Path("plan.toml"))
    assert [type(m) for m in posted] == [PlanSaved]
    saved = posted[0]
    assert isinstance(saved, PlanSaved) and saved.path == (tmp_path / "plan.toml").resolve()
    assert saved.path.exists()
