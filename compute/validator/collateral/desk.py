"""The collateral desk: one loop that keeps renters' reports probed, evidence made and attested.

Each step (every block, work paced by seconds on this validator's clock): every ``sync_s``, take
the leases other validators watch and the evidence they serve (``peers``); probe the reported
leases that are due (``probing``); assemble evidence for leases enough validators saw dead and
for cheats this validator's own round proved (``reproduce``), and attest every evidence that holds
(``judging``). The evidence surface (``surface``) serves the same
book to renters and peers from its own thread.

The desk's work runs on its own event loop in its own thread (``start``), so its SSH probes,
signature checks and fetches never share a loop with the validator's timed proofs; the round
loop's runner only awaits each step's result.

What it deliberately does not do: score (``credit`` gives the weights their factor) or hold keys
beyond the two it is handed (the hotkey signs probes and evidence, the EVM key attestations).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from compute.chain import Chain, MetagraphSnapshot
from compute.collateral import EvidenceError
from compute.validator.collateral.book import BookFull, CollateralBook
from compute.validator.collateral.judging import Judge
from compute.validator.collateral.peers import Peers
from compute.validator.collateral.probing import Prober
from compute.validator.round.loop import BlockLoop

log = logging.getLogger(__name__)
METAGRAPH_TTL_S = 60.0


class CollateralDesk(BlockLoop):
    name = "collateral"
    interval_blocks = 1
    step_timeout = 300.0

    def __init__(
        self,
        chain: Chain,
        book: CollateralBook,
        peers: Peers,
        prober: Prober,
        judge: Judge,
        sync_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.chain, self.book, self.peers, self.prober, self.judge = chain, book, peers, prober, judge
        self.sync_s, self.clock = sync_s, clock
        self._metagraph: MetagraphSnapshot | None = None
        self._metagraph_at = float("-inf")
        self._synced_at = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.on_close: Callable[[], Coroutine[Any, Any, None]] | None = (
            None  # run on the desk's loop at close
        )

    def start(self) -> CollateralDesk:
        """Run the desk's steps on a loop of its own, in a daemon thread named ``collateral``."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="collateral", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self.on_close is not None:
            try:
                asyncio.run_coroutine_threadsafe(self.on_close(), loop).result(timeout_s)
            except Exception:  # noqa: BLE001 - shutting down: log, never raise
                log.warning("collateral desk did not close its clients cleanly")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    async def metagraph(self) -> MetagraphSnapshot:
        if self._metagraph is None or time.monotonic() - self._metagraph_at > METAGRAPH_TTL_S:
            self._metagraph = await asyncio.wait_for(asyncio.to_thread(self.chain.metagraph), 60)
            self._metagraph_at = time.monotonic()
        return self._metagraph

    async def run_step(self, block: int) -> None:
        if self._loop is None:
            await self.step(block)
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.step(block), self._loop))

    async def step(self, block: int) -> None:
        now = self.clock()
        metagraph = await self.metagraph()
        if now - self._synced_at >= self.sync_s:
            await self.sync(now)
            self._synced_at = now
        watched = self.book.reports()
        await self.prober.probe_due(watched, now)
        await self.judge.assemble(watched, metagraph, now)
        if self.judge.cheats is not None:
            self.judge.cheats.assemble(metagraph, now)
        await self.judge.attest_all(metagraph)
        self.book.prune(now)

    async def sync(self, now: float) -> None:
        """Take the leases peers watch and the evidence they serve (each re-checked here)."""
        if not self.peers.urls:
            return
        for report in await self.peers.watched():
            try:
                self.book.add_report(report, now)
            except (EvidenceError, BookFull) as error:
                log.debug("collateral peer report refused: %s", error)
        for signed in await self.peers.evidence():
            self.book.add_evidence(signed)


__all__ = ["CollateralDesk"]
