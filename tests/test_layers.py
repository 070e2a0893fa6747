"""The layering contract of docs/architecture.md, enforced on every import in memtui/.

Every `import` and `from ... import` statement (at module level, inside a function, where
lazy imports live, or under TYPE_CHECKING) is read with `ast`, so a violation fails here even
if no test executes the line that imports. The same imports make the module graph, which must
have no cycle. The checkers themselves are tested on small trees that break each rule.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memtui"

UI_FRAMEWORKS = ("textual", "rich")
HEAVY = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "bitsandbytes",
    "deepspeed",
    "trl",
    "datasets",
)

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
    "memtui.text": ("memtui.",),
    # the one file reader: a leaf under every layer (it raises errors, names files safely)
    "memtui.bounded": (
        *UI_FRAMEWORKS,
        *(f"memtui.{layer}" for layer in ("estimator", "plans", "telemetry", "forensics")),
        *(f"memtui.{layer}" for layer in ("ui", "commands", "measure", "cli")),
    ),
}
# Modules only one layer may import, whatever the importer.
OWNED: dict[str, str] = {
    "pynvml": "memtui.telemetry",
    **{heavy: "memtui.measure" for heavy in HEAVY},
    # the network half of huggingface_hub: only the Hub client asks the Hub (the estimator
    # reads the local cache with try_to_load_from_cache)
    **{
        f"huggingface_hub.{name}": "memtui.plans.hub"
        for name in ("hf_hub_download", "get_hf_file_metadata", "snapshot_download", "HfApi")
    },
}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) for every import statement in the file: the names a `from
    module import` takes (none for `import module`); relative modules resolved."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # `from ..x import y`: from the package `level - 1` levels up
                parent = package.rsplit(".", node.level - 1)[0]
                module = f"{parent}.{module}" if module else parent
            found.append((node.lineno, module, tuple(a.name for a in node.names)))
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
        for line, module, names in imports_of(path, root):
            # `from memtui import ui` names the submodule in the alias
            for imported in (module, *(f"{module}.{n}" for n in names)):
                where = f"{path.relative_to(root.parent)}:{line}: {importer} imports {imported}"
                for layer, banned in FORBIDDEN.items():
                    if _within(importer, layer) and any(_within(imported, b) for b in banned):
                        found.append(where)
                for owned, owner in OWNED.items():
                    if _within(imported, owned) and not _within(importer, owner):
                        found.append(f"{where} (only {owner} may)")
    return sorted(set(found))


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` and the package's modules it imports. `from a
    import b` imports the submodule a.b when there is one, else the module a (whose names
    are taken); a package's parents are not counted, as in `import a.b`."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        imported = set()
        for _, module, names in imports_of(path, root):
            subs = {f"{module}.{n}" for n in names} & modules.keys()
            imported |= subs
            if len(subs) < len(names) or not names:
                imported.add(module)
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def _shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The fewest modules leading from `start` back to it (breadth first), or None."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for following in sorted(graph[node]):
            if following == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if following not in came_from:
                came_from[following] = node
                queue.append(following)
    return None


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every module's shortest import cycle, as 'a -> b -> a' from its first name in order;
    one line per distinct cycle, so each module on a cycle is named."""
    found = set()
    for start in graph:
        path = _shortest_cycle(graph, start)
        if path is not None:
            first = path.index(min(path))
            path = path[first:] + path[:first]
            found.add(" -> ".join([*path, path[0]]))
    return sorted(found)


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
        "estimator/relative.py": "from ..ui import screen\n",
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
        "memtui.estimator.relative imports memtui.ui.screen",
    ):
        assert expected in found, (expected, found)
    assert "memtui.telemetry.nvml imports pynvml" not in found
    assert "measure.step" not in found


def test_memtui_has_no_import_cycle() -> None:
    assert cycles(module_graph(PACKAGE)) == []


def test_the_cycle_checker_finds_each_cycle(tmp_path: Path) -> None:
    root = tmp_path / "memtui"
    files = {
        # plan -> stacks (lazy) -> stacks.base (a submodule in a from-import) -> plan
        "estimator/plan.py": "def check():\n    from memtui.estimator.stacks import STACKS\n",
        "estimator/stacks/__init__.py": "from memtui.estimator.stacks import base\n",
        "estimator/stacks/base.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from memtui.estimator.plan import Plan\n"
        ),
        # imports both, imported by none: on no cycle
        "estimator/budget.py": (
            "import memtui.estimator.stacks\nfrom memtui.estimator import plan\n"
        ),
        # relative imports; `from memtui.ui import keys` imports the submodule alone
        "ui/screen.py": "from . import keys\n",
        "ui/keys.py": "from .screen import Screen\nfrom ..estimator.budget import estimate\n",
        # a name from a package imports its __init__
        "ui/__init__.py": "def __getattr__(name):\n    from memtui.ui import app\n",
        "ui/app.py": "from memtui.ui import make_app\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert cycles(module_graph(root)) == [
        "memtui.estimator.plan -> memtui.estimator.stacks -> memtui.estimator.stacks.base "
        "-> memtui.estimator.plan",
        "memtui.ui -> memtui.ui.app -> memtui.ui",
        "memtui.ui.keys -> memtui.ui.screen -> memtui.ui.keys",
    ]
    assert "memtui.estimator.budget" in module_graph(root)["memtui.ui.keys"]


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
