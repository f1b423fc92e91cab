"""The validator's memory of rentals and canaries per miner hotkey: two factors in [0, 1].

- ``availability``: canary rentals that worked, (ok + 1) / (tried + 1) over the last ``window``;
  1.0 before any canary, so it can only lower a score.
- ``uptime``: of the verified rentals the validator has observed, the share never seen dead while
  in their signed term (a lease that stayed reachable for its whole term); 1.0 with none.

Plain in-memory state (it restarts with the validator; a restart only forgets penalties, it never
invents credit). No I/O, no scoring: the round multiplies by these factors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from compute.validator.rentals.canary import CanaryOutcome
from compute.validator.rentals.receipts import RentalCheck


@dataclass
class RentalLedger:
    window: int = 20
    _canaries: dict[str, deque[bool]] = field(default_factory=dict)
    _leases: dict[str, dict[str, bool]] = field(default_factory=dict)

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


__all__ = ["RentalLedger"]
