"""The renter's WireGuard overlay, without Docker: the plan, the script each member runs, the
handshake reading, the variables a job gets, and what the miner gives an overlay lease.

The members joining for real (two Docker engines, a TCP exchange through ``MASTER_ADDR`` inside
the overlay, the miner's UDP-only exception) are in ``test_cluster_overlay.py``.
"""

from __future__ import annotations

import base64
import shlex
import sqlite3
import subprocess
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from compute.allocation.docker import spec
from compute.allocation.docker.netpolicy import BLOCKED_DESTINATIONS, LeaseNetwork, NetworkPolicy
from compute.allocation.lease.records import LeaseRecord
from compute.flags import SettingsError
from compute.operator import LeaseBook
from compute.operator.book import BookEntry, ClusterRecord
from compute.operator.cluster import cluster_of
from compute.operator.overlay import (
    OverlayFailed,
    interface_script,
    keepalive_script,
    missing_peers,
    peers_script,
    plan,
)
from compute.protocol import Requirements, SshAccess
from compute.settings import overlay_cidrs, parse_miner


def _entry(lease_id: str, host: str, udp: dict[int, int]) -> BookEntry:
    return BookEntry(
        lease_id=lease_id, owner_hotkey="5Owner", network="sim:x", netuid=27, miner_uid=1,
        miner_hotkey="5Miner", endpoint="127.0.0.1:1", state="active", verified=True, gpu_summary="",
        requirements={}, ssh_host=host, ssh_port=2222, ssh_username="root", host_key=None,
        ports={8000: 41000}, known_hosts_path=None, private_key_path=None, public_key="",
        key_generated=True, created_at=1.0, expires_at=3601.0, updated_at=1.0, udp_ports=udp,
    )  # fmt: skip


MEMBERS = [
    _entry("a" * 32, "203.0.113.7", {51820: 41001}),
    _entry("b" * 32, "10.203.17.2", {51820: 40007}),
    _entry("c" * 32, "fd00::7", {51820: 40100}),
]


def test_each_member_gets_its_own_key_pair_its_peers_endpoints_and_a_rank_address():
    nodes = plan(MEMBERS)
    assert [n.address for n in nodes] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert [n.endpoint for n in nodes] == ["203.0.113.7:41001", "10.203.17.2:40007", "[fd00::7]:40100"]
    for node in nodes:
        private = X25519PrivateKey.from_private_bytes(base64.b64decode(node.private_key))
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        assert base64.b64encode(public).decode() == node.public_key  # the pair is a real one
    assert len({n.private_key for n in nodes}) == 3
    assert plan(MEMBERS)[0].private_key != nodes[0].private_key  # fresh for every cluster


def test_a_member_without_an_overlay_port_is_refused_before_anything_runs():
    with pytest.raises(OverlayFailed, match="rank 1 .* no overlay UDP port"):
        plan([MEMBERS[0], replace(MEMBERS[1], udp_ports={}), MEMBERS[2]])


def test_the_scripts_name_every_peer_but_never_a_private_key():
    nodes = plan(MEMBERS)
    script = interface_script(nodes[1]) + "; " + peers_script(nodes, 1)
    assert all(n.private_key not in script for n in nodes)  # it comes on stdin
    assert "peer" not in interface_script(nodes[1])  # every interface is up before any peer is set
    assert "keepalive" not in peers_script(nodes, 1)  # and every peer set before any handshake starts
    assert keepalive_script(nodes, 1) == (
        f"wg set wg0 peer {shlex.quote(nodes[0].public_key)} persistent-keepalive 5 "
        f"peer {shlex.quote(nodes[2].public_key)} persistent-keepalive 5"
    )
    for peer in (nodes[0], nodes[2]):
        assert (
            f"peer {peer.public_key} endpoint {shlex.quote(peer.endpoint)} allowed-ips {peer.address}/32"
            in script
        )
    assert f"peer {nodes[1].public_key}" not in script
    assert "ip address add 10.77.0.2/24 dev wg0" in script and "listen-port 51820" in script
    shlex.split(script)  # one well-formed shell line


