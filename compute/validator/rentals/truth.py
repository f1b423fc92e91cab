"""What a miner's test saw beyond its PoG result, and the factors it turns into.

``MinerNotes`` is filled by ``check_miner`` (verified rentals, the identifiers of the machine it
reached) and by the round's canary (``fleet.canaries``) and read by the round loop, which feeds the ledger, correlates devices across
hotkeys (``dedup``) and applies :func:`apply_rental_factors`. Everything the miner controls here
can only lower a sample: the factors are in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from compute.store import PogResult
from compute.validator.rentals.canary import CanaryOutcome
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.receipts import RentalCheck


@dataclass
class MinerNotes:
    """Side observations of one miner's test (mutable: ``check_miner`` fills it as it goes)."""

    claimed_gpus: int = 0
    gpu_uuids: set[str] = field(default_factory=set)
    host_keys: set[str] = field(default_factory=set)
    ssh_endpoints: set[str] = field(default_factory=set)  # "host:port" of leases reached
    rentals: RentalCheck | None = None
    canary: CanaryOutcome | None = None

    def saw_lease(self, host: str, port: int, host_key: str) -> None:
        self.ssh_endpoints.add(f"{host}:{port}")
        self.host_keys.add(" ".join(host_key.split()[:2]))


def apply_rental_factors(result: PogResult, notes: MinerNotes | None, ledger: RentalLedger) -> PogResult:
    """Record the verified rentals in the ledger; multiply the sample by availability x rental uptime.

    Canaries are in the ledger already (``fleet.canaries`` records each one not excused when it
    ends); ``notes.canary`` only adds the reason of this round's failed one.
    """
    if notes is not None and notes.rentals is not None:
        ledger.observe(result.hotkey, notes.rentals)
    availability, uptime = ledger.availability(result.hotkey), ledger.uptime(result.hotkey)
    reasons = result.reasons
    if availability < 1.0:
        reasons += (f"availability x{availability:.2f} (canary rentals)",)
    if uptime < 1.0:
        reasons += (f"rental uptime x{uptime:.2f}",)
    if notes is not None and notes.canary is not None and not notes.canary.ok and not notes.canary.excused:
        reasons += (notes.canary.reason,)
    return replace(
        result,
        sample=result.sample * availability * uptime,
        availability=availability,
        rental_uptime=uptime,
        reasons=reasons,
    )


__all__ = ["MinerNotes", "apply_rental_factors"]
