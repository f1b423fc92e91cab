"""A canary asks what renters ask, the way register.py asks it: the table, the machine's caps, the
request on the wire next to a real ``register.py allocate`` (the ``canary-sim`` figures: tests/lab)."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from validator_helpers import Miner, port_block, register_and_serve

from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
from compute.miner import build_miner_app
from compute.miner.specs import fixed_specs
from compute.operator import main as register_main
from compute.protocol import AllocateRequest, Requirements
from compute.transport import KeyWallet, ServerLimits, serve_in_thread
from compute.validator import CanaryRenter, CanaryTiming, MinerTarget
from compute.validator.rentals.canary import run_canary
from compute.validator.rentals.shapes import HOUR, Machine, draw_shape

BIG = Machine(gpus=8, cpus=64, ram_gb=512.0, disk_gb=2000.0)


def test_asks_follow_the_renters_table_with_register_py_defaults_first() -> None:
    rng = random.Random(7)
    asks = [draw_shape(rng, BIG) for _ in range(20_000)]
    terms = Counter(a.term_s for a in asks)
    assert terms.most_common(1)[0][0] == HOUR  # no --hours: one hour, the most common term
    assert terms[HOUR] / len(asks) == pytest.approx(0.40, abs=0.02)
    assert min(terms) >= HOUR // 2  # nothing shorter than renters ask (the old canary: 60 s)
    assert Counter(a.cpu_count for a in asks)[1] / len(asks) == pytest.approx(0.60, abs=0.02)
    assert Counter(a.disk_gb for a in asks)[5.0] / len(asks) == pytest.approx(0.60, abs=0.02)
    assert Counter(a.gpu_count for a in asks)[1] / len(asks) == pytest.approx(0.55, abs=0.02)
    assert all(a.template is None for a in asks)  # the machine listed none: the miner's default


@pytest.mark.parametrize(
    "machine",
    [
        Machine(gpus=0, cpus=2, ram_gb=2.0, disk_gb=8.0),
        Machine(gpus=1, cpus=2, ram_gb=4.0, disk_gb=10.0, max_term_s=2 * HOUR),
        Machine(gpus=2, cpus=4, ram_gb=8.0, disk_gb=40.0, max_term_s=600, templates=("pytorch", "cuda")),
    ],
)
def test_asks_stay_within_what_the_machine_shows(machine: Machine) -> None:
    rng = random.Random(3)
    for _ in range(2000):
        ask = draw_shape(rng, machine)
        assert ask.gpu_count <= machine.gpus and ask.term_s <= max(600, machine.max_term_s)
        assert ask.cpu_count <= max(1, machine.cpus // 2) and ask.ram_gb <= max(1.0, machine.ram_gb / 2)
        assert ask.disk_gb <= max(5.0, machine.disk_gb / 2)
        assert ask.template in (None, *machine.templates) and (ask.template is not None) == bool(
            machine.templates
        )
        plain = ask.plain()
        assert (plain.cpu_count, plain.ram_gb, plain.disk_gb, plain.ports, plain.template) == (
            1,
            1.0,
            5.0,
            0,
            None,
        )
        assert (plain.gpu_count, plain.term_s) == (ask.gpu_count, ask.term_s)


class RecordingManager(AllocationManager):
    """An honest manager that keeps what each caller asked (availability checks and allocations)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[str, object]] = []

    def check(self, req: Requirements):
        self.seen.append(("availability", req))
        return super().check(req)

    async def allocate(self, owner_hotkey: str, request: AllocateRequest, receipt=None):
        self.seen.append(("allocate", request))
        return await super().allocate(owner_hotkey, request, receipt)


async def test_a_canary_sends_what_register_py_sends(
    tmp_path: Path, sim_chain, make_wallet, validator_client
) -> None:
    path, state = sim_chain
    renter = make_wallet("renter")
    state.register(renter.hotkey.ss58_address, renter.coldkeypub.ss58_address, 1.0, False)
    wallet = make_wallet("miner")
    data = tmp_path / "miner"
    manager = RecordingManager(
        LeaseStore(data / "leases.db"),
        EmbeddedBackend(data, bind_host="127.0.0.1", port_range=port_block()),
        [],
        ManagerLimits(max_cpu=2, max_memory_gb=4, max_disk_gb=10),
    )
    specs = fixed_specs([])
    keypair = KeyWallet.from_wallet(wallet)
    server = serve_in_thread(
        build_miner_app(keypair, None, manager, lambda: specs, ServerLimits()), "127.0.0.1", 0
    )
    try:
        miner = Miner("miner", f"127.0.0.1:{server.port}", keypair.ss58, wallet, manager, manager.backend)
        uid = register_and_serve(path, state, miner)
        argv = [
            *("--subtensor.network", f"sim:{path}", "--netuid", "27", "--json"),
            *(
                "--wallet.name",
                "renter",
                "--wallet.path",
                renter.path,
                "--register.data_dir",
                str(tmp_path / "r"),
            ),
            *("allocate", "--uid", str(uid)),
        ]
        code = await asyncio.to_thread(register_main, argv, io.StringIO())
        assert code == 0
        real = list(manager.seen)
        manager.seen.clear()
        canary = CanaryRenter(validator_client.hotkey, validator_client, tmp_path / "canary", validator=True)
        outcome = await run_canary(
            canary,
            MinerTarget(uid, miner.hotkey, miner.endpoint),
            random.Random(11),
            CanaryTiming.for_dwell(0.3),
        )
        assert outcome.ok, outcome.reason
        seen = list(manager.seen)
    finally:
        server.stop()
    # the same steps: look at the machine, then allocate (the canary looks once more before, as a
    # renter running ``register.py resources`` first does)
    assert [step for step, _ in real] == ["availability", "allocate"]
    assert [step for step, _ in seen] == ["availability", "availability", "allocate"]
    (_, real_request), (_, canary_request) = real[-1], seen[-1]
    for request in (real_request, canary_request):
        assert isinstance(request, AllocateRequest)
        assert request.purpose == "rental" and request.duration_s >= HOUR // 2
        assert request.idempotency_key is not None and len(request.idempotency_key) == 24
        assert request.ssh_public_key.startswith("ssh-ed25519 ") and request.ssh_public_key.endswith(
            " compute-lease"
        )
    assert set(json.loads(real_request.model_dump_json())) == set(
        json.loads(canary_request.model_dump_json())
    )
