"""``LeaseLogsRequest``: a lease's own logs, to its owner only, where the backend keeps them.

The Docker backend has the container's logs (its sshd's log of logins and disconnections, and
whatever the lease's main process printed); the embedded backend keeps a session log (each SSH
session: opened, its command, how it ended). A backend with neither answers ``unsupported``
with a sentence saying so. Ownership is the manager's, as for ``status``: another hotkey's lease
is ``not_owner``, an unknown one ``lease_not_found``.
"""

from __future__ import annotations

import asyncio

from compute.allocation import AllocationManager, BackendError
from compute.protocol import MAX_LOG_LINES, ErrorCode, LeaseLogsRequest, LeaseLogsResponse, RequestFailed

LOGS_TIMEOUT_S = 20.0
_LINE = 1000


async def lease_logs(manager: AllocationManager, caller: str, req: LeaseLogsRequest) -> LeaseLogsResponse:
    await manager.status(caller, req.lease_id)  # the owner's, or refused as status would be
    read = getattr(manager.backend, "logs", None)
    if read is None:
        raise RequestFailed(
            ErrorCode.UNSUPPORTED, f"this miner's {manager.backend.name} backend keeps no lease logs", 409
        )
    try:
        source, lines = await asyncio.wait_for(
            read(req.lease_id, min(req.tail, MAX_LOG_LINES)), LOGS_TIMEOUT_S
        )
    except BackendError as exc:
        raise RequestFailed(ErrorCode.BACKEND_ERROR, f"the lease's logs cannot be read: {exc}", 503) from None
    except asyncio.TimeoutError:
        raise RequestFailed(ErrorCode.BUSY, "reading the lease's logs took too long; retry", 503) from None
    return LeaseLogsResponse(
        lease_id=req.lease_id, source=source, lines=[line[:_LINE] for line in lines[-req.tail :]]
    )


__all__ = ["LOGS_TIMEOUT_S", "lease_logs"]
