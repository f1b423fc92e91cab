"""The validator's memory of rentals and canaries per miner hotkey: two factors in [0, 1].

- ``availability``: canary rentals that worked, (ok + 1) / (tried + 1) over the last ``window``;
  1.0 before any canary, so it can only lower a score.
- ``uptime``: of the verified rentals the validator has observed, the share never seen dead while
  in their signed term (a lease that stayed reachable for its whole term); 1.0 with none.
- ``held_gpus``: the GPUs of the verified rentals last seen alive whose signed term has not ended:
  what excuses a canary's "no capacity" without asking the miner anything at that moment (a
  receipts call right after a refusal would tell the miner which validator the refused renter is).

Plain in-memory state (it restarts with the validator; a restart only forgets penalties, it never
invents credit). No I/O, no scoring: the round multiplies by these factors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from compute.validator.rentals.canary import CanaryOutcome
from compute.validator.rentals.receipts import RentalCheck, VerifiedLease


@dataclass
class RentalLedger:
    window: int = 20
    _canaries: dict[str, deque[bool]] = field(default_factory=dict)
    _leases: dict[str, dict[str, bool]] = field(default_factory=dict)
    _held: dict[str, dict[str, VerifiedLease]] = field(default_factory=dict)

    def canary(self, hotkey: str, outcome: CanaryOutcome) -> None:
        self._canaries.setdefault(hotkey, deque(maxlen=self.window)).append(outcome.ok)

    def observe(self, hotkey: str, check: RentalCheck) -> None:
        leases = self._leases.setdefault(hotkey, {})
        for lease in check.alive:
            leases.setdefault(lease.signature, True)
        for lease in check.dead:
            leases[lease.signature] = False
        while len(leases) > self.window:
            leases.pop(next(iter(leases)))
        held = self._held.setdefault(hotkey, {})
        held.update((lease.signature, lease) for lease in check.alive)
        for lease in check.dead:
            held.pop(lease.signature, None)
        while len(held) > self.window:
            held.pop(next(iter(held)))

    def held_gpus(self, hotkey: str, now: float) -> int:
        """GPUs of verified rentals last seen alive and still in their signed term."""
        return sum(lease.gpu_count for lease in self._held.get(hotkey, {}).values() if lease.ends_at > now)

    def availability(self, hotkey: str) -> float:
        tried = self._canaries.get(hotkey)
        if not tried:
            return 1.0
        return (sum(tried) + 1) / (len(tried) + 1)

    def uptime(self, hotkey: str) -> float:
        leases = self._leases.get(hotkey)
        if not leases:
            return 1.0
        return sum(leases.values()) / len(leases)

    def canaries_tried(self) -> int:
        """Canary outcomes remembered, over all hotkeys (for reports and benchmarks)."""
        return sum(len(tried) for tried in self._canaries.values())

    def forget(self, hotkey: str) -> None:
        """A deregistered hotkey: a new owner of the uid starts clean."""
        self._canaries.pop(hotkey, None)
        self._leases.pop(hotkey, None)
        self._held.pop(hotkey, None)


__all__ = ["RentalLedger"]
