"""Which failed verdicts are cheats proven by mathematics (pure: no I/O, no web3).

A round fails a miner for many reasons; only a few prove that the miner's worker returned a wrong
answer to a challenge it had committed to: an opened row whose Merkle path does not lead to the
committed root, sampled entries of a product off beyond the verifier's tolerance (exact
recomputation), a memory pass that does not match its committed leaf or the exact recomputation.
Those verdicts, and only those, are cheat evidence (``proven_cheat``): any validator that tests
the same machine and gets a wrong answer reproduces them on its own, whatever its distance, load or
clock. Everything else is not: a timeout or a slow proof (the clock), a miner that did not show up
or answered garbage (absence or a withheld answer: they already score 0), a rented machine, and a
failure of the validator itself (the round records no result at all, ``check_miner`` returns None).

The classification is an allowlist over the reasons the validator itself wrote
(``proofs.gemm``, ``proofs.depth``, ``compute.pog.verifier``, ``compute.pog.memory.verify``),
anchored at their start, so text a worker returns (inside a session error) cannot pose as one.
"""

from __future__ import annotations

import hashlib
import json
import re

from compute.store import PogResult

# the prefixes under which the round reports a rejected proof (proofs.gemm, proofs.depth)
_PREFIX = re.compile(
    r"^(?:fp16 proof rejected|fp32 proof rejected|memory proof rejected"
    r"|sustained segment \d+ rejected|GPU \d+ alone: proof rejected): "
)
# the verifier's reasons that prove a wrong answer (compute.pog.verifier, compute.pog.memory.verify)
_MATHS = re.compile(
    r"^gpu \d+: (?:Merkle path of row \d+ does not match the root"
    r"|\d+/\d+ sampled entries off by up to \S+ \(tolerance \S+\)"
    r"|pass \d+: vector does not match the committed leaf"
    r"|passes \[[\d, ]+\] wrong in \d+ sampled entries \(exact check\))$"
)


def proven_cheat(result: PogResult) -> tuple[str, ...]:
    """The reasons of ``result`` that prove a wrong answer by mathematics (empty: no cheat proven)."""
    if result.ok or result.rented:
        return ()
    proven = []
    for reason in result.reasons:
        prefix = _PREFIX.match(reason)
        if prefix is None:
            continue
        parts = reason[prefix.end() :].split("; ")
        if any(_MATHS.fullmatch(part) for part in parts):
            proven.append(reason)
    return tuple(proven)


def verdict_digest(result: PogResult) -> str:
    """sha256 of the validator's record of the failed test (round, miner, reasons, timings, time):
    the transcript digest a cheat evidence names. Deterministic, so re-assembling after a restart
    gives the same evidence (the same hash on chain)."""
    record = {
        "round_id": result.round_id,
        "uid": result.uid,
        "hotkey": result.hotkey,
        "block": result.block,
        "created": result.created,
        "reasons": list(result.reasons),
        "timings": {k: float(v) for k, v in sorted(result.timings.items())},
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


__all__ = ["proven_cheat", "verdict_digest"]
