"""`memtui watch` and the dashboard's flags under hostile input: every run ends,
with exit code 0, 1 or 2, and an error is exactly one line on stderr, never a traceback.

The dashboard's flags are checked before Textual starts, so a bad value ends the process
without a terminal; the values that pass are covered by the UI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT, watch
from fake_nvml.harness import FakeNvml, GiB, gpu

#: (flags, what the one line must name): each a usage error, exit 2.
BAD_WATCH_FLAGS = [
    (("--demo", "--interval", "inf", "--count", "2"), "--interval"),
    (("--demo", "--interval", "nan", "--count", "2"), "--interval"),
    (("--demo", "--interval", "1e-9", "--count", "2"), "--interval"),
    (("--demo", "--interval", "1e300", "--count", "2"), "--interval"),
    (("--demo", "--timeout", "nan", "--once"), "--timeout"),
    (("--demo", "--timeout", "inf", "--once"), "--timeout"),
    (("--demo", "--timeout", "-1", "--once"), "--timeout"),
    (("--demo", "--demo-gpus", "100000", "--once"), "--demo"),
    (("--demo", "--demo-gpus", "0", "--once"), "--demo"),
    (("--demo", "--demo-total-bytes", "1", "--once"), "--demo"),
    (("--demo", "--demo-budget-bytes", "9" * 40, "--once"), "--demo"),
    (("--replay", "x.jsonl", "--speed", "nan"), "--speed"),
    (("--replay", "x.jsonl", "--speed", "inf"), "--speed"),
    (("--prometheus", "http://127.0.0.1:9", "--stale-after", "nan", "--once"), "--stale-after"),
]


def _one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def _memtui(args: list[str] | tuple[str, ...], timeout: float) -> subprocess.CompletedProcess:
    """`python -m memtui ARGS` from the checkout, no stdin (a prompt would hang the test)."""
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("flags", "names"), BAD_WATCH_FLAGS, ids=[" ".join(flags) for flags, _ in BAD_WATCH_FLAGS]
)
def test_bad_watch_flags_are_one_line_exit_2(flags: tuple[str, ...], names: str) -> None:
    out = watch(*flags, timeout=30)
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr)
    assert names in _one_error_line(out)


@pytest.mark.parametrize(
    "flags",
    [
        ("--demo", "--interval", "inf"),
        ("--demo", "--interval", "nan"),
        ("--demo", "--interval", "1e-9"),
        ("--demo", "--timeout", "nan"),
        ("--demo", "--timeout", "inf"),
    ],
    ids=lambda v: " ".join(v),
)
def test_bad_dashboard_flags_are_one_line_exit_2(flags: tuple[str, ...]) -> None:
    out = _memtui(flags, timeout=30)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert flags[1] in _one_error_line(out)


def _trace(tmp_path: Path, time_text: str) -> Path:
    line = {
        "format": 1,
        "hostname": "node7",
        "source": "nvml",
        "state": "ok",
        "devices": [{"index": 0, "uuid": "GPU-0", "memory_total": 80, "memory_used": 40}],
    }
    text = json.dumps(line)[:-1] + f', "time": {time_text}}}\n'
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    return path


@pytest.mark.parametrize("time_text", ["NaN", "Infinity", "-Infinity", "1e20", "-1e20"])
@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_replay_of_a_trace_with_an_impossible_time(
    tmp_path: Path, time_text: str, json_out: bool
) -> None:
    """A time that is not a number is not a snapshot (the line is skipped: exit 1, one line);
    a finite time past what the clock can show still shows its GPUs (exit 0)."""
    trace = _trace(tmp_path, time_text)
    out = watch("--replay", str(trace), "--once", *(("--json",) if json_out else ()), timeout=30)
    assert "Traceback" not in out.stderr, out.stderr
    if "e20" in time_text:
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        if json_out:
            assert json.loads(out.stdout)["time"] == float(time_text)
        else:
            assert "node7" in out.stdout and "GPU" in out.stdout
    else:
        assert out.returncode == 1
        assert "holds no memtui snapshots" in _one_error_line(out)
        if json_out:  # the document says so too, with a real time (not the line's null)
            document = json.loads(out.stdout)
            assert document["state"] == "error" and isinstance(document["time"], float)
        else:
            assert out.stdout == ""


def test_replay_goes_past_a_recorded_failure_and_does_not_prescribe_its_remedy(
    tmp_path: Path,
) -> None:
    """A trace records a driver that was not loaded for one poll on another machine: the
    replay shows it as recorded, without that machine's remedy, and plays on to the end."""
    device = {"index": 0, "uuid": "GPU-0", "memory_total": 80, "memory_used": 40}
    ok = {"format": 1, "hostname": "node7", "source": "nvml", "state": "ok", "devices": [device]}
    failed = {"format": 1, "hostname": "node7", "source": "nvml",
              "state": "driver_not_loaded", "reason": "NVIDIA driver not loaded",
              "remedy": "load it (`sudo modprobe nvidia`) and check `nvidia-smi`"}  # fmt: skip
    lines = [{**ok, "time": 1.0}, {**failed, "time": 2.0}, {**ok, "time": 3.0}]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = watch("--replay", str(trace), "--speed", "0", "--json", timeout=30)
    assert out.returncode == 0, out.stderr
    times = [json.loads(line)["time"] for line in out.stdout.splitlines()]
    assert times[:3] == [1.0, 2.0, 3.0], out.stdout  # then the end of the replay
    table = watch("--replay", str(trace), "--speed", "0", timeout=30)
    assert table.returncode == 0, table.stderr
    assert "recorded" in table.stdout and "NVIDIA driver not loaded" in table.stdout
    assert "modprobe" not in table.stdout + table.stderr


