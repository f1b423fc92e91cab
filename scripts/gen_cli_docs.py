"""Write docs/cli.md: every command and every flag of every entry point, read from its parser.

The entry points come from the code, not from a list kept here: the ``neurons/`` scripts, every
command of ``python -m compute`` (``compute.__main__.COMMANDS``), every lab command of
``python -m compute bench`` (``compute.lab.registry.ENTRIES``), every ``python -m`` package of
``compute``, the PoG worker script and the ``scripts/`` that build a parser. Each ``main`` runs
until its parser parses a probe argument, then stops; the parser (subcommands included) is read
with argparse's own tables, so flags are found whatever ``--help`` prints. Flags hidden with
``help=argparse.SUPPRESS`` are plumbing between a command and its own child process, not for
people, and are left out.

docs/cli.md keeps its hand-written introduction (everything down to the ``MARKER`` line); the rest
is generated. ``--check`` exits 1 when the file differs from what would be written
(tests/test_cli_docs.py does the same).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"
MARKER = "<!-- generated below by scripts/gen_cli_docs.py: edit the parsers' help, then run it -->"
PROBE = "--cli-docs-probe--"
Main = Callable[[list[str]], object]
# A help text ending in "(600)", "(0.4)", "(auto)" or "(30; 0 = off)" states the default already.
STATED = re.compile(r"\((-?[\d.]+|auto)(;[^()]*)?\)$")

# Descriptions of the flags whose parser gives no help text: (command, first option string) -> text.
NOTES: dict[tuple[str, str], str] = {
    ("python -m compute chain create", "path"): "the chain file (SQLite) to create",
    ("python -m compute chain create", "--netuid"): "uid of the chain's one subnet",
    ("python -m compute chain create", "--tempo"): "blocks per subnet epoch",
    ("python -m compute chain create", "--min-allowed-weights"): "fewest weights a weight set may hold",
    ("python -m compute chain register", "path"): "the chain file",
    ("python -m compute chain register", "--wallet.hotkey"): "hotkey of --wallet.name",
    ("python -m compute chain register", "--wallet.path"): "wallets directory of --wallet.name",
    ("python -m compute chain register", "--validator-permit"): "give the hotkey a validator permit",
    ("python -m compute chain show", "path"): "the chain file",
    ("python -m compute chain show", "--netuid"): "subnet to list (default: the chain's first)",
    ("python -m compute chain weights", "path"): "the chain file",
    ("python -m compute chain weights", "--netuid"): "subnet to list (default: the chain's first)",
    ("python -m compute latency-proxy", "host"): "host to connect to",
    ("python -m compute latency-proxy", "port"): "TCP port to connect to",
    ("python -m compute bench pog", "--device"): "device the prover runs on",
    ("python -m compute bench pog", "--precision"): "precision of the GEMM",
    ("python -m compute bench pog", "--m"): "output rows of the product",
    ("python -m compute bench pog", "--p"): "output columns of the product",
    ("python -m compute bench allocation", "--backend"): "backend measured (both: one after the other)",
    ("python -m compute bench dashboard", "--miners"): "miners in the filled store",
    ("python -m compute bench dashboard", "--days"): "days of history in the filled store",
    ("python -m compute bench dashboard", "--repeats"): "renders timed (the median is reported)",
    ("python -m compute bench feed", "--miners"): "miners in the filled store",
    ("python -m compute bench feed", "--days"): "days of history in the filled store",
    ("python -m compute bench feed", "--repeats"): "builds timed (the median is reported)",
    ("python -m compute bench validator", "--miners"): "loopback miners tested",
    ("python -m compute bench validator", "--concurrency"): "miners tested at once (--validator.concurrency)",
    ("python -m compute bench validator", "--m"): "PoG output rows per GPU",
    ("python -m compute bench validator", "--n"): "PoG inner size",
    ("python -m compute bench validator", "--p"): "PoG output columns per GPU",
    ("python -m compute bench validator", "--miner-timeout"): "seconds allowed per miner test",
    ("python -m compute bench distance", "--m"): "PoG output rows",
    ("python -m compute bench distance", "--n"): "PoG inner size (before the distance stretch)",
    ("python -m compute bench distance", "--p"): "PoG output columns",
    ("python -m compute bench distance", "--miner-timeout"): "seconds allowed per miner test",
    ("python -m compute.pog worker", "--device"): "device the worker computes on",
    ("PoG worker script", "--device"): "device the worker computes on",
}

# Defaults a neuron's settings layer applies that its help text does not state (its parser leaves every
# default unset so the environment can fill it): (command, first option string) -> default.
DEFAULTS: dict[tuple[str, str], str] = {
    ("neurons/miner.py", "--miner.lease_sandbox"): "auto",
}


# ---------------------------------------------------------------- finding the parsers


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

    argparse.ArgumentParser.parse_known_args = parse  # type: ignore[method-assign]
    argparse.ArgumentParser.__init__ = init  # type: ignore[method-assign]
    try:
        main([PROBE])
    except _Parsed as parsed:
        return parsed.parser
    finally:
        argparse.ArgumentParser.parse_known_args = original_parse  # type: ignore[method-assign]
        argparse.ArgumentParser.__init__ = original_init  # type: ignore[method-assign]
    raise AssertionError(f"{main} returned without parsing its arguments")


def _compute_command(command: str) -> Main:
    from compute.__main__ import main

    return lambda argv: main([command, *argv])


def _script(path: Path) -> Main:
    spec = importlib.util.spec_from_file_location(f"_cli_docs_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def entry_points() -> dict[str, Main]:
    """Every command a person (or CI) runs, found in the tree."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
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


