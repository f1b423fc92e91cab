"""What the operator sees: rich tables for people, plain JSON-ready dicts for programs.

``*_json`` functions turn machines and lease-book entries into JSON-serialisable dicts (the
``--json`` output, stable keys); ``show_*`` functions draw them on a ``rich`` console handed in by
the entry point. Nothing here decides anything or talks to miners.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from compute.operator.book import BookEntry, LinkRecord
from compute.operator.discovery import Machine, VerifiedGpus
from compute.peertext import for_rich
from compute.protocol import VOLUME_MOUNT_PATH, LeaseHealth, LeaseIdle, Price


def duration_text(seconds: float) -> str:
    seconds = int(max(0, seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {seconds % 60:02d}s"


def price_text(usd_per_hour: float | None) -> str:
    """``$2.55/h``, or what to say when the miner names no price."""
    return "no price named" if usd_per_hour is None else f"${usd_per_hour:.4g}/h"


def price_json(price: Price | None) -> dict[str, Any] | None:
    """The miner's signed asking price (USD per hour): per lease and per GPU, by GPU name."""
    return None if price is None else price.model_dump()


def _price_cell(machine: Machine) -> str:
    if machine.price is None:
        return "-"
    per_gpu = sorted({machine.price.gpu_hour[n] for n in machine.gpu_names if n in machine.price.gpu_hour})
    parts = [f"${p:.4g}/GPU-h" for p in per_gpu]
    if machine.price.base_hour or not parts:
        parts.append(f"${machine.price.base_hour:.4g}/h")
    return " + ".join(parts)


def machine_json(machine: Machine) -> dict[str, Any]:
    return {
        "uid": machine.uid,
        "hotkey": machine.hotkey,
        "endpoint": machine.endpoint,
        "state": machine.state,
        "online": machine.online,
        "verified": machine.verified,
        "gpu_model": machine.gpu_model,
        "gpu_count": machine.gpu_count,
        "gpu_memory_gb": machine.gpu_memory_gb,
        "cpu": machine.cpu,
        "ram_gb": machine.ram_gb,
        "disk_free_gb": machine.disk_gb,
        "disk_cap": machine.disk_cap,
        "available": machine.available,
        "free_gpus": machine.free_gpus,
        "active_leases": machine.active_leases,
        "max_duration_s": machine.max_duration_s,
        "backend": machine.backend,
        "version": machine.version,
        "refused_us": machine.refused_us,
        "error": machine.error,
        "proven": proof_json(machine.proof),
        "price": price_json(machine.price),
        "price_per_hour_all_gpus": machine.hourly_price(machine.gpu_count),
    }


def proof_json(proof: VerifiedGpus | None) -> dict[str, Any] | None:
    """The validator-proved figures (None when no validator proved this machine)."""
    if proof is None:
        return None
    return {
        "gpu_model": proof.gpu_model,
        "gpu_count": proof.gpu_count,
        "tflops_fp16": proof.tflops_fp16,
        "tflops_fp32": proof.tflops_fp32,
        "memory_gb": proof.memory_gb,
        "bandwidth_gbs": proof.bandwidth_gbs,
        "verified_at": proof.verified_at,
        "uptime_7d": proof.uptime_7d,
        "uptime_30d": proof.uptime_30d,
        "first_proven_at": proof.first_proven_at,
        "seen_state": proof.seen_state,
        "seen_at": proof.seen_at,
        "feed_price_per_hour": proof.feed_price_hour,
    }


def idle_json(idle: LeaseIdle | None) -> dict[str, Any] | None:
    """The miner's idle watch of a lease with an idle stop (None: no idle stop, or not heard yet)."""
    return None if idle is None else idle.model_dump()


def idle_text(idle: LeaseIdle, now: float) -> str:
    if idle.stopped:
        return f"ended by its idle stop ({duration_text(idle.stop_after_s)} idle)"
    since = f"idle for {duration_text(now - idle.idle_since)}" if idle.idle_since is not None else "active"
    seen = f"; last check: {idle.seen}" if idle.seen else ""
    return f"stops after {duration_text(idle.stop_after_s)} idle; {since}{seen}"


