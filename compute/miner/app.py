"""The miner's API: every ``compute.protocol`` request bound to the allocation manager and specs.

``build_miner_app`` registers one handler per route on a :class:`compute.transport.SignedServer`
(authentication, access policy, rate limits and error bodies are the transport's job) and
returns the FastAPI app. Handlers log one line per event with the caller's hotkey and the
lease id; they never log keys.

What it deliberately does not do: decide anything about leases (``AllocationManager`` does),
or run periodic work (``neurons/miner.py`` runs the loops).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from bittensor.http_auth import Caller
from fastapi import FastAPI

from compute import __version__
from compute.allocation import (
    AllocationManager,
    BackendError,
    HealthMonitor,
    TemplateCatalog,
    UnknownTemplate,
)
from compute.allocation.lease.failures import failure, is_disk_full
from compute.miner.cover import ReclaimGuard
from compute.miner.lease_logs import lease_logs
from compute.miner.price import lease_price
from compute.miner.receipts import keep_release, lease_release, rental_receipts, signed_receipt
from compute.miner.verdicts import VerdictLog
from compute.protocol import (
    AllocateRequest,
    AvailabilityResponse,
    CheckAvailabilityRequest,
    DeallocateRequest,
    DeallocateResponse,
    DeleteVolumeRequest,
    DeleteVolumeResponse,
    ErrorCode,
    ExchangeKeyRequest,
    ExtendLeaseRequest,
    HealthRequest,
    HealthResponse,
    LeaseEndRequest,
    LeaseEndResponse,
    LeaseInfo,
    LeaseLogsRequest,
    LeaseLogsResponse,
    LeaseResponse,
    LeaseStatusRequest,
    ListLeasesRequest,
    ListLeasesResponse,
    ListVolumesRequest,
    ListVolumesResponse,
    MachineSpecs,
    Message,
    Price,
    PriceRequest,
    PriceResponse,
    RentalReceiptsRequest,
    RentalReceiptsResponse,
    RequestFailed,
    RestartLeaseRequest,
    SignedRequest,
    SpecsRequest,
    SpecsResponse,
    TemplatesRequest,
    TemplatesResponse,
    VerdictRequest,
    VerdictResponse,
    route_for,
)
from compute.sqlitedb import DbBusy
from compute.transport import AccessPolicy, ServerLimits, SignedServer

logger = logging.getLogger(__name__)
SPECS_TIMEOUT_S = 30.0


def build_miner_app(
    keypair: object,
    policy: AccessPolicy | None,
    manager: AllocationManager,
    specs_provider: Callable[[], MachineSpecs],
    limits: ServerLimits | None = None,
    clock: Callable[[], float] = time.monotonic,
    templates: TemplateCatalog | None = None,
    monitor: HealthMonitor | None = None,
    verdicts: VerdictLog | None = None,
    guard: ReclaimGuard | None = None,
    price: Price | None = None,
) -> FastAPI:
    """The miner's signed FastAPI app; ``specs_provider`` may block (it runs in a thread).

    ``templates``: the base images offered (None: only the backend's own image, as ``default``);
    ``monitor``: the lease watch whose findings are attached to status and list answers;
    ``verdicts``: where the validators' verdicts are kept (None: only logged); ``guard``: with a
    reclaim of this miner's collateral pending, rentals ending past it are refused; ``price``: the
    asking price it answers ``PriceRequest`` with (None: it names none)."""
    server = SignedServer(keypair, policy, limits)
    started = clock()

    def check_template(name: str | None) -> None:
        if name is None:
            return
        try:
            if templates is None:
                raise UnknownTemplate(f"template {name!r} is not offered here (this miner has no templates)")
            templates.resolve(name)
        except UnknownTemplate as exc:
            raise RequestFailed(ErrorCode.UNSUPPORTED, str(exc), 400) from None

    def route(request_type: type[Message]) -> Callable:
        path, response_type = route_for(request_type.model_construct())
        register = server.route(path, request_type, response_type)

        def decorate(handler: Callable) -> Callable:
            @functools.wraps(handler)
            async def guarded(req: Any, caller: Caller) -> Any:
                try:
                    return await handler(req, caller)
                except DbBusy as exc:  # another process holds leases.db: a clean, retryable refusal
                    logger.warning("%s: lease store busy hotkey=%s: %s", path, caller.hotkey_ss58, exc)
                    raise RequestFailed(
                        ErrorCode.BUSY, "the lease store is busy; retry shortly", 503
                    ) from None
                except (OSError, sqlite3.Error) as exc:
                    if not is_disk_full(exc):
                        raise
                    logger.error("%s: the miner's disk is full hotkey=%s: %s", path, caller.hotkey_ss58, exc)
                    raise failure("the request", exc) from None  # a clean 507, never a 500

            return register(guarded)

        return decorate

    @route(HealthRequest)
    async def health(req: HealthRequest, caller: Caller) -> HealthResponse:
        return HealthResponse(
            version=__version__,
            hotkey=server.hotkey,
            backend=manager.backend.name,
            uptime_s=max(0.0, clock() - started),
            active_leases=await manager.active_count(),
            free_gpus=len(await asyncio.to_thread(manager.free_gpus)),
        )

    @route(SpecsRequest)
    async def specs(req: SpecsRequest, caller: Caller) -> SpecsResponse:
        try:
            machine = await asyncio.wait_for(asyncio.to_thread(specs_provider), SPECS_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise RequestFailed(ErrorCode.BUSY, "specs collection is taking too long; retry", 503) from None
        if (cap := await _disk_cap(manager.backend)) is not None:
            machine = machine.model_copy(update={"disk_cap": cap})
        return SpecsResponse(specs=machine)

    @route(TemplatesRequest)
    async def offered(req: TemplatesRequest, caller: Caller) -> TemplatesResponse:
        return TemplatesResponse(templates=list(templates.templates) if templates else [])

    @route(CheckAvailabilityRequest)
    async def availability(req: CheckAvailabilityRequest, caller: Caller) -> AvailabilityResponse:
        check_template(req.requirements.template)
        result = await asyncio.to_thread(manager.check, req.requirements)
        longest = result.max_duration_s
        if guard is not None and (limit := await guard.latest_term_end()) is not None:
            longest = max(0, min(longest, int(limit - guard.clock())))  # renters see it before asking
        return AvailabilityResponse(
            available=result.available,
            reason=result.reason[:2000],
            free_gpus=result.free_gpus,
            max_duration_s=longest,
            price=price,
        )

    @route(AllocateRequest)
    async def allocate(req: AllocateRequest, caller: Caller) -> LeaseResponse:
        hotkey = caller.hotkey_ss58
        try:
            check_template(req.requirements.template)
            why = (
                await guard.refusal(req.duration_s) if guard is not None and req.purpose == "rental" else None
            )
            if why is not None:
                raise RequestFailed(ErrorCode.UNSUPPORTED, why, 409)
            lease = await manager.allocate(hotkey, req, signed_receipt())
        except RequestFailed as exc:
            logger.info("allocate refused hotkey=%s code=%s reason=%s", hotkey, exc.code, exc.reason)
            raise
        if req.purpose == "rental":  # the price it rents at, signed with the lease
            lease = lease.model_copy(update={"price_per_hour": lease_price(price, lease.gpus)})
        return LeaseResponse(lease=lease)

    def watched(lease: LeaseInfo) -> LeaseInfo:
        return monitor.annotate(lease) if monitor is not None else lease

    @route(LeaseStatusRequest)
    async def status(req: LeaseStatusRequest, caller: Caller) -> LeaseResponse:
        lease = await _logged(
            "status", caller, req.lease_id, manager.status(caller.hotkey_ss58, req.lease_id)
        )
        return LeaseResponse(lease=watched(lease))

    @route(ExtendLeaseRequest)
    async def extend(req: ExtendLeaseRequest, caller: Caller) -> LeaseResponse:
        return LeaseResponse(
            lease=await _logged(
                "extend",
                caller,
                req.lease_id,
                manager.extend(caller.hotkey_ss58, req.lease_id, req.duration_s),
            )
        )

    @route(ExchangeKeyRequest)
    async def exchange_key(req: ExchangeKeyRequest, caller: Caller) -> LeaseResponse:
        return LeaseResponse(
            lease=await _logged(
                "exchange_key",
                caller,
                req.lease_id,
                manager.exchange_key(caller.hotkey_ss58, req.lease_id, req.ssh_public_key),
            )
        )

    @route(RestartLeaseRequest)
    async def restart(req: RestartLeaseRequest, caller: Caller) -> LeaseResponse:
        return LeaseResponse(
            lease=await _logged(
                "restart", caller, req.lease_id, manager.restart(caller.hotkey_ss58, req.lease_id)
            )
        )

    @route(DeallocateRequest)
    async def deallocate(req: DeallocateRequest, caller: Caller) -> DeallocateResponse:
        await _logged(
            "deallocate", caller, req.lease_id, manager.deallocate(caller.hotkey_ss58, req.lease_id)
        )
        await keep_release(manager, req.lease_id)
        return DeallocateResponse(lease_id=req.lease_id)

    @route(ListLeasesRequest)
    async def list_leases(req: ListLeasesRequest, caller: Caller) -> ListLeasesResponse:
        return ListLeasesResponse(
            leases=[watched(lease) for lease in (await manager.list(caller.hotkey_ss58))[:1024]]
        )

    @route(ListVolumesRequest)
    async def list_volumes(req: ListVolumesRequest, caller: Caller) -> ListVolumesResponse:
        return ListVolumesResponse(volumes=(await manager.list_volumes(caller.hotkey_ss58))[:256])

    @route(DeleteVolumeRequest)
    async def delete_volume(req: DeleteVolumeRequest, caller: Caller) -> DeleteVolumeResponse:
        await _logged(
            "delete_volume", caller, f"volume:{req.name}", manager.delete_volume(caller.hotkey_ss58, req.name)
        )
        return DeleteVolumeResponse(name=req.name)

    @route(RentalReceiptsRequest)
    async def receipts(req: RentalReceiptsRequest, caller: Caller) -> RentalReceiptsResponse:
        return RentalReceiptsResponse(receipts=await rental_receipts(manager))

    @route(LeaseEndRequest)
    async def lease_end(req: LeaseEndRequest, caller: Caller) -> LeaseEndResponse:
        return LeaseEndResponse(lease_id=req.lease_id, released=await lease_release(manager, req.lease_id))

    @route(VerdictRequest)
    async def verdict(req: VerdictRequest, caller: Caller) -> VerdictResponse:
        kept = verdicts or VerdictLog(os.devnull)
        receipt = signed_receipt()
        signed = (
            SignedRequest(path=receipt.path, body=receipt.body, headers=receipt.headers) if receipt else None
        )
        await asyncio.to_thread(kept.record, signed if verdicts else None, req, caller.hotkey_ss58)
        return VerdictResponse()

    @route(PriceRequest)
    async def asking_price(req: PriceRequest, caller: Caller) -> PriceResponse:
        return PriceResponse(price=price)

    @route(LeaseLogsRequest)
    async def logs(req: LeaseLogsRequest, caller: Caller) -> LeaseLogsResponse:
        return await _logged("logs", caller, req.lease_id, lease_logs(manager, caller.hotkey_ss58, req))

    return server.app


async def _disk_cap(backend: object) -> str | None:
    """How the backend holds a lease's disk size (``kernel``/``watched``/``refused``; the first call
    probes the engine); None for a backend that does not say (embedded) or an engine that did not
    answer in time."""
    ask = getattr(backend, "disk_cap", None)
    if ask is None:
        return None
    try:
        return await asyncio.wait_for(ask(), SPECS_TIMEOUT_S)
    except (asyncio.TimeoutError, BackendError) as exc:
        logger.warning("disk cap not known: %s", exc or "timed out")
        return None


async def _logged(action: str, caller: Caller, lease_id: str, call):  # noqa: ANN001, ANN202
    """Await a manager call, logging a refusal with the caller and lease (success is logged inside)."""
    try:
        return await call
    except RequestFailed as exc:
        logger.info(
            "%s refused hotkey=%s lease=%s code=%s reason=%s",
            action,
            caller.hotkey_ss58,
            lease_id,
            exc.code,
            exc.reason,
        )
        raise


__all__ = ["build_miner_app"]
