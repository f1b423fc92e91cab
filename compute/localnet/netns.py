"""Network namespaces joined by virtual links, for ``localnet --cluster`` (root only).

``Hosts.up()`` makes two namespaces ``cdemo-<pid>-a`` and ``-b`` (``lo`` up in each), each joined
to the root namespace by a veth pair (the validator and the renter reach the host there) and to
each other by a third veth pair named ``peer`` on both sides (the hosts' own link: the
all-reduce's traffic). Every address lies in one ``10.199.<n>.0/24`` the demo picks among those no
route of this machine already uses, cut into /30 links:

    root 10.199.n.1  <->  a 10.199.n.2        root 10.199.n.5  <->  b 10.199.n.6
    a (peer) 10.199.n.9  <->  b (peer) 10.199.n.10

and each host reaches the other's root-side address over ``peer`` (a /32 route), so a rendezvous
at rank 0's SSH host goes over the hosts' link, never through the root namespace (which forwards
nothing: no sysctl, bridge or firewall rule is touched). ``down()`` deletes both namespaces (their
veth pairs go with them); ``remove_stale()`` deletes ``cdemo-<pid>-*`` namespaces whose process is
gone (a run that was killed). Deliberately not here: any other address range, NAT, a way out.

``Shaped`` serves ``bench interconnect --link-gbit``: N namespaces ``icbench-<pid>-h<i>`` on one
bridge that lives in a namespace of its own, every host's egress held to a rate by ``tbf``; the
same address range, the same clean-up of killed runs (``remove_stale(prefix)``). ``relay`` routes
two hosts' traffic through a third (the relay cheat's test), with sysctls inside those namespaces
only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

PREFIX = "cdemo-"
LINK_IFNAME = "peer"  # the hosts' link inside each namespace (GLOO_SOCKET_IFNAME)
# a wrapper for ProcessGroup.start (``python ARGS``): ``python -c WRAP NS ARGS...`` runs ARGS in NS
EXEC_IN = "import os,sys; os.execvp('ip', ['ip','netns','exec',sys.argv[1],sys.executable,*sys.argv[2:]])"


class NetnsError(RuntimeError):
    """Namespaces could not be made (not root, no ``ip netns``, a command refused)."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` fails: {probe.stderr.strip()}"
    return None