def commands_of(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``name`` and each subcommand (``name sub``), depth first, with its parser."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from commands_of(f"{name} {sub}", child)


def visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's own arguments a person passes (help, hidden plumbing and subcommands left out)."""
    return [
        action
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        and not isinstance(action, (argparse._SubParsersAction, argparse._HelpAction))
    ]


def flags_by_command(name: str, parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """``name`` and each subcommand -> its long flags, hidden ones left out."""
    return {
        command: {
            flag for action in visible(child) for flag in action.option_strings if flag.startswith("--")
        }
        for command, child in commands_of(name, parser)
    }


def missing_from(text: str, flags: set[str]) -> list[str]:
    """The flags ``text`` never names (``--m`` is not named by ``--miners``)."""
    return sorted(
        flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-]|\.[a-z])", text)
    )


# ---------------------------------------------------------------- writing the page


def _key(action: argparse.Action) -> tuple[str, ...]:
    return (*action.option_strings, action.dest, str(action.help))


@functools.cache
def common_actions() -> frozenset[tuple[str, ...]]:
    """The flags every neuron shares (``compute.settings.add_common_args``), documented once."""
    from compute.settings import add_common_args

    return frozenset(
        _key(action) for action in visible(add_common_args(argparse.ArgumentParser(add_help=False)))
    )


