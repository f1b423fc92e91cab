"""The SDK against a real miner (embedded backend; Docker marked) over real SSH on a simulated chain.

Rent, run, copy, extend, release; and every way a block can end (normally, by an exception, by a
cancellation half-way through the allocation, by Ctrl-C in the synchronous client), each checked
on the miner itself: no lease of ours is left active.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from compute.operator import main
from compute.renter import (
    AsyncRenter,
    CommandFailed,
    ConfigError,
    HostKeyMismatch,
    LeaseUnavailable,
    NoMachineAvailable,
    ReleaseFailed,
    Renter,
    SshError,
)
from compute.renter.lease import AsyncLease

OPERATOR = "operator_a"


def settings(subnet, operator: str = OPERATOR) -> dict:
    return {
        "network": f"sim:{subnet.chain_path}",
        "netuid": 27,
        "wallet_name": operator,
        "wallet_path": str(subnet.wallets_dir),
        "data_dir": subnet.root / f"register-{operator}",
        "timeout": 20.0,
    }


def active_on_miner(subnet, operator: str = OPERATOR) -> list[str]:
    """Lease ids the miner holds active for ``operator`` (asked from the miner's own store)."""
    owner = subnet.operators[operator]
    return [s.lease_id for s in subnet.monitor.manager.store.active() if s.record.owner_hotkey == owner]


def register_json(subnet, *args: str) -> dict:
    out = io.StringIO()
    main([*subnet.flags(OPERATOR), "--json", *args], stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def sdk_journey(subnet, tmp_path: Path) -> None:
    """Everything a script does with a lease, through the synchronous client."""
    with Renter(**settings(subnet)) as renter:
        found = renter.machines()
        assert [m.hotkey for m in found] == [subnet.miner_hotkey] and found[0].online
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "data.txt").write_text("one\ntwo\n")
        with renter.rent(ttl="30m", idle_after="20m") as lease:
            assert lease.state == "active" and lease.id in active_on_miner(subnet)
            assert lease.idle is not None and lease.idle.stop_after_s == 1200
            assert lease.expires_at - lease.async_lease.entry.created_at == pytest.approx(1800, abs=2)
            result = lease.run(["printf", "%s\n", "a b", "$HOME"])
            assert (result.exit_status, result.stdout) == (0, "a b\n$HOME\n")  # words quoted one by one
            assert lease.run("echo err >&2; exit 4").exit_status == 4
            with pytest.raises(CommandFailed) as failed:
                lease.run("echo broken >&2; exit 3", check=True)
            assert failed.value.result.exit_status == 3 and "broken" in failed.value.message
            assert lease.run("cat", input="piped").stdout == "piped"
            lease.put(tmp_path / "in", "in")  # a directory: recursive by itself
            assert lease.run("wc -l < in/data.txt", check=True).stdout.strip() == "2"
            lease.get("in/data.txt", tmp_path / "back.txt")
            assert (tmp_path / "back.txt").read_text() == "one\ntwo\n"
            before = lease.expires_at
            assert lease.extend("1h").expires_at == pytest.approx(before + 3600, abs=2)
            listed = register_json(subnet, "list")["leases"]  # the same book as register.py
            assert [entry["lease_id"] for entry in listed] == [lease.id]
            streamed = io.BytesIO()
            lease.run("echo one; echo two", stdout=streamed)
            assert streamed.getvalue() == b"one\ntwo\n"
            assert lease.ssh_command() is not None and "StrictHostKeyChecking=yes" in lease.ssh_command()
        assert lease.state == "released" and active_on_miner(subnet) == []
        lease.release()  # idempotent
        with pytest.raises(LeaseUnavailable):
            lease.run("true")


def test_sdk_rents_runs_copies_extends_and_releases(subnet, tmp_path):
    sdk_journey(subnet, tmp_path)


@pytest.mark.docker
def test_sdk_journey_on_a_docker_lease(docker_subnet, tmp_path):
    sdk_journey(docker_subnet, tmp_path)


def test_a_block_that_raises_still_releases_and_the_error_is_the_blocks(subnet):
    with Renter(**settings(subnet)) as renter:
        with pytest.raises(ZeroDivisionError):
            with renter.rent(ttl="10m") as lease:
                assert lease.id in active_on_miner(subnet)
                raise ZeroDivisionError("the job failed")
    assert active_on_miner(subnet) == []


@pytest.mark.slow
async def test_an_allocation_cancelled_half_way_is_finished_and_released(subnet, slow_first_start):
    async with AsyncRenter(**settings(subnet)) as renter:
        entered = []

        async def rent_one() -> None:
            async with renter.rent(ttl="10m") as lease:
                entered.append(lease)

        task = asyncio.create_task(rent_one())
        await asyncio.sleep(1.0)  # the miner is starting the lease (its first start takes 2.5 s)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert entered == [] and slow_first_start == [1]
    assert active_on_miner(subnet) == []  # the lease the miner made was released, not leaked
    listed = await asyncio.to_thread(register_json, subnet, "list", "--all")
    assert listed["leases"][0]["state"] == "released"


@pytest.mark.slow
def test_ctrl_c_while_the_synchronous_client_allocates_leaves_no_lease(subnet, slow_first_start):
    renter = Renter(**settings(subnet)).open()
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))  # Ctrl-C while the miner starts it
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        renter.allocate(ttl="10m")
    renter.close()  # waits for the late release of what the interrupted allocation made
    assert slow_first_start == [1] and active_on_miner(subnet) == []


