"""``python -m compute bench <name> [args]`` (also ``python -m compute.lab``): run one lab command."""

from __future__ import annotations

from compute import dispatch
from compute.lab.registry import ENTRIES


def usage() -> str:
    return dispatch.usage(
        "usage: python -m compute bench <name> [args...]",
        "benchmarks and simulators:",
        ENTRIES,
        "run `python -m compute bench <name> --help` for a command's options; --json prints one object",
    )


def resolve(name: str) -> dispatch.Main:
    """The ``main`` of lab command ``name``; ``LookupError`` names what is wrong."""
    if name not in ENTRIES:
        raise LookupError(f"unknown benchmark {name!r}")
    return dispatch.load(name, ENTRIES[name].target)


def main(argv: list[str] | None = None) -> int:
    return dispatch.dispatch(argv, ENTRIES, usage(), "benchmark")
