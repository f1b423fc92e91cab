"""The round's rental-truth and one-device bookkeeping, kept out of the loop's scheduling code.

``Oversight`` is held by the round loop for the validator's lifetime. Per round it says which
miners get a canary rental (at random, ``canary_rate`` times the schedule's chance) and starts them
through its ``CanaryDesk`` (``canaries``), and which must be tested at the same moment (suspected
duplicates from the last round); after each miner's test it applies the availability and
rental-uptime factors; when the round's tests are done it correlates devices across hotkeys and
credits each shared device once (a GPU UUID that hotkeys tested in one window all show is judged
by the window's simultaneous memory proofs instead: it zeroes none of them).

What it deliberately does not do: talk to miners (``check_miner`` does) or persist anything.
"""

from __future__ import annotations

import logging
import random
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compute.chain import MetagraphSnapshot
from compute.store import Offer, PogResult
from compute.transport import MinerClient
from compute.validator.fleet.canaries import CanaryDesk
from compute.validator.fleet.dedup import (
    DeviceRegistry,
    Fingerprint,
    credit_once,
    refuted_uuids,
    suspect_groups,
)
from compute.validator.rentals.canary import CanaryRenter, CanaryTiming
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.truth import MinerNotes, apply_rental_factors

log = logging.getLogger(__name__)
MAX_TOGETHER = 16  # larger groups would bypass the round's concurrency bound


@dataclass(frozen=True)
class Plan:
    """One round's extra schedule: who gets a canary, who is tested together."""

    canary: frozenset[int]
    together: frozenset[int]
    groups: tuple[frozenset[int], ...] = ()  # each proven in one lockstep window


@dataclass
class Oversight:
    """``canary_renters``: renter identities besides the validator's own hotkey (operator hotkeys it
    rents through); ``canary_dir``: where the own hotkey's canary book and keys live (None: a
    temporary directory, for tests and benchmarks)."""

    canary_rate: float = 0.0
    trusted_renters: frozenset[str] = frozenset()
    rng: random.Random = field(default_factory=random.SystemRandom)
    ledger: RentalLedger = field(default_factory=RentalLedger)
    devices: DeviceRegistry = field(default_factory=DeviceRegistry)
    suspects: list[frozenset[int]] = field(default_factory=list)
    windowed: tuple[frozenset[int], ...] = ()  # this round's groups, each proven in one window
    canary_renters: tuple[CanaryRenter, ...] = ()
    canary_dir: Path | None = None
    canary_timing: CanaryTiming = field(default_factory=CanaryTiming)
    canary_dwell_s: float | None = None  # a fixed dwell (the demo, tests); None: drawn
    offers: Callable[[int, str, Offer], None] | None = None  # keeps what a canary's look heard (the feed)
    _desk: CanaryDesk | None = field(default=None, init=False, repr=False)

    def canaries(self, client: MinerClient) -> CanaryDesk:
        """The canary desk: the validator's own hotkey (``client``) plus ``canary_renters``."""
        if self._desk is None:
            where = self.canary_dir or self._temporary_dir()
            timeout = self.canary_timing.timeout_s
            own = CanaryRenter(client.hotkey, client, where / client.hotkey[:16], timeout, validator=True)
            self._desk = CanaryDesk(
                [own, *self.canary_renters],
                self.ledger,
                self.rng,
                self.canary_timing,
                self.canary_dwell_s,
                offers=self.offers,
            )
        return self._desk

    def _temporary_dir(self) -> Path:
        """A directory for the canary book that goes with this oversight (or at exit): tests and
        benchmarks left one in /tmp per validator they built."""
        where = Path(tempfile.mkdtemp(prefix="compute-canary-"))
        weakref.finalize(self, shutil.rmtree, where, True)
        return where

    def canary_seconds(self) -> float:
        """Expected GPU-held seconds of canaries per test drawn (counted in the load budget)."""
        return self.canary_rate * self.canary_timing.expected_hold_s

    def own_canaries(self, now: float) -> frozenset[str]:
        return self._desk.own_keys(now) if self._desk is not None else frozenset()

    def trusted(self, metagraph: MetagraphSnapshot) -> frozenset[str]:
        """Known renters this round: validator-permitted hotkeys plus the configured operators."""
        return self.trusted_renters | {n.hotkey for n in metagraph.neurons if n.validator_permit}

    @staticmethod
    def coldkeys(metagraph: MetagraphSnapshot) -> dict[str, str]:
        """Every registered hotkey's coldkey: a renter on the miner's own coldkey is no renter."""
        return {n.hotkey: n.coldkey for n in metagraph.neurons}

    def plan(self, uids: Iterable[int], chance: float = 1.0) -> Plan:
        """Canaries for ``canary_rate × chance`` of ``uids`` (tested or not); suspects together."""
        uids = list(uids)
        canary = frozenset(uid for uid in uids if self.rng.random() < self.canary_rate * chance)
        small = [group for group in self.suspects if len(group) <= MAX_TOGETHER]
        if len(small) < len(self.suspects):
            log.info(
                "suspect groups over %d uids (a NAT or data centre?) are not tested together", MAX_TOGETHER
            )
        together = frozenset().union(*small) & set(uids) if small else frozenset()
        groups = tuple(group & set(uids) for group in small)
        self.windowed = groups
        return Plan(canary, frozenset(together), groups)

    def after_check(self, result: PogResult, notes: MinerNotes | None) -> PogResult:
        return apply_rental_factors(result, notes, self.ledger)

    def close(
        self,
        results: Sequence[PogResult],
        notes: Mapping[int, MinerNotes],
        axons: Mapping[int, str],
    ) -> list[PogResult]:
        """Credit each shared device once; remember who to test together next round."""
        prints = [
            Fingerprint(
                uid=r.uid,
                hotkey=r.hotkey,
                axon_ip=axons.get(r.uid, "").rsplit(":", 1)[0],
                gpu_uuids=frozenset(notes[r.uid].gpu_uuids),
                host_keys=frozenset(notes[r.uid].host_keys),
                ssh_endpoints=frozenset(notes[r.uid].ssh_endpoints),
            )
            for r in results
            if r.uid in notes
        ]
        # the window decided a uid that held its own memory proof there, or that failed (0 either way)
        decided = {r.uid for r in results if not r.ok or r.sample <= 0 or (r.mem_proven_gb or 0.0) > 0.0}
        refuted = refuted_uuids(prints, self.windowed, decided)
        for uuid, uids in refuted.items():
            log.warning(
                "uids=%s all show GPU %s and were proven in one window (memory held or failed "
                "there, each on its own): the UUID counts against none",
                sorted(uids),
                uuid,
            )
        suspects = suspect_groups(prints)  # a refuted UUID still keeps its holders together
        if refuted:
            prints = [fp.without_uuids(refuted) for fp in prints]
        devices = self.devices.shared_devices(prints, {r.uid: r.sample for r in results})
        for device in devices:
            log.warning(
                "one device behind uids=%s (%s): credited once, to uid=%d",
                list(device.uids),
                "; ".join(device.evidence[:3]),
                device.keeper,
            )
        self.suspects = suspects
        return credit_once(results, devices)


__all__ = ["Oversight", "Plan"]