def lease_json(
    entry: BookEntry, ssh_command: str | None, now: float, idle: LeaseIdle | None = None
) -> dict[str, Any]:
    return {
        "lease_id": entry.lease_id,
        "state": entry.state,
        "owner_hotkey": entry.owner_hotkey,
        "miner_uid": entry.miner_uid,
        "miner_hotkey": entry.miner_hotkey,
        "endpoint": entry.endpoint,
        "verified": entry.verified,
        "gpus": entry.gpu_summary,
        "requirements": entry.requirements,
        "ssh": {
            "host": entry.ssh_host,
            "port": entry.ssh_port,
            "username": entry.ssh_username,
            "host_key": entry.host_key,
            "ports": {str(k): v for k, v in entry.ports.items()},
            "known_hosts_file": entry.known_hosts_path,
            "private_key_file": entry.private_key_path,
            "public_key": entry.public_key,
            "key_generated": entry.key_generated,
        },
        "ssh_command": ssh_command,
        "created_at": entry.created_at,
        "expires_at": entry.expires_at,
        "time_left_s": round(entry.time_left(now), 1),
        "idle": idle_json(idle),
        "price_per_hour": entry.price_per_hour,
        "spent_usd": entry.spent(now),
    }


def _gpu_cell(machine: Machine) -> str:
    if not machine.gpu_count:
        return "-" if machine.online else "?"
    text = for_rich(f"{machine.gpu_count} x {machine.gpu_model}")
    return text if machine.verified else f"{text} [yellow](unverified)[/]"


_STATE_STYLE = {
    "free": "green",
    "partly rented": "yellow",
    "rented": "red",
    "offline": "dim",
    "refused": "red",
}


_PROOF_COLUMNS = (
    "Proven TFLOPS fp16/fp32",
    "Proven mem",
    "Proven BW",
    "Verified",
    "Uptime 7d/30d",
    "Validator saw",
)


def _sig(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.3g}{unit}"


