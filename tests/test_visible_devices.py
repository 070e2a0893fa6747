"""A launch line's own CUDA_VISIBLE_DEVICES narrows the GPU count NVML gives for a launcher that
starts one process per visible GPU: `accelerate launch` without num_processes
(accelerate commands/launch.py `_validate_launch_command`: num_processes from
torch.cuda.device_count(), which honours CUDA_VISIBLE_DEVICES), torchrun's `--nproc_per_node
gpu` (torch distributed/run.py `determine_local_world_size`). The node is the fake NVML library
(tests/fake_nvml) loaded into the real pynvml.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_nvml.harness import FakeNvml, GiB, gpu

from memtui.cli import build_parser
from memtui.commands.plan_flags import plan_and_import


def gpus_planned(line: str, tmp_path: Path) -> int:
    script = tmp_path / "run.sh"
    script.write_text(line + "\n")
    args = build_parser().parse_args(["estimate", "--params", "7B", "--from", str(script)])
    plan, found = plan_and_import(args, None)
    assert found is not None
    return int(plan.hardware.gpus_per_node)


@pytest.fixture
def four_gpus(fake_nvml_in_process: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml_in_process.write({"gpus": [gpu(i, used=1 * GiB) for i in range(4)]})
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HF_HOME", "/nonexistent-memtui-test")  # no accelerate default config


@pytest.mark.usefixtures("four_gpus")
@pytest.mark.parametrize(
    ("line", "gpus"),
    [
        ("accelerate launch train.py", 4),  # every GPU of the node
        ("CUDA_VISIBLE_DEVICES=0,1 accelerate launch train.py", 2),
        ("CUDA_VISIBLE_DEVICES=2 torchrun --nproc_per_node gpu train.py", 1),
        # CUDA stops at the first entry it cannot use: "1,-1,2" shows one device
        ("CUDA_VISIBLE_DEVICES=1,-1,2 accelerate launch train.py", 1),
    ],
)
def test_the_lines_visible_devices_set_the_count(line: str, gpus: int, tmp_path: Path) -> None:
    assert gpus_planned(line, tmp_path) == gpus


@pytest.mark.usefixtures("four_gpus")
def test_a_script_export_narrows_the_count(tmp_path: Path) -> None:
    line = "export CUDA_VISIBLE_DEVICES=0,1,2\naccelerate launch train.py"
    assert gpus_planned(line, tmp_path) == 3
