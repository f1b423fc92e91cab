"""Tenant network isolation for Docker leases: a miner-owned bridge and the firewall rules around it.

Every lease container of a miner joins one bridge network the miner creates, with Docker's
inter-container traffic off (``enable_icc=false``), so tenants cannot reach each other on it.
Two iptables chains the miner owns, keyed to that bridge's interface, do the rest:

- ``CMP-IN-<id>`` (jumped to from ``INPUT`` for packets arriving from the bridge): only replies
  to connections the host opened pass; a tenant cannot open a connection to the host itself,
  whatever address it uses (the bridge gateway, the host's public IP, the miner's API port,
  sshd, Docker's API).
- ``CMP-FWD-<id>`` (jumped to from ``DOCKER-USER``): replies pass; new connections from the
  bridge to private ranges (RFC 1918, CGNAT), loopback, link-local (including the cloud
  metadata address 169.254.169.254), multicast and other tenants (through their published
  ports, which DNAT turns into private addresses) are dropped; the public internet is allowed.

Rules are created (idempotently, checked with ``iptables -C``) before a lease container starts,
and removed with the network when the miner's last lease ends (``teardown``). Where the miner
cannot run ``iptables`` (not root, no binary), ``ensure`` raises :class:`IsolationUnavailable`
and the backend refuses the lease unless isolation was explicitly turned off.

Cluster members that asked for an overlay (``Requirements.overlay``: a TUN device and NET_ADMIN
for the renter's WireGuard) run on a second bridge of the miner's, with chains of their own: the
same rules, plus UDP to the private ranges the miner's operator named (``--miner.overlay_cidrs``:
where its peers' published overlay ports are, e.g. a LAN of GPU hosts) before the drops. Public
peers need no exception: the public internet is allowed to every lease. The overlay bridge keeps
the NET_ADMIN leases apart from the others: an address a member takes over on its bridge reaches
only other members' (encrypted, key-pinned) traffic.

What it deliberately does not do: IPv6 (the lease network is IPv4-only) or egress bandwidth limits.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from docker.errors import APIError, NotFound

from compute.allocation.lease.backend import BackendError
from compute.settings import overlay_cidrs as checked_ranges

log = logging.getLogger(__name__)

BLOCKED_DESTINATIONS = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",  # link-local, cloud metadata
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class IsolationUnavailable(BackendError):
    """The firewall rules that isolate tenants could not be installed."""


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=False)


@dataclass(frozen=True)
class NetworkPolicy:
    """Names and rules of one miner's lease network, derived from the miner id (no I/O).

    ``overlay_cidrs`` None: the tenants' network; a tuple: the cluster members' overlay network,
    whose leases may also send UDP to those ranges."""

    miner_id: str
    overlay_cidrs: tuple[str, ...] | None = None

    @property
    def tag(self) -> str:
        key = self.miner_id if self.overlay_cidrs is None else f"{self.miner_id}\0overlay"
        return hashlib.sha256(key.encode()).hexdigest()[:10]

    @property
    def network(self) -> str:
        kind = "leases" if self.overlay_cidrs is None else "overlay"
        return f"compute-{kind}-{self.tag}"

    @property
    def bridge(self) -> str:
        return f"cmp{self.tag}"  # interface names are at most 15 characters

    @property
    def input_chain(self) -> str:
        return f"CMP-IN-{self.tag}"

    @property
    def forward_chain(self) -> str:
        return f"CMP-FWD-{self.tag}"

    def network_options(self) -> dict[str, str]:
        return {
            "com.docker.network.bridge.enable_icc": "false",
            "com.docker.network.bridge.name": self.bridge,
        }

    def chain_rules(self) -> dict[str, list[list[str]]]:
        """The rules of each owned chain, in order."""
        established = ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"]
        forward = [established]
        forward += [["-p", "udp", "-d", cidr, "-j", "RETURN"] for cidr in self.overlay_cidrs or ()]
        forward += [["-d", cidr, "-j", "DROP"] for cidr in BLOCKED_DESTINATIONS]
        forward.append(["-j", "RETURN"])
        return {self.input_chain: [established, ["-j", "DROP"]], self.forward_chain: forward}

    def jumps(self) -> list[tuple[str, list[str]]]:
        """(built-in chain, rule) pairs that send the bridge's packets into the owned chains."""
        return [
            ("INPUT", ["-i", self.bridge, "-j", self.input_chain]),
            ("DOCKER-USER", ["-i", self.bridge, "-j", self.forward_chain]),
        ]


