"""A multi-host miner's round: each host proven on its own lease, the miner credited their sum.

Real miner app (signed transport), one embedded backend per host behind ``MultiHostBackend``, real
SSH and worker; the host check is replaced (no Docker here; ``test_multihost_docker`` is the real
two-engine test) and the GPU is the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from validator_helpers import port_block, small_params

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.allocation.hosts.backend import MultiHostBackend
from compute.allocation.hosts.check import HostCheck
from compute.allocation.hosts.config import HostConfig, parse_hosts
from compute.allocation.lifecycle.hostwatch import check_and_recover
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.protocol import HostSpec, MachineSpecs
from compute.scoring import ScoringConfig, load_gpu_table
from compute.transport import KeyWallet, ServerLimits, serve_in_thread
from compute.validator import MinerCheck, MinerTarget, check_miner

TABLE = load_gpu_table()
SCORING = ScoringConfig()


@pytest.fixture
async def multihost_miner(tmp_path: Path, make_wallet):
    """Factory: a miner with CPU-only hosts ``names``; ``lie`` rewrites the specs it answers."""
    opened: list = []

    async def start(
        names: list[str], lie: Callable[[MachineSpecs], MachineSpecs] = lambda s: s, one_address: bool = False
    ):
        """Host i listens on 127.0.0.(i+1) (distinct machines), or all on 127.0.0.1 (one box)."""
        entries = [
            {
                "name": n,
                "endpoint": f"unix:///run/{n}.sock",
                "ssh_host": f"127.0.0.{1 if one_address else i + 1}",
            }
            for i, n in enumerate(names)
        ]
        hosts = parse_hosts({"hosts": entries})
        store = LeaseStore(tmp_path / "leases.db")

        def embedded(config: HostConfig) -> EmbeddedBackend:
            address = config.ssh_host
            return EmbeddedBackend(
                tmp_path / config.name, address, bind_host=address, port_range=port_block()
            )

        def host_of(lease_id: str) -> str | None:
            lease = store.get(lease_id)
            return None if lease is None else lease.record.host

        backend = MultiHostBackend(
            hosts, host_of, embedded, "img", checker=lambda c, i: HostCheck(True, "", (), 2, 2**33)
        )  # type: ignore[arg-type]
        manager = AllocationManager(store, backend, [], ManagerLimits(max_cpu=2), placement=backend)
        await check_and_recover(backend, manager)
        wallet = make_wallet("multihost")
        keypair = KeyWallet.from_wallet(wallet)

        def specs() -> MachineSpecs:
            return lie(fixed_specs(manager.gpus).model_copy(update={"hosts": backend.host_specs()}))

        server = serve_in_thread(
            build_miner_app(keypair, None, manager, specs, ServerLimits(rate_per_s=100, burst=100)),
            "127.0.0.1",
            0,
        )
        opened.append((server, store))
        return MinerTarget(1, keypair.ss58, f"127.0.0.1:{server.port}"), backend

    yield start
    for server, store in opened:
        server.stop()
        store.close()


@pytest.mark.slow
async def test_each_host_is_proven_and_the_miner_gets_their_sum(multihost_miner, validator_client) -> None:
    target, backend = await multihost_miner(["rack-a", "rack-b"])
    result = await check_miner(MinerCheck(validator_client, target, small_params(), TABLE, SCORING))
    assert result.ok, result.reasons
    assert set(result.hosts) == {"rack-a", "rack-b"}
    assert result.sample == pytest.approx(sum(result.hosts.values())) and result.sample > 0
    assert any(r.startswith("host rack-a:") for r in result.reasons)
    assert await backend.running() == set()  # every host's validation lease was released


@pytest.mark.slow
async def test_cheater_claiming_a_host_it_does_not_have_gains_nothing(
    multihost_miner, validator_client
) -> None:
    """The cheapest cheat: list an extra (or down) host as up in the specs; it must add 0."""
    ghost = HostSpec(name="ghost", up=True, ssh_host="127.0.0.1")
    target, _ = await multihost_miner(
        ["rack-a"], lie=lambda s: s.model_copy(update={"hosts": [*s.hosts, ghost]})
    )
    result = await check_miner(MinerCheck(validator_client, target, small_params(), TABLE, SCORING))
    assert result.ok and result.hosts["ghost"] == 0.0 and result.hosts["rack-a"] > 0
    assert result.sample == pytest.approx(result.hosts["rack-a"])
    assert any("host ghost: not proven" in r for r in result.reasons)


@pytest.mark.slow
async def test_cheater_one_cpu_box_as_two_hosts_is_credited_once(multihost_miner, validator_client) -> None:
    """Two hosts-file entries for one CPU machine (one SSH address): as much as one host, not two."""
    target, _ = await multihost_miner(["rack-a", "rack-a-again"], one_address=True)
    result = await check_miner(MinerCheck(validator_client, target, small_params(), TABLE, SCORING))
    assert result.ok and sorted(v > 0 for v in result.hosts.values()) == [False, True]
    assert result.sample == pytest.approx(max(result.hosts.values()))
    assert any("credited once" in r for r in result.reasons)
