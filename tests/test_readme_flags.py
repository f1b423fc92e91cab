"""The README is the contract: every command-line flag of every entry point is documented there.

The entry points come from the code, not from a list kept here: the ``neurons/`` scripts, every
command of ``python -m compute`` (``compute.__main__.COMMANDS``), every ``python -m`` package of
``compute``, the PoG worker script and ``scripts/``. Each ``main`` runs until its parser parses a
probe argument, then stops; its parser (subcommands included) is read with argparse's own tables,
so flags are found whatever ``--help`` prints. Flags hidden with ``help=argparse.SUPPRESS`` are
plumbing between a command and its own child process, not for people, and are not required.
Every file that builds an ``ArgumentParser`` must have been reached, so a new entry point cannot
slip past this test.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
PROBE = "--readme-flag-probe--"
Main = Callable[[list[str]], object]


class _Parsed(BaseException):
    """Raised by the patched parser on the probe (a BaseException: mains catch Exception)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(main: Main, built_in: set[str] | None = None) -> argparse.ArgumentParser:
    """The parser ``main`` parses its arguments with; nothing of the command runs.

    ``built_in`` collects the files that constructed an ``ArgumentParser`` on the way.
    """
    original_parse = argparse.ArgumentParser.parse_known_args
    original_init = argparse.ArgumentParser.__init__

    def parse(self, args=None, namespace=None):  # noqa: ANN001, ANN202 - argparse's signature
        if args is not None and PROBE in args:
            raise _Parsed(self)
        return original_parse(self, args, namespace)

    def init(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        caller = sys._getframe(1).f_code.co_filename
        if built_in is not None and not caller.endswith("argparse.py"):
            built_in.add(str(Path(caller).resolve()))
        original_init(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", parse)
        patch.setattr(argparse.ArgumentParser, "__init__", init)
        try:
            main([PROBE])
        except _Parsed as parsed:
            return parsed.parser
    raise AssertionError(f"{main} returned without parsing its arguments")


def flags_by_command(name: str, parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """``name`` and each subcommand (``name sub``) -> its long flags, hidden ones left out."""
    found: dict[str, set[str]] = {name: set()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                found.update(flags_by_command(f"{name} {sub}", child))
        elif action.help != argparse.SUPPRESS:
            found[name].update(flag for flag in action.option_strings if flag.startswith("--"))
    found[name].discard("--help")
    return found


def missing_from(readme: str, flags: set[str]) -> list[str]:
    """The flags ``readme`` never names (``--m`` is not named by ``--miners``)."""
    return sorted(
        flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-]|\.[a-z])", readme)
    )


def _compute_command(command: str) -> Main:
    from compute.__main__ import main

    return lambda argv: main([command, *argv])


def _script(path: Path) -> Main:
    spec = importlib.util.spec_from_file_location(f"_readme_flags_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def entry_points() -> dict[str, Main]:
    """Every command a person (or CI) runs, found in the tree."""
    from compute.__main__ import COMMANDS
    from compute.lab.cli import resolve
    from compute.lab.registry import ENTRIES

    found: dict[str, Main] = {}
    for script in sorted((REPO / "neurons").glob("*.py")):
        module = importlib.import_module(f"neurons.{script.stem}")
        if callable(getattr(module, "main", None)):
            found[f"neurons/{script.name}"] = module.main
    for command in COMMANDS:
        if command != "bench":  # the lab's dispatcher: each of its commands parses for itself
            found[f"python -m compute {command}"] = _compute_command(command)
    for name in ENTRIES:
        found[f"python -m compute bench {name}"] = resolve(name)
    for dunder in sorted((REPO / "compute").rglob("__main__.py")):
        package = ".".join(dunder.parent.relative_to(REPO).parts)
        if package not in ("compute", "compute.lab"):  # compute.lab: the same registry as `bench`
            found[f"python -m {package}"] = importlib.import_module(f"{package}.__main__").main
    found["PoG worker script"] = importlib.import_module("compute.pog.worker_main").main
    for script in sorted((REPO / "scripts").glob("*.py")):
        if "ArgumentParser(" in script.read_text():
            found[f"scripts/{script.name}"] = _script(script)
    return found


@functools.cache
def documented() -> tuple[dict[str, set[str]], frozenset[str]]:
    """Flags per command of every entry point, and the files that built their parsers."""
    flags: dict[str, set[str]] = {}
    built: set[str] = set()
    for name, main in entry_points().items():
        flags.update(flags_by_command(name, parser_of(main, built)))
    return flags, frozenset(built)


def parser_files(*roots: Path) -> set[str]:
    """Files that construct an ``argparse.ArgumentParser`` (read with ast)."""
    found = set()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if name == "ArgumentParser":
                        found.add(str(path.resolve()))
    return found


def test_every_flag_of_every_command_is_in_the_readme() -> None:
    flags, _ = documented()
    assert len(flags) > 25 and sum(map(len, flags.values())) > 200  # the walk really found them
    missing = {name: gaps for name, found in flags.items() if (gaps := missing_from(README, found))}
    assert not missing, f"flags missing from README.md: {missing}"


def test_every_file_that_builds_a_parser_is_an_entry_point_reached_here() -> None:
    _, built = documented()
    unreached = parser_files(REPO / "compute", REPO / "neurons", REPO / "scripts") - built
    assert not unreached, f"argument parsers no entry point of this test reaches: {sorted(unreached)}"


# ------------------------------------------------------------------ the check can fail


def _fake_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fake")
    parser.add_argument("--fake.listed", type=int)
    parser.add_argument("--fake.unlisted", type=int)
    parser.add_argument("--plumbing", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command").add_parser("go")
    sub.add_argument("--go-far", action="store_true")
    sub.add_argument("--m", type=int)
    parser.parse_args(argv)
    raise AssertionError("the probe must stop the command before it runs")


def test_the_walk_finds_subcommand_flags_and_the_readme_check_names_the_missing(tmp_path: Path) -> None:
    built: set[str] = set()
    flags = flags_by_command("fake", parser_of(_fake_main, built))
    assert flags == {"fake": {"--fake.listed", "--fake.unlisted"}, "fake go": {"--go-far", "--m"}}
    assert built == {str(Path(__file__).resolve())}
    readme = "Flags: `--fake.listed N`, `--fake.unlisted.more`, `--go-far-away`, `--miners`.\n"
    assert missing_from(readme, flags["fake"]) == ["--fake.unlisted"]
    assert missing_from(readme, flags["fake go"]) == ["--go-far", "--m"]
    assert missing_from("`--go-far` and `--m`.", flags["fake go"]) == []
    (tmp_path / "tool.py").write_text("import argparse\nP = argparse.ArgumentParser()\n")
    (tmp_path / "other.py").write_text("from argparse import ArgumentParser as AP\n")
    assert parser_files(tmp_path) == {str((tmp_path / "tool.py").resolve())}
