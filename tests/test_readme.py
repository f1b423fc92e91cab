"""The README is the contract: every command-line flag of every entry point is documented there."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from compute.__main__ import main as compute_main
from compute.operator import main as register_main
from compute.pog.__main__ import main as pog_main
from neurons.miner import main as miner_main
from neurons.validator import main as validator_main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_.-]*[a-z0-9]")

COMMANDS = {
    "neurons/miner.py": (miner_main, []),
    "neurons/validator.py": (validator_main, []),
    **{
        f"neurons/register.py {sub}": (register_main, [sub])
        for sub in (
            "resources",
            "allocate",
            "list",
            "extend",
            "deallocate",
            "exchange-key",
            "restart",
            "status",
            "interactive",
        )
    },
    **{
        f"python -m compute {cmd}": (compute_main, cmd.split())
        for cmd in (
            "localnet",
            "chain create",
            "chain register",
            "chain show",
            "chain weights",
            "bench-transport",
            "bench-allocation",
            "bench-validator",
        )
    },
    "python -m compute.pog bench": (pog_main, ["bench"]),
    "python -m compute.pog worker": (pog_main, ["worker"]),
}


def help_flags(main, prefix: list[str]) -> set[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main([*prefix, "--help"], **({"stdout": out} if main is register_main else {}))
        except SystemExit as exited:
            code = exited.code
    assert code in (0, None)
    return set(FLAG.findall(out.getvalue())) - {"--help"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_of_the_command_is_in_the_readme(command: str) -> None:
    main, prefix = COMMANDS[command]
    flags = help_flags(main, prefix)
    assert flags, f"{command} --help listed no flags"
    missing = sorted(flag for flag in flags if flag not in README)
    assert not missing, f"{command}: flags missing from README.md: {missing}"


def test_readme_names_both_commands() -> None:
    assert "python -m compute localnet --miners 3 --rounds 1" in README
    assert "python -m pytest -q" in README
