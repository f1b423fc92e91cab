"""``localnet --collateral``: a renter made whole, played by the real processes.

Before the neurons start: the local EVM (``compute.collateral.devchain.serve_local``: eth-tester
over JSON-RPC, the real contracts over the precompile doubles), an EVM key per validator and miner
associated with its hotkey through the SDK's ``AssociateEvmKey`` on the simulated chain, the doubles
filled from that chain, and deposits: one day of rent for each miner's machine (the last honest
miner posts half, to show the ramp). A ``killer`` miner (``compute.localnet.lease_killer``) joins
the subnet, and a ``renter`` (validator-permitted, so miners serve it).

Then the story, with the real command lines: the renter rents from the killer with
``register.py allocate --register.renter_evm``; the killer stops the lease seconds later, inside
its two-hour term; the renter runs ``register.py report`` against the first validator; every
validator's desk probes the lease, the validators exchange reports and probes, one assembles the
evidence, the attestations of validators holding half the stake execute the slash, and the renter
runs ``register.py claim``. The demo fails when the renter is not compensated.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from compute.chain import SimChainState, connect

from .network import NETUID, LocalNet, LocalnetError, Participant, create_wallet
from .processes import free_port

log = logging.getLogger(__name__)
TAO = 10**18
RENTER_STAKE_TAO = 1000.0  # miners serve validator-permitted hotkeys with at least 100 TAO
KILL_AFTER_S = 4.0  # the killer stops each rental this long after it started (its term is 2 h)
DEAD_S = 6.0  # validators' recovery window in the demo (production default: 600 s)


@dataclass
class CollateralDemo:
    net: LocalNet
    evm: Any = None
    keys: dict[str, Any] = field(default_factory=dict)  # participant name -> EVM account
    ports: dict[str, int] = field(default_factory=dict)  # validator name -> evidence surface port
    renter: Participant | None = None
    killer: Participant | None = None
    story: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- before the neurons start

    def setup(self) -> None:
        try:
            from compute.collateral.devchain import serve_local
        except ImportError as error:
            raise LocalnetError(
                f"--collateral needs the collateral extra: pip install -e '.[collateral]' ({error})"
            ) from None
        net = self.net
        state = SimChainState.open(net.chain_path)
        for name, stake, permit in (("renter", RENTER_STAKE_TAO, True), ("killer", 10.0, False)):
            wallet = create_wallet(net.wallet_root, name)
            uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, stake, permit)
            setattr(self, name, Participant(name, wallet, uid))
        assert self.killer is not None and self.renter is not None
        self.evm = serve_local(NETUID)
        chain = connect(f"sim:{net.chain_path}", NETUID)
        try:
            for who in [*net.validators, *net.miners, self.killer]:
                self.keys[who.name] = account = self.evm.account()
                chain.associate_evm_key(who.wallet, account)
        finally:
            chain.close()
        self.keys["renter"] = self.evm.account(1.0)
        self.evm.mirror(state, NETUID)
        self._deposit()
        for validator in net.validators:
            self.ports[validator.name] = free_port()
        log.info(
            "collateral: contract %s on %s; deposits made; renter %s",
            self.evm.address,
            self.evm.url,
            self.renter_evm,
        )

    def _deposit(self) -> None:
        payers = [*self.net.miners, self.killer]
        for index, who in enumerate(payers):
            assert who is not None
            tao = 0.5 if who is not self.killer and index == len(self.net.miners) - 1 and index > 0 else 1.0
            client = self.contract(self.keys[who.name])
            client.deposit(int(tao * TAO))
            log.info(
                "%s deposits %.1f TAO for its hotkey (as `python -m compute collateral deposit "
                "--collateral.amount %.1f` does)",
                who.name,
                tao,
                tao,
            )

    @property
    def renter_evm(self) -> str:
        return str(self.keys["renter"].address).lower()

    def contract(self, account: Any = None) -> Any:
        from compute.collateral.chain import CollateralClient
        from compute.collateral.rpc import RpcLimits, bounded_web3

        return CollateralClient(
            bounded_web3(self.evm.url, RpcLimits(deadline_s=60)), self.evm.address, account
        )

    def validator_args(self, validator: Participant) -> list[str]:
        peers = ",".join(f"http://127.0.0.1:{p}" for name, p in self.ports.items() if name != validator.name)
        args = [
            "--collateral.rpc",
            self.evm.url,
            "--collateral.address",
            self.evm.address,
            "--collateral.port",
            str(self.ports[validator.name]),
            "--collateral.dead_seconds",
            str(DEAD_S),
            "--collateral.probe_seconds",
            "2",
            "--collateral.sync_seconds",
            "2",
        ]
        return args + (["--collateral.peers", peers] if peers else [])

    def validator_env(self, validator: Participant) -> dict[str, str]:
        return {"COLLATERAL_EVM_KEY": "0x" + bytes(self.keys[validator.name].key).hex()}

    def start_killer(self) -> Any:
        assert self.killer is not None
        args = ["-m", "compute.localnet.lease_killer", str(self.net.workdir), str(self.net.chain_path)]
        args += [self.killer.name, str(KILL_AFTER_S)]
        if self.net.paced():  # scored like the honest miners, so paced like them
            args.append(f"{self.net.options.pace_gflops:g}")
        return self.net.processes.start("killer", args)

    # ---------------------------------------------------------------- the story

    def register(
        self, *args: str, env: dict[str, str] | None = None, timeout_s: float = 120.0
    ) -> dict[str, Any]:
        """``neurons/register.py ARGS --json`` as the renter, a real process; its JSON answer."""
        net = self.net
        argv = [
            sys.executable,
            "neurons/register.py",
            "--subtensor.network",
            f"sim:{net.chain_path}",
            "--netuid",
            str(NETUID),
            "--wallet.name",
            "renter",
            "--wallet.path",
            str(net.wallet_root),
            "--register.data_dir",
            str(net.workdir / "renter"),
            *args,
            "--json",
        ]
        done = subprocess.run(
            argv,
            cwd=net.repo_root,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            answer = {"ok": False, "error": {"message": (done.stderr or done.stdout)[-400:]}}
        log.info("renter: register.py %s -> %s", args[0], "ok" if answer.get("ok") else answer.get("error"))
        return answer

    def play(self, deadline: float) -> dict[str, Any]:
        """Rent, get killed, report, wait for the quorum's slash, claim; what happened."""
        assert self.killer is not None
        story = self.story
        answer = self.register(
            "allocate",
            "--hotkey",
            self.killer.wallet.hotkey.ss58_address,
            "--duration",
            "2h",
            "--register.renter_evm",
            self.renter_evm,
        )
        if not answer.get("ok"):
            raise LocalnetError(f"the renter could not rent from the killer: {answer.get('error')}")
        lease = answer["lease"]["lease_id"]
        story["lease"] = lease
        first = self.net.validators[0].name
        answer = self.register(
            "report", lease, "--register.validators", f"http://127.0.0.1:{self.ports[first]}"
        )
        story["reported"] = bool(answer.get("ok"))
        contract = self.contract()
        while time.monotonic() < deadline and contract.owed(self.renter_evm) == 0:
            time.sleep(1.0)
        owed = contract.owed(self.renter_evm)
        story["owed_wei"] = owed
        if owed:
            before = self.evm.balance(self.renter_evm)
            key = "0x" + bytes(self.keys["renter"].key).hex()
            answer = self.register(
                "claim",
                "--collateral.rpc",
                self.evm.url,
                "--collateral.address",
                self.evm.address,
                env={"COLLATERAL_EVM_KEY": key},
            )
            story["claimed_wei"] = int(answer.get("claimed_wei", 0)) if answer.get("ok") else 0
            story["renter_gain_wei"] = self.evm.balance(self.renter_evm) - before
        return story

    def summary(self) -> dict[str, Any]:
        from compute.collateral import collateral_factor

        contract = self.contract()
        rate = contract.required(1)
        deposits = {}
        for who in [*self.net.miners, self.killer]:
            assert who is not None
            state = contract.deposit_of(who.wallet.hotkey.ss58_address)
            deposits[who.name] = {
                "deposit_tao": state.amount / TAO,
                "slashes": state.slashes,
                "factor": collateral_factor(state.standing, rate),
            }
        return {
            "contract": self.evm.address,
            "rpc": self.evm.url,
            "renter_evm": self.renter_evm,
            "deposits": deposits,
            "evidence": sorted(self.evidence()),
            **self.story,
        }

    def evidence(self) -> set[str]:
        """The distinct evidence documents the validators' books hold (their keccak names)."""
        found: set[str] = set()
        for validator in self.net.validators:
            folder = self.net.workdir / validator.name / "collateral" / "evidence"
            found |= {path.stem for path in folder.glob("*.json")}
        return found

    def stop(self) -> None:
        if self.evm is not None:
            self.evm.stop()


