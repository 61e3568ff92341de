"""The modules of sage_envs.domains.alfworld import one another one way: no circle, lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import sage_envs.domains.alfworld as package

PACKAGE = package.__name__


def imported_modules(path: Path) -> set[str]:
    """The package's modules that ``path`` imports anywhere (module level, in functions, under TYPE_CHECKING)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name.removeprefix(PACKAGE + ".") for name in names if name.startswith(PACKAGE + ".")}
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (module -> modules it imports) as a path, or [] when there is none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once every import below is explored

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = "open"
        for child in sorted(graph.get(node, ())):
            if state.get(child) == "open":
                return path[path.index(child) :] + [child]
            if child not in state:
                cycle = visit(child, [*path, child])
                if cycle:
                    return cycle
        state[node] = "done"
        return []

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            if cycle:
                return cycle
    return []


def test_find_cycle_reports_a_circle_and_only_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []  # a diamond is no circle


def test_no_import_circle_inside_the_alfworld_package() -> None:
    modules = {path.stem: path for path in Path(package.__file__).parent.glob("*.py") if path.stem != "__init__"}
    graph = {name: imported_modules(path) & set(modules) for name, path in modules.items()}
    assert "engines" in graph["domain"]  # the edge the circle went through, so the check sees real imports
    assert find_cycle(graph) == []
