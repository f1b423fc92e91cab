"""A miner with a pending reclaim cannot be rented past it.

The attack: a miner asks its whole deposit back, is rented through ``register.py`` minutes before the
reclaim matures, kills the lease and takes the deposit before any probe could qualify. Played
against the real contract (local EVM), a real signed miner app and ``register.py``/the SDK as the
renter: the renter's tools read the deposit and never rent a term it does not cover; an honest
miner refuses such terms itself; a reclaim asked right after a rental starts matures long after the
validators' slash (the windows fit: ``compute.collateral.windows``).
"""

from __future__ import annotations

import asyncio
import time

import asyncssh
import pytest
from bittensor.sp_core import Keypair
from evm_world import TAO, WINDOWS, make_world
from story import build_story, start_desks

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.collateral.chain import CollateralConfig
from compute.collateral.windows import RENTER_MARGIN_S
from compute.miner import build_miner_app
from compute.miner.cover import ReclaimGuard
from compute.miner.specs import fixed_specs
from compute.operator import EXIT_OK, EXIT_REFUSED
from compute.protocol import AllocateRequest, CheckAvailabilityRequest, DeallocateRequest, Requirements
from compute.transport import AccessPolicy, KeyWallet, MinerClient, Rejected, ServerLimits, serve_in_thread

DAY = 86_400
KEY = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()


def rental(duration_s: int, purpose: str = "rental") -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(gpu_count=0), duration_s=duration_s, ssh_public_key=KEY, purpose=purpose
    )


@pytest.mark.slow
def test_an_honest_miner_with_a_pending_reclaim_refuses_terms_past_it(tmp_path) -> None:
    world = make_world(
        CollateralConfig(rate_per_gpu_day=TAO, min_deposit=TAO, reclaim_delay_s=3 * DAY, proposal_ttl_s=7200)
    )
    assert WINDOWS.problems(7200, 3 * DAY) == []
    world.miner.client.deposit(5 * TAO)
    renter = Keypair.create_from_uri("//honest-miners-renter")
    graph = MetagraphSnapshot(
        27, 1, (NeuronInfo(1, renter.ss58_address, renter.ss58_address, 5000.0, True, None, True, 0),)
    )
    guard = ReclaimGuard(world.miner.client, world.miner.hotkey, refresh_s=0, clock=world.chain.now)
    backend = EmbeddedBackend(tmp_path / "data", bind_host="127.0.0.1", port_range=(45100, 45149))
    manager = AllocationManager(
        LeaseStore(tmp_path / "data" / "leases.db"), backend, [], ManagerLimits(max_lease_s=30 * DAY)
    )
    app = build_miner_app(
        KeyWallet(world.miner.keypair),
        AccessPolicy(lambda: graph, min_stake=1000.0, require_permit=True),
        manager,
        lambda: fixed_specs([]),
        ServerLimits(rate_per_s=100, burst=100),
        guard=guard,
    )
    server = serve_in_thread(app, "127.0.0.1", 0)
    endpoint = f"127.0.0.1:{server.port}"

    async def play() -> None:
        async with MinerClient(KeyWallet(renter), timeout=30) as client:
            ask = CheckAvailabilityRequest(requirements=Requirements(gpu_count=0))
            assert (await client.call(endpoint, world.miner.hotkey, ask)).max_duration_s == 30 * DAY
            lease = (await client.call(endpoint, world.miner.hotkey, rental(20 * DAY))).lease  # no reclaim
            world.miner.client.request_reclaim(world.miner.hotkey, 5 * TAO)  # the miner is leaving
            longest = (await client.call(endpoint, world.miner.hotkey, ask)).max_duration_s
            assert (
                3 * DAY - RENTER_MARGIN_S - 60 <= longest <= 3 * DAY - RENTER_MARGIN_S
            )  # shown before renting
            with pytest.raises(Rejected, match="being reclaimed"):
                await client.call(endpoint, world.miner.hotkey, rental(3 * DAY))
            covered = (await client.call(endpoint, world.miner.hotkey, rental(2 * DAY))).lease
            assert covered.state == "active"
            world.chain.advance(3 * DAY - 300)  # five minutes before the reclaim matures
            for hours in (1, 2):
                with pytest.raises(Rejected, match="being reclaimed"):
                    await client.call(endpoint, world.miner.hotkey, rental(hours * 3600))
            validation = await client.call(endpoint, world.miner.hotkey, rental(3600, "validation"))
            assert validation.lease.state == "active"  # the validators' tests are not rentals
            for made in (lease, covered, validation.lease):
                await client.call(endpoint, world.miner.hotkey, DeallocateRequest(lease_id=made.lease_id))

    try:
        asyncio.run(play())
    finally:
        server.stop()


