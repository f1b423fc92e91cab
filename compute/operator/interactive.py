"""``register.py interactive``: a numbered menu for people who prefer prompts to flags.

Questions are rich prompts (``rich.prompt``: styled, yes/no questions re-asked until answered
y or n). Each choice turns the answers into the same argv the command line takes, parses it with
the same parser and runs the same handler, so the menu can never drift from the CLI. Errors are
shown and the menu continues; an empty answer, ``q`` or end of input leaves it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.prompt import Confirm, Prompt

from compute.operator.commands import HANDLERS
from compute.operator.errors import EXIT_OK, OperatorError
from compute.operator.service import Operator
from compute.peertext import for_rich

Ask = Callable[[str], Awaitable[str]]
Confirmer = Callable[[str], Awaitable[bool]]

_MENU = (
    ("1", "resources", "List rentable machines"),
    ("2", "allocate", "Rent a machine"),
    ("3", "list", "My leases"),
    ("4", "status", "Lease status"),
    ("5", "extend", "Extend a lease"),
    ("6", "exchange-key", "Replace a lease's SSH key"),
    ("7", "restart", "Restart a lease"),
    ("8", "deallocate", "End a lease"),
    ("9", "volumes", "My persistent volumes"),
    ("10", "volume-delete", "Delete a volume and its data"),
)


def _flag(argv: list[str], flag: str, value: str) -> None:
    if value.strip():
        argv += [flag, value.strip()]


async def _questions(command: str, ask: Ask, confirm: Confirmer) -> list[str]:
    """The argv for ``command`` built from the operator's answers."""
    argv = [command]
    if command in ("resources", "allocate"):
        _flag(argv, "--gpu-model", await ask("GPU model [dim](blank: any)[/]"))
        _flag(argv, "--gpu-count", await ask("GPU count [dim](blank: any)[/]"))
    if command == "resources" and await confirm("Only available machines?"):
        argv.append("--available-only")
    if command == "allocate":
        _flag(argv, "--hours", await ask("Hours [dim](blank: 1)[/]"))
        _flag(argv, "--hotkey", await ask("Miner hotkey [dim](blank: best match)[/]"))
        _flag(argv, "--ssh-key", await ask("Public key file [dim](blank: create a key pair)[/]"))
        _flag(argv, "--volume", await ask("Persistent volume NAME[:SIZE_GB] [dim](blank: none)[/]"))
    if command == "list" and await confirm("Ask the miners for fresh state?"):
        argv.append("--refresh")
    if command in ("status", "extend", "exchange-key", "restart", "deallocate"):
        argv.append((await ask("Lease id")).strip() or "-")
    if command == "extend":
        _flag(argv, "--hours", await ask("Hours to add"))
    if command == "volume-delete":
        argv.append((await ask("Volume name")).strip() or "-")
    if command == "exchange-key":
        _flag(argv, "--ssh-key", await ask("New public key file [dim](blank: create a key pair)[/]"))
    return argv


async def run_menu(
    op: Operator, parser: argparse.ArgumentParser, out: Console, ask: Ask | None = None
) -> int:
    """Loop over the menu until the operator leaves; returns the exit code (always 0).

    ``ask`` replaces the rich text prompt (yes/no questions then take y/yes as yes)."""

    async def rich_ask(text: str) -> str:
        return await asyncio.to_thread(Prompt.ask, text, console=out, default="", show_default=False)

    async def rich_confirm(text: str) -> bool:
        return await asyncio.to_thread(Confirm.ask, text, console=out, default=False)

    async def plain_confirm(text: str) -> bool:
        return (await prompt(f"{text} [y/N]")).strip().lower() in ("y", "yes")

    prompt: Ask = ask or rich_ask
    confirm: Confirmer = plain_confirm if ask else rich_confirm

    by_key = {key: command for key, command, _ in _MENU} | {command: command for _, command, _ in _MENU}
    while True:
        out.print()
        for key, _, label in _MENU:
            out.print(f"  {key}) {label}")
        out.print("  q) Quit")
        try:
            choice = (await prompt("[bold]Choice[/]")).strip().lower()
        except EOFError:
            return EXIT_OK
        if choice in ("", "q", "quit", "exit"):
            return EXIT_OK
        command = by_key.get(choice)
        if command is None:
            out.print(f"Unknown choice {for_rich(choice)!r}.")
            continue
        try:
            args = parser.parse_args(await _questions(command, prompt, confirm))
        except EOFError:
            return EXIT_OK
        except SystemExit:
            continue  # argparse already printed what was wrong
        try:
            (await HANDLERS[command](op, args)).render(out)
        except OperatorError as exc:
            out.print(f"[bold red]error[/] ({exc.code}): {for_rich(exc.message)}")
