"""Every validation lease the validator was granted is released.

Played against the real processes (``neurons/miner.py`` with the embedded backend,
``neurons/validator.py``, a simulated chain, real wallets): ``kill -9`` of the miner in the middle
of its test, then the miner back; ``kill -9`` of the validator while it holds a lease, then the
validator back. And in-process: an allocate whose answer is lost (the miner made the lease, the
validator never learnt its id). Each ends with 0 validation leases left on the miner.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import asyncssh
import pytest
from validator_helpers import port_block

from compute.chain import SimChainState, connect
from compute.protocol import AllocateRequest, Requirements
from compute.store.journal import LeaseJournal
from compute.transport import RequestTimeout
from compute.validator import JournaledClient, new_run_id, release_due

REPO = Path(__file__).resolve().parents[2]
NETUID = 27


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTE_", "BT_", "WANDB"))}
    return env | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def validation_leases(db: Path) -> list[tuple[str, str]]:
    """(lease id, state) of the miner's live validation leases, read from another process."""
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(
            "SELECT lease_id, state FROM leases WHERE purpose='validation' AND state IN ('pending','active')"
        ).fetchall()
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        conn.close()


def wait_for(what: str, condition, timeout: float, poll: float = 0.02):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Net:
    def __init__(self, root: Path, make_wallet) -> None:
        self.root, self.chain = root, root / "chain.db"
        state = SimChainState.create(self.chain, netuid=NETUID, block_time=0.5)
        vali, miner = make_wallet("vali"), make_wallet("miner")
        state.register(vali.hotkey.ss58_address, vali.coldkeypub.ss58_address, 5000.0, True)
        state.register(miner.hotkey.ss58_address, miner.coldkeypub.ss58_address, 10.0, False)
        self.miner_wallet = miner
        self.miner_port, (self.low, self.high) = _free_port(), port_block()
        self.miner_db = root / "miner" / "leases.db"
        self.procs: list[subprocess.Popen] = []

    def common(self, wallet: str) -> list[str]:
        return ["--subtensor.network", f"sim:{self.chain}", "--netuid", str(NETUID), "--wallet.name", wallet,
                "--wallet.path", str(self.root / "wallets"), "--env_file", str(self.root / "none.env")]  # fmt: skip

    def start(self, script: str, args: list[str], log: str) -> subprocess.Popen:
        out = open(self.root / log, "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "neurons" / script), *args], stdout=out, stderr=subprocess.STDOUT,
            cwd=self.root, env=_env(),
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def start_miner(self) -> subprocess.Popen:
        args = self.common("miner") + [
            "--axon.ip", "127.0.0.1", "--axon.port", str(self.miner_port), "--miner.backend", "embedded",
            "--miner.ssh_port_range", f"{self.low}-{self.high}", "--miner.data_dir", str(self.miner_db.parent),
        ]  # fmt: skip
        proc = self.start("miner.py", args, "miner.log")
        wait_for("the miner's port", lambda: _listening(self.miner_port), 60, 0.2)
        return proc

    def start_validator(self, *extra: str) -> subprocess.Popen:
        args = self.common("vali") + [
            "--validator.round_blocks", "10000", "--validator.spread_seconds", "0", "--validator.allow_same_ip",
            "--validator.load_budget", "0", "--validator.min_timed_s", "0",
            "--validator.pog_m", "64", "--validator.pog_n", "4096", "--validator.pog_p", "64",
            "--validator.device", "cpu", "--validator.miner_timeout", "60", "--validator.retries", "0",
            "--validator.data_dir", str(self.root / "vdata"), "--wandb.off", *extra,
        ]  # fmt: skip
        return self.start("validator.py", args, "validator.log")

    def journal(self) -> list[tuple[str, str | None]]:
        db = self.root / "vdata" / f"validator-{NETUID}.db"
        if not db.exists():
            return []
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT state, lease_id FROM lease_journal").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            conn.close()

    def log(self) -> str:
        return "".join(
            (self.root / n).read_text(errors="replace")[-3000:] for n in ("miner.log", "validator.log")
        )

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def net(tmp_path: Path, make_wallet):
    network = Net(tmp_path, make_wallet)
    yield network
    network.stop_all()


@pytest.mark.slow
def test_lease_of_a_miner_killed_mid_test_is_released_once_it_is_back(net: Net) -> None:
    miner = net.start_miner()
    validator = net.start_validator()
    try:
        wait_for(
            "an active validation lease",
            lambda: "active" in dict(validation_leases(net.miner_db)).values(),
            90,
        )
        miner.send_signal(signal.SIGKILL)  # kill -9 in the middle of the miner's test
        miner.wait(10)
        held = validation_leases(net.miner_db)
        assert held and all(state == "active" for _, state in held)
        # the release owed: by id when the allocate's answer came back before the kill, else
        # "unsure" (the kill took the answer with it; the miner is asked for its list when back)
        owed = {("releasing", held[0][0]), ("unsure", None)}
        wait_for("the failed release in the journal", lambda: owed & set(net.journal()), 120, 0.5)
        net.start_miner()  # back, with the same leases.db: the lease is still active there
        wait_for("no validation lease left", lambda: not validation_leases(net.miner_db), 90, 0.5)
        assert net.journal() == []
        assert validator.poll() is None  # the validator kept running all along
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{net.log()}") from None


@pytest.mark.slow
def test_leases_of_a_killed_validator_are_released_at_its_next_start(net: Net) -> None:
    net.start_miner()
    validator = net.start_validator()
    try:
        wait_for(
            "an active validation lease",
            lambda: "active" in dict(validation_leases(net.miner_db)).values(),
            90,
        )
        validator.send_signal(signal.SIGKILL)  # kill -9 while it holds the lease
        validator.wait(10)
        assert validation_leases(net.miner_db) and net.journal()
        chain = connect(f"sim:{net.chain}", NETUID)  # the miner moves its axon: its next test
        try:  # finds nothing there, so only the journal can release the lease
            chain.serve(net.miner_wallet, "127.0.0.1", _free_port())
        finally:
            chain.close()
        restarted = net.start_validator("--validator.rounds", "1")
        assert restarted.wait(120) == 0, net.log()
        assert validation_leases(net.miner_db) == [] and net.journal() == []
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{net.log()}") from None


@pytest.mark.slow
async def test_an_allocate_whose_answer_was_lost_is_released(tmp_path: Path, start_miner, make_wallet, slow_first_start) -> None:  # fmt: skip
    miner = start_miner("slowstart")
    journal = LeaseJournal(tmp_path / "validator.db")
    async with JournaledClient(make_wallet("validator"), journal, new_run_id(), timeout=1.0) as client:
        request = AllocateRequest(
            requirements=Requirements(gpu_count=0, cpu_count=1, memory_gb=1.0),
            duration_s=600,
            ssh_public_key=asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip(),
            purpose="validation",
            idempotency_key="lost-answer-1",
        )
        with pytest.raises(RequestTimeout):  # the start takes 2.5 s: the answer is lost
            await client.call(miner.endpoint, miner.hotkey, request)
        assert [(e.state, e.lease_id) for e in journal.entries()] == [("unsure", None)]
        await asyncio.sleep(2.0)  # the miner finishes making the lease nobody knows the id of
        live = [lease for lease in miner.manager.store.live() if lease.record.purpose == "validation"]
        assert len(live) == 1
        client.timeout = 15.0
        report = await release_due(client)
    assert (report.released, report.owed) == (1, 0)
    assert [lease for lease in miner.manager.store.live() if lease.record.purpose == "validation"] == []
    assert journal.entries() == []
    journal.close()