@pytest.mark.slow
def test_register_py_and_the_sdk_never_rent_past_a_pending_reclaim(tmp_path) -> None:
    """The killer asks its whole deposit back; five minutes before the reclaim matures a renter asks
    it for a two-hour lease with register.py and with the SDK: both read the contract, show the
    pending reclaim and refuse; a renter asking for no cover may still rent, and is shown it."""
    story = build_story(tmp_path)
    try:
        hotkey = story.miner.hotkey.ss58_address
        story.contract(story.miner_evm).request_reclaim(hotkey, TAO)
        delay = story.contract().config().reclaim_delay_s
        story.evm.chain.advance(delay - 300)
        contract = ("--collateral.rpc", story.evm.url, "--collateral.address", story.evm.address)
        code, body = story.register("resources", *contract)
        assert code == EXIT_OK, body
        shown = body["collateral"][hotkey]
        assert shown["pending_reclaim_tao"] == 1.0 and shown["standing_tao"] == 0.0
        code, body = story.register(
            "allocate",
            "--hotkey",
            hotkey,
            "--duration",
            "2h",
            "--register.renter_evm",
            story.renter_evm.address,
            *contract,
        )
        assert code == EXIT_REFUSED and "collateral" in body["error"]["message"], body
        assert not list((story.root / "register").glob("rentals/*.json"))  # nothing was rented

        from compute.operator import Refused
        from compute.renter import AsyncRenter

        async def sdk() -> None:
            async with AsyncRenter(
                wallet_name="renter",
                wallet_path=str(story.root / "wallets"),
                network=f"sim:{story.chain_path}",
                netuid=27,
                data_dir=story.root / "sdk",
                renter_evm=story.renter_evm.address,
                collateral_rpc=story.evm.url,
                collateral_address=story.evm.address,
            ) as renter:
                cover = (await renter.collateral(hotkey))[hotkey]
                assert cover.pending_reclaim_wei == TAO and cover.why_not(time.time() + 3600) is not None
                with pytest.raises(Refused, match="being reclaimed|no collateral standing"):
                    await renter.allocate(hotkey=hotkey, ttl="2h", wait=False)

        asyncio.run(sdk())
        code, body = story.register("allocate", "--hotkey", hotkey, "--duration", "2h", *contract)
        assert code == EXIT_OK and body["collateral"]["pending_reclaim_tao"] == 1.0, body  # no cover asked
    finally:
        story.close()


@pytest.mark.slow
def test_a_reclaim_asked_right_after_the_rental_started_matures_after_the_slash(tmp_path) -> None:
    """The attacker's best timing instead: rented first (a covered term), then the whole deposit
    asked back at once, the lease killed. The reclaim delay covers the longest lease plus the dead
    run and assembly: the quorum's slash lands first, and the reclaim pays what is left (nothing)."""
    story = build_story(tmp_path)
    try:
        hotkey = story.miner.hotkey.ss58_address
        start_desks(story)
        contract = ("--collateral.rpc", story.evm.url, "--collateral.address", story.evm.address)
        code, body = story.register(
            "allocate",
            "--hotkey",
            hotkey,
            "--duration",
            "2h",
            "--register.renter_evm",
            story.renter_evm.address,
            *contract,
        )
        assert code == EXIT_OK and body["collateral"]["standing_tao"] == 1.0, body
        story.contract(story.miner_evm).request_reclaim(hotkey, TAO)  # the moment the lease starts
        lease = body["lease"]["lease_id"]
        assert story.register("report", lease, "--register.validators", story.validators[0].url)[0] == EXIT_OK
        chain = story.contract()
        assert story.play(lambda: chain.owed(story.renter_evm.address) > 0, timeout_s=90), "no slash"
        assert chain.owed(story.renter_evm.address) == TAO
        deposit = chain.deposit_of(hotkey)
        assert (deposit.amount, deposit.pending_reclaim) == (0, 0)  # the slash came first, and took it all
    finally:
        story.close()
