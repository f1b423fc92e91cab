"""The operator's lease operations: allocate, status, extend, exchange key, restart, deallocate.

``Operator`` ties together the metagraph (who serves where), the signed miner client, the lease
book and the data directory of keys and known_hosts files. Every method is async, returns typed
values and raises ``compute.operator.errors`` subclasses; nothing here prints.

No lease is ever left running that the book does not know: the intent of each allocate request
is written to the book before it is sent (``LeaseBook.add_intent``) and settled when its answer
is recorded; an allocation cancelled half-way (Ctrl-C, SIGTERM: ``allocate_or_undo``) is finished
and released, and an intent a killed process left behind is settled by ``settle_intents`` (the
same request again, same idempotency key: the miner answers with the lease the first one made,
which is then released). ``leases(refresh=True)`` settles intents and adopts every active rental
a miner of the book holds for this hotkey.

Key handling decisions: a key pair this tool generated is deleted once it can no longer open its
lease (after a successful key exchange, and after deallocation); a renter's own ``--ssh-key`` is
never touched. Leases not in the book can still be addressed with an explicit miner (``miner=``),
which is how a second operator learns that the miner, the authority, refuses it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from compute.chain import MetagraphSnapshot
from compute.operator.book import BookEntry, Intent, LeaseBook
from compute.operator.cover import CollateralReader, Cover
from compute.operator.discovery import Machine, VerifiedGpus, Wanted, discover, matches, probe, rank
from compute.operator.errors import (
    LeaseExpired,
    LeaseNotFound,
    MinerIdentityError,
    MinerOffline,
    MinerRefused,
    NoMatchingMachine,
    Refused,
    UsageError,
)
from compute.operator.keys import (
    RenterKey,
    generate_keypair,
    remove_generated_key,
    ssh_command,
    write_known_hosts,
)
from compute.operator.rentals import save_rental
from compute.operator.rpc import Client, MinerRef, ask_all, call
from compute.protocol import (
    AllocateRequest,
    DeallocateRequest,
    ErrorCode,
    ExchangeKeyRequest,
    ExtendLeaseRequest,
    LeaseHealth,
    LeaseIdle,
    LeaseInfo,
    LeaseLogsRequest,
    LeaseLogsResponse,
    LeaseStatusRequest,
    ListLeasesRequest,
    ListLeasesResponse,
    Message,
    RestartLeaseRequest,
    SshAccess,
)
from compute.transport import RequestTimeout, SignedExchange

logger = logging.getLogger(__name__)

MAX_ALLOCATION_ATTEMPTS = 3
# A lost answer (timeout) or a lease still starting is asked again with the same idempotency key:
# the miner answers with the lease the first attempt made, so a retry never rents twice.
ALLOCATE_TRIES = 4
ALLOCATE_RETRY_S = (1.0, 2.0, 4.0)
_UNSPECIFIED_HOSTS = {"", "0.0.0.0", "::", "[::]"}
# How long an interrupted allocation is waited for (its retries included) before it is left to
# ``settle_intents``; and how long past its term an unsettled intent is kept (its lease, if any,
# has ended by then).
UNDO_GRACE_S = 120.0
INTENT_MARGIN_S = 600.0
# Answers after which a lease may exist on the miner (the intent is kept and settled later); every
# other refusal is a miner's definite "no", which made nothing.
_MAYBE_MADE = {ErrorCode.BUSY, ErrorCode.INTERNAL}


@dataclass(frozen=True)
class Settled:
    """What became of one intent: the lease it made (released, or already ended), or why it waits."""

    idempotency_key: str
    miner_hotkey: str
    lease_id: str | None = None
    state: str | None = None  # released | expired | none (nothing was made) | pending (not settled)
    problem: str | None = None


@dataclass(frozen=True)
class Allocation:
    entry: BookEntry
    machine: Machine
    skipped: tuple[str, ...]  # why better-ranked machines were passed over
    cover: Cover | None = None  # the miner's collateral as read before renting (with a contract)


class Operator:
    """Lease operations for one operator hotkey on one subnet."""

    def __init__(
        self,
        *,
        hotkey: str,
        client: Client,
        metagraph: Callable[[], MetagraphSnapshot],
        book: LeaseBook,
        data_dir: Path,
        network: str,
        netuid: int,
        verified: Mapping[str, VerifiedGpus] | None = None,
        concurrency: int = 32,
        deadline_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        renter_evm: str | None = None,
        collateral: CollateralReader | None = None,
    ) -> None:
        self.hotkey = hotkey
        # Where collateral slashed for a failed rental is owed (signed into each allocate request);
        # with it, each rental as both sides signed it is kept under <data_dir>/rentals.
        self.renter_evm = renter_evm
        # The collateral contract, read before renting: with renter_evm, a term it does not cover is
        # never rented (compute.operator.cover).
        self.collateral = collateral
        self.rentals_dir = Path(data_dir) / "rentals"
        self.client = client
        self._metagraph_source = metagraph
        self._metagraph: MetagraphSnapshot | None = None
        self.book = book
        self.keys_dir = Path(data_dir) / "keys"
        self.hosts_dir = Path(data_dir) / "known_hosts"
        self.network = network
        self.netuid = netuid
        self.verified = dict(verified or {})
        self.concurrency = concurrency
        self.deadline_s = deadline_s
        self.lease_health: dict[str, LeaseHealth] = {}  # as the miners last reported it
        self.lease_idle: dict[str, LeaseIdle] = {}  # the miners' idle watch, for leases with an idle stop
        self.clock = clock
        self.undone: list[Settled] = []  # what an interrupted ``allocate_or_undo`` released or left
        self.adopted: list[BookEntry] = []  # leases the last ``leases(refresh=True)`` adopted

    # ------------------------------------------------------------ miners

    async def metagraph(self) -> MetagraphSnapshot:
        if self._metagraph is None:
            self._metagraph = await asyncio.to_thread(self._metagraph_source)
        return self._metagraph

    async def miners(self) -> list[MinerRef]:
        """Every neuron serving an axon, except ourselves."""
        graph = await self.metagraph()
        return [
            MinerRef(n.hotkey, n.axon, n.uid) for n in graph.neurons if n.axon and n.hotkey != self.hotkey
        ]

    async def find_miner(self, uid: int | None = None, hotkey: str | None = None) -> MinerRef:
        graph = await self.metagraph()
        for neuron in graph.neurons:
            if (uid is not None and neuron.uid == uid) or (hotkey is not None and neuron.hotkey == hotkey):
                if not neuron.axon:
                    raise MinerOffline(f"miner uid {neuron.uid} is registered but serves no axon")
                return MinerRef(neuron.hotkey, neuron.axon, neuron.uid)
        what = f"uid {uid}" if uid is not None else f"hotkey {hotkey}"
        raise UsageError(f"no neuron with {what} on subnet {self.netuid}")

    async def resources(self, wanted: Wanted) -> list[Machine]:
        machines = await discover(
            self.client, await self.miners(), wanted, self.verified, self.concurrency, self.deadline_s
        )
        shown = [m for m in machines if matches(m, wanted) or (not m.online and not wanted.available_only)]
        return sorted(shown, key=lambda m: (not m.online, not m.verified, m.uid if m.uid is not None else 0))

    # ------------------------------------------------------------ allocation

    async def allocate(
        self,
        wanted: Wanted,
        duration_s: int,
        key: RenterKey | None = None,
        target: MinerRef | None = None,
        *,
        probed: Machine | None = None,
    ) -> Allocation:
        """Rent the best machine for ``wanted`` (or ``target``) for ``duration_s`` seconds;
        ``probed``: rent this machine, already probed and matched, as a target (a cluster's member)."""
        if probed is not None:
            target, candidates = probed.ref, [probed]
        elif target is not None:
            machine = await probe(
                self.client, target, wanted.requirements(), self.verified.get(target.hotkey)
            )
            if not machine.online:
                raise MinerOffline(machine.error or f"miner {target.label()} did not answer")
            price = machine.hourly_price(wanted.gpu_count)
            if wanted.max_price is not None and (price is None or price > wanted.max_price):
                asks = "names no price" if price is None else f"asks ${price:.4g}/h"
                raise NoMatchingMachine(
                    f"miner {target.label()} {asks}, over your --max-price ${wanted.max_price:.4g}/h"
                )
            candidates = [machine]
        else:
            machines = await self.resources(wanted)
            candidates = rank(machines, wanted)
            if not candidates:
                refusals = [m for m in machines if m.refused_us]
                note = (
                    f"; {len(refusals)} miner(s) refused this hotkey: {refusals[0].error}" if refusals else ""
                )
                raise NoMatchingMachine(f"no available machine matches {_describe(wanted)}{note}")
        generated = key is None
        key = key or generate_keypair(self.keys_dir)
        skipped: list[str] = []
        for machine in candidates[:MAX_ALLOCATION_ATTEMPTS]:
            cover = await self._cover(machine.hotkey)
            why = cover.why_not(self.clock() + duration_s) if cover is not None and self.renter_evm else None
            if why is not None:
                if target is not None:
                    self._discard(key, generated)
                    raise Refused(f"not renting from uid {machine.uid} with collateral cover: {why}")
                logger.info("allocation skipped uid=%s hotkey=%s: %s", machine.uid, machine.hotkey, why)
                skipped.append(f"uid {machine.uid}: {why}")
                continue
            request = AllocateRequest(
                requirements=wanted.requirements(),
                duration_s=duration_s,
                ssh_public_key=key.public_line,
                idempotency_key=secrets.token_urlsafe(18),  # one per machine asked
                renter_evm=self.renter_evm,
            )
            self.book.add_intent(self._intent(machine.ref, request, key))  # on disk before it is sent
            try:
                info = await self._allocate_on(machine.ref, request)
            except Refused as exc:
                if not _maybe_made(exc):
                    self.book.drop_intent(str(request.idempotency_key))
                if target is not None:
                    self._discard(key, generated)  # settling an intent needs no private key
                    raise
                logger.info("allocation refused uid=%s hotkey=%s: %s", machine.uid, machine.hotkey, exc)
                skipped.append(f"uid {machine.uid}: {exc.message}")
                continue
            entry = self._record(info, machine.ref, machine, key, None, settles=request.idempotency_key)
            logger.info("allocated lease=%s uid=%s hotkey=%s", info.lease_id, machine.uid, machine.hotkey)
            return Allocation(entry, machine, tuple(skipped), cover)
        self._discard(key, generated)
        raise NoMatchingMachine("every matching machine refused: " + "; ".join(skipped))

    def _intent(self, miner: MinerRef, request: AllocateRequest, key: RenterKey) -> Intent:
        return Intent(
            idempotency_key=str(request.idempotency_key),
            owner_hotkey=self.hotkey,
            miner_uid=miner.uid,
            miner_hotkey=miner.hotkey,
            endpoint=miner.endpoint or "",
            request=request.model_dump_json(),
            private_key_path=str(key.private_path) if key.private_path else None,
            key_generated=key.generated,
            created_at=self.clock(),
        )

    async def allocate_or_undo(
        self, wanted: Wanted, duration_s: int, key: RenterKey | None = None, target: MinerRef | None = None
    ) -> Allocation:
        """``allocate``, safe to cancel at any moment: a cancelled allocation (Ctrl-C, SIGTERM) is
        finished in the background, what it made is released, and every intent left is settled
        before ``CancelledError`` goes on; ``undone`` then says what happened."""
        task = asyncio.ensure_future(self.allocate(wanted, duration_s, key, target))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.undone = await self._undo(task)
            raise

    async def _undo(self, task: asyncio.Future[Allocation]) -> list[Settled]:
        done: list[Settled] = []
        try:
            allocation = await asyncio.wait_for(asyncio.shield(task), UNDO_GRACE_S)
        except BaseException as exc:  # noqa: BLE001 - it failed or never finished: settle its intents
            logger.info("cancelled allocation ended without an answer: %r", exc)
        else:
            entry = allocation.entry
            try:
                ended = await self.deallocate(entry.lease_id)
                done.append(
                    Settled("", entry.miner_hotkey, entry.lease_id, ended.state if ended else "released")
                )
            except Refused as exc:
                done.append(Settled("", entry.miner_hotkey, entry.lease_id, entry.state, exc.message))
        return done + await self.settle_intents()

    async def settle_intents(self) -> list[Settled]:
        """Settle every intent of this hotkey left by an allocation that never recorded its answer:
        the same request again (same idempotency key) gets the lease it made, or makes it now, and
        that lease is released; intents past their term are dropped (the lease ended by itself)."""
        settled = []
        for intent in self.book.intents(self.hotkey):
            settled.append(await self._settle(intent))
            done = settled[-1].state != "pending"
            if done and intent.key_generated and intent.private_key_path:
                if self._key_unused(intent.private_key_path):  # (allocate's other tries share it)
                    remove_generated_key(Path(intent.private_key_path))
        return settled

    def _key_unused(self, private_key_path: str) -> bool:
        active = self.book.entries(self.hotkey)
        return all(e.private_key_path != private_key_path for e in active) and all(
            i.private_key_path != private_key_path for i in self.book.intents(self.hotkey)
        )

    async def _settle(self, intent: Intent) -> Settled:
        miner = MinerRef(intent.miner_hotkey, intent.endpoint or None, intent.miner_uid)
        try:
            request = AllocateRequest.model_validate_json(intent.request)
        except ValidationError:
            self.book.drop_intent(intent.idempotency_key)
            return Settled(intent.idempotency_key, miner.hotkey, state="none", problem="unreadable intent")
        if self.clock() > intent.created_at + request.duration_s + INTENT_MARGIN_S:
            self.book.drop_intent(intent.idempotency_key)  # any lease it made has ended by its term
            return Settled(intent.idempotency_key, miner.hotkey, state="expired")
        try:
            info = await self._allocate_on(miner, request)
        except Refused as exc:
            if _maybe_made(exc):
                return Settled(intent.idempotency_key, miner.hotkey, state="pending", problem=exc.message)
            self.book.drop_intent(intent.idempotency_key)
            return Settled(intent.idempotency_key, miner.hotkey, state="none")
        key = RenterKey(
            request.ssh_public_key,
            Path(intent.private_key_path) if intent.private_key_path else None,
            intent.key_generated,
        )
        entry = self._record(info, miner, None, key, None, settles=intent.idempotency_key)
        if entry.state != "active":
            return Settled(intent.idempotency_key, miner.hotkey, entry.lease_id, entry.state)
        try:
            await call(self.client, miner, DeallocateRequest(lease_id=entry.lease_id))
        except (LeaseExpired, LeaseNotFound):
            pass
        except Refused as exc:  # recorded as active in the book: never unknown, the term ends it
            return Settled(intent.idempotency_key, miner.hotkey, entry.lease_id, "active", exc.message)
        self._ended(entry, "released", keep_key=True)
        logger.info(
            "settled interrupted allocation: released lease=%s hotkey=%s", entry.lease_id, miner.hotkey
        )
        return Settled(intent.idempotency_key, miner.hotkey, entry.lease_id, "released")

    async def _cover(self, hotkey: str) -> Cover | None:
        return await self.collateral.cover(hotkey, self.clock()) if self.collateral is not None else None

    async def covers(self, hotkeys: list[str]) -> dict[str, Cover]:
        """Each miner's collateral as the contract shows it now (empty without a contract)."""
        if self.collateral is None:
            return {}
        now = self.clock()
        found = await asyncio.gather(*(self.collateral.cover(h, now) for h in hotkeys))
        return {c.hotkey: c for c in found}

    async def _allocate_on(self, miner: MinerRef, request: AllocateRequest) -> LeaseInfo:
        """The lease ``miner`` makes for ``request``. A timed-out answer or a lease still starting is
        asked again with the same idempotency key, so the renter never holds a lease it does not know
        of (a timeout used to move on to the next machine, leaving the first one's lease running)."""
        for attempt in range(ALLOCATE_TRIES):
            try:
                if request.renter_evm is None:
                    return (await call(self.client, miner, request)).lease
                record: list[SignedExchange] = []
                lease = (await call(self.client, miner, request, record)).lease
                if record:
                    save_rental(self.rentals_dir, miner.hotkey, record[-1])
                return lease
            except (MinerOffline, MinerRefused) as exc:
                retry = _timed_out(exc) or getattr(exc, "miner_code", "") == ErrorCode.BUSY
                if not retry or attempt == ALLOCATE_TRIES - 1:
                    if _timed_out(exc):
                        raise MinerOffline(
                            f"{exc}; asked {attempt + 1} times with one idempotency key, so at most one "
                            "lease was made there (kept in your book as unsettled: `list --refresh` releases it)"
                        ) from exc
                    raise
                logger.info("allocate on hotkey=%s: %s; asking again with the same key", miner.hotkey, exc)
                await asyncio.sleep(ALLOCATE_RETRY_S[attempt])
        raise AssertionError("unreachable")

    def _discard(self, key: RenterKey, generated: bool) -> None:
        if generated and key.private_path is not None:
            remove_generated_key(key.private_path)

    def _record(
        self,
        info: LeaseInfo,
        miner: MinerRef,
        machine: Machine | None,
        key: RenterKey | None,
        previous: BookEntry | None,
        settles: str | None = None,
    ) -> BookEntry:
        """Save what the miner said about a lease into the book (and its pinned host key);
        ``settles``: the intent this answer settles, dropped in the same transaction."""
        if info.idle is not None:
            self.lease_idle[info.lease_id] = info.idle
        access = _public_access(info.ssh, miner.endpoint)
        known_hosts = None
        if access is not None and info.state == "active" and info.owner_hotkey == self.hotkey:
            known_hosts = write_known_hosts(self.hosts_dir, info.lease_id, access)  # pin the host key
        if machine is not None:
            verified, summary = machine.verified, _gpu_text(machine.gpu_count, machine.gpu_model)
        elif previous is not None:
            verified, summary = previous.verified, previous.gpu_summary
        else:
            verified, summary = False, _gpu_text(len(info.gpus), info.gpus[0].name if info.gpus else None)
        if key is not None:
            private = str(key.private_path) if key.private_path else None
            public, generated = key.public_line, key.generated
        elif previous is not None:
            private, public, generated = (
                previous.private_key_path,
                previous.public_key,
                previous.key_generated,
            )
        else:
            private, public, generated = None, "", False
        entry = BookEntry(
            lease_id=info.lease_id,
            owner_hotkey=info.owner_hotkey,
            network=self.network,
            netuid=self.netuid,
            miner_uid=miner.uid,
            miner_hotkey=miner.hotkey,
            endpoint=miner.endpoint or "",
            state=info.state,
            verified=verified,
            gpu_summary=summary,
            requirements=info.requirements.model_dump(),
            ssh_host=access.host if access else None,
            ssh_port=access.port if access else None,
            ssh_username=access.username if access else None,
            host_key=access.host_key if access else None,
            ports=dict(access.ports) if access else {},
            udp_ports=dict(access.udp_ports) if access else {},
            known_hosts_path=str(known_hosts) if known_hosts else None,
            private_key_path=private,
            public_key=public,
            key_generated=generated,
            created_at=info.created_at,
            expires_at=info.expires_at,
            updated_at=self.clock(),
            price_per_hour=_price(info, previous),
        )
        if info.owner_hotkey == self.hotkey and settles is not None:
            self.book.record_settled(entry, settles)
        elif info.owner_hotkey == self.hotkey:
            self.book.save(entry)
        return entry

    # ------------------------------------------------------------ existing leases

    async def _target(self, lease_id: str, miner: MinerRef | None) -> tuple[BookEntry | None, MinerRef]:
        entry = self.book.get(lease_id)
        if miner is not None:
            return entry, miner
        if entry is None:
            raise LeaseNotFound(
                f"lease {lease_id} is not in this operator's book; name its miner with --miner-hotkey or --uid"
            )
        return entry, MinerRef(entry.miner_hotkey, entry.endpoint, entry.miner_uid)

    async def _lease_call(
        self, lease_id: str, miner: MinerRef | None, request: Message, key: RenterKey | None = None
    ) -> BookEntry:
        entry, ref = await self._target(lease_id, miner)
        try:
            response = await call(self.client, ref, request)
        except (LeaseExpired, LeaseNotFound):
            if entry is not None and entry.owner_hotkey == self.hotkey and entry.state == "active":
                self._ended(entry, "expired")
            raise
        if response.lease.health is not None:
            self.lease_health[lease_id] = response.lease.health
        return self._record(response.lease, ref, None, key, entry)

    def _ended(self, entry: BookEntry, state: str, keep_key: bool = False) -> BookEntry:
        if entry.key_generated and entry.private_key_path and not keep_key:
            remove_generated_key(Path(entry.private_key_path))
        if entry.known_hosts_path:
            Path(entry.known_hosts_path).unlink(missing_ok=True)
        ended = entry.with_changes(state=state, updated_at=self.clock())
        self.book.save(ended)
        return ended

    async def logs(self, lease_id: str, tail: int, miner: MinerRef | None = None) -> LeaseLogsResponse:
        """The newest ``tail`` lines of the lease's own logs, from its miner (its backend's)."""
        entry, ref = await self._target(lease_id, miner)
        try:
            answer: LeaseLogsResponse = await call(
                self.client, ref, LeaseLogsRequest(lease_id=lease_id, tail=tail)
            )
        except LeaseExpired:
            if entry is not None and entry.owner_hotkey == self.hotkey and entry.state == "active":
                self._ended(entry, "expired")
            raise
        return answer

    async def status(self, lease_id: str, miner: MinerRef | None = None) -> BookEntry:
        return await self._lease_call(lease_id, miner, LeaseStatusRequest(lease_id=lease_id))

    async def extend(self, lease_id: str, duration_s: int, miner: MinerRef | None = None) -> BookEntry:
        request = ExtendLeaseRequest(lease_id=lease_id, duration_s=duration_s)
        return await self._lease_call(lease_id, miner, request)

    async def restart(self, lease_id: str, miner: MinerRef | None = None) -> BookEntry:
        return await self._lease_call(lease_id, miner, RestartLeaseRequest(lease_id=lease_id))

    async def exchange_key(
        self, lease_id: str, key: RenterKey | None = None, miner: MinerRef | None = None
    ) -> BookEntry:
        """Install a new key (generated unless given); a generated old key is then deleted."""
        generated = key is None
        key = key or generate_keypair(self.keys_dir)
        request = ExchangeKeyRequest(lease_id=lease_id, ssh_public_key=key.public_line)
        old = self.book.get(lease_id)
        try:
            entry = await self._lease_call(lease_id, miner, request, key)
        except Refused:
            self._discard(key, generated)
            raise
        stale = old.private_key_path if old is not None and old.key_generated else None
        if stale and stale != entry.private_key_path:
            remove_generated_key(Path(stale))
        return entry

    async def deallocate(self, lease_id: str, miner: MinerRef | None = None) -> BookEntry | None:
        """End the lease now; returns the updated book entry (None when it was not in the book)."""
        entry, ref = await self._target(lease_id, miner)
        await call(self.client, ref, DeallocateRequest(lease_id=lease_id))
        logger.info("deallocated lease=%s hotkey=%s", lease_id, ref.hotkey)
        if entry is None or entry.owner_hotkey != self.hotkey:
            return None
        return self._ended(entry, "released")

    async def leases(
        self, refresh: bool = False, include_ended: bool = False, everywhere: bool = False
    ) -> tuple[list[BookEntry], dict]:
        """This operator's leases; with ``refresh`` settle interrupted allocations, adopt every
        active rental the book's miners hold for this hotkey, and ask each miner for the state of
        each lease first (errors per lease); ``everywhere``: adopt from every serving miner, not only
        those of the book."""
        problems: dict[str, str] = {}
        if refresh:
            for settled in await self.settle_intents():
                if settled.problem:
                    problems[settled.lease_id or f"intent {settled.idempotency_key[:8]}"] = settled.problem
            self.adopted = await self.adopt(everywhere)
            active = self.book.entries(self.hotkey)
            results = await asyncio.gather(*(self.status(e.lease_id) for e in active), return_exceptions=True)
            for entry, result in zip(active, results, strict=True):
                if isinstance(result, Refused):
                    problems[entry.lease_id] = result.message
                elif isinstance(result, BaseException):
                    raise result
                elif result.state != "active":
                    self._ended(result, result.state)
        return self.book.entries(self.hotkey, include_ended), problems

    async def adopt(self, everywhere: bool = False) -> list[BookEntry]:
        """Record every active rental a miner of the book (``everywhere``: any serving miner) holds
        for this hotkey that the book does not know (e.g. made by a process killed before it wrote
        its answer, or by another host of a marketplace backend); their key is then your default
        SSH keys."""
        miners = [MinerRef(h, e or None, u) for h, e, u in self.book.miners(self.hotkey)]
        if everywhere:
            known = {m.hotkey for m in miners}
            miners += [m for m in await self.miners() if m.hotkey not in known]
        answers = await ask_all(self.client, miners, ListLeasesRequest(), self.concurrency, self.deadline_s)
        adopted = []
        for answer in answers:
            if not isinstance(answer.reply, ListLeasesResponse):
                continue
            for info in answer.reply.leases:
                if (
                    info.purpose == "rental"
                    and info.state == "active"
                    and info.owner_hotkey == self.hotkey
                    and self.book.get(info.lease_id) is None
                ):
                    adopted.append(self._record(info, answer.miner, None, None, None))
                    logger.info("adopted lease=%s hotkey=%s", info.lease_id, answer.miner.hotkey)
        return adopted

    def ssh_command(self, entry: BookEntry) -> str | None:
        if entry.state != "active" or not entry.ssh_host or not entry.known_hosts_path or not entry.host_key:
            return None
        try:
            access = SshAccess(
                host=entry.ssh_host,
                port=entry.ssh_port or 22,
                username=entry.ssh_username or "root",
                host_key=entry.host_key,
                ports=entry.ports,
            )
        except ValidationError:  # a book written before the checks: no command rather than a bad one
            return None
        private = Path(entry.private_key_path) if entry.private_key_path else None
        return ssh_command(access, Path(entry.known_hosts_path), private)


def _public_access(ssh: SshAccess | None, endpoint: str | None) -> SshAccess | None:
    """The miner's SSH access, with an unspecified bind address replaced by the axon's host."""
    if ssh is None or ssh.host not in _UNSPECIFIED_HOSTS or not endpoint:
        return ssh
    return ssh.model_copy(update={"host": endpoint.rsplit(":", 1)[0].strip("[]")})


def _gpu_text(count: int, model: str | None) -> str:
    return f"{count} x {model}" if count and model else "no GPU"


def _describe(wanted: Wanted) -> str:
    parts = [f"{k}={v}" for k, v in vars(wanted).items() if v and k != "available_only"]
    return ", ".join(parts) or "any machine"


def _maybe_made(exc: Refused) -> bool:
    """Whether a lease may exist after this failure (no answer, an unreadable one, busy)."""
    if isinstance(exc, (MinerOffline, MinerIdentityError)):
        return True
    return isinstance(exc, MinerRefused) and exc.miner_code in _MAYBE_MADE


def _price(info: LeaseInfo, previous: BookEntry | None) -> float | None:
    """The price per hour the miner signed when it rented the lease (kept from the first answer)."""
    if previous is not None and previous.price_per_hour is not None:
        return previous.price_per_hour
    return getattr(info, "price_per_hour", None)


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, MinerOffline) and isinstance(exc.__cause__, RequestTimeout)
