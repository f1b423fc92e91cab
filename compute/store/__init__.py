"""Validator state store (SQLite, WAL): miners, PoG results, scores, rounds, weights log."""

from __future__ import annotations

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
    "PogResult",
    "RoundAlreadyFinished",
    "RoundRecord",
    "SchemaMismatch",
    "ScoreRecord",
    "ScoreUpdate",
    "StoreError",
    "ValidatorStore",
    "WeightsRecord",
]
