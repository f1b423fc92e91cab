"""``python -m compute <command> ...``: dispatch to each package's command-line entry point.

Commands are looked up in :data:`COMMANDS` (name -> ``"module:function"``) and the
module is imported only when its command runs, so one broken or absent package
never breaks the others. Each target is ``main(argv: list[str] | None) -> int``.
To add a command, add one line to :data:`COMMANDS`.
"""

from __future__ import annotations

import importlib
import sys

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
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: python -m compute <command> [args...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "run `python -m compute <command> --help` for a command's options"]
    return "\n".join(lines)


def resolve(name: str):
    """The entry-point function for ``name``; raises ``LookupError`` with a readable reason."""
    if name not in COMMANDS:
        raise LookupError(f"unknown command {name!r}")
    target = COMMANDS[name][0]
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


if __name__ == "__main__":
    sys.exit(main())
