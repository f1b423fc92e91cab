"""``register.py interactive``: a numbered menu for people who prefer prompts to flags.

Questions are rich prompts (``rich.prompt``: styled, yes/no questions re-asked until answered
y or n). Each choice turns the answers into the same argv the command line takes, parses it with
the same parser and runs the same handler, so the menu can never drift from the CLI. Errors are
shown and the menu continues; an empty answer, ``q`` or end of input leaves it.

Before renting, the menu picks the machine as ``allocate`` would, shows it (GPUs, its miner, the
term and the price per hour it asks) and rents exactly that one only once the renter says yes
(``interactive --yes`` skips the question, for scripts).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.prompt import Confirm, Prompt

from compute.argv import ArgvError
from compute.operator.commands import HANDLERS, check_args, parse_duration, wanted_from
from compute.operator.discovery import rank
from compute.operator.errors import EXIT_OK, NoMatchingMachine, OperatorError
from compute.operator.output import price_text
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
        _flag(argv, "--ttl", await ask("Term, e.g. 90m, 2h, 3d [dim](blank: 1h)[/]"))
        _flag(argv, "--hotkey", await ask("Miner hotkey [dim](blank: best match)[/]"))
        _flag(argv, "--ssh-key", await ask("Public key file [dim](blank: create a key pair)[/]"))
        _flag(argv, "--volume", await ask("Persistent volume NAME[:SIZE_GB] [dim](blank: none)[/]"))
    if command == "list" and await confirm("Ask the miners for fresh state?"):
        argv.append("--refresh")
    if command in ("status", "extend", "exchange-key", "restart", "deallocate"):
        argv.append((await ask("Lease id")).strip() or "-")
    if command == "extend":
        _flag(argv, "--ttl", await ask("Time to add, e.g. 90m, 2h"))
    if command == "volume-delete":
        argv.append((await ask("Volume name")).strip() or "-")
    if command == "exchange-key":
        _flag(argv, "--ssh-key", await ask("New public key file [dim](blank: create a key pair)[/]"))
    return argv


async def _chosen(op: Operator, args: argparse.Namespace) -> str:
    """Pick the machine ``allocate`` would rent, pin ``args`` to it; a sentence naming it."""
    duration = parse_duration(args.hours, args.duration, ttl=args.ttl, until=args.until)
    wanted = wanted_from(args, available_only=True)
    if wanted.volume is not None and args.uid is None and args.hotkey is None:
        return f"a machine of the miner holding volume {wanted.volume.name}, for {duration / 3600:g} h"
    found = rank(await op.resources(wanted), wanted)
    if args.uid is not None or args.hotkey is not None:
        found = [m for m in found if m.uid == args.uid or m.hotkey == args.hotkey]
    if not found:
        raise NoMatchingMachine("no available machine matches what you asked")
    machine = found[0]
    args.uid, args.hotkey = None, machine.hotkey  # rent exactly the machine shown
    gpus = f"{wanted.gpu_count} x {machine.gpu_model}" if wanted.gpu_count else "no GPU"
    return (
        f"{gpus} from miner uid {machine.uid} ({machine.hotkey[:10]}…), for {duration / 3600:g} h, "
        f"{price_text(machine.hourly_price(wanted.gpu_count))}"
    )


async def run_menu(
    op: Operator,
    parser: argparse.ArgumentParser,
    out: Console,
    ask: Ask | None = None,
    yes: bool = False,
) -> int:
    """Loop over the menu until the operator leaves; returns the exit code (always 0).

    ``ask`` replaces the rich text prompt (yes/no questions then take y/yes as yes); ``yes``
    rents without asking first."""

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
        except ArgvError as exc:
            out.print(f"[bold red]error[/] (usage): {for_rich(exc.line)}")
            continue
        except SystemExit:
            continue
        try:
            check_args(args)
            if command == "allocate" and not yes:
                if not await confirm(f"Rent {await _chosen(op, args)}?"):
                    out.print("Not rented.")
                    continue
            (await HANDLERS[command](op, args)).render(out)
        except EOFError:
            return EXIT_OK
        except OperatorError as exc:
            out.print(f"[bold red]error[/] ({exc.code}): {for_rich(exc.message)}")
