"""Canary rentals: the validator rents a miner exactly as a renter does with ``register.py``.

A canary goes through the operator service (``compute.operator``: the code behind register.py),
signed by one of the validator's renter identities (``CanaryRenter``: an operator hotkey it rents
through, on a coldkey of its own, or its own hotkey for a miner that admits validators only), from
the identity's own address when it has one (``source``: its HTTP calls and SSH logins): it looks at the machine first (health, specs, availability, as
``register.py resources``), sometimes lists the templates, draws its ask from the renters' table
(``shapes``), allocates with the service's own fresh SSH key and idempotency key (and its retries),
logs in with the pinned host key and runs what a renter runs first, stays a while (``dwell``),
logs in again, then releases the lease and checks that the endpoint is really gone. A refusal for
lack of capacity is asked again once, later, as a renter would; an ask beyond what the miner
supports is asked again with register.py's defaults.

What it deliberately does not do: decide what an outcome is worth (the ledger gives a factor), or
excuse a refusal itself (its caller's ``excuse`` checks verified rentals).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import asyncssh
import httpx

from compute.chain import MetagraphSnapshot
from compute.operator import (
    Allocation,
    BookEntry,
    Client,
    LeaseBook,
    LeaseExpired,
    LeaseNotFound,
    MinerOffline,
    MinerRef,
    MinerRefused,
    NoMatchingMachine,
    Operator,
    OperatorError,
    Refused,
    Wanted,
    offered_templates,
    probe,
    remove_generated_key,
)
from compute.protocol import MAX_LEASE_SECONDS, ErrorCode, HealthRequest, Requirements
from compute.store import Offer
from compute.transport import KeyWallet, MinerClient, Rejected, TransportError, load_wallet
from compute.validator.params import MinerTarget
from compute.validator.rentals.shapes import RENTER_ASKS, Machine, RentalShape, draw_shape
from compute.validator.session.sshprobe import host_key_answers, run_command

log = logging.getLogger(__name__)

# What a renter runs in its first minutes on a new machine (two of them per login, then our token).
RENTER_COMMANDS = (
    "nvidia-smi",
    "nvidia-smi -L",
    "nproc",
    "free -g",
    "df -h",
    "uname -a",
    "python3 --version",
    "ls -la",
    "cat /etc/os-release",
    "uptime",
)
Excuse = Callable[[int, int], Awaitable[bool]]  # (GPUs asked, GPUs the machine claims) -> excused?


@dataclass(frozen=True)
class CanaryOutcome:
    """One canary rental: worked end to end, or why not.

    ``refused``: the miner said no to the allocation; ``excused``: it said "no capacity" twice while
    verified rentals held the GPUs, or its access policy openly refuses this renter (not counted);
    ``closed``: the latter (the miner admits no ordinary renter: a validator's hotkey canaries it);
    ``held_s``: seconds the lease was held (allocate to release, the canary's own load on the
    miner); ``signer``: the renter hotkey that signed it; ``offer``: what the miner answered the
    look before it (its signed price, free GPUs, active leases), informational: for the public feed,
    never for a score.
    """

    ok: bool
    reason: str = ""
    refused: bool = False
    excused: bool = False
    seconds: float = 0.0
    held_s: float = 0.0
    gpus: int = 0
    signer: str = ""
    closed: bool = False
    offer: Offer | None = None


@dataclass(frozen=True)
class CanaryTiming:
    """How long a canary stays and waits; ``expected_hold_s`` sizes its share of the load budget."""

    dwell_s: tuple[float, float] = (10.0, 60.0)  # between the two logins, uniform
    retry_after_s: tuple[float, float] = (20.0, 90.0)  # a "no capacity" is asked again after this
    timeout_s: float = 60.0  # per step: look, allocate, login, release
    setup_s: float = 10.0  # allocate + two logins + release on a Docker miner (estimate)

    @classmethod
    def for_dwell(cls, longest_s: float) -> CanaryTiming:
        """Dwell drawn in [longest/6, longest]; a busy miner asked again after [longest/3, 1.5 longest]."""
        return cls(dwell_s=(longest_s / 6, longest_s), retry_after_s=(longest_s / 3, 1.5 * longest_s))

    @property
    def expected_hold_s(self) -> float:
        return self.setup_s + sum(self.dwell_s) / 2

    @property
    def bound_s(self) -> float:
        """The longest a canary may take: four steps, a retry of "no capacity" and the dwell."""
        return 5 * self.timeout_s + self.retry_after_s[1] + self.dwell_s[1]


def _no_metagraph() -> MetagraphSnapshot:
    raise RuntimeError("canaries name their miner; they never read the metagraph")


class CanaryRenter:
    """One renter identity: a hotkey, its signed client, and the operator service over its own lease
    book, keys and known_hosts files (``data_dir``), as register.py keeps them. ``source``: the local
    address its SSH logins leave from (its client's HTTP calls are bound to it by whoever built the
    client); None: the machine's default route."""

    def __init__(
        self,
        hotkey: str,
        client: Client,
        data_dir: Path,
        timeout_s: float = 60.0,
        validator: bool = False,
        source: str | None = None,
    ) -> None:
        self.hotkey = hotkey
        self.validator = validator  # the validator's own hotkey: a miner it tests admits it
        self.source = source
        self.client = client
        self.data_dir = Path(data_dir)
        self.book = LeaseBook(self.data_dir / "leases.db")
        self.operator = Operator(
            hotkey=hotkey,
            client=client,
            metagraph=_no_metagraph,
            book=self.book,
            data_dir=self.data_dir,
            network="canary",
            netuid=0,
            deadline_s=timeout_s,
        )

    async def aclose(self) -> None:
        """Close its signed client (one ``canary_identities`` made for it)."""
        if isinstance(self.client, MinerClient):
            await self.client.aclose()

    def own_keys(self, now: float) -> frozenset[str]:
        """SSH public keys of this renter's canaries that may still be in their signed term."""
        since = now - MAX_LEASE_SECONDS
        return frozenset(
            " ".join(entry.public_key.split()[:2])
            for entry in self.book.entries(self.hotkey, include_ended=True)
            if entry.created_at >= since and entry.public_key
        )


def canary_identities(
    names: tuple[str, ...], wallet_name: str, wallet_path: Path, data_dir: Path, source: str = ""
) -> tuple[CanaryRenter, ...]:
    """The renter identities of ``--validator.canary_hotkeys`` (``WALLET/HOTKEY``, or a ``HOTKEY`` of
    the validator's wallet ``wallet_name``), each with its own signed client and canary book under
    ``data_dir``; with ``source``, their HTTP calls and SSH logins leave from that local address."""
    identities = []
    for entry in names:
        wallet, hotkey = entry.split("/") if "/" in entry else (wallet_name, entry)
        keys = KeyWallet.from_wallet(load_wallet(wallet, hotkey, str(wallet_path)))
        transport = httpx.AsyncHTTPTransport(local_address=source) if source else None
        client = MinerClient(keys, timeout=30.0, transport=transport)
        identities.append(
            CanaryRenter(client.hotkey, client, data_dir / client.hotkey[:16], source=source or None)
        )
    return tuple(identities)


async def _look(
    renter: CanaryRenter, ref: MinerRef, rng: random.Random, timeout: float
) -> tuple[Machine, Offer] | CanaryOutcome:
    """The machine as ``register.py resources`` (and sometimes ``templates``) shows it, and what it
    answered (``Offer``); or why not."""
    try:
        asked = time.time()
        machine = await asyncio.wait_for(probe(renter.client, ref, Requirements(), None), timeout)
        if not machine.online:
            if machine.refused_us and not renter.validator and await _closed_to(renter, ref, timeout):
                return CanaryOutcome(
                    False, "canary: this miner's access policy admits no such renter", True, True, closed=True
                )
            why = f"canary refused: {machine.error}" if machine.refused_us else None
            return CanaryOutcome(False, why or f"canary: miner did not answer ({machine.error})", bool(why))
        templates: tuple[str, ...] = ()
        if rng.random() < RENTER_ASKS.template_share:
            (found,) = await offered_templates(renter.client, [ref], 1, timeout)
            templates = tuple(t.name for t in found.templates)
    except (OperatorError, asyncio.TimeoutError) as exc:
        return CanaryOutcome(False, f"canary: miner did not answer ({exc or 'timeout'})")
    offer = Offer(
        at=asked,
        price_json=machine.price.model_dump_json() if machine.price is not None else None,
        free_gpus=machine.free_gpus,
        active_leases=machine.active_leases,
    )
    return Machine(
        gpus=machine.gpu_count,
        cpus=machine.cpu,
        ram_gb=machine.ram_gb,
        disk_gb=machine.disk_gb,
        max_term_s=machine.max_duration_s or MAX_LEASE_SECONDS,
        templates=templates,
    ), offer


async def _closed_to(renter: CanaryRenter, ref: MinerRef, timeout: float) -> bool:
    """Does the miner's access policy refuse this renter identity outright (403 ``forbidden`` to a
    plain health call)? An open, whole-key refusal every renter sees as "refused" is the miner's
    choice of whom it serves; what counts is saying "no capacity" to the renters it admits."""
    try:
        await asyncio.wait_for(renter.client.call(ref.endpoint or "", ref.hotkey, HealthRequest()), timeout)
    except Rejected as exc:
        return exc.code == ErrorCode.FORBIDDEN
    except (TransportError, asyncio.TimeoutError):
        return False
    return False


def _wanted(shape: RentalShape) -> Wanted:
    return Wanted(
        gpu_count=shape.gpu_count,
        cpu=shape.cpu_count,
        ram_gb=shape.ram_gb,
        disk_gb=shape.disk_gb,
        extra_ports=shape.ports,
        template=shape.template,
    )


async def _allocate(
    renter: CanaryRenter,
    ref: MinerRef,
    shape: RentalShape,
    claimed: int,
    rng: random.Random,
    timing: CanaryTiming,
    excuse: Excuse | None,
) -> Allocation | CanaryOutcome:
    """The lease, or the outcome of a refusal (asked again as a renter would before giving up)."""
    asked_again = False
    while True:
        try:
            return await renter.operator.allocate(_wanted(shape), shape.term_s, target=ref)
        except MinerRefused as exc:
            if exc.miner_code == ErrorCode.UNSUPPORTED and shape != shape.plain():
                shape = shape.plain()  # beyond this miner's per-lease caps: ask register.py's defaults
                continue
            return CanaryOutcome(False, f"canary refused: {exc.message}", True, gpus=shape.gpu_count)
        except NoMatchingMachine as exc:  # "no capacity": busy now? ask once more, later
            if not asked_again:
                asked_again = True
                await asyncio.sleep(rng.uniform(*timing.retry_after_s))
                continue
            if excuse is not None and await excuse(shape.gpu_count, claimed):
                return CanaryOutcome(
                    False, "canary: GPUs held by verified rentals", True, True, gpus=shape.gpu_count
                )
            return CanaryOutcome(False, f"canary refused: {exc.message}", True, gpus=shape.gpu_count)
        except Refused as exc:
            return CanaryOutcome(False, f"canary allocate failed: {exc.message}", gpus=shape.gpu_count)


async def _login(entry: BookEntry, rng: random.Random, timeout: float, source: str | None) -> str | None:
    """Log in with the lease's key and pinned host key, run two renter commands; None when it works."""
    if not entry.ssh_host or not entry.host_key or not entry.private_key_path:
        return "canary lease has no SSH access"
    token = secrets.token_hex(8)
    command = "; ".join([*rng.sample(RENTER_COMMANDS, 2), f"echo {token}"])
    try:
        key = await asyncio.to_thread(asyncssh.read_private_key, entry.private_key_path)
        out = await run_command(
            entry.ssh_host,
            entry.ssh_port or 22,
            entry.ssh_username or "root",
            key,
            entry.host_key,
            command,
            timeout,
            source,
        )
    except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
        return f"canary SSH failed: {exc or 'timeout'}"
    return None if token in out.split() else "canary command gave the wrong output"


async def _release(renter: CanaryRenter, entry: BookEntry, timeout: float) -> str | None:
    """Deallocate, then check the endpoint no longer answers with the lease's host key.

    Judged only when the miner answered the release (a miner that is down is not judged here: the
    lease ends at its signed term, and this validator never counts it as a rental)."""
    try:
        try:
            await asyncio.wait_for(renter.operator.deallocate(entry.lease_id), timeout)
        except (LeaseNotFound, LeaseExpired):
            pass  # already gone: what the endpoint check below expects
        except (MinerOffline, asyncio.TimeoutError) as exc:
            log.info("canary lease=%s release not answered: %s", entry.lease_id, exc)
            return None
        except OperatorError as exc:
            log.info("canary lease=%s release refused: %s", entry.lease_id, exc)
        if not entry.ssh_host or not entry.host_key:
            return None
        for _ in range(3):
            port = entry.ssh_port or 22
            if await host_key_answers(entry.ssh_host, port, entry.host_key, 5.0, renter.source) is not None:
                return None
            await asyncio.sleep(1.0)
        return "canary lease still answers after its release"
    finally:
        if entry.key_generated and entry.private_key_path:
            remove_generated_key(Path(entry.private_key_path))


async def _use(
    renter: CanaryRenter, entry: BookEntry, rng: random.Random, timing: CanaryTiming, dwell_s: float | None
) -> str | None:
    """What a renter does with a fresh lease: log in, work a while, log in again."""
    problem = await _login(entry, rng, timing.timeout_s, renter.source)
    if problem is None:
        await asyncio.sleep(rng.uniform(*timing.dwell_s) if dwell_s is None else dwell_s)
        problem = await _login(entry, rng, timing.timeout_s, renter.source)
    return problem


async def run_canary(
    renter: CanaryRenter,
    target: MinerTarget,
    rng: random.Random,
    timing: CanaryTiming = CanaryTiming(),
    excuse: Excuse | None = None,
    dwell_s: float | None = None,
) -> CanaryOutcome:
    """Rent ``target`` as a renter, use it, release it; never raises (cancellation releases too)."""
    started = time.monotonic()
    ref = MinerRef(target.hotkey, target.endpoint, target.uid)
    looked = await _look(renter, ref, rng, timing.timeout_s)
    if isinstance(looked, CanaryOutcome):
        return replace(looked, seconds=time.monotonic() - started, signer=renter.hotkey)
    machine, offer = looked
    shape = draw_shape(rng, machine)
    got = await _allocate(renter, ref, shape, machine.gpus, rng, timing, excuse)
    if isinstance(got, CanaryOutcome):
        return replace(got, seconds=time.monotonic() - started, signer=renter.hotkey, offer=offer)
    held_from = time.monotonic()
    problem: str | None = "canary cancelled"
    try:
        problem = await _use(renter, got.entry, rng, timing, dwell_s)
    finally:
        kept = await asyncio.shield(_release(renter, got.entry, timing.timeout_s))
    problem = kept or problem
    log.info(
        "canary uid=%s hotkey=%s signer=%s gpus=%d term=%ds ok=%s %s",
        target.uid,
        target.hotkey[:8],
        renter.hotkey[:8],
        shape.gpu_count,
        shape.term_s,
        problem is None,
        problem or "",
    )
    now = time.monotonic()
    return CanaryOutcome(
        problem is None,
        problem or "",
        seconds=now - started,
        held_s=now - held_from,
        gpus=shape.gpu_count,
        signer=renter.hotkey,
        offer=offer,
    )


__all__ = [
    "RENTER_COMMANDS",
    "CanaryOutcome",
    "CanaryRenter",
    "CanaryTiming",
    "canary_identities",
    "run_canary",
]
