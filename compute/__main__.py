"""``python -m compute <command> ...``: dispatch to each package's command-line entry point.

Commands are looked up in :data:`COMMANDS` (name -> ``"module:function"``) and the
module is imported only when its command runs, so one broken or absent package
never breaks the others. Each target is ``main(argv: list[str] | None) -> int``.
To add a command, add one line to :data:`COMMANDS`.
"""

from __future__ import annotations

import sys

from compute import dispatch

COMMANDS: dict[str, tuple[str, str]] = {
    "chain": ("compute.chain.cli:main", "simulated chain: create, register, show, weights"),
    "localnet": ("compute.localnet:main", "run the local demo (simulated chain, miner, validator)"),
    "bench": ("compute.lab.cli:main", "benchmarks and simulators: `bench` alone lists them"),
    "collateral": (
        "compute.collateral.cli:main",
        "collateral contract: deposit, topup, reclaim, status, claim, build, devchain",
    ),
    "dashboard": ("compute.dashboard.cli:main", "serve a validator store's read-only dashboard"),
    "miner-report": ("compute.miner.verdicts:main", "the validators' verdicts on this miner and why"),
    "latency-proxy": (
        "compute.localnet.latency_proxy:main",
        "stdin/stdout <-> TCP with delay + jitter (a WAN)",
    ),
}


def usage() -> str:
    return dispatch.usage(
        "usage: python -m compute <command> [args...]",
        "commands:",
        COMMANDS,
        "run `python -m compute <command> --help` for a command's options",
    )


def resolve(name: str) -> dispatch.Main:
    """The entry-point function for ``name``; raises ``LookupError`` with a readable reason."""
    if name not in COMMANDS:
        raise LookupError(f"unknown command {name!r}")
    return dispatch.load(name, COMMANDS[name][0])


def main(argv: list[str] | None = None) -> int:
    return dispatch.dispatch(argv, COMMANDS, usage(), "command")


if __name__ == "__main__":
    sys.exit(main())
