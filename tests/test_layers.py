"""No import from a lower layer to a higher one, read statically with ``ast``.

``ORDER`` states, for a package, its children (modules and sub-packages) from the lowest layer up;
names in one set share a layer and may not import each other. An import from ``X`` to ``Y`` is
judged in the deepest package holding both: ``Y``'s child there must sit in a lower layer than
``X``'s. Every import counts — at module level, inside functions and under ``TYPE_CHECKING`` —
because each is a dependency of the lower module on the higher one. A package's ``__init__`` (its
facade) sits above all its children and may import any of them; a child importing its own package's
facade is an upward import. A child missing from ``ORDER`` fails the test, so a new room or module
is placed on purpose. Packages without an entry (the small flat ones) are not layered here; their
circles are caught by ``test_import_cycles``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

ORDER: dict[str, list[set[str]]] = {
    "compute": [
        {"peertext", "argv"},
        {"__init__", "logs", "sqlitedb", "safejson", "dispatch"},
        {"protocol"},
        {"flags"},  # settings declared once (pydantic-settings): each room's settings build on it
        {"settings"},
        {"chain", "scoring", "store", "specs"},
        {"pog", "transport"},
        {"allocation", "collateral", "interconnect"},  # interconnect: the proof of a cluster's links
        {"miner"},
        {"dashboard"},
        {"operator"},
        {"renter"},
        {"validator"},
        {"localnet"},
        {"lab"},  # benchmarks, simulators, harnesses: clients of every room, imported by none
        {"__main__"},
    ],
    "compute.lab": [
        {"registry", "report"},
        {"harness", "sim"},
        {"bench"},
        {"cli"},
        {"__main__"},
    ],
    "compute.validator": [
        {"settings"},
        {"failures"},
        {"params"},
        {"session", "report", "journal"},
        {"rentals"},
        {"fleet"},
        {"context"},  # the validator's shared collaborators (oversight among them), built once
        {"proofs"},
        {"lockstep"},
        {"check"},
        {"round"},
        {"presence"},
        {"collateral"},
    ],
    "compute.allocation": [
        {"lease"},
        {"volumes", "embedded"},
        {"docker"},
        {"hosts"},
        {"lifecycle"},
    ],
    "compute.localnet": [
        {"processes", "cheaters", "one_device", "latency_proxy", "netns"},
        {"cheat_miners", "lease_killer"},
        {"network"},
        {"images", "report", "consensus", "collateral", "cluster_demo"},
    ],
}


def module_parts(root: Path, package: str) -> dict[tuple[str, ...], Path]:
    """Every module of ``package`` as its dotted parts; a package's ``__init__`` keeps ``__init__``."""
    return {
        path.relative_to(root).with_suffix("").parts: path for path in sorted((root / package).rglob("*.py"))
    }


def _resolve(parts: tuple[str, ...], node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = parts[:-1]  # a module's package; an __init__'s package is its own folder
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ((node.module,) if node.module else ()))


def imports_of(parts: tuple[str, ...], path: Path, known: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The modules of ``known`` that the module ``parts`` imports anywhere in its file."""

    def module(name: str) -> tuple[str, ...] | None:
        dotted = tuple(name.split("."))
        return (
            dotted if dotted in known else dotted + ("__init__",) if dotted + ("__init__",) in known else None
        )

    found: set[tuple[str, ...] | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(module(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):  # a named submodule, else the names come from the source
            source = _resolve(parts, node)
            found.update(module(f"{source}.{alias.name}") or module(source) for alias in node.names)
    return {target for target in found if target is not None} - {parts}


def _rank(order: list[set[str]], name: str) -> int | None:
    return next((i for i, layer in enumerate(order) if name in layer), None)


def violations(root: Path, package: str, order: dict[str, list[set[str]]]) -> list[str]:
    """Each upward (or sideways, or unplaced) import of ``package`` as a readable line."""
    modules = module_parts(root, package)
    known = set(modules)
    found: list[str] = []
    for source, path in modules.items():
        for target in sorted(imports_of(source, path, known)):
            k = 0
            while k < min(len(source), len(target)) - 1 and source[k] == target[k]:
                k += 1
            holder, low, high = ".".join(source[:k]), target[k], source[k]
            if holder not in order or high == "__init__" and len(source) == k + 1:
                continue  # not layered, or the holder's facade importing its children
            a, b = _rank(order[holder], high), _rank(order[holder], low)
            where = f"{'.'.join(source)} -> {'.'.join(target)}"
            if a is None or b is None:
                missing = high if a is None else low
                found.append(f"{where}: {holder}.{missing} is not placed in ORDER[{holder!r}]")
            elif b >= a:
                found.append(f"{where}: {holder}.{low} is not below {holder}.{high}")
    return found


def test_no_room_imports_a_higher_one() -> None:
    modules = module_parts(REPO, "compute")
    assert ("compute", "validator", "check", "miner") in modules  # the walk really read the tree
    problems = violations(REPO, "compute", ORDER)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_no_product_module_imports_the_lab() -> None:
    """The lab measures the product; the product never depends on it (only the top-level CLI names it)."""
    modules = module_parts(REPO, "compute")
    known = set(modules)
    lab = [parts for parts in known if parts[:2] == ("compute", "lab")]
    assert len(lab) > 20  # the walk really found the lab
    importers = sorted(
        ".".join(source)
        for source, path in modules.items()
        if source[:2] != ("compute", "lab")
        and any(target[:2] == ("compute", "lab") for target in imports_of(source, path, known))
    )
    assert importers == [], f"product modules importing compute.lab: {importers}"


def test_every_child_of_a_layered_package_is_placed() -> None:
    for holder, layers in ORDER.items():
        folder = REPO.joinpath(*holder.split("."))
        children = {p.stem for p in folder.glob("*.py")} | {
            p.name for p in folder.iterdir() if (p / "__init__.py").exists()
        }
        placed = set().union(*layers) | {"__init__"}
        assert children <= placed, f"{holder}: not placed in ORDER: {sorted(children - placed)}"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from pkg.high import x\n", "pkg.low.m -> pkg.high.__init__: pkg.high is not below pkg.low"),
        ("def late():\n    from ..high import h\n", "pkg.low.m -> pkg.high.h: pkg.high is not below pkg.low"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.high.h\n",
            "pkg.low.m -> pkg.high.h: pkg.high is not below pkg.low",
        ),
        ("from pkg import side\n", "pkg.low.m -> pkg.side: pkg.side is not below pkg.low"),
        ("from pkg import stray\n", "pkg.low.m -> pkg.stray: pkg.stray is not placed in ORDER['pkg']"),
        ("import pkg\n", "pkg.low.m -> pkg.__init__: pkg.__init__ is not placed in ORDER['pkg']"),
    ],
)
def test_the_checker_names_an_upward_import_wherever_it_hides(
    tmp_path: Path, text: str, expected: str
) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.high import h\nfrom pkg.low import m\n",
            "pkg/base.py": "",
            "pkg/side.py": "",
            "pkg/stray.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/m.py": "from pkg import base\n" + text,
            "pkg/high/__init__.py": "",
            "pkg/high/h.py": "from pkg.low import m\nfrom ..base import x\n",
        },
    )
    order = {"pkg": [{"base"}, {"low", "side"}, {"high"}]}
    assert violations(tmp_path, "pkg", order) == [expected]
