"""Host-port helpers for rental backends: pick free ports in a range, detect an SSH banner.

Pure socket work on the local machine; it knows nothing about Docker or leases.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Iterable


def port_is_free(host: str, port: int) -> bool:
    """True when nothing on this machine is bound to ``host:port`` (TCP)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_ports(
    host: str, port_range: tuple[int, int], used: Iterable[int], count: int
) -> list[int] | None:
    """``count`` distinct free ports from ``port_range`` (inclusive), in random order; None if too few."""
    taken = set(used)
    low, high = port_range
    candidates = [port for port in range(low, high + 1) if port not in taken]
    random.shuffle(candidates)  # concurrent pickers (other processes) rarely collide
    chosen: list[int] = []
    for port in candidates:
        if port_is_free(host, port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    return None


async def ssh_banner(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """True when something on ``host:port`` speaks SSH (sends an ``SSH-`` identification line)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        line = await asyncio.wait_for(reader.readline(), timeout_s)
        return line.startswith(b"SSH-")
    except (OSError, asyncio.TimeoutError, ValueError):
        return False
    finally:
        writer.close()
