"""Credit = proven capacity x presence over a window (docs/presence.md).

A proof shows hardware at one moment; rewards are paid for hours. A validator's presence checks
find, at unpredictable moments, which miners hold their proven GPUs exclusively (all miners at
once: one device can be present behind one hotkey only). A miner's *presence share* is the mean of
its verdicts over the validator's last ``window`` checks, where a check in which it has no verdict
(not registered yet, not reached, nothing proven) counts as absent: a new hotkey ramps up over the
window instead of earning full credit from its first proof, a miner absent at a check loses that
check at once, and a miner that stops being checked stops being credited. Its *credit* is its
capacity score (the moving average of its throughput proofs) times its share. Before a validator
has run any check, no share exists (``None``): weights wait for the first check.

Pure: plain mappings in, plain mappings out; no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DEFAULT_WINDOW = 16  # presence checks a share is taken over (the ramp of a new hotkey)


def presence_shares(
    checks: Sequence[Mapping[str, float]], window: int = DEFAULT_WINDOW
) -> dict[str, float] | None:
    """hotkey -> mean verdict over the last ``window`` of ``checks`` (oldest first; missing = 0).

    None when there is no check yet. Verdicts are clipped to [0, 1]."""
    recent = list(checks)[-max(1, window) :]
    if not recent:
        return None
    hotkeys = set().union(*(check.keys() for check in recent))
    return {
        hotkey: sum(min(1.0, max(0.0, check.get(hotkey, 0.0))) for check in recent) / len(recent)
        for hotkey in hotkeys
    }


def presence_credit(score: float, hotkey: str, shares: Mapping[str, float] | None) -> float:
    """A miner's credit: its capacity score times its presence share (0 without a verdict)."""
    if shares is None:
        return 0.0
    return max(0.0, score) * shares.get(hotkey, 0.0)


__all__ = ["DEFAULT_WINDOW", "presence_credit", "presence_shares"]
