"""``JournaledClient``: a ``MinerClient`` that writes down every lease it asks for and gives back.

Hooked at ``request`` (the one door of every signed call, ``call`` included), so every path that
allocates (the validation lease, canary rentals, a multi-host miner's hosts) is journaled without
knowing it. An allocate is ``asking`` before it is sent, ``held`` with the lease id it got, and
``unsure`` when its answer never came (timeout, reset, cancellation) or the miner said it is still
starting (``busy``); a signed refusal means no lease and the row goes. A release that the miner
confirms (or answers with "no such lease") ends the row; any other outcome leaves it
``releasing``, for ``release_due`` to try again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, TypeVar

from pydantic import BaseModel

from compute.protocol import AllocateRequest, DeallocateRequest, ErrorCode, LeaseResponse
from compute.store.journal import LeaseJournal
from compute.transport import MinerClient, Rejected, SignedExchange

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)

TERM_MARGIN_S = 120.0  # the journal keeps a row this long past the term it asked for
GONE = (ErrorCode.LEASE_NOT_FOUND, ErrorCode.LEASE_EXPIRED)  # the miner holds no such lease any more


def new_run_id() -> str:
    """A name for this validator process: rows of other runs belong to no running test."""
    return secrets.token_hex(8)


class JournaledClient(MinerClient):
    """``MinerClient(wallet, ...)`` plus ``journal`` and this process's ``run`` id."""

    def __init__(self, wallet: Any, journal: LeaseJournal, run: str, **kwargs: Any) -> None:
        super().__init__(wallet, **kwargs)
        self.journal, self.run = journal, run

    async def request(
        self,
        endpoint: str,
        hotkey: str,
        path: str,
        body: BaseModel,
        response_model: type[M],
        *,
        timeout: float | None = None,
        record: list[SignedExchange] | None = None,
    ) -> M:
        if isinstance(body, AllocateRequest):
            return await self._allocate(endpoint, hotkey, path, body, response_model, timeout)
        if isinstance(body, DeallocateRequest):
            return await self._release(endpoint, hotkey, path, body, response_model, timeout)
        return await super().request(
            endpoint, hotkey, path, body, response_model, timeout=timeout, record=record
        )

    async def _allocate(
        self,
        endpoint: str,
        hotkey: str,
        path: str,
        body: AllocateRequest,
        response_model: type[M],
        timeout: float | None,
    ) -> M:
        key = body.idempotency_key or secrets.token_urlsafe(18)
        term = body.duration_s + TERM_MARGIN_S
        await asyncio.to_thread(self.journal.asking, key, hotkey, endpoint, body.purpose, self.run, term)
        try:
            answer = await super().request(endpoint, hotkey, path, body, response_model, timeout=timeout)
        except Rejected as exc:
            if exc.code == ErrorCode.BUSY:  # still starting: the lease may exist
                await asyncio.shield(asyncio.to_thread(self.journal.unsure, key))
            else:
                await asyncio.shield(asyncio.to_thread(self.journal.forget, key))
            raise
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self.journal.unsure, key))
            raise
        if isinstance(answer, LeaseResponse):
            await asyncio.shield(asyncio.to_thread(self.journal.held, key, answer.lease.lease_id))
        return answer

    async def _release(
        self,
        endpoint: str,
        hotkey: str,
        path: str,
        body: DeallocateRequest,
        response_model: type[M],
        timeout: float | None,
    ) -> M:
        try:
            answer = await super().request(endpoint, hotkey, path, body, response_model, timeout=timeout)
        except Rejected as exc:
            if exc.code in GONE:
                await asyncio.shield(asyncio.to_thread(self.journal.released, body.lease_id))
            else:
                await asyncio.shield(asyncio.to_thread(self.journal.releasing, body.lease_id))
            raise
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self.journal.releasing, body.lease_id))
            raise
        await asyncio.shield(asyncio.to_thread(self.journal.released, body.lease_id))
        return answer


__all__ = ["GONE", "JournaledClient", "new_run_id"]