def first_name(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def description(command: str, action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    if action.help:
        text = parser._get_formatter()._expand_help(action)
    else:
        text = NOTES.get((command, first_name(action)), "")
    return " ".join(text.split())


def _shown(value: object) -> str:
    if isinstance(value, Path) and value.is_absolute() and value.is_relative_to(REPO):
        return "this checkout" if value == REPO else f"{value.relative_to(REPO)} in this checkout"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "none"
    return str(value)


def default_of(action: argparse.Action, text: str, command: str = "") -> str:
    """``; default X`` unless the help says it already ('' then)."""
    if (command, first_name(action)) in DEFAULTS:
        return f"; default {DEFAULTS[command, first_name(action)]}"
    if action.nargs == 0:  # a switch
        return "; off unless given" if "default" not in text else ""
    if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
        return "; required"
    value = action.default
    if "default" in text or STATED.search(text):
        return ""
    if value is None or value == argparse.SUPPRESS or value == "":
        return "; default: unset"
    return f"; default {_shown(value)}"


def usage_of(action: argparse.Action) -> str:
    choices = "|".join(map(str, action.choices)) if action.choices else ""
    if not action.option_strings:
        name = choices or (action.metavar if isinstance(action.metavar, str) else action.dest.upper())
        return f"{name} ..." if action.nargs in ("*", "+") else name
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    value = choices or (action.metavar if isinstance(action.metavar, str) else "")
    value = f"{value} ..." if action.nargs in ("*", "+") and value else value
    return f"{names} {value}".rstrip()


def _anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def section(
    command: str,
    parser: argparse.ArgumentParser,
    summary: str,
    level: int,
    skip: set[tuple[str, ...]],
    above: str,
) -> list[str]:
    """Markdown of one command: its summary, then one line per flag."""
    lines = [f"{'#' * level} `{command}`", ""]
    if summary:
        lines += [summary, ""]
    takes_common = inherited = False
    common = common_actions()
    for action in visible(parser):
        if _key(action) in common:
            takes_common = True
            continue
        if _key(action) in skip:
            inherited = True
            continue
        text = description(command, action, parser)
        lines.append(f"- `{usage_of(action)}`: {text}{default_of(action, text, command)}")
    subcommands = [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices
    ]
    if subcommands:
        lines.append(
            "- subcommands: " + ", ".join(f"[`{sub}`](#{_anchor(f'{command} {sub}')})" for sub in subcommands)
        )
    extra = []
    if takes_common:
        extra.append("the [common flags](#common-flags)")
    if inherited:
        extra.append(f"every flag of `{above}`")
    if extra:
        lines.append(f"- also {' and '.join(extra)}")
    if lines[-1] == "":
        lines.append("No flags.")
    lines.append("")
    return lines


def _summary(parser: argparse.ArgumentParser) -> str:
    text = (parser.description or "").strip().split("\n\n")[0]
    return " ".join(text.split())


def generated() -> str:
    """The generated part of docs/cli.md."""
    from compute.__main__ import COMMANDS
    from compute.lab.registry import ENTRIES

    out = [MARKER, "", "## Common flags", ""]
    out.append("Every neuron and every `python -m compute collateral` subcommand takes these:")
    out.append("")
    from compute.settings import add_common_args

    common_parser = add_common_args(argparse.ArgumentParser(add_help=False))
    for action in visible(common_parser):
        text = description("common", action, common_parser)
        out.append(f"- `{usage_of(action)}`: {text}{default_of(action, text)}")
    out += ["", "## `python -m compute`", ""]
    out.append("Without a command it lists these; each one's flags follow below.")
    out.append("")
    for name, (_, help_text) in COMMANDS.items():
        out.append(f"- [`{name}`](#{_anchor(f'python -m compute {name}')}): {help_text}")
    out += ["", "## `python -m compute bench`", ""]
    out.append(
        "Benchmarks and simulators of `compute/lab/`; without a name it lists these. Each takes `--json`."
    )
    out.append("")
    for name, entry in ENTRIES.items():
        out.append(f"- [`{name}`](#{_anchor(f'python -m compute bench {name}')}): {entry.help}")
    out.append("")
    for name, main in entry_points().items():
        parser = parser_of(main)
        if name.startswith("python -m compute "):
            command = name.split()[3]
            summary = ENTRIES[name.split()[4]].help if command == "bench" else COMMANDS[command][1]
        else:
            summary = _summary(parser)
        summaries = {name: summary}
        skips: dict[str, set[tuple[str, ...]]] = {name: set()}
        for command, child in commands_of(name, parser):
            parent = command.rsplit(" ", 1)[0] if command != name else ""
            level = 2 + command.count(" ") - name.count(" ")
            out += section(command, child, summaries[command], level, skips.get(command, set()), parent)
            own = skips.get(command, set()) | {_key(action) for action in visible(child)}
            for action in child._actions:
                if isinstance(action, argparse._SubParsersAction):
                    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
                    for sub in action.choices:
                        summaries[f"{command} {sub}"] = helps.get(sub, "")
                        skips[f"{command} {sub}"] = own
    return "\n".join(out).rstrip("\n") + "\n"


def page(current: str) -> str:
    """docs/cli.md as it should be: ``current``'s introduction, then the generated part."""
    if MARKER not in current:
        raise SystemExit(f"{DOC} has no marker line {MARKER!r}: its introduction ends there")
    return current[: current.index(MARKER)] + generated()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if docs/cli.md is out of date"
    )
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = page(current)
    if args.check:
        if wanted != current:
            print(
                f"{DOC.relative_to(REPO)} is out of date: run python scripts/gen_cli_docs.py", file=sys.stderr
            )
            return 1
        return 0
    if wanted != current:
        DOC.write_text(wanted, encoding="utf-8")
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