def run_story(net: LocalNet, demo: CollateralDemo, rounds: int, deadline: float) -> None:
    """Miners, the killer and validators up; the story played; ``rounds`` rounds finished; the
    validators stopped (SIGTERM: they exit 0 with everything in their stores)."""
    children = net.start_miners()
    assert demo.killer is not None
    net.cheaters.append(demo.killer)  # on the scoreboard with the cheaters (after their process started)
    children.append(demo.start_killer())
    net.wait_for_miners(children)
    # Validators run until stopped (the story may outlast the rounds): the first round at once, the
    # others 30 blocks apart, and no round after the wanted ones while the story goes on.
    spacing = "30" if rounds > 1 else "100000"
    for validator in net.validators:
        extra = ["--validator.rounds", "0", "--validator.round_blocks", spacing]
        net.validator_extra[validator.name] = (
            demo.validator_args(validator) + extra,
            demo.validator_env(validator),
        )
    validators = [net.run_validator(v) for v in net.validators]
    try:
        demo.play(deadline)
        wait_rounds(net, rounds, deadline)
    finally:
        for child in validators:
            if child.alive:
                child.proc.terminate()
        for child in validators:
            try:
                child.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.proc.kill()


def render_collateral(story: dict[str, Any] | None, console: Any) -> None:
    """The collateral part of the scoreboard: deposits and factors, the failed rental, the claim."""
    if story is None:
        return
    from rich.table import Table

    table = Table(
        title=f"Collateral (contract {story['contract'][:12]}…, one day of rent = 1 TAO per machine)"
    )
    for column in ("miner", "deposit TAO", "slashes", "credit factor"):
        table.add_column(column, justify="left" if column == "miner" else "right")
    for name, row in story["deposits"].items():
        table.add_row(name, f"{row['deposit_tao']:.2f}", str(row["slashes"]), f"{row['factor']:.2f}")
    console.print(table)
    owed = story.get("owed_wei", 0) / TAO
    console.print(
        f"  killer's lease {story.get('lease', '?')[:12]}… reported: {story.get('reported')}; "
        f"evidence documents: {len(story.get('evidence', []))}; "
        f"slashed to the renter: {owed:.2f} TAO; claimed: {story.get('claimed_wei', 0) / TAO:.2f} TAO "
        f"(renter's balance +{story.get('renter_gain_wei', 0) / TAO:.4f} TAO after gas)",
        highlight=False,
    )


