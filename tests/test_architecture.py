"""The house keeps its shape (ARCHITECTURE.md): the layers of pyproject's import-linter
contracts, no import cycle (type-hint imports included), no function above complexity 15
(radon's count), no module above 300 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "profile_all"
BIN = Path(sys.executable).parent


def test_the_layers_hold():
    done = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Groups of modules that import one another (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle():
    """Imports made for type hints alone (under TYPE_CHECKING) included: a module that
    names another's type depends on it as much as one that calls it."""
    graph = grimp.build_graph("profile_all", exclude_type_checking_imports=False)
    assert _cycles(graph) == []


def test_no_function_above_complexity_15():
    """By radon's count, which counts each `and`/`or`, comprehension and conditional
    expression (ruff's C901, also on in pyproject, counts fewer)."""
    from radon.complexity import cc_visit

    above = {f"{path.relative_to(PACKAGE)}:{block.lineno} {block.fullname}": block.complexity
             for path in PACKAGE.rglob("*.py") for block in cc_visit(path.read_text())
             if block.complexity > 15}
    assert above == {}


def test_no_module_above_300_lines():
    lengths = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
               for path in PACKAGE.rglob("*.py")}
    assert {path: n for path, n in lengths.items() if n > 300} == {}
