"""Validator state store (SQLite, WAL): miners, PoG results, scores, rounds, weights log.

``verified_machines(path)`` reads the proved machines from another process, strictly read-only;
``overview(path)`` is the dashboard's read-only snapshot (miners, verdicts, history, round progress).
"""

from __future__ import annotations

from compute.store.history import MinerOverview, Overview, RoundProgress, overview
from compute.store.offers import Offer
from compute.store.presence import PresenceEntry, PresenceRecord
from compute.store.readonly import verified_machines
from compute.store.records import PogResult, RoundRecord, ScoreRecord, ScoreUpdate, WeightsRecord
from compute.store.store import (
    SCHEMA_VERSION,
    RoundAlreadyFinished,
    SchemaMismatch,
    StoreError,
    ValidatorStore,
)

__all__ = [
    "SCHEMA_VERSION",
    "MinerOverview",
    "Offer",
    "Overview",
    "PogResult",
    "PresenceEntry",
    "PresenceRecord",
    "RoundAlreadyFinished",
    "RoundProgress",
    "RoundRecord",
    "SchemaMismatch",
    "ScoreRecord",
    "ScoreUpdate",
    "StoreError",
    "ValidatorStore",
    "WeightsRecord",
    "overview",
    "verified_machines",
]
