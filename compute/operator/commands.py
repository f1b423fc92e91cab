"""One async handler per subcommand: parsed flags in, a ``Result`` (JSON payload + renderer) out.

The handlers translate flags into ``Operator`` calls and shape the answer; the entry point
(``compute.operator.cli``) decides whether the payload is printed as JSON or drawn as tables.
Parsing helpers for durations and lease ids live here because every handler shares them.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from compute.operator.book import BookEntry, LeaseBook
from compute.operator.discovery import Wanted
from compute.operator.errors import LeaseNotFound, UsageError
from compute.operator.keys import load_public_key
from compute.operator.output import (
    health_json,
    lease_json,
    link_json,
    link_line,
    machine_json,
    show_lease,
    show_leases,
    show_machines,
)
from compute.operator.output_templates import show_templates, templates_json
from compute.operator.output_volumes import show_volumes, volumes_json
from compute.operator.rpc import MinerRef
from compute.operator.service import Operator
from compute.operator.templates import offered_templates
from compute.operator.volumes import (
    book_miners,
    delete_volume,
    list_volumes,
    miner_with_volume,
    parse_volume,
    volume_name,
)
from compute.peertext import printable
from compute.protocol import MAX_LEASE_SECONDS, MIN_IDLE_SECONDS, MIN_LEASE_SECONDS, Requirements

LEASE_HELP = "lease id (or a unique prefix of one in your book; `last`: your newest active lease)"
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_HEX_RE = re.compile(r"^[0-9a-f]{4,32}$")


@dataclass(frozen=True)
class Result:
    payload: dict[str, Any]
    render: Callable[[Console], None] = field(default=lambda console: None)
    exit_code: int = 0  # 0, or a remote command's status (exec, ssh)


def duration_seconds(text: str, flag: str = "--duration") -> float:
    """``90m``, ``2h``, ``3d``, ``1w`` or plain seconds."""
    match = _DURATION_RE.match(text)
    if match is None:
        raise UsageError(f"{flag} {text!r}: expected a number with s, m, h, d or w (e.g. 90m, 2h)")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def parse_until(text: str, now: float) -> float:
    """The moment ``--until`` names, as a Unix time: ``2026-12-01T18:00`` (ISO 8601, local time
    unless it carries ``Z`` or an offset), ``18:30`` (the next such local time) or Unix seconds."""
    value = text.strip()
    if re.fullmatch(r"\d{9,11}(\.\d+)?", value):
        moment = float(value)
    elif match := re.fullmatch(r"(\d{1,2}):(\d{2})", value):
        local = datetime.fromtimestamp(now).astimezone()
        try:
            target = local.replace(
                hour=int(match.group(1)), minute=int(match.group(2)), second=0, microsecond=0
            )
        except ValueError:
            raise UsageError(f"--until {text!r}: not a time of day (HH:MM)") from None
        if target.timestamp() <= now:
            target += timedelta(days=1)
        moment = target.timestamp()
    else:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"--until {text!r}: expected an ISO time (2026-12-01T18:00, +02:00 or Z), HH:MM, or Unix seconds"
            ) from None
        moment = (parsed if parsed.tzinfo else parsed.astimezone()).timestamp()
    if moment <= now:
        raise UsageError(f"--until {text!r} is in the past")
    return moment


def parse_duration(
    hours: float | None,
    duration: str | None,
    default_s: int | None = 3600,
    *,
    ttl: str | None = None,
    until: str | None = None,
    now: float | None = None,
    base: float | None = None,
) -> int:
    """Seconds from ``--hours H``, ``--duration``/``--ttl 90m|2h|3d|3600`` or ``--until TIME``
    (counted from ``base``, default now); bounded like the protocol."""
    given = [
        name
        for name, v in (("--hours", hours), ("--duration", duration), ("--ttl", ttl), ("--until", until))
        if v is not None
    ]
    if len(given) > 1:
        raise UsageError(f"give {' or '.join(given)}, not {'both' if len(given) == 2 else 'several'}")
    if hours is not None:
        seconds = hours * 3600
    elif duration is not None or ttl is not None:
        seconds = duration_seconds(duration or ttl or "", "--duration" if duration is not None else "--ttl")
    elif until is not None:
        clock = time.time() if now is None else now
        seconds = math.ceil(parse_until(until, clock) - (clock if base is None else base))
        if seconds <= 0:
            raise UsageError(f"--until {until!r} is not after the lease's current end")
    elif default_s is not None:
        seconds = default_s
    else:
        raise UsageError("say how long: --ttl 2h (or --until TIME)")
    if not MIN_LEASE_SECONDS <= seconds <= MAX_LEASE_SECONDS:
        raise UsageError(
            f"duration must be between {MIN_LEASE_SECONDS} s and {MAX_LEASE_SECONDS // 86400} days"
        )
    return int(seconds)


def resolve_lease_id(book: LeaseBook, owner: str, text: str) -> str:
    """A full lease id, a unique prefix (at least 4 hex chars) of one of the owner's leases, or
    ``last``: the owner's newest active lease."""
    lease = text.strip().lower()
    if lease == "last":
        newest = book.entries(owner)
        if not newest:
            raise LeaseNotFound("you have no active lease (`last` names your newest one)")
        return newest[0].lease_id
    check_lease_text(text)
    if len(lease) == 32:
        return lease
    found = [e.lease_id for e in book.entries(owner, include_ended=True) if e.lease_id.startswith(lease)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LeaseNotFound(f"no lease of yours starts with {lease}")
    raise UsageError(f"{lease} matches {len(found)} leases; give more characters")


def check_lease_text(text: str) -> None:
    """A lease id, a prefix of one (4 to 32 hex characters) or ``last``; ``UsageError`` otherwise."""
    lease = text.strip().lower()
    if lease != "last" and not _HEX_RE.match(lease):
        raise UsageError(
            f"{printable(text, 80)!r} is not a lease id (32 hex characters, a unique prefix, or last)"
        )


def wanted_from(args: argparse.Namespace, available_only: bool = False) -> Wanted:
    return Wanted(
        gpu_model=args.gpu_model,
        gpu_count=args.gpu_count or 0,
        gpu_memory_gb=args.gpu_memory or 0.0,
        cpu=args.cpu or 0,
        ram_gb=args.ram or 0.0,
        disk_gb=args.disk or 0.0,
        extra_ports=getattr(args, "ports", 0) or 0,
        available_only=available_only or bool(getattr(args, "available_only", False)),
        template=_template_name(getattr(args, "template", None)),
        volume=parse_volume(args.volume) if getattr(args, "volume", None) else None,
        idle_stop_s=idle_after(getattr(args, "idle_after", None)),
        max_price=getattr(args, "max_price", None),
    )


def idle_after(text: str | None) -> int | None:
    """``--idle-after 2h``: seconds, at least the protocol's minimum (10 minutes)."""
    if text is None:
        return None
    seconds = int(duration_seconds(text, "--idle-after"))
    if not MIN_IDLE_SECONDS <= seconds <= MAX_LEASE_SECONDS:
        raise UsageError(
            f"--idle-after must be between {MIN_IDLE_SECONDS // 60} minutes and {MAX_LEASE_SECONDS // 86400} days"
        )
    return seconds


def _template_name(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return Requirements(template=name).template
    except ValidationError:
        raise UsageError(
            f"--template {name!r} is not a template name (a-z, 0-9, '._-', at most 48)"
        ) from None


def check_args(args: argparse.Namespace) -> None:
    """Refuse bad values of a parsed command line with ``UsageError`` before anything is done:
    terms, idle stops, templates, volumes, machine requirements, lease ids, key files, URLs."""
    command = getattr(args, "command", None)
    if command == "allocate":
        parse_duration(args.hours, args.duration, ttl=args.ttl, until=args.until)
        _requirements(wanted_from(args))
        if args.ssh_key:
            load_public_key(args.ssh_key)
    elif command == "resources":
        _requirements(wanted_from(args))
    elif command == "extend":
        given = [v for v in (args.hours, args.duration, args.ttl, args.until) if v is not None]
        if not given:
            raise UsageError("say how much time to add: --ttl 2h (or --until TIME)")
        if len(given) > 1:
            parse_duration(args.hours, args.duration, None, ttl=args.ttl, until=args.until)  # "not both"
        if args.until is not None:
            parse_until(args.until, time.time())  # its form; how much it adds depends on the lease's end
        else:
            parse_duration(args.hours, args.duration, None, ttl=args.ttl)
    if command in ("resources", "allocate") and getattr(args, "feed", None):
        from compute.operator.feed import feed_url

        feed_url(args.feed)
    if getattr(args, "lease", None) is not None:
        check_lease_text(args.lease)
    if command == "volume-delete":
        volume_name(args.name)
    if command == "exchange-key" and args.ssh_key:
        load_public_key(args.ssh_key)


def _requirements(wanted: Wanted) -> None:
    try:
        wanted.requirements()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise UsageError(f"machine requirement {where}: {first.get('msg')}") from None


async def _miner_override(op: Operator, args: argparse.Namespace) -> MinerRef | None:
    uid, hotkey = getattr(args, "uid", None), getattr(args, "miner_hotkey", None)
    if uid is None and hotkey is None:
        return None
    return await op.find_miner(uid=uid, hotkey=hotkey)


def _lease_result(op: Operator, entry: BookEntry, title: str) -> Result:
    now = time.time()
    command = op.ssh_command(entry)
    idle = op.lease_idle.get(entry.lease_id)
    return Result(
        {"lease": lease_json(entry, command, now, idle), "ssh_command": command},
        lambda console: show_lease(console, entry, command, now, title, idle),
    )


async def cmd_resources(op: Operator, args: argparse.Namespace) -> Result:
    machines = await op.resources(wanted_from(args))
    covers = await op.covers([m.hotkey for m in machines if m.online])
    payload: dict = {"machines": [machine_json(m) for m in machines]}
    if covers:
        payload["collateral"] = {hotkey: cover.json() for hotkey, cover in covers.items()}

    def render(console: Console) -> None:
        show_machines(console, machines)
        for m in machines:
            if m.hotkey in covers:
                console.print(f"uid {m.uid}: {covers[m.hotkey].line()}", highlight=False)

    return Result(payload, render)


async def cmd_templates(op: Operator, args: argparse.Namespace) -> Result:
    if args.uid is not None or args.hotkey is not None:
        miners = [await op.find_miner(uid=args.uid, hotkey=args.hotkey)]
    else:
        miners = await op.miners()
    found = await offered_templates(op.client, miners, op.concurrency, op.deadline_s)
    payload = {"miners": [templates_json(f) for f in found]}
    return Result(payload, lambda console: show_templates(console, found))


async def cmd_allocate(op: Operator, args: argparse.Namespace) -> Result:
    duration = parse_duration(args.hours, args.duration, ttl=args.ttl, until=args.until)
    key = load_public_key(args.ssh_key) if args.ssh_key else None
    wanted = wanted_from(args)
    target = None
    if args.uid is not None or args.hotkey is not None:
        target = await op.find_miner(uid=args.uid, hotkey=args.hotkey)
    elif wanted.volume is not None:  # a volume lives on one miner: go back to the one holding it
        held = miner_with_volume(op.book, op.hotkey, wanted.volume.name)
        target = await op.find_miner(hotkey=held.hotkey) if held is not None else None
    try:
        allocation = await op.allocate_or_undo(wanted, duration, key, target)
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM: what the request made is released first
        report_undone(op, args)
        raise
    result = _lease_result(op, allocation.entry, "Lease allocated")
    result.payload.update(machine=machine_json(allocation.machine), skipped=list(allocation.skipped))
    if allocation.cover is not None:
        cover, shown = allocation.cover, result.render
        result.payload["collateral"] = cover.json()

        def render(console: Console) -> None:
            shown(console)
            console.print(f"Miner's {cover.line()}", highlight=False)

        return Result(result.payload, render, result.exit_code)
    return result


def report_undone(op: Operator, args: argparse.Namespace) -> None:
    """One line per lease an interrupted allocate made and released (or could not), on stderr."""
    stream = getattr(args, "err_stream", None) or sys.stderr
    lines = []
    for done in op.undone:
        lease = done.lease_id or "no lease"
        if done.state in ("released", "expired"):
            lines.append(
                f"interrupted: lease {lease} (miner {done.miner_hotkey[:10]}…) was made and is {done.state}"
            )
        elif done.problem:
            lines.append(
                f"interrupted: {lease} on miner {done.miner_hotkey[:10]}… could not be settled ({done.problem}); "
                "`register.py list --refresh` settles it"
            )
    print("\n".join(lines) or "interrupted: no lease was made", file=stream, flush=True)
    args.interrupt_reported = True


async def cmd_list(op: Operator, args: argparse.Namespace) -> Result:
    everywhere = bool(getattr(args, "all_miners", False))
    entries, problems = await op.leases(
        refresh=args.refresh or everywhere, include_ended=args.all, everywhere=everywhere
    )
    now = time.time()
    adopted = [e.lease_id for e in op.adopted]
    unsettled = len(op.book.intents(op.hotkey))
    clusters = _clusters(op, {e.lease_id for e in entries})
    payload = {
        "leases": [
            {
                **lease_json(e, op.ssh_command(e), now, op.lease_idle.get(e.lease_id)),
                "health": health_json(op.lease_health.get(e.lease_id)),
            }
            for e in entries
        ],
        "problems": problems,
        "adopted": adopted,
        "unsettled": unsettled,
        "clusters": clusters,
    }

    def render(console: Console) -> None:
        show_leases(console, entries, now, problems, op.lease_health)
        if adopted:
            console.print(
                f"Adopted {len(adopted)} lease(s) the miners hold for this hotkey that the book did not know "
                "(opened with your default SSH keys): " + ", ".join(adopted),
                highlight=False,
            )
        if unsettled:
            console.print(
                f"{unsettled} interrupted allocation(s) not yet settled: `list --refresh` releases what they made",
                highlight=False,
            )
        for cluster in clusters:
            console.print(
                f"Cluster {cluster['cluster_id']} ({cluster['state']}): leases by rank "
                + ", ".join(cluster["lease_ids"]),
                highlight=False,
            )
            console.print(
                f"  {link_line(cluster['link'], cluster['cluster_id'])}", highlight=False, markup=False
            )

    return Result(payload, render)


def _clusters(op: Operator, listed: set[str]) -> list[dict[str, Any]]:
    """The clusters (``allocate --nodes``) with a member among the listed leases."""
    shown = []
    for record in op.book.clusters(op.hotkey):
        if not listed.intersection(record.lease_ids):
            continue
        states = [(e.state if (e := op.book.get(i)) is not None else "unknown") for i in record.lease_ids]
        state = "active" if "active" in states else states[0]
        link = link_json(op.book.last_link(record.cluster_id))
        shown.append(
            {
                "cluster_id": record.cluster_id,
                "lease_ids": list(record.lease_ids),
                "state": state,
                "link": link,
            }
        )
    return shown


async def cmd_status(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    return _lease_result(op, await op.status(lease, await _miner_override(op, args)), "Lease status")


async def cmd_extend(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    entry = op.book.get(lease)
    base = entry.expires_at if entry is not None else None  # --until: up to that moment
    duration = parse_duration(args.hours, args.duration, None, ttl=args.ttl, until=args.until, base=base)
    entry = await op.extend(lease, duration, await _miner_override(op, args))
    return _lease_result(op, entry, "Lease extended")


async def cmd_restart(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    entry = await op.restart(lease, await _miner_override(op, args))
    return _lease_result(op, entry, "Lease restarted")


async def cmd_exchange_key(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    key = load_public_key(args.ssh_key) if args.ssh_key else None
    entry = await op.exchange_key(lease, key, await _miner_override(op, args))
    return _lease_result(op, entry, "SSH key exchanged")


async def cmd_deallocate(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    await op.deallocate(lease, await _miner_override(op, args))
    return Result(
        {"lease_id": lease, "state": "released"},
        lambda console: console.print(f"Lease {lease} released."),
    )


async def cmd_volumes(op: Operator, args: argparse.Namespace) -> Result:
    if args.uid is not None or args.hotkey is not None:
        miners = [await op.find_miner(uid=args.uid, hotkey=args.hotkey)]
    else:
        miners = book_miners(op.book, op.hotkey)
    found = await list_volumes(op.client, miners, op.concurrency, op.deadline_s)
    return Result({"miners": [volumes_json(f) for f in found]}, lambda console: show_volumes(console, found))


async def cmd_volume_delete(op: Operator, args: argparse.Namespace) -> Result:
    name = volume_name(args.name)
    if args.uid is not None or args.hotkey is not None:
        miner = await op.find_miner(uid=args.uid, hotkey=args.hotkey)
    else:
        held = miner_with_volume(op.book, op.hotkey, name)
        if held is None:
            raise UsageError(
                f"no lease in your book used volume {name!r}; name its miner with --hotkey or --uid"
            )
        miner = await op.find_miner(hotkey=held.hotkey)
    await delete_volume(op.client, miner, name)
    return Result(
        {"name": name, "miner_hotkey": miner.hotkey, "deleted": True},
        lambda console: console.print(f"Volume {name} deleted on miner {miner.label()}."),
    )


Handler = Callable[[Operator, argparse.Namespace], Awaitable[Result]]

HANDLERS: dict[str, Handler] = {
    "resources": cmd_resources,
    "templates": cmd_templates,
    "allocate": cmd_allocate,
    "list": cmd_list,
    "status": cmd_status,
    "extend": cmd_extend,
    "restart": cmd_restart,
    "exchange-key": cmd_exchange_key,
    "deallocate": cmd_deallocate,
    "volumes": cmd_volumes,
    "volume-delete": cmd_volume_delete,
}
