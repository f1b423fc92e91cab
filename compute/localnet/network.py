"""The local demo network: a simulated chain, wallets, N miner processes and K validators.

Everything lives in one work directory (chain database, wallets, miner and validator state, logs),
so a run is reproducible and leaves nothing elsewhere. This module does not score anything itself:
it only wires the real neurons together and reads back what they wrote.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import bittensor as bt
import yaml

from compute.allocation.docker.second_engine import SecondEngine
from compute.allocation.docker.second_engine import skip_reason as second_engine_skip_reason
from compute.chain import connect
from compute.chain.sim import SimChainState

from .processes import Child, ProcessGroup, free_port

log = logging.getLogger(__name__)

NETUID = 27
VALIDATOR_STAKE_TAO = 10_000.0
MINER_STAKE_TAO = 10.0
RENTER_STAKE_TAO = 100.0  # the cheaters' demo: renter hotkeys (operators, the self-renter's own)
OPERATOR_WALLET = "{}-operator"  # each validator's operator identity with --cheaters (signs its
# canaries): a wallet of its own, so its coldkey is no validator's (a miner finds nothing on chain)
# what --cheaters leaves in the work directory (the cheaters' lease stores, the shared box key, the
# self-renter's register.py book): a run starts without an earlier run's leases
CHEATER_DIRS = (
    "refuser",
    "box-a",
    "box-b",
    "box",
    "canary-aware",
    "self-renter",
    "self-rental",
    "sybil-a",
    "sybil-b",
    "sybil-c",
    "hosts-dup",
    "hit-and-run",
    "device",
    "bins",
)


class LocalnetError(Exception):
    """The demo could not be brought up; the message says which step and where its log is."""


@dataclass(frozen=True)
class Options:
    miners: int = 3
    rounds: int = 1
    backend: str = "embedded"
    workdir: Path = Path(".localnet")
    block_time: float = 1.0
    pog_m: int = 512
    pog_n: int = 8192
    pog_p: int = 512
    timeout_s: float = 170.0
    debug: bool = False
    base_image: str | None = None  # the Docker miners' lease image (compute.localnet.images picks it)
    cheaters: bool = False  # add a miner refusing every rental and two hotkeys sharing one box
    dashboard_port: int = 0  # 0 = no dashboard
    validators: int = 1
    spread_s: float = 8.0  # several validators: each spreads its miner tests over this many s
    hosts: int = (
        1  # 2: miner1 rents out this engine and a second one (root; compute.allocation.docker.second_engine)
    )
    collateral: bool = False  # the local EVM, deposits, a lease killer and a renter made whole
    speeds: tuple[float, ...] = ()  # speed share per miner (embedded: paced answers); () = spread_speeds
    latency_ms: tuple[float, ...] = ()  # round trip added between each validator and the leases
    pace_gflops: float = 2.0  # several validators: embedded miners' GEMMs paced at speed x this reference


@dataclass(frozen=True)
class Participant:
    name: str
    wallet: bt.Wallet
    uid: int


DEMO_DISTANCE_SHARE = 0.25  # far demo validators stretch their CPU GEMMs less (2 cores are shared)
# validators at different distances (--latency-ms): every timed GEMM run lasts what a 300 ms
# validator stretches it to (0.3 s / DEMO_DISTANCE_SHARE), near or far, so they all time the same
# work (all near: no floor, short runs)
DEMO_MIN_TIMED_S = 1.2
PROXY = Path(__file__).with_name("latency_proxy.py")


def spread_speeds(miners: int, slowest: float = 0.4) -> tuple[float, ...]:
    """Speeds from 1.0 down to ``slowest``, evenly: the demo's miners differ in speed, so the
    validators must agree on a ranking, not on equality."""
    if miners <= 1:
        return (1.0,) * miners
    return tuple(round(1.0 - (1.0 - slowest) * i / (miners - 1), 3) for i in range(miners))


def validator_name(index: int) -> str:
    """``validator`` for the first (the single-validator demo's name), then ``validator2``, ..."""
    return "validator" if index == 0 else f"validator{index + 1}"


def validator_stake(index: int) -> float:
    """Distinct stakes (10 000, 6 667, 5 000, ... TAO), so consensus is genuinely stake-weighted."""
    return round(VALIDATOR_STAKE_TAO / (1 + 0.5 * index), 3)


def create_wallet(root: Path, name: str) -> bt.Wallet:
    """An unencrypted demo wallet (never use these keys with real funds)."""
    wallet = bt.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_coldkey(use_password=False, suppress=True, overwrite=True)
    wallet.create_new_hotkey(suppress=True, overwrite=True)
    return wallet


class LocalNet:
    def __init__(self, options: Options, repo_root: Path, on_line=None) -> None:
        self.options = options
        self.repo_root = repo_root
        self.workdir = options.workdir.resolve()
        self.chain_path = self.workdir / "chain.db"
        self.wallet_root = self.workdir / "wallets"
        self.on_line = on_line
        self.processes = ProcessGroup(self.workdir / "logs", repo_root)
        self.validator: Participant | None = None  # the first validator (the scoreboard's)
        self.validators: list[Participant] = []
        self.miners: list[Participant] = []
        self.cheaters: list[Participant] = []
        self.second_engine: SecondEngine | None = None
        # validator name -> (extra flags, extra environment), e.g. --collateral.* and its EVM key
        self.validator_extra: dict[str, tuple[list[str], dict[str, str]]] = {}

    # ------------------------------------------------------------------ setup
    def create(self) -> None:
        self.clear_previous_run()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        state = SimChainState.create(
            self.chain_path, netuid=NETUID, block_time=self.options.block_time, weights_rate_limit=1
        )
        for index in range(self.options.validators):
            name = validator_name(index)
            vwallet = create_wallet(self.wallet_root, name)
            uid = state.register(
                vwallet.hotkey.ss58_address,
                vwallet.coldkeypub.ss58_address,
                validator_stake(index),
                validator_permit=True,
            )
            self.validators.append(Participant(name, vwallet, uid))
        self.validator = self.validators[0]
        for index in range(self.options.miners):
            name = f"miner{index + 1}"
            wallet = create_wallet(self.wallet_root, name)
            uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, MINER_STAKE_TAO)
            self.miners.append(Participant(name, wallet, uid))
        if self.options.cheaters:
            self.create_cheaters(state)
        log.info(
            "simulated chain %s: netuid %d, validator uids %s, %d miners",
            self.chain_path,
            NETUID,
            [v.uid for v in self.validators],
            len(self.miners),
        )

    def create_cheaters(self, state: SimChainState) -> None:
        """The cheating miners, each validator's operator identity (an ordinary renter on a coldkey
        of its own, that signs its canaries) and the self-renter's validator-permitted second hotkey
        (its own coldkey)."""
        from .cheat_miners import CHEATERS, SELF_RENTER_KEY

        for validator in self.validators:
            operator = create_wallet(self.wallet_root, OPERATOR_WALLET.format(validator.name))
            state.register(operator.hotkey.ss58_address, operator.coldkeypub.ss58_address, RENTER_STAKE_TAO)
        for name in CHEATERS:
            wallet = create_wallet(self.wallet_root, name)
            uid = state.register(wallet.hotkey.ss58_address, wallet.coldkeypub.ss58_address, MINER_STAKE_TAO)
            self.cheaters.append(Participant(name, wallet, uid))
            if name == "self-renter":
                own = bt.Wallet(name=name, hotkey=SELF_RENTER_KEY, path=str(self.wallet_root))
                own.create_new_hotkey(suppress=True, overwrite=True)
                state.register(own.hotkey.ss58_address, own.coldkeypub.ss58_address, RENTER_STAKE_TAO, True)

    def start_second_host(self) -> None:
        """A second Docker engine (network namespace, mutual TLS) for miner1's second host."""
        reason = second_engine_skip_reason()
        if reason:
            raise LocalnetError(f"--hosts 2: {reason}")
        engine = SecondEngine(self.workdir / "engine2", net=23)
        self.second_engine = engine
        try:
            engine.up(self.options.base_image or "compute-base:cpu")
        except RuntimeError as exc:
            raise LocalnetError(str(exc)) from None
        log.info("second Docker host at %s (TLS) for miner1", engine.env and engine.env["DOCKER_HOST"])

    def _hosts_file(self, low: int) -> Path:
        """miner1's hosts file: this engine and the second one, 25 lease ports each."""
        assert self.second_engine is not None
        local = {
            "name": "local",
            "endpoint": "unix:///var/run/docker.sock",
            "ssh_host": "127.0.0.1",
            "ssh_port_range": f"{low}-{low + 24}",
        }
        hosts = {"hosts": [local, self.second_engine.hosts_entry("second", f"{low + 25}-{low + 49}")]}
        path = self.workdir / "miner1-hosts.yaml"
        path.write_text(yaml.safe_dump(hosts, sort_keys=False))
        return path

    def clear_previous_run(self) -> list[str]:
        """Every run starts fresh: remove what an earlier run left (only the names the demo creates)."""
        removed = []
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.chain_path}{suffix}").unlink(missing_ok=True)
        if self.workdir.is_dir():
            for entry in sorted(self.workdir.iterdir()):
                if entry.is_dir() and (
                    entry.name in ("validator", "wallets", "logs", *CHEATER_DIRS)
                    or (entry.name.startswith("miner") and entry.name[5:].isdigit())
                ):
                    shutil.rmtree(entry)
                    removed.append(entry.name)
        if removed:
            log.info("fresh start: removed the previous run's %s from %s", ", ".join(removed), self.workdir)
        return removed

    def _common_args(self, participant: Participant) -> list[str]:
        args = [
            "--netuid",
            str(NETUID),
            "--subtensor.network",
            f"sim:{self.chain_path}",
            "--wallet.name",
            participant.name,
            "--wallet.hotkey",
            "default",
            "--wallet.path",
            str(self.wallet_root),
        ]
        return args + (["--logging.debug"] if self.options.debug else [])

    # ------------------------------------------------------------------ run
    def start_miners(self) -> list[Child]:
        children = []
        for index, miner in enumerate(self.miners):
            port = free_port()
            low = 42000 + index * 50
            args = [
                "-m",
                "neurons.miner",
                *self._common_args(miner),
                "--axon.ip",
                "127.0.0.1",
                "--axon.port",
                str(port),
                "--axon.external_ip",
                "127.0.0.1",
                "--miner.backend",
                self.options.backend,
                "--miner.ssh_host",
                "127.0.0.1",
                "--miner.ssh_port_range",
                f"{low}-{low + 49}",
                "--miner.data_dir",
                str(self.workdir / miner.name),
            ]
            if self.options.base_image:
                args += ["--miner.base_image", self.options.base_image]
            if self.options.backend == "embedded":
                args += ["--miner.cpu_share", str(self.miner_speed(index))]
                if self.paced():  # validators must agree: figures set by a reference, not the box's load
                    args += ["--miner.pace_gflops", f"{self.options.pace_gflops:g}"]
            if index == 0 and self.second_engine is not None:
                args += ["--miner.hosts_file", str(self._hosts_file(low)), "--miner.host_check_interval", "5"]
            if self.options.backend == "docker" and (os.geteuid() != 0 or self.second_engine is not None):
                args.append(
                    "--miner.disk_cap_advisory"
                )  # no lease disks without root, nor on a remote engine
            children.append(self.processes.start(miner.name, args))
            log.info(
                "%s uid=%d hotkey=%s starting on 127.0.0.1:%d",
                miner.name,
                miner.uid,
                miner.wallet.hotkey.ss58_address[:10],
                port,
            )
        if self.cheaters:
            args = ["-m", "compute.localnet.cheat_miners", str(self.workdir), str(self.chain_path)]
            children.append(self.processes.start("cheaters", args))
            log.info("cheating miners %s starting", [c.name for c in self.cheaters])
        return children

    def paced(self) -> bool:
        """Several validators (embedded: every scored miner's GEMMs, the collateral demo's killer
        included, are paced at ``pace_gflops``). Each validator measures at its own moments of a
        shared, busy CPU: unpaced, two miners of one speed measure ~10 % apart from one validator to
        the next and the Yuma trust falls below its target. One validator keeps the CPU's own runs."""
        return len(self.validators) > 1

    def miner_speed(self, index: int) -> float:
        """The speed of miner ``index`` (embedded backend: its answers paced; Docker: full speed)."""
        speeds = self.options.speeds or spread_speeds(len(self.miners))
        return speeds[index % len(speeds)]

    def latency_of(self, index: int) -> float:
        """Round trip (ms) between validator ``index`` and the leases (the list is cycled)."""
        latencies = self.options.latency_ms
        return latencies[index % len(latencies)] if latencies else 0.0

    def wait_for_miners(self, children: list[Child], timeout_s: float = 60.0) -> None:
        """Wait until every miner has published its endpoint on the chain."""
        chain = connect(f"sim:{self.chain_path}", NETUID)
        try:
            deadline = time.monotonic() + timeout_s
            wanted = {m.wallet.hotkey.ss58_address for m in self.miners + self.cheaters}
            while True:
                for child in children:
                    if not child.alive:
                        raise LocalnetError(
                            f"{child.name} exited with code {child.proc.returncode}; "
                            f"log {child.log_path}:\n{child.tail()}"
                        )
                serving = {n.hotkey for n in chain.metagraph().neurons if n.axon and n.hotkey in wanted}
                if serving == wanted:
                    log.info("all %d miners serve their endpoints on chain", len(wanted))
                    return
                if time.monotonic() > deadline:
                    missing = sorted(wanted - serving)
                    raise LocalnetError(f"miners not serving after {timeout_s:.0f}s: {missing}")
                time.sleep(0.5)
        finally:
            chain.close()

    def run_validators(self, deadline: float) -> None:
        """Run every validator at once to the end (``deadline``: monotonic); raise on a failed one.

        Each tests all miners with its own keys, stake, state and random schedule."""
        children = [self.run_validator(v) for v in self.validators]
        for child in children:
            code = self.wait_for(child, timeout_s=max(5.0, deadline - time.monotonic()))
            if code != 0:
                raise LocalnetError(f"{child.name} exited with code {code}; log {child.log_path}")

    def demo_scoring_env(self) -> dict[str, str]:
        """With several validators: scoring files for a demo whose "GPUs" are one shared CPU.

        Every CPU is weighed by the fp32 TFLOPS it proved (``min_weight`` lowered below the demo's
        ~0.005 TFLOPS, which would otherwise pay every CPU the same floor): the miners run at
        different speeds, so the validators must agree on a ranking, not on equality. The
        sustained factor is floored at 1: on one shared CPU a miner's sustained ratio measures its
        neighbours (0.53-0.75 on honest miners), not its hardware. Proofs, memory and host probes
        are verified and scored as usual; on a network a validation lease holds its GPU alone.
        Sections a config lacks are left as they are."""
        env: dict[str, str] = {}
        for var, default, section, key, value, name in (
            ("COMPUTE_SCORING_CONFIG", "scoring.yaml", "sustained", "floor", 1.0, "scoring-demo.yaml"),
            (
                "COMPUTE_GPU_TABLE",
                "gpu_performance.yaml",
                "cpu_fallback",
                "min_weight",
                1e-9,
                "gpu-demo.yaml",
            ),
        ):
            source = Path(os.environ.get(var) or self.repo_root / "config" / default)
            raw = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
            if not isinstance(raw.get(section), dict):
                log.warning("%s has no %s section; left as is for the demo", source, section)
                continue
            raw[section][key] = value
            target = self.workdir / name
            target.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
            env[var] = str(target)
        return env

    def run_validator(self, participant: Participant | None = None) -> Child:
        validator = participant or self.validator
        assert validator is not None
        several = len(self.validators) > 1
        schedule = ["--validator.spread_seconds", str(self.options.spread_s if several else 0.0)]
        scoring_env = self.demo_scoring_env() if several else None
        args = [
            "-m",
            "neurons.validator",
            *self._common_args(validator),
            "--validator.rounds",
            str(self.options.rounds),
            "--validator.round_blocks",
            "1",
            "--validator.weights_blocks",
            "1",
            "--validator.pog_m",
            str(self.options.pog_m),
            "--validator.pog_n",
            str(self.options.pog_n),
            "--validator.pog_p",
            str(self.options.pog_p),
            "--validator.data_dir",
            str(self.workdir / validator.name),
            *schedule,
            "--validator.load_budget",  # a 1-block round: every validator tests every miner
            "0",
            "--validator.allow_same_ip",  # every demo miner lives on 127.0.0.1
            "--validator.device",
            "cpu",
            "--validator.canary_dwell",  # a canary stays a second, not a minute, on the demo
            "1",
            "--validator.min_timed_s",
            f"{DEMO_MIN_TIMED_S if several and any(self.options.latency_ms) else 0.0:g}",
            "--wandb.off",
        ]
        if self.options.cheaters:  # every miner gets a canary each round, signed by the validator's
            # operator identity (an ordinary renter; the validator's hotkey for miners closed to those)
            identity = f"{OPERATOR_WALLET.format(validator.name)}/default"
            args += ["--validator.canary_rate", "1", "--validator.canary_hotkeys", identity]
        rtt = self.latency_of(self.validators.index(validator))
        if rtt > 0:  # a WAN between this validator and the leases: the latency proxy as ProxyCommand
            proxy = f"{sys.executable} {PROXY} --rtt-ms {rtt:g} --jitter 0.2 {{host}} {{port}}"
            args += ["--validator.lease_proxy", proxy]
            args += ["--validator.distance_share", str(DEMO_DISTANCE_SHARE)]
        if self.options.dashboard_port and validator is self.validator:
            args += ["--dashboard.port", str(self.options.dashboard_port)]
        extra_args, extra_env = self.validator_extra.get(validator.name, ([], {}))
        child = self.processes.start(
            validator.name,
            args + extra_args,
            on_line=self.on_line,
            extra_env={**(scoring_env or {}), **extra_env},
        )
        log.info("%s uid=%d running %d round(s)", validator.name, validator.uid, self.options.rounds)
        return child

    def wait_for(self, child: Child, timeout_s: float) -> int:
        try:
            return child.proc.wait(timeout=timeout_s)
        except Exception as exc:  # TimeoutExpired
            raise LocalnetError(
                f"{child.name} did not finish within {timeout_s:.0f}s; log {child.log_path}"
            ) from exc

    @property
    def store_path(self) -> Path:
        """The validator's store file (its name is fixed by ``ValidatorSettings.db_path``)."""
        return self.workdir / "validator" / f"validator-{NETUID}.db"

    def stop(self) -> None:
        self.processes.stop_all()
        if self.second_engine is not None:
            try:
                self.second_engine.down()
            except RuntimeError as exc:
                log.warning("second Docker host not removed cleanly: %s", exc)
            self.second_engine = None