def _proof_cells(proof: VerifiedGpus | None, now: float) -> tuple[str, ...]:
    """The validator's figures for a machine; '-' everywhere when none proved it."""
    if proof is None:
        return ("-",) * len(_PROOF_COLUMNS)
    return (
        f"{_sig(proof.tflops_fp16)} / {_sig(proof.tflops_fp32)}",
        _sig(proof.memory_gb, " GB"),
        _sig(proof.bandwidth_gbs, " GB/s"),
        duration_text(now - proof.verified_at) + " ago",
        f"{_pct(proof.uptime_7d)} / {_pct(proof.uptime_30d)}",
        f"{proof.seen_state} {duration_text(now - proof.seen_at)} ago"
        if proof.seen_state and proof.seen_at is not None
        else "-",
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


_DISK_CAP = {"kernel": "held", "watched": "[yellow]watched[/]", "refused": "[red]refused[/]"}


def show_machines(console: Console, machines: list[Machine]) -> None:
    if not machines:
        console.print("No machine matches.")
        return
    table = Table(title=f"Rentable machines ({len(machines)})")
    columns = ("UID", "Hotkey", "GPUs", "GPU mem", "CPU", "RAM", "Disk free", "Disk cap", "State", "Price")
    for column in columns + _PROOF_COLUMNS:
        table.add_column(column)
    now = time.time()
    for m in machines:
        style = _STATE_STYLE.get(m.state, "")
        table.add_row(
            str(m.uid),
            m.hotkey[:12] + "…",
            _gpu_cell(m),
            f"{m.gpu_memory_gb:g} GiB" if m.gpu_count else "-",
            str(m.cpu) if m.online else "?",
            f"{m.ram_gb:g} GiB" if m.online else "?",
            f"{m.disk_gb:g} GB" if m.online else "?",
            _DISK_CAP.get(m.disk_cap or "", "?") if m.online else "?",
            f"[{style}]{m.state}[/]" if style else m.state,
            _price_cell(m),
            *_proof_cells(m.proof, now),
        )
    console.print(table)
    if not any(m.proof for m in machines):
        console.print(
            "[dim]No validator-proved figures: pass --feed URL (a validator's machine feed), "
            "--register.dashboard URL, --register.pog_db or --validator.data_dir.[/]"
        )
    refusals = [m for m in machines if m.refused_us]
    if refusals:
        console.print(
            f"[red]{len(refusals)} miner(s) refused this hotkey[/], e.g.: {for_rich(refusals[0].error or '')}"
        )


_HEALTH_STYLE = {"up": "green", "down": "yellow", "lost": "bold red"}


def health_json(health: LeaseHealth | None) -> dict[str, Any] | None:
    return None if health is None else health.model_dump()


def _health_cell(health: LeaseHealth | None, now: float) -> str:
    """Status and restarts the miner reported ('-': not refreshed, or an old miner)."""
    if health is None:
        return "-"
    text = f"[{_HEALTH_STYLE[health.status]}]{health.status}[/]"
    if health.down_since is not None:
        text += f" for {duration_text(now - health.down_since)}"
    return f"{text}, {health.restarts} restart(s)"


def _volume_text(entry: BookEntry) -> str | None:
    """``name (size GB)`` of the persistent volume the lease was asked with, or None."""
    volume = entry.requirements.get("volume") or {}
    if not volume.get("name"):
        return None
    size = volume.get("size_gb")
    return f"{volume['name']} ({_sig(size)} GB)" if size else str(volume["name"])


def show_leases(
    console: Console,
    entries: list[BookEntry],
    now: float,
    problems: dict[str, str],
    health: dict[str, LeaseHealth] | None = None,
) -> None:
    if not entries:
        console.print("No leases.")
        return
    health = health or {}
    table = Table(title=f"My leases ({len(entries)})")
    volumes = any(_volume_text(e) for e in entries)  # the column only where a lease has one
    priced = any(e.price_per_hour is not None for e in entries)
    for column in ("Lease", "Miner", "GPUs", "SSH", "State", "Health", "Time left"):
        table.add_column(column)
    if priced:
        table.add_column("Spent (price)")
    if volumes:
        table.add_column(f"Volume ({VOLUME_MOUNT_PATH})")
    for e in entries:
        ssh = for_rich(f"{e.ssh_username}@{e.ssh_host}:{e.ssh_port}") if e.ssh_host else "-"
        state = e.state if e.lease_id not in problems else f"{e.state} [red](unreachable)[/]"
        gpus = for_rich(e.gpu_summary) + ("" if e.verified else " (unverified)")
        cells = [
            e.lease_id,
            f"uid {e.miner_uid}",
            gpus,
            ssh,
            state,
            _health_cell(health.get(e.lease_id), now) if e.state == "active" else "-",
            duration_text(e.time_left(now)),
        ]
        if priced:
            spent = e.spent(now)
            cells.append("-" if spent is None else f"${spent:.2f} ({price_text(e.price_per_hour)})")
        if volumes:
            cells.append(for_rich(_volume_text(e) or "-"))
        table.add_row(*cells)
    console.print(table)
    for lease_id, status in health.items():
        if status.status == "lost":
            console.print(
                f"[bold red]{lease_id}[/]: down since {duration_text(now - (status.down_since or now))}"
                f" ago and reported lost by its miner: {for_rich(status.reason)}"
            )
    for lease_id, problem in problems.items():
        console.print(f"[red]{lease_id}[/]: {for_rich(problem)}")


def show_lease(
    console: Console,
    entry: BookEntry,
    ssh_command: str | None,
    now: float,
    title: str,
    idle: LeaseIdle | None = None,
) -> None:
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [
        ("Lease", entry.lease_id),
        ("State", entry.state),
        ("Miner", f"uid {entry.miner_uid}  {entry.miner_hotkey}  {entry.endpoint}"),
        ("GPUs", entry.gpu_summary + ("" if entry.verified else "  (unverified: not proved by PoG)")),
        ("Time left", duration_text(entry.time_left(now))),
        ("Private key", entry.private_key_path or "(your own key)"),
        ("Known hosts", entry.known_hosts_path or "-"),
    ]
    if entry.price_per_hour is not None:
        rows.append(
            ("Price", f"{price_text(entry.price_per_hour)}; spent so far ${entry.spent(now) or 0:.2f}")
        )
    if _volume_text(entry):
        rows.append(("Volume", f"{_volume_text(entry)} at {VOLUME_MOUNT_PATH}"))
    if entry.ports:
        rows.append(("Ports", ", ".join(f"{k} -> {v}" for k, v in sorted(entry.ports.items()))))
    if idle is not None:
        rows.append(("Idle stop", idle_text(idle, now)))
    for field, value in rows:
        table.add_row(field, for_rich(value))
    console.print(table)
    if ssh_command:
        console.print("Connect with:")
        console.print(ssh_command, markup=False, highlight=False, soft_wrap=True)


def link_json(record: LinkRecord | None) -> dict[str, Any] | None:
    """The renter's latest link proof of a cluster (``cluster check``), or None: never proven."""
    if record is None:
        return None
    shown = asdict(record)
    del shown["cluster_id"]  # the cluster it is shown with
    shown["failures"] = list(record.failures)
    return shown


def link_line(link: dict[str, Any] | None, cluster_id: str) -> str:
    """One line for a person: what the renter's own proof last said of the cluster's link."""
    if link is None:
        return f"link: not proven (register.py cluster check {cluster_id})"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(link["checked_at"]))
    if not link["passed"]:
        return f"link: your proof failed at {when}: " + "; ".join(link["failures"][:2])
    plain = f", a plain all-reduce {link['plain_gbs']:g} GB/s" if link["plain_gbs"] else ""
    return (
        f"link: proven by you at {link['bandwidth_gbs'] * 8:.4g} Gbit/s per link "
        f"({link['bandwidth_gbs']:g} GB/s, {link['vector_bytes'] / 1024**2:g} MiB{plain}) at {when}"
    )
