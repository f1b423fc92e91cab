"""``python -m compute bench <name> [args]`` (also ``python -m compute.lab``): run one lab command."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from compute.lab.registry import ENTRIES

Main = Callable[[list[str]], int | None]


def usage() -> str:
    width = max(map(len, ENTRIES))
    lines = ["usage: python -m compute bench <name> [args...]", "", "benchmarks and simulators:"]
    lines += [f"  {name.ljust(width)}  {entry.help}" for name, entry in ENTRIES.items()]
    lines += [
        "",
        "run `python -m compute bench <name> --help` for a command's options; --json prints one object",
    ]
    return "\n".join(lines)


def resolve(name: str) -> Main:
    """The ``main`` of lab command ``name``; ``LookupError`` names what is wrong."""
    entry = ENTRIES.get(name)
    if entry is None:
        raise LookupError(f"unknown benchmark {name!r}")
    module_name, _, func_name = entry.target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name, None)
    if not callable(func):
        raise LookupError(f"benchmark {name!r}: {entry.target} is not a function")
    return func


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage() + "\n")
        return 0 if args else 2
    try:
        func = resolve(args[0])
    except LookupError as error:
        sys.stderr.write(f"error: {error}\n\n{usage()}\n")
        return 2
    return int(func(args[1:]) or 0)
