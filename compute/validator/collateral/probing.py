"""The validator's own probes of reported leases: dead for long enough inside the term, signed.

Each reported lease in its signed term is probed every ``probe_s`` seconds on this validator's
clock (the SSH endpoint the *miner* signed, answering with the host key it pinned; no login). A
run of failed tries that lasts ``dead_s`` becomes a signed :class:`LeaseProbe` (``since``: the
first failed try, ``at``: the latest), extended while the run goes on. A live answer ends the run;
a probe already signed stays true for its interval. ``dead_s`` is the miner's recovery time: a
restarted container, a renter's own ``restart`` or a network blip never makes a failure.

What it deliberately does not do: decide a slash (``judging``) or fetch anything (``peers``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bittensor.sp_core import Keypair

from compute.collateral.evidence import LeaseProbe, sign_probe
from compute.validator.collateral.book import CollateralBook, Watched
from compute.validator.session.sshprobe import host_key_answers

log = logging.getLogger(__name__)
PROBE_CONCURRENCY = 8

Probe = Callable[[str, int, str, float], Awaitable[str | None]]  # host, port, host key, timeout -> why dead


@dataclass
class Run:
    since: float
    at: float


@dataclass
class Prober:
    keypair: Keypair
    book: CollateralBook
    probe_s: float
    dead_s: float
    probe: Probe = host_key_answers
    runs: dict[str, Run] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)

    async def probe_due(self, watched: list[Watched], now: float) -> list[LeaseProbe]:
        """Probe every lease in its term whose last try is ``probe_s`` old; the probes signed now."""
        due = [
            w
            for w in watched
            if w.lease.signed_at <= now <= w.lease.term_end
            and now - self.last.get(w.lease.lease_id, float("-inf")) >= self.probe_s
        ]
        gate = asyncio.Semaphore(PROBE_CONCURRENCY)

        async def one(w: Watched) -> LeaseProbe | None:
            async with gate:
                timeout = max(2.0, min(10.0, self.probe_s))
                why = await self.probe(w.lease.host, w.lease.port, w.lease.host_key, timeout)
            return self._record(w, now, why)

        signed = await asyncio.gather(*(one(w) for w in due))
        return [p for p in signed if p is not None]

    def _record(self, w: Watched, now: float, why: str | None) -> LeaseProbe | None:
        lease_id = w.lease.lease_id
        self.last[lease_id] = now
        if why is None:
            if self.runs.pop(lease_id, None) is not None:
                log.info("collateral lease=%s answers again", lease_id)
            return None
        run = self.runs.setdefault(lease_id, Run(now, now))
        run.at = now
        if run.at - run.since < self.dead_s:
            log.info("collateral lease=%s dead for %.0fs: %s", lease_id, run.at - run.since, why)
            return None
        probe = sign_probe(self.keypair, lease_id, run.since, run.at, w.lease.endpoint, why[:200])
        self.book.set_probe(probe)
        log.info(
            "collateral lease=%s miner=%s dead %.0fs inside its term: probe signed",
            lease_id,
            w.lease.miner_hotkey[:10],
            run.at - run.since,
        )
        return probe


__all__ = ["Prober", "Run"]
