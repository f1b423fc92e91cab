"""No lease the renter does not know: an allocate interrupted at any moment records or releases it.

The miner is the real app (embedded backend; Docker marked) on 127.0.0.1. ``register.py allocate``
runs as real processes (forked from a driver that imported the CLI once: ``interrupt_driver.py``)
and gets a real SIGINT, SIGTERM or SIGKILL at moments spread over its whole run: before the
request, while the miner makes the lease (its start is slowed to widen that window), while the
answer is recorded, after. After each, every lease the miner holds for the renter's hotkey must be
active in the renter's book: for SIGINT and SIGTERM at once (the CLI finishes and releases what
was being made), for SIGKILL after ``list --refresh`` (the intent written before the request
left is settled).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute.allocation import EmbeddedBackend, LeaseStore
from compute.chain import connect
from compute.operator import EXIT_OK, LeaseBook, generate_keypair, main
from compute.operator.book import Intent
from compute.protocol import AllocateRequest, Requirements
from compute.transport import MinerClient, load_wallet

OPERATOR = "operator_a"
DRIVER = Path(__file__).with_name("interrupt_driver.py")


def _unknown(subnet, operator: str = OPERATOR) -> set[str]:
    """Rentals the miner holds (pending or active) for the operator that its book does not show active."""
    hotkey = subnet.operators[operator]
    held = {
        s.lease_id
        for s in LeaseStore(subnet.root / "miner" / "leases.db").live()
        if s.record.owner_hotkey == hotkey and s.record.purpose == "rental"
    }
    book = LeaseBook(subnet.root / f"register-{operator}" / "leases.db")
    return held - {e.lease_id for e in book.entries(hotkey)}


def _intents(subnet, operator: str = OPERATOR) -> list:
    return LeaseBook(subnet.root / f"register-{operator}" / "leases.db").intents(subnet.operators[operator])


def _release_all(subnet, operator: str = OPERATOR) -> None:
    book = LeaseBook(subnet.root / f"register-{operator}" / "leases.db")
    for entry in book.entries(subnet.operators[operator]):
        assert subnet.cli(operator, "deallocate", entry.lease_id)[0] == EXIT_OK


def _send_like_a_killed_process(subnet, operator: str = OPERATOR) -> str:
    """What a process killed right after sending leaves: the intent in the book (written as the
    operator writes it), the lease on the miner, no answer recorded."""
    wallet = load_wallet(operator, "default", str(subnet.wallets_dir))
    data_dir = subnet.root / f"register-{operator}"
    key = generate_keypair(data_dir / "keys")
    request = AllocateRequest(
        requirements=Requirements(cpu_count=1),
        duration_s=1800,
        ssh_public_key=key.public_line,
        idempotency_key="killed-after-sending-1",
    )
    chain = connect(f"sim:{subnet.chain_path}", 27)
    try:
        neuron = chain.metagraph().by_hotkey()[subnet.miner_hotkey]
    finally:
        chain.close()
    LeaseBook(data_dir / "leases.db").add_intent(
        Intent(
            idempotency_key="killed-after-sending-1",
            owner_hotkey=wallet.hotkey.ss58_address,
            miner_uid=neuron.uid,
            miner_hotkey=neuron.hotkey,
            endpoint=neuron.axon or "",
            request=request.model_dump_json(),
            private_key_path=str(key.private_path),
            key_generated=True,
            created_at=time.time(),
        )
    )

    async def send() -> str:
        async with MinerClient(wallet, timeout=20) as client:
            answer = await client.call(neuron.axon or "", neuron.hotkey, request)
            return answer.lease.lease_id

    return asyncio.run(send())


def test_a_request_a_killed_process_sent_is_released_by_list_refresh(subnet):
    lease_id = _send_like_a_killed_process(subnet)
    assert _unknown(subnet) == {lease_id}  # the leak as it was: the miner holds it, the book does not
    code, body = subnet.cli(OPERATOR, "list", "--refresh")
    assert code == EXIT_OK, body
    assert _unknown(subnet) == set() and _intents(subnet) == []
    code, body = subnet.cli(OPERATOR, "list", "--all")
    assert [(e["lease_id"], e["state"]) for e in body["leases"]] == [(lease_id, "released")]
    status = LeaseStore(subnet.root / "miner" / "leases.db").get(lease_id)
    assert status is not None and status.state == "released"


def test_list_refresh_adopts_a_rental_the_miner_holds_for_this_hotkey(subnet):
    code, first = subnet.cli(OPERATOR, "allocate", "--uid", str(subnet.miner_uid), "--ttl", "30m")
    assert code == EXIT_OK, first
    lease_id = _send_like_a_killed_process(subnet)
    for intent in _intents(subnet):  # forget the intent too: a lease made by another host of this hotkey
        LeaseBook(subnet.root / f"register-{OPERATOR}" / "leases.db").drop_intent(intent.idempotency_key)
    assert _unknown(subnet) == {lease_id}
    code, body = subnet.cli(OPERATOR, "list", "--refresh")
    assert code == EXIT_OK, body
    assert body["adopted"] == [lease_id]
    assert _unknown(subnet) == set()
    listed = {e["lease_id"]: e for e in body["leases"]}
    assert listed[lease_id]["state"] == "active" and listed[lease_id]["ssh"]["private_key_file"] is None
    _release_all(subnet)


def test_an_interrupted_allocate_in_process_releases_the_lease_it_was_making(subnet, monkeypatch):
    """The cancellation path itself: Ctrl-C arrives while the miner is starting the lease."""
    original = EmbeddedBackend.start

    async def start_and_interrupt(self, lease):
        os.kill(os.getpid(), signal.SIGINT)  # the renter presses Ctrl-C now: the request is in the miner
        await asyncio.sleep(0.3)
        return await original(self, lease)

    monkeypatch.setattr(EmbeddedBackend, "start", start_and_interrupt)
    out, err = io.StringIO(), io.StringIO()
    argv = [*subnet.flags(OPERATOR), "allocate", "--uid", str(subnet.miner_uid), "--ttl", "30m"]
    code = main(argv, stdout=out, stderr=err)
    assert code == 130
    assert "was made and is released" in err.getvalue(), err.getvalue()
    assert _unknown(subnet) == set() and _intents(subnet) == []
    assert "Traceback" not in err.getvalue() + out.getvalue()


def test_ctrl_c_while_the_cli_makes_its_consoles_exits_130_with_one_line():
    """The first moment of all: Ctrl-C before the consoles exist (CI caught one in rich's init)."""

    class PressedWhileAsked(io.StringIO):
        def isatty(self) -> bool:
            raise KeyboardInterrupt

    out, err = PressedWhileAsked(), io.StringIO()
    assert main(["list"], stdout=out, stderr=err) == 130
    assert err.getvalue() == "interrupted\n" and out.getvalue() == ""


def test_ctrl_c_while_register_py_loads_exits_130_with_one_line() -> None:
    """Before ``main`` exists: the entry point's imports take a second or two (bittensor, torch-free)."""
    script = Path(__file__).resolve().parents[2] / "neurons" / "register.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(0.25)  # the interpreter is up (its SIGINT handler with it), the imports are not done
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip() == "interrupted" and out == "", err


def test_ctrl_c_after_the_result_is_shown_keeps_its_exit_code(subnet, monkeypatch):
    """CI caught it: ``allocate --nodes`` printed its cluster ("ok": true), then a SIGINT while the
    client closed made it exit 130, and the test released nothing the renter had been shown."""
    from compute.operator import cli

    shown = cli.emit

    def emit_then_ctrl_c(out, result, as_json):  # noqa: ANN001
        shown(out, result, as_json)
        os.kill(os.getpid(), signal.SIGINT)  # lands at the next await: closing the client

    monkeypatch.setattr(cli, "emit", emit_then_ctrl_c)
    out, err = io.StringIO(), io.StringIO()
    assert main([*subnet.flags(OPERATOR), "list", "--json"], stdout=out, stderr=err) == EXIT_OK
    assert json.loads(out.getvalue())["ok"] is True and "interrupted" not in err.getvalue()


class Driver:
    def __init__(self, scratch: Path) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(scratch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self.proc.stdout.readline())["ready"]

    def run(self, argv: list[str], signum: int | None = None, delay: float = 0.0) -> dict:
        self.proc.stdin.write(json.dumps({"argv": argv, "signal": signum, "delay": delay}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def _moments(driver: Driver, argv: list[str], subnet, count: int) -> list[float]:
    """``count`` delays spread from 0 to a little past one whole uninterrupted allocate."""
    whole = driver.run(argv)
    assert whole["code"] == EXIT_OK, whole
    _release_all(subnet)
    return [whole["elapsed"] * 1.15 * i / (count - 1) for i in range(count)]


def _interrupt_everywhere(subnet, tmp_path: Path, count: int, kills: int) -> dict:
    driver = Driver(tmp_path / "driver")
    argv = [*subnet.flags(OPERATOR), "allocate", "--uid", str(subnet.miner_uid), "--ttl", "30m", "--json"]
    outcomes: dict = {"tried": 0, "interrupted": 0, "completed": 0, "leaked": 0, "killed": 0}
    try:
        moments = _moments(driver, argv, subnet, count)
        signals = [signal.SIGINT] * len(moments) + [signal.SIGTERM] * 3
        delays = moments + [moments[len(moments) // 3], moments[len(moments) // 2], moments[-3]]
        for signum, delay in zip(signals, delays, strict=True):
            done = driver.run(argv, int(signum), delay)
            outcomes["tried"] += 1
            assert "TRACEBACK" not in done["stderr"] and "Traceback" not in done["stderr"], done
            if done["code"] == EXIT_OK:
                outcomes["completed"] += 1
                assert json.loads(done["stdout"])["ok"]
            else:
                assert done["code"] == 128 + signum, done
                assert done["stderr"].strip().startswith("interrupted"), done
                outcomes["interrupted"] += 1
            leaked = _unknown(subnet)
            outcomes["leaked"] += len(leaked)
            assert leaked == set(), (signum, delay, done)
            assert _intents(subnet) == [], (signum, delay, done)
            _release_all(subnet)
        for delay in (moments[len(moments) // 3], moments[len(moments) // 2], moments[-2])[:kills]:
            done = driver.run(argv, int(signal.SIGKILL), delay)
            outcomes["killed"] += 1
            subnet.cli(OPERATOR, "list", "--refresh")
            leaked = _unknown(subnet)
            outcomes["leaked"] += len(leaked)
            assert leaked == set(), (delay, done)
            assert _intents(subnet) == [], (delay, done)
            _release_all(subnet)
    finally:
        driver.close()
    return outcomes


@pytest.mark.slow
def test_sigint_sigterm_and_sigkill_at_every_moment_of_allocate_leak_no_lease(subnet, tmp_path, slowed_start):
    outcomes = _interrupt_everywhere(subnet, tmp_path, count=24, kills=3)
    print("interrupted allocate (embedded):", outcomes)
    assert outcomes["leaked"] == 0
    assert outcomes["interrupted"] >= 10 and outcomes["killed"] == 3  # the moments really cut it short


@pytest.mark.docker
def test_sigint_at_moments_of_a_docker_allocate_leaks_no_lease(docker_subnet, tmp_path):
    outcomes = _interrupt_everywhere(docker_subnet, tmp_path, count=8, kills=2)
    print("interrupted allocate (docker):", outcomes)
    assert outcomes["leaked"] == 0 and outcomes["interrupted"] >= 4
