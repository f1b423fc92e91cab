"""``ReleaseLoop``: the lease journal's release pass, every ``interval_blocks`` blocks.

Runs at start (leases a killed run of this validator left behind are released first) and then
about every ``RELEASE_EVERY_S`` seconds, so a miner that was killed mid-test gets its validation
lease back soon after it returns. The pass itself is ``compute.validator.journal.release_due``.
"""

from __future__ import annotations

from compute.validator.journal import JournaledClient, release_due
from compute.validator.round.loop import BlockLoop

RELEASE_EVERY_S = 30.0


class ReleaseLoop(BlockLoop):
    name = "lease_release"

    def __init__(self, client: JournaledClient, block_seconds: float, step_timeout: float = 120.0) -> None:
        self.client = client
        self.interval_blocks = max(1, round(RELEASE_EVERY_S / max(block_seconds, 1e-3)))
        self.step_timeout = step_timeout

    async def run_step(self, block: int) -> None:
        await release_due(self.client)


__all__ = ["RELEASE_EVERY_S", "ReleaseLoop"]