def test_watch_once_into_a_pipe_closed_early_exits_0(tmp_path: Path) -> None:
    """`memtui watch --once | head -2`: the reader leaves after two lines; memtui says
    nothing more and exits 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = f"{sys.executable} -m memtui watch --demo --demo-gpus 64 --once | head -2"
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert len(out.stdout.splitlines()) == 2


def test_only_matching_nothing_is_one_line_on_stderr() -> None:
    out = watch("--demo", "--once", "--only", "99", timeout=30)
    assert out.returncode == 2
    assert "no GPU matches --only 99" in _one_error_line(out)
    assert out.stdout == ""


def test_replay_that_cannot_be_read_is_one_line_on_stderr(tmp_path: Path) -> None:
    trace = tmp_path / "empty.jsonl"
    trace.write_text("")
    out = watch("--replay", str(trace), "--once", timeout=30)
    assert out.returncode == 1
    assert "holds no memtui snapshots" in _one_error_line(out)
    assert out.stdout == ""


def test_a_hostile_command_line_is_escaped_text_in_the_table(fake_nvml: FakeNvml) -> None:
    """Another user's process whose arguments hold a terminal title sequence and markup:
    `watch --once` shows them escaped and literal, and sends no control character."""
    argv = ["sh", "-c", "sleep 60; :", "\x1b]0;pwned\x07", "[bold]x"]
    victim = subprocess.Popen(argv)
    try:
        fake_nvml.write({"gpus": [gpu(0, used=10 * GiB, procs=[(victim.pid, 9 * GiB)])]})
        out = watch("--once", env=fake_nvml.env(), timeout=60)
    finally:
        victim.kill()
        victim.wait()
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "\\x1b]0;pwned\\x07 [bold]x" in out.stdout


def test_a_usage_error_escapes_what_the_user_passed(tmp_path: Path) -> None:
    """A path given on the command line (from a script, a file listing) is echoed in the
    error line escaped, never as a terminal sequence."""
    path = tmp_path / "no" / "\x1b]0;pwned\x07" / "t.jsonl"
    out = watch("--demo", "--once", "--record", str(path), timeout=30)
    assert out.returncode == 2
    line = _one_error_line(out)
    assert "\x1b" not in line and "\\x1b]0;pwned\\x07" in line


# -- `memtui estimate`, `models` and plan files (every other input) ---------------------------


def _files(tmp: Path) -> dict[str, str]:
    """The hostile files, written under `tmp`, by the name the cases use."""
    from memtui.estimator.catalog import CATALOG

    gpt2 = dict(CATALOG["openai-community/gpt2"].config)
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    texts = {
        "deep.json": deep,
        "deep.yaml": "[" * 100_000 + "]" * 100_000,
        "deep.toml": "a = " + "[" * 100_000 + "]" * 100_000,
        "huge_hidden.json": json.dumps({**gpt2, "n_embd": 12 * 10**30}),
        "float_hidden.json": json.dumps({**gpt2, "n_embd": 1e30}),
        "misspelt_hardware.toml": '[model]\nref = "openai-community/gpt2"\n[hardware]\n'
        "gpu_per_node = 4\n",
        "misspelt_overhead.toml": '[model]\nref = "openai-community/gpt2"\n[overhead]\n'
        "cuda_contxt = 1\n",
        "misspelt_model.toml": '[model]\nref = "openai-community/gpt2"\nrefx = 1\n',
        "negative.toml": "[model]\nparameters = -7\n",
        "words.toml": '[model]\nparameters = "seven"\n',
        "huge.toml": "[model]\nparameters = 100000000000000000000000000000\n",
    }
    paths = {}
    for name, text in texts.items():
        path = tmp / name
        path.write_text(text)
        paths[name] = str(path)
    return paths


GPT2 = ("--model", "openai-community/gpt2")
#: (argv, exit code, what the one line on stderr says; None: exit 0 and nothing on stderr).
#: A {name} is a file of `_files`.
HOSTILE_RUNS = [
    (("estimate", "--params", "1e999"), 2, "'1e999' is too large"),
    (("estimate", "--params", "1e400B"), 2, "'1e400B' is too large"),
    (("estimate", "--gpu-memory", "1e999GB"), 2, "'1e999GB' is too large"),
    (("estimate", "--cuda-context", "1e999GB"), 2, "'1e999GB' is too large"),
    (("estimate", "--gpu-memory", "1e200GB"), 2, "gpu_memory: 1e+209 is above"),
    (("estimate", "--nccl-buffers", "1e200GB"), 2, "nccl: 1e+209 is above"),
    (("estimate", *GPT2, "--lora-targets", "q_proj"), 2, "'q_proj' matches no module"),
    (("estimate", "--model", "{deep.json}"), 2, "JSON nested too deeply"),
    (("estimate", "--from", "{deep.json}"), 2, "JSON nested too deeply"),
    (("estimate", "--from", "{deep.yaml}"), 2, "YAML nested too deeply"),
    (("dashboard", "--plan", "{deep.toml}"), 2, "TOML nested too deeply"),
    (("watch", "--replay", "{deep.json}", "--once"), 1, "holds no memtui snapshots"),
    (("estimate", "--params", "0"), 2, "parameters: Input should be greater than 0"),
    (("estimate", "--params", "0.1"), 2, "parameters: Input should be greater than 0"),
    (("estimate", "--model", ""), 2, "--model is empty"),
    (("estimate", "--params", "1e30"), 2, "parameters: 1e+30 is above 1e+14"),
    (("estimate", "--params", "1e14"), 0, None),
    (
        ("estimate", "--model", "{huge_hidden.json}"),
        2,
        "huge_hidden.json: field 'n_embd' must be at most",
    ),
    (("estimate", "--model", "{float_hidden.json}"), 2, "must be an integer, got number"),
    (("estimate", *GPT2, "--tp", "5"), 2, "tp (5) must divide the GPU count (8)"),
    (("estimate", *GPT2, "--gpus", "5", "--tp", "5"), 2, "attention heads (12)"),
    (("estimate", *GPT2, "--tp", "8"), 2, "tp (8) must divide the model's attention heads"),
    (("estimate", *GPT2, "--gpus", "12", "--tp", "12"), 0, None),
    (("estimate", "--gpus", "64", "--tp", "64"), 2, "attention heads (32)"),
    (("estimate", "--method", "lora", "--lora-targets", ",,,"), 2, "no LoRA targets"),
    (
        ("estimate", "--params", "7B", "--method", "lora", "--lora-fraction", "1e-300"),
        2,
        "not one adapter parameter",
    ),
    (
        ("estimate", "--lora-fraction", "0.1", "--method", "full"),
        2,
        "--lora-fraction sizes LoRA adapters, but the method is full",
    ),
    (("estimate", "--offload", "params", "--strategy", "zero3"), 0, None),
    (("estimate", "--offload", "params", "--strategy", "zero2"), 2, "parameter offload needs"),
    (("estimate", "--params", "-7B"), 2, "'-7B' is negative"),
    (("estimate", "--params", "-7"), 2, "'-7' is negative"),
    (("estimate", "--gpu-memory", "-80GB"), 2, "'-80GB' is negative"),
    (("models", "!!!"), 2, "no catalog model matches '!!!'"),
    (("models", "zzzz"), 2, "no catalog model matches 'zzzz'"),
    (("models", "llama 2 7b"), 0, None),
    (("dashboard", "--plan", "{misspelt_hardware.toml}"), 2, "hardware.gpu_per_node"),
    (("dashboard", "--plan", "{misspelt_overhead.toml}"), 2, "overhead.cuda_contxt"),
    (("dashboard", "--plan", "{misspelt_model.toml}"), 2, "[model] has no key 'refx'"),
    (("dashboard", "--plan", "{negative.toml}"), 2, "model.parameters: must be a whole"),
    (("dashboard", "--plan", "{words.toml}"), 2, "model.parameters: must be a whole"),
    (("dashboard", "--plan", "{huge.toml}"), 2, "parameters: 1e+29 is above 1e+14"),
]


@pytest.mark.parametrize(
    ("argv", "code", "says"), HOSTILE_RUNS, ids=[" ".join(argv) for argv, _, _ in HOSTILE_RUNS]
)
def test_every_listed_input_ends_with_0_1_or_2_and_one_line(
    tmp_path: Path, argv: tuple[str, ...], code: int, says: str | None
) -> None:
    files = _files(tmp_path)
    args = [files[a[1:-1]] if a.startswith("{") else a for a in argv]
    out = _memtui(args, timeout=120)
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    if says is None:
        assert out.stderr == ""
    else:
        assert says in _one_error_line(out)


def test_a_theme_file_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    from memtui.ui.themes import load_theme_file

    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"deep\.toml: TOML nested too deeply"):
        load_theme_file(path)


def test_a_prometheus_answer_nested_too_deeply_is_unreadable_not_a_crash() -> None:
    from memtui.telemetry.prometheus import _json

    assert _json(b"[" * 100_000 + b"]" * 100_000) is None
    assert _json(b'{"status": "success"}') == {"status": "success"}
