"""The renter's WireGuard overlay between a cluster's Docker members (``allocate --nodes N --overlay``).

A Docker lease's tenant policy keeps it from reaching other tenants, and gloo and NCCL advertise the
address of the interface they bind and pick their ports at run time, so published TCP ports alone
cannot carry a collective between containers. A member that asked for an overlay
(``Requirements.overlay``) gets a TUN device, NET_ADMIN in its own network namespace and one
published UDP port; this module makes each member a WireGuard interface (the host kernel's where
it has WireGuard, else userspace ``wireguard-go``; configured with ``wg`` and ``ip``) over the
member's pinned SSH session:

- the renter draws every member's key pair here and sends each private key on that member's SSH
  stdin (never on a command line); each member gets every other's public key, its published
  ``host:port`` as the endpoint and its overlay address (``10.77.0.<rank + 1>``) as its only
  allowed address, so only members reach each other, encrypted and authenticated;
- a member whose peer it cannot reach directly (a private address its miner did not open) still
  gets the peer's packets: WireGuard answers from the address a peer's handshake came from;
- the overlay counts as up when every member holds a handshake with every other, within
  ``timeout_s``; else ``OverlayFailed`` names each member's missing peers.

The job then binds the overlay: ``MASTER_ADDR`` is rank 0's overlay address, ``MASTER_PORT``
``OVERLAY_MASTER_PORT`` inside it, ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` ``wg0``
(``Cluster.env``). Deliberately not here: choosing or renting the members (``cluster``), and a link
figure (the overlay's encryption costs bandwidth; ``cluster check --ifname wg0`` measures it).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from compute.operator.book import BookEntry
from compute.operator.errors import Refused
from compute.operator.shell import LeaseAccess, LeaseShell

logger = logging.getLogger(__name__)

IFNAME = "wg0"
OVERLAY_PREFIX = "10.77.0."  # rank r is OVERLAY_PREFIX + (r + 1), in a /24 (64 nodes at most)
OVERLAY_MASTER_PORT = 29500  # torch's usual rendezvous port, inside the overlay
KEEPALIVE_S = 5  # keeps NAT mappings open and starts each handshake as soon as the link is up
JOIN_TIMEOUT_S = 30.0
REQUIRED_TOOLS = ("wg", "ip")  # and wireguard-go where the host's kernel has no WireGuard


class OverlayFailed(Refused):
    """The overlay could not be made or did not join every member."""

    code = "overlay_failed"


def overlay_address(rank: int) -> str:
    return f"{OVERLAY_PREFIX}{rank + 1}"


@dataclass(frozen=True)
class OverlayNode:
    """One member as the overlay sees it."""

    rank: int
    private_key: str  # base64, as ``wg`` reads it
    public_key: str
    listen_port: int  # the overlay's UDP port inside the lease
    endpoint: str  # host:port its peers send to (its published UDP port)

    @property
    def address(self) -> str:
        return overlay_address(self.rank)


def _key_pair() -> tuple[str, str]:
    key = X25519PrivateKey.generate()
    private = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(private).decode(), base64.b64encode(public).decode()


def plan(members: Sequence[BookEntry]) -> list[OverlayNode]:
    """Fresh keys, addresses and endpoints for ``members`` in rank order; ``OverlayFailed`` for a
    member its miner gave no overlay port (an embedded miner, or one that predates overlays)."""
    nodes = []
    for rank, entry in enumerate(members):
        if not entry.udp_ports or not entry.ssh_host:
            raise OverlayFailed(
                f"rank {rank} (lease {entry.lease_id}) has no overlay UDP port: its miner gave the lease "
                "no overlay (a Docker miner of this version does)"
            )
        inner, outer = min(entry.udp_ports.items())
        private, public = _key_pair()
        host = f"[{entry.ssh_host}]" if ":" in entry.ssh_host else entry.ssh_host
        nodes.append(OverlayNode(rank, private, public, inner, f"{host}:{outer}"))
    return nodes


def interface_script(node: OverlayNode) -> str:
    """The shell line that makes a member's interface, with no peer yet; its private key is read
    from stdin. Every member's interface is up before any gets its peers (``peers_script``), so no
    first handshake is lost to a peer not yet listening (WireGuard would retry only 5 s later)."""
    checks = " ".join(
        f'command -v {tool} >/dev/null 2>&1 || missing="$missing {tool}";' for tool in REQUIRED_TOOLS
    )
    return (
        f"missing=; {checks} "
        'if [ -n "$missing" ]; then echo "overlay: not in this lease\'s image:$missing '
        '(packages wireguard-tools, iproute2)" >&2; exit 3; fi; '
        '[ -c /dev/net/tun ] || { echo "overlay: no /dev/net/tun in this lease (its miner gave it no '
        'overlay)" >&2; exit 3; }; '
        "set -e; umask 077; key=/run/compute-overlay.key; "
        f"ip link delete {IFNAME} 2>/dev/null || true; "  # joining again replaces the old interface
        'IFS= read -r line; printf "%s\\n" "$line" > "$key"; '
        # the kernel's WireGuard where the host has it (several times faster), else userspace
        f"ip link add {IFNAME} type wireguard 2>/dev/null || {{ command -v wireguard-go >/dev/null 2>&1 || "
        "{ echo \"overlay: the host's kernel has no WireGuard and this lease's image no wireguard-go\" >&2; "
        f"exit 3; }}; wireguard-go {IFNAME} >/dev/null 2>&1; }}; "
        f'wg set {IFNAME} private-key "$key" listen-port {node.listen_port}; rm -f "$key"; '
        f"ip address add {node.address}/24 dev {IFNAME}; ip link set {IFNAME} up; echo up"
    )


def peers_script(nodes: Sequence[OverlayNode], rank: int) -> str:
    """The shell line that gives ``rank``'s interface every other member as its peer: public key,
    published endpoint and its overlay address as the only one it may use. Nothing is sent yet: a
    handshake reaching a member that does not know its sender yet is dropped (and retried 5 s later)."""
    peers = " ".join(
        f"peer {shlex.quote(n.public_key)} endpoint {shlex.quote(n.endpoint)} allowed-ips {n.address}/32"
        for n in nodes
        if n.rank != rank
    )
    return f"wg set {IFNAME} {peers}"


def keepalive_script(nodes: Sequence[OverlayNode], rank: int) -> str:
    """The shell line, once every member knows every other, that turns each peer's keepalive on:
    WireGuard sends one at once, which starts the handshake, and then keeps NAT mappings open."""
    peers = " ".join(
        f"peer {shlex.quote(n.public_key)} persistent-keepalive {KEEPALIVE_S}"
        for n in nodes
        if n.rank != rank
    )
    return f"wg set {IFNAME} {peers}"


HANDSHAKES = f"wg show {IFNAME} latest-handshakes"


def missing_peers(output: str, nodes: Sequence[OverlayNode], rank: int) -> list[int]:
    """Ranks of ``rank``'s peers with no handshake yet, from ``wg show wg0 latest-handshakes``."""
    seen = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            seen[parts[0]] = int(parts[1])
    return [n.rank for n in nodes if n.rank != rank and seen.get(n.public_key, 0) <= 0]


