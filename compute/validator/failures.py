"""How a per-miner round step says the miner failed (caught once, in ``round.check_miner``)."""

from __future__ import annotations


class MinerFailed(Exception):
    """One failed test with its reason: final for this round."""


class MinerUnreachable(MinerFailed):
    """The miner could not be reached before a lease existed (worth a retry)."""


class MinerRented(Exception):
    """The miner has no free GPU for a validation lease (its rentals are checked instead)."""