class Firewall:
    """Applies a :class:`NetworkPolicy` with ``iptables`` (``runner`` is injectable for tests)."""

    def __init__(self, policy: NetworkPolicy, runner: Runner = _run) -> None:
        self.policy = policy
        self._runner = runner

    def _iptables(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return self._runner(["iptables", "-w", "5", *args])
        except (OSError, subprocess.SubprocessError) as exc:
            raise IsolationUnavailable(f"cannot run iptables: {exc}") from exc

    def _must(self, *args: str) -> None:
        done = self._iptables(*args)
        if done.returncode != 0:
            raise IsolationUnavailable(f"iptables {' '.join(args)} failed: {done.stderr.strip()[:300]}")

    def ensure(self) -> None:
        """Create the owned chains with their rules and hook them in (idempotent)."""
        if self._runner is _run and shutil.which("iptables") is None:
            raise IsolationUnavailable("iptables is not installed; tenants could reach the host")
        for chain, rules in self.policy.chain_rules().items():
            if self._iptables("-n", "-L", chain).returncode != 0:
                self._must("-N", chain)
            elif all(self._iptables("-C", chain, *rule).returncode == 0 for rule in rules):
                continue  # intact: never flush a chain that running tenants depend on
            self._must("-F", chain)
            for rule in rules:
                self._must("-A", chain, *rule)
        if self._iptables("-n", "-L", "DOCKER-USER").returncode != 0:
            self._must("-N", "DOCKER-USER")
        for parent, rule in self.policy.jumps():
            if self._iptables("-C", parent, *rule).returncode != 0:
                self._must("-I", parent, "1", *rule)

    def teardown(self) -> None:
        """Unhook and delete the owned chains; missing pieces are fine."""
        for parent, rule in self.policy.jumps():
            while self._iptables("-C", parent, *rule).returncode == 0:
                self._must("-D", parent, *rule)
        for chain in self.policy.chain_rules():
            if self._iptables("-n", "-L", chain).returncode == 0:
                self._must("-F", chain)
                self._must("-X", chain)

    def installed(self) -> bool:
        """Whether every jump is in place (the chains exist when the jumps do)."""
        return all(
            self._iptables("-C", parent, *rule).returncode == 0 for parent, rule in self.policy.jumps()
        )


class LeaseNetwork:
    """The Docker side: the miner's ICC-off bridge plus its firewall, made and removed together.

    Blocking (Docker SDK, iptables): call through ``asyncio.to_thread``; the backend serialises
    ``ensure`` and ``release_if_unused`` with its start lock.
    """

    def __init__(
        self,
        client: Callable[[], Any],
        miner_id: str,
        firewall: Firewall | None = None,
        overlay_cidrs: tuple[str, ...] | None = None,
    ) -> None:
        ranges = None if overlay_cidrs is None else checked_ranges(overlay_cidrs)  # ValueError: refused
        self.policy = NetworkPolicy(miner_id, ranges)
        self.firewall = firewall or Firewall(self.policy)
        self._client = client

    @property
    def name(self) -> str:
        return self.policy.network

    def ensure(self) -> None:
        """The network exists and the rules are in place, else :class:`IsolationUnavailable`."""
        client = self._client()
        try:
            client.networks.get(self.name)
        except NotFound:
            try:
                client.networks.create(
                    self.name,
                    driver="bridge",
                    options=self.policy.network_options(),
                    labels={"compute.managed": "1", "compute.miner": self.policy.miner_id},
                )
                log.info("lease network %s created (bridge %s, icc off)", self.name, self.policy.bridge)
            except APIError as exc:
                if exc.status_code != 409:  # 409: another start made it meanwhile
                    raise IsolationUnavailable(
                        f"cannot create network {self.name}: {exc.explanation}"
                    ) from exc
        self.firewall.ensure()

    def release_if_unused(self) -> bool:
        """Remove rules and network once no container of this miner is left; True if removed."""
        client = self._client()
        label = f"compute.miner={self.policy.miner_id}"
        if client.containers.list(all=True, filters={"label": [label]}):
            return False
        self.firewall.teardown()
        try:
            client.networks.get(self.name).remove()
            log.info("lease network %s and its rules removed", self.name)
        except NotFound:
            pass
        except APIError as exc:
            log.warning("lease network %s not removed: %s", self.name, exc.explanation)
        return True


def release_unused_networks(client: Any) -> list[str]:
    """Remove every miner lease network (and its rules) no container uses any more; their names.

    For operators cleaning up after a miner that is gone for good, and for test teardown.
    """
    released = []
    for network in client.networks.list(filters={"label": ["compute.managed=1"]}):
        miner_id = (network.attrs.get("Labels") or {}).get("compute.miner")
        for cidrs in (None, ()):  # the tenants' network, the overlay one (its chains go by its tag)
            if miner_id and network.name == NetworkPolicy(miner_id, cidrs).network:
                if LeaseNetwork(lambda: client, miner_id, overlay_cidrs=cidrs).release_if_unused():
                    released.append(network.name)
    return released


__all__ = [
    "BLOCKED_DESTINATIONS",
    "Firewall",
    "IsolationUnavailable",
    "LeaseNetwork",
    "NetworkPolicy",
    "release_unused_networks",
]