async def join_overlay(members: Sequence[BookEntry], timeout_s: float | None = None) -> list[OverlayNode]:
    """Make every member's interface and wait until every pair holds a handshake (see the module);
    ``timeout_s`` bounds the whole join (default ``JOIN_TIMEOUT_S``)."""
    timeout_s = JOIN_TIMEOUT_S if timeout_s is None else timeout_s
    nodes = plan(members)
    deadline = time.monotonic() + timeout_s
    shells = await asyncio.gather(
        *(LeaseShell.open(LeaseAccess.of(e)) for e in members), return_exceptions=True
    )
    opened = [s for s in shells if isinstance(s, LeaseShell)]
    try:
        failures = [(r, s) for r, s in enumerate(shells) if isinstance(s, BaseException)]
        if failures:
            raise OverlayFailed(
                "overlay not made: " + "; ".join(f"rank {r}: {exc}" for r, exc in failures)
            ) from failures[0][1]

        async def step(rank: int, script: str, key: str | None = None) -> str | None:
            result = await opened[rank].run(script, input=key, timeout=max(1.0, deadline - time.monotonic()))
            if result.exit_status == 0:
                return None
            said = (result.stderr.strip() or result.stdout.strip()).splitlines()
            return f"rank {rank}: " + (said[-1] if said else f"exit status {result.exit_status}")

        for scripts in (
            [(interface_script(n), n.private_key + "\n") for n in nodes],
            [(peers_script(nodes, n.rank), None) for n in nodes],
            [(keepalive_script(nodes, n.rank), None) for n in nodes],
        ):
            done = await asyncio.gather(*(step(r, script, key) for r, (script, key) in enumerate(scripts)))
            problems = [p for p in done if p]
            if problems:
                raise OverlayFailed("overlay not made: " + "; ".join(problems))
        waiting = {r: [n.rank for n in nodes if n.rank != r] for r in range(len(nodes))}
        while waiting:
            ranks = list(waiting)
            shown = await asyncio.gather(
                *(opened[r].run(HANDSHAKES, timeout=max(1.0, deadline - time.monotonic())) for r in ranks)
            )
            waiting = {
                r: m
                for r, out in zip(ranks, shown, strict=True)
                if (m := missing_peers(out.stdout, nodes, r))
            }
            if not waiting:
                break
            if time.monotonic() >= deadline:
                raise OverlayFailed(
                    f"overlay not joined in {timeout_s:g} s: "
                    + "; ".join(f"rank {r} has no handshake with rank(s) {p}" for r, p in waiting.items())
                    + " (a member reaches a peer at its SSH host and published UDP port; a private "
                    "address needs that member's miner to open it: --miner.overlay_cidrs)"
                )
            await asyncio.sleep(0.25)
        logger.info("overlay joined: %d members", len(nodes))
        return nodes
    finally:
        await asyncio.gather(*(s.close() for s in opened), return_exceptions=True)


__all__ = [
    "IFNAME",
    "OVERLAY_MASTER_PORT",
    "OverlayFailed",
    "OverlayNode",
    "join_overlay",
    "missing_peers",
    "interface_script",
    "keepalive_script",
    "peers_script",
    "overlay_address",
    "plan",
]
