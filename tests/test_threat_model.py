"""Every test ``docs/threat-model.md`` names as the player of a cheat exists (read statically with ``ast``).

The "Test" column names tests as `` `tests/x.py::test_name` ``; shorthands continue the previous
reference: `` `::other_test` `` (same file), `` `[param-id]` `` (same test), `` `test_x.py::...` `` (a
file name unique under tests/), `` `test_prefix_*` `` (at least one test matches) and a bare file.
A parametrized reference must name ids whose parts the test module spells.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "threat-model.md"
CODE = re.compile(r"`([^`]+)`")
REF = re.compile(r"^(?P<path>[\w/.-]+\.py)?(?:::(?P<name>[\w*]+))?(?P<param>\[[^\]]+\])?$")


@dataclass(frozen=True)
class Ref:
    term: str
    text: str  # as the document writes it
    path: str  # relative to the repository
    name: str | None  # None: the module itself
    param: str | None


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every table row (header and delimiter rows left out)."""
    rows = []
    for line in markdown.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[\s|:-]+\|?", line.strip()):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] != "Term":
            rows.append(cells)
    return rows


def _file(path: str, tests: Path) -> str:
    if "/" in path:
        return path
    found = sorted(tests.rglob(path))
    return (
        str(found[0].relative_to(tests.parent)) if len(found) == 1 else f"<{len(found)} files named {path}>"
    )


def named_tests(markdown: str, tests: Path) -> list[Ref]:
    """Every test reference of the document's "Test" column, shorthands resolved."""
    refs: list[Ref] = []
    path = name = None
    for cells in table_rows(markdown):
        for code in CODE.findall(cells[-1]):
            match = REF.match(code)
            if match is None:
                raise ValueError(f"{cells[0]}: cannot read test reference `{code}`")
            if match["path"]:
                path, name = _file(match["path"], tests), None
            if match["name"]:
                name = match["name"]
            if path is None:
                raise ValueError(f"{cells[0]}: `{code}` continues no earlier reference")
            refs.append(Ref(cells[0], code, path, name, match["param"]))
    return refs


def problem(ref: Ref, root: Path) -> str | None:
    """Why ``ref`` points at no test, or None."""
    module = root / ref.path
    if not module.is_file():
        return f"{ref.term}: `{ref.text}`: no file {ref.path}"
    source = module.read_text()
    tree = ast.parse(source)
    functions = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }
    if ref.name is None:
        return None if functions else f"{ref.term}: `{ref.text}`: {ref.path} has no test"
    matching = fnmatch.filter(sorted(functions), ref.name)
    if not matching:
        return f"{ref.term}: `{ref.text}`: no test {ref.name} in {ref.path}"
    if ref.param:
        words = set(re.findall(r"\w+", source))
        unknown = [part for part in ref.param.strip("[]").split("-") if part not in words]
        if unknown:
            return f"{ref.term}: `{ref.text}`: parameter id parts {unknown} are not in {ref.path}"
    return None


def test_every_test_the_threat_model_names_exists() -> None:
    refs = named_tests(DOC.read_text(), REPO / "tests")
    assert len(refs) >= 30  # the document was really read
    problems = [p for ref in refs if (p := problem(ref, REPO)) is not None]
    assert not problems, "dangling test references in docs/threat-model.md:\n" + "\n".join(problems)


# Every score term of compute/scoring and compute/validator -> how the threat model names it. A new
# term needs its row (cheat, why it fails, the test playing it) in the document and its line here.
SCORE_TERMS = {
    "value function": "GPU identity (value function)",
    "memory": "GPU memory",
    "host cpu": "Host CPU cores",
    "host ram": "Host RAM",
    "host disk": "Host disk",
    "scaling": "Verified GPU count",
    "sustained": "Sustained ratio",
    "rented": "Rented credit",
    "availability": "Availability",
    "rental uptime": "Rental uptime",
    "dedup": "One device, one reward",
    "worker output": "Worker output",
    "gemm throughput": "GEMM throughput (PoG)",
    "host cpu bandwidth": "Host CPU bandwidth",
    "ema": "Score over rounds (EMA)",
    "weights": "Weights (consensus step)",
}


@pytest.mark.parametrize("term", sorted(SCORE_TERMS))
def test_every_score_term_has_a_cheat_and_its_test(term: str) -> None:
    refs = named_tests(DOC.read_text(), REPO / "tests")
    named = [ref for ref in refs if ref.term.startswith(SCORE_TERMS[term]) and ref.name]
    assert named, f"docs/threat-model.md names no test playing a cheat of {term} ({SCORE_TERMS[term]})"


# ------------------------------------------------------------------ the checker can fail

FAKE_TESTS = {
    "a/test_alpha.py": (
        "import pytest\n"
        "@pytest.mark.parametrize('engine', [Fast, Slow])\n"
        "def test_one(engine): pass\n"
        "async def test_two(): pass\n"
    ),
    "b/test_beta.py": "def test_three(): pass\n",
}
FAKE_DOC = """
| Term | Cheat | Why | Test |
|---|---|---|---|
| Alpha | x | y | `tests/a/test_alpha.py::test_one[Fast]`, `::test_two`, `[Slow]` |
| Beta | x | y | `test_beta.py::test_th*`, `tests/a/test_alpha.py` |

Some prose in between.

| Gamma | x | y | `test_beta.py::test_four`, `tests/a/test_alpha.py::test_one[Medium]`, `tests/c/test_gone.py::test_x` |
"""


def test_the_checker_resolves_shorthands_and_names_each_dangling_reference(tmp_path: Path) -> None:
    for name, text in FAKE_TESTS.items():
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    refs = named_tests(FAKE_DOC, tmp_path / "tests")
    assert [(r.term, r.path, r.name, r.param) for r in refs] == [
        ("Alpha", "tests/a/test_alpha.py", "test_one", "[Fast]"),
        ("Alpha", "tests/a/test_alpha.py", "test_two", None),
        ("Alpha", "tests/a/test_alpha.py", "test_two", "[Slow]"),
        ("Beta", "tests/b/test_beta.py", "test_th*", None),
        ("Beta", "tests/a/test_alpha.py", None, None),
        ("Gamma", "tests/b/test_beta.py", "test_four", None),
        ("Gamma", "tests/a/test_alpha.py", "test_one", "[Medium]"),
        ("Gamma", "tests/c/test_gone.py", "test_x", None),
    ]
    problems = [p for ref in refs if (p := problem(ref, tmp_path)) is not None]
    assert problems == [
        "Gamma: `test_beta.py::test_four`: no test test_four in tests/b/test_beta.py",
        "Gamma: `tests/a/test_alpha.py::test_one[Medium]`: parameter id parts ['Medium'] are not in"
        " tests/a/test_alpha.py",
        "Gamma: `tests/c/test_gone.py::test_x`: no file tests/c/test_gone.py",
    ]


def test_an_unreadable_reference_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot read test reference `see the suite`"):
        named_tests("| T | x | y | `see the suite` |\n", REPO / "tests")
    with pytest.raises(ValueError, match="continues no earlier reference"):
        named_tests("| T | x | y | `::test_x` |\n", REPO / "tests")
