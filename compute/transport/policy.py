"""Who may call a miner: chain-backed access policy applied to an *authenticated* hotkey.

What it does: keeps the last good metagraph snapshot (refreshed every ``refresh_s`` in a worker
thread, never on the event loop), and answers ``check(hotkey)`` from memory: deny lists win,
then allow lists restrict, then registration on the subnet, validator permit and minimum stake.
``priority(hotkey)`` is the caller's stake, used to order admission when the server is saturated.

What it deliberately does not do: authenticate anyone (``bittensor.http_auth.verify`` runs first,
and this class must only ever see verified hotkeys), or talk to the chain itself: the snapshot
comes from a provider callable (``compute.chain.Chain.metagraph`` in production). Snapshots are
duck-typed: anything with ``.neurons`` whose items have ``.hotkey .coldkey .stake
.validator_permit`` works, so tests and the simulated chain use the same code path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compute.chain import MetagraphSnapshot

logger = logging.getLogger(__name__)


class Forbidden(Exception):
    """The authenticated caller is not allowed to use this miner; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PolicyUnavailable(Exception):
    """No metagraph snapshot has been loaded yet, so nobody can be admitted."""


@dataclass(frozen=True)
class _Entry:
    coldkey: str
    stake: float
    validator_permit: bool


@dataclass(frozen=True)
class _View:
    netuid: int | None
    block: int | None
    loaded_at: float
    by_hotkey: dict[str, _Entry]


def _index(snapshot: Any, loaded_at: float) -> _View:
    entries = {
        n.hotkey: _Entry(coldkey=n.coldkey, stake=float(n.stake), validator_permit=bool(n.validator_permit))
        for n in snapshot.neurons
    }
    return _View(getattr(snapshot, "netuid", None), getattr(snapshot, "block", None), loaded_at, entries)


class AccessPolicy:
    """Allow/deny lists plus registration, permit and stake gates over a cached metagraph."""

    def __init__(
        self,
        metagraph: Callable[[], MetagraphSnapshot],
        min_stake: float = 0.0,
        require_permit: bool = True,
        allow_hotkeys: Iterable[str] = (),
        deny_hotkeys: Iterable[str] = (),
        allow_coldkeys: Iterable[str] = (),
        deny_coldkeys: Iterable[str] = (),
        refresh_s: float = 300.0,
        refresh_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._provider = metagraph
        self.min_stake = float(min_stake)
        self.require_permit = require_permit
        self.allow_hotkeys = frozenset(allow_hotkeys)
        self.deny_hotkeys = frozenset(deny_hotkeys)
        self.allow_coldkeys = frozenset(allow_coldkeys)
        self.deny_coldkeys = frozenset(deny_coldkeys)
        self.refresh_s = refresh_s
        self.refresh_timeout_s = refresh_timeout_s
        self._clock = clock
        self._view: _View | None = None
        self.failures = 0

    # ------------------------------------------------------------------ snapshot
    @property
    def loaded(self) -> bool:
        return self._view is not None

    @property
    def age_s(self) -> float | None:
        return None if self._view is None else self._clock() - self._view.loaded_at

    def load(self) -> None:
        """Blocking load of a fresh snapshot (call from a thread, or before the server starts)."""
        self._view = _index(self._provider(), self._clock())
        self.failures = 0
        logger.info(
            "metagraph loaded netuid=%s block=%s neurons=%d",
            self._view.netuid,
            self._view.block,
            len(self._view.by_hotkey),
        )

    async def refresh(self) -> bool:
        """Reload in a worker thread; on failure keep the last good snapshot. Returns success."""
        try:
            snapshot = await asyncio.wait_for(asyncio.to_thread(self._provider), self.refresh_timeout_s)
            view = await asyncio.to_thread(_index, snapshot, self._clock())
        except Exception:
            self.failures += 1
            logger.exception("metagraph refresh failed (failures=%d); keeping last snapshot", self.failures)
            return False
        self._view = view
        self.failures = 0
        logger.debug("metagraph refreshed block=%s neurons=%d", view.block, len(view.by_hotkey))
        return True

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Refresh every ``refresh_s`` until cancelled or ``stop`` is set (the server runs this)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            if self._view is None or (self.age_s or 0.0) >= self.refresh_s:
                await self.refresh()
            wait = self.refresh_s if self._view is not None else min(self.refresh_s, 5.0)
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------ decisions
    def check(self, hotkey: str) -> None:
        """Raise :class:`Forbidden` (or :class:`PolicyUnavailable`) unless ``hotkey`` may call."""
        if hotkey in self.deny_hotkeys:
            raise Forbidden(f"hotkey {hotkey} is denied by this miner")
        if self.allow_hotkeys and hotkey not in self.allow_hotkeys:
            raise Forbidden(f"hotkey {hotkey} is not on this miner's allow list")
        view = self._view
        if view is None:
            raise PolicyUnavailable("metagraph not loaded yet; retry shortly")
        entry = view.by_hotkey.get(hotkey)
        if entry is None:
            raise Forbidden(f"hotkey {hotkey} is not registered on subnet {view.netuid}")
        if entry.coldkey in self.deny_coldkeys:
            raise Forbidden(f"coldkey {entry.coldkey} of hotkey {hotkey} is denied by this miner")
        if self.allow_coldkeys and entry.coldkey not in self.allow_coldkeys:
            raise Forbidden(f"coldkey {entry.coldkey} of hotkey {hotkey} is not on this miner's allow list")
        if self.require_permit and not entry.validator_permit:
            raise Forbidden(f"hotkey {hotkey} has no validator permit")
        if entry.stake < self.min_stake:
            raise Forbidden(f"stake {entry.stake:.4f} TAO is below the threshold {self.min_stake:g} TAO")

    def priority(self, hotkey: str) -> float:
        """The caller's stake in TAO (0.0 when unknown): higher is admitted first when saturated."""
        view = self._view
        entry = view.by_hotkey.get(hotkey) if view is not None else None
        return entry.stake if entry is not None else 0.0