def test_handshakes_are_read_per_peer():
    nodes = plan(MEMBERS)
    output = f"{nodes[0].public_key}\t1733560000\n{nodes[2].public_key}\t0\n"
    assert missing_peers(output, nodes, 1) == [2]
    assert missing_peers("", nodes, 0) == [1, 2]
    assert missing_peers(f"{nodes[1].public_key}\t5\n{nodes[2].public_key}\t9\n", nodes, 0) == []


def test_an_overlay_clusters_variables_point_into_the_overlay():
    record = ClusterRecord("c" * 16, "5Owner", tuple(e.lease_id for e in MEMBERS), 0, 1.0, overlay=True)
    cluster = cluster_of(record, MEMBERS)
    assert cluster.master_addr == "10.77.0.1"
    for rank in range(3):
        env = cluster.env(rank)
        assert env["MASTER_ADDR"] == "10.77.0.1" and env["MASTER_PORT"] == "29500"
        assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "wg0"
        assert env["OVERLAY_ADDR"] == f"10.77.0.{rank + 1}"
    plain = cluster_of(replace(record, overlay=False), MEMBERS)
    assert plain.env(1)["MASTER_ADDR"] == "203.0.113.7" and "GLOO_SOCKET_IFNAME" not in plain.env(1)


def test_an_overlay_lease_alone_gets_tun_net_admin_a_udp_port_and_the_overlay_bridge():
    options = spec.ContainerOptions(
        "img", "0.0.0.0", "5Miner", 4096, "compute-leases-x", (), None, "compute-overlay-y"
    )
    lease = LeaseRecord("l" * 32, "5Owner", "rental", (), 1, 1024, 5, 64, 1, "key", 1.0, 3601.0)
    plain = spec.container_kwargs(
        options,
        lease,
        name="n",
        host_ports=[40000, 40001],
        host_key_line="k",
        device_ids=[],
        disk_limit=False,
    )
    assert "devices" not in plain and "cap_add" not in plain and plain["network"] == "compute-leases-x"
    assert set(plain["ports"]) == {"22/tcp", "8000/tcp"}
    member = spec.container_kwargs(
        options,
        replace(lease, overlay=True),
        name="n",
        host_ports=[40000, 40001, 40002],
        host_key_line="k",
        device_ids=[],
        disk_limit=False,
    )
    assert member["devices"] == ["/dev/net/tun:/dev/net/tun:rwm"] and member["cap_add"] == ["NET_ADMIN"]
    assert member["ports"]["51820/udp"] == ("0.0.0.0", 40002) and member["ports"]["8000/tcp"] == (
        "0.0.0.0",
        40001,
    )
    assert member["network"] == "compute-overlay-y"
    assert "NET_RAW" in member["cap_drop"] and member["security_opt"] == ["no-new-privileges:true"]
    attrs = {"HostConfig": {"PortBindings": {
        "22/tcp": [{"HostPort": "40000"}], "8000/tcp": [{"HostPort": "40001"}], "51820/udp": [{"HostPort": "40002"}],
    }}}  # fmt: skip
    assert spec.published_ports(attrs) == {22: 40000, 8000: 40001}
    assert spec.published_ports(attrs, "udp") == {51820: 40002}


