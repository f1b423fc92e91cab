"""How collateral's time windows fit together (pure: opens nothing).

A slash can only happen while a proposal is open, and a reclaim can only be stopped by a proposal
opened before it matures. So:

- **A cheat outlives no proposal**: the proposal's expiry covers the cheat window (validators
  attest a cheat they proved themselves within ``cheat_window_s`` of first seeing it) plus the time
  from a proof to an attestation (``assembly_s``): ``proposal_ttl ≥ cheat_window + assembly``.
- **No lease outlives its miner's collateral**: a lease may die at the end of its term, its dead
  run must last ``dead_s`` and the evidence needs ``assembly_s`` to reach the chain, so a reclaim
  asked at the lease's start must mature after all that:
  ``reclaim_delay ≥ max_term + dead_s + assembly``. A lease rented while a reclaim is pending must
  end ``dead_s + assembly`` before it matures (:func:`covered_until`): the renter's tools refuse
  longer terms, and an honest miner refuses them.

Checked when the contract is deployed (``deploy_stack``) and when a validator starts (it refuses to
run on a contract whose windows do not fit its own settings).
"""

from __future__ import annotations

from dataclasses import dataclass

ASSEMBLY_S = 3600.0  # a fact seen -> proposal open: the dead run signed, peers synced, judged, attested
PROBE_SKEW_S = 60.0  # how far past a checker's clock a peer's probe or proof may be dated (clock skew)
DEFAULT_CHEAT_WINDOW_S = 86_400.0
DEFAULT_DEAD_S = 600.0
DEFAULT_MAX_TERM_S = 30 * 86_400.0  # the miner's default longest lease (--miner.max_lease_days 30)
DEFAULT_PROPOSAL_TTL_S = 2 * 86_400  # >= the default cheat window + assembly
DEFAULT_RECLAIM_DELAY_S = 31 * 86_400  # >= the default longest lease + dead_s + assembly
RENTER_MARGIN_S = DEFAULT_DEAD_S + ASSEMBLY_S  # what a renter keeps between its term and a reclaim


@dataclass(frozen=True)
class Windows:
    cheat_window_s: float = DEFAULT_CHEAT_WINDOW_S
    dead_s: float = DEFAULT_DEAD_S
    max_term_s: float = DEFAULT_MAX_TERM_S
    assembly_s: float = ASSEMBLY_S

    @property
    def margin_s(self) -> float:
        """From a lease's end to its failure's proposal on chain, at the latest."""
        return self.dead_s + self.assembly_s

    def problems(self, proposal_ttl_s: float, reclaim_delay_s: float) -> list[str]:
        """What does not fit (empty: the windows fit together)."""
        out = []
        if proposal_ttl_s < self.cheat_window_s + self.assembly_s:
            out.append(
                f"the proposal expiry ({proposal_ttl_s:.0f} s) is shorter than the cheat window "
                f"({self.cheat_window_s:.0f} s) + assembly ({self.assembly_s:.0f} s): a cheat proven "
                "by the quorum hours apart would never be slashed"
            )
        if reclaim_delay_s < self.max_term_s + self.margin_s:
            out.append(
                f"the reclaim delay ({reclaim_delay_s:.0f} s) is shorter than the longest lease term "
                f"({self.max_term_s:.0f} s) + dead_s ({self.dead_s:.0f} s) + assembly "
                f"({self.assembly_s:.0f} s): a miner could reclaim before a lease's failure is proposed"
            )
        return out


PRODUCTION = Windows()  # the defaults every validator starts with


def covered_until(now: float, reclaim_delay_s: float, pending_reclaim: int, reclaim_at: float) -> float:
    """The latest term end a lease rented at ``now`` may have and still be slashable for its
    failure: ``RENTER_MARGIN_S`` before a pending reclaim matures, and before a reclaim asked now
    would."""
    latest = now + reclaim_delay_s - RENTER_MARGIN_S
    if pending_reclaim > 0:
        latest = min(latest, reclaim_at - RENTER_MARGIN_S)
    return latest


__all__ = [
    "ASSEMBLY_S",
    "DEFAULT_PROPOSAL_TTL_S",
    "DEFAULT_RECLAIM_DELAY_S",
    "PROBE_SKEW_S",
    "PRODUCTION",
    "RENTER_MARGIN_S",
    "Windows",
    "covered_until",
]
