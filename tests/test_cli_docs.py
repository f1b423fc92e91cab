"""docs/cli.md is the contract: every command and every flag of every entry point is documented there.

The page is generated from the parsers themselves by ``scripts/gen_cli_docs.py``; the entry points
come from the code, not from a list kept here (see the script): the ``neurons/`` scripts, every
command of ``python -m compute``, every ``python -m compute bench <name>``, every ``python -m``
package of ``compute``, the PoG worker script and ``scripts/``. Each ``main`` runs until its parser
parses a probe argument, then stops. Three checks, each able to fail (the last section plays them
on a fake parser): the page is what the script writes now (a changed flag or help text means
running it again), every flag is named in its command's section (or a section its flags come
from), and every flag says what it does. Every file that builds an ``ArgumentParser`` must have
been reached, so a new entry point cannot slip past this test.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"


def _load_generator():  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location("gen_cli_docs", REPO / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@functools.cache
def documented() -> tuple[dict[str, argparse.ArgumentParser], frozenset[str]]:
    """Every command (subcommands included) with its parser, and the files that built the parsers."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    built: set[str] = set()
    for name, main in gen.entry_points().items():
        parsers.update(gen.commands_of(name, gen.parser_of(main, built)))
    return parsers, frozenset(built)


def sections(page: str) -> dict[str, str]:
    """Each `` `command` `` heading of the page -> the text under it, down to the next heading."""
    found: dict[str, str] = {}
    parts = re.split(r"^#{2,6} (.*)$", page, flags=re.M)
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        found[title.strip().strip("`")] = body
    return found


def undocumented(page: str, parsers: dict[str, argparse.ArgumentParser]) -> dict[str, list[str]]:
    """Per command, the long flags its section never names (nor a parent's, nor the common flags')."""
    text = sections(page)
    missing: dict[str, list[str]] = {}
    for command, parser in parsers.items():
        words = command.split(" ")
        # A subcommand also takes its parents' flags; every neuron takes the common flags.
        parents = (" ".join(words[:n]) for n in range(1, len(words)))
        where = [text.get(command, "")] + [text.get(parent, "") for parent in parents if parent in parsers]
        where.append(text.get("Common flags", ""))
        flags = gen.flags_by_command(command, parser)[command]
        if command not in text:
            gaps = sorted(flags) or ["(no section)"]
        else:
            gaps = gen.missing_from("\n".join(where), flags)
        if gaps:
            missing[command] = gaps
    return missing


def without_description(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """Arguments with neither a ``help=`` nor a note in the generator."""
    return sorted(
        f"{command} {gen.first_name(action)}"
        for command, parser in parsers.items()
        for action in gen.visible(parser)
        if not gen.description(command, action, parser)
    )


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


def test_cli_md_is_what_the_generator_writes_now() -> None:
    current = DOC.read_text(encoding="utf-8")
    assert gen.page(current) == current, "docs/cli.md is out of date: run python scripts/gen_cli_docs.py"


def test_every_flag_of_every_command_is_in_its_section_of_cli_md() -> None:
    parsers, _ = documented()
    flags = {command: gen.flags_by_command(command, parser)[command] for command, parser in parsers.items()}
    assert len(parsers) > 40 and sum(map(len, flags.values())) > 250  # the walk really found them
    assert any(command.startswith("python -m compute bench ") for command in parsers)
    missing = undocumented(DOC.read_text(encoding="utf-8"), parsers)
    assert not missing, f"flags missing from their command's section of docs/cli.md: {missing}"


def test_every_flag_says_what_it_does() -> None:
    parsers, _ = documented()
    bare = without_description(parsers)
    assert not bare, (
        f"give these a help= in their parser (or a note in scripts/gen_cli_docs.py NOTES): {bare}"
    )
    stale = [key for key in gen.NOTES if key[0] not in parsers]
    stale += [
        key
        for key in gen.NOTES
        if key[0] in parsers
        and not any(
            gen.first_name(action) == key[1] and not action.help for action in gen.visible(parsers[key[0]])
        )
    ]
    assert not stale, (
        f"notes in scripts/gen_cli_docs.py for arguments that are gone or have help now: {stale}"
    )
    unused = [
        key
        for key in gen.DEFAULTS
        if key[0] not in parsers
        or not any(
            gen.first_name(action) == key[1] and action.default is None and "default" not in str(action.help)
            for action in gen.visible(parsers[key[0]])
        )
    ]
    assert not unused, (
        f"DEFAULTS in scripts/gen_cli_docs.py for flags that are gone or state a default: {unused}"
    )


@pytest.mark.slow
def test_every_file_that_builds_a_parser_is_an_entry_point_reached_here() -> None:
    _, built = documented()
    unreached = parser_files(REPO / "compute", REPO / "neurons", REPO / "scripts") - built
    assert not unreached, f"argument parsers no entry point of this test reaches: {sorted(unreached)}"


# ------------------------------------------------------------------ the checks can fail


def _fake_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fake", description="A fake command.")
    parser.add_argument("--fake.listed", type=int, help="listed")
    parser.add_argument("--fake.unlisted", type=int)
    parser.add_argument("--plumbing", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command").add_parser("go", help="go somewhere")
    sub.add_argument("--go-far", action="store_true", help="far")
    sub.add_argument("--m", type=int, default=3, help="size")
    parser.parse_args(argv)
    raise AssertionError("the probe must stop the command before it runs")


def test_the_walk_finds_subcommand_flags_and_the_checks_name_the_missing(tmp_path: Path) -> None:
    built: set[str] = set()
    parser = gen.parser_of(_fake_main, built)
    assert built == {str(Path(__file__).resolve())}
    parsers = dict(gen.commands_of("fake", parser))
    assert gen.flags_by_command("fake", parser) == {
        "fake": {"--fake.listed", "--fake.unlisted"},
        "fake go": {"--go-far", "--m"},
    }
    # A page naming some flags, in the wrong section or only as a prefix of a longer one.
    page = (
        "## `fake`\n\nFlags: `--fake.listed N`, `--fake.unlisted.more`, `--go-far`.\n\n"
        "### `fake go`\n\n`--go-far-away`, `--miners`.\n"
    )
    assert undocumented(page, parsers) == {"fake": ["--fake.unlisted"], "fake go": ["--m"]}
    assert undocumented("## `fake`\n\n`--fake.listed`\n", parsers) == {
        "fake": ["--fake.unlisted"],
        "fake go": ["--go-far", "--m"],
    }
    # The generator's own section for the fake command names every flag, and only the one without
    # help lacks a description.
    lines = gen.section("fake", parser, "A fake command.", 2, set(), "")
    lines += gen.section("fake go", parsers["fake go"], "go somewhere", 3, set(), "fake")
    written = "\n".join(lines)
    assert undocumented(written, parsers) == {}
    assert "- `--m`: size; default 3" in written and "- `--go-far`: far; off unless given" in written
    assert "--plumbing" not in written
    assert without_description(parsers) == ["fake --fake.unlisted"]
    # Out of date: a page whose generated part differs from the generator's is not what page() makes.
    stale = gen.MARKER.join(["intro\n", "\n## `old`\n"])
    assert gen.page(stale) != stale and gen.page(stale).startswith("intro\n" + gen.MARKER)
    (tmp_path / "tool.py").write_text("import argparse\nP = argparse.ArgumentParser()\n")
    (tmp_path / "other.py").write_text("from argparse import ArgumentParser as AP\n")
    assert parser_files(tmp_path) == {str((tmp_path / "tool.py").resolve())}
