"""One pass over the leases the validator still owes back (``release_due``).

A row with a lease id is released by id (``JournaledClient`` ends the row on the miner's
confirmation, or on its "no such lease"). A row without one (an allocate whose answer was lost, or
one asked by a run that was killed before the answer) names a miner that may hold a lease nobody
knows the id of: the validator lists its own leases there and releases those of that purpose that
no running test holds. A miner with an allocate of this run in flight is skipped this pass (its
new lease could be in the listing), checked again after the listing as well. A miner that does not
answer keeps its rows for the next pass; a row whose term is over is forgotten (the miner's own
clock ended that lease). Never raises for a miner.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass

from compute.protocol import DeallocateRequest, ListLeasesRequest
from compute.store.journal import JournalEntry
from compute.transport import Rejected, TransportError
from compute.validator.journal.client import GONE, JournaledClient

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 15.0
MINERS_AT_ONCE = 8


@dataclass
class ReleasePass:
    released: int = 0  # leases the miners confirmed ended
    owed: int = 0  # rows still due (miner unreachable or busy): tried again next pass
    dropped: int = 0  # rows whose term was over


async def release_due(client: JournaledClient) -> ReleasePass:
    """Release what the journal says is owed; returns what happened."""
    journal = client.journal
    report = ReleasePass(dropped=await asyncio.to_thread(journal.drop_ended))
    due = await asyncio.to_thread(journal.due, client.run)
    by_miner: dict[tuple[str, str], list[JournalEntry]] = defaultdict(list)
    for entry in due:
        by_miner[(entry.hotkey, entry.endpoint)].append(entry)
    gate = asyncio.Semaphore(MINERS_AT_ONCE)

    async def one(hotkey: str, endpoint: str, entries: list[JournalEntry]) -> None:
        async with gate:
            try:
                report.released += await _release_miner(client, hotkey, endpoint, entries)
            except (TransportError, asyncio.TimeoutError) as exc:
                log.info("hotkey=%s %d lease(s) still to release: %s", hotkey[:10], len(entries), exc)
                for entry in entries:
                    await asyncio.to_thread(journal.tried, entry.key)
            except Exception:  # noqa: BLE001 - one miner never stops the pass
                log.exception("hotkey=%s releasing journaled leases failed", hotkey[:10])

    await asyncio.gather(*(one(h, e, rows) for (h, e), rows in by_miner.items()))
    report.owed = len(await asyncio.to_thread(journal.due, client.run))
    if report.released or report.owed:
        log.info("lease journal: %d released, %d still owed", report.released, report.owed)
    return report


async def _release_miner(
    client: JournaledClient, hotkey: str, endpoint: str, entries: list[JournalEntry]
) -> int:
    released = 0
    for entry in entries:
        if entry.lease_id is not None:
            await _deallocate(client, endpoint, hotkey, entry.lease_id)
            released += 1
    unknown = [e for e in entries if e.lease_id is None]
    if not unknown or await _allocating(client, hotkey):
        return released
    listed = await client.call(endpoint, hotkey, ListLeasesRequest(), timeout=CALL_TIMEOUT_S)
    if await _allocating(client, hotkey):  # an allocate began meanwhile: its lease may be listed
        return released
    busy = await asyncio.to_thread(_held_by_this_run, client)
    purposes = {e.purpose for e in unknown}
    for lease in listed.leases:
        if lease.state == "active" and lease.purpose in purposes and lease.lease_id not in busy:
            log.info(
                "hotkey=%s releasing lease=%s whose allocate answer was lost", hotkey[:10], lease.lease_id
            )
            await _deallocate(client, endpoint, hotkey, lease.lease_id)
            released += 1
    for entry in unknown:
        await asyncio.to_thread(client.journal.forget, entry.key)
    return released


async def _deallocate(client: JournaledClient, endpoint: str, hotkey: str, lease_id: str) -> None:
    try:
        await client.call(endpoint, hotkey, DeallocateRequest(lease_id=lease_id), timeout=CALL_TIMEOUT_S)
    except Rejected as exc:
        if exc.code not in GONE:
            raise


async def _allocating(client: JournaledClient, hotkey: str) -> bool:
    entries = await asyncio.to_thread(client.journal.entries)
    return any(e.hotkey == hotkey and e.run == client.run and e.state == "asking" for e in entries)


def _held_by_this_run(client: JournaledClient) -> set[str]:
    return {
        e.lease_id
        for e in client.journal.entries()
        if e.run == client.run and e.state in ("held", "asking") and e.lease_id is not None
    }


__all__ = ["ReleasePass", "release_due"]
