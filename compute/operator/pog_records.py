"""Read-only view of a validator's Proof-of-GPU results: which GPUs each miner has *proved*.

Reads the validator store (``compute.store``) through ``compute.store.verified_machines``, which
opens the SQLite file strictly read-only (``mode=ro`` URI, so a running validator is never
blocked or modified) and checks its schema version, and returns, per hotkey, the GPU model and
count of its latest passing, non-rented PoG result. Accepts the database file or a directory
holding it (``--validator.data_dir``), where the first ``*.db`` that reads as a validator store
wins.

Deliberately not here: SQL, writing, scoring, or trusting anything a miner merely reported.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError
from compute.store import PogResult, SchemaMismatch, StoreError, verified_machines

logger = logging.getLogger(__name__)


def _read(db: Path) -> dict[str, PogResult]:
    try:
        return verified_machines(db)
    except SchemaMismatch as exc:
        raise UsageError(f"validator store schema does not match: {exc}") from exc
    except StoreError as exc:
        raise UsageError(f"cannot read PoG results from {db}: {exc}") from exc


def _read_dir(directory: Path) -> tuple[Path, dict[str, PogResult]]:
    for candidate in sorted(directory.glob("*.db")):
        try:
            return candidate, verified_machines(candidate)
        except SchemaMismatch as exc:
            raise UsageError(f"validator store schema does not match: {exc}") from exc
        except StoreError:
            continue  # another kind of database: keep looking
    raise UsageError(f"no validator database with PoG results found in {directory}")


def load_verified(path: str | Path) -> dict[str, VerifiedGpus]:
    """Latest verified GPUs per miner hotkey from the validator store at ``path`` (file or dir)."""
    target = Path(path).expanduser()
    if target.is_file():
        db, results = target, _read(target)
    elif target.is_dir():
        db, results = _read_dir(target)
    else:
        raise UsageError(f"PoG database {target} does not exist")
    verified: dict[str, VerifiedGpus] = {}
    for hotkey, result in results.items():
        if result.gpu_count <= 0 or not result.models:
            continue
        model = Counter(result.models).most_common(1)[0][0]
        verified[hotkey] = VerifiedGpus(
            hotkey,
            model,
            int(result.gpu_count),
            float(result.created),
            tflops_fp16=result.tflops_fp16,
            tflops_fp32=result.tflops_fp32,
            memory_gb=result.mem_proven_gb,
            bandwidth_gbs=result.mem_gbs,
        )
    logger.debug("loaded verified machines=%d from %s", len(verified), db)
    return verified
