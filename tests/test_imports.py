"""Imports point one way: no circle among any package's modules, and packages import only the layers below them.

Imports are read with ast, at module and function level alike (a function-level import is a circle all the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ["sage_envs", "sage_agents", "leaderboard", "sage_app"]
"""The project's packages, lowest first: each may import only the packages before it."""


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Map every module's dotted name under ``root`` (the folder of ``package``) to its file."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Every dotted name imported anywhere in ``tree`` (functions included), except under ``if TYPE_CHECKING:``.

    ``if TYPE_CHECKING:`` blocks never run, so they cannot make an import circle. ``from X import Y`` yields
    ``X.Y`` (a submodule or a name in ``X``: :func:`import_graph` keeps what is a module); relative imports are
    resolved against ``module``.
    """
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """``module -> modules of ``modules`` it imports`` (each import resolved to its longest known module prefix)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(ast.parse(path.read_text()), module, path.name == "__init__.py"):
            parts = name.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts and ".".join(parts) != module:
                targets.add(".".join(parts))
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of two or more modules, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    """Whether ``goal`` is reachable from ``start`` (plain depth-first search)."""
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return False


def test_circle_finder_sees_function_level_imports_and_skips_type_checking(tmp_path: Path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "a.py").write_text("from pkg.sub.b import thing\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .a import other\n")  # function level: counts
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    graph = import_graph(module_files(pkg, "pkg"))
    assert graph == {
        "pkg": set(),
        "pkg.sub": {"pkg.sub.a"},
        "pkg.sub.a": {"pkg.sub.b"},
        "pkg.sub.b": {"pkg.sub.a"},
        "pkg.c": set(),
        "pkg.d": {"pkg.c"},
    }
    assert circles(graph) == [["pkg.sub.a", "pkg.sub.b"]]


def project_graph() -> dict[str, set[str]]:
    """The import graph of every module of every package in :data:`LAYERS`."""
    modules: dict[str, Path] = {}
    for package in LAYERS:
        modules |= module_files(ROOT / package, package)
    return import_graph(modules)


def test_circle_finder_agrees_with_reachability_on_the_project():
    graph = project_graph()
    in_circle = {module for circle in circles(graph) for module in circle}
    for module in graph:  # a module is in a circle iff one of its imports leads back to it
        assert (module in in_circle) == any(_reaches(graph, target, module) for target in graph[module]), module


@pytest.mark.parametrize("package", LAYERS)
def test_no_import_circle_within(package):
    graph = project_graph()
    inside = [c for c in circles(graph) if any(m == package or m.startswith(package + ".") for m in c)]
    assert inside == [], f"import circles touching {package}: {inside}"


@pytest.mark.parametrize("package", LAYERS)
def test_packages_import_only_the_layers_below(package):
    above = set(LAYERS[LAYERS.index(package) + 1 :])
    upward = sorted(
        (module, target)
        for module, targets in project_graph().items()
        if module.split(".")[0] == package
        for target in targets
        if target.split(".")[0] in above
    )
    assert upward == [], f"{package} imports a layer above it: {upward}"
