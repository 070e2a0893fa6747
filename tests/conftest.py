"""Shared fixtures: the fake libnvidia-ml (docs/architecture.md, "Testing without a GPU").

Fixtures, reusable by name from any test module:
- `fake_nvml_lib_dir` (session): directory with the compiled default fake `libnvidia-ml.so.1`.
- `fake_nvml`: a `FakeNvml` (tests/fake_nvml/harness.py) with its own scenario and call log;
  `.write(scenario)`, `.calls()`, `.reset_calls()`, `.lib_dir`, `.env()` for subprocesses.
- `fake_nvml_in_process`: the same, with the real pynvml module pointed at the fake in this
  process (pynvml.nvmlLib set, function-pointer cache reset before and after the test).
- `fake_nvml_factory`: builds a `FakeNvml` for a variant, e.g. `fake_nvml_factory("no_v2")`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_nvml.harness import FakeNvml, build_fake_nvml, reset_pynvml

# No test reaches the real Hugging Face Hub: a model id found nowhere else is asked of a port
# that refuses connections (memtui.plans.hub reads HF_ENDPOINT at call time); the Hub's tests
# point it at their own server (tests/test_hub_resolution.py).
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"


@pytest.fixture(scope="session")
def fake_nvml_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compile the default fake once per session (about a second)."""
    return build_fake_nvml("default", tmp_path_factory.getbasetemp() / "fake-nvml-build")


@pytest.fixture
def fake_nvml_factory(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> Iterator[Callable[[str], FakeNvml]]:
    """Return a function building a `FakeNvml` for a variant ("default" or "no_v2").

    A test may call `.activate_in_process()` on it; pynvml and the environment are restored
    afterwards.
    """

    def make(variant: str = "default") -> FakeNvml:
        lib_dir = build_fake_nvml(variant, tmp_path_factory.getbasetemp() / "fake-nvml-build")
        work = tmp_path / f"fake-nvml-{variant}"
        work.mkdir(exist_ok=True)
        return FakeNvml(lib_dir, work)

    with _restored_pynvml():
        yield make


@pytest.fixture
def fake_nvml(fake_nvml_lib_dir: Path, tmp_path: Path) -> FakeNvml:
    """A fake NVML with an empty node; drive it with `.write(scenario)`."""
    work = tmp_path / "fake-nvml"
    work.mkdir()
    return FakeNvml(fake_nvml_lib_dir, work)


@pytest.fixture
def fake_nvml_in_process(fake_nvml: FakeNvml) -> Iterator[FakeNvml]:
    """`fake_nvml`, loaded into this process for the real pynvml module."""
    with _restored_pynvml():
        fake_nvml.activate_in_process()
        yield fake_nvml


@contextlib.contextmanager
def _restored_pynvml() -> Iterator[None]:
    """Afterwards: pynvml forgets the fake, and FAKE_NVML_* are as before."""
    saved = {k: os.environ.get(k) for k in ("FAKE_NVML_SCENARIO", "FAKE_NVML_CALLS")}
    try:
        yield
    finally:
        reset_pynvml(None)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
