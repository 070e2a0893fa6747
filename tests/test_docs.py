"""docs/architecture.md stays true to the code, and the code cites it.

Every path (`memtui/...`, `tests/...`, `benchmarks/...`, `docs/...`, `themes/...`) written in
backticks in the document must exist, and every dotted name (`memtui.module.function`,
`memtui.module.Class.method`) must be defined where it says, read with `ast` (no import runs).
Every citation of a section in the repository (the document's path, a comma, the section's
title in double quotes) must name a section the document has, and no file may cite the design
notes a clone does not carry.
"""

from __future__ import annotations

import ast
import os
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
# spelt in two pieces so that this file does not cite it
ABSENT_NOTES = "DESIGN" + ".md"

_TICKED = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?:memtui|tests|benchmarks|docs|themes)/[\w./*-]*")
_DOTTED = re.compile(r"memtui(?:\.\w+)+")
_CITATION = re.compile(r'docs/architecture\.md,\s+"([^"]+)"')
_CONTINUATION = re.compile(r"\n\s*(?:#:?|\*(?!/))?[ \t]*")


def ticked(text: str) -> list[str]:
    return _TICKED.findall(text)


def doc_paths(text: str) -> list[str]:
    """Backticked repository paths, without placeholders such as `<name>`."""
    return [t for t in ticked(text) if _PATH.fullmatch(t) and "<" not in t]


def doc_names(text: str) -> list[str]:
    """Backticked dotted names inside memtui."""
    return [t for t in ticked(text) if _DOTTED.fullmatch(t)]


def path_exists(root: Path, text: str) -> bool:
    if "*" in text:
        return any(root.glob(text))
    return (root / text).exists()


@cache
def _defined(path: Path) -> dict[str, ast.AST]:
    """Top-level names a module defines (functions, classes, assignments)."""
    return _names_in(ast.parse(path.read_text(encoding="utf-8")).body)


def _names_in(body: list[ast.stmt]) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def resolve(root: Path, dotted: str) -> str | None:
    """None when `dotted` is defined under `root` (the folder holding `memtui/`), else why not."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:split])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            break
    else:
        return f"{dotted}: no module"
    scope = _defined(module)
    for name in parts[split:]:
        node = scope.get(name)
        if node is None:
            return f"{dotted}: {name} is not defined in {module.relative_to(root)}"
        scope = _names_in(node.body) if isinstance(node, ast.ClassDef) else {}
    return None


def sections(text: str) -> set[str]:
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("##")}


def repository_files() -> list[Path]:
    """Every file of the checkout, without version control, environments and caches."""
    skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        files += [Path(folder) / name for name in names]
    return files


# -- the document -----------------------------------------------------------------------------


def test_the_document_has_its_sections() -> None:
    text = DOC.read_text(encoding="utf-8")
    expected = {
        "Layers",
        "The import contract",
        "Data flow",
        "Where each formula lives",
        "Each training stack",
        "Conventions",
        "How to add",
        "A budget term",
        "A training stack",
        "A stack rule",
        "A config format (import and export)",
        "A telemetry source",
        "A lever",
        "A dashboard panel",
        "A catalog model",
        "A moment of the step (activations)",
    }
    assert expected <= sections(text)


def test_every_path_in_the_document_exists() -> None:
    paths = doc_paths(DOC.read_text(encoding="utf-8"))
    assert len(paths) > 40  # the check has something to check
    assert [p for p in paths if not path_exists(ROOT, p)] == []


def test_every_name_in_the_document_is_defined() -> None:
    names = doc_names(DOC.read_text(encoding="utf-8"))
    assert len(names) > 60
    assert [why for n in names if (why := resolve(ROOT, n))] == []


def test_the_formula_table_and_the_lists_name_real_code() -> None:
    # each stack of STACKS has its row, each registry its step in "How to add"
    from memtui.estimator.stacks import STACKS

    text = DOC.read_text(encoding="utf-8")
    formulas = text.split("## Where each formula lives")[1].split("## Conventions")[0]
    for stack in STACKS.values():
        cls = type(stack)
        assert f"`{cls.__module__}.{cls.__name__}`" in formulas, cls
    how = text.split("## How to add")[1]
    for registry in (
        "memtui.estimator.stacks.STACKS",
        "memtui.plans.formats.FORMATS",
        "memtui.plans.formats.ConfigFormat",
        "memtui.telemetry.registry.SOURCES",
        "memtui.telemetry.source.SourceKind",
        "memtui.commands.source_flags.add_source_arguments",
        "memtui.estimator.levers.levers",
        "memtui.estimator.configs.FAMILIES",
    ):
        assert f"`{registry}`" in how, registry


def test_the_checks_catch_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "memtui" / "pkg").mkdir(parents=True)
    (tmp_path / "memtui" / "pkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "memtui" / "pkg" / "mod.py").write_text(
        "class C:\n    y: int = 0\n    def m(self): ...\ndef f(): ...\n"
    )
    for good in ("memtui.pkg.X", "memtui.pkg.mod.f", "memtui.pkg.mod.C.m", "memtui.pkg.mod.C.y"):
        assert resolve(tmp_path, good) is None, good
    for bad in ("memtui.pkg.mod.g", "memtui.pkg.mod.C.z", "memtui.pkg.mod.f.inner", "memtui.nope"):
        assert resolve(tmp_path, bad) is not None, bad
    assert not path_exists(tmp_path, "memtui/pkg/other.py")
    text = "see `memtui/pkg/mod.py`, `memtui.pkg.mod.f`, `memtui/stacks/<name>.py`, `x.y`"
    assert doc_paths(text) == ["memtui/pkg/mod.py"]
    assert doc_names(text) == ["memtui.pkg.mod.f"]


# -- the code that cites it -------------------------------------------------------------------


def test_every_citation_names_a_section_of_the_document() -> None:
    known = sections(DOC.read_text(encoding="utf-8"))
    cited: dict[str, str] = {}
    for path in repository_files():
        if path.suffix in (".py", ".c", ".md", ".toml", ".tcss"):
            text = path.read_text(encoding="utf-8", errors="replace")
            # a citation wrapped over comment lines (#, #: or a C comment's *) reads as one
            text = " ".join(_CONTINUATION.sub(" ", text).split())
            for section in _CITATION.findall(text):
                cited[section] = str(path.relative_to(ROOT))
    assert len(cited) > 10
    assert {s: where for s, where in cited.items() if s not in known} == {}


def test_no_file_cites_the_absent_design_notes() -> None:
    citing = [
        str(p.relative_to(ROOT))
        for p in repository_files()
        if ABSENT_NOTES.encode() in p.read_bytes()
    ]
    assert citing == []


# what a reader of the repository cannot look up: the tracker's issue numbers, the specifying
# documents by their file names, notes kept outside the repository
_UNTRACEABLE = re.compile(
    r"\b[Ii]ssues? \d+\b|\b[Ss]eeds? 0\d\d\b|seed0\d\d|/work/scratch|research notes"
)


def test_no_file_cites_what_a_reader_cannot_look_up() -> None:
    citing = {}
    for path in repository_files():
        if path.suffix in (".py", ".c", ".md", ".toml", ".tcss") or path.name == "run":
            found = _UNTRACEABLE.search(path.read_text(encoding="utf-8", errors="replace"))
            if found and path != Path(__file__).resolve():
                citing[str(path.relative_to(ROOT))] = found.group()
    assert citing == {}