def test_the_overlay_bridge_opens_udp_to_the_named_ranges_only_before_every_drop():
    tenants, members = NetworkPolicy("5Miner"), NetworkPolicy("5Miner", ("10.1.0.0/24",))
    assert tenants.network != members.network and tenants.bridge != members.bridge
    assert tenants.forward_chain != members.forward_chain and members.network.startswith("compute-overlay-")
    forward = members.chain_rules()[members.forward_chain]
    opened = [r for r in forward if r[-1] == "RETURN" and "-d" in r]
    assert opened == [["-p", "udp", "-d", "10.1.0.0/24", "-j", "RETURN"]]
    first_drop = next(i for i, r in enumerate(forward) if r[-1] == "DROP")
    assert forward.index(opened[0]) < first_drop  # else the drop of 10.0.0.0/8 would win
    assert {r[1] for r in forward if r[-1] == "DROP"} == set(BLOCKED_DESTINATIONS)
    assert members.chain_rules()[members.input_chain] == tenants.chain_rules()[tenants.input_chain]
    assert not any("udp" in r for r in tenants.chain_rules()[tenants.forward_chain])


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("8.8.8.0/24", "must lie in"),  # public: needs no exception, gets none
        ("127.0.0.0/8", "must lie in"),
        ("169.254.169.254/32", "must lie in"),  # the cloud metadata address, never
        ("10.0.0.0/7", "must lie in"),  # reaches beyond 10/8
        ("fd00::/8", "must lie in"),
        ("10.1.0.0/33", "not an IPv4 network"),
        ("lan", "not an IPv4 network"),
    ],
)
def test_overlay_ranges_are_private_ipv4_only(given, problem):
    with pytest.raises(ValueError, match=problem):
        overlay_cidrs(given)
    with pytest.raises(ValueError, match=problem):  # a backend built in code checks them the same way
        LeaseNetwork(lambda: None, "5Miner", overlay_cidrs=(given,))


def test_overlay_ranges_are_canonical_and_come_from_the_miner_flag():
    assert overlay_cidrs("10.1.0.7/24, 192.168.7.0/24,10.1.0.0/24") == ("10.1.0.0/24", "192.168.7.0/24")
    settings = parse_miner(["--miner.overlay_cidrs", "10.203.17.0/30"], env={})
    assert settings.overlay_cidrs == ("10.203.17.0/30",) and parse_miner([], env={}).overlay_cidrs == ()
    with pytest.raises(SettingsError, match="--miner.overlay_cidrs: overlay range '8.8.8.0/24' must lie in"):
        parse_miner(["--miner.overlay_cidrs", "8.8.8.0/24"], env={})


def test_the_overlay_fields_stay_off_the_wire_when_unused():
    assert "overlay" not in Requirements().model_dump_json()
    assert '"overlay":true' in Requirements(overlay=True).model_dump_json()
    key = (
        "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(32)).decode()
    )
    access = SshAccess(host="h", port=22, username="root", host_key=key)
    assert "udp_ports" not in access.model_dump_json()
    assert (
        '"udp_ports":{"51820":40002}'
        in access.model_copy(update={"udp_ports": {51820: 40002}}).model_dump_json()
    )


def test_a_book_of_schema_2_gains_cluster_overlays_and_udp_ports(tmp_path):
    book = LeaseBook(tmp_path / "leases.db")
    book.close()
    with sqlite3.connect(tmp_path / "leases.db") as conn:  # back to what a schema-2 book held
        conn.execute("ALTER TABLE clusters DROP COLUMN overlay")
        conn.execute("ALTER TABLE leases DROP COLUMN udp_ports")
        conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        conn.execute("INSERT INTO clusters VALUES ('c1', '5Owner', '[\"a\"]', 0, 1.0)")
    book = LeaseBook(tmp_path / "leases.db")
    (kept,) = book.clusters("5Owner")
    assert kept.cluster_id == "c1" and kept.overlay is False
    book.save(MEMBERS[1])
    assert book.get(MEMBERS[1].lease_id).udp_ports == {51820: 40007}
    book.add_cluster(ClusterRecord("c2", "5Owner", ("b" * 32,), 0, 2.0, overlay=True))
    assert [c.overlay for c in book.clusters("5Owner")] == [True, False]


def test_an_image_without_the_tools_is_named_in_one_line_and_nothing_is_changed(tmp_path):
    """The member's own shell runs the script: with none of the tools on its PATH it stops at once."""
    node = plan(MEMBERS)[0]
    done = subprocess.run(
        ["/bin/sh", "-c", interface_script(node)],
        input=node.private_key + "\n",
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},  # an empty directory: no wg, no ip
        timeout=10,
    )
    assert done.returncode == 3
    assert done.stderr.strip() == (
        "overlay: not in this lease's image: wg ip (packages wireguard-tools, iproute2)"
    )
    assert done.stdout == ""