def _ip(*args: str, netns: str | None = None) -> str:
    cmd = ["ip", *(("-n", netns) if netns else ()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def remove_stale(prefix: str = PREFIX) -> list[str]:
    """Delete the namespaces ``<prefix><pid>-<name>`` whose process is gone (a killed run); their names."""
    removed = []
    for name in namespaces():
        match = re.fullmatch(rf"{re.escape(prefix)}(\d+)-[a-z0-9]+", name)
        if match is None or _alive(int(match.group(1))):
            continue
        _ip("netns", "delete", name)
        removed.append(name)
    if removed:
        log.info("removed stale namespaces of killed runs: %s", ", ".join(removed))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_subnet() -> int:
    """An ``n`` with no route of this machine inside 10.199.n.0/24."""
    used = _ip("-4", "route", "show", "table", "all")
    for offset in range(250):
        n = (os.getpid() + offset) % 250 + 1
        if f"10.199.{n}." not in used:
            return n
    raise NetnsError("no free 10.199.n.0/24 for the demo's links")


@dataclass(frozen=True)
class Host:
    netns: str
    address: str  # its root-side link address: what the validator and renter reach
    link_address: str  # its address on the hosts' link (``peer``)


class Hosts:
    """Two namespaces and their three links; ``up`` and ``down`` (idempotent)."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid or os.getpid()
        self.subnet = 0
        self.hosts: list[Host] = []
        self.outer: list[str] = []  # the root-side ends of the veth pairs

    def up(self) -> list[Host]:
        reason = unavailable()
        if reason:
            raise NetnsError(reason)
        remove_stale()
        self.subnet = n = free_subnet()
        net = f"10.199.{n}"
        a, b = (
            Host(f"{PREFIX}{self.pid}-{s}", f"{net}.{h}", f"{net}.{p}")
            for s, h, p in (("a", 2, 9), ("b", 6, 10))
        )
        self.hosts = [a, b]
        try:
            for host, root_side in ((a, 1), (b, 5)):
                _ip("netns", "add", host.netns)
                _ip("link", "set", "lo", "up", netns=host.netns)
                outer = f"cd{self.pid % 10**8}{host.netns[-1]}"
                _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
                self.outer.append(outer)
                _ip("addr", "add", f"{net}.{root_side}/30", "dev", outer)
                _ip("link", "set", outer, "up")
                _ip("addr", "add", f"{host.address}/30", "dev", "eth0", netns=host.netns)
                _ip("link", "set", "eth0", "up", netns=host.netns)
            _ip("link", "add", LINK_IFNAME, "netns", a.netns, "type", "veth", "peer", "name", LINK_IFNAME,
                "netns", b.netns)  # fmt: skip
            for host, other in ((a, b), (b, a)):
                _ip("addr", "add", f"{host.link_address}/30", "dev", LINK_IFNAME, netns=host.netns)
                _ip("link", "set", LINK_IFNAME, "up", netns=host.netns)
                _ip("route", "add", f"{other.address}/32", "via", other.link_address, "dev", LINK_IFNAME,
                    netns=host.netns)  # fmt: skip
        except NetnsError:
            self.down()
            raise
        log.info("hosts %s at %s, %s at %s; their link %s <-> %s", a.netns, a.address, b.netns, b.address,
                 a.link_address, b.link_address)  # fmt: skip
        return self.hosts

    def link_bytes(self) -> int:
        """Bytes the first host has sent and received on the hosts' link so far (its counters)."""
        stats = json.loads(_ip("-j", "-s", "link", "show", LINK_IFNAME, netns=self.hosts[0].netns))[0][
            "stats64"
        ]
        return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])

    def down(self) -> None:
        present = set(namespaces()) if shutil.which("ip") else set()
        for host in self.hosts:
            if host.netns in present:
                try:
                    _ip("netns", "delete", host.netns)
                except NetnsError as exc:
                    log.warning("namespace %s not removed: %s", host.netns, exc)
        for outer in self.outer:  # a deleted namespace's veths go when the kernel frees it: now, here
            subprocess.run(["ip", "link", "delete", outer], capture_output=True, check=False)
        self.hosts, self.outer = [], []


SHAPED_PREFIX = "icbench-"  # ``bench interconnect --link-gbit``: its namespaces, apart from the demo's
SHAPED_IFNAME = "eth0"  # each shaped host's one link (GLOO_SOCKET_IFNAME)


def shaping_unavailable() -> str | None:
    """Why shaped links cannot be made here (None: they can): namespaces plus ``tc``."""
    reason = unavailable()
    if reason is None and shutil.which("tc") is None:
        reason = "no `tc` command (iproute2)"
    return reason