async def test_a_lease_whose_ssh_never_answers_is_released_before_the_error(subnet, monkeypatch):
    async def never(self, timeout: float = 180.0) -> float:
        raise HostKeyMismatch("the endpoint presented another host key")

    monkeypatch.setattr(AsyncLease, "wait_ssh", never)
    async with AsyncRenter(**settings(subnet)) as renter:
        with pytest.raises(HostKeyMismatch):
            await renter.allocate(ttl="10m")
    assert active_on_miner(subnet) == []


async def test_a_release_the_miner_cannot_confirm_says_when_the_lease_ends(subnet, monkeypatch):
    monkeypatch.setattr("compute.renter.lease.RELEASE_TRIES", (0.0, 0.1))
    async with AsyncRenter(**settings(subnet)) as renter:
        lease = await renter.allocate(ttl="10m")
        real = lease.entry
        lease.entry = real.with_changes(endpoint="127.0.0.1:9")  # the miner unreachable
        with pytest.raises(ReleaseFailed) as failed:
            await lease.release()
        assert lease.id in failed.value.message and "ends by itself at its term" in failed.value.message
        assert lease.id in active_on_miner(subnet)
        lease.entry = real
        await lease.release()
    assert active_on_miner(subnet) == []


async def test_errors_say_what_to_fix(subnet):
    with pytest.raises(ConfigError, match="cannot be loaded"):
        await AsyncRenter(**{**settings(subnet), "wallet_name": "nobody"}).open()
    with pytest.raises(ConfigError, match="max_proof_age_h must be >= 0"):
        AsyncRenter(**{**settings(subnet), "max_proof_age_h": -1.0})
    async with AsyncRenter(**settings(subnet)) as renter:
        with pytest.raises(NoMachineAvailable, match="gpu_model=B200"):
            await renter.allocate(gpu_model="B200", gpu_count=1)
        with pytest.raises(ConfigError, match="unknown machine requirement"):
            await renter.allocate(gpus=1)
        with pytest.raises(ConfigError, match="--ttl"):
            await renter.allocate(ttl="soon")
        with pytest.raises(ConfigError, match="--idle-after"):
            await renter.allocate(idle_after="1m")
        with pytest.raises(ConfigError):
            await renter.allocate(template="Not A Template!")
        with pytest.raises(LeaseUnavailable):
            renter.lease("abcd1234")
    assert active_on_miner(subnet) == []


async def test_a_lease_rented_with_register_py_is_reachable_from_the_sdk(subnet):
    body = await asyncio.to_thread(
        register_json, subnet, "allocate", "--uid", str(subnet.miner_uid), "--ttl", "10m"
    )
    async with AsyncRenter(**settings(subnet)) as renter:
        lease = renter.lease(body["lease"]["lease_id"][:6])
        assert (await lease.run("echo via-sdk", check=True)).stdout == "via-sdk\n"
        assert [found.id for found in await renter.leases(refresh=True)] == [lease.id]
        known = Path(lease.entry.known_hosts_path or "")
        pinned = known.read_text()
        known.write_text(
            pinned.split()[0]
            + " ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHcE6s0s8ZZx5OQOrdeu2lh9v8SXpB6Tq0xSsGxGgqwL\n"
        )
        await lease._drop_shell()
        with pytest.raises(HostKeyMismatch):
            await lease.run("true")
        with pytest.raises(SshError):
            await lease.put(__file__, "x.py")
        known.write_text(pinned)
        await lease.release()
    assert active_on_miner(subnet) == []
