"""No import circles in ``compute`` and ``neurons`` (the developers' guide), read statically with ``ast``.

An edge is an import: ``import a.b``, ``from a import b`` (to ``a``, and to ``a.b`` when that is a
module), relative forms included. Imports that run when the module is imported always count: module
level, class bodies, ``try`` and ordinary ``if`` blocks. Imports inside functions and under ``if
TYPE_CHECKING:`` count too when both ends lie in one package (``compute.pog``, ``compute.renter``,
``compute.lab``...): a lazy import there only hides a circle between two modules that should have
been one, or share a third. Across packages a lazy import may stay lazy (an optional dependency, a
heavy one paid only on use); the layer test (``test_layers.py``) keeps those pointing down. Importing
``a.b`` also runs package ``a``'s ``__init__`` first; that implicit edge is left out (a package
importing its own submodules would otherwise always be a circle), so only what a module names is an
edge: ``from a import x`` inside ``a.y``, with ``a``'s ``__init__`` importing ``a.y``, is one.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("compute", "neurons")


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root``."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_statements(body: list[ast.stmt]):
    """The statements that run when the module is imported (not function bodies, not TYPE_CHECKING)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, (ast.Try, ast.With, ast.ClassDef, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody"):
                yield from _import_time_statements(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _import_time_statements(handler.body)
        else:
            yield node


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def package_of(module: str) -> str:
    """The top-level package a module belongs to: ``compute.pog`` for ``compute.pog.memory.kernel``."""
    return ".".join(module.split(".")[:2])


def _targets(module: str, is_package: bool, nodes) -> set[str]:
    targets: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node)
            targets.add(source)
            targets.update(f"{source}.{alias.name}" for alias in node.names)
    return targets


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports at import time, and those of its own package
    that it imports anywhere (in a function, under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    eager = _targets(module, is_package, _import_time_statements(tree.body))
    anywhere = _targets(module, is_package, ast.walk(tree))
    own = {target for target in anywhere if package_of(target) == package_of(module)}
    return {target for target in eager | own if target in known and target != module}


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    files = module_names(root, packages)
    known = set(files)
    return {module: imports_of(module, path, known) for module, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) per strongly connected component with a circle in it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan; the graphs here are a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return paths[node] + [start]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def test_compute_and_neurons_have_no_import_cycles() -> None:
    graph = import_graph(REPO, PACKAGES)
    assert len(graph) > 100 and graph["compute.validator.check.miner"]  # the walk really read the tree
    cycles = find_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def room_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """The module graph with each room collapsed to one node: a sub-package of a top-level package
    (``compute.validator.check``, ``compute.pog.host``), with everything under it, is one node; the
    modules directly in a top-level package (``compute.validator.params``) stay nodes of their own."""
    files = module_names(root, packages)

    def room(module: str) -> str:
        package = module.split(".") if files[module].name == "__init__.py" else module.split(".")[:-1]
        return ".".join(package[:3]) if len(package) >= 3 else module

    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in import_graph(root, packages).items():
        rooms[room(module)].update(room(t) for t in targets if room(t) != room(module))
    return dict(rooms)


def test_rooms_have_no_import_cycles() -> None:
    graph = room_graph(REPO, PACKAGES)
    assert "compute.validator.check" in graph["compute.validator.round"]  # rooms really collapsed
    cycles = find_cycles(graph)
    assert not cycles, "room import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_the_room_finder_names_a_circle_between_two_rooms(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/top/__init__.py": "from pkg.top.a import m\n",
            "pkg/top/a/__init__.py": "",
            "pkg/top/a/m.py": "from pkg.top.b import n\n",
            "pkg/top/b/__init__.py": "",
            "pkg/top/b/n.py": "x = 1\n",
            "pkg/top/b/o.py": "import json\n",
        },
    )
    assert find_cycles(room_graph(tmp_path, ("pkg",))) == []  # a uses b, b does not use a
    (tmp_path / "pkg" / "top" / "b" / "o.py").write_text(
        "from pkg.top.a import m\n"
    )  # modules: still no circle
    assert find_cycles(import_graph(tmp_path, ("pkg",))) == []
    assert find_cycles(room_graph(tmp_path, ("pkg",))) == [["pkg.top.a", "pkg.top.b", "pkg.top.a"]]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_finder_names_a_cycle_through_relative_and_package_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\n",
            "pkg/a.py": "from .sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from __future__ import annotations\nimport pkg.c\n",
            "pkg/c.py": "try:\n    from . import a\nexcept ImportError:\n    pass\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg"] == {"pkg.a"}
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert graph["pkg.c"] == {"pkg", "pkg.a"}
    assert find_cycles(graph) == [["pkg", "pkg.a", "pkg.sub.b", "pkg.c", "pkg"]]


def test_the_finder_counts_lazy_imports_within_a_package_only(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "from pkg.sub import b\n",
            "pkg/sub/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.other import c\n"
                "else:\n    import json\n"
                "def late():\n    from pkg.other import c\n    return c\n"
                "class C:\n    import pkg.other.d\n"
            ),
            "pkg/other/__init__.py": "",
            "pkg/other/c.py": "import typing\nif typing.TYPE_CHECKING:\n    import pkg.sub.a\n",
            "pkg/other/d.py": "def late():\n    import pkg.other.c\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.sub.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.other.d"}  # the class body runs at import time; c is elsewhere
    assert graph["pkg.other.c"] == set()  # TYPE_CHECKING, another package: not an edge
    assert graph["pkg.other.d"] == {"pkg.other.c"}  # in a function, the same package: an edge
    assert find_cycles(graph) == []
    # A lazy import back within one package closes a circle, and the finder names it.
    (tmp_path / "pkg" / "sub" / "b.py").write_text("def late():\n    from pkg.sub import a\n")
    assert find_cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]]
    (tmp_path / "pkg" / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.a import A\n"
    )
    assert find_cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]]
