"""The async SDK: find machines, rent one, and always give it back.

``AsyncRenter`` is the operator client behind ``register.py`` (``compute.operator.Operator``) with
the wiring done: it loads the wallet, opens the lease book and the signed miner client, and reads
the metagraph. ``allocate`` rents and (by default) waits until a login over SSH works; ``rent`` is
the same as an ``async with`` block that releases the lease however the block ends: an exception,
a cancellation while the lease was still being allocated (the allocation is finished, then
released), or a failed wait for SSH. The term (``ttl``, default one hour) is the safety net: a lease
whose release could not be confirmed ends by itself when its term runs out.

Deliberately not here: printing, or anything register.py does not do (the SDK is the same code).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from compute.chain import MetagraphSnapshot
from compute.operator import (
    Allocation,
    LeaseBook,
    Machine,
    Operator,
    UsageError,
    Wanted,
    load_public_key,
    metagraph_reader,
)
from compute.operator.cluster import DEFAULT_MAX_SPREAD, ClusterWanted, allocate_cluster
from compute.operator.cluster_check import CheckOptions, allocate_linked_cluster
from compute.operator.commands import resolve_lease_id
from compute.operator.cover import CollateralReader, Cover
from compute.operator.pog_records import DEFAULT_MAX_PROOF_AGE_H
from compute.operator.proof_sources import ProofSources, gather_proofs
from compute.operator.proven import DEFAULT_SIGNER_SHARE
from compute.operator.volumes import parse_volume
from compute.renter.cluster import AsyncCluster, release_cluster_quietly
from compute.renter.errors import LeaseNotFound, RenterError
from compute.renter.lease import AsyncLease
from compute.renter.terms import idle_seconds, term_seconds
from compute.transport import MinerClient, WalletError, load_wallet

logger = logging.getLogger(__name__)


def checked_renter_evm(value: str | None) -> str | None:
    if value is None:
        return None
    from compute.collateral import EvmKeyError, checked_h160

    try:
        return checked_h160(value)
    except EvmKeyError as exc:
        raise UsageError(f"renter_evm: {exc}") from None


DEFAULT_DATA_DIR = "~/.compute/register"  # the same book as register.py: leases show in both
ALLOCATE_GRACE_S = 120.0  # how long a cancelled allocation is waited for, to release what it made


class AsyncRenter:
    """A renter's connection to the subnet: ``async with AsyncRenter(...) as renter``."""

    def __init__(
        self,
        *,
        wallet_name: str = "default",
        wallet_hotkey: str = "default",
        wallet_path: str = "~/.bittensor/wallets",
        network: str = "finney",
        netuid: int = 27,
        data_dir: str | Path = DEFAULT_DATA_DIR,
        timeout: float = 15.0,
        pog_db: str | Path | None = None,
        dashboard: str | None = None,
        feed: str | None = None,
        validator_hotkey: str | None = None,
        metagraph: Callable[[], MetagraphSnapshot] | None = None,
        signer_share: float = DEFAULT_SIGNER_SHARE,
        max_proof_age_h: float = DEFAULT_MAX_PROOF_AGE_H,
        renter_evm: str | None = None,
        collateral_rpc: str | None = None,
        collateral_address: str | None = None,
    ) -> None:
        """``network``: ``finney``, ``test``, ``ws://...`` or ``sim:PATH`` (the local demo);
        ``pog_db``/``dashboard``/``feed``: a validator's store, dashboard or public machine feed, whose
        proven figures (signed by a validator holding ``signer_share`` of the stake, or by
        ``validator_hotkey``) mark and rank verified machines, each proof only while at most
        ``max_proof_age_h`` hours old (0: any age); ``metagraph``: a reader to use instead of
        connecting to ``network``; ``renter_evm``: your EVM address, signed into each rental (a failed
        rental's slash is owed to it); ``collateral_rpc``/``collateral_address``: the collateral
        contract, read before renting (``collateral``): with ``renter_evm``, a term the miner's
        collateral does not cover is never rented."""
        if not 0 < timeout <= 600:
            raise UsageError(f"timeout must be between 0 and 600 seconds, got {timeout:g}")
        self._wallet_args = (wallet_name, wallet_hotkey, str(Path(wallet_path).expanduser()))
        self.network, self.netuid, self.timeout = network, netuid, timeout
        self.data_dir = Path(data_dir).expanduser()
        self._metagraph = metagraph or metagraph_reader(network, netuid)
        if not 0 < signer_share <= 1:
            raise UsageError(f"signer_share must be in (0, 1], got {signer_share:g}")
        if not max_proof_age_h >= 0:
            raise UsageError(f"max_proof_age_h must be >= 0, got {max_proof_age_h:g}")
        self._sources = ProofSources(
            str(pog_db) if pog_db else None, dashboard, feed, validator_hotkey, signer_share, max_proof_age_h
        )
        self._renter_evm = checked_renter_evm(renter_evm)
        if bool(collateral_rpc) != bool(collateral_address):
            raise UsageError("the collateral contract needs both collateral_rpc and collateral_address")
        self._collateral = (
            CollateralReader(collateral_rpc, collateral_address)
            if collateral_rpc and collateral_address
            else None
        )
        self._client: MinerClient | None = None
        self._operator: Operator | None = None

    @property
    def operator(self) -> Operator:
        if self._operator is None:
            raise UsageError(
                "use the renter inside `async with AsyncRenter(...) as renter:` (or call open())"
            )
        return self._operator

    @property
    def hotkey(self) -> str:
        return self.operator.hotkey

    async def open(self) -> AsyncRenter:
        """Load the wallet, open the lease book and the signed client (``async with`` does this)."""
        if self._operator is not None:
            return self
        try:
            wallet = await asyncio.to_thread(load_wallet, *self._wallet_args)
        except WalletError as exc:
            raise UsageError(str(exc)) from exc
        book = LeaseBook(self.data_dir / "leases.db")
        verified = await gather_proofs(self._sources, self._metagraph, self.timeout)
        client = MinerClient(wallet, timeout=self.timeout, max_concurrency=32)
        await client.__aenter__()
        self._client = client
        self._operator = Operator(
            hotkey=wallet.hotkey.ss58_address,
            client=client,
            metagraph=self._metagraph,
            book=book,
            data_dir=self.data_dir,
            network=self.network,
            netuid=self.netuid,
            verified=verified,
            deadline_s=self.timeout * 2,
            renter_evm=self._renter_evm,
            collateral=self._collateral,
        )
        return self

    async def close(self) -> None:
        """Close the client (leases keep running: release them first, or use ``rent``)."""
        client, operator, self._client, self._operator = self._client, self._operator, None, None
        if client is not None:
            await client.__aexit__(None, None, None)
        if operator is not None:
            operator.book.close()  # the lease book's connections; a reopened renter opens its own

    async def __aenter__(self) -> AsyncRenter:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- finding

    async def machines(self, *, available_only: bool = True, **wanted: Any) -> list[Machine]:
        """Machines that match (``gpu_model``, ``gpu_count``, ``gpu_memory_gb``, ``cpu``, ``ram_gb``,
        ``disk_gb``, ``max_price``: USD per hour for the machine as asked), verified ones first;
        offline ones too with ``available_only=False``. Each has the miner's signed ``price`` and
        ``hourly_price(gpu_count)``."""
        return await self.operator.resources(_wanted(available_only=available_only, **wanted))

    async def collateral(self, *hotkeys: str) -> dict[str, Cover]:
        """Each miner's standing collateral and pending reclaim, as the contract shows them now
        (empty without ``collateral_rpc``): what a rental from it is covered by."""
        return await self.operator.covers(list(hotkeys))

    # ---------------------------------------------------------------- renting

    async def allocate(
        self,
        *,
        ttl: str | float | None = None,
        until: str | float | datetime | None = None,
        idle_after: str | float | None = None,
        ssh_key: str | Path | None = None,
        uid: int | None = None,
        hotkey: str | None = None,
        wait: bool = True,
        wait_timeout: float = 180.0,
        **wanted: Any,
    ) -> AsyncLease:
        """Rent the best machine for ``wanted`` (or miner ``uid``/``hotkey``) for ``ttl`` (default 1h)
        or ``until``; with ``idle_after`` the miner also ends it after that long idle. With ``wait``,
        returns once a login works (a lease that never answers is released before raising)."""
        seconds = term_seconds(ttl, until)
        want = _wanted(idle_stop_s=idle_seconds(idle_after), **wanted)
        key = await asyncio.to_thread(load_public_key, ssh_key) if ssh_key is not None else None
        target = await self.operator.find_miner(uid=uid, hotkey=hotkey) if uid is not None or hotkey else None
        task = asyncio.ensure_future(self.operator.allocate(want, seconds, key, target))
        try:
            allocation = await asyncio.shield(task)
        except asyncio.CancelledError:  # the miner may be making the lease right now: finish, release
            await self._release_late(task)
            raise
        lease = AsyncLease(self, allocation.entry)
        logger.info("rented lease=%s uid=%s gpus=%s", lease.id, allocation.machine.uid, lease.gpus)
        if wait:
            try:
                await lease.wait_ssh(wait_timeout)
            except BaseException:
                await asyncio.shield(lease.release())
                raise
        return lease

    @asynccontextmanager
    async def rent(self, **kwargs: Any) -> AsyncIterator[AsyncLease]:
        """``async with renter.rent(gpu_model="H100", ttl="2h") as lease:`` (``allocate``'s arguments);
        the lease is released when the block ends, however it ends."""
        lease = await self.allocate(**kwargs)
        try:
            yield lease
        except BaseException:
            await release_quietly(lease)  # never hide what went wrong in the block
            raise
        await asyncio.shield(lease.release())

    async def allocate_cluster(
        self,
        *,
        nodes: int,
        gpus_per_node: int = 0,
        max_spread: float = DEFAULT_MAX_SPREAD,
        ttl: str | float | None = None,
        until: str | float | datetime | None = None,
        wait: bool = True,
        wait_timeout: float = 180.0,
        min_link_gbps: float | None = None,
        link_check: dict[str, Any] | None = None,
        overlay: bool = False,
        **wanted: Any,
    ) -> AsyncCluster:
        """Rent ``nodes`` machines of ``gpus_per_node`` GPUs whose proven fp16 TFLOPS per GPU lie within
        ``max_spread`` of each other, all or none (a failure or a cancellation releases every lease
        made); with ``wait``, returns once a login works on every node (else all are released).

        ``min_link_gbps``: then prove the nodes' link here (``AsyncCluster.check``, with
        ``link_check``'s ``mib``, ``python``, ``ifname``, ``device``, ``timeout_s``) and keep the
        cluster only at that many Gbit/s per link or more (``NoMatchingMachine`` otherwise, every
        lease released); its report is ``cluster.link``. ``overlay``: Docker members joined by the
        renter's WireGuard overlay (``register.py allocate --overlay``; the variables point into it)."""
        seconds = term_seconds(ttl, until)
        want = ClusterWanted(
            nodes=nodes,
            wanted=replace(_wanted(**wanted), gpu_count=gpus_per_node, overlay=bool(overlay)),
            max_spread=max_spread,
            min_link_gbps=min_link_gbps,
        )
        if min_link_gbps is None:
            cluster = AsyncCluster(self, await allocate_cluster(self.operator, want, seconds))
        else:
            options = CheckOptions(**(link_check or {}))
            rented, report = await allocate_linked_cluster(self.operator, want, seconds, options)
            cluster = AsyncCluster(self, rented)
            cluster.link = report.payload(rented)
        logger.info("rented cluster=%s leases=%s", cluster.id, [lease.id for lease in cluster.leases])
        if wait:
            try:
                await cluster.wait_ssh(wait_timeout)
            except BaseException:
                await release_cluster_quietly(cluster)
                raise
        return cluster

    @asynccontextmanager
    async def rent_cluster(self, **kwargs: Any) -> AsyncIterator[AsyncCluster]:
        """``async with renter.rent_cluster(nodes=2, gpus_per_node=8, ttl="2h") as cluster:``
        (``allocate_cluster``'s arguments); every lease is released when the block ends."""
        cluster = await self.allocate_cluster(**kwargs)
        try:
            yield cluster
        except BaseException:
            await release_cluster_quietly(cluster)
            raise
        await asyncio.shield(cluster.release())

    async def _release_late(self, task: asyncio.Future[Allocation]) -> None:
        """An allocation was cancelled: let it finish (bounded), then release what it made."""
        try:
            allocation = await asyncio.wait_for(task, ALLOCATE_GRACE_S)
        except BaseException as exc:  # it failed or never finished: nothing of ours to release
            logger.info("cancelled allocation ended without a lease: %r", exc)
            return
        logger.info("allocation of lease=%s was cancelled; releasing it", allocation.entry.lease_id)
        await release_quietly(AsyncLease(self, allocation.entry))

    # ---------------------------------------------------------------- my leases

    async def leases(self, *, refresh: bool = False, include_ended: bool = False) -> list[AsyncLease]:
        """Leases in the book of this hotkey (``refresh``: asked from their miners first)."""
        entries, _ = await self.operator.leases(refresh=refresh, include_ended=include_ended)
        return [AsyncLease(self, entry) for entry in entries]

    def lease(self, lease_id: str) -> AsyncLease:
        """A lease of the book by id (or a unique prefix): e.g. one rented by ``register.py``."""
        full = resolve_lease_id(self.operator.book, self.hotkey, lease_id)
        entry = self.operator.book.get(full)
        if entry is None or entry.owner_hotkey != self.hotkey:
            raise LeaseNotFound(f"lease {lease_id} is not in the book of hotkey {self.hotkey}")
        return AsyncLease(self, entry)