def collateral_problems(summary: dict[str, Any]) -> list[str]:
    """The demo fails unless the renter was reported, compensated by the slash, and claimed it."""
    story = summary.get("collateral")
    if story is None:
        return []
    problems = []
    if not story.get("reported"):
        problems.append("the renter's report was accepted by no validator")
    if not story.get("owed_wei"):
        problems.append("the validators did not slash the killer: the renter was not compensated")
    elif story.get("claimed_wei", 0) != story["owed_wei"] or story.get("renter_gain_wei", 0) <= 0:
        problems.append("the renter could not claim its compensation")
    killer = story.get("deposits", {}).get("killer", {})
    if killer.get("slashes", 0) > 1:
        problems.append(f"one dead lease was slashed {killer['slashes']} times")
    if len(story.get("evidence", [])) > 1:
        problems.append(f"one dead lease was assembled into {len(story['evidence'])} evidence documents")
    return problems


def wait_rounds(net: LocalNet, rounds: int, deadline: float) -> None:
    """Until every validator finished ``rounds`` rounds (read from their stores, read-only)."""
    from compute.store import ValidatorStore

    for validator in net.validators:
        path = net.workdir / validator.name / f"validator-{NETUID}.db"
        while True:
            if path.exists():
                store = ValidatorStore(path)
                try:
                    if store.rounds_finished() >= rounds and store.last_weights() is not None:
                        break
                finally:
                    store.close()
            if time.monotonic() > deadline:
                raise LocalnetError(f"{validator.name} did not finish {rounds} round(s) in time")
            time.sleep(1.0)


__all__ = ["CollateralDemo", "collateral_problems", "run_story", "wait_rounds"]
