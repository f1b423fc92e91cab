"""Lazy command tables for the command lines (``python -m compute``, ``python -m compute bench``).

A table maps a command's name to ``("module:function", help)``; the module is imported only when its
command runs, so one broken or absent package (or an optional heavy dependency) never breaks the
others. Each target is ``main(argv: list[str] | None) -> int | None``.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Mapping

Main = Callable[[list[str]], int | None]


def load(name: str, target: str) -> Main:
    """The function ``target`` names; ``LookupError`` says why command ``name`` cannot run."""
    module_name, _, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise LookupError(
                f"command {name!r} is not available: module {module_name} does not exist yet"
            ) from error
        raise
    func = getattr(module, func_name, None)
    if not callable(func):
        raise LookupError(f"command {name!r} is not available: {target} is not a function")
    return func


def usage(title: str, heading: str, table: Mapping[str, tuple[str, str]], footer: str) -> str:
    width = max(len(name) for name in table)
    lines = [title, "", heading]
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in table.items()]
    return "\n".join([*lines, "", footer])


def dispatch(argv: list[str] | None, table: Mapping[str, tuple[str, str]], text: str, what: str) -> int:
    """Run ``argv[0]``'s command with the rest; the usage ``text`` alone; an unknown ``what``: one
    line naming the closest one ("did you mean"), exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(text + "\n")
        return 0 if args else 2
    try:
        if args[0] not in table:
            close = difflib.get_close_matches(args[0], list(table), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; {what}s: {', '.join(table)}"
            raise LookupError(f"unknown {what} {args[0]!r}{hint}")
        func = load(args[0], table[args[0]][0])
    except LookupError as error:
        sys.stderr.write(f"error: {error} (--help lists them)\n")
        return 2
    return int(func(args[1:]) or 0)