async def release_quietly(lease: AsyncLease) -> None:
    """Release after a failure: a release that fails too is logged, the original error stays."""
    try:
        await asyncio.shield(lease.release())
    except RenterError as exc:
        logger.error("%s", exc.message)


_WANTED_KEYS = {
    "gpu_model",
    "gpu_count",
    "gpu_memory_gb",
    "cpu",
    "ram_gb",
    "disk_gb",
    "ports",
    "template",
    "volume",
    "max_price",
}


def _wanted(*, available_only: bool = True, idle_stop_s: int | None = None, **given: Any) -> Wanted:
    unknown = set(given) - _WANTED_KEYS
    if unknown:
        raise UsageError(f"unknown machine requirement(s) {sorted(unknown)}; use {sorted(_WANTED_KEYS)}")
    volume = given.get("volume")
    want = Wanted(
        gpu_model=given.get("gpu_model"),
        gpu_count=int(given.get("gpu_count") or 0),
        gpu_memory_gb=float(given.get("gpu_memory_gb") or 0.0),
        cpu=int(given.get("cpu") or 0),
        ram_gb=float(given.get("ram_gb") or 0.0),
        disk_gb=float(given.get("disk_gb") or 0.0),
        extra_ports=int(given.get("ports") or 0),
        available_only=available_only,
        template=given.get("template"),
        volume=parse_volume(volume) if isinstance(volume, str) else volume,
        idle_stop_s=idle_stop_s,
        max_price=_max_price(given.get("max_price")),
    )
    try:
        want.requirements()
    except ValidationError as exc:
        raise UsageError(
            f"bad machine requirements: {exc.errors()[0]['msg']} ({exc.errors()[0]['loc']})"
        ) from None
    return want


def _max_price(value: Any) -> float | None:
    """``max_price``: USD per hour, a finite number >= 0 (None: any price, or none)."""
    if value is None:
        return None
    try:
        price = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"max_price {value!r} is not a number of USD per hour") from None
    if not math.isfinite(price) or price < 0:
        raise UsageError(f"max_price must be a finite number >= 0, got {value!r}")
    return price


__all__ = ["AsyncRenter"]
