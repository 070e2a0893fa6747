"""The layering contract of docs/architecture.md, enforced on every import in memtui/.

Every `import` and `from ... import` statement (at module level or inside a function, where
lazy imports live) is read with `ast`, so a violation fails here even if no test executes the
line that imports. The checker itself is tested on a small tree that breaks each rule.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memtui"

UI_FRAMEWORKS = ("textual", "rich")
HEAVY = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "deepspeed")

# (layer, modules it must never import). A layer is a dotted prefix of memtui's modules.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "memtui.estimator": (
        *UI_FRAMEWORKS,
        "pynvml",
        *HEAVY,
        "memtui.ui",
        "memtui.commands",
        "memtui.telemetry",
        "memtui.plans",
        "memtui.forensics",
        "memtui.measure",
    ),
    "memtui.plans": (*UI_FRAMEWORKS, "pynvml", *HEAVY, "memtui.ui", "memtui.commands"),
    "memtui.forensics": (
        *UI_FRAMEWORKS,
        "pynvml",
        *HEAVY,
        "memtui.ui",
        "memtui.commands",
        "memtui.telemetry",
    ),
    "memtui.telemetry": (
        *UI_FRAMEWORKS,
        *HEAVY,
        "memtui.ui",
        "memtui.commands",
        "memtui.estimator",
        "memtui.plans",
    ),
    "memtui.ui": ("memtui.commands", *HEAVY),
    "memtui.errors": ("memtui.",),
}
# Modules only one layer may import, whatever the importer.
OWNED: dict[str, str] = {
    "pynvml": "memtui.telemetry",
    **{heavy: "memtui.measure" for heavy in HEAVY},
}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import statement in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            # `from memtui import ui` names the submodule in the alias
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix.rstrip(".") or name.startswith(
        prefix if prefix.endswith(".") else f"{prefix}."
    )


def violations(root: Path) -> list[str]:
    """Every import that breaks the contract, as 'file:line: importer imports module'."""
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        for line, imported in imports_of(path):
            where = f"{path.relative_to(root.parent)}:{line}: {importer} imports {imported}"
            for layer, banned in FORBIDDEN.items():
                if _within(importer, layer) and any(_within(imported, b) for b in banned):
                    found.append(where)
            for owned, owner in OWNED.items():
                if _within(imported, owned) and not _within(importer, owner):
                    found.append(f"{where} (only {owner} may)")
    return sorted(set(found))


def test_memtui_keeps_its_layers() -> None:
    assert violations(PACKAGE) == []


def test_the_checker_catches_each_kind_of_violation(tmp_path: Path) -> None:
    root = tmp_path / "memtui"
    files = {
        "estimator/budget.py": "from textual.app import App\n",
        "estimator/lazy.py": "def f():\n    import memtui.ui.screen\n",
        "telemetry/nvml.py": "import pynvml\nfrom memtui import estimator\n",
        "plans/codec.py": "import pynvml\n",
        "ui/screen.py": "from memtui.commands import dashboard\n",
        "forensics/read.py": "import torch\n",
        "errors.py": "import memtui.estimator\n",
        "measure/step.py": "import torch\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    found = "\n".join(violations(root))
    for expected in (
        "memtui.estimator.budget imports textual",
        "memtui.estimator.lazy imports memtui.ui.screen",
        "memtui.telemetry.nvml imports memtui",  # from memtui import estimator
        "memtui.plans.codec imports pynvml (only memtui.telemetry may)",
        "memtui.ui.screen imports memtui.commands",
        "memtui.forensics.read imports torch",
        "memtui.errors imports memtui.estimator",
    ):
        assert expected in found, (expected, found)
    assert "memtui.telemetry.nvml imports pynvml" not in found
    assert "measure.step" not in found


@pytest.mark.parametrize(
    ("modules", "absent"),
    [
        (
            "memtui.estimator, memtui.plans.memtui_toml, memtui.errors",
            ("textual", "rich", "pynvml", "torch", "memtui.ui", "memtui.telemetry"),
        ),
        ("memtui.telemetry", ("textual", "rich", "torch", "memtui.estimator", "memtui.ui")),
        ("memtui.measure", ("torch", "transformers", "textual")),
    ],
)
def test_importing_a_layer_loads_nothing_it_must_not(modules: str, absent: tuple[str, ...]) -> None:
    # what the AST cannot see: a third-party import that pulls in another (at run time)
    code = (
        f"import sys, importlib\n"
        f"for m in {modules.split(', ')!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in {absent!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
