"""A miner's asking price is informational: the canary desk keeps what the miner answered for the
public feed, and the miner's score is identical with a price, a higher one, or none."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from compute.protocol import Price
from compute.store import Offer, PogResult
from compute.validator import CanaryRenter
from compute.validator.fleet import canaries
from compute.validator.fleet.canaries import CanaryDesk
from compute.validator.params import MinerTarget
from compute.validator.rentals.canary import CanaryOutcome
from compute.validator.rentals.ledger import RentalLedger
from compute.validator.rentals.truth import MinerNotes, apply_rental_factors

REPO = Path(__file__).resolve().parents[2]
TARGET = MinerTarget(7, "hk-miner", "127.0.0.1:1")


def scored_after_canaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, price: Price | None
) -> tuple[PogResult, list[Offer]]:
    """Three canaries (ok, failed, ok) whose looks heard ``price``; then a test result scored."""
    kept: list[Offer] = []
    renter = CanaryRenter("me", None, tmp_path / "me", validator=True)  # type: ignore[arg-type]
    desk = CanaryDesk(
        [renter], RentalLedger(), random.Random(1), offers=lambda uid, hotkey, offer: kept.append(offer)
    )
    outcomes = iter([True, False, True])

    async def fake_canary(*args, **kwargs) -> CanaryOutcome:
        offer = Offer(
            1.0, price.model_dump_json() if price is not None else None, free_gpus=2, active_leases=0
        )
        ok = next(outcomes)
        return CanaryOutcome(ok, "" if ok else "canary: ssh refused", offer=offer)

    monkeypatch.setattr(canaries, "run_canary", fake_canary)
    notes = MinerNotes(claimed_gpus=2)
    for _ in range(3):
        asyncio.run(desk.one(TARGET, notes, renter))
    result = PogResult(1, TARGET.uid, TARGET.hotkey, ok=True, sample=2.0, gpu_count=2)
    return apply_rental_factors(result, notes, desk.ledger), kept


def test_the_score_is_identical_with_and_without_a_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    none, kept_none = scored_after_canaries(tmp_path / "a", monkeypatch, None)
    cheap, kept_cheap = scored_after_canaries(tmp_path / "b", monkeypatch, Price(gpu_hour={"H100": 0.5}))
    dear, _ = scored_after_canaries(tmp_path / "c", monkeypatch, Price(base_hour=9, gpu_hour={"H100": 900.0}))
    assert none == cheap == dear
    assert none.sample == pytest.approx(2.0 * 3 / 4)  # the failed canary counts, the price does not
    assert [o.price_json for o in kept_none] == [None] * 3  # the desk kept each look for the feed
    assert all(o.price_json and '"H100":0.5' in o.price_json for o in kept_cheap)


SCAN = """
import ast, json, sys
from pathlib import Path
repo, readers = Path(sys.argv[1]), []
for path in [*(repo / "compute" / "scoring").rglob("*.py"), *(repo / "compute" / "validator").rglob("*.py")]:
    tree = ast.parse(path.read_text())
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    if names & {"price", "price_json", "gpu_hour", "base_hour", "read_offers", "price_per_hour"}:
        readers.append(str(path.relative_to(repo)))
print(json.dumps(sorted(readers)))
"""


def test_nothing_that_scores_reads_the_offers_or_the_price() -> None:
    """Scoring and the validator's judging code never import the offers table or read a price; the
    one reader is the canary's look, which copies the answer into the ``Offer`` the feed shows.

    The scan runs in a fresh interpreter: CPython 3.11.7's ``ast.parse`` can raise "AST constructor
    recursion depth mismatch" after an earlier test in the same process hit a RecursionError."""
    done = subprocess.run(
        [sys.executable, "-c", SCAN, str(REPO)], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == ["compute/validator/rentals/canary.py"]
