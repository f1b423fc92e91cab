"""Two small SSH checks the validator makes on leases it did not create for PoG.

- :func:`host_key_answers`: does ``host:port`` answer SSH with exactly this pinned host key? The
  handshake proves the key before any authentication, so no login is needed (the validator does
  not hold a renter's key): a refused login after a verified host key means "alive".
- :func:`run_command`: log in with our own key (pinned host key) and run one command, as a renter
  would (the canary rental).

Both take ``source``: the local address to connect from (a canary's path: not the validator's own
address, when its operator gives it another).

What it deliberately does not do: decide what a failure is worth (``rentals.receipts`` / ``rentals.canary`` do).
"""

from __future__ import annotations

import asyncio
import logging

import asyncssh

log = logging.getLogger(__name__)


def _local(source: str | None) -> tuple[str, int] | None:
    return (source, 0) if source else None


async def host_key_answers(
    host: str, port: int, host_key: str, timeout: float, source: str | None = None
) -> str | None:
    """None when the endpoint answers with ``host_key``; otherwise why not."""
    try:
        pinned = asyncssh.import_public_key(host_key.strip())
    except (asyncssh.KeyImportError, ValueError) as exc:
        return f"host key does not parse: {exc}"
    try:
        conn = await asyncio.wait_for(
            asyncssh.connect(
                host,
                port,
                username="rental-probe",
                client_keys=[],
                known_hosts=([pinned], [], []),
                agent_path=None,
                password=None,
                kbdint_auth=False,
                config=(),
                connect_timeout=timeout,
                local_addr=_local(source),
            ),
            timeout,
        )
    except asyncssh.PermissionDenied:
        return None  # the host key verified before authentication was refused
    except asyncssh.HostKeyNotVerifiable:
        return f"{host}:{port} answers with another host key"
    except asyncio.TimeoutError:
        return f"{host}:{port} did not answer within {timeout:.0f}s"
    except (OSError, asyncssh.Error) as exc:
        return f"{host}:{port} unreachable: {exc}"
    conn.close()  # it let an unauthenticated client in: odd, but the host key matched
    return None


async def run_command(
    host: str,
    port: int,
    username: str,
    key: asyncssh.SSHKey,
    host_key: str,
    command: str,
    timeout: float,
    source: str | None = None,
) -> str:
    """Stdout of ``command`` run over SSH with ``key`` and the pinned ``host_key``; raises OSError
    or ``asyncssh.Error`` (or ``asyncio.TimeoutError``) when the lease does not work."""
    pinned = asyncssh.import_public_key(host_key.strip())
    conn = await asyncio.wait_for(
        asyncssh.connect(
            host,
            port,
            username=username,
            client_keys=[key],
            known_hosts=([pinned], [], []),
            agent_path=None,
            config=(),
            connect_timeout=timeout,
            local_addr=_local(source),
        ),
        timeout,
    )
    async with conn:
        result = await asyncio.wait_for(conn.run(command, check=False), timeout)
    out = result.stdout if isinstance(result.stdout, str) else (result.stdout or b"").decode(errors="replace")
    return out


__all__ = ["host_key_answers", "run_command"]