def _tc(netns: str, *args: str) -> None:
    cmd = ["ip", "netns", "exec", netns, "tc", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {done.stderr.strip()}")


def _sysctl(netns: str, *settings: str) -> None:
    """``sysctl -w`` inside ``netns`` (its own network settings, never the machine's)."""
    cmd = ["ip", "netns", "exec", netns, "sysctl", "-q", "-w", *settings]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {done.stderr.strip()}")


class Shaped:
    """``world`` namespaces on one bridge, each one's egress held to a rate by ``tbf``.

    The bridge lives in a namespace of its own (``<prefix><pid>-sw``), so the root namespace gets no
    device, address or route: hosts ``<prefix><pid>-h<i>`` at ``10.199.n.<i+1>/24`` on their
    ``eth0``, the other end of each veth a port of the bridge. Shaping every host's egress bounds
    what each participant sends, the quantity a ring all-reduce's per-link figure counts.
    """

    def __init__(self, world: int, prefix: str = SHAPED_PREFIX, pid: int | None = None) -> None:
        self.world, self.prefix, self.pid = world, prefix, pid or os.getpid()
        self.switch = f"{prefix}{self.pid}-sw"
        self.hosts: list[Host] = []

    def up(self) -> list[Host]:
        reason = shaping_unavailable()
        if reason:
            raise NetnsError(reason)
        remove_stale(self.prefix)
        net = f"10.199.{free_subnet()}"
        self.hosts = [
            Host(f"{self.prefix}{self.pid}-h{i}", f"{net}.{i + 1}", f"{net}.{i + 1}")
            for i in range(self.world)
        ]
        try:
            _ip("netns", "add", self.switch)
            _ip("link", "add", "br0", "type", "bridge", netns=self.switch)
            _ip("link", "set", "br0", "up", netns=self.switch)
            for i, host in enumerate(self.hosts):
                _ip("netns", "add", host.netns)
                _ip("link", "set", "lo", "up", netns=host.netns)
                _ip("link", "add", SHAPED_IFNAME, "netns", host.netns, "type", "veth", "peer", "name", f"p{i}",
                    "netns", self.switch)  # fmt: skip
                _ip("link", "set", f"p{i}", "master", "br0", "up", netns=self.switch)
                _ip("addr", "add", f"{host.address}/24", "dev", SHAPED_IFNAME, netns=host.netns)
                _ip("link", "set", SHAPED_IFNAME, "up", netns=host.netns)
        except NetnsError:
            self.down()
            raise
        return self.hosts

    def shape(self, gbit: float) -> None:
        """Every host's egress at ``gbit`` Gbit/s; the burst a millisecond of it (256 KiB at least)."""
        burst = max(256 << 10, int(gbit * 1e9 / 8 / 1000))
        for host in self.hosts:
            _tc(host.netns, "qdisc", "replace", "dev", SHAPED_IFNAME, "root", "tbf", "rate", f"{gbit}gbit",
                "burst", str(burst), "latency", "50ms")  # fmt: skip

    def relay(self, through: int, between: tuple[int, int]) -> None:
        """Route the traffic between hosts ``between`` through host ``through``, as a set whose two
        members have no link of their own would have it carried (the relay cheat of docs/cluster.md):
        the hop forwards and sends no redirects, the two ends accept none. Only these namespaces'
        own settings are touched; ``down`` removes them."""
        hop = self.hosts[through]
        _sysctl(hop.netns, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0",
                f"net.ipv4.conf.{SHAPED_IFNAME}.send_redirects=0")  # fmt: skip
        for i, j in (between, between[::-1]):
            end = self.hosts[i]
            _sysctl(end.netns, "net.ipv4.conf.all.accept_redirects=0",
                    f"net.ipv4.conf.{SHAPED_IFNAME}.accept_redirects=0")  # fmt: skip
            _ip("route", "replace", f"{self.hosts[j].address}/32", "via", hop.address, "dev", SHAPED_IFNAME,
                netns=end.netns)  # fmt: skip

    def tx_bytes(self) -> list[int]:
        """Bytes each host has sent on its link so far (its counters)."""
        return [
            int(
                json.loads(_ip("-j", "-s", "link", "show", SHAPED_IFNAME, netns=h.netns))[0]["stats64"]["tx"][
                    "bytes"
                ]
            )
            for h in self.hosts
        ]

    def down(self) -> None:
        """Delete every namespace of this run (their veths and qdiscs go with them); idempotent."""
        present = set(namespaces()) if shutil.which("ip") else set()
        for name in [h.netns for h in self.hosts] + [self.switch]:
            if name in present:
                try:
                    _ip("netns", "delete", name)
                except NetnsError as exc:
                    log.warning("namespace %s not removed: %s", name, exc)
        self.hosts = []
